//! Unit tests of `PathPolicy`: lexical refusals, the protected set, and the no-follow openers
//! against real symlinks, hard links, FIFOs and directories in temp dirs. This file holds the
//! shared fixture and helpers; the tests are grouped by topic in its submodules.

use super::*;
use std::ffi::CString;
use std::io::Read;
use std::time::{Duration, Instant};

mod adversarial;
mod case_folding;
mod opening;
mod pseudo_fs;
mod walk;
mod working_directories;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    policy: PathPolicy,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    // Canonical so that e.g. macOS /var -> /private/var does not trip the symlink walk.
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let state = root.join("state");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "secret").unwrap();
    std::fs::write(state.join("gateway.db"), "db").unwrap();
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![root.join("extra")]);
    Fixture {
        _tmp: tmp,
        root,
        home,
        state,
        policy,
    }
}

fn code(r: Result<(File, Metadata), PathRefusal>) -> OutcomeCode {
    r.unwrap_err().code()
}

/// Exchange two names atomically (Linux `renameat2(RENAME_EXCHANGE)`).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
}
