//! The session's copy-on-write layer, as the broker keeps it: which directories a command sees
//! copy-on-write (the owner's HOME, the working directory or managed worktree, a worktree's Git
//! dir), the paths the executor wrote since the last command (their layer copies are dropped
//! before the next one, see `sandbox::layer::forget_written`), the budget, and one command at a
//! time (two overlays on one upper dir are undefined behaviour). On macOS the same dir, budget,
//! `fresh_layer` and removal serve the session's writable dir ([`View::SessionDir`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sandbox::DiskUsage;
use sandbox::layer::Forgot;
use sandbox::spec::LayerSpec;

/// One session's layer. Shared (`Arc`) by the executor's clones.
#[derive(Debug)]
pub struct SessionLayer {
    /// `<command runtime area>/<session>/layer`: protected and masked like the whole area.
    dir: PathBuf,
    /// The area's trash (`sandbox::layer::TRASH`): a discarded layer is moved there, and the
    /// gateway deletes it (this broker may exit first).
    trash: PathBuf,
    /// Bytes the layer may take (every command's writes together).
    budget: u64,
    state: Mutex<LayerState>,
    /// Paths Edit/Write/NotebookEdit wrote since the last command: a lock of its own, so a
    /// write never waits for a running command.
    written: Mutex<Vec<PathBuf>>,
}

#[derive(Debug, Default)]
struct LayerState {
    /// The layer's size after the last command.
    used: DiskUsage,
    /// The exact size, being measured off the result's path after the last command.
    measuring: Option<std::thread::JoinHandle<Walked>>,
    /// How long the last walk of the layer took (spaces the next command's guard's walks).
    walk_took: Duration,
}

/// One walk of the layer: its size, and what the walk cost.
type Walked = (DiskUsage, Duration);

fn walk(dir: &Path) -> Walked {
    let started = Instant::now();
    (sandbox::disk_usage(dir), started.elapsed())
}

pub use sandbox::layer::inode_budget;

/// What `usage` is past, for a layer of `budget` bytes, in words (`None`: within the budget).
fn excess(usage: DiskUsage, budget: u64) -> Option<String> {
    let mib = |bytes: u64| bytes / (1024 * 1024);
    if usage.bytes > budget {
        return Some(format!(
            "holds {} MiB, over its budget of {} MiB",
            usage.bytes.div_ceil(1024 * 1024),
            mib(budget)
        ));
    }
    let inodes = inode_budget(budget);
    (usage.inodes > inodes).then(|| {
        format!(
            "holds {} files and directories, over its budget of {inodes} (one per 4 KiB of its \
             {} MiB)",
            usage.inodes,
            mib(budget)
        )
    })
}

/// Held while a command runs on the layer.
pub struct LayerTurn<'a> {
    layer: &'a SessionLayer,
    /// The session's layer lock, held for the whole command.
    state: MutexGuard<'a, LayerState>,
    pub spec: LayerSpec,
    /// What changed in the layer before this command, for its header (`None`: nothing).
    pub note: Option<String>,
    /// Free bytes and inodes on the layer's file system when the command started.
    free_at_start: DiskUsage,
}

/// What a command gets of the session's layer dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// Linux: overlays of these roots, their writes in the layer.
    Overlays(Vec<PathBuf>),
    /// macOS: the dir itself, writable, with build outputs and caches redirected into it
    /// (`sandbox::env::SESSION_DIR_REDIRECTS`); nothing of the real tree is copied there, so
    /// Edit/Write need no reconciling.
    SessionDir,
}

/// Why a command cannot run on the layer.
#[derive(Debug, thiserror::Error)]
pub enum LayerRefusal {
    #[error(
        "the session's command layer {excess}: run the command with `fresh_layer: true` to \
         start from a clean layer (earlier build outputs and caches are discarded), or the \
         owner raises CLAUDE_TOOLS_COMMAND_LAYER_MB"
    )]
    OverBudget { excess: String },
    #[error(
        "the session's command layer could not be prepared; `fresh_layer: true` starts from a \
         clean one"
    )]
    Broken,
    /// A new layer (the session's first, or a fresh one) and the disk has no room for it.
    #[error("{0}")]
    NoRoom(sandbox::layer::NoRoom),
}

impl SessionLayer {
    pub fn new(dir: PathBuf, trash: PathBuf, budget: u64) -> Self {
        Self {
            dir,
            trash,
            budget,
            state: Mutex::new(LayerState::default()),
            written: Mutex::new(Vec::new()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// The executor wrote `path` for real: the next command must see it, not a layer copy.
    pub fn note_written(&self, path: &Path) {
        // The layer's roots are canonical; a path given through a symlinked parent is mapped
        // the same way (the file itself is never a symlink: writes refuse them).
        let path = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => std::fs::canonicalize(parent)
                .map(|p| p.join(name))
                .unwrap_or_else(|_| path.to_path_buf()),
            _ => path.to_path_buf(),
        };
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path);
    }

    fn take_written(&self) -> Vec<PathBuf> {
        std::mem::take(&mut *self.written.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn give_back_written(&self, paths: Vec<PathBuf>) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        let newer = std::mem::replace(&mut *written, paths);
        written.extend(newer);
    }

    fn lock(&self) -> MutexGuard<'_, LayerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bring the layer up to date for one command: drop it if asked (`fresh`), forget the
    /// layer's copies of paths the executor wrote, check the budget, make the roots' upper/work
    /// dirs (or the session dir's redirected dirs). Holds the layer until the returned turn is
    /// finished.
    pub fn begin(&self, view: View, fresh: bool) -> Result<LayerTurn<'_>, LayerRefusal> {
        let (roots, session_dir) = match view {
            View::Overlays(roots) => (roots, false),
            View::SessionDir => (Vec::new(), true),
        };
        let mut state = self.lock();
        // The last command's exact size, if it is still being measured.
        if let Some(measuring) = state.measuring.take() {
            let provisional = (state.used, state.walk_took);
            (state.used, state.walk_took) = measuring.join().unwrap_or(provisional);
        }
        let mut notes = Vec::new();
        // A new layer needs room for a full one (layers still being deleted count: they are on
        // the disk until they are gone).
        if fresh || std::fs::symlink_metadata(&self.dir).is_err() {
            let area = self.trash.parent().unwrap_or(&self.trash);
            if let Err(no_room) = sandbox::layer::room_for_layer(area, self.budget) {
                return Err(LayerRefusal::NoRoom(no_room));
            }
        }
        if fresh {
            if let Err(err) = sandbox::layer::discard(&self.dir, &self.trash) {
                tracing::error!("setting the command layer aside: {err}");
            }
            if std::fs::symlink_metadata(&self.dir).is_ok() {
                tracing::error!(
                    "the command layer {} could not be removed",
                    self.dir.display()
                );
                return Err(LayerRefusal::Broken);
            }
            self.take_written();
            state.used = DiskUsage::default();
            state.walk_took = Duration::ZERO;
            notes.push("started from a clean layer (fresh_layer)".to_string());
        }
        let written = self.take_written();
        for path in &written {
            let Some(root) = roots
                .iter()
                .filter(|r| path.starts_with(r))
                .max_by_key(|r| r.as_os_str().len())
            else {
                continue;
            };
            match sandbox::layer::forget_written(&self.dir, &self.trash, root, path) {
                Ok(Forgot::Nothing | Forgot::Entry) => {}
                Ok(Forgot::Root) => notes.push(format!(
                    "earlier commands' changes under {} were discarded: a file there was \
                     written with Edit/Write where a command had replaced or removed a parent \
                     directory",
                    sandbox::escape::path_for_display(root)
                )),
                Err(err) => {
                    tracing::error!("dropping the layer's copy of {}: {err}", path.display());
                    // Keep the path: the next command tries again, and is refused until then.
                    self.give_back_written(written.clone());
                    return Err(LayerRefusal::Broken);
                }
            }
        }
        // Real files changed after the layer's copies of them were made (by anyone).
        for root in &roots {
            match sandbox::layer::forget_changed(&self.dir, root) {
                Ok(_) => {}
                Err(err) => {
                    tracing::error!("checking the layer against {}: {err}", root.display());
                    return Err(LayerRefusal::Broken);
                }
            }
        }
        if let Some(excess) = excess(state.used, self.budget) {
            return Err(LayerRefusal::OverBudget { excess });
        }
        let prepared = if session_dir {
            sandbox::layer::prepare_session_dir(&self.dir)
        } else {
            sandbox::layer::prepare(&self.dir, &roots)
        };
        if let Err(err) = prepared {
            tracing::error!("preparing the command layer: {err}");
            return Err(LayerRefusal::Broken);
        }
        Ok(LayerTurn {
            layer: self,
            state,
            spec: LayerSpec {
                dir: self.dir.clone(),
                roots,
            },
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            free_at_start: free_space(&self.dir),
        })
    }

    /// Remove the whole layer (a new broker starts), waiting for a running command; and what
    /// earlier brokers' removals left.
    pub fn discard(&self) {
        let mut state = self.lock();
        if let Some(measuring) = state.measuring.take() {
            let _ = measuring.join();
        }
        self.set_aside();
        sandbox::layer::discard_leftovers(&self.dir, &self.trash);
        state.used = DiskUsage::default();
        state.walk_took = Duration::ZERO;
    }

    /// Remove the whole layer unless a command is running on it (the session stops: its broker
    /// must not wait for a command that may run for minutes, nor for the deletion of a large
    /// layer: it is moved into the trash, which the gateway empties). Whether it was removed.
    pub fn discard_if_idle(&self) -> bool {
        let Ok(mut state) = self.state.try_lock() else {
            return false;
        };
        // A measurement still walking the layer is not waited for (its result is dropped).
        state.measuring = None;
        self.set_aside();
        state.used = DiskUsage::default();
        state.walk_took = Duration::ZERO;
        true
    }

    fn set_aside(&self) {
        if let Err(err) = sandbox::layer::discard(&self.dir, &self.trash) {
            tracing::warn!("moving the command layer into the trash: {err}; removing it now");
            sandbox::layer::remove(&self.dir);
        }
    }
}

/// How often the guard looks at the layer's file system (and may walk the layer).
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// Scheduled walks are spaced by this many walks' time: they take at most one part in
/// `WALK_SHARE + 1` of a core.
const WALK_SHARE: u32 = 20;

/// Watches a running command's writes by walking (measuring) the layer: on a schedule that
/// depends on nobody else — every [`LOOK_EVERY`], or every [`WALK_SHARE`] walks' time for a
/// layer slow to walk — and sooner once the file system's free space or free inodes (cheap to
/// read) fell by more than the room the last walk left, or when the layer's growth between the
/// last two walks says it passes the budget (both spaced by four walks' time, so other writers
/// on the disk cost walks, never a wrongly stopped command). The free space alone is
/// no bound: space others free meanwhile (a discarded layer being deleted, the owner's `rm`)
/// hides the command's writes from it (red team B2). A writer of `W` bytes (or files) a second
/// passes the budget by at most `W × (max(100 ms, 20 w) + w + the supervising loop's tick)`, `w`
/// one walk's time. See docs/design/commands.md (Budget).
pub struct LayerGuard {
    dir: PathBuf,
    budget: u64,
    /// Room the last walk left (before the first: the last command's).
    left: DiskUsage,
    /// Free bytes and inodes just before the last walk (before the first: at the start).
    free_at_walk: DiskUsage,
    last_look: Instant,
    last_walk: Instant,
    walk_took: Duration,
    /// The layer's size at the last walk (before the first: the last command's).
    used: DiskUsage,
    /// When, after the last walk, the layer passes the budget if it keeps growing as fast as
    /// it did between the last two walks (`Duration::MAX`: it did not grow).
    due_at_pace: Duration,
    /// Walks made, and their time together (logs, the cost figure).
    walks: u32,
    walking: Duration,
    /// What the layer was found past, in words (the command is then stopped).
    exceeded: Option<String>,
    /// Free space and inodes kept for the owner's machine (`sandbox::layer::owner_reserve`):
    /// however many sessions' layers together (each within its budget) may not take it.
    reserve: DiskUsage,
    /// The layer's size at the guard's first walk (what this command grew it from).
    first_walk: Option<DiskUsage>,
    /// The disk fell below the reserve while this command's layer grew, in words (the command
    /// is then stopped).
    disk_low: Option<String>,
}

impl LayerGuard {
    /// Why the guard stopped the command, if it did for the layer's budget.
    pub fn exceeded(&self) -> Option<&str> {
        self.exceeded.as_deref()
    }

    /// Why the guard stopped the command, if it did for the disk's reserve.
    pub fn disk_low(&self) -> Option<&str> {
        self.disk_low.as_deref()
    }

    /// Walks of the layer so far, and their time together.
    pub fn walks(&self) -> (u32, Duration) {
        (self.walks, self.walking)
    }

    pub fn over_budget(&mut self) -> bool {
        let since_walk = self.last_walk.elapsed();
        // A steady fast writer is looked at when its pace says it passes the budget, not up to
        // 100 ms later (spaced by four walks' time).
        let at_pace = since_walk >= self.due_at_pace && since_walk >= self.walk_took * 4;
        if !at_pace && self.last_look.elapsed() < LOOK_EVERY {
            return false;
        }
        self.last_look = Instant::now();
        let free = free_space(&self.dir);
        let fell_bytes = self.free_at_walk.bytes.saturating_sub(free.bytes);
        let fell_inodes = self.free_at_walk.inodes.saturating_sub(free.inodes);
        let scheduled = since_walk >= (self.walk_took * WALK_SHARE).max(LOOK_EVERY);
        let low = free.bytes < self.reserve.bytes || free.inodes < self.reserve.inodes;
        let suspicious = (fell_bytes > self.left.bytes || fell_inodes > self.left.inodes)
            && since_walk >= self.walk_took * 4;
        if !(scheduled || suspicious || at_pace) {
            return false;
        }
        // The free space read before the walk: what is written during it counts in the walk
        // and again in the next fall (the guard only looks sooner).
        self.free_at_walk = free;
        let (used, took) = walk(&self.dir);
        self.walk_took = took;
        self.walks += 1;
        self.walking += took;
        let between = self.last_walk.elapsed().as_secs_f64();
        self.last_walk = Instant::now();
        self.left = DiskUsage {
            bytes: self.budget.saturating_sub(used.bytes),
            inodes: inode_budget(self.budget).saturating_sub(used.inodes),
        };
        let due = |left: u64, now: u64, before: u64| match now.saturating_sub(before) {
            0 => None,
            grew => Duration::try_from_secs_f64(left as f64 * between / grew as f64).ok(),
        };
        self.due_at_pace = due(self.left.bytes, used.bytes, self.used.bytes)
            .into_iter()
            .chain(due(self.left.inodes, used.inodes, self.used.inodes))
            .min()
            .unwrap_or(Duration::MAX);
        self.used = used;
        self.exceeded = excess(used, self.budget);
        // Layers within their budgets may still fill the disk together (live sessions ×
        // budget): a command whose layer grows while the disk is below the owner's reserve is
        // stopped too; one that writes nothing is not (the owner's own writes filled it).
        let from = *self.first_walk.get_or_insert(used);
        if low && (used.bytes > from.bytes || used.inodes > from.inodes) {
            self.disk_low = Some(format!(
                "the disk holding command layers has {} MiB free{}, less than the {} MiB kept \
                 free for the owner's machine",
                free.bytes >> 20,
                if free.inodes < self.reserve.inodes {
                    " (and too few free inodes)"
                } else {
                    ""
                },
                self.reserve.bytes >> 20
            ));
        }
        self.exceeded.is_some() || self.disk_low.is_some()
    }
}

/// Free bytes and inodes (for unprivileged users) on `dir`'s file system.
fn free_space(dir: &Path) -> DiskUsage {
    rustix::fs::statvfs(dir)
        .map(|s| DiskUsage {
            bytes: s.f_bavail.saturating_mul(s.f_frsize),
            inodes: s.f_favail,
        })
        .unwrap_or_default()
}

impl LayerTurn<'_> {
    /// The guard for this command's run.
    pub fn guard(&self) -> LayerGuard {
        LayerGuard {
            dir: self.layer.dir.clone(),
            budget: self.layer.budget,
            left: DiskUsage {
                bytes: self.layer.budget.saturating_sub(self.state.used.bytes),
                inodes: inode_budget(self.layer.budget).saturating_sub(self.state.used.inodes),
            },
            free_at_walk: self.free_at_start,
            last_look: Instant::now(),
            // The first scheduled walk after 20 of the last walk's time (100 ms at least):
            // short commands on a large layer end before it.
            last_walk: Instant::now(),
            walk_took: self.state.walk_took,
            used: self.state.used,
            first_walk: None,
            reserve: sandbox::layer::owner_reserve(&self.layer.dir).unwrap_or_default(),
            disk_low: None,
            due_at_pace: Duration::MAX,
            walks: 0,
            walking: Duration::ZERO,
            exceeded: None,
        }
    }

    /// After the command: the layer's size; past the budget, the words for the result. Walking
    /// a build's layer after every command costs tens of milliseconds, so the size is first
    /// estimated from the free space and inodes the command took (other writers only make it
    /// larger), and measured exactly only when the estimate passes the budget.
    pub fn finish(mut self) -> Option<String> {
        let free = free_space(&self.layer.dir);
        let estimate = DiskUsage {
            bytes: self
                .state
                .used
                .bytes
                .saturating_add(self.free_at_start.bytes.saturating_sub(free.bytes)),
            inodes: self
                .state
                .used
                .inodes
                .saturating_add(self.free_at_start.inodes.saturating_sub(free.inodes)),
        };
        let used = if excess(estimate, self.layer.budget).is_none() {
            // Others freeing space meanwhile make the estimate low: the exact size is measured
            // off the result's path, and the next command waits for it before its budget check.
            let dir = self.layer.dir.clone();
            self.state.measuring = Some(std::thread::spawn(move || walk(&dir)));
            estimate
        } else {
            let (used, took) = walk(&self.layer.dir);
            self.state.walk_took = took;
            used
        };
        self.state.used = used;
        excess(used, self.layer.budget).map(|excess| {
            format!(
                "the session's command layer now {excess}: the next command is refused unless \
                 it passes `fresh_layer: true` (a clean layer), or the owner raises \
                 CLAUDE_TOOLS_COMMAND_LAYER_MB"
            )
        })
    }
}

mod roots;
pub use roots::roots;

#[cfg(test)]
mod tests;
