//! The helper started ahead for a session's next command (issue 26 item 2), in process with the
//! real helper: the next command runs in it, confined exactly as in a helper started for it —
//! the protected set, the mount table and the layer as they are when the command comes, not
//! when the helper was prepared —; a helper prepared for other limits, or discarded, runs
//! nothing and says why; none is left once the session's executor goes.

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::Arc;

use broker::executor::PreparedHelper;

use super::masks_and_fallback::HostMounts;
use super::*;

/// The helper prepared after the commands so far, once their cleanups are done.
fn prepared(exec: &Executor) -> Arc<PreparedHelper> {
    assert!(exec.command_cleanups().wait(Duration::from_secs(10)));
    let ahead = exec.prepared_helper();
    assert!(ahead.waiting().is_some(), "no helper was prepared");
    ahead
}

fn sandbox_line(out: &ActionOutcome) -> &str {
    out.output
        .lines()
        .find(|l| l.starts_with("sandbox: "))
        .unwrap_or_else(|| panic!("no sandbox line: {}", out.output))
}

#[test]
fn the_next_command_runs_in_the_prepared_helper_confined_as_the_first() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let key = fx.home.join(".ssh/id_ed25519");
    let key = key.to_str().unwrap();
    let first = run(&fx, &["cat", key]);
    let ahead = prepared(&fx.exec);
    assert_eq!(ahead.taken(), 0);
    let second = run(&fx, &["cat", key]);
    assert_eq!(ahead.taken(), 1, "{}", second.output);
    for out in [&first, &second] {
        assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
        assert!(!out.output.contains("PRIVATE KEY"), "{}", out.output);
    }
    assert_eq!(sandbox_line(&first), sandbox_line(&second));
    assert!(sandbox_line(&second).contains("mountns+netns+pidns"));
    // And each later one too: one prepared per command.
    let third = run(&fx, &["true"]);
    assert_eq!(third.status, ToolStatus::Ok, "{}", third.output);
    assert_eq!(prepared(&fx.exec).taken(), 2);
}

/// The masks are the protected set when the command comes: a credential store made after the
/// helper was prepared is hidden, one removed since is no error.
#[test]
fn protected_paths_made_or_removed_after_preparation_are_masked_as_they_are_then() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
    let ahead = prepared(&fx.exec);
    std::fs::create_dir_all(fx.home.join(".aws")).unwrap();
    std::fs::write(fx.home.join(".aws/credentials"), "AWS SECRET").unwrap();
    std::fs::remove_dir_all(fx.home.join(".ssh")).unwrap();
    let aws = fx.home.join(".aws/credentials");
    let out = run(&fx, &["cat", aws.to_str().unwrap()]);
    assert_eq!(ahead.taken(), 1, "{}", out.output);
    assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
    assert!(!out.output.contains("AWS SECRET"), "{}", out.output);
    // The same file outside any protected name is read: the refusal is the mask's.
    std::fs::write(fx.wd.join("plain.txt"), "AWS SECRET").unwrap();
    let plain = run(&fx, &["cat", "plain.txt"]);
    assert_eq!(prepared(&fx.exec).taken(), 2);
    assert_eq!(
        stdout_of(&plain).trim_end(),
        "AWS SECRET",
        "{}",
        plain.output
    );
}

/// The command's mount namespace is a copy of the host's mount table when the command comes: a
/// file system unmounted after the helper was prepared is gone for it, one mounted since is
/// there (the pseudo file systems' covers are made then too).
#[test]
fn mounts_made_or_removed_after_preparation_are_seen_as_the_host_has_them() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let (old, new) = (fx.wd.join("old"), fx.wd.join("new"));
    std::fs::create_dir_all(&old).unwrap();
    std::fs::create_dir_all(&new).unwrap();
    let mut mounts = HostMounts(Vec::new());
    mounts.mount(&["-t", "tmpfs", "tmpfs"], &old);
    std::fs::write(old.join("secret"), "UNMOUNTED").unwrap();
    assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
    let ahead = prepared(&fx.exec);
    let umount = std::process::Command::new("umount").arg(&old).status();
    assert!(umount.unwrap().success());
    mounts.0.clear();
    mounts.mount(&["-t", "tmpfs", "tmpfs"], &new);
    std::fs::write(new.join("fresh"), "MOUNTED").unwrap();
    let out = run(
        &fx,
        &["sh", "-c", "ls old; cat new/fresh; cat old/secret 2>&1"],
    );
    assert_eq!(ahead.taken(), 1, "{}", out.output);
    let stdout = stdout_of(&out);
    assert!(stdout.contains("MOUNTED"), "{}", out.output);
    assert!(!stdout.contains("UNMOUNTED"), "{}", out.output);
    assert!(stdout.contains("No such file"), "{}", out.output);
}

/// With the session's layer: `fresh_layer` and the write tools' files are the layer as it is
/// when the command comes (the prepared helper mounts nothing before).
#[test]
fn the_layer_a_prepared_helper_mounts_is_the_one_of_the_command() {
    let fx = fixture();
    if !confinable(&fx) || !sandbox::host_support().copy_on_write() {
        return;
    }
    let exec = super::layer::layered(&fx, "s-ahead", 64 << 20);
    let cmd = |argv: &[&str], fresh: bool| super::layer::cmd(&exec, argv, fresh);
    let wrote = cmd(&["sh", "-c", "echo built > out.txt"], false);
    assert_eq!(wrote.status, ToolStatus::Ok, "{}", wrote.output);
    let ahead = prepared(&exec);
    let kept = cmd(&["cat", "out.txt"], false);
    assert_eq!(stdout_of(&kept), "built\n", "{}", kept.output);
    prepared(&exec);
    let fresh = cmd(&["cat", "out.txt"], true);
    assert_eq!(fresh.status, ToolStatus::Error, "{}", fresh.output);
    assert!(!fresh.output.contains("built"), "{}", fresh.output);
    assert_eq!(ahead.taken(), 2);
}

/// None is left once the session's executor goes, and none is prepared after a shutdown.
#[test]
fn no_prepared_helper_outlives_its_session() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
    let ahead = prepared(&fx.exec);
    let pid = ahead.waiting().unwrap();
    ahead.close();
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
    assert!(fx.exec.command_cleanups().wait(Duration::from_secs(10)));
    assert_eq!(ahead.waiting(), None);
    assert_eq!(ahead.taken(), 0);
    drop(ahead);

    let other = fixture();
    assert_eq!(run(&other, &["true"]).status, ToolStatus::Ok);
    let pid = prepared(&other.exec).waiting().unwrap();
    drop(other);
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
}

/// The helper's side of the protocol, driven directly: a helper prepared for other limits than
/// its command's, or whose stdin ends without a command, runs nothing and reports why; the same
/// helper given a matching command runs it.
#[test]
fn a_helper_prepared_for_other_limits_or_discarded_runs_nothing() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let scratch = fx.state.join("scratch-ahead");
    std::fs::create_dir_all(&scratch).unwrap();
    let limits = sandbox::Limits {
        root_pids_cgroup: false,
        ..sandbox::Limits::default()
    };
    let spec = |ahead: bool, limits: sandbox::Limits| sandbox::ExecSpec {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), "echo RAN".into()],
        cwd: fx.wd.clone(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        scratch: scratch.clone(),
        masked: vec![fx.home.join(".ssh")],
        visible: Vec::new(),
        writable: Vec::new(),
        limits,
        layer: None,
        namespaces: true,
        status_fd: None,
        ahead,
        masked_as_prepared: false,
        hung: Vec::new(),
    };
    let helper = |first: sandbox::ExecSpec, command: Option<sandbox::ExecSpec>| {
        let mut child = std::process::Command::new(GATEWAY)
            .arg("sandbox-exec")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut first = serde_json::to_vec(&first).unwrap();
        first.push(b'\n');
        stdin.write_all(&first).unwrap();
        // The helper is waiting now, however long the command takes to come.
        std::thread::sleep(Duration::from_millis(100));
        if let Some(command) = command {
            // A helper that refused its first spec has gone: the pipe is broken then.
            let _ = stdin.write_all(&serde_json::to_vec(&command).unwrap());
        }
        drop(stdin);
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        (child.wait().unwrap().code(), stdout)
    };
    let other = sandbox::Limits {
        nofile: limits.nofile + 1,
        ..limits
    };
    let (code, stdout) = helper(spec(true, limits), Some(spec(false, other)));
    assert_eq!(code, Some(sandbox::spec::EXIT_SANDBOX_FAILED), "{stdout}");
    assert!(
        stdout.contains("prepared for other limits than the command's"),
        "{stdout}"
    );
    assert!(!stdout.contains("RAN"), "{stdout}");
    let (code, stdout) = helper(spec(true, limits), Some(spec(true, limits)));
    assert_eq!(code, Some(sandbox::spec::EXIT_SANDBOX_FAILED), "{stdout}");
    assert!(!stdout.contains("RAN"), "{stdout}");
    let (code, stdout) = helper(spec(true, limits), None);
    assert_eq!(code, Some(sandbox::spec::EXIT_SANDBOX_FAILED), "{stdout}");
    assert!(
        stdout.contains("discarded before a command came"),
        "{stdout}"
    );
    let (code, stdout) = helper(spec(true, limits), Some(spec(false, limits)));
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.ends_with("RAN\n"), "{stdout}");

    // A command that repeats the prepared masks sends none: they are the prepared ones.
    let key = fx.home.join(".ssh/id_ed25519");
    let reads_key = |masked: Vec<PathBuf>, as_prepared: bool| sandbox::ExecSpec {
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!("cat '{}' || echo HIDDEN; echo RAN", key.display()),
        ],
        masked,
        masked_as_prepared: as_prepared,
        hung: Vec::new(),
        ..spec(false, limits)
    };
    let (code, stdout) = helper(spec(true, limits), Some(reads_key(Vec::new(), true)));
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("HIDDEN\nRAN\n"), "{stdout}");
    assert!(!stdout.contains("PRIVATE KEY"), "{stdout}");
    // Without them, and not said to be the prepared ones, the key is there: the check above
    // could fail.
    let (code, stdout) = helper(spec(true, limits), Some(reads_key(Vec::new(), false)));
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("PRIVATE KEY"), "{stdout}");
    // Masks of its own besides "the prepared ones", or the claim in a spec with nothing
    // prepared (started per command, or the prepared spec itself): nothing runs.
    let extra = vec![fx.home.join(".aws")];
    let (code, stdout) = helper(spec(true, limits), Some(reads_key(extra, true)));
    assert_eq!(code, Some(sandbox::spec::EXIT_SANDBOX_FAILED), "{stdout}");
    assert!(
        stdout.contains("names masks besides the prepared ones"),
        "{stdout}"
    );
    let claims = sandbox::ExecSpec {
        masked_as_prepared: true,
        hung: Vec::new(),
        ..spec(true, limits)
    };
    for first in [reads_key(Vec::new(), true), claims] {
        let (code, stdout) = helper(first, Some(spec(false, limits)));
        assert_eq!(code, Some(sandbox::spec::EXIT_SANDBOX_FAILED), "{stdout}");
        assert!(
            stdout.contains("names prepared masks without a prepared helper's"),
            "{stdout}"
        );
        assert!(!stdout.contains("RAN"), "{stdout}");
    }
}

/// A command run in a prepared helper makes its own mount namespace; the helper holds it, so the
/// command's exit does not tear its mounts down before the end is told (that teardown was on the
/// answer's path: `waited`, RUN_COMMAND_RESULTS.md). While the command runs, some other process
/// holds a descriptor of exactly the command's mount namespace.
#[test]
fn the_prepared_helper_holds_its_commands_mount_namespace() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
    let ahead = prepared(&fx.exec);
    let marker = "2.7182818";
    std::thread::scope(|scope| {
        let command = scope.spawn(|| run(&fx, &["sleep", marker]));
        let deadline = Instant::now() + Duration::from_secs(10);
        let pid = loop {
            let found = processes_with(&format!("sleep {marker}"));
            if let Some(line) = found.first() {
                break line.split(':').next().unwrap().to_string();
            }
            assert!(Instant::now() < deadline, "the command never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        let ns = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
        let mut holders = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                if std::fs::read_link(fd.path()).is_ok_and(|link| link == ns) {
                    holders.push(entry.file_name().to_string_lossy().into_owned());
                }
            }
        }
        assert!(!holders.is_empty(), "nothing holds {}", ns.display());
        assert!(!holders.contains(&pid), "{holders:?}");
        let out = command.join().unwrap();
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    });
    assert_eq!(ahead.taken(), 1);
}
