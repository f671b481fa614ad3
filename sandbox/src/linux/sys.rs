//! Thin wrappers over the raw Linux calls the helper needs that `libc` does not wrap
//! (`mount_setattr`, `capset`, `close_range`, `landlock_create_ruleset` as a version probe), and
//! small process-setup steps (stdin, inherited fds, rlimits, capabilities, the pids cgroup).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::spec::Limits;

/// `mount_setattr` attribute bits (linux/mount.h).
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `AT_RECURSIVE` (linux/fcntl.h).
const AT_RECURSIVE: libc::c_uint = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Set/clear mount attributes on the mount at `path` (and, if `recursive`, every mount below it).
pub fn mount_setattr(path: &Path, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let c = cstring(path)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `c` is a valid NUL-terminated path and `attr` a properly sized, initialised
    // `struct mount_attr` that outlives the call; the kernel only reads them.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret).map(|_| ())
}

/// `mount(2)` with optional source, fstype and data.
pub fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype
        .map(|s| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
        .transpose()?;
    let data = data
        .map(|s| CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
        .transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is either null or a valid NUL-terminated string owned above and
    // alive for the duration of the call.
    let ret = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The Landlock ABI version the kernel offers, or `None`.
pub fn landlock_abi() -> Option<i32> {
    landlock_abi_probe().ok().filter(|v| *v > 0)
}

/// The Landlock ABI version, or why the kernel refused to say (`ENOSYS`: not built in,
/// `EOPNOTSUPP`: disabled at boot). rustix has no Landlock calls: libc's raw syscall.
pub fn landlock_abi_probe() -> io::Result<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attr, size 0 and the VERSION flag the call only returns a number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    i32::try_from(ret).map_err(|_| io::Error::other("ABI version out of range"))
}

/// Point stdin at `/dev/null` (the spec arrived on it).
pub fn stdin_to_dev_null() -> io::Result<()> {
    let null = std::fs::File::open("/dev/null")?;
    Ok(rustix::stdio::dup2_stdin(&null)?)
}

/// Mark an inherited descriptor close-on-exec.
pub fn set_cloexec(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor number changes only its flags; a bad number is EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Close every fd from 3 up but `keep` (the status pipe, which only the helper's waiting side
/// keeps): files opened before confinement would stay usable after it.
pub fn close_fds_from_3(keep: Option<i32>) {
    let keep = keep.filter(|fd| *fd >= 3);
    let ranges = match keep {
        Some(fd) => [(3, fd - 1), (fd + 1, i32::MAX)],
        None => [(3, i32::MAX), (0, -1)],
    };
    for (first, last) in ranges.into_iter().filter(|(first, last)| first <= last) {
        // SAFETY: close_range only closes descriptors; none of ours above 2 but `keep` is in use
        // here.
        let ret = unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) };
        if ret < 0 {
            for fd in first..last.min(4095) + 1 {
                // SAFETY: closing a descriptor we do not use; EBADF is ignored.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Processes currently owned by `uid` (RLIMIT_NPROC counts them all outside a user namespace).
fn processes_of(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    use std::os::unix::fs::MetadataExt;
    dir.filter_map(Result::ok)
        .filter(|e| e.file_name().as_bytes().iter().all(u8::is_ascii_digit))
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .count() as u64
}

/// Apply the rlimits. `own_user_namespace`: RLIMIT_NPROC then counts only the command's
/// processes; otherwise the owner's existing processes are added to the allowance.
pub fn set_rlimits(limits: &Limits, own_user_namespace: bool) -> io::Result<()> {
    let nproc = if own_user_namespace {
        limits.nproc
    } else {
        processes_of(rustix::process::getuid().as_raw()) + limits.nproc
    };
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    // `None` in an Rlimit is RLIM_INFINITY.
    let unlimited = |value: Option<u64>| value.unwrap_or(u64::MAX);
    let nofile = limits
        .nofile
        .min(unlimited(getrlimit(Resource::Nofile).maximum));
    // (resource, soft, hard)
    let mut pairs = vec![
        (Resource::Nproc, nproc, nproc),
        (Resource::Fsize, limits.fsize, limits.fsize),
        (Resource::Core, 0, 0),
        (Resource::Nofile, nofile, nofile),
    ];
    if let Some(memory) = limits.memory {
        pairs.push((Resource::Data, memory, memory));
        // The stack is not counted by RLIMIT_DATA: with the hard limit left unlimited a command
        // raises its soft one and grows a stack past its memory (issue 24). Hard: at most the
        // memory limit (tools that raise theirs, e.g. GCC to 64 MiB, still may); soft: as inherited.
        let stack = getrlimit(Resource::Stack);
        // Never above the inherited hard limit (raising it is not allowed).
        let hard = unlimited(stack.maximum).min(memory);
        pairs.push((Resource::Stack, unlimited(stack.current).min(hard), hard));
    }
    for (resource, soft, hard) in pairs {
        let limit = Rlimit {
            current: Some(soft),
            maximum: Some(hard),
        };
        setrlimit(resource, limit)?;
    }
    Ok(())
}

/// The highest capability number the kernel knows (read before a fork: the child must not
/// allocate).
pub fn last_cap() -> libc::c_ulong {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// Drop every capability: bounding set (where permitted), ambient, inheritable, permitted,
/// effective. Returns whether the process ends with no capabilities at all.
pub fn drop_capabilities() -> bool {
    drop_capabilities_to(last_cap())
}

/// [`drop_capabilities`] with `last_cap` known: raw syscalls only, no allocation, so it may run
/// between fork and exec.
pub fn drop_capabilities_to(last_cap: libc::c_ulong) -> bool {
    use rustix::thread::{CapabilitySets, capabilities, set_capabilities};
    // The bounding set by number, up to the kernel's last: rustix's bounding-set calls take only
    // the capabilities it names, so newer ones would stay. libc's prctl here.
    for cap in 0..=last_cap {
        // SAFETY: prctl with integer arguments only; failure (no CAP_SETPCAP) is tolerated here
        // and checked below.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    let none = CapabilitySets {
        effective: rustix::thread::CapabilitySet::empty(),
        permitted: rustix::thread::CapabilitySet::empty(),
        inheritable: rustix::thread::CapabilitySet::empty(),
    };
    if set_capabilities(None, none).is_err() {
        return false;
    }
    let empty = capabilities(None).is_ok_and(|now| {
        now.effective.is_empty() && now.permitted.is_empty() && now.inheritable.is_empty()
    });
    // A non-empty bounding set only matters to a process that can gain capabilities at exec,
    // which no_new_privs prevents unless it is root in its namespace.
    let bounding_empty = (0..=last_cap).all(|cap| {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) == 0 }
    });
    let root = rustix::process::geteuid().is_root();
    empty && (bounding_empty || !root)
}

/// Set `PR_SET_NO_NEW_PRIVS` and report whether it is on.
pub fn no_new_privs() -> bool {
    let _ = rustix::thread::set_no_new_privs(true);
    rustix::thread::no_new_privs().unwrap_or(false)
}

/// As root (where the kernel does not enforce RLIMIT_NPROC), create a pids cgroup bounding the
/// command and move this process into it. Returns the cgroup dir (removed by the broker).
pub fn join_pids_cgroup(max: u64) -> Option<PathBuf> {
    pids_cgroup(max, true)
}

/// Whether [`join_pids_cgroup`] can make its cgroup here (one is made and removed at once).
pub fn pids_cgroup_possible() -> bool {
    pids_cgroup(1, false).is_some_and(|dir| std::fs::remove_dir(dir).is_ok())
}

fn pids_cgroup(max: u64, enter: bool) -> Option<PathBuf> {
    // A random name: the command can read its own cgroup path, and a pid there would be public.
    let mut random = [0u8; 8];
    let got = rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty());
    if got.ok() != Some(random.len()) {
        return None;
    }
    let name = format!("native-gateway-cmd-{:016x}", u64::from_ne_bytes(random));
    for base in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"] {
        let base = Path::new(base);
        if !base.join("cgroup.procs").exists() {
            continue;
        }
        let dir = base.join(&name);
        if std::fs::create_dir(&dir).is_err() {
            continue;
        }
        let joined = std::fs::write(dir.join("pids.max"), max.to_string()).is_ok()
            && (!enter || super::cgroup::enter(&dir).is_ok());
        if joined {
            return Some(dir);
        }
        let _ = std::fs::remove_dir(&dir);
    }
    None
}

/// Bring the loopback interface of the current network namespace up (`SIOCSIFFLAGS`), and check
/// it is up.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket with constant arguments; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned here only.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    use std::os::fd::AsRawFd;
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: a valid socket and a valid, initialised ifreq naming `lo`.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: as above; the kernel reads the name and flags.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    let now = unsafe { req.ifr_ifru.ifru_flags };
    if now & libc::IFF_UP as libc::c_short == 0 {
        return Err(io::Error::other("loopback stayed down"));
    }
    Ok(())
}

/// Wait for our own child `pid`, retrying on `EINTR`; its raw wait status.
pub fn wait_child(pid: libc::pid_t) -> io::Result<libc::c_int> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child with a valid out-pointer.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret == pid {
            return Ok(status);
        }
        let err = io::Error::last_os_error();
        if ret < 0 && err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}
