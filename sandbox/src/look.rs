//! The one gate for looks at the owner's files by the readers that derive the protected set and
//! check paths (start-up files, tool configs, the command `PATH`, write roots): a path that
//! reaches a FUSE mount found hung — as spelled, or through any of its symlinks — is never
//! asked for, and the look fails as if the path were not there.
//!
//! Why a gate and not care at each reader: a FUSE daemon that stops answering (stopped, its
//! remote gone) blocks every `stat`, `open` and listing at or below its mount point for good,
//! and every reader that followed a name into one hung the gateway's start or a session's
//! (red team 49: a hung directory on `PATH`, one inside the project, one `~/.bashrc` sources).
//! What is on a hung mount is protected by its path (`protected::is_hung_mount`), so a reader
//! loses nothing it needed by skipping it. The mount table is judged once per process before
//! the first look (and again whenever the protected set is derived).

use std::ffi::OsString;
use std::fs::{self, File, Metadata, ReadDir};
use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed while checking one path (the kernel's own limit).
const MAX_HOPS: usize = 40;

/// The error of a look the gate refused.
fn unanswered() -> io::Error {
    io::Error::other("on a FUSE mount that does not answer")
}

/// Whether resolving `path` passes through a FUSE mount found hung: each component checked
/// before it is looked at, each symlink on the way followed (the last one too when
/// `follow_last`). With no hung mount, no look at all.
pub fn reaches_hung(path: &Path, follow_last: bool) -> bool {
    crate::protected::judge_fuse_mounts_once();
    let hung = crate::protected::hung_mounts();
    if hung.is_empty() {
        return false;
    }
    let under_hung = |p: &Path| hung.iter().any(|h| p.starts_with(h));
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => return false,
        }
    };
    // Components still to walk, the next one last.
    let mut rest: Vec<OsString> = Vec::new();
    push_components(&mut rest, &absolute);
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(part) = rest.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&part);
        if under_hung(&next) {
            return true;
        }
        if rest.is_empty() && !follow_last {
            return false;
        }
        let Ok(meta) = fs::symlink_metadata(&next) else {
            // Nothing further exists to look through.
            return false;
        };
        if !meta.file_type().is_symlink() {
            resolved = next;
            continue;
        }
        hops += 1;
        let Ok(target) = fs::read_link(&next) else {
            return false;
        };
        if hops > MAX_HOPS {
            return false;
        }
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        push_components(&mut rest, &target);
    }
    false
}

/// Push `path`'s components onto `rest` so that the first is popped first (`.` dropped).
fn push_components(rest: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    rest.extend(parts.into_iter().rev());
}

/// `Ok` when `path` (followed to its end) may be looked at.
pub fn answers(path: &Path) -> io::Result<()> {
    if reaches_hung(path, true) {
        Err(unanswered())
    } else {
        Ok(())
    }
}

fn answers_unfollowed(path: &Path) -> io::Result<()> {
    if reaches_hung(path, false) {
        Err(unanswered())
    } else {
        Ok(())
    }
}

pub fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    answers(path.as_ref())?;
    fs::metadata(path)
}

pub fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    answers_unfollowed(path.as_ref())?;
    fs::symlink_metadata(path)
}

pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    answers(path.as_ref())?;
    fs::canonicalize(path)
}

/// A listing; its entries are looked at through this gate too (`symlink_metadata` of
/// `entry.path()`, never `DirEntry::metadata`: an entry may be a hung mount's point).
pub fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    answers(path.as_ref())?;
    fs::read_dir(path)
}

pub fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    answers_unfollowed(path.as_ref())?;
    fs::read_link(path)
}

pub fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    answers(path.as_ref())?;
    fs::read(path)
}

pub fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    answers(path.as_ref())?;
    fs::read_to_string(path)
}

pub fn open(path: impl AsRef<Path>) -> io::Result<File> {
    answers(path.as_ref())?;
    File::open(path)
}

pub fn exists(path: impl AsRef<Path>) -> bool {
    metadata(path).is_ok()
}

pub fn is_dir(path: impl AsRef<Path>) -> bool {
    metadata(path).is_ok_and(|m| m.is_dir())
}

pub fn is_file(path: impl AsRef<Path>) -> bool {
    metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_walked_in_order_and_dots_kept_for_the_walk() {
        let mut rest = Vec::new();
        push_components(&mut rest, Path::new("/a/./b/../c"));
        let order: Vec<_> = rest
            .iter()
            .rev()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert_eq!(order, ["a", "b", "..", "c"]);
    }
}
