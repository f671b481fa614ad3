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

/// Make the layer dir and each root's upper/work pair (0700; existing ones are kept).
pub fn prepare(dir: &Path, roots: &[PathBuf]) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700).recursive(true);
    builder.create(dir)?;
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
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700).recursive(true);
    builder.create(dir)?;
    for sub in crate::env::session_subdirs() {
        builder.create(dir.join(sub))?;
    }
    Ok(())
}

/// Where [`discard`] sets a layer aside: a hidden sibling, `.<name>.discarded-<unique>`.
const ASIDE: &str = ".discarded-";

/// Take the layer dir `dir` away at once and delete it in the background: a rename (a stop or a
/// fresh layer never waits for a large build's deletion), then a thread removes it. What a
/// process that exits first leaves is found by [`discard_leftovers`] or the gateway's sweep of
/// the runtime area. `Ok` once `dir` is gone from its name.
pub fn discard(dir: &Path) -> io::Result<()> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::other("not a layer dir"));
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let unique = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let aside = parent.join(format!(
        ".{}{ASIDE}{nanos}-{unique}",
        name.to_string_lossy()
    ));
    match std::fs::rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    remove_in_background(aside);
    Ok(())
}

/// Delete what earlier [`discard`]s of `dir` left beside it (their process exited first), in
/// the background.
pub fn discard_leftovers(dir: &Path) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let prefix = format!(".{}{ASIDE}", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            remove_in_background(entry.path());
        }
    }
}

/// [`remove`] on a thread of its own (a tree nobody uses any more).
pub fn remove_in_background(path: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("layer-removal".into())
        .spawn({
            let path = path.clone();
            move || remove(&path)
        });
    if spawned.is_err() {
        remove(&path);
    }
}

/// Remove a layer dir (or any tree holding an overlay work dir, whose `work/work` is mode 0).
/// Best effort: what cannot be removed is logged by the caller's next look.
pub fn remove(dir: &Path) {
    if std::fs::symlink_metadata(dir).is_err() {
        return;
    }
    if std::fs::remove_dir_all(dir).is_ok() {
        return;
    }
    make_dirs_searchable(dir);
    let _ = std::fs::remove_dir_all(dir);
}

fn make_dirs_searchable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            make_dirs_searchable(&entry.path());
        }
    }
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
pub fn forget_written(dir: &Path, root: &Path, path: &Path) -> io::Result<Forgot> {
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
            Ok(_) => return reset_root(&pair),
        }
    }
    here.push(last);
    match std::fs::symlink_metadata(&here) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Forgot::Nothing),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => reset_root(&pair),
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

fn reset_root(pair: &Path) -> io::Result<Forgot> {
    discard(pair)?;
    if std::fs::symlink_metadata(pair).is_ok() {
        return Err(io::Error::other("the layer could not be removed"));
    }
    Ok(Forgot::Root)
}

/// An overlay directory that hides the lower one's entries (`rm -r` then `mkdir` in a command).
#[cfg(target_os = "linux")]
fn opaque(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    let mut value = [0u8; 4];
    let mut found = false;
    for name in [c"user.overlay.opaque", c"trusted.overlay.opaque"] {
        // SAFETY: valid NUL-terminated strings and a buffer of the given length.
        let len = unsafe {
            libc::lgetxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        found |= len > 0;
    }
    found
}

#[cfg(not(target_os = "linux"))]
fn opaque(_dir: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests;
