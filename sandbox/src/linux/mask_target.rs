//! Where a mask goes: the object a masked path names, reached without following another
//! account's symlink (red team 26 B2). Other gateways' state dirs and runtime areas are masked by
//! name, and the names are another account's to change: a symlink it puts at one (or at a
//! directory on the way) would otherwise carry the mask onto its target — `/usr/lib`, and every
//! command fails. Symlinks owned by this account or by root (the owner's own `~/.ssh ->
//! /data/ssh`, `/home -> /usr/home`) are followed as before.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

/// Most symlinks followed on the way (the kernel's own limit).
const MAX_LINKS: usize = 40;

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
mod tests {
    use super::*;

    /// Another account's symlink, at the last component or on the way, is not followed; this
    /// account's (or root's) is; what is reached is the object itself.
    #[test]
    fn only_this_accounts_or_roots_symlinks_are_followed() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("f"), "x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let me = rustix::process::geteuid().as_raw();
        // As root a symlink can be given away; otherwise this account's link is "another's"
        // to a caller that says it is someone else.
        let (link_owner, caller) = if me == 0 {
            std::os::unix::fs::lchown(&link, Some(4747), None).unwrap();
            (4747, 0)
        } else {
            (me, 4747)
        };
        assert_eq!(std::fs::symlink_metadata(&link).unwrap().uid(), link_owner);
        assert!(open(&link, caller).unwrap().is_none(), "last component");
        assert!(
            open(&link.join("f"), caller).unwrap().is_none(),
            "on the way"
        );
        // Followed when it is the caller's own.
        let fd = open(&link.join("f"), link_owner).unwrap().unwrap();
        let st = rustix::fs::fstat(&fd).unwrap();
        assert_eq!(
            st.st_ino,
            std::fs::metadata(victim.join("f")).unwrap().ino()
        );
        // No symlink: reached; missing: none; relative links and `..` resolve.
        assert!(open(&victim, caller).unwrap().is_some());
        assert!(open(&dir.path().join("missing"), caller).unwrap().is_none());
        let rel = dir.path().join("rel");
        std::os::unix::fs::symlink("victim/../victim", &rel).unwrap();
        let fd = open(&rel.join("f"), me).unwrap().unwrap();
        let st = rustix::fs::fstat(&fd).unwrap();
        assert_eq!(
            st.st_ino,
            std::fs::metadata(victim.join("f")).unwrap().ino()
        );
    }
}
