//! Entering new namespaces as oneself: one `unshare`, then — when a user namespace is among them —
//! the caller's uid and gid mapped onto themselves, the only mapping an unprivileged process may
//! write. Used by the command helper (all its namespaces) and the broker (its loopback-only
//! network namespace).

use std::io;

/// Why the namespaces could not be entered.
#[derive(Debug, thiserror::Error)]
pub enum UnshareError {
    /// `unshare` refused: nothing changed, the process is where it was.
    #[error("unshare: {0}")]
    Unshare(io::Error),
    /// Inside the new user namespace, but an id map could not be written: the process has no
    /// identity there (it is `nobody`) and must not go on to run anything.
    #[error("writing {map}: {source}")]
    IdMap {
        map: &'static str,
        source: io::Error,
    },
}

/// `unshare(flags)`; with `CLONE_NEWUSER`, also deny `setgroups` and map the caller's uid and gid
/// onto themselves. A user namespace needs the process to be single-threaded.
pub fn unshare_as_self(flags: libc::c_int) -> Result<(), UnshareError> {
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    // SAFETY: unshare takes no pointers; it only changes this process's namespaces.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(UnshareError::Unshare(io::Error::last_os_error()));
    }
    if flags & libc::CLONE_NEWUSER == 0 {
        return Ok(());
    }
    // Denying setgroups is what allows an unprivileged gid_map; where it is not needed (or the
    // file does not exist on older kernels) the gid_map write below is the check.
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let map = |map: &'static str, id: libc::uid_t| {
        std::fs::write(format!("/proc/self/{map}"), format!("{id} {id} 1"))
            .map_err(|source| UnshareError::IdMap { map, source })
    };
    map("uid_map", uid)?;
    map("gid_map", gid)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a forked child (single-threaded, as a user namespace needs): enter a user namespace and
    /// report through the exit status whether the ids were mapped onto themselves.
    #[test]
    fn a_new_user_namespace_keeps_the_callers_ids() {
        let (uid, gid) = (
            rustix::process::getuid().as_raw(),
            rustix::process::getgid().as_raw(),
        );
        // SAFETY: the child makes a few syscalls and file writes, then leaves with _exit; glibc
        // keeps malloc usable in a forked child.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = match unshare_as_self(libc::CLONE_NEWUSER) {
                Err(UnshareError::Unshare(_)) => 10,
                Err(UnshareError::IdMap { .. }) => 11,
                Ok(()) => {
                    let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
                    let fields: Vec<&str> = uid_map.split_whitespace().collect();
                    let (now_uid, now_gid) = (
                        rustix::process::getuid().as_raw(),
                        rustix::process::getgid().as_raw(),
                    );
                    if now_uid != uid || now_gid != gid {
                        12
                    } else if fields != [uid.to_string(), uid.to_string(), "1".to_string()] {
                        13
                    } else {
                        0
                    }
                }
            };
            // SAFETY: leaves the forked child without running the test harness's exit code.
            unsafe { libc::_exit(code) };
        }
        assert!(pid > 0, "fork failed");
        let status = super::super::sys::wait_child(pid).unwrap();
        assert!(libc::WIFEXITED(status), "child status {status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "10: unshare refused, 11: id map refused, 12: ids changed, 13: wrong uid_map"
        );
    }

    #[test]
    fn a_refused_unshare_changes_nothing_and_says_so() {
        let before = std::fs::read_link("/proc/self/ns/user").unwrap();
        // Bit 0x1 is a signal number, never a namespace: the kernel refuses it (EINVAL).
        let err = unshare_as_self(0x1).unwrap_err();
        assert!(
            matches!(&err, UnshareError::Unshare(e) if e.raw_os_error() == Some(libc::EINVAL)),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("unshare: "), "{err}");
        assert_eq!(std::fs::read_link("/proc/self/ns/user").unwrap(), before);
    }
}
