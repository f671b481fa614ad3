//! Where a mask goes: the object a masked path names, reached without following another
//! account's symlink (red team 26 B2). Other gateways' state dirs and runtime areas are masked by
//! name, and the names are another account's to change: a symlink it puts at one (or at a
//! directory on the way) would otherwise carry the mask onto its target — `/usr/lib`, and every
//! command fails. Symlinks owned by this account or by root (the owner's own `~/.ssh ->
//! /data/ssh`, `/home -> /usr/home`) are followed as before.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// Most symlinks followed on the way (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// A directory holding at least this many masked names is listed once; fewer are asked one by
/// one (a listing costs about as much as a handful of lookups).
const LIST_FROM: usize = 8;

/// A directory with more entries than this is asked name by name instead: its listing would cost
/// more than the lookups it saves (another account filling its home must not slow every command).
const LIST_AT_MOST: usize = 512;

/// `statfs` magics of the file systems whose listing names every entry a lookup can find: ext2,
/// ext3 and ext4, XFS, Btrfs, tmpfs. Case-insensitive directories (ext4 and tmpfs `casefold`,
/// XFS `ascii-ci`) are covered by comparing ASCII names case-insensitively and asking every name
/// of a directory holding a non-ASCII entry (Unicode folding maps some to ASCII letters). Left
/// out, so asked per name: FUSE (a lookup may answer for a name it never lists), network file
/// systems and automounts (server-side rules, mounts made by the lookup), FAT-like ones (8.3
/// aliases), overlayfs (its lower layers may be any of these), and every type not named here.
const LISTS_WHAT_IT_HOLDS: &[i64] = &[0xef53, 0x5846_5342, 0x9123_683e, 0x0102_1994];

/// What one look at a directory of the protected set found.
enum Look {
    /// Not there, or not a directory: nothing below it exists.
    Missing,
    /// Its entries' names, ASCII lowercase: a name not among them is not there.
    Listed(FxHashSet<Vec<u8>>),
    /// There, or not known: each name in it is asked.
    Asked,
}

/// Which masked paths may exist, found by one look per directory of the protected set instead of
/// one lookup per path (this host's set names ~1,150 paths in ~400 directories; most are
/// credential names in every account's home, and most of those homes hold few of them). Exact in
/// one direction: [`Survey::may_exist`] says `false` only where a lookup would find nothing;
/// `true` leaves the path to [`open`], as every path was before. Paths are split as bytes at
/// their last `/` and hashed with Fx (`Path`'s own hashing parses components: a survey keyed by
/// `Path` cost as much as the lookups it saved).
pub struct Survey<'a> {
    /// How many masked paths each directory holds directly.
    names: FxHashMap<&'a [u8], usize>,
    looks: FxHashMap<&'a [u8], Look>,
}

/// `path`'s directory and last name, split at its last `/`; `None` for a relative path, one
/// ending in `/`, or a last name `.` or `..` (those are asked).
fn split(path: &[u8]) -> Option<(&[u8], &[u8])> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let cut = path.iter().rposition(|b| *b == b'/')?;
    let name = &path[cut + 1..];
    if name.is_empty() || name == b"." || name == b".." {
        return None;
    }
    Some((if cut == 0 { &path[..1] } else { &path[..cut] }, name))
}

impl<'a> Survey<'a> {
    pub fn new(masked: &'a [PathBuf]) -> Self {
        let mut names = FxHashMap::default();
        for path in masked {
            if let Some((dir, _)) = split(path.as_os_str().as_bytes()) {
                *names.entry(dir).or_insert(0) += 1;
            }
        }
        Self {
            names,
            looks: FxHashMap::default(),
        }
    }

    /// `false` when `path` cannot exist now (its directory is missing, or was listed without
    /// it); `true` when it may, or when that is not known.
    pub fn may_exist(&mut self, path: &'a Path) -> bool {
        self.may_exist_bytes(path.as_os_str().as_bytes())
    }

    fn may_exist_bytes(&mut self, path: &'a [u8]) -> bool {
        let Some((dir, name)) = split(path) else {
            return true;
        };
        if !self.looks.contains_key(dir) {
            // Settled by the look at its own directory when it is missing there (a missing home
            // settles every credential directory below it); each directory is looked at once.
            let look = if self.may_exist_bytes(dir) {
                self.look(dir)
            } else {
                Look::Missing
            };
            self.looks.insert(dir, look);
        }
        match self.looks.get(dir) {
            Some(Look::Missing) => false,
            Some(Look::Listed(entries)) => {
                // A name longer than any entry can be (NAME_MAX) is asked.
                let mut folded = [0u8; 256];
                let Some(folded) = folded.get_mut(..name.len()) else {
                    return true;
                };
                folded.copy_from_slice(name);
                folded.make_ascii_lowercase();
                !name.is_ascii() || entries.contains(&*folded)
            }
            Some(Look::Asked) | None => true,
        }
    }

    /// Look at `dir`: listed when it holds many masked names and its file system lists what it
    /// holds, else asked whether it is a directory at all.
    fn look(&self, dir: &[u8]) -> Look {
        let many = self.names.get(dir).is_some_and(|n| *n >= LIST_FROM);
        let dir = Path::new(std::ffi::OsStr::from_bytes(dir));
        if let Some(look) = many.then(|| list(dir)).flatten() {
            return look;
        }
        // Following every symlink, as the lookups of the names in it would.
        match rustix::fs::stat(dir) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => Look::Asked,
            Ok(_) | Err(Errno::NOENT | Errno::NOTDIR) => Look::Missing,
            Err(_) => Look::Asked,
        }
    }
}

/// `dir`'s entries when its file system lists every entry a lookup finds; `None` when it cannot
/// be read (then it is asked like any other).
fn list(dir: &Path) -> Option<Look> {
    let fd = match rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR) => return Some(Look::Missing),
        Err(_) => return None,
    };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let magic = rustix::fs::fstatfs(&fd).ok()?.f_type as i64;
    if !LISTS_WHAT_IT_HOLDS.contains(&magic) {
        return Some(Look::Asked);
    }
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut reader = rustix::fs::RawDir::new(&fd, buf.spare_capacity_mut());
    let mut entries = FxHashSet::default();
    while let Some(entry) = reader.next() {
        let entry = entry.ok()?;
        let name = entry.file_name().to_bytes();
        if !name.is_ascii() || entries.len() >= LIST_AT_MOST {
            return Some(Look::Asked);
        }
        entries.insert(name.to_ascii_lowercase());
    }
    Some(Look::Listed(entries))
}

/// An `O_PATH` descriptor of what `path` names, following only symlinks owned by `euid` or root;
/// `Ok(None)` when it does not exist or a symlink of another owner is on the way (nothing of this
/// account's is there to hide).
pub fn open(path: &Path, euid: u32) -> io::Result<Option<OwnedFd>> {
    // Most masked paths do not exist (every account's credential names, most system secrets):
    // one look following every symlink settles them. It is exact, not a heuristic: the walk
    // below follows the same links or stops earlier, so where the kernel finds nothing, the walk
    // would find nothing either; the one syscall replaces two per component (hundreds of masks
    // per command).
    let look = rustix::fs::statat(rustix::fs::CWD, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
    if let Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) = look {
        return Ok(None);
    }
    // A path without any symlink on it needs no walk: the kernel resolves it in one call, and
    // refuses (ELOOP) if a symlink is anywhere on the way, which only the walk may judge.
    if path.is_absolute() {
        match rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            // Without O_NOFOLLOW: a symlink as the last component is ELOOP too, not opened.
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Ok(Some(fd)),
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            // A symlink on the way, an old kernel, a filter that refuses openat2: walk.
            Err(_) => {}
        }
    }
    let root = || rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY, Mode::empty());
    let mut links = 0;
    let mut at: OwnedFd = root()?;
    // Components still to resolve, the next one last.
    let mut rest: Vec<OsString> = Vec::new();
    push_components(&mut rest, path);
    while let Some(name) = rest.pop() {
        if name == ".." {
            at = rustix::fs::openat(&at, "..", OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?;
            continue;
        }
        let next = match rustix::fs::openat(
            &at,
            name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let st = rustix::fs::fstat(&next)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
            at = next;
            continue;
        }
        if st.st_uid != euid && st.st_uid != 0 {
            return Ok(None);
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        // The link itself (the descriptor), so what was checked is what is read.
        let target = PathBuf::from(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(
            rustix::fs::readlinkat(&next, "", Vec::new())?.into_bytes(),
        ));
        if target.is_absolute() {
            at = root()?;
        }
        push_components(&mut rest, &target);
    }
    Ok(Some(at))
}

/// Cover `path`, a FUSE mount point whose daemon hangs, with an empty read-only tmpfs without
/// asking its file system anything: its parent is reached as [`open`] reaches any masked path,
/// and the mount point is opened `O_PATH` from it (crossing into a mount asks its daemon
/// nothing, where a `stat` blocks for good). `Ok(false)`: nothing of this account is there.
pub fn cover_hung(path: &Path, euid: u32) -> io::Result<bool> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(false);
    };
    let Some(parent) = open(parent, euid)? else {
        return Ok(false);
    };
    let point = match rustix::fs::openat(
        &parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(false),
        Err(err) => return Err(err.into()),
    };
    use std::os::fd::AsRawFd;
    super::sys::mount(
        Some(Path::new("tmpfs")),
        Path::new(&format!("/proc/self/fd/{}", point.as_raw_fd())),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
        Some("size=4k,mode=755"),
    )?;
    Ok(true)
}

/// Push `path`'s normal components (and `..`) onto `rest` so the first is popped first.
fn push_components(rest: &mut Vec<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    rest.extend(names.into_iter().rev());
}

#[cfg(test)]
mod tests;
