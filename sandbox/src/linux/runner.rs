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
    #[error("landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
}

/// The network namespace the broker entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopbackNamespace {
    /// A user namespace was needed too (not root): uid and gid are mapped onto themselves.
    pub user_namespace: bool,
}

fn namespace_flags() -> libc::c_int {
    // Safety: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
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
    Ok(LoopbackNamespace { user_namespace })
}

/// Whether [`enter_loopback_namespace`] can work on this host, probed once in a forked child.
pub fn loopback_namespace_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let flags = namespace_flags();
        // Safety: the child only calls unshare and _exit (async-signal-safe).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // Safety: see above; the child exits at once.
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
            };
            let (created, level) = landlock_rules::create(&domain, kernel_abi)
                .map_err(RunnerConfinementError::Landlock)?;
            let fd: Option<OwnedFd> = created.into();
            let fd = fd.ok_or_else(|| {
                RunnerConfinementError::Landlock("the kernel gave no ruleset".into())
            })?;
            (Some(fd), Some(level))
        }
        None => (None, None),
    };
    let filters = if policy.seccomp {
        let main = seccomp::runner_filter().map_err(RunnerConfinementError::Seccomp)?;
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
        if self.filters.is_some() && !sys::drop_capabilities_to(self.last_cap) {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        if !sys::no_new_privs() {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        if let Some(fd) = &self.ruleset {
            // Safety: a valid Landlock ruleset fd (owned by self) and no flags.
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
                // Safety: `prog` points at a filter that outlives the call; the kernel copies it.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// Fork, confine the child with `prepared`, and return the errno of `open(path, O_CREAT|O_WRONLY)`
    /// in it (0: it succeeded).
    fn open_for_write_in_confined_child(prepared: &PreparedRunner, path: &Path) -> i32 {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // Safety: the child makes raw syscalls only (apply_in_child, open, _exit) on memory
        // prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = match prepared.apply_in_child() {
                Err(_) => 250,
                Ok(()) => {
                    // Safety: a valid NUL-terminated path.
                    let fd = unsafe {
                        libc::open(
                            c.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                            0o600,
                        )
                    };
                    if fd >= 0 {
                        0
                    } else {
                        std::io::Error::last_os_error()
                            .raw_os_error()
                            .unwrap_or(251)
                    }
                }
            };
            // Safety: leaving the forked child.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // Safety: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        libc::WEXITSTATUS(status)
    }

    /// In a forked child: enter the namespace, then check that `lo` is the only interface and that
    /// a loopback listener is reachable. Exit code 0 on success.
    #[test]
    fn the_loopback_namespace_has_only_lo_and_it_is_up() {
        if !loopback_namespace_supported() {
            eprintln!("no network namespaces on this host");
            return;
        }
        // Safety: the child runs ordinary code (a forked copy of the test thread) and `_exit`s;
        // nothing it touches is shared with the parent.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = (|| {
                enter_loopback_namespace().map_err(|_| 1)?;
                let dev = std::fs::read_to_string("/proc/self/net/dev").map_err(|_| 2)?;
                let interfaces: Vec<&str> = dev
                    .lines()
                    .skip(2)
                    .filter_map(|l| l.split(':').next())
                    .map(str::trim)
                    .collect();
                if interfaces != ["lo"] {
                    return Err(3);
                }
                let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|_| 4)?;
                let addr = listener.local_addr().map_err(|_| 5)?;
                std::net::TcpStream::connect(addr).map_err(|_| 6)?;
                Ok::<i32, i32>(0)
            })()
            .unwrap_or_else(|code| code);
            // Safety: leaving the forked child.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // Safety: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 0);
    }

    #[test]
    fn the_runner_writes_only_in_its_private_dirs() {
        let Some(abi) = sys::landlock_abi() else {
            eprintln!("no Landlock on this host");
            return;
        };
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let state = root.path().join("state");
        let elsewhere = root.path().join("work");
        for dir in [&home, &state, &elsewhere] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let masked = vec![state.clone()];
        let prepared = prepare(&RunnerPolicy {
            masked: &masked,
            writable: &[home.as_path()],
            readable_files: &[],
            visible: &[],
            broker_port: 9,
            landlock_abi: Some(abi.min(super::super::MAX_LANDLOCK_ABI)),
            seccomp: true,
        })
        .unwrap();
        assert_eq!(
            open_for_write_in_confined_child(&prepared, &home.join("ok")),
            0
        );
        assert_eq!(
            open_for_write_in_confined_child(&prepared, &elsewhere.join("no")),
            libc::EACCES
        );
        assert_eq!(
            open_for_write_in_confined_child(&prepared, &state.join("no")),
            libc::EACCES
        );
        assert!(home.join("ok").exists());
        assert!(!elsewhere.join("no").exists());
    }
}
