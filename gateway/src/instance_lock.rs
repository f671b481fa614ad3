//! One gateway per state dir: an exclusive `flock` on `<state>/gateway.lock`, taken right after
//! the state dir exists and before anything in it is read, created or adopted, in every mode
//! (HTTP and stdio). A second gateway on the same state dir exits at once naming the first (its
//! pid and start time, from the lock file): otherwise it would re-adopt the first's brokers and
//! both would write one database.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The lock file's name in the state dir.
pub const LOCK_FILE: &str = "gateway.lock";

/// Held for the gateway's lifetime; the kernel releases it when the process ends (also on a
/// crash). The descriptor is close-on-exec: brokers never inherit it, so a broker that outlives
/// its gateway does not keep the next one out.
pub struct InstanceLock {
    _file: nix::fcntl::Flock<std::fs::File>,
}

impl std::fmt::Debug for InstanceLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstanceLock")
    }
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum InstanceLockError {
    #[error(
        "another gateway is serving this state dir ({holder}): {state_dir}; one gateway per \
         state dir — stop that one first, or give this one another CLAUDE_TOOLS_STATE_DIR"
    )]
    Held { holder: String, state_dir: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Take the state dir's instance lock (the dir exists, 0700), or say who holds it.
pub fn acquire(state_dir: &Path) -> Result<InstanceLock, InstanceLockError> {
    let path = state_dir.join(LOCK_FILE);
    let io = |source: std::io::Error| InstanceLockError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io)?;
    use nix::fcntl::{Flock, FlockArg};
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked,
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
            let mut text = String::new();
            // Bounded: the file is ours, but a damaged one must not flood the message.
            let _ = (&mut file).take(256).read_to_string(&mut text);
            let holder: String = text
                .trim()
                .chars()
                .filter(|c| !c.is_control())
                .take(120)
                .collect();
            return Err(InstanceLockError::Held {
                holder: if holder.is_empty() {
                    "it is starting".into()
                } else {
                    holder
                },
                state_dir: state_dir.display().to_string(),
            });
        }
        Err((_, err)) => return Err(io(err.into())),
    };
    let holder = format!(
        "pid {}, started {}",
        std::process::id(),
        common::time::now_rfc3339()
    );
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    file.write_all(holder.as_bytes()).map_err(io)?;
    Ok(InstanceLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).unwrap();
        let err = acquire(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("another gateway is serving this state dir"),
            "{err}"
        );
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        let _again = acquire(dir.path()).unwrap();
    }
}
