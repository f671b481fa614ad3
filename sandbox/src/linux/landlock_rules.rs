//! The Landlock domains of commands and of the runner: read and execute under the readable roots,
//! everything under the writable dirs (a command's scratch dir; the runner's private dirs),
//! read/write on a few device files; TCP bind denied and TCP connect denied except the runner's
//! one broker port (ABI ≥ 4); signals and abstract UNIX sockets scoped to the domain (ABI ≥ 6).
//! Built with `HardRequirement` for the ABI the kernel offers and refused unless fully enforced.
//!
//! Without a mount namespace, masked paths cannot be hidden by mounts; [`read_roots_excluding`]
//! then lists the readable set as every sibling along the way to each masked path (Landlock rules
//! are allow-only).

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, PathFdError, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError,
    RulesetStatus, Scope,
};

/// Device files a command may read and write: the allow-list, `/dev` being masked.
const DEVICES: &[&str] = crate::protected::DEVICE_FILES;

/// Highest ABI whose rights we request (V7 adds only audit controls).
pub const MAX_ABI: i32 = crate::spec::MAX_LANDLOCK_ABI;

/// One Landlock domain: what may be read, written and connected to.
pub struct Domain<'a> {
    /// Read (and execute) beneath these; a root that cannot be opened is left out (narrower).
    pub read_roots: &'a [PathBuf],
    /// Every right beneath these; each must exist (an error otherwise: fail closed).
    pub writable: &'a [&'a Path],
    /// Read-only files outside the read roots; each must exist.
    pub readable_files: &'a [&'a Path],
    /// The one TCP port that may be connected to (ABI ≥ 4); `None`: no TCP connect at all. TCP
    /// bind is always denied.
    pub connect_port: Option<u16>,
    /// `/dev/zero` may be opened for writing. A command without a memory cgroup may not: a
    /// writable shared mapping of it is shared memory no rlimit counts (a read-only one
    /// allocates nothing).
    pub zero_writable: bool,
}

/// Why a Landlock domain could not be built or entered.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// A step of building or entering the ruleset failed (`step`: "fs", "net", "scope",
    /// "create", "rule", "writable rule", "readable file rule", "device rule", "port rule",
    /// "restrict_self").
    #[error("landlock {step}: {source}")]
    Ruleset {
        step: &'static str,
        source: RulesetError,
    },
    /// A path the domain names could not be opened (`what`: "writable dir", "readable file",
    /// or the device file).
    #[error("landlock {what}: {source}")]
    Open {
        what: &'static str,
        source: PathFdError,
    },
    /// The kernel enforced less than every right requested.
    #[error("landlock ruleset not fully enforced ({0:?})")]
    NotFullyEnforced(RulesetStatus),
    /// `no_new_privs` was not set with the restriction.
    #[error("landlock: no_new_privs not set")]
    NoNewPrivs,
    /// The kernel created no ruleset descriptor to hand to the runner.
    #[error("landlock: the kernel gave no ruleset")]
    NoRuleset,
}

/// Build the ruleset for `domain` at the ABI the kernel offers (capped at [`MAX_ABI`]), with
/// `HardRequirement`: every right requested is enforced or this fails. Nothing is restricted yet;
/// the caller applies it ([`restrict`], or the ruleset fd between fork and exec).
pub fn create(
    domain: &Domain<'_>,
    kernel_abi: i32,
) -> Result<(RulesetCreated, i32), LandlockError> {
    build(domain, kernel_abi)
}

fn build(domain: &Domain<'_>, kernel_abi: i32) -> Result<(RulesetCreated, i32), LandlockError> {
    let level = kernel_abi.min(MAX_ABI);
    let abi = ABI::from(level);
    let err = |step: &'static str| move |source| LandlockError::Ruleset { step, source };
    let open = |what: &'static str| move |source| LandlockError::Open { what, source };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err("fs"))?;
    if level >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err("net"))?;
    }
    if level >= 6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err("scope"))?;
    }
    let mut created = ruleset.create().map_err(err("create"))?;
    let read = AccessFs::from_read(abi);
    let file_rights = AccessFs::from_file(abi);
    for root in domain.read_roots {
        // A root that vanished (or cannot be opened) is simply not readable: skipping it only
        // narrows the domain.
        let Ok(fd) = PathFd::new(root) else {
            continue;
        };
        let access = if root.is_dir() {
            read
        } else {
            read & file_rights
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(err("rule"))?;
    }
    for dir in domain.writable {
        let fd = PathFd::new(dir).map_err(open("writable dir"))?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
            .map_err(err("writable rule"))?;
    }
    for file in domain.readable_files {
        let fd = PathFd::new(file).map_err(open("readable file"))?;
        created = created
            .add_rule(PathBeneath::new(fd, read & file_rights))
            .map_err(err("readable file rule"))?;
    }
    let device_rights: BitFlags<AccessFs> = file_rights
        & (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev);
    for device in DEVICES {
        let path = Path::new(device);
        if !path.exists() {
            continue;
        }
        let rights = if *device == "/dev/zero" && !domain.zero_writable {
            device_rights & AccessFs::ReadFile
        } else {
            device_rights
        };
        let fd = PathFd::new(path).map_err(open(device))?;
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(err("device rule"))?;
    }
    if let (Some(port), true) = (domain.connect_port, level >= 4) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(err("port rule"))?;
    }
    Ok((created, level))
}

/// Restrict the calling thread to read under `read_roots` and write only under `writable` (the
/// scratch dir, plus the gateway Git's own writable dirs), with no TCP at all. Returns the ABI
/// enforced.
pub fn restrict(
    read_roots: &[PathBuf],
    writable: &[&Path],
    kernel_abi: i32,
    zero_writable: bool,
) -> Result<i32, LandlockError> {
    enter(read_roots, writable, kernel_abi, zero_writable)
}

fn enter(
    read_roots: &[PathBuf],
    writable: &[&Path],
    kernel_abi: i32,
    zero_writable: bool,
) -> Result<i32, LandlockError> {
    let domain = Domain {
        read_roots,
        writable,
        readable_files: &[],
        connect_port: None,
        zero_writable,
    };
    let (created, level) = build(&domain, kernel_abi)?;
    let status = created
        .restrict_self()
        .map_err(|source| LandlockError::Ruleset {
            step: "restrict_self",
            source,
        })?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(LandlockError::NotFullyEnforced(status.ruleset));
    }
    if !status.no_new_privs {
        return Err(LandlockError::NoNewPrivs);
    }
    Ok(level)
}

/// The readable roots covering all of `/` except the `masked` paths (which may not exist).
/// Symlinks are never made roots (a rule on a symlink would cover its target).
pub fn read_roots_excluding(masked: &[PathBuf]) -> Vec<PathBuf> {
    let mut targets: Vec<PathBuf> = Vec::new();
    for m in masked {
        // A hung FUSE mount is masked by its path alone: a `stat` of it never returns.
        if crate::protected::is_hung_mount(m) {
            targets.push(m.clone());
            continue;
        }
        if m.symlink_metadata().is_err() {
            continue;
        }
        targets.push(m.clone());
        if let Ok(canonical) = std::fs::canonicalize(m) {
            targets.push(canonical);
        }
    }
    targets.sort();
    targets.dedup();
    let mut out = Vec::new();
    expand(Path::new("/"), &targets, &mut out, 0);
    out
}

fn expand(dir: &Path, masked: &[PathBuf], out: &mut Vec<PathBuf>, depth: usize) {
    if masked.iter().any(|m| m == dir) {
        return;
    }
    let contains_masked = masked.iter().any(|m| m.starts_with(dir) && m != dir);
    if !contains_masked || depth > 64 {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    children.sort();
    for child in children {
        // Never a root, never looked at: a hung FUSE mount (its `stat` never returns).
        if crate::protected::is_hung_mount(&child) {
            continue;
        }
        match child.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => continue,
            // A rule on a file is on its inode, which every name of it shares: a hard link here
            // of a protected file (an owner's backup of a token) made the protected path itself
            // readable (red team 43 B1). A file with more than one name is not made a root, as
            // the read tools refuse it.
            Ok(meta) if !meta.is_dir() && std::os::unix::fs::MetadataExt::nlink(&meta) > 1 => {
                continue;
            }
            Ok(_) => expand(&child, masked, out, depth + 1),
            Err(_) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_writable_dir_fails_closed_and_says_which() {
        let abi = super::super::sys::landlock_abi().expect("this test needs Landlock");
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        let domain = Domain {
            read_roots: &[],
            writable: &[gone.as_path()],
            readable_files: &[],
            connect_port: None,
            zero_writable: true,
        };
        let refused = create(&domain, abi).err().unwrap();
        assert!(matches!(
            refused,
            LandlockError::Open {
                what: "writable dir",
                ..
            }
        ));
        assert!(
            refused.to_string().starts_with("landlock writable dir: "),
            "{refused}"
        );
    }

    #[test]
    fn read_roots_leave_out_masked_paths_and_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join("project/src")).unwrap();
        std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
        std::fs::create_dir_all(home.join(".config/git")).unwrap();
        std::fs::write(home.join(".netrc"), "x").unwrap();
        std::fs::write(home.join("notes.txt"), "x").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), home.join("keys")).unwrap();
        // An owner's hard link of a protected file, next to it and one level down.
        std::fs::write(home.join(".ssh/id_ed25519"), "KEY").unwrap();
        std::fs::hard_link(home.join(".ssh/id_ed25519"), home.join("key-backup")).unwrap();
        std::fs::hard_link(home.join(".netrc"), home.join("project/netrc")).unwrap();
        let masked = vec![
            home.join(".ssh"),
            home.join(".config/gcloud"),
            home.join(".netrc"),
            home.join(".aws"),
        ];
        let roots = read_roots_excluding(&masked);
        for hidden in &masked {
            assert!(
                !roots
                    .iter()
                    .any(|r| hidden.starts_with(r) || r.starts_with(hidden)),
                "{hidden:?} reachable via {roots:?}"
            );
        }
        assert!(!roots.contains(&home.join("keys")));
        // Not a root: a rule on its inode would open `.ssh/id_ed25519` too. One inside a
        // directory granted whole is reached only by its own name (Landlock walks the path).
        assert!(!roots.contains(&home.join("key-backup")), "{roots:?}");
        assert!(roots.contains(&home.join("project")));
        for visible in ["project", "notes.txt", ".config/git"] {
            assert!(roots.contains(&home.join(visible)), "{visible}: {roots:?}");
        }
        assert!(roots.iter().any(|r| r == Path::new("/usr")));
        assert!(!roots.iter().any(|r| r == Path::new("/")));
    }
}
