//! The runtime area's records, its making under a fresh name, and the orphan sweep.

use super::*;
use crate::protected::tests::tmp;
use std::os::unix::fs::DirBuilderExt;

#[test]
fn only_well_formed_records_name_an_area() {
    let base = Path::new(BASE);
    assert_eq!(
        parse_area(base, "/tmp/ngw-run-0-0123abcd\n"),
        Some(PathBuf::from("/tmp/ngw-run-0-0123abcd"))
    );
    for bad in [
        "/tmp/other",
        "/var/tmp/ngw-run-0-1",
        "/tmp/ngw-run-0-1/../../etc",
        "/tmp/ngw-run-0-1/x",
        "tmp/ngw-run-0-1",
        "/tmp/ngw-run-0-1\n/tmp/ngw-run-0-2",
        "",
    ] {
        assert_eq!(parse_area(base, bad), None, "{bad:?}");
    }
}

#[test]
fn a_start_keeps_its_private_area_and_replaces_one_that_is_not() {
    let (_base_dir, base) = tmp();
    let (_state_dir, state) = tmp();
    let first = establish_in(&base, &state).unwrap();
    assert!(first.starts_with(&base));
    assert!(check_private_dir(&first).is_ok());
    assert_eq!(recorded_in(&base, &state), Some(first.clone()));
    assert_eq!(
        read_small(&first.join(MARKER)).unwrap(),
        state.to_string_lossy()
    );
    // The next start keeps it (its brokers' sessions live there).
    assert_eq!(establish_in(&base, &state).unwrap(), first);
    // Opened to others, or replaced by a symlink to a private dir of ours: a new name.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o777)).unwrap();
    let second = establish_in(&base, &state).unwrap();
    assert_ne!(first, second);
    assert!(check_private_dir(&second).is_ok());
    let moved = base.join("moved");
    std::fs::rename(&second, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &second).unwrap();
    let third = establish_in(&base, &state).unwrap();
    assert!(third != second && third != first);
    assert!(check_private_dir(&third).is_ok());
    assert_eq!(recorded_in(&base, &state), Some(third));
}

#[test]
fn orphans_are_our_areas_whose_state_dir_is_gone_or_moved() {
    let (_base_dir, base) = tmp();
    let (_live_dir, live) = tmp();
    let me = uid();
    let area = |name: &str| {
        let a = base.join(format!("{PREFIX}{me}-{name}"));
        std::fs::DirBuilder::new().mode(0o700).create(&a).unwrap();
        a
    };
    let kept = area("kept");
    replace_private_file(&kept.join(MARKER), live.to_string_lossy().as_bytes()).unwrap();
    let gone = area("gone");
    replace_private_file(&gone.join(MARKER), b"/nonexistent/state").unwrap();
    let unmarked = area("000000000000");
    let legacy_live = base.join(
        legacy_runtime_area(&live)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
    );
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&legacy_live)
        .unwrap();
    let other = base.join("ngw-run-4242-x");
    std::fs::create_dir(&other).unwrap();
    let link = base.join(format!("{PREFIX}{me}-link"));
    std::os::unix::fs::symlink(&gone, &link).unwrap();
    let current = area("current");
    let young = orphans_in(
        &base,
        std::slice::from_ref(&live),
        &current,
        std::time::Duration::from_secs(3600),
    );
    assert_eq!(young, Vec::<PathBuf>::new(), "being made, perhaps");
    let found = orphans_in(
        &base,
        std::slice::from_ref(&live),
        &current,
        std::time::Duration::ZERO,
    );
    assert_eq!(found, {
        let mut v = vec![gone, unmarked];
        v.sort();
        v
    });
    assert!(!found.contains(&kept) && !found.contains(&legacy_live));
}
