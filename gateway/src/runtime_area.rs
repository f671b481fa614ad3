//! The command runtime area: made at start (`sandbox::protected::establish_runtime_area`: an
//! unpredictable private name in `/tmp`, recorded in the state dir, never failing on a name
//! another account took), swept before the listener opens (this account's areas no gateway uses
//! any more; in this gateway's own area the dirs of sessions whose broker is gone), and the one
//! deleter ([`Reaper`]) that empties its trash: whatever a session discarded — a layer at
//! `fresh_layer` or stop, the whole dir of a session that ended — is renamed into the trash at
//! once (by its broker or by the gateway) and deleted by the gateway, which outlives sessions.
//! While the gateway runs the deleter also watches the area (RT29 B3): it holds a shared `flock`
//! on it (systemd-tmpfiles skips a directory it cannot lock when aging `/tmp`), checks its
//! identity every [`TICK`], and when the area is gone or is no longer the directory it made,
//! makes a new one under a fresh name (`sandbox::protected::replace_runtime_area`), which the
//! brokers find at their next command; what holds the old name is never touched.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Make sure the state dir names a private runtime area of ours (commands are refused until it
/// does: the watch started next makes one at its first look). Whether it does.
pub fn establish(state_dir: &Path) -> bool {
    match sandbox::protected::establish_runtime_area(state_dir) {
        Ok(area) => {
            tracing::info!("command runtime area: {}", area.display());
            true
        }
        Err(err) => {
            tracing::error!(
                "the command runtime area could not be made ({err}); commands will be refused"
            );
            false
        }
    }
}

pub use sandbox::protected::session_dir_name;

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
    /// The area now (the watcher replaces it).
    area: Arc<Mutex<PathBuf>>,
    wake: Mutex<mpsc::Sender<Job>>,
    stats: Arc<ReaperStats>,
}

enum Job {
    Wake,
    /// A whole tree outside the area (an orphan area of this account).
    Tree(PathBuf),
    /// Watch the area of this state dir from now on (see [`Reaper::watch`]).
    Watch(PathBuf),
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
    /// Areas made because the one in use was gone or replaced.
    pub replaced: AtomicU64,
}

impl Reaper {
    /// Start the deleter of `area`.
    pub fn start(area: PathBuf) -> Reaper {
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(ReaperStats::default());
        let area = Arc::new(Mutex::new(area));
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

    /// The area in use now.
    pub fn area(&self) -> PathBuf {
        lock(&self.area).clone()
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

    /// From now on keep the area `state_dir` records in place: locked against `/tmp` cleaners,
    /// and replaced under a fresh name when it is gone or replaced (the gateway's own, once
    /// established; in-process tests watch nothing).
    pub fn watch(&self, state_dir: &Path) {
        self.send(Job::Watch(state_dir.to_path_buf()));
    }

    /// A session ended and its broker is gone: its dir in the area (scratch, layer, what its
    /// broker set aside) goes into the trash at once, and is deleted in the background.
    pub fn discard_session(&self, session_id: &str) {
        let area = self.area();
        let dir = area.join(session_dir_name(session_id));
        let trash = area.join(sandbox::layer::TRASH);
        match sandbox::layer::move_to_trash(&dir, &trash, "session") {
            Ok(()) => self.wake(),
            Err(err) => tracing::warn!(session = %session_id, "discarding its runtime dir: {err}"),
        }
    }
}

fn lock(area: &Mutex<PathBuf>) -> std::sync::MutexGuard<'_, PathBuf> {
    area.lock().unwrap_or_else(|p| p.into_inner())
}

/// The area being watched: its state dir, the identity it had when checked, and the descriptor
/// holding the shared lock that keeps `/tmp` cleaners off it.
struct Watched {
    state_dir: PathBuf,
    id: (u64, u64),
    _locked: Option<OwnedFd>,
}

impl Watched {
    /// Lock `area` (verified as `id`) for as long as it is watched.
    fn new(state_dir: PathBuf, area: &sandbox::protected::VerifiedArea) -> Watched {
        use rustix::fs::{FlockOperation, Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let locked = rustix::fs::open(&area.path, flags, Mode::empty())
            .ok()
            .filter(|fd| rustix::fs::flock(fd, FlockOperation::NonBlockingLockShared).is_ok());
        Watched {
            state_dir,
            id: area.id,
            _locked: locked,
        }
    }
}

/// Check the watched area; when it is gone or not the one checked before, make a new one and
/// use it from now on.
fn keep_area(area: &Mutex<PathBuf>, watched: &mut Option<Watched>, stats: &ReaperStats) {
    let Some(watch) = watched.as_ref() else {
        return;
    };
    let current = lock(area).clone();
    let why = match sandbox::protected::verify_area(&current, &watch.state_dir) {
        Ok(found) if found.id == watch.id => return,
        Ok(_) => "it is another directory than the one made".to_string(),
        Err(err) => err.to_string(),
    };
    let state_dir = watch.state_dir.clone();
    let made = sandbox::protected::replace_runtime_area(&state_dir).and_then(|new| {
        sandbox::protected::verify_area(&new, &state_dir).map_err(std::io::Error::other)
    });
    match made {
        Ok(new) => {
            tracing::warn!(
                "the command runtime area was gone or replaced ({why}); commands now use a new \
                 one: {}",
                new.path.display()
            );
            stats.replaced.fetch_add(1, Ordering::Relaxed);
            *watched = Some(Watched::new(state_dir, &new));
            *lock(area) = new.path.clone();
        }
        // Tried again at the next tick; commands are refused meanwhile (their brokers check).
        Err(err) => tracing::error!(
            "the command runtime area was gone or replaced ({why}) and no new one could be \
             made: {err}"
        ),
    }
}

/// Longest pause between two looks at a trash holding entries that could not be deleted.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

fn run(area: &Mutex<PathBuf>, rx: &mpsc::Receiver<Job>, stats: &ReaperStats) {
    // Entries that could not be deleted are tried again with a doubling pause (a session end
    // still wakes the deleter at once), so they cost neither a core nor a log line a second.
    let mut backoff = Duration::ZERO;
    let mut next_look = std::time::Instant::now();
    let mut watched: Option<Watched> = None;
    loop {
        let mut jobs = Vec::new();
        let woken = match rx.recv_timeout(TICK) {
            Ok(job) => {
                jobs.push(job);
                true
            }
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        jobs.extend(rx.try_iter());
        for job in jobs {
            match job {
                Job::Wake => {}
                Job::Tree(tree) => {
                    tally(stats, sandbox::layer::remove_path(&tree), &tree);
                    // Between removals too: a long one must not hold up replacing an area
                    // that went (brokers wait only a few seconds).
                    keep_area(area, &mut watched, stats);
                }
                Job::Watch(state_dir) => {
                    let current = lock(area).clone();
                    watched = Some(
                        match sandbox::protected::verify_area(&current, &state_dir) {
                            Ok(found) => Watched::new(state_dir, &found),
                            // Not the area even now: replaced at once below.
                            Err(_) => Watched {
                                state_dir,
                                id: (0, 0),
                                _locked: None,
                            },
                        },
                    );
                }
            }
        }
        keep_area(area, &mut watched, stats);
        if woken || std::time::Instant::now() >= next_look {
            let trash = lock(area).join(sandbox::layer::TRASH);
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
mod tests;
