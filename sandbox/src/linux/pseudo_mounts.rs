//! No kernel pseudo file system in a command's mount namespace but its own `/proc` and
//! `/dev/pts`: every other mount of a type the read tools refuse (the one list,
//! `protected::pseudo_fs`) that the command could reach by path — a second procfs mounted
//! anywhere, `/sys` and what is mounted under it, a `/proc/<pid>` file bound into the project —
//! is covered, found by type from `/proc/self/mountinfo`, never by path. Then the table is read
//! again: one still reachable refuses the command (fail closed), naming the mount.
//!
//! A mount is reachable when opening its mount point lands on it (the descriptor's mount id is
//! the mount's): one already covered by another (the host's `/proc` under the fresh one, the
//! host's `/dev/pts` under the private `/dev`, `/sys/fs/cgroup` once `/sys` is covered) is not,
//! and is left alone. The helper opens with every right the command will have and more, so
//! what it cannot open by path the command cannot either. Covers are mounted onto
//! `/proc/self/fd/N` of that descriptor, so they land on exactly the mount checked.
//! Directories get an empty read-only tmpfs, anything else `/dev/null`.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};

use super::sys;
use crate::path_policy::pseudo_fs;
use crate::protected::MountLine;

/// Where a mount is, as the refusal names it: its path when it lies in one of `shown` (the
/// command's own directories: its working directory and layer roots, which the session sees
/// anyway), else only that it is outside them (no host path in public output).
pub struct Places<'a> {
    pub shown: Vec<&'a Path>,
}

impl Places<'_> {
    fn describe(&self, mount: &MountLine, kind: &str) -> String {
        match self.shown.iter().find(|p| mount.mount_point.starts_with(p)) {
            Some(_) => format!(
                "a {kind} file system is mounted at {}",
                crate::escape::path_for_display(&mount.mount_point)
            ),
            None => format!("a {kind} file system is mounted outside the working directory"),
        }
    }
}

/// Cover every reachable pseudo file system mount but the ones now at `keep` (the command's
/// `/proc` and private `/dev/pts`); returns how many were covered. An error names the mount
/// that could not be covered or is still reachable.
pub fn cover(keep: &[&Path], places: &Places<'_>) -> Result<usize, String> {
    let kept: Vec<u64> = keep
        .iter()
        .filter_map(|path| open_path(path).ok())
        .filter_map(|fd| mount_id(&fd).ok())
        .collect();
    let mut covered = 0;
    for mount in table()? {
        let Some((fd, kind)) = reachable_pseudo(&mount, &kept)? else {
            continue;
        };
        cover_one(&fd).map_err(|err| {
            format!(
                "{} and could not be hidden from commands ({err}); unmount it or move it out \
                 of the working directory",
                places.describe(&mount, kind)
            )
        })?;
        covered += 1;
    }
    // Nothing mounted above uncovers anything, but the check is the rule: read it again.
    for mount in table()? {
        if let Some((_, kind)) = reachable_pseudo(&mount, &kept)? {
            return Err(format!(
                "{} and is still reachable after it was covered; unmount it or move it out of \
                 the working directory",
                places.describe(&mount, kind)
            ));
        }
    }
    Ok(covered)
}

fn table() -> Result<Vec<MountLine>, String> {
    crate::protected::read_mount_table().map_err(|err| format!("reading the mount table: {err}"))
}

/// `mount` opened at its mount point and its pseudo type, if it is a pseudo file system the
/// command could reach and not one of `kept`.
fn reachable_pseudo(
    mount: &MountLine,
    kept: &[u64],
) -> Result<Option<(OwnedFd, &'static str)>, String> {
    if kept.contains(&mount.id) || crate::protected::pseudo_fs::is_data(&mount.fs_type) {
        return Ok(None);
    }
    // Unopenable (gone, covered by a file, no search permission): the command cannot reach it
    // by this path either, and a mount is reachable by no other.
    let Ok(fd) = open_path(&mount.mount_point) else {
        return Ok(None);
    };
    let id = mount_id(&fd).map_err(|err| format!("reading a mount's id: {err}"))?;
    if id != mount.id {
        return Ok(None);
    }
    // A bind of a process's `/proc` entry outlives the process: its root is gone, no name
    // resolves through it, nor can it be mounted over (ENOENT). Nothing can be read there, and
    // refusing every command of the host for it (red team 43a's observation) protected nothing.
    if leads_nowhere(&fd) || dead_process_entry(mount) {
        return Ok(None);
    }
    // By the kernel's own answer (`fstatfs`, as the read tools check), or by the table's.
    let kind = pseudo_fs(&fd)
        .or_else(|| crate::protected::pseudo_fs::by_name(&mount.fs_type))
        .map(|kind| (fd, kind));
    Ok(kind)
}

fn open_path(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// The id of the mount `fd` lies on: `statx` (Linux 5.8+), else its `fdinfo`.
fn mount_id(fd: &impl AsFd) -> std::io::Result<u64> {
    if let Ok(stx) = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)
        && stx.stx_mask & StatxFlags::MNT_ID.bits() != 0
    {
        return Ok(stx.stx_mnt_id);
    }
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd()))?;
    info.lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|id| id.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no mnt_id in fdinfo"))
}

/// Whether `mount` is a bind of an entry of a process that is gone: procfs's root for it ends
/// in `//deleted` (`/30916/task/30916//deleted`, red team 45 F6: a dead process's `task/<tid>`,
/// `fd`, `net`, `status` bound elsewhere had refused every command as the `/proc/<pid>` bind
/// did). Nothing resolves through it; it cannot be mounted over either.
fn dead_process_entry(mount: &MountLine) -> bool {
    mount.fs_type == "proc"
        && mount
            .root
            .as_os_str()
            .as_encoded_bytes()
            .ends_with(b"//deleted")
}

/// Whether nothing can be opened through `fd` (a mount whose root was removed: a dead
/// process's `/proc/<pid>` bound elsewhere): opening it, or a name in it, finds no such file
/// or no such process.
fn leads_nowhere(fd: &OwnedFd) -> bool {
    let gone = |err: std::io::Error| {
        err.kind() == std::io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ESRCH)
    };
    let again = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let is_dir = rustix::fs::fstat(fd)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
    if !is_dir {
        // A dead process's file opens, but reading it finds no such process.
        use std::io::Read as _;
        let mut byte = [0u8; 1];
        return std::fs::File::open(&again)
            .and_then(|mut file| file.read(&mut byte))
            .is_err_and(gone);
    }
    // A directory: a name in it must find nothing too (a second procfs's root opens, but
    // has no `status`; a live process's directory has one).
    std::fs::File::open(&again).is_err_and(gone)
        && std::fs::File::open(again.join("status")).is_err_and(gone)
}

/// Mount an empty read-only tmpfs (a directory) or `/dev/null` (anything else) over the mount
/// `fd` was opened at.
fn cover_one(fd: &OwnedFd) -> std::io::Result<()> {
    let target = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let is_dir = rustix::fs::fstat(fd)
        .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
        .map_err(std::io::Error::from)?;
    if is_dir {
        sys::mount(
            Some(Path::new("tmpfs")),
            &target,
            Some("tmpfs"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some("size=4k,mode=555"),
        )
    } else {
        sys::mount(
            Some(Path::new("/dev/null")),
            &target,
            None,
            libc::MS_BIND,
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_a_mount_only_inside_the_commands_own_directories() {
        let places = Places {
            shown: vec![Path::new("/work/project")],
        };
        let line = |at: &str| MountLine {
            id: 7,
            device: "0:21".into(),
            root: PathBuf::from("/"),
            mount_point: PathBuf::from(at),
            fs_type: "proc".into(),
            source: PathBuf::from("proc"),
            super_options: "rw".into(),
        };
        assert_eq!(
            places.describe(&line("/work/project/pdir"), "proc"),
            "a proc file system is mounted at /work/project/pdir"
        );
        let outside = places.describe(&line("/home/other/.secret-mnt"), "proc");
        assert_eq!(
            outside,
            "a proc file system is mounted outside the working directory"
        );
        assert!(
            !places
                .describe(&line("/work/projectile"), "sysfs")
                .contains("projectile")
        );
    }
}
