//! Unit tests of the runner's Linux confinement, in forked children: the loopback-only network
//! namespace, and writes only in the runner's private dirs.

use super::*;
use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;

/// Fork, confine the child with `prepared`, and return the errno of `open(path, O_CREAT|O_WRONLY)`
/// in it (0: it succeeded).
fn open_for_write_in_confined_child(prepared: &PreparedRunner, path: &Path) -> i32 {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the child makes raw syscalls only (apply_in_child, open, _exit) on memory
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match prepared.apply_in_child() {
            Err(_) => 250,
            Ok(()) => {
                // SAFETY: a valid NUL-terminated path.
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
        // SAFETY: leaving the forked child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
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
    // SAFETY: the child runs ordinary code (a forked copy of the test thread) and `_exit`s;
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
        // SAFETY: leaving the forked child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
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

/// In a forked child running as an ordinary account: after entering the namespace (a user
/// namespace for a non-root account), the process holds no capability, so the account's own
/// mode-000 file stays unreadable to it, as it is to the account's shell.
#[test]
fn the_loopback_namespace_leaves_no_capabilities_over_the_owners_files() {
    if !loopback_namespace_supported() {
        eprintln!("no network namespaces on this host");
        return;
    }
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("private");
    std::fs::write(&file, "secret").unwrap();
    // SAFETY: getuid cannot fail.
    let own_uid = unsafe { libc::getuid() };
    let account: libc::uid_t = if root { 65534 } else { own_uid };
    if root {
        // The account's own file, in a directory it may enter.
        std::os::unix::fs::chown(&file, Some(account), Some(account)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    let path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the child runs ordinary code (a forked copy of the test thread) and `_exit`s;
    // nothing it touches is shared with the parent.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = (|| {
            if root {
                // SAFETY: integer arguments; a failure is reported by the exit code.
                let dropped = unsafe {
                    libc::setgroups(0, std::ptr::null()) == 0
                        && libc::setgid(account) == 0
                        && libc::setuid(account) == 0
                        // A changed identity makes /proc/self root's, uid_map included.
                        && libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) == 0
                };
                if !dropped {
                    return Err(10);
                }
            }
            enter_loopback_namespace().map_err(|_| 1)?;
            let status = std::fs::read_to_string("/proc/self/status").map_err(|_| 2)?;
            let effective = status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .map(str::trim)
                .ok_or(3)?;
            if !effective.trim_start_matches('0').is_empty() {
                return Err(4);
            }
            // SAFETY: a NUL-terminated path; the descriptor, if any, is closed below.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(fd) };
                return Err(5);
            }
            Ok::<i32, i32>(0)
        })()
        .unwrap_or_else(|code| code);
        // SAFETY: leaving the forked child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "1: no namespace, 4: capabilities left, 5: the mode-000 file was opened"
    );
}
