//! The answer comes once the helper has told the command's end, before the helper's own exit
//! (which tears its namespaces down) is reaped: still no process of the command outlives the
//! answer — checked at once, with no grace — whatever it left in the background, with or without
//! a memory cgroup, and with the session's layer no writer is left (its diff is final); the
//! session's next command runs right after.

use super::*;

/// No process whose command line holds `marker`, right now.
fn assert_none_now(marker: &str, out: &ActionOutcome) {
    let left = processes_with(marker);
    assert!(
        left.is_empty(),
        "left after the answer: {left:?}\n{}",
        out.output
    );
}

/// Commands that end at once and leave children behind, detached from the output pipes (so the
/// answer does not wait for them): a plain `&`, a double fork ignoring TERM and HUP, and a
/// chain of background shells.
fn leavers(marker: &str) -> Vec<String> {
    vec![
        format!("sleep {marker} </dev/null >/dev/null 2>&1 & echo started"),
        format!("(trap '' TERM HUP; sleep {marker} </dev/null >/dev/null 2>&1 &) ; echo started"),
        format!(
            "sh -c 'sh -c \"sleep {marker} </dev/null >/dev/null 2>&1 &\" &' </dev/null \
             >/dev/null 2>&1; echo started"
        ),
    ]
}

fn check_session(exec: &Executor, marker: &str) {
    for script in leavers(marker) {
        for _ in 0..3 {
            let out = exec.execute(
                "act_early",
                &ToolArgs::RunCommand(RunCommandArgs {
                    argv: vec!["/bin/sh".into(), "-c".into(), script.clone()],
                    cwd: None,
                    timeout_seconds: None,
                    fresh_layer: false,
                }),
            );
            assert_none_now(marker, &out);
            assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
            assert_eq!(out.receipt.exit_code, Some(0), "{}", out.output);
            assert!(out.output.contains("started"), "{}", out.output);
        }
    }
    // The end told is the command's own.
    let out = exec.execute(
        "act_early",
        &ToolArgs::RunCommand(RunCommandArgs {
            argv: vec!["/bin/sh".into(), "-c".into(), "echo out; exit 3".into()],
            cwd: None,
            timeout_seconds: None,
            fresh_layer: false,
        }),
    );
    assert_eq!(out.receipt.exit_code, Some(3), "{}", out.output);
    assert!(out.output.contains("out"), "{}", out.output);
}

#[test]
fn no_process_of_a_command_outlives_its_early_answer() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    assert!(
        sandbox::host_support().namespaces,
        "the early answer needs the pid namespace"
    );
    check_session(&fx.exec, "1000.4747");
    // In the session's memory cgroup (reused by each next command).
    let bounded = fixture_with_limits(
        true,
        sandbox::Limits {
            memory: Some(256 << 20),
            scratch: Some(64 << 20),
            memory_cgroup: true,
            ..sandbox::Limits::default()
        },
    );
    check_session(&bounded.exec, "1000.4848");
}

#[test]
fn no_writer_to_the_layer_is_left_at_the_answer() {
    let fx = fixture();
    if !confinable(&fx) || !layer::layer_available() {
        return;
    }
    let exec = layer::layered(&fx, "early", 64 << 20);
    let marker = "writer-1000.4949";
    let file = fx.wd.join("grows.txt");
    // A background writer appending to a file of the project (in the layer) as fast as it can,
    // deaf to TERM and HUP, named by `marker` (its `$0`).
    let script = format!(
        "(trap '' TERM HUP; exec sh -c 'while :; do echo x >> grows.txt; done' {marker}) \
         </dev/null >/dev/null 2>&1 & sleep 0.2; echo started"
    );
    let run = |argv: Vec<String>| {
        exec.execute(
            "act_early",
            &ToolArgs::RunCommand(RunCommandArgs {
                argv,
                cwd: None,
                timeout_seconds: None,
                fresh_layer: false,
            }),
        )
    };
    let out = run(vec!["/bin/sh".into(), "-c".into(), script]);
    assert_none_now(marker, &out);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    // The copy in the layer's upper dir, read from outside at once and a moment later.
    let upper = find_named(&fx.state.join("run/early"), "grows.txt").expect("no copy in the layer");
    let at_answer = std::fs::metadata(&upper).unwrap().len();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(std::fs::metadata(&upper).unwrap().len(), at_answer);
    // The next command sees the file's final size, twice: nothing wrote in between.
    let size = || {
        let out = run(vec![
            "/bin/sh".into(),
            "-c".into(),
            "wc -c < grows.txt".into(),
        ]);
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        stdout_of(&out).trim().to_string()
    };
    let first = size();
    assert_ne!(first, "0", "the writer never wrote");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(size(), first, "a writer outlived the answer");
    assert!(!file.exists(), "the real tree was written");
}

/// The first file named `name` under `dir`.
fn find_named(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if entry.file_name() == name {
            return Some(path);
        }
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Some(found) = find_named(&path, name)
        {
            return Some(found);
        }
    }
    None
}

/// The status pipe stays the helper's: the command (with namespaces, and in the Landlock-only
/// fallback, where the helper executes it itself) holds no descriptor but 0, 1 and 2.
#[test]
fn the_command_holds_no_descriptor_of_the_status_pipe() {
    let code = "import os\nheld = []\nfor fd in range(3, 4096):\n    try:\n        \
                os.fstat(fd)\n        held.append(fd)\n    except OSError:\n        pass\n\
                print('held', held)";
    for namespaces in [true, false] {
        let fx = fixture_with(namespaces);
        if !confinable(&fx) {
            return;
        }
        let out = run(&fx, &["python3", "-c", code]);
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(stdout_of(&out).trim(), "held []", "{}", out.output);
    }
}
