//! A command's private `/dev` (inside its mount namespace): a small tmpfs over the host's
//! `/dev` holding only the allow-listed device nodes of `protected::DEVICE_FILES` (bound from
//! descriptors opened before it covers them), the `protected::DEVICE_LINKS`, a devpts instance
//! of its own (`/dev/pts`, `/dev/ptmx`: ptys for tools that want one, none of the owner's) and a
//! private empty tmpfs `/dev/shm` (POSIX semaphores and shared memory: Python's
//! multiprocessing), nothing else. The pts and shm mounts stay writable after `/` is made
//! read-only (the caller clears the flag on the paths returned).

use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::sys;
use crate::protected::{DEVICE_DIR, DEVICE_FILES, DEVICE_LINKS};

/// Size of the private `/dev/shm` when the command has no scratch quota.
const SHM_DEFAULT: u64 = 64 * 1024 * 1024;

/// Mount the private `/dev`; `shm_size`: the bytes `/dev/shm` may hold (the command's scratch
/// quota, the same memory). Returns the mounts to keep writable.
pub fn private_dev(shm_size: Option<u64>) -> Result<Vec<PathBuf>, String> {
    let e = |what: &str, err: std::io::Error| format!("private /dev: {what}: {err}");
    // The allowed nodes, opened (O_PATH: no device is opened for I/O) before they are covered.
    let mut nodes = Vec::new();
    for device in DEVICE_FILES {
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(device)
        else {
            continue;
        };
        nodes.push((Path::new(device), file));
    }
    let dev = Path::new(DEVICE_DIR);
    sys::mount(
        Some(Path::new("tmpfs")),
        dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("size=64k,nr_inodes=64,mode=755"),
    )
    .map_err(|err| e("tmpfs", err))?;
    for (path, file) in &nodes {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(path)
            .map_err(|err| e("mount point", err))?;
        let source = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        sys::mount(Some(&source), path, None, libc::MS_BIND, None)
            .map_err(|err| e("binding a device", err))?;
    }
    drop(nodes);
    let mut writable = Vec::new();
    let pts = dev.join("pts");
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&pts)
        .map_err(|err| e("pts", err))?;
    // A devpts of its own (kernels that refuse it in a user namespace: no ptys, nothing else).
    let has_pts = sys::mount(
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .is_ok();
    if has_pts {
        writable.push(pts);
    }
    for (link, target) in DEVICE_LINKS {
        if *link == "/dev/ptmx" && !has_pts {
            continue;
        }
        std::os::unix::fs::symlink(target, link).map_err(|err| e("link", err))?;
    }
    let shm = dev.join("shm");
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&shm)
        .map_err(|err| e("shm", err))?;
    let size = shm_size.unwrap_or(SHM_DEFAULT);
    sys::mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some(&format!(
            "size={size},nr_inodes={},mode=1777",
            (size / 4096).max(1024)
        )),
    )
    .map_err(|err| e("shm tmpfs", err))?;
    writable.push(shm);
    Ok(writable)
}
