//! RunCommand confinement, in process: the broker's executor runs each command through the real
//! `gateway sandbox-exec` helper. The adversarial catalogue (reference §11.1) asserts the specific
//! errno or refusal: writes, metadata changes, network, signals and ptrace, escaping the process
//! group, fork bombs, output floods, environment injection, hostile Git config; plus ordinary
//! tools, deny-list refusals through wrappers, the Landlock-only fallback, and one end-to-end
//! session with the real runner.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use broker::executor::{CommandSandbox, Executor};
use common::tools::{ActionOutcome, RunCommandArgs, ToolArgs, ToolStatus};
use sandbox::path_policy::PathPolicy;
use serde_json::json;

use crate::support::*;

struct Fx {
    _tmp: tempfile::TempDir,
    wd: PathBuf,
    home: PathBuf,
    state: PathBuf,
    scratch_root: PathBuf,
    exec: Executor,
}

fn fixture_with(namespaces: bool) -> Fx {
    fixture_with_helper(namespaces, Some(pinned_gateway()))
}

fn fixture_with_helper(
    namespaces: bool,
    helper: Option<std::sync::Arc<sandbox::pinned_exe::PinnedExe>>,
) -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let wd = root.join("work");
    let home = root.join("home");
    let state = root.join("state");
    std::fs::create_dir_all(wd.join("sub")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("gateway.sqlite3"), "STATE").unwrap();
    std::fs::write(wd.join("existing.txt"), "original").unwrap();
    let scratch_root = state.join("run/s1/cmd");
    let mut commands = CommandSandbox::new(helper, scratch_root.clone(), &home, &state, &[]);
    if !namespaces {
        commands = commands.without_namespaces();
    }
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![]);
    let exec = Executor::new(policy, wd.clone()).with_command_sandbox(commands);
    Fx {
        _tmp: tmp,
        wd,
        home,
        state,
        scratch_root,
        exec,
    }
}

fn fixture() -> Fx {
    fixture_with(true)
}

fn run_in(fx: &Fx, argv: &[&str], cwd: Option<&str>, timeout: Option<u32>) -> ActionOutcome {
    fx.exec.execute(
        "act_test",
        &ToolArgs::RunCommand(RunCommandArgs {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.map(str::to_string),
            timeout_seconds: timeout,
        }),
    )
}

fn run(fx: &Fx, argv: &[&str]) -> ActionOutcome {
    run_in(fx, argv, None, None)
}

fn py(fx: &Fx, code: &str) -> ActionOutcome {
    run(fx, &["python3", "-c", code])
}

/// Whether this host can confine commands; if not, every command must be refused.
fn confinable(fx: &Fx) -> bool {
    if sandbox::host_support().can_confine() {
        return true;
    }
    let out = run(fx, &["true"]);
    assert_eq!(out.status, ToolStatus::Rejected, "{out:?}");
    assert_eq!(out.error_code.as_deref(), Some("sandbox_unavailable"));
    false
}

fn stdout_of(out: &ActionOutcome) -> &str {
    let start = out.output.find("--- stdout ---\n").unwrap() + "--- stdout ---\n".len();
    let end = out.output.find("--- stderr ---\n").unwrap();
    &out.output[start..end]
}

/// Python that tries `ops` (name → statement) and prints `name: ERRNO-NAME` or `name: ok`.
fn probe_script(ops: &[(&str, String)]) -> String {
    let mut code = String::from("import os, errno, socket, ctypes\n");
    for (name, stmt) in ops {
        code.push_str(&format!(
            "try:\n    {stmt}\n    print('{name}: ok')\nexcept OSError as e:\n    print('{name}: ' + errno.errorcode.get(e.errno, str(e.errno)))\n"
        ));
    }
    code
}

fn results(out: &ActionOutcome) -> Vec<(String, String)> {
    stdout_of(out)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn assert_all_in(out: &ActionOutcome, expected_count: usize, allowed: &[&str]) {
    let got = results(out);
    assert_eq!(got.len(), expected_count, "{}", out.output);
    for (name, errno) in &got {
        assert!(
            allowed.contains(&errno.as_str()),
            "{name}: {errno} (expected one of {allowed:?})\n{}",
            out.output
        );
    }
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) {
                found.push(format!("{pid}: {text}"));
            }
        }
    }
    found
}

fn assert_no_processes(marker: &str) {
    // The kernel may need a moment to finish tearing a pid namespace down.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes left: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ordinary_tools_work_and_receipts_carry_the_exit_code() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let out = run(&fx, &["/bin/echo", "hi"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(stdout_of(&out), "hi\n");
    assert_eq!(out.receipt.exit_code, Some(0));
    assert_eq!(out.receipt.action_id, "act_test");
    assert!(out.output.starts_with("exit code: 0\nduration_ms: "));
    assert!(
        out.output.contains("sandbox: linux:"),
        "header names the sandbox: {}",
        out.output
    );
    assert!(!out.truncated);

    let out = py(&fx, "print(1)");
    assert_eq!(stdout_of(&out), "1\n", "{}", out.output);

    // A script inside the working directory, run from a subdirectory.
    let script = fx.wd.join("hello.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"hello from $(pwd)\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_in(&fx, &["../hello.sh"], Some("sub"), None);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert_eq!(
        stdout_of(&out),
        format!("hello from {}\n", fx.wd.join("sub").display())
    );

    // git status in a repository created here.
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&fx.wd)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "existing.txt"]);
    git(&["commit", "-qm", "init"]);
    std::fs::write(fx.wd.join("existing.txt"), "changed").unwrap();
    let out = run(&fx, &["git", "status", "--short"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(
        stdout_of(&out).contains(" M existing.txt"),
        "{}",
        out.output
    );
    let out = run(&fx, &["git", "diff"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(stdout_of(&out).contains("+changed"), "{}", out.output);

    // cargo (the toolchain binary this test was built with).
    if let Ok(cargo) = std::env::var("CARGO") {
        let out = run(&fx, &[&cargo, "--version"]);
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert!(stdout_of(&out).starts_with("cargo "), "{}", out.output);
    }

    // A failing command is an error with its exit code in the receipt.
    let out = run(&fx, &["/bin/sh", "-c", "echo oops >&2; exit 3"]);
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.error_code.as_deref(), Some("nonzero_exit"));
    assert_eq!(out.receipt.exit_code, Some(3));
    assert!(
        out.output.contains("--- stderr ---\noops\n"),
        "{}",
        out.output
    );

    // The scratch dirs are gone afterwards.
    let left: Vec<_> = std::fs::read_dir(&fx.scratch_root).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn the_report_names_every_layer_on_this_host() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let support = sandbox::host_support();
    let out = run(&fx, &["true"]);
    let header = out.output.lines().nth(2).unwrap();
    if support.namespaces {
        assert!(header.contains("userns+mountns+netns+pidns"), "{header}");
    }
    if support.landlock_abi.is_some() {
        assert!(header.contains("landlock(v"), "{header}");
    }
    assert!(header.contains("seccomp+nnp+caps+rlimits"), "{header}");
    let out = run(
        &fx,
        &[
            "/bin/sh",
            "-c",
            "grep -E '^(NoNewPrivs|CapEff|CapBnd|Seccomp):' /proc/self/status",
        ],
    );
    let text = stdout_of(&out);
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(text.contains("CapBnd:\t0000000000000000"), "{text}");
    assert!(text.contains("Seccomp:\t2"), "{text}");
}

fn write_ops(dir: &Path, existing: &Path) -> Vec<(&'static str, String)> {
    let d = dir.display();
    let e = existing.display();
    vec![
        ("create", format!("open('{d}/new.txt', 'w')")),
        ("append", format!("open('{e}', 'a')")),
        ("truncate", format!("os.truncate('{e}', 0)")),
        ("rename", format!("os.rename('{e}', '{d}/moved.txt')")),
        ("unlink", format!("os.unlink('{e}')")),
        ("mkdir", format!("os.mkdir('{d}/newdir')")),
        ("symlink", format!("os.symlink('/etc/passwd', '{d}/link')")),
        ("hardlink", format!("os.link('{e}', '{d}/hard')")),
        ("mkfifo", format!("os.mkfifo('{d}/fifo')")),
        ("chmod", format!("os.chmod('{e}', 0o777)")),
        ("chown", format!("os.chown('{e}', 1, 1)")),
        ("setxattr", format!("os.setxattr('{e}', 'user.x', b'1')")),
        ("utime", format!("os.utime('{e}', (0, 0))")),
    ]
}

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
    let code = format!(
        "import os\nif os.fork() == 0:\n    try:\n        os.setsid()\n    except OSError as e:\n        print('setsid', e.errno, flush=True)\n    \
         os.execv('/bin/sleep', ['sleep', '{marker}'])\nprint('parent done', flush=True)"
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
    assert_eq!(out.error_code.as_deref(), Some("timeout"));
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
    assert_eq!(out.error_code.as_deref(), Some("timeout"), "{}", out.output);
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
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho HOSTILE-RAN >&2\ntouch {}\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
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

#[test]
fn deny_list_refusals_name_the_rule() {
    let fx = fixture();
    let victim = fx.wd.join("existing.txt");
    for argv in [
        &["rm", "existing.txt"][..],
        &["env", "-i", "A=1", "rm", "existing.txt"],
        &["xargs", "-n1", "rm"],
        &["nice", "-n", "5", "rm", "existing.txt"],
        &["timeout", "5", "rm", "existing.txt"],
        &["nohup", "rm", "existing.txt"],
        &["stdbuf", "-oL", "rm", "existing.txt"],
        &["find", ".", "-delete"],
        &["find", ".", "-exec", "rm", "{}", ";"],
        &["kill", "-9", "1"],
    ] {
        let out = run(&fx, argv);
        assert_eq!(out.status, ToolStatus::Rejected, "{argv:?}: {}", out.output);
        assert_eq!(out.error_code.as_deref(), Some("not_permitted"), "{argv:?}");
        assert!(out.output.contains("deny list"), "{argv:?}: {}", out.output);
        assert_eq!(out.receipt.exit_code, None);
    }
    assert!(victim.exists());
    let out = run_in(&fx, &["true"], Some("/"), None);
    assert_eq!(out.error_code.as_deref(), Some("invalid_argument"));
    let out = run(&fx, &["no-such-tool-xyz"]);
    assert_eq!(out.error_code.as_deref(), Some("not_found"));
}

#[test]
fn landlock_only_fallback_still_confines() {
    let fx = fixture_with(false);
    let support = sandbox::host_support();
    if support.landlock_abi.is_none() || !support.seccomp {
        let out = run(&fx, &["true"]);
        assert_eq!(
            out.error_code.as_deref(),
            Some("sandbox_unavailable"),
            "{}",
            out.output
        );
        return;
    }
    let out = run(&fx, &["/bin/echo", "hi"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    let header = out.output.lines().nth(2).unwrap();
    assert!(header.starts_with("sandbox: linux:landlock(v"), "{header}");
    assert!(!header.contains("mountns"), "{header}");
    let wd_file = fx.wd.join("existing.txt");
    let ops = write_ops(&fx.wd, &wd_file);
    let out = py(&fx, &probe_script(&ops));
    assert_all_in(&out, ops.len(), &["EROFS", "EPERM", "EACCES"]);
    let key = fx.home.join(".ssh/id_ed25519");
    let db = fx.state.join("gateway.sqlite3");
    let ops = vec![
        ("ssh_key", format!("open('{}').read()", key.display())),
        ("state_db", format!("open('{}').read()", db.display())),
        (
            "tcp",
            "socket.create_connection(('127.0.0.1', 9), timeout=2)".to_string(),
        ),
        ("kill", format!("os.kill({}, 0)", std::process::id())),
    ];
    let out = py(&fx, &probe_script(&ops));
    assert_all_in(&out, ops.len(), &["EACCES", "EPERM"]);
    assert_eq!(std::fs::read_to_string(&wd_file).unwrap(), "original");
}

/// A `worktree_write` session's working directory lives in the (masked) state dir: commands
/// still see it, read-only, while the rest of the state dir stays hidden. With namespaces it is
/// bound back over the mask; with Landlock only it is added to the readable set.
#[test]
fn a_worktree_inside_the_masked_state_dir_stays_visible_and_read_only() {
    for namespaces in [true, false] {
        let fx = fixture_with(namespaces);
        let support = sandbox::host_support();
        if !namespaces && (support.landlock_abi.is_none() || !support.seccomp) {
            continue; // landlock_only_fallback_still_confines asserts the refusal there.
        }
        if !confinable(&fx) {
            return;
        }
        let tree = fx.state.join("worktrees/ns_1");
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/lib.rs"), "fn visible() {}\n").unwrap();
        let mut commands = CommandSandbox::new(
            Some(pinned_gateway()),
            fx.scratch_root.clone(),
            &fx.home,
            &fx.state,
            &[],
        );
        if !namespaces {
            commands = commands.without_namespaces();
        }
        let other = fx.state.join("worktrees/ns_2");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("theirs.rs"), "fn theirs() {}\n").unwrap();
        // Only the session's own worktree is bound back over the state dir's mask.
        let commands = commands.with_own_worktree(Some(tree.clone()));
        let policy = PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![])
            .with_open_subtree(fx.state.join("worktrees"));
        let exec = Executor::new(policy, tree.clone()).with_command_sandbox(commands);
        let run_here = |argv: &[&str]| {
            exec.execute(
                "act_tree",
                &ToolArgs::RunCommand(RunCommandArgs {
                    argv: argv.iter().map(|s| s.to_string()).collect(),
                    cwd: None,
                    timeout_seconds: None,
                }),
            )
        };
        let out = run_here(&["cat", "src/lib.rs"]);
        assert_eq!(out.status, ToolStatus::Ok, "{namespaces}: {}", out.output);
        assert!(stdout_of(&out).contains("fn visible()"), "{}", out.output);
        let out = run_here(&["cat", &other.join("theirs.rs").display().to_string()]);
        assert!(
            !out.output.contains("fn theirs()"),
            "{namespaces}: {}",
            out.output
        );
        let db = fx.state.join("gateway.sqlite3");
        let ops = vec![
            (
                "write_tree",
                format!("open('{}', 'w')", tree.join("new.txt").display()),
            ),
            ("state_db", format!("open('{}').read()", db.display())),
        ];
        let out = run_here(&["python3", "-c", &probe_script(&ops)]);
        let results = results(&out);
        assert_eq!(results.len(), 2, "{}", out.output);
        assert!(
            ["EROFS", "EACCES"].contains(&results[0].1.as_str()),
            "{namespaces}: {results:?}"
        );
        assert!(
            ["ENOENT", "EACCES"].contains(&results[1].1.as_str()),
            "{namespaces}: {results:?}"
        );
        assert!(!out.output.contains("STATE"));
        assert!(!tree.join("new.txt").exists());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn run_command_end_to_end_with_real_runner() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Run two commands", "rc-e2e-start").await;
    let sid = session_id(&v);
    let lease = lease_id(&v);
    assert_eq!(
        v["pending_turn"]["allowed_tools"],
        json!(["Read", "FindFiles", "SearchText", "RunCommand"])
    );
    let calls = json!([
        {"name": "RunCommand", "arguments": {"argv": ["/bin/echo", "hi"]}},
        {"name": "RunCommand", "arguments": {"argv": ["git", "status"]}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "rc-e2e-reply-1",
            Some("Running them."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    assert_eq!(v["pending_turn"]["kind"], "tool_results", "{v}");
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert_eq!(results[0]["name"], "RunCommand");
    assert_eq!(results[0]["status"], "ok", "{v}");
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("--- stdout ---\nhi\n"),
        "{v}"
    );
    assert_eq!(results[0]["receipt"]["exit_code"], 0, "{v}");
    assert!(results[0]["receipt"]["duration_ms"].is_u64());
    // The work dir is not a repository: git says so, and its exit code is in the receipt.
    assert_eq!(results[1]["receipt"]["exit_code"], 128, "{v}");
    assert!(
        results[1]["output"]
            .as_str()
            .unwrap()
            .contains("not a git repository"),
        "{v}"
    );
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "rc-e2e-reply-2",
            Some("Done."),
            None,
        )
        .await
        .unwrap();
    assert_eq!(view(&r)["status"], "idle", "{r}");
    chat.stop(&sid, &lease, "rc-e2e-stop", None).await.unwrap();
}

#[test]
fn a_working_directory_under_a_mask_is_never_bound_back() {
    // Issue 11, finding 1: a working directory inside the state dir (had a start let it through)
    // must not be bound back over the state dir's mask; only a session's own worktree is.
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let auth = fx.state.join("auth");
    std::fs::create_dir_all(&auth).unwrap();
    std::fs::write(auth.join("access-token"), "TOKEN-SHOULD-STAY-HIDDEN").unwrap();
    for own in [None, Some(fx.state.join("worktrees/ns_1"))] {
        let commands = CommandSandbox::new(
            Some(pinned_gateway()),
            fx.scratch_root.clone(),
            &fx.home,
            &fx.state,
            &[],
        )
        .with_own_worktree(own.clone());
        let policy = PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![]);
        let exec = Executor::new(policy, auth.clone()).with_command_sandbox(commands);
        let out = exec.execute(
            "act_masked",
            &ToolArgs::RunCommand(RunCommandArgs {
                argv: vec!["sh".into(), "-c".into(), "cat * .* 2>&1; ls -a".into()],
                cwd: None,
                timeout_seconds: None,
            }),
        );
        assert!(
            !out.output.contains("TOKEN-SHOULD-STAY-HIDDEN")
                && !out.output.contains("access-token"),
            "{own:?}: {}",
            out.output
        );
    }
}

/// A helper whose report line is missing or malformed may have run the command, unconfined: the
/// receipt says that (`confinement_unconfirmed`, status error), never "not run", and withholds
/// the output.
#[test]
fn a_helper_that_does_not_report_is_never_called_a_refusal() {
    use sandbox::pinned_exe::PinnedExe;
    for (fake, problem) in [
        ("/bin/echo", "the sandbox helper did not report"),
        ("/bin/true", "the sandbox helper ended before reporting"),
    ] {
        let helper = std::sync::Arc::new(PinnedExe::pin(Path::new(fake)).unwrap());
        let fx = fixture_with_helper(true, Some(helper));
        let out = run(&fx, &["true"]);
        assert_eq!(out.status, ToolStatus::Error, "{fake}: {out:?}");
        assert_eq!(
            out.error_code.as_deref(),
            Some("confinement_unconfirmed"),
            "{fake}: {out:?}"
        );
        assert!(out.output.contains(problem), "{fake}: {}", out.output);
        assert!(out.output.contains("it may have run"), "{}", out.output);
        assert!(!out.output.contains("not run"), "{}", out.output);
        // /bin/echo printed "sandbox-exec": withheld, only counted.
        assert!(!out.output.contains("sandbox-exec"), "{}", out.output);
        assert!(out.output.contains("output is withheld"), "{}", out.output);
    }
}

/// The helper is executed from what was pinned, never from the path: a sealed copy keeps running
/// (confined) after the installed file is replaced; a helper pinned as an open file (the fallback
/// where memfds cannot be executed) whose file changed in any way — replaced by rename, which
/// drops its link count, or modified in place — is refused before anything runs.
#[test]
fn a_changed_helper_is_never_executed() {
    use sandbox::pinned_exe::PinnedExe;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let replace = |install: &Path| {
        let fake = dir.path().join("fake");
        std::fs::write(&fake, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&fake, install).unwrap();
    };
    let installed = |name: &str| {
        let path = dir.path().join(name);
        std::fs::copy(GATEWAY, &path).unwrap();
        path
    };

    let install = installed("sealed");
    let fx = fixture_with_helper(
        true,
        Some(std::sync::Arc::new(PinnedExe::pin(&install).unwrap())),
    );
    if !confinable(&fx) {
        return;
    }
    replace(&install);
    let out = run(&fx, &["true"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(out.output.contains("sandbox: linux:"), "{}", out.output);

    let refused = |out: &ActionOutcome| {
        assert_eq!(out.status, ToolStatus::Rejected, "{out:?}");
        assert_eq!(out.error_code.as_deref(), Some("sandbox_unavailable"));
        assert!(
            out.output
                .contains("the pinned executable changed since the gateway verified it"),
            "{}",
            out.output
        );
    };
    let install = installed("open-file-renamed");
    let fx = fixture_with_helper(
        true,
        Some(std::sync::Arc::new(
            PinnedExe::pin_open_file(&install).unwrap(),
        )),
    );
    replace(&install);
    refused(&run(&fx, &["true"]));

    let install = installed("open-file-modified");
    let fx = fixture_with_helper(
        true,
        Some(std::sync::Arc::new(
            PinnedExe::pin_open_file(&install).unwrap(),
        )),
    );
    std::thread::sleep(Duration::from_millis(20));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&install)
        .unwrap();
    std::io::Write::write_all(&mut f, b"\0").unwrap();
    drop(f);
    refused(&run(&fx, &["true"]));
    assert!(!marker.exists(), "a replacement ran");

    // No verified helper at all: refused, not run.
    let fx = fixture_with_helper(true, None);
    let out = run(&fx, &["true"]);
    assert_eq!(
        out.error_code.as_deref(),
        Some("sandbox_unavailable"),
        "{out:?}"
    );
    assert!(
        out.output.contains("no verified sandbox helper"),
        "{}",
        out.output
    );
}

fn limited_fixture(namespaces: bool, memory_mb: u64, scratch_mb: u64) -> Fx {
    let mut fx = fixture_with(namespaces);
    let commands = CommandSandbox::new(
        Some(pinned_gateway()),
        fx.scratch_root.clone(),
        &fx.home,
        &fx.state,
        &[],
    )
    .with_limits(sandbox::Limits {
        memory: Some(memory_mb << 20),
        scratch: Some(scratch_mb << 20),
        ..sandbox::Limits::default()
    });
    let commands = if namespaces {
        commands
    } else {
        commands.without_namespaces()
    };
    fx.exec = Executor::new(
        PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![]),
        fx.wd.clone(),
    )
    .with_command_sandbox(commands);
    fx
}

/// A command that allocates and touches more than its memory limit fails (the allocation is
/// refused), and the result names the limit; shared memory, which `RLIMIT_DATA` does not count,
/// is refused outright. Within the limit, allocation works.
#[test]
fn memory_beyond_the_limit_is_refused() {
    for namespaces in [true, false] {
        let fx = limited_fixture(namespaces, 256, 64);
        if !confinable(&fx) {
            return;
        }
        let out = py(
            &fx,
            "b = bytearray(512 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('allocated')",
        );
        assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
        assert_eq!(
            out.error_code.as_deref(),
            Some("nonzero_exit"),
            "{}",
            out.output
        );
        assert!(!out.output.contains("allocated\n"), "{}", out.output);
        assert!(out.output.contains("MemoryError"), "{}", out.output);
        assert!(
            out.output.contains("limits: memory 256 MiB per process"),
            "{}",
            out.output
        );
        assert!(
            out.output.contains(
                "note: the command reported running out of memory; each of its processes may \
                 allocate at most 256 MiB"
            ),
            "{}",
            out.output
        );
        // Raw mappings: a private one is refused at the mapping (ENOMEM); a shared anonymous
        // one, which RLIMIT_DATA would not count, is refused outright (EPERM).
        let out = py(
            &fx,
            "import mmap\nfor name, flags in [('private', mmap.MAP_PRIVATE), ('shared', mmap.MAP_SHARED)]:\n    try:\n        m = mmap.mmap(-1, 512 << 20, flags=flags)\n        print(name, 'mapped')\n    except OSError as e:\n        print(name, e.errno)",
        );
        assert!(
            stdout_of(&out).contains("private 12\nshared 1\n"),
            "{}",
            out.output
        );
        let out = run(
            &fx,
            &[
                "python3",
                "-c",
                &probe_script(&[
                    ("memfd", "os.memfd_create('x')".into()),
                    (
                        "shmget",
                        "ctypes.CDLL(None, use_errno=True).shmget(0, 1 << 30, 0o1600) >= 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'shmget'))".into(),
                    ),
                ]),
            ],
        );
        assert_all_in(&out, 2, &["EPERM"]);
        let out = py(&fx, "b = bytearray(64 * 1024 * 1024)\nprint('ok', len(b))");
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    }
}

/// All of a command's scratch files together are bounded by the quota (a private tmpfs): writing
/// past it fails with ENOSPC, though each file stays under the per-file limit. Without namespaces
/// there is no quota, and the result says so.
#[test]
fn scratch_beyond_the_quota_fails_with_enospc() {
    let fx = limited_fixture(true, 1024, 64);
    if !confinable(&fx) {
        return;
    }
    let code = "import os, errno\nfor i in range(4):\n    try:\n        with open(os.path.join(os.environ['TMPDIR'], f'f{i}'), 'wb') as f:\n            f.write(b'x' * (24 << 20))\n        print(i, 'ok')\n    except OSError as e:\n        print(i, errno.errorcode[e.errno])";
    let out = py(&fx, code);
    let printed = stdout_of(&out);
    assert!(printed.contains("0 ok\n1 ok\n2 ENOSPC"), "{}", out.output);
    assert!(
        out.output
            .contains("limits: memory 1024 MiB per process, scratch 64 MiB in total"),
        "{}",
        out.output
    );
    // HOME is there too, inside the same quota, and nothing of it reaches the host's scratch dir.
    let out = run(
        &fx,
        &["sh", "-c", "echo hi > \"$HOME/x\" && cat \"$HOME/x\""],
    );
    assert!(stdout_of(&out).contains("hi"), "{}", out.output);
    let left: Vec<_> = walk_files(&fx.scratch_root);
    assert!(left.is_empty(), "{left:?}");

    let fx = limited_fixture(false, 1024, 64);
    let out = run(&fx, &["true"]);
    assert!(
        out.output.contains("scratch per file only"),
        "{}",
        out.output
    );
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}
