//! The start sweep, the deleter, and the watch that replaces an area that went.

use super::*;

/// The trash is used only if it is a private dir of ours (`create_dir_all` makes 0755).
fn private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn only_the_dirs_of_live_sessions_the_marker_and_the_trash_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let area = tmp.path();
    for dir in [
        "live0000000a",
        "dead0000000b/layer/k/upper",
        ".discarded-old/x",
        ".discarded/layer-1/y",
    ] {
        std::fs::create_dir_all(area.join(dir)).unwrap();
    }
    std::fs::write(area.join(sandbox::protected::runtime_area::MARKER), "/s").unwrap();
    private(&area.join(".discarded"));
    let live: HashSet<String> = [session_dir_name("ns_live0000000a123")].into();
    assert_eq!(stale_session_dirs(area, &live), 2);
    let mut left: Vec<String> = std::fs::read_dir(area)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".discarded", ".state-dir", "live0000000a"]);
    assert_eq!(
        std::fs::read_dir(area.join(".discarded")).unwrap().count(),
        3
    );
}

/// The deleter empties the trash by itself (a broker's `fresh_layer` tells nobody) and
/// deletes an ended session's dir it is handed.
#[test]
fn the_deleter_empties_the_trash_and_ended_sessions_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let area = tmp.path().to_path_buf();
    std::fs::create_dir_all(area.join(".discarded/layer-1/a/b")).unwrap();
    std::fs::create_dir_all(area.join("0123456789ab/layer/k/upper")).unwrap();
    std::fs::write(area.join("0123456789ab/layer/k/upper/f"), "x").unwrap();
    private(&area.join(".discarded"));
    let reaper = Reaper::start(area.clone());
    reaper.discard_session("ns_0123456789abcdef");
    assert!(!area.join("0123456789ab").exists());
    // The counts are added once a pass ends, after its last removal empties the trash:
    // wait for both.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(area.join(".discarded")).unwrap().count() > 0
        || reaper.stats().entries.load(Ordering::Relaxed) < 8
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the trash was not emptied and counted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(reaper.stats().failed.load(Ordering::Relaxed), 0);
}

/// RT29 B3: the area of a running gateway is removed (a `/tmp` cleaner) and another account
/// takes its name (here a symlink to the owner's project): the watch makes a new area under a
/// fresh name, records it, and leaves the name and the project untouched; it holds a shared lock
/// on the area (what keeps systemd-tmpfiles from aging it).
#[test]
fn the_watch_replaces_an_area_that_went_and_never_uses_the_name() {
    let state = tempfile::tempdir().unwrap();
    let state = std::fs::canonicalize(state.path()).unwrap();
    let project = tempfile::tempdir().unwrap();
    let first = sandbox::protected::establish_runtime_area(&state).unwrap();
    let reaper = Reaper::start(first.clone());
    reaper.watch(&state);
    // The watch locks the area: an exclusive lock (what a cleaner takes first) is refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let dir = std::fs::File::open(&first).unwrap();
    use rustix::fs::{FlockOperation, flock};
    while flock(&dir, FlockOperation::NonBlockingLockExclusive).is_ok() {
        flock(&dir, FlockOperation::Unlock).unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "the area is not locked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(dir);
    sandbox::layer::remove(&first);
    std::os::unix::fs::symlink(project.path(), &first).unwrap();
    let _link = Removed(first.clone());
    while reaper.area() == first {
        assert!(
            std::time::Instant::now() < deadline,
            "the area was not replaced"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let new = reaper.area();
    assert_eq!(sandbox::protected::command_runtime_area(&state), new);
    assert!(sandbox::protected::verify_area(&new, &state).is_ok());
    assert_eq!(reaper.stats().replaced.load(Ordering::Relaxed), 1);
    // The trash is the new area's: a session's dir goes there, nothing at the old name.
    std::fs::create_dir(new.join("0123456789ab")).unwrap();
    reaper.discard_session("ns_0123456789abcdef");
    assert!(!new.join("0123456789ab").exists());
    assert!(std::fs::symlink_metadata(&first).unwrap().is_symlink());
    assert_eq!(std::fs::read_dir(project.path()).unwrap().count(), 0);
    sandbox::layer::remove(&new);
}

/// Removes what a test put in `/tmp`, also when it fails.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        sandbox::layer::remove(&self.0);
    }
}
