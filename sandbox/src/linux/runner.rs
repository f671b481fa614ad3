//! Linux confinement of the Claude Code runner: the broker's own network namespace with only
//! loopback up ([`enter_loopback_namespace`], entered once at broker start, before any thread), and
//! the runner's own layers — capabilities dropped, `no_new_privs`, Landlock (writes only to its
//! private dirs; TCP connect only to the broker's port, no bind), seccomp — prepared before the
//! fork ([`prepare`]) and applied in the child between fork and exec
//! ([`PreparedRunner::apply_in_child`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{landlock_rules, namespaces, seccomp, sys};

/// Why the runner's confinement could not be established.
#[derive(Debug, thiserror::Error)]
pub enum RunnerConfinementError {
    #[error("network namespace: {0}")]
    Namespace(String),
    #[error(transparent)]
    Landlock(#[from] landlock_rules::LandlockError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
}

/// The network namespace the broker entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopbackNamespace {
    /// A user namespace was needed too (not root): uid and gid are mapped onto themselves.
    pub user_namespace: bool,
}

fn namespace_flags() -> libc::c_int {
    if rustix::process::geteuid().is_root() {
        // Root may create a network namespace directly; a user namespace would also take away
        // its access to files of unmapped owners, which the executor needs.
        libc::CLONE_NEWNET
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNET
    }
}

/// Move the calling process into a new network namespace whose only interface is `lo`, up. Must
/// run while the process is single-threaded (a user namespace requires it). Path-based Unix
/// sockets keep working across namespaces; TCP reaches only this namespace's loopback.
pub fn enter_loopback_namespace() -> Result<LoopbackNamespace, RunnerConfinementError> {
    let flags = namespace_flags();
    namespaces::unshare_as_self(flags)
        .map_err(|err| RunnerConfinementError::Namespace(err.to_string()))?;
    let user_namespace = flags & libc::CLONE_NEWUSER != 0;
    sys::loopback_up()
        .map_err(|err| RunnerConfinementError::Namespace(format!("bringing lo up: {err}")))?;
    // The new user namespace gave this process every capability over the files its own account
    // owns (`CAP_DAC_OVERRIDE` on mapped owners): the broker's in-process tools would then read a
    // mode-000 file and write into a read-only directory of the owner that the owner's shell and
    // RunCommand cannot. Nothing after this point needs them; still single-threaded, so every
    // later thread starts without them.
    if user_namespace && !sys::drop_capabilities() {
        return Err(RunnerConfinementError::Namespace(
            "the capabilities of the new user namespace could not be dropped".into(),
        ));
    }
    Ok(LoopbackNamespace { user_namespace })
}

/// Whether [`enter_loopback_namespace`] can work on this host, probed once in a forked child.
pub fn loopback_namespace_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let flags = namespace_flags();
        // SAFETY: the child only calls unshare and _exit (async-signal-safe).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above; the child exits at once.
            unsafe { libc::_exit(i32::from(libc::unshare(flags) != 0)) };
        }
        if pid < 0 {
            return false;
        }
        sys::wait_child(pid)
            .is_ok_and(|status| libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)
    })
}

/// What the runner may touch.
pub struct RunnerPolicy<'a> {
    /// Hidden from the runner (credential stores, the gateway state dir): left out of the readable
    /// set, like commands without a mount namespace.
    pub masked: &'a [PathBuf],
    /// Its private dirs (HOME, TMPDIR): the only writable places; each must exist.
    pub writable: &'a [&'a Path],
    /// Files under a masked path it must read (its MCP config); each must exist.
    pub readable_files: &'a [&'a Path],
    /// Directories under a masked path it must read (a `worktree_write` session's worktree, in
    /// the state dir): readable again, not writable.
    pub visible: &'a [PathBuf],
    /// The broker's loopback port, the one TCP destination.
    pub broker_port: u16,
    /// Landlock ABI to enforce (`None`: no Landlock).
    pub landlock_abi: Option<i32>,
    /// Install the seccomp filter (and drop capabilities, set `no_new_privs`).
    pub seccomp: bool,
}

/// Everything the child needs, built before the fork so the child only makes raw syscalls.
pub struct PreparedRunner {
    ruleset: Option<OwnedFd>,
    landlock_abi: Option<i32>,
    filters: Option<(seccompiler::BpfProgram, seccompiler::BpfProgram)>,
    last_cap: libc::c_ulong,
}

/// Build the runner's Landlock ruleset and seccomp filters for `policy`. Fails if any requested
/// layer cannot be built in full (`HardRequirement`).
pub fn prepare(policy: &RunnerPolicy<'_>) -> Result<PreparedRunner, RunnerConfinementError> {
    let (ruleset, landlock_abi) = match policy.landlock_abi {
        Some(kernel_abi) => {
            let mut read_roots = landlock_rules::read_roots_excluding(policy.masked);
            read_roots.extend(policy.visible.iter().cloned());
            let domain = landlock_rules::Domain {
                read_roots: &read_roots,
                writable: policy.writable,
                readable_files: policy.readable_files,
                connect_port: Some(policy.broker_port),
                zero_writable: true,
            };
            let (created, level) = landlock_rules::create(&domain, kernel_abi)?;
            let fd: Option<OwnedFd> = created.into();
            let fd = fd.ok_or(landlock_rules::LandlockError::NoRuleset)?;
            (Some(fd), Some(level))
        }
        None => (None, None),
    };
    let filters = if policy.seccomp {
        let main = seccomp::runner_filter()?;
        Some((main, seccomp::guard_filter()))
    } else {
        None
    };
    Ok(PreparedRunner {
        ruleset,
        landlock_abi,
        filters,
        last_cap: sys::last_cap(),
    })
}

impl PreparedRunner {
    /// Landlock ABI the child will enforce.
    pub fn landlock_abi(&self) -> Option<i32> {
        self.landlock_abi
    }

    /// Confine the calling process (the runner's child, after fork, before exec): drop all
    /// capabilities, set `no_new_privs`, enter the Landlock domain, install the seccomp filters.
    /// Raw syscalls only: no allocation, so it is safe in a forked child of a threaded process.
    /// Any failure is returned, and the exec must then not happen.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        // Only the errno reaches the parent (and a message would allocate).
        let fail = || {
            let code = std::io::Error::last_os_error()
                .raw_os_error()
                .filter(|code| *code != 0)
                .unwrap_or(libc::EPERM);
            std::io::Error::from_raw_os_error(code)
        };
        set_runner_oom_score_adj();
        if self.filters.is_some() && !sys::drop_capabilities_to(self.last_cap) {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        if !sys::no_new_privs() {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        if let Some(fd) = &self.ruleset {
            // SAFETY: a valid Landlock ruleset fd (owned by self) and no flags.
            let ret =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
            if ret != 0 {
                return Err(fail());
            }
        }
        if let Some((main, guard)) = &self.filters {
            for filter in [main, guard] {
                let prog = libc::sock_fprog {
                    len: filter.len() as u16,
                    filter: filter.as_ptr() as *mut libc::sock_filter,
                };
                // SAFETY: `prog` points at a filter that outlives the call; the kernel copies it.
                let ret = unsafe {
                    libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0,
                        &prog as *const libc::sock_fprog,
                    )
                };
                if ret != 0 {
                    return Err(fail());
                }
            }
        }
        Ok(())
    }
}

/// The runner is picked by the OOM killer after commands, before the broker and the gateway
/// (raising is always allowed). Raw syscalls on constant data only; best effort.
fn set_runner_oom_score_adj() {
    use rustix::fs::{Mode, OFlags};
    const VALUE: &[u8] = b"900";
    const _: () = assert!(super::cgroup::RUNNER_OOM_SCORE_ADJ == 900);
    // A `&CStr` path: rustix passes it as it is, no allocation (this runs between fork and exec).
    let path = c"/proc/self/oom_score_adj";
    if let Ok(fd) = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty()) {
        let _ = rustix::io::write(&fd, VALUE);
    }
}

#[cfg(test)]
mod tests;
