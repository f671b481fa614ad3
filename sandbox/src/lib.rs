//! Policy and OS enforcement shared by the executor and the command sandbox: which paths are
//! protected and how to open them without following symlinks (`path_policy`); which commands may
//! start (`command`); the fixed command environment (`env`); the helper's spec and report
//! (`spec`); Linux confinement (`linux`, applied by the `gateway sandbox-exec` helper) and the
//! macOS Seatbelt profile (`seatbelt`).
//!
//! Architecture invariant: knows nothing of sessions, MCP or sockets; depends on no workspace crate.

pub mod boundary;
pub mod command;
pub mod env;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod path_policy;
pub mod pinned_exe;
pub mod seatbelt;
pub mod spec;
pub mod write_path;

pub use spec::{Enforced, ExecSpec, HostSupport, Limits, Report};

/// The paths to mask for a command: credential stores under `home`, system secrets, the gateway
/// state dir and any owner extras.
pub fn masked_paths(
    home: &std::path::Path,
    state_dir: &std::path::Path,
    extra: &[std::path::PathBuf],
) -> Vec<std::path::PathBuf> {
    // One protected set for both controls: what the tools refuse, commands never see.
    let mut out: Vec<std::path::PathBuf> = path_policy::HOME_PROTECTED
        .iter()
        .map(|rel| home.join(rel))
        .collect();
    out.extend(
        path_policy::SYSTEM_PROTECTED
            .iter()
            .map(std::path::PathBuf::from),
    );
    out.push(state_dir.to_path_buf());
    out.extend(extra.iter().cloned());
    out
}

/// The working directory again, if it lies under a masked path (a `worktree_write` session's
/// worktree lives in the state dir): the one place under the masks a confined process may read.
pub fn visible_under_masks(
    masked: &[std::path::PathBuf],
    working_directory: &std::path::Path,
) -> Vec<std::path::PathBuf> {
    masked
        .iter()
        .any(|m| working_directory.starts_with(m))
        .then(|| working_directory.to_path_buf())
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
        }
    }
}
