//! The registry of gateway state dirs on this host: each gateway adds its own at start to
//! `<home>/.local/state/native-gateway/instances` of its account — the home `/etc/passwd` gives
//! its uid, whatever `$HOME` says — (one absolute path a line, 0600 in 0700 dirs), and every
//! gateway protects every state dir listed in any account's registry it can read (every passwd
//! home, and its own `$HOME`) — so no session of one gateway reads another gateway's token, keys, database or
//! transcripts, whether a model asks for it through ChatGPT or a DeepSeek sub-session.

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

/// The home whose registry a gateway of this account lists itself in: the account's home from
/// `/etc/passwd` (by uid, issue 23: a gateway started with another `$HOME` must still be seen by
/// the account's other gateways, which read every account's passwd home), else `fallback` (an
/// account `/etc/passwd` does not list, or whose home does not exist).
pub fn registry_home(fallback: &Path) -> PathBuf {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| passwd_home(&passwd, uid))
        .filter(|home| home.is_dir())
        .unwrap_or_else(|| fallback.to_path_buf())
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

/// Add `state_dir` (canonical) to the account's registry ([`registry_home`], `home` as the
/// fallback), dropping entries whose directory no longer exists. Serialised with other gateways
/// by an exclusive lock on the file. Returns the registry's path.
pub fn register(home: &Path, state_dir: &Path) -> std::io::Result<PathBuf> {
    let path = registry_path(&registry_home(home));
    register_at(&path, state_dir)?;
    Ok(path)
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

/// Every state dir listed in the registries under `homes` that this process can read, other
/// than `own_state_dir`: other gateways' private state.
pub fn other_state_dirs(homes: &[PathBuf], own_state_dir: &Path) -> Vec<PathBuf> {
    let own = std::fs::canonicalize(own_state_dir).unwrap_or_else(|_| own_state_dir.to_path_buf());
    let mut out = Vec::new();
    for home in homes {
        let Ok(text) = std::fs::read_to_string(registry_path(home)) else {
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

    #[test]
    fn registration_keeps_live_dirs_once_and_others_see_them() {
        let home = tempfile::tempdir().unwrap();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        register_at(&registry_path(home.path()), a.path()).unwrap();
        register_at(&registry_path(home.path()), b.path()).unwrap();
        register_at(&registry_path(home.path()), a.path()).unwrap();
        let homes = vec![home.path().to_path_buf()];
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(
            other_state_dirs(&homes, a.path()),
            vec![canonical(b.path())]
        );
        assert_eq!(
            other_state_dirs(&homes, b.path()),
            vec![canonical(a.path())]
        );
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
