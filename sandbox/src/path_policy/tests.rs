//! Unit tests of `PathPolicy`: lexical refusals, the protected set, and the no-follow openers
//! against real symlinks, hard links, FIFOs and directories in temp dirs.

use super::*;
use std::ffi::CString;
use std::io::Read;
use std::time::{Duration, Instant};

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    policy: PathPolicy,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    // Canonical so that e.g. macOS /var -> /private/var does not trip the symlink walk.
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let state = root.join("state");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "secret").unwrap();
    std::fs::write(state.join("gateway.db"), "db").unwrap();
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![root.join("extra")]);
    Fixture {
        _tmp: tmp,
        root,
        home,
        state,
        policy,
    }
}

fn code(r: Result<(File, Metadata), PathRefusal>) -> &'static str {
    r.unwrap_err().code()
}

#[test]
fn lexical_refusals() {
    let f = fixture();
    let p = &f.policy;
    assert_eq!(
        p.check(Path::new("relative/x")).unwrap_err().code(),
        "invalid_argument"
    );
    let err = p.check(Path::new("/tmp/a/../b")).unwrap_err();
    assert_eq!(err.code(), "invalid_argument");
    assert!(err.to_string().contains("`..`"), "{err}");
    assert_eq!(
        p.check(Path::new("/tmp/./b")).unwrap_err().code(),
        "invalid_argument"
    );
    assert_eq!(
        p.check(Path::new("/tmp//b")).unwrap_err().code(),
        "invalid_argument"
    );
    let nul = PathBuf::from(OsStr::from_bytes(b"/tmp/a\0b"));
    assert_eq!(p.check(&nul).unwrap_err().code(), "invalid_argument");
    let long = PathBuf::from(format!("/tmp/{}", "a".repeat(300)));
    assert_eq!(p.check(&long).unwrap_err().code(), "invalid_argument");
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
        assert_eq!(err.code(), "not_permitted", "{rel}");
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
        assert_eq!(err.code(), "not_permitted", "{name}");
        assert!(matches!(err, PathRefusal::GitDir { .. }), "{err}");
        assert_eq!(code(f.policy.open_dir_no_follow(&dir)), "not_permitted");
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
        "not_permitted"
    );
    assert_eq!(
        code(f.policy.open_file_no_follow(&f.state.join("gateway.db"))),
        "not_permitted"
    );
    assert_eq!(code(f.policy.open_dir_no_follow(&f.state)), "not_permitted");
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
        "not_permitted"
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
    assert_eq!(err.code(), "not_permitted");
    match &err {
        PathRefusal::Symlink { component, .. } => assert_eq!(component, &show(&link)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(code(f.policy.open_dir_no_follow(&link)), "not_permitted");
    assert_eq!(
        code(f.policy.open_dir_no_follow(&link.join("sub"))),
        "not_permitted"
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
        "not_permitted"
    );
}

#[test]
fn hard_link_refused() {
    let f = fixture();
    let a = f.root.join("a.txt");
    std::fs::write(&a, "x").unwrap();
    std::fs::hard_link(&a, f.root.join("b.txt")).unwrap();
    let err = f.policy.open_file_no_follow(&a).unwrap_err();
    assert_eq!(err.code(), "not_permitted");
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
    assert_eq!(err.code(), "not_a_file");
    assert!(err.to_string().contains("FIFO"), "{err}");
}

#[test]
fn directory_and_missing() {
    let f = fixture();
    let err = f.policy.open_file_no_follow(&f.root).unwrap_err();
    assert_eq!(err.code(), "not_a_file");
    assert_eq!(
        code(f.policy.open_file_no_follow(Path::new("/"))),
        "not_a_file"
    );
    let missing = f.root.join("missing/deeper/x.txt");
    let err = f.policy.open_file_no_follow(&missing).unwrap_err();
    assert_eq!(err.code(), "not_found");
    match err {
        PathRefusal::NotFound { component, .. } => {
            assert_eq!(component, show(&f.root.join("missing")))
        }
        other => panic!("unexpected {other:?}"),
    }
    let file = f.root.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(code(f.policy.open_dir_no_follow(&file)), "not_a_directory");
    assert_eq!(
        code(f.policy.open_file_no_follow(&file.join("under"))),
        "not_a_directory"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn devices_and_proc_links_refused() {
    let f = fixture();
    assert_eq!(
        code(f.policy.open_file_no_follow(Path::new("/dev/null"))),
        "not_a_file"
    );
    // /proc/self is a symlink.
    assert_eq!(
        code(f.policy.open_file_no_follow(Path::new("/proc/self/status"))),
        "not_permitted"
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
    assert_eq!(code(policy.open_dir_no_follow(&moved)), "not_permitted");
}

// ---------- Adversarial cases (issue 3) ----------

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
        assert_eq!(err.code(), "not_permitted", "{rel}");
        if file != entry {
            let err = f.policy.open_dir_no_follow(&entry).unwrap_err();
            assert_eq!(err.code(), "not_permitted", "{rel}");
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
        "not_permitted"
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
    assert_eq!(code(f.policy.open_dir_no_follow(&link)), "not_permitted");
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
        assert_eq!(err.code(), "not_permitted", "{path}: {err:?}");
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
        "not_permitted"
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

#[test]
fn walk_is_sorted_bounded_and_never_follows() {
    let f = fixture();
    let w = f.root.join("w");
    for rel in [
        "b/z.txt",
        "a/y.txt",
        "a.txt",
        "B.txt",
        ".git/config",
        "c/.Git/HEAD",
        "d/e/f/g.txt",
    ] {
        let p = w.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    std::os::unix::fs::symlink(&f.home, w.join("homelink")).unwrap();
    std::os::unix::fs::symlink(&f.state, w.join("statelink")).unwrap();
    let mut seen = Vec::new();
    let stats = f
        .policy
        .walk(&w, WalkOptions::new(64), |e| {
            seen.push((
                e.path.strip_prefix(&w).unwrap().display().to_string(),
                e.kind,
                e.depth,
            ));
            WalkControl::Continue
        })
        .unwrap();
    assert_eq!(stats, WalkStats::default());
    let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "B.txt",
            "a",
            "a/y.txt",
            "a.txt",
            "b",
            "b/z.txt",
            "c",
            "d",
            "d/e",
            "d/e/f",
            "d/e/f/g.txt",
            "homelink",
            "statelink"
        ]
    );
    assert!(
        seen.iter()
            .any(|s| s.0 == "homelink" && s.1 == EntryKind::Symlink)
    );
    // Depth bound: 1 = the root's own entries.
    let mut shallow = Vec::new();
    f.policy
        .walk(&w, WalkOptions::new(1), |e| {
            shallow.push(e.depth);
            WalkControl::Continue
        })
        .unwrap();
    assert!(shallow.iter().all(|d| *d == 1), "{shallow:?}");
    // Walk roots are refused like any other path.
    assert_eq!(
        f.policy
            .walk(&w.join("homelink"), WalkOptions::new(8), |_| {
                WalkControl::Continue
            })
            .unwrap_err()
            .code(),
        "not_permitted"
    );
    assert_eq!(
        f.policy
            .walk(&f.state, WalkOptions::new(8), |_| WalkControl::Continue)
            .unwrap_err()
            .code(),
        "not_permitted"
    );
    // Walking the temp root never enters the home's credential dir or the state dir.
    let mut all = Vec::new();
    f.policy
        .walk(&f.root, WalkOptions::new(64), |e| {
            all.push(e.path.to_path_buf());
            WalkControl::Continue
        })
        .unwrap();
    assert!(!all.iter().any(|p| p.starts_with(&f.state)), "{all:?}");
    assert!(
        !all.iter().any(|p| p.starts_with(f.home.join(".ssh"))),
        "{all:?}"
    );
}

#[test]
fn walk_child_file_rules() {
    let f = fixture();
    let w = f.root.join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("one.txt"), "1").unwrap();
    std::fs::write(w.join("two.txt"), "2").unwrap();
    std::fs::hard_link(w.join("two.txt"), f.root.join("two-again.txt")).unwrap();
    std::fs::hard_link(f.state.join("gateway.db"), w.join("db-alias")).unwrap();
    let mut results = Vec::new();
    f.policy
        .walk(&w, WalkOptions::new(8), |e| {
            let opened = f
                .policy
                .open_child_file(e.parent, e.name, e.path)
                .map(|_| ());
            let checked = f.policy.check_child_file(e.parent, e.name, e.path);
            assert_eq!(opened, checked);
            results.push((e.name.to_os_string(), checked.map_err(|r| r.code())));
            WalkControl::Continue
        })
        .unwrap();
    assert_eq!(
        results,
        vec![
            (OsString::from("db-alias"), Err("not_permitted")),
            (OsString::from("one.txt"), Ok(())),
            (OsString::from("two.txt"), Err("not_permitted")),
        ]
    );
}

/// Exchange two names atomically (Linux `renameat2(RENAME_EXCHANGE)`).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
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

#[cfg(target_os = "macos")]
#[test]
fn protected_names_case_insensitive_on_macos() {
    let f = fixture();
    assert!(f.policy.is_protected(&f.home.join(".SSH/id_ed25519")));
    assert!(f.policy.is_protected(&f.home.join(".Aws/credentials")));
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
        "not_permitted"
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
        "not_permitted"
    );
    assert_eq!(code(policy.open_dir_no_follow(&f.state)), "not_permitted");
    let err = policy.open_file_no_follow(&tree.join(".git")).unwrap_err();
    assert!(err.to_string().contains(".git"), "{err}");
    assert!(policy.is_protected(&worktrees.join("../gateway.db")));

    // The state dir reached by another path is refused by identity, worktrees included.
    let moved = f.root.join("moved-state");
    std::fs::rename(&f.state, &moved).unwrap();
    assert_eq!(
        code(policy.open_file_no_follow(&moved.join("worktrees/ns_1/src/a.rs"))),
        "not_permitted"
    );
    assert_eq!(
        code(policy.open_file_no_follow(&moved.join("gateway.db"))),
        "not_permitted"
    );
}

/// A tree wider and deeper than the read-ahead window, with every kind of entry the walk treats
/// specially.
fn busy_tree(f: &Fixture) -> PathBuf {
    let w = f.root.join("busy");
    for top in 0..12 {
        for sub in 0..9 {
            let dir = w.join(format!("t{top:02}/s{sub}/deep/er"));
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..(top + sub) % 5 {
                std::fs::write(dir.join(format!("f{i}.txt")), "x").unwrap();
            }
            std::fs::write(w.join(format!("t{top:02}/s{sub}/n.rs")), "n").unwrap();
        }
        std::fs::create_dir_all(w.join(format!("t{top:02}/.git/objects"))).unwrap();
        std::fs::write(w.join(format!("t{top:02}/.git/objects/o")), "o").unwrap();
    }
    std::fs::write(w.join("t00/one.txt"), "1").unwrap();
    std::fs::hard_link(w.join("t00/one.txt"), w.join("t01/linked.txt")).unwrap();
    std::fs::hard_link(f.state.join("gateway.db"), w.join("t02/db-alias")).unwrap();
    std::os::unix::fs::symlink(&f.home, w.join("t03/homelink")).unwrap();
    std::os::unix::fs::symlink(w.join("t00"), w.join("t04/dirlink")).unwrap();
    rustix::fs::mkfifoat(rustix::fs::CWD, w.join("t05/fifo"), Mode::RUSR | Mode::WUSR).unwrap();
    w
}

type Seen = Vec<(PathBuf, EntryKind, usize, Result<(), &'static str>)>;

fn walk_all(f: &Fixture, root: &Path, options: WalkOptions) -> (Seen, WalkStats) {
    let mut seen = Vec::new();
    let stats = f
        .policy
        .walk(root, options, |e| {
            let check = if e.kind == EntryKind::File {
                let walked = f.policy.check_walked_file(&e);
                // The `lstat` taken while listing says what a fresh one says.
                assert_eq!(walked, f.policy.check_child_file(e.parent, e.name, e.path));
                walked.map_err(|r| r.code())
            } else {
                Ok(())
            };
            assert_eq!(e.path.file_name(), Some(e.name));
            seen.push((e.path.to_path_buf(), e.kind, e.depth, check));
            WalkControl::Continue
        })
        .unwrap();
    (seen, stats)
}

#[test]
fn read_ahead_walk_yields_the_same_as_a_plain_walk() {
    let f = fixture();
    let w = busy_tree(&f);
    for max_depth in [1, 2, 4, 64] {
        let plain = WalkOptions {
            max_depth,
            stat_files: false,
            threads: 0,
        };
        let (expected, expected_stats) = walk_all(&f, &w, plain);
        let mut sorted = expected.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(sorted, expected, "path order");
        if max_depth == 64 {
            // Directories, `n.rs` files, the `f*.txt` files and the six extras.
            let files: usize = (0..12).flat_map(|t| (0..9).map(move |s| (t + s) % 5)).sum();
            assert_eq!(expected.len(), (12 + 12 * 9 * 3) + 12 * 9 + files + 6);
            assert!(
                !expected
                    .iter()
                    .any(|e| e.0.to_string_lossy().contains(".git"))
            );
            let code = |name: &str| expected.iter().find(|e| e.0.ends_with(name)).unwrap().3;
            assert_eq!(code("t00/one.txt"), Err("not_permitted"));
            assert_eq!(code("t01/linked.txt"), Err("not_permitted"));
            assert_eq!(code("t02/db-alias"), Err("not_permitted"));
            assert_eq!(code("t00/s0/n.rs"), Ok(()));
        }
        for threads in [1, 3, 8] {
            for stat_files in [false, true] {
                let options = WalkOptions {
                    max_depth,
                    stat_files,
                    threads,
                };
                for _ in 0..3 {
                    assert_eq!(
                        walk_all(&f, &w, options),
                        (expected.clone(), expected_stats)
                    );
                }
            }
        }
    }
}

#[test]
fn read_ahead_walk_stops_when_told_and_survives_a_panicking_visitor() {
    let f = fixture();
    let w = busy_tree(&f);
    let options = WalkOptions {
        max_depth: 64,
        stat_files: true,
        threads: 4,
    };
    let (all, _) = walk_all(&f, &w, options);
    for stop_after in [1, 7, 100, all.len() - 1] {
        let mut seen = Vec::new();
        f.policy
            .walk(&w, options, |e| {
                seen.push(e.path.to_path_buf());
                if seen.len() == stop_after {
                    WalkControl::Stop
                } else {
                    WalkControl::Continue
                }
            })
            .unwrap();
        let prefix: Vec<PathBuf> = all[..stop_after].iter().map(|e| e.0.clone()).collect();
        assert_eq!(seen, prefix);
    }
    // A visitor that panics must not leave the walk waiting for its read-ahead threads.
    let (tx, rx) = std::sync::mpsc::channel();
    let policy = f.policy.clone();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut n = 0;
            policy.walk(&w, options, |_| {
                n += 1;
                assert!(n < 50, "visitor gives up");
                WalkControl::Continue
            })
        }));
        tx.send(result.is_err()).unwrap();
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
}

/// `StopFileStats` keeps the walk going with the same entries in the same order; directories
/// listed after it bring no stats for their files (those listed before may keep theirs).
#[test]
fn read_ahead_walk_drops_file_stats_when_told() {
    let f = fixture();
    let w = busy_tree(&f);
    for threads in [0, 4] {
        let options = WalkOptions {
            max_depth: 64,
            stat_files: true,
            threads,
        };
        let (all, _) = walk_all(&f, &w, options);
        let mut seen = Vec::new();
        let mut stats_after = 0;
        let mut files_after = 0;
        f.policy
            .walk(&w, options, |e| {
                seen.push(e.path.to_path_buf());
                if seen.len() > all.len() / 2 && e.kind == EntryKind::File {
                    files_after += 1;
                    stats_after += usize::from(e.stat.is_some());
                }
                if seen.len() == 3 {
                    WalkControl::StopFileStats
                } else {
                    WalkControl::Continue
                }
            })
            .unwrap();
        let paths: Vec<PathBuf> = all.iter().map(|e| e.0.clone()).collect();
        assert_eq!(seen, paths, "threads {threads}");
        assert!(files_after > 0);
        // Read-ahead is bounded (64 listings), so most of the second half was listed after.
        assert!(
            stats_after < files_after,
            "threads {threads}: {stats_after}/{files_after}"
        );
        if threads == 0 {
            assert_eq!(stats_after, 0);
        }
    }
}

/// RACE: a thread flips `w/comp` between a real directory and a symlink to a directory outside;
/// a walk with read-ahead threads never yields anything from behind the symlink.
#[cfg(target_os = "linux")]
#[test]
fn race_read_ahead_walk_never_follows_a_swapped_symlink() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fixture();
    let outside = f.root.join("outside");
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("sub/OUTSIDE-ONLY.txt"), "o").unwrap();
    let w = f.root.join("w");
    for i in 0..20 {
        std::fs::create_dir_all(w.join(format!("a{i:02}/comp/sub"))).unwrap();
        std::fs::write(w.join(format!("a{i:02}/comp/sub/inside.txt")), "i").unwrap();
        std::os::unix::fs::symlink(&outside, w.join(format!("a{i:02}/other"))).unwrap();
    }
    let stop = AtomicBool::new(false);
    let options = WalkOptions {
        max_depth: 64,
        stat_files: true,
        threads: 4,
    };
    let mut inside = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for i in 0..20 {
                    let d = w.join(format!("a{i:02}"));
                    exchange(&d.join("comp"), &d.join("other"));
                }
            }
        });
        for _ in 0..200 {
            f.policy
                .walk(&w, options, |e| {
                    assert!(
                        !e.path.ends_with("OUTSIDE-ONLY.txt"),
                        "followed a symlink: {}",
                        e.path.display()
                    );
                    if e.path.ends_with("inside.txt") {
                        inside += 1;
                    }
                    WalkControl::Continue
                })
                .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(inside > 0, "race not exercised");
}

#[test]
fn insensitive_fold_matches_case_and_normalisation_variants() {
    let key = |s: &str| fold_insensitive(s.as_bytes());
    for (a, b) in [
        (".SSH", ".ssh"),
        ("Library/Keychains", "library/keychains"),
        ("caf\u{e9}", "cafe\u{301}"),
        ("CAF\u{c9}", "cafe\u{301}"),
        ("\u{c5}ngstr\u{f6}m", "a\u{30a}ngstro\u{308}m"),
        ("\u{212b}", "\u{e5}"),
        ("stra\u{df}e", "STRASSE"),
        ("\u{3a3}\u{3c3}\u{3c2}", "\u{3c3}\u{3c3}\u{3c3}"),
        ("\u{212a}ey", "key"),
        (".g\u{200c}it", ".git"),
        ("\u{feff}.s\u{200d}sh", ".SSH"),
    ] {
        assert_eq!(key(a), key(b), "{a:?} vs {b:?}");
    }
    for (a, b) in [
        (".ssh", ".ssh2"),
        ("caf\u{e9}", "cafe"),
        ("a", "b"),
        ("\u{e5}", "a"),
    ] {
        assert_ne!(key(a), key(b), "{a:?} vs {b:?}");
    }
    // Invalid UTF-8 does not panic and stays distinct from valid names.
    assert_ne!(fold_insensitive(b"caf\xe9"), key("caf\u{e9}"));
    assert!(is_git_name_in(OsStr::new(".G\u{200d}IT"), true));
    assert!(is_git_name_in(OsStr::new(".GIT"), false));
    assert!(!is_git_name_in(OsStr::new(".g\u{200c}it"), false));
    assert!(!is_git_name_in(OsStr::new(".gitx"), true));
}

#[test]
fn insensitive_policy_protects_every_spelling() {
    let f = fixture();
    let w = f.root.join("w");
    let extra = w.join("Pro\u{308}jekt");
    let policy = PathPolicy::build(f.home.clone(), f.state.clone(), vec![extra.clone()], true);
    let exact = PathPolicy::build(f.home.clone(), f.state.clone(), vec![extra], false);
    for path in [
        f.home.join(".SSH/id_ed25519"),
        f.home.join(".Aws/credentials"),
        f.home.join("LIBRARY/keychains/login.keychain-db"),
        f.home.join(".s\u{200c}sh/id_ed25519"),
        w.join("pr\u{f6}jekt/x"),
        w.join("PRO\u{308}JEKT"),
        PathBuf::from("/ETC/Shadow"),
        PathBuf::from("/etc/SSH/SSH_HOST_ed25519_key"),
        f.root.join("w/.G\u{200c}it/config"),
    ] {
        assert!(policy.is_protected(&path), "{}", path.display());
        assert!(policy.check(&path).is_err(), "{}", path.display());
        // Exact matching (Linux) protects only the exact spelling.
        assert!(!exact.is_protected(&path), "{}", path.display());
    }
    assert!(exact.is_protected(&w.join("Pro\u{308}jekt/x")));
    assert!(!policy.is_protected(&w.join("projekt/x")));
    assert!(!policy.is_protected(&f.home.join(".sshx")));
    assert!(!policy.is_protected(Path::new("/etc/ssh/ssh_host_ed25519_key.PUB")));
    // A walk under insensitive matching neither yields nor enters the variants.
    for rel in [".g\u{200c}it/HEAD", "PR\u{d6}JEKT/x", "ok/y"] {
        let p = w.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    let walked = |policy: &PathPolicy, root: &Path| {
        let mut names = Vec::new();
        policy
            .walk(root, WalkOptions::new(8), |e| {
                names.push(e.path.strip_prefix(root).unwrap().to_path_buf());
                WalkControl::Continue
            })
            .unwrap();
        names
    };
    assert_eq!(
        walked(&policy, &w),
        [PathBuf::from("ok"), PathBuf::from("ok/y")]
    );
    let variant = w.join("PR\u{d6}JEKT");
    let err = policy.walk(&variant, WalkOptions::new(8), |_| WalkControl::Continue);
    assert_eq!(err.unwrap_err().code(), "not_permitted");
    assert_eq!(walked(&exact, &variant), [PathBuf::from("x")]);
    assert_eq!(walked(&exact, &w).len(), 6);
}

// ---------- Working directories resolved by identity (issue 11, finding 1) ----------

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
