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
    for rel in HOME_PROTECTED {
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
        .walk(&f.home, 64, |e| {
            seen.push(e.path);
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
        .walk(&dir, 8, |e| {
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
        .walk(&w, 64, |e| {
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
        .walk(&w, 1, |e| {
            shallow.push(e.depth);
            WalkControl::Continue
        })
        .unwrap();
    assert!(shallow.iter().all(|d| *d == 1), "{shallow:?}");
    // Walk roots are refused like any other path.
    assert_eq!(
        f.policy
            .walk(&w.join("homelink"), 8, |_| WalkControl::Continue)
            .unwrap_err()
            .code(),
        "not_permitted"
    );
    assert_eq!(
        f.policy
            .walk(&f.state, 8, |_| WalkControl::Continue)
            .unwrap_err()
            .code(),
        "not_permitted"
    );
    // Walking the temp root never enters the home's credential dir or the state dir.
    let mut all = Vec::new();
    f.policy
        .walk(&f.root, 64, |e| {
            all.push(e.path);
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
        .walk(&w, 8, |e| {
            let opened = f
                .policy
                .open_child_file(e.parent, e.name, &e.path)
                .map(|_| ());
            let checked = f.policy.check_child_file(e.parent, e.name, &e.path);
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
        .walk(&tree, 8, |entry| {
            listed.push(entry.path.clone());
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
