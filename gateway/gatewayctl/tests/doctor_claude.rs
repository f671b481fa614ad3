//! `doctor`'s Claude Code and token checks: it finds Claude Code as the gateway does (CLAUDE_BIN,
//! then `$HOME/.npm-global/bin/claude`) and the copy scripts/run installed under `.tools/`, warns
//! when its version is not the pin of scripts/install-claude-code, and knows a token given
//! through the environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};

use gatewayctl::{Command, DoctorArgs};
use support::*;

/// The pin, read here independently from the script doctor reads it from.
fn pinned() -> String {
    let script = std::fs::read_to_string(repo_root().join("scripts/install-claude-code")).unwrap();
    let line = script
        .lines()
        .find(|l| l.starts_with("CLAUDE_CODE_VERSION="))
        .expect("the pin line");
    line.split(":-")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("a default version")
        .to_string()
}

/// An executable at `path` that prints `<version> (Claude Code)`, like the real CLI.
fn fake_claude(path: &Path, version: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    tests::executables::write(
        path,
        &format!("#!/bin/sh\necho \"{version} (Claude Code)\"\n"),
    )
    .unwrap();
    path.to_path_buf()
}

fn args(f: &Fixture, claude_bin: Option<PathBuf>, token: Option<&str>) -> DoctorArgs {
    DoctorArgs {
        service_file: Vec::new(),
        claude_bin,
        checkout: Some(f.dir.path().join("checkout")),
        home: Some(f.dir.path().join("home")),
        token: token.map(str::to_string),
        skip_host_probes: true,
    }
}

fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| {
            l.get(6..)
                .is_some_and(|rest| rest.starts_with(&format!("{name}  ")))
        })
        .unwrap_or_else(|| panic!("no `{name}` check in\n{out}"))
}

#[test]
fn the_pinned_version_is_ok_and_another_one_warns() {
    let f = Fixture::new();
    let bin = fake_claude(&f.dir.path().join("bin/claude"), &pinned());
    let (out, _) = f.run(false, Command::Doctor(args(&f, Some(bin), None)));
    assert!(line(&out, "claude code").starts_with("OK "), "{out}");

    let bin = fake_claude(&f.dir.path().join("other/claude"), "2.0.1");
    let (out, _) = f.run(false, Command::Doctor(args(&f, Some(bin), None)));
    let check = line(&out, "claude code");
    assert!(
        check.starts_with("WARN")
            && check.ends_with(&format!("2.0.1 (Claude Code), not the pinned {}", pinned())),
        "{out}"
    );
    assert!(
        out.contains("scripts/install-claude-code holds the pin"),
        "{out}"
    );
}

#[test]
fn without_claude_bin_it_looks_where_the_gateway_and_scripts_run_do() {
    let f = Fixture::new();
    // Only the copy scripts/run installed: the gateway started by hand would find nothing.
    let installed = fake_claude(
        &f.dir
            .path()
            .join("checkout/.tools/claude-code/node_modules/.bin/claude"),
        &pinned(),
    );
    let (out, result) = f.run(false, Command::Doctor(args(&f, None, None)));
    assert!(result.is_ok(), "{out}");
    let check = line(&out, "claude code");
    assert!(
        check.starts_with("WARN") && check.contains("CLAUDE_BIN is unset"),
        "{out}"
    );
    assert!(
        out.contains(&format!("fix: export CLAUDE_BIN={}", installed.display())),
        "{out}"
    );
    assert!(
        line(&out, "claude code (scripts/run)").starts_with("OK "),
        "{out}"
    );

    // The gateway's default location is what it uses; the scripts/run copy is shown beside it.
    let default = fake_claude(&f.dir.path().join("home/.npm-global/bin/claude"), "2.0.1");
    let (out, _) = f.run(false, Command::Doctor(args(&f, None, None)));
    let check = line(&out, "claude code");
    assert!(
        check.starts_with("WARN") && check.contains(&default.display().to_string()),
        "{out}"
    );
    assert!(
        line(&out, "claude code (scripts/run)").starts_with("OK "),
        "{out}"
    );

    // Neither: a FAIL that names both places' fix.
    std::fs::remove_file(&default).unwrap();
    std::fs::remove_file(&installed).unwrap();
    let (out, result) = f.run(false, Command::Doctor(args(&f, None, None)));
    assert!(result.is_err());
    let check = line(&out, "claude code");
    assert!(
        check.starts_with("FAIL") && check.contains("scripts/run has installed none"),
        "{out}"
    );
}

#[test]
fn a_token_from_the_environment_is_known() {
    let f = Fixture::new();
    let bin = fake_claude(&f.dir.path().join("bin/claude"), &pinned());
    let (out, _) = f.run(
        false,
        Command::Doctor(args(&f, Some(bin.clone()), Some("ngw_from_env"))),
    );
    let check = line(&out, "access token");
    assert!(
        check.starts_with("OK ")
            && check.contains("not used: the gateway takes CLAUDE_TOOLS_GATEWAY_TOKEN"),
        "{out}"
    );
    assert!(
        !out.contains("ngw_from_env"),
        "the token is printed:\n{out}"
    );

    std::fs::remove_file(f.state.join("auth/access-token")).unwrap();
    let (out, _) = f.run(
        false,
        Command::Doctor(args(&f, Some(bin), Some("ngw_from_env"))),
    );
    let check = line(&out, "access token");
    assert!(
        check.starts_with("OK ") && check.contains("from CLAUDE_TOOLS_GATEWAY_TOKEN"),
        "{out}"
    );
    let (out, _) = f.run(
        false,
        Command::Doctor(args(
            &f,
            Some(fake_claude(&f.dir.path().join("b2/claude"), &pinned())),
            None,
        )),
    );
    assert!(line(&out, "access token").starts_with("WARN"), "{out}");
}
