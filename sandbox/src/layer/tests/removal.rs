//! Tests of the safe deletion (`layer::remove`): what a session could plant in its layer.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::super::*;

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Symlinks out of the tree (to a file, to a directory), a chmod-000 directory holding files, a
/// read-only directory, a tree deeper than the open-descriptor bound and a few thousand files:
/// all gone, and nothing outside touched (modes included).
#[test]
fn a_hostile_tree_is_deleted_and_nothing_outside_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(outside.join("secret"), "keep").unwrap();
    std::fs::write(outside.join("dir/inner"), "keep").unwrap();
    mode(&outside.join("dir"), 0o500);
    let trash = tmp.path().join("trash");
    let tree = trash.join("layer-1");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), tree.join("a/to-file")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), tree.join("a/b/to-dir")).unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("to-outside")).unwrap();
    let locked = tree.join("locked");
    std::fs::create_dir_all(locked.join("sub")).unwrap();
    std::fs::write(locked.join("sub/f"), "x").unwrap();
    mode(&locked.join("sub"), 0o000);
    mode(&locked, 0o000);
    let read_only = tree.join("ro");
    std::fs::create_dir(&read_only).unwrap();
    std::fs::write(read_only.join("f"), "x").unwrap();
    mode(&read_only, 0o500);
    let mut deep = tree.join("deep");
    for _ in 0..150 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("bottom"), "x").unwrap();
    // Deeper than the open-directory limit and read-only all the way down (red team 24b): a
    // directory moved up must first be made writable (its `..` entry changes).
    let mut chain = tree.join("ro-chain");
    let mut chain_dirs = Vec::new();
    for _ in 0..60 {
        chain.push("d");
        chain_dirs.push(chain.clone());
    }
    std::fs::create_dir_all(&chain).unwrap();
    std::fs::write(chain.join("payload"), "x").unwrap();
    for dir in chain_dirs.iter().rev() {
        mode(dir, 0o555);
    }
    let many = tree.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..3000 {
        std::fs::write(many.join(format!("f{i}")), "").unwrap();
        if i % 300 == 0 {
            std::fs::create_dir(many.join(format!("d{i}"))).unwrap();
        }
    }
    let removed = without_capabilities(move || remove_path(&tree));
    let tree = trash.join("layer-1");
    assert_eq!(removed.failed, 0, "{removed:?}");
    assert!(removed.entries > 3000 + 150 + 60, "{removed:?}");
    assert!(std::fs::symlink_metadata(&tree).is_err());
    assert_eq!(std::fs::read_dir(&trash).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "keep"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("dir/inner")).unwrap(),
        "keep"
    );
    let kept = std::fs::metadata(outside.join("dir")).unwrap();
    assert_eq!(kept.permissions().mode() & 0o777, 0o500);
    mode(&outside.join("dir"), 0o700);
}

/// Run `f` on a thread without capabilities (capabilities are per thread): as root, chmod-000
/// directories would otherwise be readable anyway and the test would prove nothing.
fn without_capabilities<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        assert!(crate::linux::sys::drop_capabilities());
        f()
    })
    .join()
    .unwrap()
}

/// A symlink at the top is unlinked itself; its target stays.
#[test]
fn a_symlink_given_to_delete_is_unlinked_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("target")).unwrap();
    std::fs::write(tmp.path().join("target/f"), "keep").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("target"), tmp.path().join("link")).unwrap();
    let removed = remove_path(&tmp.path().join("link"));
    assert_eq!((removed.entries, removed.failed), (1, 0));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("target/f")).unwrap(),
        "keep"
    );
}

/// Layers go into the trash by a rename, leftovers of older brokers beside the layer too.
#[test]
fn discarding_moves_the_layer_and_old_leftovers_into_the_trash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s1/layer");
    let trash = tmp.path().join(TRASH);
    std::fs::create_dir_all(dir.join("k/upper")).unwrap();
    std::fs::create_dir_all(tmp.path().join("s1/.layer.discarded-1-0/x")).unwrap();
    discard(&dir, &trash).unwrap();
    discard_leftovers(&dir, &trash);
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(tmp.path().join("s1")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&trash).unwrap().count(), 2);
    let meta = std::fs::metadata(&trash).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    // Nothing to discard is not an error.
    discard(&dir, &trash).unwrap();
}

/// No room for a budget larger than the disk: the words name the budget and what to do.
#[test]
fn a_layer_budget_beyond_the_free_space_has_no_room() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(room_for_layer(tmp.path(), 1024 * 1024), Ok(()));
    let refused = room_for_layer(tmp.path(), 1 << 60).unwrap_err();
    let words = refused.to_string();
    assert!(
        words.starts_with("the disk holding command layers has ")
            && words.contains("less than one session layer's budget of 1099511627776 MiB")
            && words.ends_with("the owner can lower CLAUDE_TOOLS_COMMAND_LAYER_MB"),
        "{words}"
    );
}
