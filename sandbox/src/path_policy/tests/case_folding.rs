//! Case-insensitive file systems: the fold matches case and Unicode normalisation variants, and an
//! insensitive policy protects every spelling.

use super::*;

#[cfg(target_os = "macos")]
#[test]
fn protected_names_case_insensitive_on_macos() {
    let f = fixture();
    assert!(f.policy.is_protected(&f.home.join(".SSH/id_ed25519")));
    assert!(f.policy.is_protected(&f.home.join(".Aws/credentials")));
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
    assert_eq!(err.unwrap_err().code(), OutcomeCode::NotPermitted);
    assert_eq!(walked(&exact, &variant), [PathBuf::from("x")]);
    assert_eq!(walked(&exact, &w).len(), 6);
}
