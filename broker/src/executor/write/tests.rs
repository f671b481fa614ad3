//! Tests of the durable write: the three tools end to end on temp dirs, CAS conflicts injected
//! through the journal callback, modes, read-only directories, adversarial targets, injected
//! errors at every failpoint, and real crashes (`abort`) at every failpoint in a child process.

use super::*;
use crate::executor::edit_ops::{CellType, NotebookEditMode};
use crate::executor::failpoint::{FAILPOINT_ENV, FailAction, arm_thread};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;

struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    policy: PathPolicy,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    fixture_in(tmp)
}

fn fixture_in(tmp: tempfile::TempDir) -> Fixture {
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("work");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let policy = PathPolicy::new(base.join("home"), base.join("state"), vec![]);
    Fixture {
        _tmp: tmp,
        base,
        root,
        policy,
    }
}

impl Fixture {
    fn root(&self) -> WriteRoot {
        WriteRoot::open(&self.policy, &self.root).unwrap()
    }

    fn run(
        &self,
        op: &WriteOp,
        expected: Option<&str>,
        journal: &mut dyn WriteJournal,
    ) -> Result<WriteReceipt, WriteFailure> {
        run_write(&self.policy, &self.root(), "act-1", op, expected, journal)
    }

    /// Run with a journal that records `prepared` and accepts it.
    fn run_ok(
        &self,
        op: &WriteOp,
        expected: Option<&str>,
    ) -> (Result<WriteReceipt, WriteFailure>, Vec<PreparedWrite>) {
        let mut seen = Vec::new();
        let mut journal = |p: &PreparedWrite| {
            seen.push(p.clone());
            Ok(())
        };
        let result = self.run(op, expected, &mut journal);
        (result, seen)
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

fn edit(path: String, old: &str, new: &str, all: bool) -> WriteOp {
    WriteOp::Edit {
        file_path: path,
        old_string: old.into(),
        new_string: new.into(),
        replace_all: all,
    }
}

fn write(path: String, content: &str) -> WriteOp {
    WriteOp::Write {
        file_path: path,
        content: content.into(),
    }
}

/// Names in `dir` that look like our temp files.
fn temps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| is_temp_name(n))
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn edit_once_then_refuses_ambiguous_and_replaces_all() {
    let f = fixture();
    let file = f.root.join("src/lib.rs");
    let pre = sha256_hex(&std::fs::read(&file).unwrap());
    let (receipt, prepared) = f.run_ok(
        &edit(f.path("src/lib.rs"), "fn a()", "fn alpha()", false),
        None,
    );
    let receipt = receipt.unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "fn alpha() {}\nfn b() {}\n"
    );
    assert_eq!(receipt.pre_sha256.as_deref(), Some(pre.as_str()));
    assert_eq!(
        receipt.post_sha256,
        sha256_hex(&std::fs::read(&file).unwrap())
    );
    assert_eq!(receipt.summary, "replaced 1 occurrence");
    assert!(!receipt.created);
    assert_eq!(prepared.len(), 1);
    assert_eq!(prepared[0].pre_sha256, receipt.pre_sha256);
    assert_eq!(prepared[0].post_sha256, receipt.post_sha256);
    assert!(is_temp_name(OsStr::new(&prepared[0].temp_name)));

    let (err, prepared) = f.run_ok(&edit(f.path("src/lib.rs"), "{}", "{ }", false), None);
    let err = err.unwrap_err();
    assert_eq!(err.code, OutcomeCode::MultipleMatches);
    assert!(err.message.contains("2 times"), "{}", err.message);
    assert_eq!(err.disposition, Disposition::NotPrepared);
    assert!(prepared.is_empty(), "nothing prepared for a refused edit");

    let (receipt, _) = f.run_ok(&edit(f.path("src/lib.rs"), "{}", "{ }", true), None);
    assert_eq!(receipt.unwrap().summary, "replaced 2 occurrences");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "fn alpha() { }\nfn b() { }\n"
    );
    assert!(temps(&f.root.join("src")).is_empty());

    let (err, _) = f.run_ok(&edit(f.path("src/missing.rs"), "a", "b", false), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotFound);
    let (err, _) = f.run_ok(&edit(f.path("nodir/missing.rs"), "a", "b", false), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotFound);
    assert!(!f.root.join("nodir").exists());
}

#[test]
fn write_creates_nested_parents_and_overwrites() {
    let f = fixture();
    let (receipt, prepared) = f.run_ok(&write(f.path("a/b/c/new.txt"), "hello\n"), None);
    let receipt = receipt.unwrap();
    assert!(receipt.created);
    assert_eq!(receipt.pre_sha256, None);
    assert_eq!(prepared[0].pre_sha256, None);
    assert_eq!(prepared[0].pre_identity, None);
    let file = f.root.join("a/b/c/new.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\n");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o600, 0o600, "{mode:o}");
    assert_eq!(
        mode & 0o022,
        0,
        "new files are not group/world writable: {mode:o}"
    );

    let (receipt, _) = f.run_ok(&write(f.path("a/b/c/new.txt"), "bye\n"), None);
    let receipt = receipt.unwrap();
    assert!(!receipt.created);
    assert_eq!(receipt.pre_sha256, Some(sha256_hex(b"hello\n")));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "bye\n");
    // Empty content is a valid write.
    f.run_ok(&write(f.path("a/b/c/new.txt"), ""), None)
        .0
        .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"");
    assert!(temps(&f.root.join("a/b/c")).is_empty());
}

#[test]
fn notebook_edit_through_the_durable_write() {
    let f = fixture();
    let nb = serde_json::json!({
        "cells": [
            {"cell_type": "code", "execution_count": 1, "id": "c1", "metadata": {},
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}], "source": ["print('hi')"]},
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# x"]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    let path = f.root.join("nb.ipynb");
    std::fs::write(&path, serde_json::to_string_pretty(&nb).unwrap()).unwrap();
    let op = |cell: Option<&str>, mode, src: Option<&str>, kind| WriteOp::NotebookEdit {
        notebook_path: f.path("nb.ipynb"),
        edit: NotebookEdit {
            cell_id: cell.map(str::to_string),
            mode,
            new_source: src.map(str::to_string),
            cell_type: kind,
        },
    };
    f.run_ok(
        &op(Some("m1"), NotebookEditMode::Replace, Some("# y"), None),
        None,
    )
    .0
    .unwrap();
    f.run_ok(
        &op(
            Some("c1"),
            NotebookEditMode::Insert,
            Some("z = 1"),
            Some(CellType::Code),
        ),
        None,
    )
    .0
    .unwrap();
    let after: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let cells = after["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(cells[0], nb["cells"][0], "untouched cell keeps its outputs");
    assert_eq!(cells[1]["source"], serde_json::json!(["z = 1"]));
    let new_id = cells[1]["id"].as_str().unwrap().to_string();
    assert_eq!(new_id, sha256_hex(b"act-1")[..8]);
    assert_eq!(cells[2]["source"], serde_json::json!(["# y"]));
    f.run_ok(
        &op(Some(&new_id), NotebookEditMode::Delete, None, None),
        None,
    )
    .0
    .unwrap();
    let after: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(after["cells"].as_array().unwrap().len(), 2);

    std::fs::write(f.root.join("bad.ipynb"), "{\"nbformat\": 3}").unwrap();
    let (err, prepared) = f.run_ok(
        &WriteOp::NotebookEdit {
            notebook_path: f.path("bad.ipynb"),
            edit: NotebookEdit {
                cell_id: None,
                mode: NotebookEditMode::Insert,
                new_source: Some("x".into()),
                cell_type: Some(CellType::Code),
            },
        },
        None,
    );
    assert_eq!(err.unwrap_err().code, OutcomeCode::InvalidNotebook);
    assert!(prepared.is_empty());
    assert_eq!(
        std::fs::read_to_string(f.root.join("bad.ipynb")).unwrap(),
        "{\"nbformat\": 3}"
    );
}

#[test]
fn expected_sha256_must_match_before_anything_is_prepared() {
    let f = fixture();
    let file = f.root.join("src/lib.rs");
    let before = std::fs::read(&file).unwrap();
    let wrong = sha256_hex(b"something else");
    let (err, prepared) = f.run_ok(&write(f.path("src/lib.rs"), "x"), Some(&wrong));
    let err = err.unwrap_err();
    assert_eq!(err.code, OutcomeCode::Sha256Mismatch);
    assert_eq!(err.disposition, Disposition::NotPrepared);
    assert!(
        err.message.contains(&sha256_hex(&before)),
        "{}",
        err.message
    );
    assert!(prepared.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // An expectation for a file that does not exist.
    let (err, _) = f.run_ok(&write(f.path("src/new.rs"), "x"), Some(&wrong));
    assert!(err.unwrap_err().message.contains("absent"));
    assert!(!f.root.join("src/new.rs").exists());
    // The right hash, in upper case, is accepted.
    let right = sha256_hex(&before).to_ascii_uppercase();
    f.run_ok(&write(f.path("src/lib.rs"), "x"), Some(&right))
        .0
        .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn journal_failure_writes_nothing() {
    let f = fixture();
    let mut journal = |_: &PreparedWrite| Err("gateway gone".to_string());
    let err = f
        .run(&write(f.path("src/lib.rs"), "x"), None, &mut journal)
        .unwrap_err();
    assert_eq!(err.code, OutcomeCode::JournalFailed);
    assert!(err.message.contains("(gateway gone)"), "{}", err.message);
    assert_eq!(err.disposition, Disposition::NotPrepared);
    assert_eq!(
        std::fs::read_to_string(f.root.join("src/lib.rs")).unwrap(),
        "fn a() {}\nfn b() {}\n"
    );
    assert!(temps(&f.root.join("src")).is_empty());
}

#[test]
fn cas_conflict_when_the_file_changes_after_prepare() {
    let f = fixture();
    let file = f.root.join("src/lib.rs");
    // In place.
    let mut journal = |_: &PreparedWrite| {
        std::fs::write(&file, "someone else\n").unwrap();
        Ok(())
    };
    let err = f
        .run(&write(f.path("src/lib.rs"), "mine\n"), None, &mut journal)
        .unwrap_err();
    assert_eq!(err.code, OutcomeCode::Conflict);
    assert_eq!(err.disposition, Disposition::NotApplied);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "someone else\n");
    assert!(temps(&f.root.join("src")).is_empty(), "temp removed");

    // By rename: same bytes, other inode.
    let mut journal = |_: &PreparedWrite| {
        let other = f.root.join("src/other");
        std::fs::write(&other, "someone else\n").unwrap();
        std::fs::rename(&other, &file).unwrap();
        Ok(())
    };
    let err = f
        .run(&write(f.path("src/lib.rs"), "mine\n"), None, &mut journal)
        .unwrap_err();
    assert_eq!(err.code, OutcomeCode::Conflict);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "someone else\n");

    // A create that someone else wins.
    let new = f.root.join("src/new.rs");
    let mut journal = |_: &PreparedWrite| {
        std::fs::write(&new, "theirs").unwrap();
        Ok(())
    };
    let err = f
        .run(&write(f.path("src/new.rs"), "mine"), None, &mut journal)
        .unwrap_err();
    assert_eq!(err.code, OutcomeCode::Conflict);
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "theirs");
    assert!(temps(&f.root.join("src")).is_empty());
}

#[test]
fn mode_is_preserved() {
    let f = fixture();
    for mode in [0o600, 0o755, 0o640, 0o444] {
        let file = f.root.join(format!("m{mode:o}"));
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        f.run_ok(&write(file.display().to_string(), "new"), None)
            .0
            .unwrap();
        let got = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(got, mode, "{mode:o} -> {got:o}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    }
}

/// Drop the capabilities that bypass file permissions from this thread's effective set (root
/// only; capabilities are per thread on Linux), run `body`, restore them.
fn without_dac_override<T>(body: impl FnOnce() -> T) -> T {
    use rustix::thread::{CapabilitySet, capabilities, set_capabilities};
    if !rustix::process::geteuid().is_root() {
        return body();
    }
    let saved = capabilities(None).unwrap();
    let mut reduced = saved;
    reduced.effective -=
        CapabilitySet::DAC_OVERRIDE | CapabilitySet::DAC_READ_SEARCH | CapabilitySet::FOWNER;
    set_capabilities(None, reduced).unwrap();
    let out = body();
    set_capabilities(None, saved).unwrap();
    out
}

#[test]
fn read_only_directory_is_a_clear_error_and_leaves_no_temp() {
    let f = fixture();
    let dir = f.root.join("src");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let (result, prepared) =
        without_dac_override(|| f.run_ok(&write(f.path("src/lib.rs"), "new"), None));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = result.unwrap_err();
    assert_eq!(err.code, OutcomeCode::PermissionDenied, "{err}");
    assert!(
        err.message.contains("cannot create a temporary file"),
        "{}",
        err.message
    );
    assert_eq!(err.disposition, Disposition::NotApplied);
    assert_eq!(prepared.len(), 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("lib.rs")).unwrap(),
        "fn a() {}\nfn b() {}\n"
    );
    assert!(temps(&dir).is_empty());
}

#[test]
fn refuses_targets_outside_the_root_and_in_git() {
    let f = fixture();
    std::fs::write(f.base.join("outside.txt"), "keep").unwrap();
    std::fs::create_dir_all(f.root.join(".git")).unwrap();
    for (path, code) in [
        (
            f.base.join("outside.txt").display().to_string(),
            OutcomeCode::NotPermitted,
        ),
        (
            format!("{}/../outside.txt", f.root.display()),
            OutcomeCode::InvalidArgument,
        ),
        (
            format!("{}/src/../../outside.txt", f.root.display()),
            OutcomeCode::InvalidArgument,
        ),
        ("outside.txt".to_string(), OutcomeCode::InvalidArgument),
        (f.path(".git/config"), OutcomeCode::NotPermitted),
        (f.path(".GIT/config"), OutcomeCode::NotPermitted),
        (f.path("sub/.Git/x"), OutcomeCode::NotPermitted),
    ] {
        let (err, prepared) = f.run_ok(&write(path.clone(), "pwned"), None);
        let err = err.unwrap_err();
        assert_eq!(err.code, code, "{path}: {err}");
        assert!(prepared.is_empty(), "{path}");
    }
    assert_eq!(
        std::fs::read_to_string(f.base.join("outside.txt")).unwrap(),
        "keep"
    );
    assert!(!f.root.join(".git/config").exists() && !f.root.join(".GIT").exists());
    assert!(!f.root.join("sub").exists());
}

#[test]
fn refuses_symlinked_directories_hard_links_and_fifos() {
    let f = fixture();
    let outside = f.base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("f"), "keep").unwrap();
    symlink(&outside, f.root.join("link")).unwrap();
    symlink(outside.join("f"), f.root.join("filelink")).unwrap();
    let (err, _) = f.run_ok(&write(f.path("link/f"), "pwned"), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotPermitted);
    let (err, _) = f.run_ok(&write(f.path("link/new/f"), "pwned"), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotPermitted);
    let (err, _) = f.run_ok(&write(f.path("filelink"), "pwned"), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotPermitted);
    assert_eq!(std::fs::read_to_string(outside.join("f")).unwrap(), "keep");
    assert!(!outside.join("new").exists());

    std::fs::hard_link(f.root.join("src/lib.rs"), f.base.join("alias")).unwrap();
    let (err, _) = f.run_ok(&edit(f.path("src/lib.rs"), "fn a", "fn z", false), None);
    let err = err.unwrap_err();
    assert_eq!(err.code, OutcomeCode::NotPermitted);
    assert!(err.message.contains("hard link"), "{}", err.message);
    assert_eq!(
        std::fs::read_to_string(f.base.join("alias")).unwrap(),
        "fn a() {}\nfn b() {}\n"
    );

    let fifo = f.root.join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let started = Instant::now();
    let (err, _) = f.run_ok(&write(f.path("fifo"), "x"), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotAFile);
    assert!(started.elapsed() < Duration::from_secs(2));
    let (err, _) = f.run_ok(&write(f.path("src"), "x"), None);
    assert_eq!(err.unwrap_err().code, OutcomeCode::NotAFile);
}

#[test]
fn fifo_swapped_in_after_prepare_does_not_hang() {
    let f = fixture();
    let file = f.root.join("src/lib.rs");
    let mut journal = |_: &PreparedWrite| {
        std::fs::remove_file(&file).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &file,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        Ok(())
    };
    let started = Instant::now();
    let err = f
        .run(&write(f.path("src/lib.rs"), "x"), None, &mut journal)
        .unwrap_err();
    assert_eq!(err.code, OutcomeCode::NotAFile);
    assert_eq!(err.disposition, Disposition::NotApplied);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(temps(&f.root.join("src")).is_empty());
}

#[test]
fn parent_swapped_for_a_symlink_during_the_write_writes_nothing_outside() {
    let f = fixture();
    let outside = f.base.join("outside");
    let mut journal = |_: &PreparedWrite| {
        // Move the parent out of the root and leave a symlink to it in its place.
        std::fs::rename(f.root.join("src"), &outside).unwrap();
        symlink(&outside, f.root.join("src")).unwrap();
        Ok(())
    };
    let err = f
        .run(&write(f.path("src/lib.rs"), "pwned"), None, &mut journal)
        .unwrap_err();
    assert_eq!(err.code, OutcomeCode::Conflict, "{err}");
    assert_eq!(err.disposition, Disposition::NotApplied);
    assert_eq!(
        std::fs::read_to_string(outside.join("lib.rs")).unwrap(),
        "fn a() {}\nfn b() {}\n"
    );
    assert!(temps(&outside).is_empty(), "no temp file outside the root");
}

#[test]
fn injected_errors_at_every_failpoint() {
    for point in Failpoint::ALL {
        let f = fixture();
        let file = f.root.join("src/lib.rs");
        arm_thread(Some((point, FailAction::Error)));
        let (result, prepared) = f.run_ok(&write(f.path("src/lib.rs"), "new\n"), None);
        arm_thread(None);
        let err = result.unwrap_err();
        assert!(err.message.contains(point.name()), "{point:?}: {err}");
        let content = std::fs::read_to_string(&file).unwrap();
        let expected_disposition = match point {
            Failpoint::AfterRead => Disposition::NotPrepared,
            Failpoint::AfterRename | Failpoint::AfterDirFsync => Disposition::Indeterminate,
            _ => Disposition::NotApplied,
        };
        assert_eq!(err.disposition, expected_disposition, "{point:?}");
        assert_eq!(
            prepared.len(),
            usize::from(point != Failpoint::AfterRead),
            "{point:?}"
        );
        if expected_disposition == Disposition::Indeterminate {
            assert_eq!(content, "new\n", "{point:?}");
            let resolution = recover_prepared(&f.policy, &f.root(), &prepared[0]);
            assert_eq!(resolution, CrashResolution::Committed, "{point:?}");
        } else {
            assert_eq!(content, "fn a() {}\nfn b() {}\n", "{point:?}");
        }
        assert!(temps(&f.root.join("src")).is_empty(), "{point:?}");
    }
}

#[test]
fn resolve_after_crash_classifies() {
    use CrashResolution::*;
    assert_eq!(
        resolve_after_crash(Some("post"), Some("pre"), "post"),
        Committed
    );
    assert_eq!(
        resolve_after_crash(Some("pre"), Some("pre"), "post"),
        NotApplied
    );
    assert_eq!(resolve_after_crash(None, None, "post"), NotApplied);
    assert_eq!(resolve_after_crash(Some("post"), None, "post"), Committed);
    assert_eq!(
        resolve_after_crash(Some("other"), Some("pre"), "post"),
        Indeterminate
    );
    assert_eq!(
        resolve_after_crash(None, Some("pre"), "post"),
        Indeterminate
    );
    assert_eq!(
        resolve_after_crash(Some("other"), None, "post"),
        Indeterminate
    );
}

#[test]
fn recover_prepared_is_indeterminate_for_tampered_targets() {
    let f = fixture();
    let prepared = PreparedWrite {
        action_id: "a".into(),
        path: f.path("src/lib.rs"),
        pre_sha256: Some(sha256_hex(b"fn a() {}\nfn b() {}\n")),
        post_sha256: sha256_hex(b"new"),
        temp_name: format!("{TEMP_PREFIX}{}{TEMP_SUFFIX}", "0".repeat(32)),
        pre_identity: None,
    };
    std::fs::write(f.root.join("src").join(&prepared.temp_name), "new").unwrap();
    assert_eq!(
        recover_prepared(&f.policy, &f.root(), &prepared),
        CrashResolution::NotApplied
    );
    assert!(
        temps(&f.root.join("src")).is_empty(),
        "temp removed once resolved"
    );
    std::fs::write(f.root.join("src/lib.rs"), "third").unwrap();
    assert_eq!(
        recover_prepared(&f.policy, &f.root(), &prepared),
        CrashResolution::Indeterminate
    );
    std::fs::remove_file(f.root.join("src/lib.rs")).unwrap();
    symlink(f.base.join("x"), f.root.join("src/lib.rs")).unwrap();
    assert_eq!(
        recover_prepared(&f.policy, &f.root(), &prepared),
        CrashResolution::Indeterminate
    );
    std::fs::remove_file(f.root.join("src/lib.rs")).unwrap();
    std::fs::write(f.root.join("src/lib.rs"), "new").unwrap();
    std::fs::hard_link(f.root.join("src/lib.rs"), f.base.join("alias")).unwrap();
    assert_eq!(
        recover_prepared(&f.policy, &f.root(), &prepared),
        CrashResolution::Indeterminate
    );
}

#[test]
fn cleanup_removes_only_our_temp_files() {
    let f = fixture();
    let dir = f.root.join("src");
    let ours = format!("{TEMP_PREFIX}{}{TEMP_SUFFIX}", "ab".repeat(16));
    std::fs::write(dir.join(&ours), "x").unwrap();
    for other in [
        format!("{TEMP_PREFIX}short{TEMP_SUFFIX}"),
        format!("{TEMP_PREFIX}{}{TEMP_SUFFIX}", "AB".repeat(16)),
        "notes.tmp".to_string(),
    ] {
        std::fs::write(dir.join(other), "keep").unwrap();
    }
    let dir_ours = format!("{TEMP_PREFIX}{}{TEMP_SUFFIX}", "cd".repeat(16));
    std::fs::create_dir(dir.join(&dir_ours)).unwrap();
    let removed = cleanup_temp_files(File::open(&dir).unwrap()).unwrap();
    assert_eq!(removed, vec![OsString::from(&ours)]);
    assert!(!dir.join(&ours).exists());
    assert!(
        dir.join(&dir_ours).is_dir(),
        "directories are never removed"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 5);
}

/// Environment variable telling [`crash_child`] which fixture dir to write in.
const CHILD_DIR_ENV: &str = "NG_WRITE_TEST_CHILD_DIR";
/// Environment variable telling [`crash_child`] which file (relative to the root) to write.
const CHILD_FILE_ENV: &str = "NG_WRITE_TEST_CHILD_FILE";

/// Not a test on its own: when started by [`crash_at_every_failpoint`] with the env vars set, it
/// performs one write (which the armed failpoint aborts) and records `prepared` in the dir.
#[test]
fn crash_child() {
    let (Ok(dir), Ok(file)) = (std::env::var(CHILD_DIR_ENV), std::env::var(CHILD_FILE_ENV)) else {
        return;
    };
    // No core files from the intended aborts.
    let none = rustix::process::Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    let _ = rustix::process::setrlimit(rustix::process::Resource::Core, none);
    let base = PathBuf::from(dir);
    let root = base.join("work");
    let policy = PathPolicy::new(base.join("home"), base.join("state"), vec![]);
    let write_root = WriteRoot::open(&policy, &root).unwrap();
    let journal_path = base.join("prepared.json");
    let mut journal = |p: &PreparedWrite| {
        let json = serde_json::to_vec(p).map_err(|e| e.to_string())?;
        std::fs::write(&journal_path, json).map_err(|e| e.to_string())
    };
    let op = write(root.join(file).display().to_string(), "new content\n");
    let result = run_write(&policy, &write_root, "crash-act", &op, None, &mut journal);
    println!("child finished without crashing: {result:?}");
}

#[test]
fn crash_at_every_failpoint() {
    let test_name = format!(
        "{}::crash_child",
        module_path!().split_once("::").map_or("", |(_, rest)| rest)
    );
    let exe = std::env::current_exe().unwrap();
    for (file, old) in [
        ("src/lib.rs", Some("fn a() {}\nfn b() {}\n")),
        ("src/new.rs", None),
    ] {
        for point in Failpoint::ALL {
            let f = fixture();
            let status = std::process::Command::new(&exe)
                .args(["--exact", &test_name, "--nocapture", "--test-threads=1"])
                .env(CHILD_DIR_ENV, &f.base)
                .env(CHILD_FILE_ENV, file)
                .env(FAILPOINT_ENV, format!("{}:abort", point.name()))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(!status.success(), "{point:?}: the child must have crashed");
            let path = f.root.join(file);
            let real = std::fs::read(&path).ok();
            let dir = f.root.join("src");
            let left = temps(&dir);
            let renamed = matches!(point, Failpoint::AfterRename | Failpoint::AfterDirFsync);
            if renamed {
                assert_eq!(real.as_deref(), Some(&b"new content\n"[..]), "{point:?}");
                assert!(left.is_empty(), "{point:?}: {left:?}");
            } else {
                assert_eq!(real.as_deref(), old.map(str::as_bytes), "{point:?} {file}");
                assert!(left.len() <= 1, "{point:?}: {left:?}");
                let temp_expected = matches!(
                    point,
                    Failpoint::AfterTempWritten | Failpoint::AfterTempFsync | Failpoint::AfterCas
                );
                assert_eq!(left.len(), usize::from(temp_expected), "{point:?}");
            }
            let journal = std::fs::read(f.base.join("prepared.json")).ok();
            let Some(journal) = journal else {
                assert_eq!(
                    point,
                    Failpoint::AfterRead,
                    "only a crash before prepare has no record"
                );
                continue;
            };
            let prepared: PreparedWrite = serde_json::from_slice(&journal).unwrap();
            let real_sha = real.as_deref().map(sha256_hex);
            let expected = if renamed {
                CrashResolution::Committed
            } else {
                CrashResolution::NotApplied
            };
            assert_eq!(
                resolve_after_crash(
                    real_sha.as_deref(),
                    prepared.pre_sha256.as_deref(),
                    &prepared.post_sha256
                ),
                expected,
                "{point:?} {file}"
            );
            if point == Failpoint::AfterCas {
                // Leave this one to the generic sweep instead of the targeted recovery.
                let removed = cleanup_temp_files(File::open(&dir).unwrap()).unwrap();
                assert_eq!(removed, vec![OsString::from(&prepared.temp_name)]);
            }
            assert_eq!(
                recover_prepared(&f.policy, &f.root(), &prepared),
                expected,
                "{point:?}"
            );
            assert!(
                temps(&dir).is_empty(),
                "{point:?}: no temp left after recovery"
            );
        }
    }
}

#[test]
fn two_writes_on_one_file_exactly_one_commits() {
    let f = fixture();
    let file = f.root.join("src/lib.rs");
    let pre = sha256_hex(&std::fs::read(&file).unwrap());
    let mut inner: Option<Result<WriteReceipt, WriteFailure>> = None;
    // The second request runs to completion while the first one waits for its `prepared` ack.
    let mut journal = |_: &PreparedWrite| {
        inner = Some(
            f.run_ok(&write(f.path("src/lib.rs"), "second\n"), Some(&pre))
                .0,
        );
        Ok(())
    };
    let outer = f.run(
        &write(f.path("src/lib.rs"), "first\n"),
        Some(&pre),
        &mut journal,
    );
    assert_eq!(outer.unwrap_err().code, OutcomeCode::Conflict);
    assert!(inner.unwrap().is_ok());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "second\n");
    assert!(temps(&f.root.join("src")).is_empty());
}

#[test]
fn crlf_large_and_empty_files_round_trip() {
    let f = fixture();
    let crlf = f.root.join("crlf.txt");
    std::fs::write(&crlf, "a\r\nb\r\n").unwrap();
    f.run_ok(&edit(f.path("crlf.txt"), "b", "c", false), None)
        .0
        .unwrap();
    assert_eq!(std::fs::read(&crlf).unwrap(), b"a\r\nc\r\n");
    let empty = f.root.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let receipt = f.run_ok(&write(f.path("empty.txt"), "x"), None).0.unwrap();
    assert_eq!(receipt.pre_sha256, Some(sha256_hex(b"")));
    let big = "0123456789abcdef".repeat(256 * 1024); // 4 MiB
    f.run_ok(&write(f.path("big.txt"), &big), None).0.unwrap();
    assert_eq!(
        std::fs::read(f.root.join("big.txt")).unwrap().len(),
        big.len()
    );
    // Over the limit: refused before anything is prepared.
    let file = std::fs::File::create(f.root.join("huge.bin")).unwrap();
    file.set_len(edit_ops::MAX_EDIT_FILE_BYTES as u64 + 1)
        .unwrap();
    let (err, prepared) = f.run_ok(&write(f.path("huge.bin"), "x"), None);
    assert!(err.unwrap_err().message.contains("larger than"));
    assert!(prepared.is_empty());
}

/// Large files take the two-thread hashing path and the spliced write: the receipts must still
/// carry the true SHA-256 of the bytes on disk before and after, wherever the change is.
#[test]
fn large_edits_receipts_match_the_disk() {
    let f = fixture();
    let path = f.root.join("large.txt");
    let line = "the quick brown fox jumps over the lazy dog\n";
    let mut text = line.repeat(40_000); // about 1.7 MiB
    text.insert_str(text.len() / 2, "MIDDLE\n");
    text.push_str("END\n");
    std::fs::write(&path, &text).unwrap();
    let check = |op: WriteOp, expected: String| {
        let before = std::fs::read(&path).unwrap();
        let receipt = f.run_ok(&op, None).0.unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after, expected.as_bytes());
        assert_eq!(receipt.pre_sha256, Some(sha256_hex(&before)));
        assert_eq!(receipt.post_sha256, sha256_hex(&after));
        assert_eq!(receipt.bytes_written, after.len() as u64);
        expected
    };
    let p = || f.path("large.txt");
    let text = check(
        edit(p(), "MIDDLE\n", "CENTRE\n", false),
        text.replace("MIDDLE", "CENTRE"),
    );
    let text = check(edit(p(), "END\n", "", false), text.replace("END\n", ""));
    // 40 000 runs: written as one buffer.
    let text = check(edit(p(), "fox", "cat", true), text.replace("fox", "cat"));
    let mut rewritten = text.clone();
    rewritten.replace_range(text.len() - 10..text.len() - 9, "#");
    let text = check(write(p(), &rewritten), rewritten);
    check(
        write(p(), &text[..text.len() / 3]),
        text[..text.len() / 3].to_string(),
    );
    assert!(temps(&f.root).is_empty());
}

/// Environment variable telling [`disk_full_child`] the fixture base, whose `work` dir is a
/// 256 KiB tmpfs in the child's own mount namespace.
const DISK_FULL_DIR_ENV: &str = "NG_WRITE_TEST_DISK_FULL_DIR";

/// Not a test on its own: started by [`disk_full_is_a_clear_error_and_leaves_nothing`] inside
/// `unshare -Urm` with a tiny tmpfs on the write root.
#[test]
fn disk_full_child() {
    let Ok(dir) = std::env::var(DISK_FULL_DIR_ENV) else {
        return;
    };
    let base = PathBuf::from(dir);
    let root = base.join("work");
    std::fs::write(root.join("small.txt"), "keep me\n").unwrap();
    // Fill the file system but for a little room.
    let mut filler = File::create(root.join("filler")).unwrap();
    let chunk = vec![0u8; 4096];
    while filler
        .write_all(&chunk)
        .and_then(|()| filler.sync_all())
        .is_ok()
    {}
    drop(filler);
    let len = std::fs::metadata(root.join("filler")).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(root.join("filler"))
        .unwrap()
        .set_len(len.saturating_sub(16 * 1024))
        .unwrap();
    let policy = PathPolicy::new(base.join("home"), base.join("state"), vec![]);
    let write_root = WriteRoot::open(&policy, &root).unwrap();
    let mut journal = |_: &PreparedWrite| Ok(());
    let big = "x".repeat(200 * 1024);
    let op = write(root.join("big.txt").display().to_string(), &big);
    let created = run_write(&policy, &write_root, "full-1", &op, None, &mut journal).unwrap_err();
    let op = edit(
        root.join("small.txt").display().to_string(),
        "keep",
        &big,
        false,
    );
    let edited = run_write(&policy, &write_root, "full-2", &op, None, &mut journal).unwrap_err();
    for failure in [&created, &edited] {
        assert_eq!(failure.code, OutcomeCode::NoSpace, "{failure:?}");
        assert_eq!(failure.disposition, Disposition::NotApplied, "{failure:?}");
        assert!(
            failure.message.contains("cannot write the new content"),
            "{failure:?}"
        );
    }
    assert!(!root.join("big.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("small.txt")).unwrap(),
        "keep me\n"
    );
    assert!(temps(&root).is_empty(), "{:?}", temps(&root));
    println!("DISK_FULL_CHILD_OK");
}

#[test]
fn disk_full_is_a_clear_error_and_leaves_nothing() {
    let test_name = format!(
        "{}::disk_full_child",
        module_path!().split_once("::").map_or("", |(_, rest)| rest)
    );
    let f = fixture();
    // A private mount namespace with a 256 KiB tmpfs over the write root; unprivileged user
    // namespaces (or root) are required, and their absence fails the test rather than skips it.
    let out = std::process::Command::new("unshare")
        .args([
            "-Urm",
            "sh",
            "-c",
            r#"mount -t tmpfs -o size=256k tmpfs "$0/work" && shift && exec "$@""#,
        ])
        .arg(&f.base)
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", &test_name, "--nocapture", "--test-threads=1"])
        .env(DISK_FULL_DIR_ENV, &f.base)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("DISK_FULL_CHILD_OK"),
        "disk-full child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
