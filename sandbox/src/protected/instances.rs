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
use std::path::{Path, PathBuf};

use crate::private_fs::{self, OpenDir};

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

/// `/etc/passwd`'s text: the one place it is read, so that one derivation of the protected set
/// reads it once (counted in tests: [`reads`]).
pub(crate) fn passwd_text() -> Option<String> {
    #[cfg(test)]
    reads::record(Path::new("/etc/passwd"));
    // Lossily: one line that is no UTF-8 (a Latin-1 GECOS, `Jos\xe9`) made the file unread,
    // and with it every account's home and registry — every other gateway's state dir was
    // readable (red team 47b B11). Its own line's fields may come out altered; the others not.
    crate::look::read("/etc/passwd")
        .ok()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// The home `/etc/passwd` gives this process's uid, when it is a directory.
fn account_home() -> Option<PathBuf> {
    passwd_text()
        .and_then(|passwd| passwd_home(&passwd, euid()))
        .filter(|home| crate::look::is_dir(home))
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

/// The home `/etc/passwd` gives the account `name` (its first entry, as `getpwnam`).
pub(crate) fn named_account_home(name: &str) -> Option<String> {
    let passwd = passwd_text()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[0] == name).then(|| fields[5].to_string())
    })
}

/// Every registry file a gateway reads: under each of `homes`, under every absolute home
/// `/etc/passwd` names (whatever its depth: `/srv1` too), and every per-account registry in
/// the system temp dir. Whether each exists or is readable is the reader's business.
pub fn registry_files(homes: &[PathBuf]) -> Vec<PathBuf> {
    registry_files_with(homes, passwd_text().as_deref())
}

/// [`registry_files`] with `/etc/passwd`'s text given (read once by the caller for its homes).
pub(crate) fn registry_files_with(homes: &[PathBuf], passwd: Option<&str>) -> Vec<PathBuf> {
    registry_files_in(homes, passwd, Path::new(FALLBACK_PARENT))
}

/// What [`registry_files`] derives its list from — `/etc/passwd` and the per-account registries'
/// parent — each by device, inode, mtime and ctime (a change to a file, or an entry added to or
/// removed from a directory, moves its ctime, which nobody can set back): equal sources, the same
/// list, so a caller re-derives it only when they differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySources([Option<[i64; 6]>; 2]);

/// The current [`RegistrySources`]; take them before deriving the list, so that a change during
/// the derivation shows at the next comparison.
pub fn registry_sources() -> RegistrySources {
    use std::os::unix::fs::MetadataExt;
    let stamp = |path: &str| {
        crate::look::metadata(path).ok().map(|m| {
            [
                m.dev() as i64,
                m.ino() as i64,
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ]
        })
    };
    RegistrySources([stamp("/etc/passwd"), stamp(FALLBACK_PARENT)])
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
    if let Ok(entries) = crate::look::read_dir(parent) {
        out.extend(
            entries
                .flatten()
                // One per account (red team 26 B3: any account could make thousands, each read
                // by every broker before every tool call): a real directory owned by the uid
                // its name gives.
                .filter(|e| {
                    use std::os::unix::fs::MetadataExt;
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    let uid = name
                        .strip_prefix(FALLBACK_PREFIX)
                        .and_then(|uid| uid.parse::<u32>().ok());
                    uid.is_some_and(|uid| {
                        crate::look::symlink_metadata(e.path())
                            .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid)
                    })
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
///
/// The gateway's own `$HOME` is listed with it (`home <path>` on the next line, which older
/// readers skip): a gateway of the same account started with another `$HOME` protects this
/// one's home as an account's (red team 43a B5).
pub fn register(state_dir: &Path) -> std::io::Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .and_then(|h| crate::look::canonicalize(h).ok());
    register_in(
        account_home(),
        &fallback_registry(euid()),
        state_dir,
        home.as_deref(),
    )
}

/// [`register`] with the account's home (if any) and its fallback registry given.
fn register_in(
    home: Option<PathBuf>,
    fallback: &Path,
    state_dir: &Path,
    gateway_home: Option<&Path>,
) -> std::io::Result<PathBuf> {
    let at_home = home.map(|home| {
        let path = registry_path(&home);
        register_at(&path, state_dir, gateway_home).map(|()| path)
    });
    let home_err = match at_home {
        Some(Ok(path)) => return Ok(path),
        Some(Err(err)) => Some(err),
        None => None,
    };
    let listed = fallback
        .parent()
        .map_or(Ok(()), own_private_dir)
        .and_then(|()| register_at(fallback, state_dir, gateway_home));
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
    match private_fs::create_private_dir(dir) {
        Ok(()) => return Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    if private_fs::check_private_dir(dir).is_err() {
        return Err(std::io::Error::other(
            "it is not this account's private directory (another account may have created it); \
             remove it, or give the account a writable home",
        ));
    }
    Ok(())
}

/// [`register`] in the registry file `path`.
fn register_at(path: &Path, state_dir: &Path, gateway_home: Option<&Path>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        private_fs::ensure_private_dir_with(dir, OpenDir::Restrict)
            .map_err(|err| std::io::Error::other(err.to_string()))?;
    }
    let mut file = private_fs::open_private_file(
        path,
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let own = crate::look::canonicalize(state_dir)?;
    let mut entries: Vec<(PathBuf, Option<PathBuf>)> = parse_entries(&text)
        .into_iter()
        .filter(|(p, _)| *p != own && crate::look::is_dir(p))
        .collect();
    entries.push((own, gateway_home.map(Path::to_path_buf)));
    let keep = entries.len().saturating_sub(MAX_ENTRIES);
    let mut out = String::new();
    for (entry, home) in &entries[keep..] {
        out.push_str(&entry.to_string_lossy());
        out.push('\n');
        if let Some(home) = home {
            out.push_str(HOME_PREFIX);
            out.push_str(&home.to_string_lossy());
            out.push('\n');
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(out.as_bytes())?;
    file.sync_all()
}

/// The line after a state dir's naming its gateway's `$HOME`.
const HOME_PREFIX: &str = "home ";

/// Most bytes a registry holds: [`MAX_ENTRIES`] lines of 256 bytes (a state dir's path is far
/// shorter; red team 26 B3 filled 4 MiB registries to make every broker hold them).
const MAX_REGISTRY_BYTES: u64 = MAX_ENTRIES as u64 * 512;

/// A registry file as some account left it: its text and its owner's uid. Any account can make
/// one (in its home, or its dir in `/tmp`), so it is read without trusting it: `None` when it is
/// absent, unreadable, a symlink, not a regular file (a FIFO would block every gateway's start
/// and every broker's tool call forever, a device would never end), hard-linked, larger than
/// any registry,
/// or owned by another account than the directory holding it (a symlinked directory of one
/// account pointing into another's files). Never blocks.
pub fn read_registry(path: &Path) -> Option<(String, u32)> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    #[cfg(test)]
    reads::record(path);
    crate::look::answers(path).ok()?;
    #[allow(clippy::disallowed_methods)] // looked at through the gate just above
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    // One link: a gateway writes its registry in place, never links it (one file linked into
    // many registry dirs was read many times).
    if !meta.is_file() || meta.nlink() != 1 || meta.len() > MAX_REGISTRY_BYTES {
        return None;
    }
    let dir_owner = crate::look::symlink_metadata(path.parent()?).ok()?.uid();
    if dir_owner != meta.uid() {
        return None;
    }
    // Bytes, read lossily: one line that is no UTF-8 hid every entry (red team 47b B12).
    let mut bytes = Vec::new();
    (&file)
        .take(MAX_REGISTRY_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    (bytes.len() as u64 <= MAX_REGISTRY_BYTES).then_some((text, meta.uid()))
}

/// The state dirs a registry's text lists (absolute paths, anything else ignored), each with
/// the `$HOME` its gateway gave on the line after it.
fn parse_entries(text: &str) -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut out: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.contains('\0')) {
        if line.starts_with('/') {
            if out.len() == MAX_ENTRIES {
                break;
            }
            out.push((PathBuf::from(line), None));
        } else if let Some(home) = line.strip_prefix(HOME_PREFIX)
            && home.starts_with('/')
            && let Some((_, slot @ None)) = out.last_mut()
        {
            *slot = Some(PathBuf::from(home));
        }
    }
    out
}

/// Every state dir listed in the registries ([`registry_files`] of `homes`) that this process
/// can read, other than `own_state_dir`: other gateways' private state.
pub fn other_state_dirs(homes: &[PathBuf], own_state_dir: &Path) -> Vec<PathBuf> {
    read_registries(&registry_files(homes), own_state_dir).state_dirs
}

/// One read of a list of registry files: what each held and the state dirs they list, both
/// from that same read (a caller comparing the digests later acts on what it compared).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryRead {
    /// Each registry file and a digest of its text (`None`: absent, or not to be trusted, see
    /// [`read_registry`]); the texts themselves are not kept (red team 26 B3).
    pub digests: Vec<(PathBuf, Option<[u8; 32]>)>,
    /// The state dirs they list, other than the reader's own.
    pub state_dirs: Vec<PathBuf>,
    /// The `$HOME`s the gateways of those state dirs run with (and the reader's own, as
    /// listed): each an account's home, whatever `/etc/passwd` says (red team 43a B5).
    pub homes: Vec<PathBuf>,
}

/// Read each of `registries` once (see [`read_registry`]): its digest, and the state dirs it
/// lists other than `own_state_dir`.
pub fn read_registries(registries: &[PathBuf], own_state_dir: &Path) -> RegistryRead {
    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    let own =
        crate::look::canonicalize(own_state_dir).unwrap_or_else(|_| own_state_dir.to_path_buf());
    let mut read = RegistryRead::default();
    for registry in registries {
        let Some((text, owner)) = read_registry(registry) else {
            read.digests.push((registry.clone(), None));
            continue;
        };
        read.digests
            .push((registry.clone(), Some(sha2::Sha256::digest(&text).into())));
        // A registry speaks only for its own account's directories (red team 24 B6: any account
        // can make a registry in /tmp, and a listed path is refused to every session): an entry
        // counts when the directory exists and belongs to the registry's owner, as a gateway's
        // state dir does. One naming someone else's directory could only block, never protect.
        let owned = |p: &Path| {
            crate::look::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == owner)
        };
        for (state_dir, home) in parse_entries(&text) {
            if !owned(&state_dir) {
                continue;
            }
            // A home counts as a state dir does: a directory of the registry's owner (never
            // `/`, which no account owns alone).
            read.homes
                .extend(home.filter(|home| home.parent().is_some() && owned(home)));
            if state_dir != own && state_dir != own_state_dir {
                read.state_dirs.push(state_dir);
            }
        }
    }
    read.state_dirs.sort();
    read.state_dirs.dedup();
    read.homes.sort();
    read.homes.dedup();
    read
}

/// Every home of this process's account: its `$HOME`, the home `/etc/passwd` gives its uid,
/// and the `$HOME` of each of its gateways the registries list (red team 43a B5, B6): its
/// start-up files, tools and programs are in any of them.
pub fn own_homes() -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut homes = primary_homes();
    let uid = euid();
    let registered = registered_homes(&homes)
        .into_iter()
        .filter(|home| crate::look::metadata(home).is_ok_and(|m| m.uid() == uid));
    homes.extend(registered);
    let mut out: Vec<PathBuf> = Vec::new();
    for home in homes {
        let real = crate::look::canonicalize(&home).unwrap_or(home);
        if !out.contains(&real) && real.parent().is_some() {
            out.push(real);
        }
    }
    out
}

/// The homes the account's terminals surely read (canonical): this process's `$HOME` and the
/// account's home in the passwd file.
pub fn primary_homes() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    homes.extend(account_home());
    let mut out: Vec<PathBuf> = Vec::new();
    for home in homes {
        let real = crate::look::canonicalize(&home).unwrap_or(home);
        if !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

/// The `$HOME`s of the gateways the registries of `homes` list ([`RegistryRead::homes`]).
pub fn registered_homes(homes: &[PathBuf]) -> Vec<PathBuf> {
    read_registries(&registry_files(homes), Path::new("")).homes
}

/// What this thread read of the files a derivation reads once (`/etc/passwd`, each registry),
/// in order: tests count them.
#[cfg(test)]
pub(crate) mod reads {
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};

    thread_local!(static READS: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) });

    pub(crate) fn record(path: &Path) {
        READS.with(|r| r.borrow_mut().push(path.to_path_buf()));
    }

    /// What was read since the last call.
    pub(crate) fn take() -> Vec<PathBuf> {
        READS.with(|r| std::mem::take(&mut *r.borrow_mut()))
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
