//! Deleting a tree a session left (a discarded layer, a scratch dir) safely and fast: every step
//! is relative to a directory descriptor opened `O_NOFOLLOW` (a symlink is unlinked, never
//! followed; a renamed or replaced component cannot redirect the walk out of the tree), mount
//! points are never entered (another device than the tree's), directories a command made
//! unreadable or unwritable (mode 000, 0500, an overlay's `work/work`) are given 0700 through
//! their own descriptor first, and at most [`MAX_OPEN`] directories are open at once: a deeper
//! one is renamed up into the tree's top and deleted from there, so any depth costs bounded
//! descriptors and memory. Entries are unlinked by `getdents` type, without a `stat` each.

use std::collections::HashSet;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::path_policy::ident;

/// Directories open at once (the walk's depth before deeper ones are moved up).
const MAX_OPEN: usize = 48;
/// Subdirectory names one directory's scan collects before descending (memory bound).
const BATCH: usize = 512;

/// What one deletion did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Entries unlinked (files, symlinks, directories, the top included).
    pub entries: u64,
    /// Entries that could not be removed (left in place, logged by the caller).
    pub failed: u64,
}

struct Frame {
    /// The directory, open for listing (rewound for each later scan) and as the base of every
    /// `*at` call on its entries.
    dir: rustix::fs::Dir,
    /// Its name in the directory below it on the stack.
    name: CString,
    /// Subdirectories found and not yet entered.
    pending: Vec<CString>,
    /// Names that could not be removed: skipped by later scans.
    failed: HashSet<CString>,
    /// Whether the last scan saw the whole directory (else it is scanned again).
    scanned: bool,
}

/// Delete `name` in the directory `parent` (the whole tree if it is a directory), never
/// following a symlink and never leaving the tree. What could not be removed stays.
pub fn remove_at(parent: BorrowedFd<'_>, name: &OsStr) -> Removed {
    let mut removed = Removed::default();
    let Ok(name) = CString::new(name.as_bytes()) else {
        removed.failed += 1;
        return removed;
    };
    let stat = match rustix::fs::statat(parent, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(rustix::io::Errno::NOENT) => return removed,
        Err(_) => {
            removed.failed += 1;
            return removed;
        }
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        count(
            &mut removed,
            rustix::fs::unlinkat(parent, name.as_c_str(), AtFlags::empty()),
        );
        return removed;
    }
    let (device, inode) = ident(&stat);
    let Ok(fd) = open_dir(parent, &name, device, Some(inode)) else {
        removed.failed += 1;
        return removed;
    };
    let Ok(first) = frame(fd, name) else {
        removed.failed += 1;
        return removed;
    };
    let mut stack = vec![first];
    while let Some(top) = stack.last_mut() {
        if top.pending.is_empty() && !top.scanned {
            scan(top, &mut removed);
        }
        if let Some(child) = top.pending.pop() {
            let depth = stack.len();
            enter(&mut stack, depth, child, device, &mut removed);
            continue;
        }
        if !top.scanned {
            continue;
        }
        let Some(done) = stack.pop() else { break };
        let below = stack.last().map_or(Ok(parent), |f| f.fd());
        let result = below.and_then(|below| {
            rustix::fs::unlinkat(below, done.name.as_c_str(), AtFlags::REMOVEDIR)
        });
        if result.is_err()
            && let Some(below) = stack.last_mut()
        {
            below.failed.insert(done.name);
        }
        count(&mut removed, result);
    }
    removed
}

/// [`remove_at`] by path: `path`'s parent is opened without following its last component.
pub fn remove_path(path: &Path) -> Removed {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Removed {
            entries: 0,
            failed: 1,
        };
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    match rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => remove_at(fd.as_fd(), name),
        Err(rustix::io::Errno::NOENT) => Removed::default(),
        Err(_) => Removed {
            entries: 0,
            failed: 1,
        },
    }
}

fn frame(fd: OwnedFd, name: CString) -> rustix::io::Result<Frame> {
    Ok(Frame {
        dir: rustix::fs::Dir::new(fd)?,
        name,
        pending: Vec::new(),
        failed: HashSet::new(),
        scanned: false,
    })
}

impl Frame {
    fn fd(&self) -> rustix::io::Result<BorrowedFd<'_>> {
        self.dir.fd()
    }
}

fn count(removed: &mut Removed, result: rustix::io::Result<()>) {
    match result {
        Ok(()) | Err(rustix::io::Errno::NOENT) => removed.entries += 1,
        Err(_) => removed.failed += 1,
    }
}

/// One pass over `top`: unlink what is not a directory, collect up to [`BATCH`] directories.
fn scan(top: &mut Frame, removed: &mut Removed) {
    top.dir.rewind();
    let mut complete = true;
    let mut unlinked = 0u64;
    let mut failed = Vec::new();
    let Ok(fd) = top.dir.fd() else {
        top.scanned = true;
        return;
    };
    // The descriptor is the `Dir`'s own: `*at` calls borrow it while entries are read.
    let fd = fd.as_raw_fd();
    // SAFETY: `fd` stays open as long as `top.dir`, which outlives this function's use of it.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    while let Some(entry) = top.dir.read() {
        let Ok(entry) = entry else {
            // An unreadable directory: leave it (its removal fails and is counted).
            break;
        };
        let name = entry.file_name();
        if name == c"." || name == c".." || (!top.failed.is_empty() && top.failed.contains(name)) {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(_) => FileType::Unknown,
            },
            kind => kind,
        };
        if kind == FileType::Directory {
            if top.pending.len() >= BATCH {
                complete = false;
                break;
            }
            top.pending.push(name.to_owned());
            continue;
        }
        match rustix::fs::unlinkat(fd, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => unlinked += 1,
            Err(_) => failed.push(name.to_owned()),
        }
    }
    removed.entries += unlinked;
    removed.failed += failed.len() as u64;
    top.failed.extend(failed);
    top.scanned = complete;
}

/// Open `child` of the top frame and push it, or (the stack is full) move it up into the tree's
/// top under a fresh name, to be found by the top's next scan.
fn enter(stack: &mut Vec<Frame>, depth: usize, child: CString, device: u64, removed: &mut Removed) {
    let (Some(top), Some(first)) = (stack.last(), stack.first()) else {
        return;
    };
    let (Ok(parent), Ok(first_fd)) = (top.fd(), first.fd()) else {
        return;
    };
    let outcome = if depth >= MAX_OPEN {
        static MOVED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MOVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let new_name = CString::new(format!(".deep-{}-{n}", std::process::id()))
            .map_err(|_| io::Error::other("name"));
        // Moving a directory to another parent rewrites its `..` entry, so it must be writable
        // (a read-only chain deeper than the limit stayed forever otherwise).
        let writable = rustix::fs::statat(parent, child.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(io::Error::from)
            .and_then(|stat| {
                let (dev, ino) = ident(&stat);
                if stat.st_mode & 0o700 == 0o700 {
                    Ok(())
                } else {
                    make_listable(parent, &child, dev, ino)
                }
            });
        match writable.and(new_name).and_then(|new_name| {
            rustix::fs::renameat(parent, child.as_c_str(), first_fd, &new_name)
                .map_err(io::Error::from)
        }) {
            Ok(()) => Entered::Moved,
            Err(_) => Entered::Failed,
        }
    } else {
        // Another file system mounted here is never entered (its removal then fails).
        match open_dir(parent, &child, device, None) {
            Ok(fd) => Entered::Opened(fd),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Entered::Gone,
            Err(_) => Entered::Failed,
        }
    };
    match outcome {
        Entered::Opened(fd) => match frame(fd, child) {
            Ok(frame) => stack.push(frame),
            Err(_) => removed.failed += 1,
        },
        Entered::Moved => {
            if let Some(first) = stack.first_mut() {
                first.scanned = false;
            }
        }
        Entered::Gone => {}
        Entered::Failed => {
            removed.failed += 1;
            if let Some(top) = stack.last_mut() {
                top.failed.insert(child);
            }
        }
    }
}

enum Entered {
    Opened(OwnedFd),
    Moved,
    Gone,
    Failed,
}

/// Open the directory `name` in `parent` for listing, without following a symlink, and make it
/// searchable and writable by its owner (us). A directory we may not read (mode 000) is opened
/// as a path first and given 0700 through that descriptor. It must be on `dev` (never a mount
/// point), and be `ino` when that is known.
fn open_dir(
    parent: BorrowedFd<'_>,
    name: &CStr,
    dev: u64,
    ino: Option<u64>,
) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::ACCESS) => {
            let (seen_dev, seen_ino) = ident(&rustix::fs::statat(
                parent,
                name,
                AtFlags::SYMLINK_NOFOLLOW,
            )?);
            if seen_dev != dev || ino.is_some_and(|ino| ino != seen_ino) {
                return Err(io::Error::other("not the directory looked at"));
            }
            make_listable(parent, name, seen_dev, seen_ino)?;
            rustix::fs::openat(parent, name, flags, Mode::empty())?
        }
        Err(err) => return Err(err.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    let (opened_dev, opened_ino) = ident(&stat);
    if opened_dev != dev || ino.is_some_and(|ino| ino != opened_ino) {
        return Err(io::Error::other(
            "a mount point, or replaced while being opened",
        ));
    }
    if stat.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
    }
    Ok(fd)
}

/// Give the directory `name` (not readable by us) mode 0700 without following a symlink.
#[cfg(target_os = "linux")]
fn make_listable(parent: BorrowedFd<'_>, name: &CStr, dev: u64, ino: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    if ident(&rustix::fs::fstat(&fd)?) != (dev, ino) {
        return Err(io::Error::other("replaced while being opened"));
    }
    // chmod through the descriptor's own /proc link: the exact inode, never a path's.
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmod(link.as_str(), Mode::from_raw_mode(0o700))?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn make_listable(parent: BorrowedFd<'_>, name: &CStr, _dev: u64, _ino: u64) -> io::Result<()> {
    rustix::fs::chmodat(
        parent,
        name,
        Mode::from_raw_mode(0o700),
        AtFlags::SYMLINK_NOFOLLOW,
    )?;
    Ok(())
}
