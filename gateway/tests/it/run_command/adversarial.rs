//! The adversarial catalogue (reference §11.1), each asserting the specific errno or refusal:
//! writes and metadata changes, hidden credentials and state, network, signals and ptrace,
//! escaping the process group, timeouts, fork bombs, output floods, the environment, hostile Git
//! config.

use super::*;

#[test]
fn writes_and_metadata_changes_are_refused_everywhere() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let outside_file = outside.path().join("f.txt");
    std::fs::write(&outside_file, "outside").unwrap();
    let wd_file = fx.wd.join("existing.txt");
    for (dir, file) in [
        (&fx.wd, &wd_file),
        (&outside.path().to_path_buf(), &outside_file),
    ] {
        let ops = write_ops(dir, file);
        let out = py(&fx, &probe_script(&ops));
        assert_all_in(&out, ops.len(), &["EROFS", "EPERM", "EACCES"]);
    }
    assert_eq!(std::fs::read_to_string(&wd_file).unwrap(), "original");
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "outside");
    assert_eq!(std::fs::read_dir(&fx.wd).unwrap().count(), 2);
    // The scratch dir is writable.
    let out = run(
        &fx,
        &[
            "/bin/sh",
            "-c",
            "echo x > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && echo y > \"$HOME/g\"",
        ],
    );
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
}

#[test]
fn credentials_and_state_are_hidden() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let key = fx.home.join(".ssh/id_ed25519");
    let db = fx.state.join("gateway.sqlite3");
    let ops = vec![
        ("ssh_key", format!("open('{}').read()", key.display())),
        ("state_db", format!("open('{}').read()", db.display())),
    ];
    let out = py(&fx, &probe_script(&ops));
    assert_all_in(&out, 2, &["ENOENT", "EACCES"]);
    assert!(!out.output.contains("PRIVATE KEY"));
    assert!(!out.output.contains("STATE"));
}

#[test]
fn network_is_unreachable() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let ops =
        vec![
        (
            "tcp_loopback",
            format!("socket.create_connection(('127.0.0.1', {port}), timeout=2)"),
        ),
        (
            "tcp_outside",
            "socket.create_connection(('1.1.1.1', 443), timeout=2)".to_string(),
        ),
        (
            "udp_dns",
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('8.8.8.8', 53))"
                .to_string(),
        ),
        ("ipv6", "socket.socket(socket.AF_INET6, socket.SOCK_STREAM)".to_string()),
        ("raw", "socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)".to_string()),
        ("netlink", "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)".to_string()),
        ("unix", "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)".to_string()),
    ];
    let out = py(&fx, &probe_script(&ops));
    assert_all_in(&out, ops.len(), &["EPERM"]);
    assert!(
        listener.accept().is_err(),
        "the test server must not have been reached"
    );
    // socketpair stays available (tools use it for IPC).
    let out = py(
        &fx,
        "import socket; a, b = socket.socketpair(); print('pair ok')",
    );
    assert_eq!(stdout_of(&out), "pair ok\n", "{}", out.output);
    let out = run(&fx, &["getent", "ahosts", "example.com"]);
    assert_ne!(out.receipt.exit_code, Some(0), "{}", out.output);
}

#[test]
fn other_processes_cannot_be_signalled_or_traced() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let me = std::process::id();
    let ops = vec![
        ("kill0", format!("os.kill({me}, 0)")),
        ("kill_term", format!("os.kill({me}, 15)")),
        (
            "kill_init",
            "os.kill(1 if os.getpid() != 1 else 99999, 0)".to_string(),
        ),
        (
            "ptrace",
            format!(
                "libc = ctypes.CDLL(None, use_errno=True)\n    r = libc.ptrace(16, {me}, 0, 0)\n    \
                 raise OSError(ctypes.get_errno() if r != 0 else 0, 'ptrace')"
            ),
        ),
        (
            "ptrace_traceme",
            "libc = ctypes.CDLL(None, use_errno=True)\n    r = libc.ptrace(0, 0, 0, 0)\n    \
             raise OSError(ctypes.get_errno() if r != 0 else 0, 'traceme')"
                .to_string(),
        ),
    ];
    let out = py(&fx, &probe_script(&ops));
    let got = results(&out);
    assert_eq!(got.len(), ops.len(), "{}", out.output);
    for (name, errno) in got {
        assert!(
            ["EPERM", "ESRCH"].contains(&errno.as_str()),
            "{name}: {errno}\n{}",
            out.output
        );
    }
    // The test process is alive (it just ran the assertion) and was not stopped.
}

#[test]
fn escaping_the_process_group_does_not_outlive_the_call() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let marker = "1000.4242";
    // The parent waits for the child's word (a pipe, closed on exec) before it ends, so the
    // child's line is printed before the call can end, however loaded the machine.
    let code = format!(
        "import os\nr, w = os.pipe()\nif os.fork() == 0:\n    os.close(r)\n    try:\n        os.setsid()\n    \
         except OSError as e:\n        print('setsid', e.errno, flush=True)\n    os.write(w, b'x')\n    \
         os.execv('/bin/sleep', ['sleep', '{marker}'])\nos.close(w)\nos.read(r, 1)\n\
         print('parent done', flush=True)"
    );
    let started = Instant::now();
    let out = py(&fx, &code);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("setsid 1"),
        "setsid → EPERM: {}",
        out.output
    );
    assert_no_processes(marker);

    // A grandchild holding the pipes does not keep the call waiting.
    let marker = "1000.4343";
    let started = Instant::now();
    let out = run(
        &fx,
        &["/bin/sh", "-c", &format!("sleep {marker} & echo started")],
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{}",
        out.output
    );
    assert_eq!(out.receipt.exit_code, Some(0), "{}", out.output);
    assert_no_processes(marker);
}

#[test]
fn timeout_kills_the_whole_group() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let marker = "1000.4545";
    let started = Instant::now();
    let out = run_in(
        &fx,
        &[
            "/bin/sh",
            "-c",
            &format!("trap '' TERM; sleep {marker} & sleep {marker}"),
        ],
        None,
        Some(1),
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(6),
        "{took:?}"
    );
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.error_code, Some(OutcomeCode::Timeout));
    assert_eq!(out.receipt.exit_code, None);
    assert!(
        out.output.starts_with("timed out after 1 s"),
        "{}",
        out.output
    );
    assert_no_processes(marker);
}

#[test]
fn fork_bomb_is_bounded() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let support = sandbox::host_support();
    // As root without namespaces nothing would bound it but the cgroup; do not risk the host.
    if support.root && !support.namespaces {
        return;
    }
    let script = fx.wd.join("bomb_4646.py");
    std::fs::write(
        &script,
        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n",
    )
    .unwrap();
    let started = Instant::now();
    let out = run_in(&fx, &["python3", script.to_str().unwrap()], None, Some(3));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{}",
        out.output
    );
    assert_eq!(out.error_code, Some(OutcomeCode::Timeout), "{}", out.output);
    assert_no_processes("bomb_4646");
}

#[test]
fn output_floods_are_truncated() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let out = py(
        &fx,
        "import sys\nfor _ in range(200):\n    sys.stdout.write('o' * 50000)\n    sys.stderr.write('e' * 50000)\n",
    );
    assert_eq!(out.status, ToolStatus::Ok, "{}", &out.output[..200]);
    assert!(out.truncated);
    assert!(out.output.len() <= 64 * 1024, "{}", out.output.len());
    assert!(
        out.output
            .contains("[stdout truncated: 10000000 bytes in total")
    );
    assert!(
        out.output
            .contains("[stderr truncated: 10000000 bytes in total")
    );
    // Non-UTF-8 and NUL bytes arrive as text.
    let out = py(
        &fx,
        "import sys; sys.stdout.buffer.write(b'a\\x00b\\xffc\\n')",
    );
    assert_eq!(stdout_of(&out), "a\0b\u{fffd}c\n");
}

#[test]
fn the_environment_is_fixed() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let out = run(&fx, &["env"]);
    let text = stdout_of(&out);
    assert!(
        text.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"),
        "{text}"
    );
    assert!(text.contains("GIT_OPTIONAL_LOCKS=0\n"));
    for bad in [
        "LD_PRELOAD",
        "BASH_ENV",
        "\nENV=",
        "CARGO_MANIFEST_DIR",
        "RUST_",
        "GIT_DIR",
    ] {
        assert!(!text.contains(bad), "{bad} leaked: {text}");
    }
    let scratch_home = text.lines().find_map(|l| l.strip_prefix("HOME=")).unwrap();
    assert!(
        Path::new(scratch_home).starts_with(&fx.scratch_root),
        "{scratch_home}"
    );
    // A BASH_ENV file in the working directory is not sourced; LD_PRELOAD through `env` stays
    // inside the sandbox.
    std::fs::write(fx.wd.join("bashenv"), "echo SOURCED\n").unwrap();
    let out = run(&fx, &["bash", "-c", "echo \"[$BASH_ENV$LD_PRELOAD$ENV]\""]);
    assert_eq!(stdout_of(&out), "[]\n", "{}", out.output);
    assert!(!out.output.contains("SOURCED"));
}

#[test]
fn hostile_git_config_does_not_run() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran");
    let hook = fx.wd.join("hook.sh");
    tests::executables::write(
        &hook,
        &format!(
            "#!/bin/sh\necho HOSTILE-RAN >&2\ntouch {}\n",
            marker.display()
        ),
    )
    .unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&fx.wd)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    };
    git(&["init", "-q"]);
    git(&["config", "core.fsmonitor", hook.to_str().unwrap()]);
    git(&["config", "core.pager", hook.to_str().unwrap()]);
    git(&["config", "core.hooksPath", fx.wd.to_str().unwrap()]);
    // Control: outside the sandbox the repository does run the script.
    git(&["status"]);
    assert!(
        marker.exists(),
        "the hostile config must be live for this test to mean anything"
    );
    std::fs::remove_file(&marker).unwrap();
    for args in [
        &["git", "status"][..],
        &["git", "log", "-1"],
        &["git", "diff"],
    ] {
        let out = run(&fx, args);
        assert!(
            !out.output.contains("HOSTILE-RAN"),
            "{args:?}: {}",
            out.output
        );
        assert!(!marker.exists(), "{args:?}");
    }
}
