//! Late registrations: protected from the next refresh on, never dropped, never followed; the
//! registry file list re-derived when /tmp or /etc/passwd change.

use super::super::PathPolicy;
use crate::protected::instances::{fallback_registry, registry_path};

/// A state dir listed after the policy was built is protected from the first refresh on;
/// a registry that turns into something else than a file takes nothing away.
#[test]
fn a_later_registration_is_protected_after_a_refresh() {
    let home = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let later = tempfile::tempdir().unwrap();
    let registry = registry_path(home.path());
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    std::fs::write(&registry, format!("{}\n", own.path().display())).unwrap();
    let policy = PathPolicy::new(home.path().into(), own.path().into(), vec![]);
    let token = std::fs::canonicalize(later.path())
        .unwrap()
        .join("auth/access-token");
    assert!(!policy.is_protected(&token));
    policy.refresh_instances();
    assert!(!policy.is_protected(&token), "nothing changed yet");
    // The given masks (sorted, without duplicates) and whatever is late: still so, all there.
    let given = crate::masked_paths(home.path(), own.path(), &[]);
    let merged_well = |masks: &[std::path::PathBuf]| {
        masks.is_sorted()
            && masks.windows(2).all(|w| w[0] != w[1])
            && given.iter().all(|g| masks.contains(g))
    };
    assert!(merged_well(&policy.with_late_masks(&given)));
    let text = format!("{}\n{}\n", own.path().display(), later.path().display());
    std::fs::write(&registry, text).unwrap();
    let clone = policy.clone();
    policy.refresh_instances();
    assert!(policy.is_protected(&token));
    assert!(clone.is_protected(&token), "clones share the late set");
    let masks = policy.with_late_masks(&[]);
    assert!(masks.iter().any(|m| token.starts_with(m)), "{masks:?}");
    let masks = policy.with_late_masks(&given);
    assert!(masks.iter().any(|m| token.starts_with(m)));
    assert!(merged_well(&masks));
    // Removed from the registry: still protected (never dropped).
    std::fs::write(&registry, format!("{}\n", own.path().display())).unwrap();
    policy.refresh_instances();
    assert!(policy.is_protected(&token));
    // Turned into something no gateway writes (a directory, a FIFO, a symlink): read as no
    // registry, never blocking, and what it listed stays protected.
    for make in [
        |p: &std::path::Path| std::fs::create_dir(p).unwrap(),
        |p: &std::path::Path| {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap()
        },
        |p: &std::path::Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
    ] {
        let _ = std::fs::remove_file(&registry).or_else(|_| std::fs::remove_dir(&registry));
        make(&registry);
        policy.refresh_instances();
        assert!(policy.is_protected(&token));
    }
}

/// The list of registry files is kept between calls, and derived again once the system temp
/// dir gains an account's registry dir: a gateway listed there later is protected too.
#[test]
fn a_registry_dir_made_in_tmp_later_is_read() {
    let home = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let later = tempfile::tempdir().unwrap();
    let policy = PathPolicy::new(home.path().into(), own.path().into(), vec![]);
    policy.refresh_instances();
    let token = std::fs::canonicalize(later.path())
        .unwrap()
        .join("auth/token");
    assert!(!policy.is_protected(&token));
    // A uid no account has, so no real gateway uses this dir; owned by that uid, as readers
    // require (root can give it away; another account uses its own uid's dir).
    let me = rustix::process::geteuid().as_raw();
    let uid = if me == 0 {
        4_000_000_000 - std::process::id()
    } else {
        me
    };
    let registry = fallback_registry(uid);
    let dir = registry.parent().unwrap().to_path_buf();
    if me == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::create_dir(&dir).unwrap_or_else(|err| {
        panic!(
            "{} exists ({err}): this account's own registry dir; run as root",
            dir.display()
        )
    });
    std::fs::write(&registry, format!("{}\n", later.path().display())).unwrap();
    for path in [&dir, &registry, &later.path().to_path_buf()] {
        std::os::unix::fs::chown(path, Some(uid), None).unwrap();
    }
    policy.refresh_instances();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(policy.is_protected(&token));
}

/// Red team 26 B2: a name that stands for another gateway's runtime area is another
/// account's to fill; a symlink there (here at the predictable legacy name of a listed state
/// dir) is protected as a name, never followed to its target.
#[test]
fn another_gateways_names_are_never_followed() {
    let home = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let victim = tempfile::tempdir().unwrap();
    let theirs_path = std::fs::canonicalize(theirs.path()).unwrap();
    let area = crate::protected::runtime_area::legacy_runtime_area(&theirs_path);
    std::os::unix::fs::symlink(victim.path(), &area).unwrap();
    let policy = PathPolicy::new(home.path().into(), own.path().into(), vec![]);
    let registry = registry_path(home.path());
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    std::fs::write(&registry, format!("{}\n", theirs_path.display())).unwrap();
    policy.refresh_instances();
    let victim_file = std::fs::canonicalize(victim.path()).unwrap().join("f");
    let protected = policy.is_protected(&victim_file);
    let masked = crate::masked_paths(home.path(), own.path(), &[]);
    std::fs::remove_file(&area).unwrap();
    assert!(policy.is_protected(&theirs_path.join("auth")));
    assert!(!protected, "the symlink's target was protected");
    let victim_dir = std::fs::canonicalize(victim.path()).unwrap();
    assert!(
        !masked.contains(&victim_dir),
        "the symlink's target was masked"
    );
}
