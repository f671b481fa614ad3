//! Kernel pseudo file systems: the one list of their types (`statfs` magic and mount-table
//! name). Both enforcement points derive from it: the read tools refuse an object on one by
//! `fstatfs` (`path_policy::pseudo_fs`), and a command's mount namespace keeps no mount of one
//! reachable but its own `/proc` and `/dev/pts` (`linux::pseudo_mounts`, found by type from
//! `/proc/self/mountinfo`, never by path).

/// One kernel pseudo file system type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PseudoFs {
    /// `f_type` as `statfs` reports it.
    pub magic: i64,
    /// The type as `/proc/self/mountinfo` names it.
    pub name: &'static str,
}

/// Every kernel pseudo file system sessions never see: process and kernel state (procfs,
/// sysfs, debugfs, tracefs, securityfs, bpf, cgroup v1 and v2, configfs, pstore, efivarfs, the
/// LSMs' selinuxfs and smackfs), namespace handles (nsfs), binfmt_misc, fusectl, ptys (devpts)
/// and POSIX message queues (mqueue).
pub const PSEUDO_FILE_SYSTEMS: &[PseudoFs] = &[
    PseudoFs {
        magic: 0x9fa0,
        name: "proc",
    },
    PseudoFs {
        magic: 0x6265_6572,
        name: "sysfs",
    },
    PseudoFs {
        magic: 0x6462_6720,
        name: "debugfs",
    },
    PseudoFs {
        magic: 0x7472_6163,
        name: "tracefs",
    },
    PseudoFs {
        magic: 0x7363_6673,
        name: "securityfs",
    },
    PseudoFs {
        magic: 0xcafe_4a11,
        name: "bpf",
    },
    PseudoFs {
        magic: 0x0027_e0eb,
        name: "cgroup",
    },
    PseudoFs {
        magic: 0x6367_7270,
        name: "cgroup2",
    },
    PseudoFs {
        magic: 0x6265_6570,
        name: "configfs",
    },
    PseudoFs {
        magic: 0x6165_676c,
        name: "pstore",
    },
    PseudoFs {
        magic: 0xde5e_81e4,
        name: "efivarfs",
    },
    PseudoFs {
        magic: 0xf97c_ff8c,
        name: "selinuxfs",
    },
    PseudoFs {
        magic: 0x4341_5d53,
        name: "smackfs",
    },
    PseudoFs {
        magic: 0x6e73_6673,
        name: "nsfs",
    },
    PseudoFs {
        magic: 0x4249_4e4d,
        name: "binfmt_misc",
    },
    PseudoFs {
        magic: 0x6573_5543,
        name: "fusectl",
    },
    PseudoFs {
        magic: 0x1cd1,
        name: "devpts",
    },
    PseudoFs {
        magic: 0x1980_0202,
        name: "mqueue",
    },
];

/// The pseudo file system whose `statfs` magic is `magic`.
pub fn by_magic(magic: i64) -> Option<&'static str> {
    PSEUDO_FILE_SYSTEMS
        .iter()
        .find(|fs| fs.magic == magic)
        .map(|fs| fs.name)
}

/// The pseudo file system the mount table calls `name`.
pub fn by_name(name: &str) -> Option<&'static str> {
    PSEUDO_FILE_SYSTEMS
        .iter()
        .find(|fs| fs.name == name)
        .map(|fs| fs.name)
}

/// File system types that hold data, never kernel state: their superblocks carry their own magic,
/// never one of [`PSEUDO_FILE_SYSTEMS`]. The mount table names a mount by its file system
/// type, set by the kernel from the same superblock `fstatfs` reads, so a mount the table calls
/// one of these is not a pseudo file system and need not be opened to ask (a command's
/// namespace holds one such mount per protected path it masks: dozens to hundreds). Any other
/// name, unknown ones included, is asked. FUSE mounts (`fuse.<subtype>`, subtype chosen by the
/// mounter) report FUSE's magic whatever they are called.
const DATA_FILE_SYSTEMS: &[&str] = &[
    "tmpfs", "devtmpfs", "ramfs", "overlay", "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs",
    "vfat", "exfat", "ntfs3", "zfs", "squashfs", "erofs", "iso9660", "nfs", "nfs4", "cifs", "smb3",
    "9p", "virtiofs", "fuse", "fuseblk",
];

/// Whether the mount table's `name` is a data file system (see [`DATA_FILE_SYSTEMS`]).
pub fn is_data(name: &str) -> bool {
    DATA_FILE_SYSTEMS.contains(&name) || name.starts_with("fuse.")
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;

    #[test]
    fn names_and_magics_are_unique() {
        for (i, fs) in PSEUDO_FILE_SYSTEMS.iter().enumerate() {
            assert_eq!(by_magic(fs.magic), Some(fs.name));
            assert_eq!(by_name(fs.name), Some(fs.name));
            assert!(
                PSEUDO_FILE_SYSTEMS[i + 1..]
                    .iter()
                    .all(|o| o.magic != fs.magic)
            );
        }
        assert_eq!(by_name("ext4"), None);
        assert_eq!(by_name("tmpfs"), None);
        assert_eq!(by_name("overlay"), None);
        for fs in PSEUDO_FILE_SYSTEMS {
            assert!(!is_data(fs.name), "{} is listed as data", fs.name);
        }
        assert!(is_data("tmpfs") && is_data("fuse.sshfs"));
        assert!(!is_data("fusectl") && !is_data("unknownfs") && !is_data(""));
    }
}
