//! Ordinary tools run and their receipts carry the exit code; the report names every confinement
//! layer on this host; deny-list refusals (also through wrappers) name the rule.

use super::*;

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
    tests::executables::write(&script, "#!/bin/sh\necho \"hello from $(pwd)\"\n").unwrap();
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
    assert_eq!(out.error_code, Some(OutcomeCode::NonzeroExit));
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
        assert_eq!(out.error_code, Some(OutcomeCode::NotPermitted), "{argv:?}");
        assert!(out.output.contains("deny list"), "{argv:?}: {}", out.output);
        assert_eq!(out.receipt.exit_code, None);
    }
    assert!(victim.exists());
    let out = run_in(&fx, &["true"], Some("/"), None);
    assert_eq!(out.error_code, Some(OutcomeCode::InvalidArgument));
    let out = run(&fx, &["no-such-tool-xyz"]);
    assert_eq!(out.error_code, Some(OutcomeCode::NotFound));
}
