//! The private dir/file helper: modes of what it makes, symlinks never followed, other owners'
//! and open modes refused or narrowed as asked, replacements atomic.

use super::*;

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    (dir, path)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn files_are_made_0600_and_written_whole() {
    let (_d, tmp) = tmp();
    let path = tmp.join("token");
    write_private_file(&path, b"first, longer").unwrap();
    assert_eq!(mode(&path), 0o600);
    write_private_file(&path, b"second").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    replace_private_file(&path, b"third").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"third");
    assert_eq!(mode(&path), 0o600);
    let names: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["token"], "no temporary file left");
}

#[test]
fn an_open_file_of_ours_is_narrowed_to_the_owner() {
    let (_d, tmp) = tmp();
    let path = tmp.join("key");
    std::fs::write(&path, "x").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    open_private_file(&path, OpenOptions::new().read(true)).unwrap();
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn a_symlink_is_never_followed_for_a_file() {
    let (_d, tmp) = tmp();
    let target = tmp.join("target");
    std::fs::write(&target, "keep").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = tmp.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = write_private_file(&link, b"new").unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::LOOP.raw_os_error()),
        "{err}"
    );
    assert!(open_private_file(&link, OpenOptions::new().read(true)).is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert_eq!(mode(&target), 0o644, "the target's mode is untouched");
    // A replacement renames over the link itself, never writes through it.
    replace_private_file(&link, b"new").unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
}

#[test]
fn a_fifo_at_the_name_is_refused_without_waiting() {
    use rustix::fs::{CWD, FileType, Mode, mknodat};
    let (_d, tmp) = tmp();
    let fifo = tmp.join("registry");
    mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    for options in [
        OpenOptions::new().read(true).clone(),
        OpenOptions::new().write(true).clone(),
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .clone(),
    ] {
        let err = open_private_file(&fifo, &mut options.clone()).unwrap_err();
        // Write-only without a reader: ENXIO from the kernel; otherwise the type check.
        assert!(
            err.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error())
                || err.to_string().contains("not a private file of this user"),
            "{err}"
        );
    }
    assert!(write_private_file(&fifo, b"x").is_err());
}

#[test]
fn a_directory_is_not_a_private_file() {
    let (_d, tmp) = tmp();
    let err = open_private_file(&tmp, OpenOptions::new().read(true)).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
    assert!(
        err.to_string().contains("not a private file of this user"),
        "{err}"
    );
}

#[test]
fn open_directories_are_refused_or_narrowed_as_asked() {
    let (_d, tmp) = tmp();
    let dir = tmp.join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let refused = ensure_private_dir(&dir).unwrap_err();
    assert!(
        matches!(refused, PrivateDirError::OpenMode { mode: 0o755, .. }),
        "{refused:?}"
    );
    assert_eq!(mode(&dir), 0o755, "a refusal changes nothing");
    ensure_private_dir_with(&dir, OpenDir::Restrict).unwrap();
    assert_eq!(mode(&dir), 0o700);
    // Narrowing never goes through a symlink to someone's directory.
    let link = tmp.join("link");
    let target = tmp.join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let refused = ensure_private_dir_with(&link, OpenDir::Restrict).unwrap_err();
    assert!(
        matches!(refused, PrivateDirError::NotADirectory { .. }),
        "{refused:?}"
    );
    assert_eq!(mode(&target), 0o755);
    // New directories, parents included, are 0700.
    let deep = tmp.join("a/b/c");
    ensure_private_dir_with(&deep, OpenDir::Restrict).unwrap();
    assert_eq!((mode(&tmp.join("a")), mode(&deep)), (0o700, 0o700));
}

#[test]
fn a_new_directory_never_reuses_a_name() {
    let (_d, tmp) = tmp();
    let fresh = tmp.join("fresh");
    create_private_dir(&fresh).unwrap();
    assert_eq!(mode(&fresh), 0o700);
    let err = create_private_dir(&fresh).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    let link = tmp.join("link");
    std::os::unix::fs::symlink(&fresh, &link).unwrap();
    let err = create_private_dir(&link).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
}
