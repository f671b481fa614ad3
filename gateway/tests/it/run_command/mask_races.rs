//! Masks under churn (red team 42): another account that swaps its own credential directory in
//! and out (mkdir + rename, as fast as it can) between the helper's open and its mount made the
//! owner's command fail ("masking …: No such file or directory"). The real helper, driven
//! directly with that directory among its masks, runs every command while four threads churn it.

use std::io::{Read, Write};
use std::os::unix::fs::chown;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

#[test]
fn another_accounts_churning_directory_fails_no_command() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test makes another account's directory: it needs root"
    );
    const OTHER: u32 = 4748;
    let victim = fx.wd.parent().unwrap().join("victim");
    std::fs::create_dir_all(victim.join(".kube")).unwrap();
    for dir in [&victim, &victim.join(".kube")] {
        chown(dir, Some(OTHER), Some(OTHER)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churners: Vec<_> = (0..4)
        .map(|n| {
            let (victim, stop) = (victim.clone(), stop.clone());
            std::thread::spawn(move || {
                let fresh = victim.join(format!(".kube-new-{n}"));
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if std::fs::create_dir(&fresh).is_ok() {
                        let _ = chown(&fresh, Some(OTHER), Some(OTHER));
                        if std::fs::rename(&fresh, victim.join(".kube")).is_ok() {
                            swaps += 1;
                        } else {
                            let _ = std::fs::remove_dir(&fresh);
                        }
                    }
                }
                swaps
            })
        })
        .collect();
    let scratch = fx.state.join("scratch-races");
    std::fs::create_dir_all(&scratch).unwrap();
    let spec = sandbox::ExecSpec {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), "echo RAN".into()],
        cwd: fx.wd.clone(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        scratch,
        masked: vec![fx.home.join(".ssh"), victim.join(".kube")],
        visible: Vec::new(),
        writable: Vec::new(),
        limits: sandbox::Limits {
            root_pids_cgroup: false,
            ..sandbox::Limits::default()
        },
        layer: None,
        namespaces: true,
        status_fd: None,
        ahead: false,
        masked_as_prepared: false,
    };
    let mut failures = Vec::new();
    for _ in 0..40 {
        let mut child = std::process::Command::new(GATEWAY)
            .arg("sandbox-exec")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = serde_json::to_vec(&spec).unwrap();
        line.push(b'\n');
        child.stdin.take().unwrap().write_all(&line).unwrap();
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let code = child.wait().unwrap().code();
        if code != Some(0) || !stdout.ends_with("RAN\n") {
            failures.push(stdout);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps: u64 = churners.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(
        swaps > 100,
        "the directory was hardly churned ({swaps} swaps)"
    );
    assert!(
        failures.is_empty(),
        "{} of 40 failed: {failures:?}",
        failures.len()
    );
}
