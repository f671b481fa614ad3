//! A session's copy-on-write layer on disk (the broker's side; the helper mounts it, see
//! `linux::overlay`; on macOS the same dir is the session's writable dir, [`prepare_session_dir`]):
//! one `<key>/upper` + `<key>/work` pair per root directory, kept across the
//! session's commands, measured against its budget, emptied on request, removed at stop; and
//! the rule that keeps it honest after the executor wrote a real file (an overlay's copy would
//! otherwise hide the new content): the layer's entry for that path is dropped, and where an
//! ancestor in the layer hides the real path (a whiteout, a file, an opaque directory), that
//! root's whole layer is dropped; and any entry whose real file changed after it was made (writes
//! the broker did not see) is dropped too.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::spec::layer_key;

/// Make the layer dir (a private dir of ours, [`crate::private_fs`]) and each root's upper/work
/// pair (0700; existing ones are kept as they are: an upper dir carries the mode a command gave
/// its root).
pub fn prepare(dir: &Path, roots: &[PathBuf]) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    ensure_private(dir)?;
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700).recursive(true);
    for root in roots {
        let pair = dir.join(layer_key(root));
        builder.create(pair.join("upper"))?;
        builder.create(pair.join("work"))?;
    }
    Ok(())
}

/// macOS (no overlays): make the session's writable dir and the subdirs its commands' build
/// outputs and caches are redirected to (`crate::env::session_subdirs`; 0700, existing ones
/// are kept).
pub fn prepare_session_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    ensure_private(dir)?;
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700).recursive(true);
    for sub in crate::env::session_subdirs() {
        builder.create(dir.join(sub))?;
    }
    Ok(())
}

/// `dir` (and missing parents) as a private dir of ours; one made 0755 by hand is narrowed.
fn ensure_private(dir: &Path) -> io::Result<()> {
    crate::private_fs::ensure_private_dir_with(dir, crate::private_fs::OpenDir::Restrict)
        .map_err(|e| io::Error::other(e.to_string()))
}

mod remove;
pub use remove::{Removed, remove_at, remove_path};

/// The runtime area's trash: what sessions discarded (layers, the dirs of ended sessions), moved
/// here by a rename and deleted by the gateway's one deleter (`gateway::runtime_area`), which
/// outlives every session. Brokers never delete a layer themselves: one that exits mid-deletion
/// (every stop) would leave the rest on disk.
pub const TRASH: &str = ".discarded";

/// A fresh name for something moved into the trash: `<what>-<nanos>-<pid>-<n>`.
pub fn trash_name(what: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let unique = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{what}-{nanos}-{}-{unique}", std::process::id())
}

/// Move `path` into `trash` (made 0700 if missing) under a fresh name from `what`: at once, so a
/// stop or a fresh layer never waits for a large build's deletion. `Ok` once `path` is gone from
/// its name (also when there was nothing).
pub fn move_to_trash(path: &Path, trash: &Path, what: &str) -> io::Result<()> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    crate::private_fs::ensure_private_dir(trash).map_err(|e| io::Error::other(e.to_string()))?;
    match std::fs::rename(path, trash.join(trash_name(what))) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Take the layer dir `dir` away at once, into `trash` (see [`TRASH`]).
pub fn discard(dir: &Path, trash: &Path) -> io::Result<()> {
    move_to_trash(dir, trash, "layer")
}

/// Move into `trash` what older brokers' discards of `dir` left beside it
/// (`.<name>.discarded-*`, from before the trash).
pub fn discard_leftovers(dir: &Path, trash: &Path) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let prefix = format!(".{}.discarded-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            // What cannot be moved is found again with the session's dir when it ends.
            let _ = move_to_trash(&entry.path(), trash, "layer");
        }
    }
}

/// Remove a layer dir (or any tree holding an overlay work dir, whose `work/work` is mode 0) at
/// once, on this thread (see [`remove_path`]). Best effort: what cannot be removed stays.
pub fn remove(dir: &Path) {
    remove_path(dir);
}

/// Room for one more full layer on the file system holding `area`: its free space and free
/// inodes must cover a layer of `budget` bytes ([`inode_budget`]) plus a reserve kept for the
/// owner's machine (a twentieth of the file system, within 256 MiB – 2 GiB and 16k – 128k
/// inodes: enough for the owner to keep working, not a large disk's worth). Layers
/// still being deleted are on the disk until they are gone, so they count; a new session or a
/// fresh layer past it is refused (`storage_full`) with these words.
pub fn room_for_layer(area: &Path, budget: u64) -> Result<(), NoRoom> {
    let Ok(fs) = rustix::fs::statvfs(area) else {
        return Ok(());
    };
    let free = fs.f_bavail.saturating_mul(fs.f_frsize);
    let reserve = reserve_of(&fs);
    let need_inodes = inode_budget(budget).saturating_add(reserve.inodes);
    // A file system without an inode count (btrfs, some FUSE) reports 0 files.
    let inodes_short = fs.f_files > 0 && fs.f_favail < need_inodes;
    if free >= budget.saturating_add(reserve.bytes) && !inodes_short {
        return Ok(());
    }
    Err(NoRoom {
        free_mib: free / MIB,
        budget_mib: budget / MIB,
        reserve_mib: reserve.bytes / MIB,
        inodes_short,
    })
}

/// The free space and inodes kept for the owner's machine on `area`'s file system (see
/// [`room_for_layer`]; no inodes where the file system does not count them); `None` when it
/// cannot be read. Running commands are stopped once the disk falls below it.
pub fn owner_reserve(area: &Path) -> Option<crate::DiskUsage> {
    rustix::fs::statvfs(area).ok().map(|fs| reserve_of(&fs))
}

fn reserve_of(fs: &rustix::fs::StatVfs) -> crate::DiskUsage {
    let size = fs.f_blocks.saturating_mul(fs.f_frsize);
    crate::DiskUsage {
        bytes: (size / 20).clamp(256 * MIB, 2048 * MIB),
        inodes: if fs.f_files > 0 {
            (fs.f_files / 20).clamp(16 * 1024, 128 * 1024)
        } else {
            0
        },
    }
}

const MIB: u64 = 1024 * 1024;

/// Bytes of a layer's budget per inode it may hold (a tmpfs's default ratio): the files and
/// directories a command makes take inodes of the host's file system even when empty.
pub const BYTES_PER_INODE: u64 = 4096;

/// The inodes a layer of `budget` bytes may hold.
pub fn inode_budget(budget: u64) -> u64 {
    (budget / BYTES_PER_INODE).max(1024)
}

/// No room for another layer (see [`room_for_layer`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the disk holding command layers has {free_mib} MiB free{}, less than one session layer's \
     budget of {budget_mib} MiB plus the {reserve_mib} MiB kept free for the owner's machine; \
     the layers of sessions that ended just now are freed within seconds, so try again \
     shortly; if that does not help, stop sessions you no longer need (their layers count while \
     they live); the owner can lower CLAUDE_TOOLS_COMMAND_LAYER_MB",
    if *inodes_short { " (and too few free inodes)" } else { "" }
)]
pub struct NoRoom {
    pub free_mib: u64,
    pub budget_mib: u64,
    pub reserve_mib: u64,
    pub inodes_short: bool,
}

/// What [`forget_written`] did for one written path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgot {
    /// The layer held nothing for the path: commands see the real file.
    Nothing,
    /// The layer's copy (or whiteout) of the path was dropped.
    Entry,
    /// An ancestor in the layer hid the real path: the root's whole layer was dropped.
    Root,
}

/// The executor wrote `path` (absolute, inside `root`): make the next command see the real
/// file. Errors leave the layer as it was; the caller must then not run commands on it.
pub fn forget_written(dir: &Path, trash: &Path, root: &Path, path: &Path) -> io::Result<Forgot> {
    let Ok(relative) = path.strip_prefix(root) else {
        return Ok(Forgot::Nothing);
    };
    let parts: Vec<&std::ffi::OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    let pair = dir.join(layer_key(root));
    let upper = pair.join("upper");
    let Some((last, ancestors)) = parts.split_last() else {
        return Ok(Forgot::Nothing);
    };
    let mut here = upper.clone();
    for part in ancestors {
        here.push(part);
        match std::fs::symlink_metadata(&here) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Forgot::Nothing),
            Err(e) => return Err(e),
            Ok(meta) if meta.is_dir() && !opaque(&here) => {}
            Ok(_) => return reset_root(&pair, trash),
        }
    }
    here.push(last);
    match std::fs::symlink_metadata(&here) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Forgot::Nothing),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => reset_root(&pair, trash),
        Ok(_) => {
            std::fs::remove_file(&here)?;
            Ok(Forgot::Entry)
        }
    }
}

/// Drop the layer's entries whose real counterpart changed after the entry was made (its
/// ctime is later: a copy-up or a command's change stamps the entry's ctime, and real writes —
/// Edit/Write, a DeepSeek sub-session's writes, the owner's editor — stamp the real file's):
/// the newest wins, so writes the broker never saw do not leave stale copies either. Only
/// directories present on both sides are walked (a build's new `target/` is skipped whole).
/// Returns how many entries were dropped.
pub fn forget_changed(dir: &Path, root: &Path) -> io::Result<usize> {
    let upper = dir.join(layer_key(root)).join("upper");
    if std::fs::symlink_metadata(&upper).is_err() {
        return Ok(0);
    }
    let mut dropped = 0;
    let mut stack = vec![(upper, root.to_path_buf())];
    while let Some((layer_dir, real_dir)) = stack.pop() {
        for entry in std::fs::read_dir(&layer_dir)? {
            let entry = entry?;
            let layered = entry.path();
            let real = real_dir.join(entry.file_name());
            let Ok(real_meta) = std::fs::symlink_metadata(&real) else {
                continue;
            };
            let layer_meta = std::fs::symlink_metadata(&layered)?;
            if layer_meta.is_dir() {
                if real_meta.is_dir() {
                    stack.push((layered, real));
                }
                continue;
            }
            if ctime(&real_meta) > ctime(&layer_meta) {
                std::fs::remove_file(&layered)?;
                dropped += 1;
            }
        }
    }
    Ok(dropped)
}

fn ctime(meta: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.ctime(), meta.ctime_nsec())
}

fn reset_root(pair: &Path, trash: &Path) -> io::Result<Forgot> {
    discard(pair, trash)?;
    if std::fs::symlink_metadata(pair).is_ok() {
        return Err(io::Error::other("the layer could not be removed"));
    }
    Ok(Forgot::Root)
}

/// An overlay directory that hides the lower one's entries (`rm -r` then `mkdir` in a command).
#[cfg(target_os = "linux")]
fn opaque(dir: &Path) -> bool {
    if dir.as_os_str().as_encoded_bytes().contains(&0) {
        return true;
    }
    let mut value = [0u8; 4];
    let mut found = false;
    for name in [c"user.overlay.opaque", c"trusted.overlay.opaque"] {
        found |= rustix::fs::lgetxattr(dir, name, &mut value).is_ok_and(|len| len > 0);
    }
    found
}

#[cfg(not(target_os = "linux"))]
fn opaque(_dir: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests;
