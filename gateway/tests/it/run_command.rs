//! RunCommand confinement, in process: the broker's executor runs each command through the real
//! `gateway sandbox-exec` helper. The adversarial catalogue (reference §11.1) asserts the specific
//! errno or refusal: writes, metadata changes, network, signals and ptrace, escaping the process
//! group, fork bombs, output floods, environment injection, hostile Git config; plus ordinary
//! tools, deny-list refusals through wrappers, the Landlock-only fallback, and one end-to-end
//! session with the real runner. This file holds the shared fixture and probes; the tests are
//! grouped by topic in its submodules.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use broker::executor::{CommandSandbox, Executor};
use common::outcome::OutcomeCode;
use common::tools::{ActionOutcome, RunCommandArgs, ToolArgs, ToolStatus};
use sandbox::path_policy::PathPolicy;
use serde_json::json;

use crate::support::*;

mod adversarial;
mod ahead;
mod aliases;
mod all_commands;
mod area_gone;
mod discard;
mod early_answer;
mod end_to_end;
mod helper_integrity;
mod layer;
mod lifetime;
mod limits;
mod mask_races;
mod masks_and_fallback;
mod memory;
mod mounts_inside;
mod ordinary;
mod projects;

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

/// [`fixture_with`] whose commands get `limits` (as a broker sets them from its spec).
fn fixture_with_limits(namespaces: bool, limits: sandbox::Limits) -> Fx {
    let mut fx = fixture_with(namespaces);
    let mut commands = CommandSandbox::new(
        Some(pinned_gateway()),
        fx.scratch_root.clone(),
        &fx.home,
        &fx.state,
        &[],
    )
    .with_limits(limits);
    if !namespaces {
        commands = commands.without_namespaces();
    }
    fx.exec = Executor::new(
        PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![]),
        fx.wd.clone(),
    )
    .with_command_sandbox(commands);
    fx
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
            fresh_layer: false,
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
    assert_eq!(out.error_code, Some(OutcomeCode::SandboxUnavailable));
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

/// Python statements (for [`probe_script`]) that each try one write or metadata change in `dir`
/// or on `existing`.
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
