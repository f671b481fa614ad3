//! Adversarial cases (issue 3): every protected home entry, owner extras, shadow-class system
//! files, `.git` files, state-dir aliases, `/proc` magic links, invalid UTF-8 names, and a path
//! component swapped for a protected symlink mid-open.

use super::*;

#[test]
fn each_home_protected_entry_refused_with_temp_home() {
    let f = fixture();
    for rel in home_protected() {
        let entry = f.home.join(rel);
        // Credential stores are sometimes files (`.netrc`), sometimes directories.
        let file = if rel.starts_with('.') && !rel.contains('/') && rel.ends_with("rc") {
            entry.clone()
        } else {
            entry.join("secret")
        };
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "SECRET").unwrap();
        let err = f.policy.open_file_no_follow(&file).unwrap_err();
        assert!(
            matches!(err, PathRefusal::Protected { .. }),
            "{rel}: {err:?}"
        );
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
        if file != entry {
            let err = f.policy.open_dir_no_follow(&entry).unwrap_err();
            assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
        }
    }
    // A walk of the home never yields or enters any of them.
    let mut seen = Vec::new();
    f.policy
        .walk(&f.home, WalkOptions::new(64), |e| {
            seen.push(e.path.to_path_buf());
            WalkControl::Continue
        })
        .unwrap();
    for path in &seen {
        assert!(
            !f.policy.is_protected(path),
            "walk yielded {}",
            path.display()
        );
    }
    // Directories on the way to a protected entry are walked (e.g. `~/.config`), their
    // protected children are not.
    assert!(seen.contains(&f.home.join(".config")));
    assert!(!seen.contains(&f.home.join(".config/gcloud")));
    assert!(!seen.iter().any(|p| p.ends_with("secret")), "{seen:?}");
}

#[test]
fn owner_extra_entries_added_built_ins_kept() {
    let f = fixture();
    let extra = f.root.join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::write(extra.join("token"), "t").unwrap();
    assert_eq!(
        code(f.policy.open_file_no_follow(&extra.join("token"))),
        OutcomeCode::NotPermitted
    );
    // The built-ins stay whatever the owner adds.
    assert!(f.policy.is_protected(&f.home.join(".ssh")));
    assert!(f.policy.is_protected(Path::new("/etc/shadow")));
}

#[test]
fn shadow_class_system_files_refused() {
    let f = fixture();
    for path in [
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
        "/etc/sudoers",
        "/etc/sudoers.d/README",
        "/etc/security/opasswd",
        "/etc/master.passwd",
    ] {
        let err = f.policy.check(Path::new(path)).unwrap_err();
        assert!(
            matches!(err, PathRefusal::Protected { .. }),
            "{path}: {err:?}"
        );
    }
    if Path::new("/etc/shadow").exists() {
        let err = f
            .policy
            .open_file_no_follow(Path::new("/etc/shadow"))
            .unwrap_err();
        assert!(matches!(err, PathRefusal::Protected { .. }), "{err:?}");
    }
}

#[test]
fn dot_git_file_and_nested_git_refused() {
    let f = fixture();
    let repo = f.root.join("wt");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join(".git"), "gitdir: /elsewhere/.git/worktrees/wt\n").unwrap();
    let err = f
        .policy
        .open_file_no_follow(&repo.join(".git"))
        .unwrap_err();
    assert!(matches!(err, PathRefusal::GitDir { .. }), "{err:?}");
    for variant in [
        ".git/modules/x/config",
        ".GIT/HEAD",
        ".gIt/worktrees/x/commondir",
    ] {
        let err = f.policy.check(&repo.join(variant)).unwrap_err();
        assert!(
            matches!(err, PathRefusal::GitDir { .. }),
            "{variant}: {err:?}"
        );
    }
    // `.github`, `.gitignore` are not Git internals.
    assert!(
        f.policy
            .check(&repo.join(".github/workflows/ci.yml"))
            .is_ok()
    );
    assert!(f.policy.check(&repo.join(".gitignore")).is_ok());
}

#[test]
fn state_dir_aliases_refused() {
    let f = fixture();
    let db = f.state.join("gateway.db");
    // A hard link to a file inside the state dir, placed elsewhere.
    let alias = f.root.join("alias.db");
    std::fs::hard_link(&db, &alias).unwrap();
    let err = f.policy.open_file_no_follow(&alias).unwrap_err();
    assert!(
        matches!(err, PathRefusal::HardLinked { nlink: 2, .. }),
        "{err:?}"
    );
    // A symlink to the state dir.
    let link = f.root.join("state-link");
    std::os::unix::fs::symlink(&f.state, &link).unwrap();
    let err = f
        .policy
        .open_file_no_follow(&link.join("gateway.db"))
        .unwrap_err();
    assert!(
        matches!(&err, PathRefusal::Symlink { component, .. } if component == &show(&link)),
        "{err:?}"
    );
    assert_eq!(
        code(f.policy.open_dir_no_follow(&link)),
        OutcomeCode::NotPermitted
    );
}

#[cfg(target_os = "linux")]
#[test]
fn proc_magic_links_refused_naming_the_link() {
    let f = fixture();
    let pid = std::process::id();
    let state_rel = f.state.strip_prefix("/").unwrap().display().to_string();
    let file = f.root.join("plain.txt");
    std::fs::write(&file, "x").unwrap();
    let fd = File::open(&file).unwrap();
    use std::os::fd::AsRawFd;
    let n = fd.as_raw_fd();
    let cases: Vec<(String, String)> = vec![
        // (path, the component that must be named)
        (
            format!("/proc/self/root/{state_rel}/gateway.db"),
            "/proc/self".into(),
        ),
        (
            format!("/proc/{pid}/root/{state_rel}/gateway.db"),
            format!("/proc/{pid}/root"),
        ),
        (format!("/proc/{pid}/cwd/x"), format!("/proc/{pid}/cwd")),
        ("/proc/self/cwd/x".into(), "/proc/self".into()),
        (format!("/proc/self/fd/{n}"), "/proc/self".into()),
        (format!("/proc/{pid}/fd/{n}"), format!("/proc/{pid}/fd/{n}")),
        ("/proc/self/exe".into(), "/proc/self".into()),
        (format!("/proc/{pid}/exe"), format!("/proc/{pid}/exe")),
        (
            "/proc/thread-self/root/etc/hostname".into(),
            "/proc/thread-self".into(),
        ),
        (format!("/dev/fd/{n}"), "/dev/fd".into()),
    ];
    for (path, component) in cases {
        let err = f.policy.open_file_no_follow(Path::new(&path)).unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{path}: {err:?}");
        match &err {
            PathRefusal::Symlink { component: c, .. } => assert_eq!(c, &component, "{path}"),
            // A process's own directory is refused as a whole, before any link in it.
            PathRefusal::Protected { .. } if path.starts_with("/proc/") => {}
            other => panic!("{path}: expected a symlink refusal, got {other:?}"),
        }
    }
    // Opening `/proc/<pid>/root` as a walk root is refused too.
    assert_eq!(
        code(
            f.policy
                .open_dir_no_follow(Path::new(&format!("/proc/{pid}/root")))
        ),
        OutcomeCode::NotPermitted
    );
    // The process's secrets are protected by name even without a link.
    for name in ["environ", "mem", "auxv"] {
        let err = f
            .policy
            .open_file_no_follow(Path::new(&format!("/proc/{pid}/{name}")))
            .unwrap_err();
        assert!(
            matches!(err, PathRefusal::Protected { .. }),
            "{name}: {err:?}"
        );
    }
    drop(fd);
}

#[test]
fn invalid_utf8_names_are_walked_and_opened() {
    let f = fixture();
    let dir = f.root.join("w");
    std::fs::create_dir_all(&dir).unwrap();
    let name = OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(dir.join(name), "x").unwrap();
    let (_file, meta) = f.policy.open_file_no_follow(&dir.join(name)).unwrap();
    assert!(meta.is_file());
    let mut seen = Vec::new();
    f.policy
        .walk(&dir, WalkOptions::new(8), |e| {
            seen.push(e.name.to_os_string());
            WalkControl::Continue
        })
        .unwrap();
    assert_eq!(seen, vec![name.to_os_string()]);
}
/// RACE: a thread flips a path component between a real directory and a symlink to a protected
/// directory holding a file of the same name; opening must never return the protected file.
#[cfg(target_os = "linux")]
#[test]
fn race_component_flipped_to_protected_symlink_never_leaks() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fixture();
    let ssh = f.home.join(".ssh");
    std::fs::write(ssh.join("f.txt"), "SECRET").unwrap();
    let w = f.root.join("w");
    std::fs::create_dir_all(w.join("comp")).unwrap();
    std::fs::write(w.join("comp/f.txt"), "public").unwrap();
    std::os::unix::fs::symlink(&ssh, w.join("other")).unwrap();
    let stop = AtomicBool::new(false);
    let (mut ok, mut refused) = (0, 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                exchange(&w.join("comp"), &w.join("other"));
            }
        });
        for _ in 0..20_000 {
            match f.policy.open_file_no_follow(&w.join("comp/f.txt")) {
                Ok((mut file, _)) => {
                    let mut s = String::new();
                    file.read_to_string(&mut s).unwrap();
                    assert_eq!(s, "public");
                    ok += 1;
                }
                Err(err) => {
                    assert!(
                        matches!(
                            err,
                            PathRefusal::Symlink { .. }
                                | PathRefusal::NotFound { .. }
                                | PathRefusal::NotADirectory { .. }
                        ),
                        "{err:?}"
                    );
                    refused += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        ok > 0 && refused > 0,
        "race not exercised: ok {ok}, refused {refused}"
    );
}
