//! Owner-only directories (0700) and files (0600): the one way the gateway, its brokers and the
//! sandbox make them. The last component is never followed when it is a symlink, what is there
//! must be this user's own, and what is created is made durable (a new file is synced, then the
//! directory that names it).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// Why a directory is not accepted as private. Each refusal of the directory itself says the
/// same words ("not a private directory of this user") and what was found.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    /// It could not be created or examined.
    #[error("{}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// Something other than a directory (a symlink, a file) holds the name.
    #[error("{}: not a private directory of this user (owner {owner}, mode {mode:o})", dir.display())]
    NotADirectory { dir: PathBuf, owner: u32, mode: u32 },
    /// Another user owns it (the name was squatted in shared `/tmp`).
    #[error("{}: not a private directory of this user (owner {owner}, mode {mode:o})", dir.display())]
    WrongOwner { dir: PathBuf, owner: u32, mode: u32 },
    /// It is open to the group or to others.
    #[error("{}: not a private directory of this user (owner {owner}, mode {mode:o})", dir.display())]
    OpenMode { dir: PathBuf, owner: u32, mode: u32 },
}

/// What to do with a directory of ours that is open to the group or others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenDir {
    /// Refuse it ([`PrivateDirError::OpenMode`]): in shared places (`/tmp`) an open mode means
    /// it is not what we made.
    Refuse,
    /// Narrow it to 0700 (through a descriptor opened without following a symlink): in the
    /// state dir, where an older gateway or the owner may have made it 0755.
    Restrict,
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Create `dir` (and missing parents) 0700 and insist that it is a real directory (no symlink)
/// owned by this user and open to no one else (`open`: refuse or narrow an open one). When it
/// was created, its parent directory is synced so the new entry survives a crash.
pub fn ensure_private_dir_with(dir: &Path, open: OpenDir) -> Result<(), PrivateDirError> {
    let io = |source| PrivateDirError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    let existed = std::fs::symlink_metadata(dir).is_ok();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    match check_private_dir(dir) {
        Err(PrivateDirError::OpenMode { .. }) if open == OpenDir::Restrict => {
            let fd = rustix::fs::open(
                dir,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io(e.into()))?;
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700)).map_err(|e| io(e.into()))?;
            check_private_dir(dir)?;
        }
        other => other?,
    }
    if !existed {
        sync_parent(dir).map_err(io)?;
    }
    Ok(())
}

/// [`ensure_private_dir_with`], refusing a directory open to others.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    ensure_private_dir_with(dir, OpenDir::Refuse)
}

/// `mkdir` a new 0700 directory at `dir` (its parent must exist): an existing name, a symlink
/// included, is an `AlreadyExists` error, never reused. What was made is checked and its parent
/// synced.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(dir)?;
    check_private_dir(dir).map_err(|err| io::Error::other(err.to_string()))?;
    sync_parent(dir)
}

/// Whether `dir` itself (never a symlink's target) is a directory of ours, mode `0700` or less.
pub fn check_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| PrivateDirError::Io {
        dir: dir.to_path_buf(),
        source,
    })?;
    let (dir, owner, mode) = (dir.to_path_buf(), meta.uid(), meta.mode() & 0o7777);
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory { dir, owner, mode });
    }
    if owner != euid() {
        return Err(PrivateDirError::WrongOwner { dir, owner, mode });
    }
    if mode & 0o077 != 0 {
        return Err(PrivateDirError::OpenMode { dir, owner, mode });
    }
    Ok(())
}

/// Open `path` as a private file with `options` (read, write, create, truncate… as the caller
/// needs), never through a symlink and never blocking (`O_NONBLOCK`: a FIFO planted at the name
/// is refused, not waited on; regular files ignore the flag): created 0600; an existing one must
/// be a regular file of this user (any group or other bits on it are removed). A file this call
/// created has its parent directory synced (the caller syncs the contents it writes).
pub fn open_private_file(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let existed = std::fs::symlink_metadata(path).is_ok();
    let file = options
        .mode(0o600)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.uid() != euid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "not a private file of this user (owner {}, mode {:o})",
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o700))?;
    }
    if !existed {
        sync_parent(path)?;
    }
    Ok(file)
}

/// Write `contents` as the whole of the private file `path` (0600, [`open_private_file`]),
/// durably: the file and then its directory entry are synced, so a crash right after leaves the
/// whole file.
pub fn write_private_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = open_private_file(
        path,
        OpenOptions::new().write(true).create(true).truncate(true),
    )?;
    file.write_all(contents)?;
    file.sync_all()?;
    sync_parent(path)
}

/// Replace `path` with a new private file holding `contents`, atomically: a fresh 0600 temporary
/// file beside it (never through a symlink), synced, renamed over `path`, and the directory
/// synced. A reader sees the old file or the whole new one.
pub fn replace_private_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = open_private_file(&tmp, OpenOptions::new().write(true).create_new(true))?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// fsync the directory that names `path` (a new or renamed entry in it survives a crash).
fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => File::open(parent)?.sync_all(),
        None => File::open(".")?.sync_all(),
    }
}

#[cfg(test)]
mod tests;
