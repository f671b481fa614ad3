//! Unit tests of the one rule set: the catalogue refused by the read policy and present in the
//! command masks, mount-table aliases, install locations, the command runtime area.

use super::*;
use crate::path_policy::{PathPolicy, PathRefusal};
use crate::private_fs::{PrivateDirError, ensure_private_dir};
use common::outcome::OutcomeCode;

pub(super) fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, root)
}

#[test]
fn the_red_team_examples_are_in_the_catalogue() {
    let home = Path::new("/home/u");
    let paths = catalogue_paths(home);
    for wanted in [
        "/home/u/.claude/.credentials.json",
        "/home/u/.claude.json",
        "/home/u/.cloudflared",
        "/home/u/.config/ngrok",
        "/home/u/.codex/auth.json",
        "/home/u/.gemini/oauth_creds.json",
        "/home/u/.pgpass",
        "/home/u/.my.cnf",
        "/home/u/.vault-token",
        "/home/u/.bash_history",
        "/home/u/.zsh_history",
        "/home/u/.kube",
        "/home/u/.docker",
        "/home/u/.npmrc",
        "/home/u/.git-credentials",
        "/home/u/.config/gh",
        "/home/u/Library/Keychains",
        "/etc/ssl/private",
        "/etc/letsencrypt",
        "/etc/shadow",
        "/etc/cloudflared",
    ] {
        assert!(paths.contains(&PathBuf::from(wanted)), "{wanted} missing");
    }
    // Every category is used and every entry is a clean relative or absolute path.
    for entry in CATALOGUE {
        assert!(
            !entry.path.is_empty() && !entry.path.contains(".."),
            "{entry:?}"
        );
        match entry.anchor {
            Anchor::Home => assert!(!entry.path.starts_with('/'), "{entry:?}"),
            Anchor::Root => assert!(entry.path.starts_with('/'), "{entry:?}"),
        }
    }
}

#[test]
fn every_catalogue_entry_is_refused_by_read_and_masked_for_commands() {
    let (_dir, root) = tmp();
    let home = root.join("home");
    let state = root.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![]);
    let masks = crate::masked_paths(&home, &state, &[]);
    for entry in CATALOGUE {
        let path = match entry.anchor {
            Anchor::Home => home.join(entry.path),
            Anchor::Root => PathBuf::from(entry.path),
        };
        // Read refuses it and anything below it, by name.
        let err = policy.check(&path.join("x")).unwrap_err();
        assert!(
            matches!(err, PathRefusal::Protected { .. }),
            "{path:?}: {err:?}"
        );
        assert_eq!(err.code(), OutcomeCode::NotPermitted);
        // The sandboxes get the same entry.
        assert!(masks.contains(&path), "{path:?} not masked");
    }
    // The state dir and the command runtime area too.
    assert!(masks.contains(&state));
    assert!(masks.contains(&command_runtime_area(&state)));
    assert!(policy.is_protected(&command_runtime_area(&state).join("abc/x")));
}

/// One derivation of the set reads `/etc/passwd` once and each registry once, for the masks and
/// for the read policy alike (both derived other gateways' entries a second time, and the
/// registries' list a third); a refresh after a registration reads each registry once too.
#[test]
fn a_derivation_reads_passwd_and_each_registry_once() {
    use instances::reads;
    let (_dir, root) = tmp();
    let (home, own, theirs, later) = (
        root.join("home"),
        root.join("own"),
        root.join("theirs"),
        root.join("later"),
    );
    let registry = instances::registry_path(&home);
    for dir in [
        &own,
        &theirs,
        &later,
        &registry.parent().unwrap().to_path_buf(),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&registry, format!("{}\n", theirs.display())).unwrap();
    let passwd = Path::new("/etc/passwd");
    let once = |what: &str, reads: Vec<PathBuf>, passwd_reads: std::ops::RangeInclusive<usize>| {
        let count = |path: &Path| reads.iter().filter(|r| *r == path).count();
        assert!(passwd_reads.contains(&count(passwd)), "{what}: {reads:?}");
        assert_eq!(count(&registry), 1, "{what}: {reads:?}");
        for read in &reads {
            assert!(
                read == passwd || count(read) == 1,
                "{what}: {read:?} in {reads:?}"
            );
        }
    };
    reads::take();
    let masks = crate::masked_paths(&home, &own, &[]);
    assert!(masks.contains(&theirs), "{masks:?}");
    once("masks", reads::take(), 1..=1);
    let policy = PathPolicy::new(home.clone(), own.clone(), vec![]);
    assert!(policy.is_protected(&theirs.join("token")));
    once("read policy", reads::take(), 1..=1);
    let text = format!("{}\n{}\n", theirs.display(), later.display());
    std::fs::write(&registry, text).unwrap();
    policy.refresh_instances();
    assert!(policy.is_protected(&later.join("token")));
    // `/etc/passwd` again only if another test changed `/tmp` meanwhile (the list is re-derived).
    once("refresh", reads::take(), 0..=1);
}

#[test]
fn host_keys_are_a_pattern_for_read_and_files_for_the_masks() {
    assert!(is_host_key_name(b"ssh_host_ed25519_key"));
    assert!(is_host_key_name(b"ssh_host_rsa_key-cert"));
    assert!(!is_host_key_name(b"ssh_host_ed25519_key.pub"));
    assert!(!is_host_key_name(b"ssh_config"));
    // What exists now is masked for commands.
    let (_dir, root) = tmp();
    let masks = crate::masked_paths(&root.join("h"), &root.join("s"), &[]);
    for key in host_key_files() {
        assert!(masks.contains(&key), "{key:?}");
    }
}

fn mount(device: &str, root: &Path, at: &Path) -> String {
    format!(
        "1 0 {device} {} {} rw - ext4 /dev/x rw",
        root.display(),
        at.display()
    )
}

#[test]
fn bind_mounts_of_protected_objects_are_aliases() {
    let (_dir, tmp) = tmp();
    let home = tmp.join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let state = tmp.join("state");
    std::fs::create_dir_all(state.join("run")).unwrap();
    let table = [
        mount("8:1", Path::new("/"), Path::new("/")),
        // ~/.ssh bound elsewhere, a directory above it bound elsewhere, a subdirectory of the
        // state dir bound elsewhere, and an unrelated bind.
        mount("8:1", &ssh, &tmp.join("mnt/keys")),
        mount("8:1", &home, &tmp.join("mnt/home")),
        mount("8:1", &state.join("run"), &tmp.join("mnt/run")),
        mount("8:1", &tmp.join("other"), &tmp.join("mnt/other")),
        // Another device at the same inside path is not an alias.
        mount("9:9", &ssh, &tmp.join("mnt/elsewhere")),
    ]
    .join("\n");
    let mounts = parse_mountinfo(table.as_bytes());
    assert_eq!(mounts.len(), 6);
    let aliases = aliases_in(&mounts, &[ssh.clone(), state.clone()]);
    assert!(aliases.contains(&tmp.join("mnt/keys")), "{aliases:?}");
    assert!(aliases.contains(&tmp.join("mnt/home/.ssh")), "{aliases:?}");
    assert!(aliases.contains(&tmp.join("mnt/run")), "{aliases:?}");
    assert!(!aliases.contains(&tmp.join("mnt/other")), "{aliases:?}");
    assert!(!aliases.contains(&tmp.join("mnt/elsewhere")), "{aliases:?}");
    assert!(
        !aliases.contains(&ssh),
        "the entry itself is not its own alias"
    );
}

#[test]
fn mountinfo_escapes_are_decoded() {
    let mounts = parse_mountinfo(b"5 1 8:1 /a\\040b /mnt/c\\011d rw - ext4 /dev/x rw");
    assert_eq!(mounts[0].root, PathBuf::from("/a b"));
    assert_eq!(mounts[0].mount_point, PathBuf::from("/mnt/c\td"));
    assert_eq!((mounts[0].id, mounts[0].fs_type.as_str()), (5, "ext4"));
}

#[test]
fn mountinfo_ids_and_types_come_past_the_optional_fields() {
    let mounts = parse_mountinfo(
        b"22 27 0:21 / /proc rw,relatime shared:5 master:1 - proc proc rw\n\
         41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw",
    );
    assert_eq!(mounts.len(), 2);
    assert_eq!((mounts[0].id, mounts[0].fs_type.as_str()), (22, "proc"));
    assert_eq!(mounts[0].mount_point, PathBuf::from("/proc"));
    assert_eq!((mounts[1].id, mounts[1].fs_type.as_str()), (41, "cgroup2"));
}

/// Red team 47b B1-B3: a mount point whose name is no UTF-8 (`caf\xe9`, any account's FUSE
/// mount) made the table unreadable as text, and every reader saw no mounts: a mirror of
/// `~/.ssh` was no alias, every command was refused. Its own line is read as bytes, and the
/// other lines with it.
#[test]
fn a_mount_point_that_is_no_utf8_is_read_with_the_rest() {
    use std::os::unix::ffi::OsStrExt;
    let table = b"22 27 0:21 / /proc rw - proc proc rw\n\
        30 1 0:40 / /tmp/caf\xe9 rw - tmpfs none rw\n\
        31 1 0:41 / /mnt/mir rw - fuse /home/u/.ssh rw,user_id=0";
    let mounts = parse_mountinfo(table);
    assert_eq!(mounts.len(), 3);
    assert_eq!(
        mounts[1].mount_point.as_os_str().as_bytes(),
        b"/tmp/caf\xe9"
    );
    assert_eq!(mounts[2].source, PathBuf::from("/home/u/.ssh"));
}

#[test]
fn install_locations_cover_the_real_files_and_the_package() {
    let (_dir, tmp) = tmp();
    let package = tmp.join("lib/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("package.json"), "{}").unwrap();
    std::fs::write(package.join("cli.js"), "").unwrap();
    let bin = tmp.join("lib/node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(package.join("cli.js"), bin.join("claude")).unwrap();
    let gateway_dir = tmp.join("opt/ngw/bin");
    std::fs::create_dir_all(&gateway_dir).unwrap();
    std::fs::write(gateway_dir.join("gateway"), "").unwrap();
    let got = install_locations(&gateway_dir.join("gateway"), &bin.join("claude"));
    for wanted in [
        gateway_dir.join("gateway"),
        gateway_dir.clone(),
        bin.join("claude"),
        package.join("cli.js"),
        package.clone(),
        // A new sibling package or the link's directory would run inside Claude Code too.
        tmp.join("lib/node_modules"),
        bin.clone(),
    ] {
        assert!(got.contains(&wanted), "{wanted:?} not in {got:?}");
    }
    assert!(
        !got.contains(&tmp.join("lib")),
        "not the install prefix: {got:?}"
    );
    // The write policy refuses them; the read policy does not.
    let policy =
        PathPolicy::new(tmp.join("home"), tmp.join("state"), vec![]).with_write_protected(got);
    assert!(policy.is_write_protected(&package.join("cli.js")));
    assert!(policy.is_write_protected(&gateway_dir.join("gateway")));
    assert!(!policy.is_write_protected(&tmp.join("lib/other.js")));
    assert!(policy.check(&package.join("cli.js")).is_ok());
}

#[test]
fn the_command_runtime_area_is_stable_and_private() {
    let a = command_runtime_area(Path::new("/srv/state"));
    assert_eq!(a, command_runtime_area(Path::new("/srv/state")));
    assert_ne!(a, command_runtime_area(Path::new("/srv/state2")));
    assert!(a.starts_with("/tmp"));
    assert!(!a.to_string_lossy().contains("srv"), "names no state path");
    let (_dir, tmp) = tmp();
    let open = tmp.join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let refused = ensure_private_dir(&open).unwrap_err();
    assert!(matches!(
        refused,
        PrivateDirError::OpenMode { mode: 0o755, .. }
    ));
    assert!(
        refused
            .to_string()
            .contains("not a private directory of this user")
    );
    // A symlink to a private directory of ours is still not the directory itself.
    let target = tmp.join("target");
    ensure_private_dir(&target).unwrap();
    let link = tmp.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let refused = ensure_private_dir(&link).unwrap_err();
    assert!(
        matches!(refused, PrivateDirError::NotADirectory { .. }),
        "{refused:?}"
    );
    let file = tmp.join("file");
    std::fs::write(&file, "x").unwrap();
    let refused = ensure_private_dir(&file).unwrap_err();
    assert!(matches!(refused, PrivateDirError::Io { .. }), "{refused:?}");
    let private = tmp.join("private/deeper");
    ensure_private_dir(&private).unwrap();
    let mode = std::fs::metadata(&private).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn only_the_own_worktree_is_bound_back() {
    let (_dir, tmp) = tmp();
    let state = tmp.join("state");
    let own = state.join("worktrees/ns_a");
    let other = state.join("worktrees/ns_b");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::create_dir_all(state.join("auth")).unwrap();
    let masked = vec![state.clone()];
    assert_eq!(
        crate::visible_under_masks(&masked, &own, Some(&own)),
        vec![own.clone()]
    );
    assert!(crate::visible_under_masks(&masked, &other, Some(&own)).is_empty());
    assert!(crate::visible_under_masks(&masked, &state.join("auth"), None).is_empty());
    assert!(crate::visible_under_masks(&masked, &state.join("auth"), Some(&own)).is_empty());
}

#[test]
fn start_up_files_of_the_owner_are_never_written_but_stay_readable() {
    let (_dir, tmp) = tmp();
    let home = tmp.join("home");
    let got = write_protected(
        Path::new("/nonexistent/gateway"),
        Path::new("/nonexistent/claude"),
        &home,
    );
    for wanted in [
        ".bashrc",
        ".profile",
        ".zshenv",
        ".config/autostart",
        ".local/bin",
        ".gitconfig",
    ] {
        assert!(
            got.paths.contains(&home.join(wanted)),
            "{wanted} not in {got:?}"
        );
    }
    let policy = PathPolicy::new(home.clone(), tmp.join("state"), vec![]).with_write_protected(got);
    assert!(policy.is_write_protected(&home.join(".bashrc")));
    assert!(policy.is_write_protected(&home.join(".local/bin/git")));
    assert!(policy.is_write_protected(&home.join(".config/systemd/user/x.service")));
    assert!(!policy.is_write_protected(&home.join("project/.bashrc")));
    assert!(
        policy.check(&home.join(".bashrc")).is_ok(),
        "reading stays allowed"
    );
}

#[test]
fn unfit_write_roots_are_named() {
    let (_dir, tmp) = tmp();
    let home = tmp.join("home/u");
    std::fs::create_dir_all(home.join("project")).unwrap();
    for (root, reason) in [
        (Path::new("/").to_path_buf(), "whole file system"),
        (home.clone(), "home directory"),
        (tmp.join("home"), "home directory"),
        (tmp.clone(), "home directory"),
        (PathBuf::from("/etc"), "system directory"),
        (PathBuf::from("/usr/local/bin"), "system directory"),
        (PathBuf::from("/var/lib/x"), "system directory"),
        (home.join(".local"), "hidden directory"),
        (home.join(".pyenv/versions/3"), "hidden directory"),
        (PathBuf::from("/var/tmp"), "shared by every account"),
    ] {
        let got = unfit_write_root(&root, &home);
        assert!(got.is_some_and(|r| r.contains(reason)), "{root:?}: {got:?}");
    }
    assert_eq!(unfit_write_root(&home.join("project"), &home), None);
    assert_eq!(unfit_write_root(&tmp.join("elsewhere"), &home), None);
}

#[test]
fn other_accounts_homes_come_from_passwd_without_the_owner() {
    // /root exists on every Linux host here and is an account's home in /etc/passwd.
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let homes = other_homes(Path::new("/nonexistent-owner"));
    for line in passwd.lines() {
        let Some(home) = line.split(':').nth(5).map(PathBuf::from) else {
            continue;
        };
        if home == Path::new("/root") && home.is_dir() {
            assert!(homes.contains(&home), "{homes:?}");
        }
        if home == Path::new("/") || home == Path::new("/bin") {
            assert!(!homes.contains(&home), "{homes:?}");
        }
    }
    assert!(!other_homes(Path::new("/root")).contains(&PathBuf::from("/root")));
    // Their credential stores join the set the read policy and the masks use.
    if homes.contains(&PathBuf::from("/root")) {
        let set = protected_set(
            Path::new("/nonexistent-owner"),
            Path::new("/nonexistent-state"),
            &[],
        )
        .paths;
        assert!(set.contains(&PathBuf::from("/root/.ssh")), "{set:?}");
    }
}

#[test]
fn a_directory_of_another_account_is_no_write_root() {
    use std::os::unix::fs::MetadataExt;
    let (_dir, tmp) = tmp();
    let theirs = tmp.join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        // As root, hand the directory to another account (nobody) and it is refused.
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 65534);
        let got = unfit_write_root(&theirs, &tmp.join("home"));
        assert!(
            got.is_some_and(|r| r.contains("another account")),
            "{got:?}"
        );
    } else {
        // Elsewhere, a directory of root's (`/opt` or `/srv` when present) is refused.
        for dir in ["/opt", "/srv"] {
            let dir = Path::new(dir);
            if std::fs::metadata(dir).is_ok_and(|m| m.uid() == 0) {
                let got = unfit_write_root(dir, &tmp.join("home"));
                assert!(
                    got.is_some_and(|r| r.contains("another account")),
                    "{got:?}"
                );
            }
        }
    }
    assert_eq!(unfit_write_root(&tmp.join("mine"), &tmp.join("home")), None);
}

/// Red team 26 B5: a link the owner made from a start-up place into a project (`systemctl
/// --user link`, an autostart entry) makes its target a start-up file too; a link another
/// account made in its own home to the owner's file does not (no account protects another's
/// files through links of its own).
#[test]
fn the_targets_of_links_in_start_up_places_are_never_written() {
    use std::os::unix::fs::symlink;
    let (_dir, tmp) = tmp();
    let home = tmp.join("home");
    let project = tmp.join("project");
    std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
    std::fs::create_dir_all(home.join(".config/autostart")).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    for name in ["x.service", "a.desktop", "ordinary.rs", "theirs.txt"] {
        std::fs::write(project.join(name), "x").unwrap();
    }
    symlink(
        project.join("x.service"),
        home.join(".config/systemd/user/x.service"),
    )
    .unwrap();
    symlink(
        project.join("a.desktop"),
        home.join(".config/autostart/a.desktop"),
    )
    .unwrap();
    let foreign = home.join(".config/autostart/theirs.desktop");
    symlink(project.join("theirs.txt"), &foreign).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::lchown(&foreign, Some(4747), None).unwrap();
    }
    // Dangling (red team 27 B2): to a file a build makes, in a dir that does not exist yet, and
    // a start-up file that is itself a link to a missing file.
    symlink(
        project.join("build/gen.desktop"),
        home.join(".config/autostart/gen.desktop"),
    )
    .unwrap();
    symlink("../project/zshenv", home.join(".zshenv")).unwrap();
    let got = write_protected(
        Path::new("/nonexistent/gateway"),
        Path::new("/nonexistent/claude"),
        &home,
    );
    let policy = PathPolicy::new(home.clone(), tmp.join("state"), vec![]).with_write_protected(got);
    // Targets of links inside start-up directories: their own auto-run class, naming the link.
    use crate::path_policy::WriteProtection::{InstallLocation, StartupLinkTarget};
    let link = |name: &str| StartupLinkTarget {
        link: format!("~/{name}"),
    };
    let targets = [
        ("build/gen.desktop", link(".config/autostart/gen.desktop")),
        ("build/gen.desktop/x", link(".config/autostart/gen.desktop")),
        ("x.service", link(".config/systemd/user/x.service")),
        ("a.desktop", link(".config/autostart/a.desktop")),
    ];
    for (target, why) in &targets {
        assert_eq!(
            policy.write_protection(&project.join(target)),
            Some(why.clone())
        );
    }
    // By identity too: the existing target under another name (a hard link's object).
    let st = std::fs::metadata(project.join("a.desktop")).unwrap();
    use std::os::unix::fs::MetadataExt;
    let by_identity = policy.write_protection_identity(st.dev(), st.ino());
    assert_eq!(by_identity, Some(link(".config/autostart/a.desktop")));
    // A start-up file that is itself a link is the start-up file: its target stays in that class.
    assert_eq!(
        policy.write_protection(&project.join("zshenv")),
        Some(InstallLocation)
    );
    assert!(policy.is_write_protected(&home.join(".bash_aliases")));
    assert!(policy.is_write_protected(&home.join(".config/user-tmpfiles.d/x.conf")));
    assert!(!policy.is_write_protected(&project.join("ordinary.rs")));
    assert_eq!(
        policy.is_write_protected(&project.join("theirs.txt")),
        !root,
        "a link of another account protects nothing of this one's"
    );
    // The owner's opt-in for the class opens the links' targets, and nothing else.
    let allowed = crate::protected::autorun::AutorunAllowed::parse("startup_links");
    let policy = policy.with_autorun_allowed(allowed.unwrap());
    for (target, _) in &targets {
        assert_eq!(policy.write_protection(&project.join(target)), None);
    }
    assert_eq!(policy.write_protection_identity(st.dev(), st.ino()), None);
    assert_eq!(
        policy.write_protection(&project.join("zshenv")),
        Some(InstallLocation)
    );
    assert!(policy.is_write_protected(&home.join(".config/autostart/a.desktop")));
}

/// Red team 43a B5: a gateway of the account started with another `$HOME` lists it; to every
/// other gateway (whatever its own `$HOME`) that directory is an account's home: its credential
/// stores protected for reads and commands, its start-up files for writes, and a `direct_write`
/// root at it refused — at start, and for a policy built before it registered (from its next
/// call).
#[test]
fn another_gateway_s_home_is_an_account_s_home() {
    let (_dir, root) = tmp();
    let (home, own, theirs, their_home) = (
        root.join("home"),
        root.join("own"),
        root.join("theirs"),
        root.join("their-home"),
    );
    for dir in [&home, &own, &theirs, &their_home.join(".ssh")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let key = their_home.join(".ssh/id_ed25519");
    std::fs::write(&key, "secret").unwrap();
    let policy_before = PathPolicy::new(home.clone(), own.clone(), vec![]);
    assert!(!policy_before.is_protected(&key), "the control");
    let registry = instances::registry_path(&home);
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    std::fs::write(
        &registry,
        format!("{}\nhome {}\n", theirs.display(), their_home.display()),
    )
    .unwrap();
    let policy = PathPolicy::new(home.clone(), own.clone(), vec![]);
    assert!(policy.is_protected(&key));
    let masks = crate::masked_paths(&home, &own, &[]);
    assert!(masks.iter().any(|m| key.starts_with(m)), "{masks:?}");
    assert!(
        !policy_before.is_write_protected(&their_home.join(".gitconfig")),
        "the control"
    );
    policy_before.refresh_instances();
    assert!(policy_before.is_protected(&key));
    // Its start-up files too, for a policy built before it registered (red team 44a C8-B1).
    for rel in [".gitconfig", ".local/bin/x", ".config/autostart/x.desktop"] {
        assert!(
            policy_before.is_write_protected(&their_home.join(rel)),
            "{rel}"
        );
    }
    assert!(!policy_before.is_write_protected(&their_home.join("notes.txt")));
    let writes = policy.with_write_protected(write_protected(
        Path::new("/nonexistent/gateway"),
        Path::new("/nonexistent/claude"),
        &home,
    ));
    assert!(writes.is_write_protected(&their_home.join(".bashrc")));
    assert!(writes.is_write_protected(&their_home.join(".ssh/authorized_keys")));
    assert!(!writes.is_write_protected(&home.join("project/x")));
    assert!(unfit_write_root(&their_home, &home).is_some_and(|why| why.contains("home directory")));
}

/// Red team 43b B6: a FUSE passthrough (bindfs) of the state dir, of a home holding protected
/// entries, of `/proc`, or of such a mirror, shows them under a FUSE type no `fstatfs` check
/// recognises: each such place is an alias, `/proc`'s mirror whole. FUSE mounts whose source is
/// no directory (sshfs's `user@host:`, `/dev/fuse`) and mirrors of unrelated directories are not.
/// Red team 45: a mirror of `/` is protected whole, not path by path (F4: the set had exploded);
/// another account's mirror without `allow_other` is skipped (nothing of ours can enter it);
/// a protected path that is itself a mirror makes its source an alias (F5); a mirror whose
/// root does not list what its claimed source lists is protected whole (F1).
#[test]
fn fuse_passthrough_mirrors_of_protected_objects_are_aliases() {
    let (_dir, tmp) = tmp();
    let (home, state, other) = (tmp.join("home"), tmp.join("state"), tmp.join("other"));
    let ssh = home.join(".ssh");
    let m = |rel: &str| tmp.join("mnt").join(rel);
    let keys = tmp.join("keysrc");
    // The mirrors' roots list what their sources list, as a passthrough's do.
    for dir in [
        &ssh,
        &state.join("auth"),
        &other,
        &m("fst/auth"),
        &m("fhome/.ssh"),
        &m("f2/.ssh"),
        &m("lying"),
        &keys,
        &m("froot"),
        &m("fother"),
        &m("gone/auth"),
        &tmp.join("e"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let uid = rustix::process::geteuid().as_raw();
    let fuse = |id: u32, source: &str, at: &Path, options: &str| {
        format!(
            "{id} 1 0:{id} / {} rw - fuse {source} {options}",
            at.display()
        )
    };
    let own = format!("rw,user_id={uid}");
    let table = [
        "1 0 8:1 / / rw - ext4 /dev/x rw".to_string(),
        "2 1 0:21 / /proc rw - proc proc rw".to_string(),
        fuse(10, &state.to_string_lossy(), &m("fst"), &own),
        fuse(11, &home.to_string_lossy(), &m("fhome"), &own),
        fuse(12, "/proc", &m("fproc"), &own),
        fuse(13, &m("fhome").to_string_lossy(), &m("f2"), &own),
        fuse(14, "u@h:/x", &m("ssh"), &own),
        fuse(15, "/dev/fuse", &m("dev"), &own),
        fuse(16, &other.to_string_lossy(), &m("fother"), &own),
        fuse(17, "/", &m("froot"), &own),
        // Another account's, without allow_other: nothing of ours enters it.
        fuse(18, "/", &m("theirs"), "rw,user_id=4747"),
        // Its source claim lists nothing of what it shows (its root is empty, the state dir
        // is not).
        fuse(19, &state.to_string_lossy(), &m("lying"), &own),
        // ~/.ssh itself is a mirror of where the keys really live.
        fuse(20, &keys.to_string_lossy(), &ssh, &own),
        // Red team 46 C5-B1: its source string names an empty directory (the bind it mirrored
        // was unmounted below it) while its root shows the state dir.
        fuse(21, &tmp.join("e").to_string_lossy(), &m("gone"), &own),
    ]
    .join("\n");
    let mounts = parse_mountinfo(table.as_bytes());
    assert_eq!(mounts[2].source, state);
    let aliases = aliases_in(&mounts, &[ssh.clone(), state.clone()]);
    for want in [
        m("fst"),
        m("fhome/.ssh"),
        m("fproc"),
        m("f2/.ssh"),
        m("froot"),
        m("lying"),
        m("gone"),
        keys.clone(),
    ] {
        assert!(aliases.contains(&want), "{want:?} in {aliases:?}");
    }
    for not in [m("ssh"), m("dev"), m("fother"), m("fhome"), m("theirs")] {
        assert!(!aliases.contains(&not), "{not:?} in {aliases:?}");
    }
    // Bounded: many mirrors of `/` cost one alias each.
    let many: Vec<String> = (100..140)
        .map(|id| {
            fuse(
                id,
                "/",
                &m(&format!("r{id}")),
                "rw,allow_other,user_id=4747",
            )
        })
        .collect();
    let mounts = parse_mountinfo([table, many.join("\n")].join("\n").as_bytes());
    let aliases = aliases_in(&mounts, &[ssh.clone(), state.clone()]);
    assert!(aliases.len() < 200, "{}", aliases.len());
}

/// Red team 46: a mirror of `/` listed like `/` and mapped protected object by object put paths
/// through itself (`/m/m/proc`) into the set; bindfs, single-threaded, deadlocks on a lookup
/// through itself, and every broker of the host hung at its start. A mirror of a tree holding a
/// kernel pseudo file system, and one of a tree holding the mirror itself, are whole: nothing
/// under them is named, whatever their roots list.
#[test]
fn mirrors_holding_proc_or_themselves_are_whole_and_never_looked_into() {
    let (_dir, tmp) = tmp();
    let home = tmp.join("home");
    let ssh = home.join(".ssh");
    let (root_mirror, self_mirror) = (tmp.join("mnt/root"), home.join("mnt/self"));
    // Both roots list what their sources list (the listing check passes).
    for entry in std::fs::read_dir("/").unwrap().filter_map(Result::ok) {
        std::fs::create_dir_all(root_mirror.join(entry.file_name())).unwrap();
    }
    for dir in [&ssh, &self_mirror.join(".ssh"), &self_mirror.join("mnt")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let uid = rustix::process::geteuid().as_raw();
    let table = [
        "1 0 8:1 / / rw - ext4 /dev/x rw".to_string(),
        "2 1 0:21 / /proc rw - proc proc rw".to_string(),
        format!(
            "10 1 0:10 / {} rw - fuse / rw,user_id={uid}",
            root_mirror.display()
        ),
        format!(
            "11 1 0:11 / {} rw - fuse {} rw,user_id={uid}",
            self_mirror.display(),
            home.display()
        ),
    ]
    .join("\n");
    let mounts = parse_mountinfo(table.as_bytes());
    let aliases = aliases_in(&mounts, std::slice::from_ref(&ssh));
    assert!(aliases.contains(&root_mirror), "{aliases:?}");
    assert!(aliases.contains(&self_mirror), "{aliases:?}");
    for alias in &aliases {
        let inside = |mirror: &Path| alias.starts_with(mirror) && alias != mirror;
        assert!(
            !inside(&root_mirror) && !inside(&self_mirror),
            "named inside a whole mirror: {alias:?} in {aliases:?}"
        );
    }
    // The next refresh reads the set with the mirrors in it: a whole mirror is not mapped
    // back to its source (`/` had become a mask: no command of the host kept its layer).
    let again = aliases_in(
        &mounts,
        &[ssh.clone(), root_mirror.clone(), self_mirror.clone()],
    );
    for source in [Path::new("/"), home.as_path()] {
        assert!(
            !again.contains(&source.to_path_buf()),
            "{source:?} in {again:?}"
        );
    }
}

/// Run `look` on a thread in a mount namespace of its own where a FUSE mount that no daemon
/// ever answers sits at `at` (source string `source`); its answer, or a failure after 20 s (the
/// look hung). Closing the device afterwards ends the connection: looks still blocked return.
pub(crate) fn with_hung_fuse<T: Send + 'static>(
    source: &str,
    at: &Path,
    look: impl FnOnce() -> T + Send + 'static,
) -> T {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    let uid = rustix::process::geteuid().as_raw();
    let (done, finished) = std::sync::mpsc::channel();
    let (source, at) = (source.to_owned(), at.to_path_buf());
    std::thread::spawn(move || {
        let fuse = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .expect("this test needs /dev/fuse");
        // SAFETY: plain syscalls on this thread only: a new mount namespace (this thread's and
        // the threads it starts), made private, then a FUSE mount whose daemon (`fuse`, never
        // read) answers nothing. All strings are NUL-terminated CStrings.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare");
            let root = CString::new("/").unwrap();
            let private = libc::MS_REC | libc::MS_PRIVATE;
            let null = std::ptr::null();
            assert_eq!(
                libc::mount(null, root.as_ptr(), null, private, null.cast()),
                0
            );
            let src = CString::new(source).unwrap();
            let at = CString::new(at.to_str().unwrap()).unwrap();
            let kind = CString::new("fuse.hung").unwrap();
            let data = CString::new(format!(
                "fd={},rootmode=40000,user_id={uid},group_id=0",
                fuse.as_raw_fd()
            ))
            .unwrap();
            let made = libc::mount(
                src.as_ptr(),
                at.as_ptr(),
                kind.as_ptr(),
                0,
                data.as_ptr().cast(),
            );
            assert_eq!(
                made,
                0,
                "mounting the hung FUSE: {}",
                std::io::Error::last_os_error()
            );
        }
        let _ = done.send(look());
        drop(fuse);
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the look hung on the FUSE mount")
}

/// Red team 47a: a FUSE mirror whose daemon hangs (stopped, its remote gone) blocked the
/// gateway's start and every session's next tool call for good, on the look at its root. A
/// FUSE mount no daemon ever answers stands in for it here: the derivation comes back within
/// the wait, the mirror protected whole.
#[test]
fn a_hung_fuse_mirror_is_whole_and_stops_nothing() {
    let (_dir, tmp) = tmp();
    let (source, mirror) = (tmp.join("src"), tmp.join("mnt"));
    for dir in [&source, &mirror] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let uid = rustix::process::geteuid().as_raw();
    let table = format!(
        "1 0 8:1 / / rw - ext4 /dev/x rw\n90 1 0:90 / {} rw - fuse.hung {} rw,user_id={uid}",
        mirror.display(),
        source.display()
    );
    let protected = tmp.join("home/.ssh");
    let aliases = with_hung_fuse(source.to_str().unwrap(), &mirror, move || {
        aliases_in(&parse_mountinfo(table.as_bytes()), &[protected])
    });
    assert_eq!(aliases, vec![mirror.clone()]);
    // Known hung: protected by its path alone, never looked at again (a `stat` blocks too).
    assert!(is_hung_mount(&mirror));
    assert!(is_hung_mount(&mirror.join("below")));
    assert!(!is_hung_mount(&tmp));
}

/// Red team 48 (variant of 47a): any FUSE mount that hangs, not only a mirror (sshfs whose
/// server is gone, a stalled gvfs in `/run/user/<uid>`), blocked a broker's start: the runner's
/// read rules list the directories holding masks and looked at every entry. It is judged at the
/// derivation, protected by its path, and the read rules step around it.
#[test]
fn a_hung_fuse_mount_is_protected_and_the_read_rules_step_around_it() {
    let (_dir, tmp) = tmp();
    let remote = tmp.join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    std::fs::create_dir_all(tmp.join("kept")).unwrap();
    let uid = rustix::process::geteuid().as_raw();
    let table = format!(
        "1 0 8:1 / / rw - ext4 /dev/x rw\n91 1 0:91 / {} rw - fuse.sshfs host:/srv rw,user_id={uid}",
        remote.display(),
    );
    std::fs::create_dir_all(tmp.join(".ssh")).unwrap();
    let masked = vec![tmp.join(".ssh")];
    let (aliases, roots) = with_hung_fuse("host:/srv", &remote, move || {
        let aliases = aliases_in(&parse_mountinfo(table.as_bytes()), &masked);
        (aliases, crate::linux::read_roots_excluding(&masked))
    });
    assert_eq!(aliases, vec![remote.clone()]);
    assert!(is_hung_mount(&remote));
    assert!(roots.contains(&tmp.join("kept")), "{roots:?}");
    assert!(!roots.iter().any(|r| r.starts_with(&remote)), "{roots:?}");
}

/// Red team 49: a hung FUSE mount anywhere a reader's name leads (on `PATH`, inside the
/// project, reached through a symlink, sourced by `~/.bashrc`) hung the gateway's or a
/// session's start: every look at the owner's files by the readers goes through one gate
/// (`crate::look`) that never asks a hung mount, and the write root's checks take a hung mount
/// for an alias of the root only when its claimed source can show the root.
#[test]
fn no_reader_asks_a_hung_fuse_mount_and_it_refuses_only_the_roots_it_may_show() {
    let (_dir, tmp) = tmp();
    let (proj, home) = (tmp.join("proj"), tmp.join("home"));
    let inner = proj.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(inner.join("tool.sh"), proj.join("link")).unwrap();
    std::os::unix::fs::symlink(proj.join("link"), tmp.join("chain")).unwrap();
    let at = inner.clone();
    let (path, looks, fit, on_it, scanned) = with_hung_fuse("host:/srv", &inner, move || {
        mounts::probe_fuse_mounts(&read_mount_table().unwrap());
        let path =
            crate::command::command_path(Some(&format!("{}:/usr/bin", at.display())), |_| false);
        let looks = [
            crate::look::is_file(at.join("tool.sh")),
            crate::look::metadata(proj.join("link")).is_ok(),
            crate::look::canonicalize(tmp.join("chain")).is_ok(),
            crate::look::read_to_string(proj.join("inner/../link")).is_ok(),
            crate::look::symlink_metadata(proj.join("link")).is_ok(),
        ];
        let fit = unfit_write_root(&proj, &home);
        let on_it = unfit_write_root(&at, &home);
        let root = rustix::fs::open(
            &proj,
            rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let scanned = autorun::symlinks::Symlinks::scan(
            std::os::fd::AsFd::as_fd(&root),
            &proj,
            None,
            &|_, _| false,
        )
        .is_ok();
        (path, looks, fit, on_it, scanned)
    });
    assert_eq!(path, "/usr/bin", "the hung PATH entry is left out");
    // Only the link itself (not followed) is looked at.
    assert_eq!(looks, [false, false, false, false, true]);
    assert_eq!(
        fit, None,
        "a hung sshfs inside the project shows no directory of it"
    );
    assert!(
        on_it.is_some_and(|why| why.contains("does not answer")),
        "{on_it:?}"
    );
    assert!(
        scanned,
        "the project's symlink scan steps around the hung mount"
    );
}

/// The other side: a hung passthrough whose claimed source holds the root may show the root's
/// files anywhere (here on a directory of its own), so `direct_write` refuses it, naming why.
#[test]
fn a_hung_mirror_of_the_write_root_refuses_it_naming_the_mount() {
    let (_dir, tmp) = tmp();
    let (src, home, at) = (tmp.join("src"), tmp.join("home"), tmp.join("mirror"));
    for dir in [&src.join("proj"), &home, &at] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let source = src.display().to_string();
    let proj = src.join("proj");
    let outside = tmp.join("home").join("..").join("other");
    std::fs::create_dir_all(&outside).unwrap();
    let (mirrored, unrelated) = with_hung_fuse(&source, &at, move || {
        mounts::probe_fuse_mounts(&read_mount_table().unwrap());
        (
            unfit_write_root(&proj, &home),
            unfit_write_root(&tmp.join("other"), &home),
        )
    });
    assert!(
        mirrored.is_some_and(|why| why.contains("mirrored by a FUSE mount that does not answer")),
        "{mirrored:?}"
    );
    assert_eq!(unrelated, None);
}
