//! The registry of gateway state dirs on this host: each gateway adds its own at start to
//! `<home>/.local/state/native-gateway/instances` of its account — the home `/etc/passwd` gives
//! its uid, whatever `$HOME` says — or, for an account without a usable home (none listed, not
//! there, not writable: red team 23 B5), to the account's own private dir in the system temp dir,
//! `/tmp/.native-gateway-<uid>/instances` (0700, its own, never followed through a symlink; one
//! held by another account is refused). One absolute path a line, 0600 in 0700 dirs. A gateway
//! that can list itself nowhere does not start. Every gateway protects every state dir listed in
//! any registry it can read — under every home `/etc/passwd` names (at any depth), its own
//! `$HOME`, and every per-uid registry in `/tmp` — so no session of one gateway reads another
//! gateway's token, keys, database or transcripts, whether a model asks for it through ChatGPT
//! or a DeepSeek sub-session.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where an account's registry lives, under its home.
pub const REGISTRY: &str = ".local/state/native-gateway/instances";
/// Most entries kept (stale ones are dropped at every registration).
const MAX_ENTRIES: usize = 1024;

/// The registry file under `home`.
pub fn registry_path(home: &Path) -> PathBuf {
    home.join(REGISTRY)
}

/// The system temp dir's per-account registry dirs are named this, then the uid.
pub const FALLBACK_PREFIX: &str = ".native-gateway-";
/// Where the per-account registry dirs live: fixed, never `$TMPDIR` (which differs per process).
const FALLBACK_PARENT: &str = "/tmp";

/// The per-account registry of uid `uid`, for an account without a usable home.
pub fn fallback_registry(uid: u32) -> PathBuf {
    Path::new(FALLBACK_PARENT)
        .join(format!("{FALLBACK_PREFIX}{uid}"))
        .join("instances")
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The home `/etc/passwd` gives this process's uid, when it is a directory.
fn account_home() -> Option<PathBuf> {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| passwd_home(&passwd, euid()))
        .filter(|home| home.is_dir())
}

/// The home `passwd` (the file's text) gives `uid`.
fn passwd_home(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[2].parse::<u32>().ok() == Some(uid))
            .then(|| PathBuf::from(fields[5]))
            .filter(|home| home.is_absolute())
    })
}

/// Every registry file a gateway reads: under each of `homes`, under every absolute home
/// `/etc/passwd` names (whatever its depth: `/srv1` too), and every per-account registry in
/// the system temp dir. Whether each exists or is readable is the reader's business.
pub fn registry_files(homes: &[PathBuf]) -> Vec<PathBuf> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok();
    registry_files_in(homes, passwd.as_deref(), Path::new(FALLBACK_PARENT))
}

/// [`registry_files`] with the passwd text and the per-account registries' parent given.
fn registry_files_in(homes: &[PathBuf], passwd: Option<&str>, parent: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = homes.iter().map(|h| registry_path(h)).collect();
    out.extend(
        passwd
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split(':').nth(5))
            .map(Path::new)
            .filter(|home| home.is_absolute() && *home != Path::new("/"))
            .map(registry_path),
    );
    if let Ok(entries) = std::fs::read_dir(parent) {
        out.extend(
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.strip_prefix(FALLBACK_PREFIX)
                        .is_some_and(|uid| uid.parse::<u32>().is_ok())
                })
                .map(|e| e.path().join("instances")),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// List `state_dir` (canonical) in this account's registry: under the home `/etc/passwd` gives
/// its uid, else (no such home, or it cannot be written there) in its per-account registry in
/// the system temp dir. Drops entries whose directory no longer exists; serialised with other
/// gateways by an exclusive lock on the file. Returns the registry's path; `Err` when it could
/// be listed nowhere (the gateway must then not start: no other gateway would protect it).
pub fn register(state_dir: &Path) -> std::io::Result<PathBuf> {
    register_in(account_home(), &fallback_registry(euid()), state_dir)
}

/// [`register`] with the account's home (if any) and its fallback registry given.
fn register_in(
    home: Option<PathBuf>,
    fallback: &Path,
    state_dir: &Path,
) -> std::io::Result<PathBuf> {
    let at_home = home.map(|home| {
        let path = registry_path(&home);
        register_at(&path, state_dir).map(|()| path)
    });
    let home_err = match at_home {
        Some(Ok(path)) => return Ok(path),
        Some(Err(err)) => Some(err),
        None => None,
    };
    let listed = fallback
        .parent()
        .map_or(Ok(()), own_private_dir)
        .and_then(|()| register_at(fallback, state_dir));
    match (listed, home_err) {
        (Ok(()), _) => Ok(fallback.to_path_buf()),
        (Err(err), Some(home_err)) => Err(std::io::Error::other(format!(
            "in the home's registry: {home_err}; in {}: {err}",
            fallback.display()
        ))),
        (Err(err), None) => Err(std::io::Error::other(format!(
            "{}: {err}",
            fallback.display()
        ))),
    }
}

/// Create `dir` 0700, or check that the one there is this account's own private directory
/// (not a symlink, owned by it, no access for others): one another account created first is
/// refused, never used.
fn own_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() || meta.uid() != euid() || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(
            "it is not this account's private directory (another account may have created it); \
             remove it, or give the account a writable home",
        ));
    }
    Ok(())
}

/// [`register`] in the registry file `path`.
fn register_at(path: &Path, state_dir: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let own = std::fs::canonicalize(state_dir)?;
    let mut entries: Vec<PathBuf> = parse(&text)
        .into_iter()
        .filter(|p| *p != own && p.is_dir())
        .collect();
    entries.push(own);
    let keep = entries.len().saturating_sub(MAX_ENTRIES);
    let mut out = String::new();
    for entry in &entries[keep..] {
        out.push_str(&entry.to_string_lossy());
        out.push('\n');
    }
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(out.as_bytes())?;
    file.sync_all()
}

/// The absolute paths a registry's text lists (anything else is ignored).
fn parse(text: &str) -> Vec<PathBuf> {
    text.lines()
        .map(str::trim)
        .filter(|line| line.starts_with('/') && !line.contains('\0'))
        .map(PathBuf::from)
        .take(MAX_ENTRIES)
        .collect()
}

/// Every state dir listed in the registries ([`registry_files`] of `homes`) that this process
/// can read, other than `own_state_dir`: other gateways' private state.
pub fn other_state_dirs(homes: &[PathBuf], own_state_dir: &Path) -> Vec<PathBuf> {
    listed_in(&registry_files(homes), own_state_dir)
}

/// The state dirs the registry files `registries` list, other than `own_state_dir`.
fn listed_in(registries: &[PathBuf], own_state_dir: &Path) -> Vec<PathBuf> {
    let own = std::fs::canonicalize(own_state_dir).unwrap_or_else(|_| own_state_dir.to_path_buf());
    let mut out = Vec::new();
    for registry in registries {
        let Ok(text) = std::fs::read_to_string(registry) else {
            continue;
        };
        out.extend(
            parse(&text)
                .into_iter()
                .filter(|p| *p != own && p != own_state_dir),
        );
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let fallback = tmp
            .path()
            .join(format!("{FALLBACK_PREFIX}4242"))
            .join("instances");
        // No home: the fallback, created 0700.
        assert_eq!(
            register_in(None, &fallback, state.path()).unwrap(),
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
        let path = register_in(Some(home.path().into()), &fallback, state.path()).unwrap();
        assert_eq!(path, fallback);
        // Every reader finds it, whatever its home list.
        let files = registry_files_in(&[], None, tmp.path());
        assert_eq!(files, vec![fallback.clone()]);
        assert_eq!(listed_in(&files, Path::new("/elsewhere")), vec![canonical]);
        // Held by another account, or open to others, or a symlink: refused, never used.
        use std::os::unix::fs::PermissionsExt;
        let squatted = tmp.path().join(format!("{FALLBACK_PREFIX}4343"));
        std::fs::create_dir(&squatted).unwrap();
        std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = register_in(None, &squatted.join("instances"), state.path()).unwrap_err();
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
            assert!(register_in(None, &foreign.join("instances"), state.path()).is_err());
        }
    }

    /// Red team 23 B5: registries under homes at any depth (`/srv1`) are read, and names that
    /// are not a per-account registry dir are not.
    #[test]
    fn every_passwd_home_and_per_account_registry_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        for name in [".native-gateway-7", ".native-gateway-x", "native-gateway-8"] {
            std::fs::create_dir(tmp.path().join(name)).unwrap();
        }
        let passwd = "root:x:0:0::/root:/bin/sh\nsvc:x:5:5::/srv1:/bin/sh\n\
                      top:x:6:6::/:/bin/sh\nrel:x:7:7::rel:/bin/sh\n";
        let files = registry_files_in(&[PathBuf::from("/home/me")], Some(passwd), tmp.path());
        let want: Vec<PathBuf> = vec![
            registry_path(Path::new("/home/me")),
            registry_path(Path::new("/root")),
            registry_path(Path::new("/srv1")),
            tmp.path().join(".native-gateway-7/instances"),
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
        register_at(&registry_path(home.path()), a.path()).unwrap();
        register_at(&registry_path(home.path()), b.path()).unwrap();
        register_at(&registry_path(home.path()), a.path()).unwrap();
        let registries = vec![registry_path(home.path())];
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(listed_in(&registries, a.path()), vec![canonical(b.path())]);
        assert_eq!(listed_in(&registries, b.path()), vec![canonical(a.path())]);
        // A gone dir is dropped at the next registration; garbage lines are ignored.
        let gone = canonical(b.path());
        drop(b);
        let path = registry_path(home.path());
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("relative/path\n\n");
        std::fs::write(&path, text).unwrap();
        register_at(&registry_path(home.path()), a.path()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&*gone.to_string_lossy()), "{text}");
        assert!(!text.contains("relative"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
