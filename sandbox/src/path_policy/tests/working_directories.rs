//! Working directories resolved by identity (issue 11, finding 1): aliases of protected dirs and
//! process directories under `/proc` are refused; host facts are not.

use super::*;

#[test]
fn working_directories_are_resolved_by_identity() {
    let f = fixture();
    std::fs::create_dir_all(f.state.join("auth")).unwrap();
    std::fs::create_dir_all(f.home.join(".gnupg/private-keys-v1.d")).unwrap();
    std::fs::create_dir_all(f.home.join("project/.git/objects")).unwrap();
    std::os::unix::fs::symlink(&f.root, f.root.join("linked-root")).unwrap();
    let s = |p: &Path| p.display().to_string();
    let refused: Vec<(String, WorkingDirRefusal)> = vec![
        (s(&f.state), WorkingDirRefusal::Protected),
        (s(&f.state.join("auth")), WorkingDirRefusal::Protected),
        (
            format!("/proc/self/root{}", s(&f.state.join("auth"))),
            WorkingDirRefusal::Protected,
        ),
        (
            format!("/proc/{}/root{}", std::process::id(), s(&f.state)),
            WorkingDirRefusal::Protected,
        ),
        (
            s(&f.root.join("linked-root/state/auth")),
            WorkingDirRefusal::Protected,
        ),
        (
            s(&f.home.join(".gnupg/private-keys-v1.d")),
            WorkingDirRefusal::Protected,
        ),
        (s(&f.home.join(".ssh")), WorkingDirRefusal::Protected),
        (
            s(&f.home.join("project/.git/objects")),
            WorkingDirRefusal::GitDir,
        ),
        ("/proc/self".into(), WorkingDirRefusal::Protected),
        ("/proc/self/fd".into(), WorkingDirRefusal::Protected),
        ("/proc/sys".into(), WorkingDirRefusal::PseudoFileSystem),
        ("/sys/kernel".into(), WorkingDirRefusal::PseudoFileSystem),
        (s(&f.root.join("missing")), WorkingDirRefusal::NotFound),
        (
            s(&f.home.join(".ssh/id_ed25519")),
            WorkingDirRefusal::Protected,
        ),
    ];
    for (given, expected) in refused {
        let got = f.policy.resolve_working_directory(Path::new(&given));
        assert_eq!(got, Err(expected.clone()), "{given}");
        // The message never names the resolved path.
        assert!(!expected.to_string().contains(&s(&f.root)));
    }
    // An ordinary directory, also through a symlinked parent: its canonical path.
    let got = f
        .policy
        .resolve_working_directory(&f.root.join("linked-root/home/project"))
        .unwrap();
    assert_eq!(got, f.home.join("project"));
    // A directory holding protected ones is fine (their masks stay).
    assert_eq!(f.policy.resolve_working_directory(&f.home).unwrap(), f.home);
    // A file is not a directory.
    std::fs::write(f.home.join("project/file"), "x").unwrap();
    assert_eq!(
        f.policy
            .resolve_working_directory(&f.home.join("project/file")),
        Err(WorkingDirRefusal::NotADirectory)
    );
}

#[test]
fn a_working_directory_that_aliases_a_protected_dir_is_refused_by_identity() {
    // The state dir renamed after the policy was built: no name matches, its identity does.
    let f = fixture();
    std::fs::create_dir_all(f.state.join("run")).unwrap();
    let moved = f.root.join("moved-state");
    std::fs::rename(&f.state, &moved).unwrap();
    assert_eq!(
        f.policy.resolve_working_directory(&moved),
        Err(WorkingDirRefusal::Protected)
    );
    assert_eq!(
        f.policy.resolve_working_directory(&moved.join("run")),
        Err(WorkingDirRefusal::Protected)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn process_directories_in_proc_are_refused_but_host_facts_are_not() {
    let policy = PathPolicy::new(
        PathBuf::from("/home/u"),
        PathBuf::from("/srv/state"),
        vec![],
    );
    for path in [
        "/proc/1/maps",
        "/proc/self/status",
        "/proc/thread-self/cgroup",
        "/proc/4242",
        "/proc/4242/net/tcp",
        "/proc/self/root/etc/hosts",
    ] {
        assert!(
            matches!(
                policy.check(Path::new(path)),
                Err(PathRefusal::Protected { .. })
            ),
            "{path}"
        );
    }
    for path in [
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/sys/kernel/osrelease",
    ] {
        assert!(policy.check(Path::new(path)).is_ok(), "{path}");
    }
}
