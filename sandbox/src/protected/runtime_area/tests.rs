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

/// RT29 B3: once the area went, whatever holds its name is not the area: a directory open to
/// others, another account's private one, a symlink (to the owner's project), a directory of
/// ours without the marker.
#[test]
fn a_name_taken_after_the_area_went_is_never_the_area() {
    use std::os::unix::fs::PermissionsExt;
    let (_base_dir, base) = tmp();
    let (_state_dir, state) = tmp();
    let (_project_dir, project) = tmp();
    let area = establish_in(&base, &state).unwrap();
    let first = verify_area(&area, &state).unwrap();
    assert_eq!(first.path, area);
    let marker = state.to_string_lossy().into_owned();
    let squat = |mode: u32, owner: Option<u32>, marked: bool| {
        crate::layer::remove(&area);
        std::fs::create_dir(&area).unwrap();
        if marked {
            replace_private_file(&area.join(MARKER), marker.as_bytes()).unwrap();
        }
        std::fs::set_permissions(&area, std::fs::Permissions::from_mode(mode)).unwrap();
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&area, Some(uid), Some(uid)).unwrap();
        }
    };
    // Open to others, even with a marker naming this state dir.
    squat(0o777, None, true);
    assert!(matches!(
        verify_area(&area, &state),
        Err(AreaError::NotPrivate { mode: 0o777, .. })
    ));
    if uid() == 0 {
        // Another account's, private (as root the test can make one).
        squat(0o700, Some(65534), true);
        let err = verify_area(&area, &state).unwrap_err();
        assert!(
            matches!(err, AreaError::NotPrivate { owner: 65534, .. }),
            "{err}"
        );
    }
    // Ours and private, but no marker: not this gateway's.
    squat(0o700, None, false);
    assert!(matches!(
        verify_area(&area, &state),
        Err(AreaError::NotThisGateways { .. })
    ));
    // Ours, private, the marker: only this account can make that, and it verifies (the gateway
    // also compares the identity; a reused inode number may make it equal).
    squat(0o700, None, true);
    assert!(verify_area(&area, &state).is_ok());
    // A symlink to the owner's project: never followed.
    crate::layer::remove(&area);
    std::os::unix::fs::symlink(&project, &area).unwrap();
    assert!(matches!(
        verify_area(&area, &state),
        Err(AreaError::NotPrivate { .. })
    ));
    // Gone.
    std::fs::remove_file(&area).unwrap();
    assert!(matches!(
        verify_area(&area, &state),
        Err(AreaError::Io { .. })
    ));
    // The replacement: a fresh name, recorded; the old name and the project untouched.
    std::os::unix::fs::symlink(&project, &area).unwrap();
    let new = replace_in(&base, &state).unwrap();
    assert_ne!(new, area);
    assert_eq!(recorded_in(&base, &state), Some(new.clone()));
    assert!(verify_area(&new, &state).is_ok());
    assert!(std::fs::symlink_metadata(&area).unwrap().is_symlink());
    assert_eq!(std::fs::read_dir(&project).unwrap().count(), 0);
}
