//! Masks and covers under the host's churn, the real helper driven directly. Red team 42:
//! another account that swaps its own credential directory in and out (mkdir + rename, as fast
//! as it can) between the helper's open and its mount made the owner's command fail ("masking
//! …: No such file or directory"); every command runs while four threads churn it. Red team
//! 43a's observation: a bind of a process's `/proc` entry that outlived the process made every
//! command of the host refuse; it leads nowhere, and a live one is still covered.

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
    let spec = echo_spec(&fx, vec![fx.home.join(".ssh"), victim.join(".kube")]);
    let mut failures = Vec::new();
    for _ in 0..40 {
        let (code, stdout) = run_helper(None, &spec);
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

/// Red teams 47a and 48: a FUSE mount whose daemon hangs (sshfs with its server gone, a stopped
/// bindfs) blocked every command for good: the helper's first look at the masked mount point (a
/// `stat`) never returned. The broker names the mounts it found hung; the helper covers each
/// through its parent, asking its file system nothing, and the command runs and sees it empty.
/// A FUSE mount no daemon answers stands in for the hung one (this test is its daemon and never
/// reads); the helper runs in this thread's mount namespace, where it is mounted.
#[test]
fn a_hung_fuse_mount_among_the_masks_stops_no_command() {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test mounts a FUSE file system: it needs root"
    );
    let remote = fx.home.join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    std::fs::write(remote.join("under"), "hidden by the mount").unwrap();
    let mut spec = echo_spec(&fx, vec![fx.home.join(".ssh"), remote.clone()]);
    spec.argv[2] = format!("ls -A {} && echo RAN", remote.display());
    spec.hung = vec![remote.clone()];
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let fuse = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .expect("this test needs /dev/fuse");
        // SAFETY: plain syscalls, this thread only: a private mount namespace of its own (the
        // helper it spawns inherits it), then a FUSE mount whose daemon (`fuse`, never read)
        // answers nothing. The strings are NUL-terminated CStrings.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare");
            let null = std::ptr::null();
            let root = CString::new("/").unwrap();
            let private = libc::MS_REC | libc::MS_PRIVATE;
            assert_eq!(
                libc::mount(null, root.as_ptr(), null, private, null.cast()),
                0
            );
            let (source, kind) = (c"host:/srv", c"fuse.sshfs");
            let at = CString::new(remote.to_str().unwrap()).unwrap();
            let data = CString::new(format!(
                "fd={},rootmode=40000,user_id=0,group_id=0",
                fuse.as_raw_fd()
            ))
            .unwrap();
            let made = libc::mount(
                source.as_ptr(),
                at.as_ptr(),
                kind.as_ptr(),
                0,
                data.as_ptr().cast(),
            );
            assert_eq!(made, 0, "mounting: {}", std::io::Error::last_os_error());
        }
        let _ = done.send(run_helper(None, &spec));
        drop(fuse);
    });
    let (code, stdout) = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the command hung on the FUSE mount");
    assert_eq!(code, Some(0), "{stdout}");
    // `ls -A` of the covered mount point lists nothing: not the FUSE root, not what it covers.
    assert!(stdout.ends_with("}\nRAN\n"), "{stdout}");
}

/// A command that echoes `RAN`, with these masks.
fn echo_spec(fx: &Fx, masked: Vec<PathBuf>) -> sandbox::ExecSpec {
    let scratch = fx.state.join("scratch-races");
    std::fs::create_dir_all(&scratch).unwrap();
    sandbox::ExecSpec {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), "echo RAN".into()],
        cwd: fx.wd.clone(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        scratch,
        masked,
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
        hung: Vec::new(),
    }
}

/// The helper run on `spec`, in a private mount namespace where `setup` (shell) ran first when
/// given: its exit code and output.
fn run_helper(setup: Option<&str>, spec: &sandbox::ExecSpec) -> (Option<i32>, String) {
    let mut command = match setup {
        Some(setup) => {
            let mut c = std::process::Command::new("unshare");
            c.args(["-m", "--propagation", "private", "sh", "-c"])
                .arg(format!("{setup}\nexec \"$0\" sandbox-exec"))
                .arg(GATEWAY);
            c
        }
        None => {
            let mut c = std::process::Command::new(GATEWAY);
            c.arg("sandbox-exec");
            c
        }
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = serde_json::to_vec(spec).unwrap();
    line.push(b'\n');
    child.stdin.take().unwrap().write_all(&line).unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    (child.wait().unwrap().code(), stdout)
}

/// A bind of a dead process's `/proc/<pid>` (outside the working directory), of its task
/// directory or of one of its files, no longer refuses the command; a live process's, and a second procfs, are still covered (the command sees
/// nothing there).
#[test]
fn a_bind_of_a_dead_process_s_proc_entry_refuses_no_command() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let at = fx.wd.parent().unwrap().join("procpid");
    let second = fx.wd.parent().unwrap().join("proc2");
    std::fs::create_dir_all(&at).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    let mut spec = echo_spec(&fx, Vec::new());
    // Red team 45 F6: its task directory and a file of it too.
    let (task, file) = (
        at.with_file_name("proctask"),
        at.with_file_name("procstatus"),
    );
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(&file, "").unwrap();
    let dead = format!(
        "sleep 20 </dev/null >/dev/null 2>&1 & P=$!\nmount --bind /proc/$P {at}\n\
         mount --bind /proc/$P/task/$P {task}\nmount --bind /proc/$P/status {file}\n\
         kill $P; wait $P 2>/dev/null",
        at = at.display(),
        task = task.display(),
        file = file.display()
    );
    let (code, stdout) = run_helper(Some(&dead), &spec);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.ends_with("RAN\n"), "{stdout}");
    // Live: covered, so the command reads nothing there.
    spec.argv = vec![
        "sh".into(),
        "-c".into(),
        format!(
            "cat {at}/status {second}/self/status 2>/dev/null | grep -c ^Pid: ; echo RAN",
            at = at.display(),
            second = second.display()
        ),
    ];
    let live = format!(
        "sleep 20 </dev/null >/dev/null 2>&1 & P=$!\nmount --bind /proc/$P {at}\nmount -t proc proc {second}",
        at = at.display(),
        second = second.display()
    );
    let (code, stdout) = run_helper(Some(&live), &spec);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.ends_with("0\nRAN\n"), "{stdout}");
}
