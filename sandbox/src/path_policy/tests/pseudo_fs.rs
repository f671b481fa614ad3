//! Kernel pseudo file systems are refused by type (issue 23, item 5): `/proc` and `/sys` as
//! usual, and a second procfs mounted elsewhere (a private mount namespace of the test's own
//! thread, as root), where no path rule could know it — Read, the walk root, and a walk that
//! passes over it.

use super::*;

#[test]
fn proc_and_sys_are_refused_by_type() {
    let f = fixture();
    for (path, fs) in [
        ("/proc/cpuinfo", "proc"),
        ("/proc/sys/kernel/ostype", "proc"),
    ] {
        match f.policy.open_file_no_follow(Path::new(path)) {
            Err(PathRefusal::PseudoFileSystem { fs: got, .. }) => assert_eq!(got, fs, "{path}"),
            other => panic!("{path}: {other:?}"),
        }
    }
    match f.policy.open_dir_no_follow(Path::new("/sys")) {
        Err(refusal @ PathRefusal::PseudoFileSystem { fs: "sysfs", .. }) => {
            assert_eq!(refusal.code(), OutcomeCode::NotPermitted);
            assert!(
                refusal
                    .to_string()
                    .contains("kernel pseudo file system (sysfs)")
            );
        }
        other => panic!("/sys: {other:?}"),
    }
    // A walk from `/` never enters them (they are other devices than `/`).
    let mut seen = Vec::new();
    f.policy
        .walk(Path::new("/"), WalkOptions::new(2), |e| {
            seen.push(e.path.to_path_buf());
            WalkControl::Continue
        })
        .unwrap();
    assert!(
        !seen.iter().any(|p| p
            .parent()
            .is_some_and(|d| d == Path::new("/proc") || d == Path::new("/sys"))),
        "{seen:?}"
    );
}

/// A second procfs at `<tmp>/other/p`, in a mount namespace private to one thread.
#[test]
fn a_second_procfs_elsewhere_is_refused_too() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting a procfs needs root");
        return;
    }
    let f = fixture();
    let other = f.root.join("other");
    let mount_point = other.join("p");
    std::fs::create_dir_all(&mount_point).unwrap();
    std::fs::write(other.join("plain.txt"), "needle\n").unwrap();
    let policy = f.policy.clone();
    std::thread::spawn(move || {
        // SAFETY: plain syscalls on this thread only: a new mount namespace (this thread's; the
        // process's other threads keep theirs), made private so nothing propagates to the host,
        // then a procfs on a temp dir. All strings are NUL-terminated literals or CStrings.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare");
            let root = CString::new("/").unwrap();
            assert_eq!(
                libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ),
                0,
                "making / private"
            );
            let target = CString::new(mount_point.to_str().unwrap()).unwrap();
            let proc = CString::new("proc").unwrap();
            assert_eq!(
                libc::mount(
                    proc.as_ptr(),
                    target.as_ptr(),
                    proc.as_ptr(),
                    0,
                    std::ptr::null(),
                ),
                0,
                "mounting proc: {}",
                std::io::Error::last_os_error()
            );
        }
        let pid = std::process::id();
        let status = mount_point.join(format!("{pid}/status"));
        assert!(std::fs::read_to_string(&status).unwrap().contains("Pid:"));
        for path in [
            status,
            mount_point.join(format!("{pid}/maps")),
            mount_point.join("cpuinfo"),
        ] {
            match policy.open_file_no_follow(&path) {
                Err(PathRefusal::PseudoFileSystem { fs: "proc", .. }) => {}
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        assert!(matches!(
            policy.open_dir_no_follow(&mount_point),
            Err(PathRefusal::PseudoFileSystem { fs: "proc", .. })
        ));
        // FindFiles/SearchText walk over it: the procfs is skipped, the plain file is found.
        let mut seen = Vec::new();
        policy
            .walk(&other, WalkOptions::new(4), |e| {
                seen.push(e.path.to_path_buf());
                WalkControl::Continue
            })
            .unwrap();
        assert!(seen.contains(&other.join("plain.txt")), "{seen:?}");
        assert!(
            !seen
                .iter()
                .any(|p| p.starts_with(&mount_point) && *p != mount_point),
            "{seen:?}"
        );
    })
    .join()
    .unwrap();
}
