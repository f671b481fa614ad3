//! One gateway per state dir, checked before anything in it is read, created or adopted, in
//! every mode (HTTP and stdio): an exclusive `flock` on the state dir itself — a directory the
//! same user cannot unlink while it holds files, unlike a lock file (red team 23i: with
//! `gateway.lock` removed, a second gateway took a fresh lock, re-adopted the first's brokers and
//! appended to its ledger) — then on `<state>/gateway.lock` (which names the holder: pid and start
//! time, and on a second line its start in ticks and boot; older gateways lock only it), then
//! the admin socket must not answer, and, the locks taken, the holder the file names must not be
//! alive (a stacked file system's lock never reaches the first gateway's: red team 45 F3). A
//! second gateway exits at once naming the first. The holder checks every second that the path
//! still names the directory it locked ([`InstanceLock::check`]): if the state dir was moved or
//! replaced it stops (its brokers keep running for the gateway that serves the moved dir), and
//! a removed lock file is put back.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{FlockOperation, OFlags};

/// The state dir's database files, which must have no other name (another state dir holding
/// one would share the database and its ledger).
const LINK_CHECKED: [&str; 4] = [
    "gateway.sqlite3",
    "gateway.sqlite3-wal",
    "gateway.sqlite3-shm",
    "ledger-head",
];

/// The lock file's name in the state dir.
pub const LOCK_FILE: &str = "gateway.lock";

/// Held for the gateway's lifetime; the kernel releases it when the process ends (also on a
/// crash). The descriptors are close-on-exec: brokers never inherit them, so a broker that
/// outlives its gateway does not keep the next one out.
pub struct InstanceLock {
    state_dir: PathBuf,
    /// The state dir, locked (until this descriptor closes); `(dev, ino)` is what its path must
    /// keep naming.
    _dir: File,
    dir_identity: (u64, u64),
    /// `gateway.lock`, locked (replaced when it was removed).
    file: Mutex<File>,
    holder: String,
}

impl std::fmt::Debug for InstanceLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstanceLock")
    }
}

/// Why the lock was not taken, or was lost.
#[derive(Debug, thiserror::Error)]
pub enum InstanceLockError {
    #[error(
        "another gateway is serving this state dir ({holder}): {state_dir}; one gateway per \
         state dir — stop that one first, or give this one another CLAUDE_TOOLS_STATE_DIR"
    )]
    Held { holder: String, state_dir: String },
    #[error(
        "the state dir {state_dir} is no longer the directory this gateway locked (it was moved \
         or replaced); stopping so that no two gateways write one state"
    )]
    Replaced { state_dir: String },
    #[error(
        "the state dir {state_dir} is on a FUSE file system, whose locks need not reach the files \
         below it (a second gateway on a FUSE mirror of a live state dir took it over) and whose \
         writes need not be durable; give the gateway a state dir on a local file system"
    )]
    OnFuse { state_dir: String },
    #[error(
        "{path} has another name (a hard link): a gateway on another state dir holding it would \
         share this one's database and ledger; give each state dir its own files (copy, do not \
         link), then start again"
    )]
    Linked { path: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> InstanceLockError + '_ {
    move |source| InstanceLockError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Whether the opened directory lies on a FUSE file system (Linux; never elsewhere).
fn on_fuse(dir: &File) -> bool {
    #[cfg(target_os = "linux")]
    {
        /// `FUSE_SUPER_MAGIC`, `statfs`'s type of every FUSE mount (sshfs, bindfs, rclone, …).
        const FUSE_MAGIC: i64 = 0x6573_5546;
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        return rustix::fs::fstatfs(dir).is_ok_and(|st| st.f_type as i64 == FUSE_MAGIC);
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

/// The lock file's line saying its holder is stopping.
const STOPPING: &str = "stopping";

/// How long a gateway whose lock was taken waits for the holder its lock file names to exit.
const HOLDER_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Take the state dir's instance lock (the dir exists, 0700), or say who holds it.
pub fn acquire(state_dir: &Path) -> Result<InstanceLock, InstanceLockError> {
    let held = |holder: String| InstanceLockError::Held {
        holder,
        state_dir: state_dir.display().to_string(),
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::DIRECTORY.bits() as i32)
        .open(state_dir)
        .map_err(io_at(state_dir))?;
    // A lock taken through FUSE may never reach the directory below it: a bindfs mirror of a
    // live state dir let a second gateway lock "its" dir, take the admin socket and roll the
    // first one's database back (red team 43 B7).
    if on_fuse(&dir) {
        return Err(InstanceLockError::OnFuse {
            state_dir: state_dir.display().to_string(),
        });
    }
    let meta = dir.metadata().map_err(io_at(state_dir))?;
    // A holder that is stopping (it marks its lock file on SIGTERM, [`InstanceLock::
    // mark_stopping`]) still holds the lock while it finishes: a restart right after the
    // SIGTERM waits for it (red team 49: refused at once, 3 of 3). A running holder refuses at
    // once, as before.
    let deadline = std::time::Instant::now() + HOLDER_EXIT_WAIT;
    let mut dir = dir;
    let dir = loop {
        let copy = dir.try_clone().map_err(io_at(state_dir))?;
        if let Some(locked) = try_lock(copy).map_err(io_at(state_dir))? {
            break locked;
        }
        let stopping = lock_text(state_dir).is_some_and(|text| text.lines().any(|l| l == STOPPING));
        if !stopping || std::time::Instant::now() >= deadline {
            return Err(held(holder_of(state_dir).unwrap_or_else(|| {
                format!("its lock file {LOCK_FILE} was removed: holder unknown")
            })));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        dir = dir.try_clone().map_err(io_at(state_dir))?;
    };
    // A state file with a second name is shared with whatever directory holds that name: a
    // gateway there writes this one's database behind its locks (red team 45 F7).
    for name in LINK_CHECKED {
        let path = state_dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.nlink() > 1) {
            return Err(InstanceLockError::Linked {
                path: path.display().to_string(),
            });
        }
    }
    // Locked, yet the holder the lock file names is alive: a lock taken through a stacked file
    // system (an overlay whose upper layer is a live state dir, red team 45 F3) never reaches
    // the first gateway's, but its lock file still names that gateway.
    // A gateway that is shutting down has let its lock go before it exits: a restart right
    // after a SIGTERM waits for it (red team 48 F9: refused for ~2 s, blaming the file system).
    let mut holder = live_holder(state_dir);
    let deadline = std::time::Instant::now() + HOLDER_EXIT_WAIT;
    while holder.is_some() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        holder = live_holder(state_dir);
    }
    if let Some(holder) = holder {
        return Err(held(format!(
            "{holder}, still running {} s after its lock was released here (its lock did not \
             reach this path: a stacked or network file system?)",
            HOLDER_EXIT_WAIT.as_secs()
        )));
    }
    let holder = format!(
        "pid {}, started {}",
        std::process::id(),
        common::time::now_rfc3339()
    );
    // A second line names this process by what survives no pid reuse: its start in clock
    // ticks since boot, and the boot.
    let identity = process_identity("self").unwrap_or_default();
    let holder_line = format!("{holder}\n{identity}\n");
    // An older gateway locks only the file.
    let file = lock_file(state_dir, &holder_line)?
        .ok_or_else(|| held(holder_of(state_dir).unwrap_or_else(|| "it is starting".into())))?;
    if let Some(socket) = answering_admin_socket(state_dir) {
        return Err(held(format!(
            "its admin socket {} answers",
            socket.display()
        )));
    }
    Ok(InstanceLock {
        state_dir: state_dir.to_path_buf(),
        _dir: dir,
        dir_identity: (meta.dev(), meta.ino()),
        file: Mutex::new(file),
        holder: holder_line,
    })
}

/// Lock `gateway.lock` and write `holder` in it; `None`: another process holds it.
fn lock_file(state_dir: &Path, holder: &str) -> Result<Option<File>, InstanceLockError> {
    let path = state_dir.join(LOCK_FILE);
    let io = io_at(&path);
    let file = sandbox::private_fs::open_private_file(
        &path,
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .map_err(&io)?;
    let Some(mut file) = try_lock(file).map_err(&io)? else {
        return Ok(None);
    };
    file.set_len(0).map_err(&io)?;
    file.rewind().map_err(&io)?;
    file.write_all(holder.as_bytes()).map_err(&io)?;
    Ok(Some(file))
}

/// `flock(LOCK_EX | LOCK_NB)` on `file`; `None`: another open file holds the lock.
fn try_lock(file: File) -> std::io::Result<Option<File>> {
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// The lock file's text (bounded: the file is ours, but a damaged one must not flood a
/// message), if it exists.
fn lock_text(state_dir: &Path) -> Option<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(state_dir.join(LOCK_FILE))
        .ok()?;
    let mut text = String::new();
    let _ = file.take(512).read_to_string(&mut text);
    Some(text)
}

/// `start <ticks> boot <id>` of process `pid` (`self` for this one), from procfs.
fn process_identity(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the command's closing parenthesis.
    let after = stat.rsplit_once(')')?.1;
    let start = after.split_whitespace().nth(19)?;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(format!("start {start} boot {}", boot.trim()))
}

/// The holder the lock file names, if that very process is alive (same pid, start and boot)
/// and is not this one.
fn live_holder(state_dir: &Path) -> Option<String> {
    let text = lock_text(state_dir)?;
    let mut lines = text.lines();
    let holder = lines.next()?.trim().to_string();
    let identity = lines.next()?.trim();
    let pid = holder.strip_prefix("pid ")?.split(',').next()?.trim();
    let pid: u32 = pid.parse().ok()?;
    if pid == std::process::id() || identity.is_empty() {
        return None;
    }
    (process_identity(&pid.to_string()).as_deref() == Some(identity)).then(|| {
        holder
            .chars()
            .filter(|c| !c.is_control())
            .take(120)
            .collect()
    })
}

/// The holder a lock file names (bounded, its first line), if it exists and says anything.
fn holder_of(state_dir: &Path) -> Option<String> {
    let text = lock_text(state_dir)?;
    let holder: String = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(120)
        .collect();
    (!holder.is_empty()).then_some(holder)
}

/// The admin socket, if a process answers on it (a gateway this lock did not see).
fn answering_admin_socket(state_dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let socket = admin_socket_path(state_dir);
    let meta = std::fs::symlink_metadata(&socket).ok()?;
    (meta.file_type().is_socket() && std::os::unix::net::UnixStream::connect(&socket).is_ok())
        .then_some(socket)
}

impl InstanceLock {
    /// Say in the lock file that this gateway is stopping (after SIGTERM): a gateway started
    /// meanwhile waits for the lock instead of refusing.
    pub fn mark_stopping(&self) {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = file.write_all(format!("{STOPPING}\n").as_bytes());
    }

    /// Whether the lock still guards the state dir's path: the path names the directory locked
    /// at start (else [`InstanceLockError::Replaced`]: the caller stops serving). A removed or
    /// replaced lock file is locked anew (the directory's lock keeps other gateways out
    /// meanwhile).
    pub fn check(&self) -> Result<(), InstanceLockError> {
        let now = std::fs::metadata(&self.state_dir).map(|m| (m.dev(), m.ino()));
        if now.ok() != Some(self.dir_identity) {
            return Err(InstanceLockError::Replaced {
                state_dir: self.state_dir.display().to_string(),
            });
        }
        let path = self.state_dir.join(LOCK_FILE);
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let locked = file.metadata().map(|m| (m.dev(), m.ino())).ok();
        let named = std::fs::symlink_metadata(&path)
            .map(|m| (m.dev(), m.ino()))
            .ok();
        if named.is_none() || named != locked {
            tracing::warn!("{LOCK_FILE} was removed or replaced; locking it again");
            match lock_file(&self.state_dir, &self.holder)? {
                Some(fresh) => *file = fresh,
                None => {
                    return Err(InstanceLockError::Held {
                        holder: holder_of(&self.state_dir).unwrap_or_default(),
                        state_dir: self.state_dir.display().to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The admin socket's path under a state dir (`oauth::admin` serves it; a running gateway is
/// also found by it).
pub fn admin_socket_path(state_dir: &Path) -> std::path::PathBuf {
    state_dir.join("run").join("admin.sock")
}

#[cfg(test)]
mod tests;
