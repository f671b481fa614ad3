//! The layer on disk: dropping stale entries, removal, measuring.

use super::*;

#[test]
fn a_written_path_drops_the_layers_copy_and_only_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layer");
    let root = Path::new("/proj");
    prepare(&dir, &[root.to_path_buf()]).unwrap();
    let upper = dir.join(layer_key(root)).join("upper");
    std::fs::create_dir_all(upper.join("src")).unwrap();
    std::fs::write(upper.join("src/lib.rs"), "stale").unwrap();
    std::fs::write(upper.join("src/other.rs"), "kept").unwrap();
    let forgot = forget_written(
        &dir,
        &tmp.path().join(TRASH),
        root,
        Path::new("/proj/src/lib.rs"),
    )
    .unwrap();
    assert_eq!(forgot, Forgot::Entry);
    assert!(!upper.join("src/lib.rs").exists());
    assert!(upper.join("src/other.rs").exists());
    let nothing = forget_written(
        &dir,
        &tmp.path().join(TRASH),
        root,
        Path::new("/proj/new/x.rs"),
    )
    .unwrap();
    assert_eq!(nothing, Forgot::Nothing);
    assert_eq!(
        forget_written(
            &dir,
            &tmp.path().join(TRASH),
            root,
            Path::new("/elsewhere/x")
        )
        .unwrap(),
        Forgot::Nothing
    );
}

#[test]
fn an_entry_older_than_its_real_file_is_dropped_and_new_build_dirs_are_left() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layer");
    let root = tmp.path().join("real");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.rs"), "real a").unwrap();
    std::fs::write(root.join("src/b.rs"), "real b").unwrap();
    prepare(&dir, std::slice::from_ref(&root)).unwrap();
    let upper = dir.join(layer_key(&root)).join("upper");
    std::fs::create_dir_all(upper.join("src")).unwrap();
    std::fs::create_dir_all(upper.join("target")).unwrap();
    std::fs::write(upper.join("src/a.rs"), "layer a").unwrap();
    std::fs::write(upper.join("target/out"), "built").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // The real b.rs changes after the layer's copies were made; a.rs does not.
    std::fs::write(upper.join("src/b.rs"), "layer b").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(root.join("src/b.rs"), "edited b").unwrap();
    assert_eq!(forget_changed(&dir, &root).unwrap(), 1);
    assert!(!upper.join("src/b.rs").exists());
    assert!(upper.join("src/a.rs").exists());
    assert!(upper.join("target/out").exists());
}

#[test]
fn an_ancestor_hiding_the_real_path_drops_the_roots_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layer");
    let root = Path::new("/proj");
    prepare(&dir, &[root.to_path_buf()]).unwrap();
    let upper = dir.join(layer_key(root)).join("upper");
    // A file where the real tree has a directory (the command replaced `src`).
    std::fs::write(upper.join("src"), "not a dir").unwrap();
    let trash = tmp.path().join(TRASH);
    let forgot = forget_written(&dir, &trash, root, Path::new("/proj/src/lib.rs")).unwrap();
    assert_eq!(forgot, Forgot::Root);
    assert!(!dir.join(layer_key(root)).exists());
    // Moved into the trash, for the gateway's deleter.
    assert_eq!(std::fs::read_dir(&trash).unwrap().count(), 1);
    // prepare() makes it again for the next command.
    prepare(&dir, &[root.to_path_buf()]).unwrap();
    assert!(upper.is_dir());
}

#[test]
fn removal_copes_with_an_unreadable_work_dir_and_usage_counts_blocks() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layer");
    prepare(&dir, &[PathBuf::from("/a")]).unwrap();
    let work = dir.join(layer_key(Path::new("/a"))).join("work/work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("f"), vec![1u8; 10_000]).unwrap();
    assert!(crate::allocated_bytes(&dir) >= 10_000);
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o000)).unwrap();
    remove(&dir);
    assert!(!dir.exists());
}

#[test]
fn the_session_dir_holds_every_redirected_dir_and_keeps_what_is_there() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layer");
    prepare_session_dir(&dir).unwrap();
    for sub in crate::env::session_subdirs() {
        let meta = std::fs::metadata(dir.join(sub)).unwrap();
        assert!(meta.is_dir(), "{sub}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{sub}");
    }
    std::fs::write(dir.join("cargo-target/kept"), "x").unwrap();
    prepare_session_dir(&dir).unwrap();
    assert!(dir.join("cargo-target/kept").exists());
}

#[cfg(target_os = "linux")]
mod removal;
