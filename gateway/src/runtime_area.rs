//! The command runtime area: made at start (`sandbox::protected::establish_runtime_area`: an
//! unpredictable private name in `/tmp`, recorded in the state dir, never failing on a name
//! another account took), swept before the listener opens (this account's areas no gateway uses
//! any more; in this gateway's own area the dirs of sessions whose broker is gone), and the one
//! deleter ([`Reaper`]) that empties its trash: whatever a session discarded — a layer at
//! `fresh_layer` or stop, the whole dir of a session that ended — is renamed into the trash at
//! once (by its broker or by the gateway) and deleted by the gateway, which outlives sessions.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Make sure the state dir names a private runtime area of ours (commands are refused until
/// it does: the error is logged).
pub fn establish(state_dir: &Path) {
    match sandbox::protected::establish_runtime_area(state_dir) {
        Ok(area) => tracing::info!("command runtime area: {}", area.display()),
        Err(err) => tracing::error!(
            "the command runtime area could not be made ({err}); commands will be refused"
        ),
    }
}

/// The name of a session's dir in the area (what the broker makes, `broker::state`).
pub fn session_dir_name(session_id: &str) -> String {
    session_id
        .trim_start_matches("ns_")
        .chars()
        .take(12)
        .collect()
}

/// Set aside, before the listener opens, this account's orphan areas (see
/// `sandbox::protected::orphan_areas`) and, in `state_dir`'s own area, every entry but the
/// marker and the trash that is not the dir of a session in `live` (names from
/// [`session_dir_name`]); `reaper` deletes them in the background while the gateway serves.
pub fn sweep(home: &Path, state_dir: &Path, live: &HashSet<String>, reaper: &Reaper) {
    let own = sandbox::protected::command_runtime_area(state_dir);
    let mut homes = vec![home.to_path_buf()];
    homes.extend(sandbox::protected::other_homes(home));
    let mut state_dirs = sandbox::protected::instances::other_state_dirs(&homes, state_dir);
    state_dirs.push(state_dir.to_path_buf());
    for area in sandbox::protected::orphan_areas(&state_dirs, &own) {
        reaper.delete_tree(area);
    }
    let moved = stale_session_dirs(&own, live);
    if moved > 0 {
        tracing::info!("{moved} dirs of ended sessions in the command runtime area go");
    }
    reaper.wake();
}

/// Move `area`'s entries that are not the marker, the trash or a dir of a `live` session into
/// the trash (older gateways' `.discarded-*` included); how many.
fn stale_session_dirs(area: &Path, live: &HashSet<String>) -> usize {
    let Ok(entries) = std::fs::read_dir(area) else {
        return 0;
    };
    let trash = area.join(sandbox::layer::TRASH);
    let mut moved = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == sandbox::protected::runtime_area::MARKER
            || name == sandbox::layer::TRASH
            || live.contains(&name)
        {
            continue;
        }
        match sandbox::layer::move_to_trash(&entry.path(), &trash, "session") {
            Ok(()) => moved += 1,
            Err(err) => tracing::warn!("moving {} into the trash: {err}", entry.path().display()),
        }
    }
    moved
}

/// How often the deleter looks into the trash unasked (a broker's `fresh_layer` moves a layer
/// there without telling the gateway).
const TICK: Duration = Duration::from_secs(1);

/// The gateway's one deleter of what sessions discarded: a thread of its own (normal priority:
/// under load a niced deleter fell behind, and the disk is what it protects),
/// emptying the area's trash ([`sandbox::layer::TRASH`]) entry by entry with the safe walk of
/// `sandbox::layer::remove_at`. It outlives every session, never blocks a call, a stop or the
/// gateway's exit (it is not waited for: what it did not finish stays in the trash, and the
/// next start's deleter finishes it).
pub struct Reaper {
    area: PathBuf,
    wake: Mutex<mpsc::Sender<Job>>,
    stats: Arc<ReaperStats>,
}

enum Job {
    Wake,
    /// A whole tree outside the area (an orphan area of this account).
    Tree(PathBuf),
}

/// What the deleter did so far (logs, tests).
#[derive(Debug, Default)]
pub struct ReaperStats {
    /// Entries of the trash (and orphan trees) not yet deleted, at the last look.
    pub pending: AtomicU64,
    /// Files, links and directories deleted.
    pub entries: AtomicU64,
    /// Entries that could not be deleted.
    pub failed: AtomicU64,
}

impl Reaper {
    /// Start the deleter of `area`.
    pub fn start(area: PathBuf) -> Reaper {
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(ReaperStats::default());
        let spawned = std::thread::Builder::new()
            .name("runtime-area-deleter".into())
            .spawn({
                let (area, stats) = (area.clone(), stats.clone());
                move || run(&area, &rx, &stats)
            });
        if let Err(err) = spawned {
            tracing::error!("starting the runtime area's deleter: {err}");
        }
        Reaper {
            area,
            wake: Mutex::new(tx),
            stats,
        }
    }

    pub fn stats(&self) -> &ReaperStats {
        &self.stats
    }

    fn send(&self, job: Job) {
        let _ = self
            .wake
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job);
    }

    /// Look into the trash now.
    pub fn wake(&self) {
        self.send(Job::Wake);
    }

    /// Delete `tree` (outside the area) in the background.
    pub fn delete_tree(&self, tree: PathBuf) {
        self.send(Job::Tree(tree));
    }

    /// A session ended and its broker is gone: its dir in the area (scratch, layer, what its
    /// broker set aside) goes into the trash at once, and is deleted in the background.
    pub fn discard_session(&self, session_id: &str) {
        let dir = self.area.join(session_dir_name(session_id));
        let trash = self.area.join(sandbox::layer::TRASH);
        match sandbox::layer::move_to_trash(&dir, &trash, "session") {
            Ok(()) => self.wake(),
            Err(err) => tracing::warn!(session = %session_id, "discarding its runtime dir: {err}"),
        }
    }
}

/// Longest pause between two looks at a trash holding entries that could not be deleted.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

fn run(area: &Path, rx: &mpsc::Receiver<Job>, stats: &ReaperStats) {
    let trash = area.join(sandbox::layer::TRASH);
    // Entries that could not be deleted are tried again with a doubling pause (a session end
    // still wakes the deleter at once), so they cost neither a core nor a log line a second.
    let mut backoff = Duration::ZERO;
    let mut next_look = std::time::Instant::now();
    loop {
        let mut trees = Vec::new();
        let woken = match rx.recv_timeout(TICK) {
            Ok(job) => {
                trees.extend(tree_of(job));
                true
            }
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        trees.extend(rx.try_iter().filter_map(tree_of));
        for tree in trees {
            tally(stats, sandbox::layer::remove_path(&tree), &tree);
        }
        if woken || std::time::Instant::now() >= next_look {
            let failed_before = stats.failed.load(Ordering::Relaxed);
            empty_trash(&trash, stats);
            backoff = if stats.failed.load(Ordering::Relaxed) > failed_before {
                (backoff * 2).clamp(TICK * 2, MAX_BACKOFF)
            } else {
                Duration::ZERO
            };
            next_look = std::time::Instant::now() + backoff;
        }
    }
}

fn tree_of(job: Job) -> Option<PathBuf> {
    match job {
        Job::Wake => None,
        Job::Tree(tree) => Some(tree),
    }
}

/// Delete every entry of the trash, oldest listing first.
fn empty_trash(trash: &Path, stats: &ReaperStats) {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsFd;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(trash, flags, Mode::empty()) else {
        stats.pending.store(0, Ordering::Relaxed);
        return;
    };
    let Ok(entries) = std::fs::read_dir(trash) else {
        return;
    };
    let names: Vec<std::ffi::OsString> = entries.flatten().map(|e| e.file_name()).collect();
    stats.pending.store(names.len() as u64, Ordering::Relaxed);
    for name in names {
        let started = std::time::Instant::now();
        let removed = sandbox::layer::remove_at(fd.as_fd(), &name);
        tracing::debug!(
            "deleted {} entries of a discarded {:?} in {} ms",
            removed.entries,
            name,
            started.elapsed().as_millis()
        );
        tally(stats, removed, &trash.join(&name));
        stats.pending.fetch_sub(1, Ordering::Relaxed);
    }
}

fn tally(stats: &ReaperStats, removed: sandbox::layer::Removed, what: &Path) {
    stats.entries.fetch_add(removed.entries, Ordering::Relaxed);
    stats.failed.fetch_add(removed.failed, Ordering::Relaxed);
    if removed.failed > 0 {
        tracing::warn!(
            "{} entries of {} could not be deleted",
            removed.failed,
            what.display()
        );
    }
}

#[cfg(test)]
mod tests {
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
}
