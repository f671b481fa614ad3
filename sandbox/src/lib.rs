//! Policy and OS enforcement shared by the executor and the command sandbox: which paths are
//! protected and how to open them without following symlinks (`path_policy`); which commands may
//! start (`command`); the fixed command environment (`env`); the helper's spec and report
//! (`spec`); Linux confinement (`linux`, applied by the `gateway sandbox-exec` helper) and the
//! macOS Seatbelt profile (`seatbelt`); how insensitive file systems compare names (`fold`).
//!
//! Architecture invariant: knows nothing of sessions, MCP or sockets; of the workspace it uses
//! only `common`'s refusal codes (`common::outcome`).

// Looks at the owner's files are denied only in the readers (sandbox/clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod boundary;
pub mod command;
pub mod env;
pub mod escape;
pub mod fold;
pub mod layer;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod look;
pub mod path_policy;
pub mod pinned_exe;
pub mod private_fs;
pub mod process;
pub mod protected;
pub mod seatbelt;
pub mod spec;
pub mod timing;
pub mod write_path;

pub use spec::{Enforced, ExecSpec, HostSupport, Limits, MemoryCounters, MemoryGroup, Report};

/// The paths to mask for a command and to leave out of the runner's readable set: the whole
/// protected set ([`protected::protected_set`]: credential stores under `home`, system secrets
/// and private host keys, the gateway state dir, the owner's extras, and their mount-table
/// aliases), each also under its canonical spelling. The read tools refuse exactly these.
pub fn masked_paths(
    home: &std::path::Path,
    state_dir: &std::path::Path,
    extra: &[std::path::PathBuf],
) -> Vec<std::path::PathBuf> {
    let set = protected::protected_set(home, state_dir, extra);
    // Other gateways' entries are never followed (red team 26 B2: another account's symlink at a
    // name it controls, followed here, masked `/usr/lib` for every command): they are listed as
    // real paths already, and the helper masks only what it reaches without another account's
    // symlink.
    let canonical: Vec<std::path::PathBuf> = set
        .paths
        .iter()
        .filter(|p| !set.is_name_only(p) && !protected::is_hung_mount(p))
        .filter_map(|p| crate::look::canonicalize(p).ok().filter(|c| c != p))
        .collect();
    let mut out = set.paths;
    // Devices by allow-list (`protected::DEVICE_FILES`): `/dev` as a whole, and the sandboxes
    // give back only the allowed ones.
    out.push(std::path::PathBuf::from(protected::DEVICE_DIR));
    out.extend(canonical);
    out.sort();
    out.dedup();
    out
}

/// The directory to bind back over the masks: the session's own managed worktree (which lives
/// in the masked state dir), and nothing else. Any other working directory under a mask stays
/// hidden: start validation refuses those, and this is the second line.
pub fn visible_under_masks(
    masked: &[std::path::PathBuf],
    working_directory: &std::path::Path,
    own_worktree: Option<&std::path::Path>,
) -> Vec<std::path::PathBuf> {
    let Some(own) = own_worktree else {
        return Vec::new();
    };
    let canonical =
        |p: &std::path::Path| crate::look::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (wd, own) = (canonical(working_directory), canonical(own));
    if wd != own {
        return Vec::new();
    }
    masked
        .iter()
        .any(|m| wd.starts_with(m) || wd.starts_with(canonical(m)))
        .then_some(wd)
        .into_iter()
        .collect()
}

/// What this host supports for command confinement.
pub fn host_support() -> HostSupport {
    #[cfg(target_os = "linux")]
    {
        linux::host_support()
    }
    #[cfg(target_os = "macos")]
    {
        HostSupport {
            os: "macos".into(),
            namespaces: false,
            landlock_abi: None,
            seccomp: false,
            seatbelt: std::path::Path::new(seatbelt::SANDBOX_EXEC).exists(),
            root: false,
            overlay: false,
            memory_cgroup: None,
            pids_cgroup: false,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        HostSupport {
            os: std::env::consts::OS.into(),
            namespaces: false,
            landlock_abi: None,
            seccomp: false,
            seatbelt: false,
            root: false,
            overlay: false,
            memory_cgroup: None,
            pids_cgroup: false,
        }
    }
}

/// What a tree takes on disk: bytes allocated (blocks) and inodes (every entry, the empty files
/// and directories and overlay whiteouts that take no blocks included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    pub bytes: u64,
    pub inodes: u64,
}

/// Bytes allocated under `dir` (blocks on disk), symlinks counted as themselves and never
/// followed; entries that vanish or cannot be read meanwhile are skipped. Sizes the state dir's
/// budget.
pub fn allocated_bytes(dir: &std::path::Path) -> u64 {
    disk_usage(dir).bytes
}

/// [`allocated_bytes`] and the inodes, in one walk (sizes a session's command layer).
pub fn disk_usage(dir: &std::path::Path) -> DiskUsage {
    use std::os::unix::fs::MetadataExt;
    let mut total = DiskUsage::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = crate::look::symlink_metadata(&path) else {
            continue;
        };
        total.bytes = total
            .bytes
            .saturating_add(meta.blocks().saturating_mul(512));
        total.inodes += 1;
        if meta.is_dir()
            && let Ok(entries) = crate::look::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}
