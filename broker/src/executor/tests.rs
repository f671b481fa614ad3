//! Unit tests of the executor: Read, FindFiles and SearchText against real temp dirs (symlinks,
//! hard links, FIFOs, `.git`, protected dirs, binary files), each asserting the exact error code;
//! and why a write is refused without a profile, a write root or a journal. This file holds the shared fixture and helpers; each tool's tests are a submodule.

use super::*;
use common::tools::{FindFilesArgs, ReadArgs, SearchTextArgs};
use std::time::{Duration, Instant};

mod adversarial;
mod bounds_and_races;
mod find_files;
mod read;
mod search_text;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    exec: Executor,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let state = root.join("state");
    let work = root.join("work");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY needle").unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("gateway.db"), "needle").unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![]);
    Fixture {
        _tmp: tmp,
        exec: Executor::new(policy, work),
        root,
        home,
        state,
    }
}

/// A FIFO at `path` (owner read/write).
fn mkfifo(path: &Path) {
    use rustix::fs::{CWD, FileType, Mode, mknodat};
    mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn read(exec: &Executor, path: &Path, offset: Option<u64>, limit: Option<u64>) -> ActionOutcome {
    exec.execute(
        "a1",
        &ToolArgs::Read(ReadArgs {
            file_path: path.display().to_string(),
            offset,
            limit,
        }),
    )
}

fn find(exec: &Executor, path: &Path, name_contains: Option<&str>) -> ActionOutcome {
    exec.execute(
        "a2",
        &ToolArgs::FindFiles(FindFilesArgs {
            path: Some(path.display().to_string()),
            name_contains: name_contains.map(str::to_string),
            max_depth: None,
            max_results: None,
        }),
    )
}

fn search(
    exec: &Executor,
    path: &Path,
    query: &str,
    case_sensitive: Option<bool>,
) -> ActionOutcome {
    exec.execute(
        "a3",
        &ToolArgs::SearchText(SearchTextArgs {
            query: query.to_string(),
            path: Some(path.display().to_string()),
            case_sensitive,
            max_results: None,
        }),
    )
}

fn assert_error(outcome: &ActionOutcome, code: OutcomeCode) {
    assert_eq!(outcome.status, ToolStatus::Error, "{outcome:?}");
    assert_eq!(outcome.error_code, Some(code), "{outcome:?}");
    assert!(!outcome.output.is_empty());
}

fn find_with(
    exec: &Executor,
    path: &Path,
    max_depth: Option<u32>,
    max_results: Option<u32>,
) -> ActionOutcome {
    exec.execute(
        "a2",
        &ToolArgs::FindFiles(FindFilesArgs {
            path: Some(path.display().to_string()),
            name_contains: None,
            max_depth,
            max_results,
        }),
    )
}

fn search_max(exec: &Executor, path: &Path, query: &str, max_results: u32) -> ActionOutcome {
    exec.execute(
        "a3",
        &ToolArgs::SearchText(SearchTextArgs {
            query: query.to_string(),
            path: Some(path.display().to_string()),
            case_sensitive: None,
            max_results: Some(max_results),
        }),
    )
}

#[test]
fn writes_say_why_they_cannot_be_made_durable() {
    let f = fixture();
    let target = f.root.join("work/new.txt");
    let args = ToolArgs::Write(common::tools::WriteArgs {
        file_path: target.display().to_string(),
        content: "x".into(),
        expected_sha256: None,
    });
    let outcome = f.exec.execute("act-1", &args);
    assert_error(&outcome, OutcomeCode::NotPermitted);
    assert!(
        outcome.output.contains("does not allow writes"),
        "{outcome:?}"
    );
    // A write profile, but no gateway to record the intent: refused before anything is written.
    let outcome = f.exec.clone().with_writes(None).execute("act-2", &args);
    assert_error(&outcome, OutcomeCode::JournalFailed);
    assert!(
        outcome
            .output
            .contains("(no gateway records writes here); nothing was written"),
        "{outcome:?}"
    );
    assert!(!target.exists());
    // A working directory that cannot be opened as the write root: every write says why.
    let policy = PathPolicy::new(f.home.clone(), f.state.clone(), vec![]);
    let gone = Executor::new(policy, f.root.join("gone")).with_writes(None);
    let outcome = gone.execute("act-3", &args);
    assert_error(&outcome, OutcomeCode::NotPermitted);
    assert!(
        outcome
            .output
            .contains("the working directory cannot be written: "),
        "{outcome:?}"
    );
}
