//! The toolchain checks `scripts/run` and `scripts/test` make first (`scripts/preflight`,
//! `scripts/install-node`), run with stand-in `rustc` and `node` binaries: a Rust older than the
//! workspace's `rust-version` stops them with a message saying what to install, and a system Node
//! that is new enough is used as it is. (Installing the pinned Node 22 needs the npm registry; it
//! runs in `scripts/test` itself.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A directory with a stand-in `name` that prints `line` (for `--version`).
fn stand_in(dir: &Path, name: &str, line: &str) {
    let path = dir.join(name);
    tests::executables::write(&path, &format!("#!/bin/sh\necho '{line}'\n")).unwrap();
}

/// Run a script with `dir` first on PATH.
fn run(script: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(repo_root().join(script));
    cmd.env("PATH", path);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn an_old_rust_stops_preflight_with_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    stand_in(dir.path(), "rustc", "rustc 1.70.0 (90c541806 2023-05-31)");
    let out = run("scripts/preflight", dir.path(), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let want = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    assert!(
        err.contains(&format!(
            "rustc 1.70.0 is older than the workspace's rust-version {want}"
        )),
        "{err}"
    );
    assert!(err.contains("rustup update stable"), "{err}");
}

#[test]
fn a_new_enough_system_node_is_used_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    stand_in(dir.path(), "node", "v24.1.0");
    let out = run("scripts/install-node", dir.path(), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().last(), Some(dir.path().to_str().unwrap()));
    assert!(err.contains("system node v24.1.0 is new enough"), "{err}");
}

#[test]
fn an_old_system_node_is_named_as_too_old() {
    let dir = tempfile::tempdir().unwrap();
    stand_in(dir.path(), "node", "v20.20.2");
    // A host the pinned package does not exist for: nothing is downloaded. (If scripts/test already
    // installed the pinned copy into .tools/, that one is used instead.)
    stand_in(dir.path(), "uname", "Darwin");
    let out = run("scripts/install-node", dir.path(), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("system node v20.20.2 is older than 22.19.0"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_ne!(stdout.lines().last(), Some(dir.path().to_str().unwrap()));
    if !out.status.success() {
        assert!(err.contains("install Node 22 yourself"), "{err}");
    }
}
