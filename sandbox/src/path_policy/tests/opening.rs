//! Lexical refusals, the protected set, and the no-follow openers against real symlinks, hard
//! links, FIFOs, devices and directories; `open_subtree` reaches only its own path.

use super::*;

#[test]
fn lexical_refusals() {
    let f = fixture();
    let p = &f.policy;
    assert_eq!(
        p.check(Path::new("relative/x")).unwrap_err().code(),
        OutcomeCode::InvalidArgument
    );
    let err = p.check(Path::new("/tmp/a/../b")).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::InvalidArgument);
    assert!(err.to_string().contains("`..`"), "{err}");
    assert_eq!(
        p.check(Path::new("/tmp/./b")).unwrap_err().code(),
        OutcomeCode::InvalidArgument
    );
    assert_eq!(
        p.check(Path::new("/tmp//b")).unwrap_err().code(),
        OutcomeCode::InvalidArgument
    );
    let nul = PathBuf::from(OsStr::from_bytes(b"/tmp/a\0b"));
    assert_eq!(
        p.check(&nul).unwrap_err().code(),
        OutcomeCode::InvalidArgument
    );
    let long = PathBuf::from(format!("/tmp/{}", "a".repeat(300)));
    assert_eq!(
        p.check(&long).unwrap_err().code(),
        OutcomeCode::InvalidArgument
    );
    assert!(p.check(Path::new("/tmp/b/")).is_ok());
    assert!(p.check(Path::new("/")).is_ok());
}

#[test]
fn protected_set() {
    let f = fixture();
    let p = &f.policy;
    for rel in [
        ".ssh",
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gcloud/x",
        ".netrc",
    ] {
        let path = f.home.join(rel);
        let err = p.check(&path).unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
        assert!(p.is_protected(&path), "{rel}");
    }
    // Prefix on components, not on strings.
    assert!(!p.is_protected(&f.home.join(".sshx")));
    assert!(!p.is_protected(&f.home.join(".config/gh-extra")));
    assert!(p.is_protected(&f.state));
    assert!(p.is_protected(&f.state.join("gateway.db")));
    assert!(p.is_protected(&f.root.join("extra/thing")));
    for sys in [
        "/etc/shadow",
        "/etc/sudoers.d/x",
        "/etc/ssh/ssh_host_ed25519_key",
    ] {
        assert!(p.is_protected(Path::new(sys)), "{sys}");
    }
    assert!(!p.is_protected(Path::new("/etc/ssh/ssh_host_ed25519_key.pub")));
    assert!(!p.is_protected(Path::new("/etc/ssh/sshd_config")));
    assert!(!p.is_protected(Path::new("/etc/hostname")));
    // Fail closed on what cannot be judged lexically.
    assert!(p.is_protected(Path::new("relative")));
    assert!(p.is_protected(Path::new("/a/../etc/shadow")));
}

#[cfg(target_os = "linux")]
#[test]
fn proc_secrets_protected() {
    let f = fixture();
    assert!(f.policy.is_protected(Path::new("/proc/1/environ")));
    assert!(f.policy.is_protected(Path::new("/proc/1/task/1/mem")));
    assert!(!f.policy.is_protected(Path::new("/proc/cpuinfo")));
}

#[test]
fn git_any_case_refused() {
    let f = fixture();
    for name in [".git", ".GIT", ".Git"] {
        let dir = f.root.join("repo").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config"), "x").unwrap();
        let err = f
            .policy
            .open_file_no_follow(&dir.join("config"))
            .unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{name}");
        assert!(matches!(err, PathRefusal::GitDir { .. }), "{err}");
        assert_eq!(
            code(f.policy.open_dir_no_follow(&dir)),
            OutcomeCode::NotPermitted
        );
    }
}

#[test]
fn protected_files_refused_on_open() {
    let f = fixture();
    assert_eq!(
        code(
            f.policy
                .open_file_no_follow(&f.home.join(".ssh/id_ed25519"))
        ),
        OutcomeCode::NotPermitted
    );
    assert_eq!(
        code(f.policy.open_file_no_follow(&f.state.join("gateway.db"))),
        OutcomeCode::NotPermitted
    );
    assert_eq!(
        code(f.policy.open_dir_no_follow(&f.state)),
        OutcomeCode::NotPermitted
    );
}

#[test]
fn identity_catches_alias_of_protected_dir() {
    // A symlinked credential dir: its target is protected by canonical name and identity.
    let f = fixture();
    let real = f.root.join("dotfiles-aws");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(real.join("credentials"), "k").unwrap();
    std::os::unix::fs::symlink(&real, f.home.join(".aws")).unwrap();
    let policy = PathPolicy::new(f.home.clone(), f.state.clone(), vec![]);
    assert!(policy.is_protected(&real.join("credentials")));
    assert_eq!(
        code(policy.open_file_no_follow(&real.join("credentials"))),
        OutcomeCode::NotPermitted
    );
}

#[test]
fn reads_plain_file() {
    let f = fixture();
    let path = f.root.join("dir/a.txt");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "hello").unwrap();
    let (mut file, meta) = f.policy.open_file_no_follow(&path).unwrap();
    assert!(meta.is_file());
    let mut s = String::new();
    file.read_to_string(&mut s).unwrap();
    assert_eq!(s, "hello");
    let (_dir, meta) = f.policy.open_dir_no_follow(&f.root.join("dir")).unwrap();
    assert!(meta.is_dir());
    assert!(f.policy.open_dir_no_follow(Path::new("/")).is_ok());
}

#[test]
fn symlink_in_middle_refused_naming_component() {
    let f = fixture();
    let real = f.root.join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(real.join("f.txt"), "x").unwrap();
    let link = f.root.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let err = f
        .policy
        .open_file_no_follow(&link.join("f.txt"))
        .unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
    match &err {
        PathRefusal::Symlink { component, .. } => assert_eq!(component, &show(&link)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(
        code(f.policy.open_dir_no_follow(&link)),
        OutcomeCode::NotPermitted
    );
    assert_eq!(
        code(f.policy.open_dir_no_follow(&link.join("sub"))),
        OutcomeCode::NotPermitted
    );
}

#[test]
fn final_symlink_refused() {
    let f = fixture();
    let target = f.root.join("t.txt");
    std::fs::write(&target, "x").unwrap();
    let link = f.root.join("l.txt");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = f.policy.open_file_no_follow(&link).unwrap_err();
    assert!(matches!(err, PathRefusal::Symlink { .. }), "{err:?}");
    // Dangling symlink too.
    let dangling = f.root.join("dangling");
    std::os::unix::fs::symlink(f.root.join("nope"), &dangling).unwrap();
    assert_eq!(
        code(f.policy.open_file_no_follow(&dangling)),
        OutcomeCode::NotPermitted
    );
}

#[test]
fn hard_link_refused() {
    let f = fixture();
    let a = f.root.join("a.txt");
    std::fs::write(&a, "x").unwrap();
    std::fs::hard_link(&a, f.root.join("b.txt")).unwrap();
    let err = f.policy.open_file_no_follow(&a).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
    assert!(
        matches!(err, PathRefusal::HardLinked { nlink: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn fifo_refused_quickly() {
    let f = fixture();
    let fifo = f.root.join("pipe");
    let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let start = Instant::now();
    let err = f.policy.open_file_no_follow(&fifo).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(err.code(), OutcomeCode::NotAFile);
    assert!(err.to_string().contains("FIFO"), "{err}");
}

#[test]
fn directory_and_missing() {
    let f = fixture();
    let err = f.policy.open_file_no_follow(&f.root).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotAFile);
    assert_eq!(
        code(f.policy.open_file_no_follow(Path::new("/"))),
        OutcomeCode::NotAFile
    );
    let missing = f.root.join("missing/deeper/x.txt");
    let err = f.policy.open_file_no_follow(&missing).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotFound);
    match err {
        PathRefusal::NotFound { component, .. } => {
            assert_eq!(component, show(&f.root.join("missing")))
        }
        other => panic!("unexpected {other:?}"),
    }
    let file = f.root.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(
        code(f.policy.open_dir_no_follow(&file)),
        OutcomeCode::NotADirectory
    );
    assert_eq!(
        code(f.policy.open_file_no_follow(&file.join("under"))),
        OutcomeCode::NotADirectory
    );
}

#[cfg(target_os = "linux")]
#[test]
fn devices_and_proc_links_refused() {
    let f = fixture();
    assert_eq!(
        code(f.policy.open_file_no_follow(Path::new("/dev/null"))),
        OutcomeCode::NotAFile
    );
    // /proc/self is a symlink.
    assert_eq!(
        code(f.policy.open_file_no_follow(Path::new("/proc/self/status"))),
        OutcomeCode::NotPermitted
    );
}

#[test]
fn identity_catches_renamed_protected_dir() {
    // Recorded by (dev, ino) at construction: a later rename does not unprotect it.
    let f = fixture();
    let secret = f.root.join("extra");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("token"), "t").unwrap();
    let policy = PathPolicy::new(f.home.clone(), f.state.clone(), vec![secret.clone()]);
    let moved = f.root.join("moved");
    std::fs::rename(&secret, &moved).unwrap();
    assert!(!policy.is_protected(&moved.join("token")));
    let err = policy
        .open_file_no_follow(&moved.join("token"))
        .unwrap_err();
    assert!(matches!(err, PathRefusal::Protected { .. }), "{err:?}");
    assert_eq!(
        code(policy.open_dir_no_follow(&moved)),
        OutcomeCode::NotPermitted
    );
}
#[test]
fn open_subtree_is_readable_only_along_its_own_path() {
    // The managed worktrees live in the state dir; only they are readable, and only by their
    // own path (DESIGN §6).
    let f = fixture();
    let worktrees = f.state.join("worktrees");
    let tree = worktrees.join("ns_1");
    std::fs::create_dir_all(tree.join("src")).unwrap();
    std::fs::write(tree.join("src/a.rs"), "fn a() {}").unwrap();
    std::fs::write(tree.join(".git"), "gitdir: elsewhere").unwrap();
    let strict = PathPolicy::new(f.home.clone(), f.state.clone(), vec![]);
    let policy = strict.clone().with_open_subtree(worktrees.clone());

    assert_eq!(
        code(strict.open_file_no_follow(&tree.join("src/a.rs"))),
        OutcomeCode::NotPermitted
    );
    let (mut file, _) = policy.open_file_no_follow(&tree.join("src/a.rs")).unwrap();
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    assert_eq!(text, "fn a() {}");
    assert!(policy.open_dir_no_follow(&tree).is_ok());
    let mut listed = Vec::new();
    policy
        .walk(&tree, WalkOptions::new(8), |entry| {
            listed.push(entry.path.to_path_buf());
            WalkControl::Continue
        })
        .unwrap();
    assert_eq!(listed, vec![tree.join("src"), tree.join("src/a.rs")]);

    // The rest of the state dir stays protected, and so does `.git` inside the worktree.
    assert_eq!(
        code(policy.open_file_no_follow(&f.state.join("gateway.db"))),
        OutcomeCode::NotPermitted
    );
    assert_eq!(
        code(policy.open_dir_no_follow(&f.state)),
        OutcomeCode::NotPermitted
    );
    let err = policy.open_file_no_follow(&tree.join(".git")).unwrap_err();
    assert!(err.to_string().contains(".git"), "{err}");
    assert!(policy.is_protected(&worktrees.join("../gateway.db")));

    // The state dir reached by another path is refused by identity, worktrees included.
    let moved = f.root.join("moved-state");
    std::fs::rename(&f.state, &moved).unwrap();
    assert_eq!(
        code(policy.open_file_no_follow(&moved.join("worktrees/ns_1/src/a.rs"))),
        OutcomeCode::NotPermitted
    );
    assert_eq!(
        code(policy.open_file_no_follow(&moved.join("gateway.db"))),
        OutcomeCode::NotPermitted
    );
}
