//! Tests of the instance registry: where an account lists its gateways, and what readers find.

use super::*;
use std::os::unix::fs::DirBuilderExt;

#[test]
fn the_registry_belongs_to_the_account_not_to_home() {
    let passwd = "root:x:0:0:root:/root:/bin/sh\nsvc:x:999:999::relative:/bin/false\n\
                  alice:x:1000:1000:Alice:/home/alice:/bin/bash\n";
    assert_eq!(
        passwd_home(passwd, 1000),
        Some(PathBuf::from("/home/alice"))
    );
    assert_eq!(passwd_home(passwd, 0), Some(PathBuf::from("/root")));
    assert_eq!(passwd_home(passwd, 999), None);
    assert_eq!(passwd_home(passwd, 4242), None);
}

/// Red team 23 B5: an account without a usable home lists its gateways in its own private
/// dir in the system temp dir, which every gateway reads; one another account holds is
/// refused, and a gateway that can list itself nowhere gets an error (it does not start).
#[test]
fn an_account_without_a_usable_home_registers_in_its_own_temp_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let canonical = std::fs::canonicalize(state.path()).unwrap();
    // Named by this account's uid: readers count only a dir owned by the uid its name gives.
    let fallback = tmp
        .path()
        .join(format!("{FALLBACK_PREFIX}{}", euid()))
        .join("instances");
    // No home: the fallback, created 0700.
    assert_eq!(
        register_in(None, &fallback, state.path(), None).unwrap(),
        fallback
    );
    let dir_mode = std::fs::metadata(fallback.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    // A home that cannot be written (a file where its state dir would go): the fallback.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".local"), "not a dir").unwrap();
    let path = register_in(Some(home.path().into()), &fallback, state.path(), None).unwrap();
    assert_eq!(path, fallback);
    // Every reader finds it, whatever its home list.
    let files = registry_files_in(&[], None, tmp.path());
    assert_eq!(files, vec![fallback.clone()]);
    assert_eq!(
        read_registries(&files, Path::new("/elsewhere")).state_dirs,
        vec![canonical]
    );
    // Held by another account, or open to others, or a symlink: refused, never used.
    use std::os::unix::fs::PermissionsExt;
    let squatted = tmp.path().join(format!("{FALLBACK_PREFIX}4343"));
    std::fs::create_dir(&squatted).unwrap();
    std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = register_in(None, &squatted.join("instances"), state.path(), None).unwrap_err();
    assert!(
        err.to_string()
            .contains("not this account's private directory"),
        "{err}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let link = tmp.path().join(format!("{FALLBACK_PREFIX}4444"));
    std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
    let err = register_in(
        Some(home.path().into()),
        &link.join("instances"),
        state.path(),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("in the home's registry: "), "{err}");
    assert!(
        err.contains("not this account's private directory"),
        "{err}"
    );
    assert!(!elsewhere.path().join("instances").exists());
    if euid() == 0 {
        let foreign = tmp.path().join(format!("{FALLBACK_PREFIX}4545"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&foreign)
            .unwrap();
        std::os::unix::fs::chown(&foreign, Some(4545), None).unwrap();
        assert!(register_in(None, &foreign.join("instances"), state.path(), None).is_err());
    }
}

/// Red team 23 B5: registries under homes at any depth (`/srv1`) are read, and names that
/// are not a per-account registry dir are not.
#[test]
fn every_passwd_home_and_per_account_registry_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let me = euid();
    // One named by another uid than its owner's does not count (red team 26 B3: one account
    // made thousands): at most one per account.
    let other = me.wrapping_add(1);
    for name in [
        format!(".native-gateway-{me}"),
        format!(".native-gateway-{other}"),
        ".native-gateway-x".to_string(),
        "native-gateway-8".to_string(),
    ] {
        std::fs::create_dir(tmp.path().join(name)).unwrap();
    }
    let passwd = "root:x:0:0::/root:/bin/sh\nsvc:x:5:5::/srv1:/bin/sh\n\
                  top:x:6:6::/:/bin/sh\nrel:x:7:7::rel:/bin/sh\n";
    let files = registry_files_in(&[PathBuf::from("/home/me")], Some(passwd), tmp.path());
    let want: Vec<PathBuf> = vec![
        registry_path(Path::new("/home/me")),
        registry_path(Path::new("/root")),
        registry_path(Path::new("/srv1")),
        tmp.path().join(format!(".native-gateway-{me}/instances")),
    ];
    let mut want = want;
    want.sort();
    assert_eq!(files, want);
}

#[test]
fn registration_keeps_live_dirs_once_and_others_see_them() {
    let home = tempfile::tempdir().unwrap();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    register_at(&registry_path(home.path()), a.path(), None).unwrap();
    register_at(&registry_path(home.path()), b.path(), None).unwrap();
    register_at(&registry_path(home.path()), a.path(), None).unwrap();
    let registries = vec![registry_path(home.path())];
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert_eq!(
        read_registries(&registries, a.path()).state_dirs,
        vec![canonical(b.path())]
    );
    assert_eq!(
        read_registries(&registries, b.path()).state_dirs,
        vec![canonical(a.path())]
    );
    // A gone dir is dropped at the next registration; garbage lines are ignored.
    let gone = canonical(b.path());
    drop(b);
    let path = registry_path(home.path());
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("relative/path\n\n");
    std::fs::write(&path, text).unwrap();
    register_at(&registry_path(home.path()), a.path(), None).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(&*gone.to_string_lossy()), "{text}");
    assert!(!text.contains("relative"), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// Red team 24 B6: an entry naming a directory the registry's owner does not own (another
/// account's project, `/usr/bin`) is ignored: a registry could otherwise make every gateway
/// refuse any path. Absent entries are ignored too.
#[test]
fn a_registry_speaks_only_for_its_owners_directories() {
    let home = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let registry = registry_path(home.path());
    register_at(&registry, theirs.path(), None).unwrap();
    // A directory of another account: `/usr/bin` (root's) for an ordinary account; for root,
    // one given away.
    let given = tempfile::tempdir().unwrap();
    let foreign = if euid() == 0 {
        std::os::unix::fs::chown(given.path(), Some(4747), None).unwrap();
        std::fs::canonicalize(given.path()).unwrap()
    } else {
        PathBuf::from("/usr/bin")
    };
    let mut text = std::fs::read_to_string(&registry).unwrap();
    text.push_str(&format!("{}\n/no/such/dir\n", foreign.display()));
    std::fs::write(&registry, text).unwrap();
    let listed = read_registries(std::slice::from_ref(&registry), own.path()).state_dirs;
    assert_eq!(listed, vec![std::fs::canonicalize(theirs.path()).unwrap()]);
    if euid() == 0 {
        // The same registry (and its dir) owned by that other account: only its directory
        // counts.
        std::os::unix::fs::chown(&registry, Some(4747), None).unwrap();
        std::os::unix::fs::chown(registry.parent().unwrap(), Some(4747), None).unwrap();
        assert_eq!(
            read_registries(&[registry], own.path()).state_dirs,
            vec![foreign]
        );
    }
}

/// Any account can make a registry, so it is read without trusting it (red team 25): a FIFO (which
/// blocked every gateway's start and every broker's tool call), a symlink (to `/dev/zero`, or to
/// a file of another account listing that account's directories), a directory, a file larger
/// than any registry, or a file of another owner than its directory reads as no registry, at once.
#[test]
fn only_a_plain_file_of_its_directorys_owner_is_read_as_a_registry() {
    let home = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let registry = registry_path(home.path());
    register_at(&registry, theirs.path(), None).unwrap();
    let listed = vec![std::fs::canonicalize(theirs.path()).unwrap()];
    assert_eq!(
        read_registries(std::slice::from_ref(&registry), own.path()).state_dirs,
        listed
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let genuine = elsewhere.path().join("instances");
    std::fs::copy(&registry, &genuine).unwrap();
    let replace = |make: &dyn Fn(&Path)| {
        let _ = std::fs::remove_file(&registry).or_else(|_| std::fs::remove_dir(&registry));
        make(&registry);
        let started = std::time::Instant::now();
        assert_eq!(read_registry(&registry), None);
        assert!(
            read_registries(std::slice::from_ref(&registry), own.path())
                .state_dirs
                .is_empty()
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    };
    replace(&|p| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap()
    });
    replace(&|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap());
    replace(&|p| std::os::unix::fs::symlink(&genuine, p).unwrap());
    replace(&|p| std::fs::create_dir(p).unwrap());
    replace(&|p| {
        let line = format!("{}\n", theirs.path().display());
        let text = line.repeat(MAX_REGISTRY_BYTES as usize / line.len() + 1);
        std::fs::write(p, text).unwrap()
    });
    if euid() == 0 {
        replace(&|p| {
            std::fs::copy(&genuine, p).unwrap();
            std::os::unix::fs::chown(p, Some(4747), None).unwrap();
        });
    }
}

/// Red team 43a B5: a gateway lists its `$HOME` with its state dir; every reader takes it as an
/// account's home — kept with its state dir across registrations, dropped with it, never `/`
/// nor a directory the registry's owner does not own, and ignored by a reader of the old format
/// (lines not starting with `/`).
#[test]
fn a_registration_lists_its_gateway_s_home_and_readers_see_it() {
    let home = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let other_home = tempfile::tempdir().unwrap();
    let other_home = std::fs::canonicalize(other_home.path()).unwrap();
    let path = registry_path(home.path());
    register_at(&path, a.path(), Some(&other_home)).unwrap();
    register_at(&path, b.path(), Some(Path::new("/"))).unwrap();
    register_at(&path, c.path(), None).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("\nhome {}\n", other_home.display())),
        "{text}"
    );
    let read = read_registries(std::slice::from_ref(&path), c.path());
    assert_eq!(read.homes, vec![other_home.clone()]);
    assert_eq!(read.state_dirs.len(), 2, "{read:?}");
    // The old reader's view: only the state dirs.
    assert!(parse_entries(&text).iter().all(|(p, _)| p.is_dir()));
    // Re-registering another gateway keeps a's home with a.
    register_at(&path, c.path(), None).unwrap();
    let read = read_registries(std::slice::from_ref(&path), Path::new(""));
    assert_eq!(read.homes, vec![other_home.clone()]);
    // Its state dir gone, its home goes at the next registration.
    drop(a);
    register_at(&path, c.path(), None).unwrap();
    let read = read_registries(std::slice::from_ref(&path), Path::new(""));
    assert!(read.homes.is_empty(), "{read:?}");
    // A `home` line with no state dir before it, or after a garbage line, lists nothing.
    std::fs::write(
        &path,
        format!(
            "home {}\nrel\nhome {}\n",
            other_home.display(),
            other_home.display()
        ),
    )
    .unwrap();
    assert!(
        read_registries(std::slice::from_ref(&path), Path::new(""))
            .homes
            .is_empty()
    );
    if euid() == 0 {
        // A home the registry's owner does not own is not its gateway's.
        let given = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(given.path(), Some(4747), None).unwrap();
        let state = tempfile::tempdir().unwrap();
        register_at(&path, state.path(), Some(given.path())).unwrap();
        assert!(
            read_registries(std::slice::from_ref(&path), Path::new(""))
                .homes
                .is_empty()
        );
    }
}

/// Red team 47b B12: a registry line that is no UTF-8 (hand-edited, an older build) hid every
/// entry of the file; the others are read.
#[test]
fn a_line_that_is_no_utf8_hides_no_other_entry() {
    let home = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let registry = registry_path(home.path());
    register_at(&registry, theirs.path(), None).unwrap();
    let mut bytes = std::fs::read(&registry).unwrap();
    bytes.extend_from_slice(b"/opt/caf\xe9/state\n");
    std::fs::write(&registry, bytes).unwrap();
    let listed = read_registries(std::slice::from_ref(&registry), own.path()).state_dirs;
    assert_eq!(listed, vec![std::fs::canonicalize(theirs.path()).unwrap()]);
}
