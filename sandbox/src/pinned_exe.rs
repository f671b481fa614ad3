//! The gateway's own executable, pinned at gateway start: it is what runs as `gateway broker` and
//! as the `gateway sandbox-exec` helper, so a session that replaces the installed file (a `Write`
//! into an install under a `direct_write` root) must not change what runs next.
//!
//! At start the gateway reads its running image (`/proc/self/exe`, the inode it was executed
//! from, whatever its path now names), hashes it (SHA-256) and copies it into a sealed memfd (no
//! write, grow or shrink; the seals themselves sealed). Brokers are executed from that descriptor,
//! and a broker executes the helper from its own image — the same sealed memfd — so nothing is ever
//! executed from a path again. Where memfds cannot be executed (`vm.memfd_noexec=2`), the opened
//! file itself is kept and its identity (device, inode, size, mtime, ctime) is compared before
//! every use; a difference refuses the use. macOS has no memfd: the file is kept open and checked
//! the same way, and executed by its path right after the check.

use std::fs::File;
use std::io::Read;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Why the executable could not be pinned or may no longer be used.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("copying the executable into a sealed memfd: {0}")]
    Copy(std::io::Error),
    #[error("{path} changed while it was being read; start again")]
    ChangedWhileReading { path: String },
    #[error(
        "the pinned executable changed since the gateway verified it (it was modified in place); \
         nothing is executed from it"
    )]
    Changed,
    #[error("this process's own image is not the verified one: {0}")]
    NotVerified(String),
}

/// What a file looked like when it was hashed; any write changes `ctime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// How the bytes are held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinning {
    /// A sealed in-memory copy: it cannot change.
    SealedCopy,
    /// The file itself, open read-only; checked against this identity before every use.
    OpenFile {
        identity: FileIdentity,
        path: PathBuf,
    },
}

/// A verified executable held by descriptor.
#[derive(Debug)]
pub struct PinnedExe {
    file: File,
    sha256: String,
    size: u64,
    pinning: Pinning,
}

/// Seals that make a memfd immutable.
#[cfg(target_os = "linux")]
const IMMUTABLE_SEALS: rustix::fs::SealFlags = rustix::fs::SealFlags::WRITE
    .union(rustix::fs::SealFlags::SHRINK)
    .union(rustix::fs::SealFlags::GROW)
    .union(rustix::fs::SealFlags::SEAL);

impl PinnedExe {
    /// Pin the running process's own image (the gateway at start).
    pub fn pin_own_image() -> Result<Self, PinError> {
        #[cfg(target_os = "linux")]
        {
            Self::pin(Path::new("/proc/self/exe"))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let exe = std::env::current_exe().map_err(|source| PinError::Read {
                path: "the current executable".into(),
                source,
            })?;
            Self::pin(&exe)
        }
    }

    /// Pin the executable at `path`: hash it and, where possible, copy it into a sealed memfd.
    pub fn pin(path: &Path) -> Result<Self, PinError> {
        let shown = path.display().to_string();
        let read_err = |source| PinError::Read {
            path: shown.clone(),
            source,
        };
        let mut file = File::open(path).map_err(read_err)?;
        let before = FileIdentity::of(&file.metadata().map_err(read_err)?);
        #[cfg(target_os = "linux")]
        let mut copy = sealable_memfd().ok();
        #[cfg(not(target_os = "linux"))]
        let mut copy: Option<File> = None;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_err(e)),
            };
            hasher.update(&buf[..n]);
            size += n as u64;
            if let Some(memfd) = copy.as_mut() {
                use std::io::Write;
                memfd.write_all(&buf[..n]).map_err(PinError::Copy)?;
            }
        }
        let after = FileIdentity::of(&file.metadata().map_err(read_err)?);
        if before != after || after.size != size {
            return Err(PinError::ChangedWhileReading { path: shown });
        }
        let sha256 = hex::encode(hasher.finalize());
        #[cfg(target_os = "linux")]
        if let Some(memfd) = copy {
            rustix::fs::fcntl_add_seals(&memfd, IMMUTABLE_SEALS)
                .map_err(|e| PinError::Copy(e.into()))?;
            let pinned = Self {
                file: memfd,
                sha256,
                size,
                pinning: Pinning::SealedCopy,
            };
            if pinned.can_execute_memfd() {
                return Ok(pinned);
            }
            // memfds cannot be executed here (`vm.memfd_noexec=2`): keep the file itself.
            return Ok(Self {
                file,
                sha256: pinned.sha256,
                size,
                pinning: Pinning::OpenFile {
                    identity: after,
                    path: path.to_path_buf(),
                },
            });
        }
        let _ = copy;
        Ok(Self {
            file,
            sha256,
            size,
            pinning: Pinning::OpenFile {
                identity: after,
                path: canonical_or(path),
            },
        })
    }

    /// Pin `path` without copying it: the file stays open and its identity is checked before
    /// every use (the fallback where memfds cannot be executed; also what benches compare with).
    pub fn pin_open_file(path: &Path) -> Result<Self, PinError> {
        let mut hasher = Sha256::new();
        let mut file = File::open(path).map_err(|source| PinError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let meta = file.metadata().map_err(|source| PinError::Read {
            path: path.display().to_string(),
            source,
        })?;
        std::io::copy(&mut file, &mut HashWriter(&mut hasher)).map_err(|source| {
            PinError::Read {
                path: path.display().to_string(),
                source,
            }
        })?;
        let identity = FileIdentity::of(&meta);
        Ok(Self {
            file,
            sha256: hex::encode(hasher.finalize()),
            size: identity.size,
            pinning: Pinning::OpenFile {
                identity,
                path: canonical_or(path),
            },
        })
    }

    /// A broker's view of its own image: its `/proc/self/exe`, which is the gateway's sealed memfd
    /// when the gateway pinned one. An unsealed image (the file fallback) is hashed again and
    /// must match `expected_sha256`, the hash the gateway verified.
    pub fn adopt_own_image(expected_sha256: Option<&str>) -> Result<Self, PinError> {
        #[cfg(target_os = "linux")]
        {
            let path = Path::new("/proc/self/exe");
            let file = File::open(path).map_err(|source| PinError::Read {
                path: "/proc/self/exe".into(),
                source,
            })?;
            if rustix::fs::fcntl_get_seals(&file).is_ok_and(|s| s.contains(IMMUTABLE_SEALS)) {
                let size = file.metadata().map(|m| m.size()).unwrap_or(0);
                return Ok(Self {
                    file,
                    sha256: expected_sha256.unwrap_or_default().to_string(),
                    size,
                    pinning: Pinning::SealedCopy,
                });
            }
            drop(file);
            let Some(expected) = expected_sha256 else {
                return Err(PinError::NotVerified(
                    "it is not a sealed copy and the gateway named no verified hash".into(),
                ));
            };
            let pinned = Self::pin(path)?;
            if pinned.sha256 != expected {
                return Err(PinError::NotVerified(
                    "its SHA-256 differs from the one the gateway verified".into(),
                ));
            }
            Ok(pinned)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let pinned = Self::pin_own_image()?;
            match expected_sha256 {
                Some(expected) if expected != pinned.sha256 => Err(PinError::NotVerified(
                    "its SHA-256 differs from the one the gateway verified".into(),
                )),
                _ => Ok(pinned),
            }
        }
    }

    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }

    /// `sealed-memfd` or `open-file`, for logs and `doctor`.
    pub fn pinning_name(&self) -> &'static str {
        match self.pinning {
            Pinning::SealedCopy => "sealed-memfd",
            Pinning::OpenFile { .. } => "open-file",
        }
    }

    /// The path to give `execve` for this executable, after checking it is unchanged: the
    /// descriptor itself (`/proc/self/fd/N`: the kernel opens the pinned file, never a path a
    /// session could replace), or on macOS the original path once its identity matched.
    pub fn exec_path(&self) -> Result<PathBuf, PinError> {
        if let Pinning::OpenFile { identity, .. } = &self.pinning {
            let now = self.file.metadata().map_err(|_| PinError::Changed)?;
            if FileIdentity::of(&now) != *identity {
                return Err(PinError::Changed);
            }
        }
        #[cfg(target_os = "linux")]
        {
            Ok(PathBuf::from(format!(
                "/proc/self/fd/{}",
                self.file.as_raw_fd()
            )))
        }
        #[cfg(not(target_os = "linux"))]
        {
            match &self.pinning {
                Pinning::OpenFile { identity, path } => {
                    let at_path = std::fs::metadata(path).map_err(|_| PinError::Changed)?;
                    if FileIdentity::of(&at_path) != *identity {
                        return Err(PinError::Changed);
                    }
                    Ok(path.clone())
                }
                Pinning::SealedCopy => Err(PinError::Changed),
            }
        }
    }

    /// Whether a sealed memfd can be executed on this host (`vm.memfd_noexec` may forbid it).
    #[cfg(target_os = "linux")]
    fn can_execute_memfd(&self) -> bool {
        std::fs::read_to_string("/proc/sys/vm/memfd_noexec")
            .map(|v| v.trim() != "2")
            .unwrap_or(true)
    }
}

/// An empty memfd that can be sealed and executed.
#[cfg(target_os = "linux")]
fn sealable_memfd() -> std::io::Result<File> {
    use rustix::fs::{MemfdFlags, memfd_create};
    let name = c"ngw-gateway";
    let base = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    // `MFD_EXEC` (Linux 6.3): executable even where the default is `MFD_NOEXEC_SEAL`.
    let fd = match memfd_create(name, base | MemfdFlags::EXEC) {
        // Kernels before 6.3 do not know MFD_EXEC; their memfds are executable.
        Err(rustix::io::Errno::INVAL) => memfd_create(name, base),
        other => other,
    }?;
    Ok(File::from(fd))
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn canonical_or(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_copy_does_not_follow_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::copy("/bin/true", &exe).unwrap();
        let pinned = PinnedExe::pin(&exe).unwrap();
        let expected = hex::encode(Sha256::digest(std::fs::read("/bin/true").unwrap()));
        assert_eq!(pinned.sha256(), expected);
        // Replace the file the way a session's Write would (a new inode renamed over it).
        std::fs::write(dir.path().join("new"), b"#!/bin/sh\nexit 3\n").unwrap();
        std::fs::rename(dir.path().join("new"), &exe).unwrap();
        let path = pinned.exec_path().unwrap();
        let status = std::process::Command::new(&path).status().unwrap();
        assert!(status.success(), "{status:?}: ran the replacement");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_copy_is_sealed() {
        let pinned = PinnedExe::pin(Path::new("/bin/true")).unwrap();
        assert_eq!(pinned.pinning_name(), "sealed-memfd");
        let seals = rustix::fs::fcntl_get_seals(&pinned.file).unwrap();
        assert!(seals.contains(IMMUTABLE_SEALS), "{seals:?}");
        let mut writable = std::fs::OpenOptions::new()
            .write(true)
            .open(pinned.exec_path().unwrap())
            .unwrap();
        use std::io::Write;
        let err = writable.write_all(b"x").unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::PERM.raw_os_error()),
            "{err}"
        );
    }

    #[test]
    fn an_open_file_modified_in_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::copy("/bin/true", &exe).unwrap();
        let pinned = PinnedExe::pin_open_file(&exe).unwrap();
        assert_eq!(pinned.pinning_name(), "open-file");
        assert!(pinned.exec_path().is_ok());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut f = std::fs::OpenOptions::new().append(true).open(&exe).unwrap();
        use std::io::Write;
        f.write_all(b"\0").unwrap();
        assert!(matches!(pinned.exec_path(), Err(PinError::Changed)));
    }
}
