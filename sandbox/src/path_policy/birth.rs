//! Birth times of protected entries, to tell a protected directory from a new one that got its
//! inode number after it was deleted. Identity protection by `(dev, ino)` follows a protected
//! entry that is renamed or reached under another name (by design); but inode numbers are
//! reused, and a fresh directory (a Write's new parent) that happens to get a deleted protected
//! entry's number would be refused. Where the kernel reports birth times (`statx` with
//! `STATX_BTIME`: ext4, XFS, btrfs, tmpfs since 5.x) the entry's is recorded with its identity,
//! and an object with the same `(dev, ino)` but another birth time is not the entry. Where either
//! birth time is unknown the identity alone decides (fail closed).

use std::fs::Metadata;
use std::os::fd::BorrowedFd;

/// Seconds and nanoseconds since the epoch.
pub(crate) type Birth = (i64, u32);

/// The birth time `metadata` reports (std reads it with `statx` on Linux).
pub(crate) fn of_metadata(metadata: &Metadata) -> Option<Birth> {
    let since = metadata
        .created()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some((i64::try_from(since.as_secs()).ok()?, since.subsec_nanos()))
}

/// The birth time of the object open as `fd`, where the kernel reports one.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn of_fd(fd: BorrowedFd<'_>) -> Option<Birth> {
    use rustix::fs::{AtFlags, StatxFlags};
    let stx = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::BTIME).ok()?;
    if stx.stx_mask & StatxFlags::BTIME.bits() == 0 {
        return None;
    }
    Some((stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec))
}

/// Elsewhere the identity alone decides.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn of_fd(_fd: BorrowedFd<'_>) -> Option<Birth> {
    None
}

/// Whether an object born `observed` can be the entry recorded as born `recorded`: unless both
/// are known and differ.
pub(crate) fn same_object(recorded: Option<Birth>, observed: Option<Birth>) -> bool {
    match (recorded, observed) {
        (Some(recorded), Some(observed)) => recorded == observed,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path_policy::PathPolicy;

    #[test]
    fn only_two_known_different_birth_times_tell_objects_apart() {
        assert!(same_object(None, None));
        assert!(same_object(Some((1, 2)), None));
        assert!(same_object(None, Some((1, 2))));
        assert!(same_object(Some((1, 2)), Some((1, 2))));
        assert!(!same_object(Some((1, 2)), Some((1, 3))));
    }

    /// A renamed protected directory keeps its identity and birth time: still protected. A
    /// directory with the identity but another birth time (the number reused after the entry was
    /// deleted, emulated by changing the recorded time) is not.
    #[test]
    fn a_renamed_entry_stays_protected_and_a_reused_number_does_not() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let home = base.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let mut policy = PathPolicy::new(home.clone(), base.join("state"), vec![]);
        std::fs::rename(home.join(".ssh"), base.join("moved")).unwrap();
        let dir = std::fs::File::open(base.join("moved")).unwrap();
        let meta = dir.metadata().unwrap();
        let (dev, ino) = (meta.dev(), meta.ino());
        assert!(policy.is_protected_object(&dir, dev, ino));
        let Some(born) = of_fd(std::os::fd::AsFd::as_fd(&dir)) else {
            panic!("this host's file system reports no birth time");
        };
        assert_eq!(of_metadata(&meta), Some(born));
        for (identity, recorded) in &mut policy.identity_births {
            if *identity == (dev, ino) {
                recorded.1 = recorded.1.wrapping_add(1);
            }
        }
        assert!(policy.is_protected_identity(dev, ino), "by number alone");
        assert!(!policy.is_protected_object(&dir, dev, ino));
    }
}
