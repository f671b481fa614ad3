//! The gateway's command runtime area: where every session's command scratch dirs and
//! copy-on-write layers live. In `/tmp` (a fixed base: the gateway and its brokers must agree,
//! whatever their `TMPDIR`, and a command's HOME and TMPDIR then reveal no state path), under an
//! unpredictable name made by the gateway at start (`mkdir`, which never follows or reuses what
//! is there, then checked by `lstat`: a real directory of ours, 0700), so no other account can
//! take the name beforehand; the state dir records it (`runtime-area`, 0600), which is how the
//! gateway's brokers and the host's other gateways (through the instance registry's state dirs)
//! learn where it is. The area records its state dir back (`.state-dir`), so a start can tell
//! its own leftover areas from others'. Older gateways used a predictable name
//! ([`legacy_runtime_area`]); it stays protected.
//!
//! The name is visible in `/tmp`, so once the area is gone (a `/tmp` cleaner) another account
//! can take it (RT29 B3). Nothing uses an area path unchecked: [`verified_area`] opens it without
//! following a symlink and checks it is a private directory of ours that names its state dir,
//! returning its `(dev, ino)`; the gateway checks that identity every second and, when the area is
//! gone or replaced, makes a new one under a fresh name ([`replace_runtime_area`], never the
//! squatted one), which its brokers find at their next command.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

use crate::private_fs::{check_private_dir, create_private_dir, replace_private_file};
use std::path::{Path, PathBuf};

/// The file in the state dir that names the area.
pub const POINTER: &str = "runtime-area";
/// The file in the area that names its state dir.
pub const MARKER: &str = ".state-dir";
/// Where areas are made.
const BASE: &str = "/tmp";
/// Every area's name starts with this, then the owner's uid.
const PREFIX: &str = "ngw-run-";
/// Longest pointer or marker read.
const MAX_RECORD: u64 = 4096;

fn uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The command runtime area of the gateway whose state dir is `state_dir`: the one its state
/// dir records, else (nothing recorded yet, an older gateway) [`legacy_runtime_area`].
pub fn command_runtime_area(state_dir: &Path) -> PathBuf {
    recorded(state_dir).unwrap_or_else(|| legacy_runtime_area(state_dir))
}

/// Every name the area of `state_dir` may have: the recorded one and the legacy one (what the
/// protected set holds).
pub fn runtime_area_names(state_dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![legacy_runtime_area(state_dir)];
    out.extend(recorded(state_dir));
    out
}

/// The name older gateways gave the area: `/tmp/ngw-run-<uid>-<hash of the state dir's path>`,
/// predictable, so another account could take it first; never created any more, still protected.
pub fn legacy_runtime_area(state_dir: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    // FNV-1a: stable across builds and processes.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in state_dir.as_os_str().as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    PathBuf::from(BASE).join(format!(
        "{PREFIX}{}-{:012x}",
        uid(),
        hash & 0xffff_ffff_ffff
    ))
}

/// The area `state_dir` records, if the record is well formed: one absolute path directly in
/// `/tmp` named like an area (anything else is ignored).
fn recorded(state_dir: &Path) -> Option<PathBuf> {
    recorded_in(Path::new(BASE), state_dir)
}

fn recorded_in(base: &Path, state_dir: &Path) -> Option<PathBuf> {
    parse_area(base, &read_small(&state_dir.join(POINTER))?)
}

fn parse_area(base: &Path, text: &str) -> Option<PathBuf> {
    let line = text.trim_end_matches('\n');
    let name = line.strip_prefix(base.to_str()?)?.strip_prefix('/')?;
    let well_formed = name.starts_with(PREFIX)
        && name.len() <= 64
        && name[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    well_formed.then(|| base.join(name))
}

/// A small regular file's text, never through a symlink.
fn read_small(path: &Path) -> Option<String> {
    crate::look::answers(path).ok()?;
    #[allow(clippy::disallowed_methods)] // looked at through the gate just above
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_RECORD).read_to_string(&mut text).ok()?;
    Some(text)
}

/// At gateway start: the area `state_dir` (canonical) records, if it is still a private
/// directory of ours that says it serves `state_dir`; otherwise a new one under an unpredictable
/// name, recorded in `state_dir`. A name someone else holds is never used, never an error: a new
/// name is drawn.
pub fn establish_runtime_area(state_dir: &Path) -> std::io::Result<PathBuf> {
    establish_in(Path::new(BASE), state_dir)
}

fn establish_in(base: &Path, state_dir: &Path) -> std::io::Result<PathBuf> {
    let marker = state_dir.to_string_lossy().into_owned();
    if let Some(area) = recorded_in(base, state_dir)
        && check_private_dir(&area).is_ok()
        && read_small(&area.join(MARKER)).is_some_and(|m| m == marker)
    {
        return Ok(area);
    }
    replace_in(base, state_dir)
}

/// While the gateway runs: the area it used is gone or is no longer the directory it made (RT29
/// B3). A new area under a fresh unpredictable name, recorded in `state_dir` (what was at the old
/// name is never followed, reused or written to).
pub fn replace_runtime_area(state_dir: &Path) -> std::io::Result<PathBuf> {
    replace_in(Path::new(BASE), state_dir)
}

fn replace_in(base: &Path, state_dir: &Path) -> std::io::Result<PathBuf> {
    let area = create_unpredictable(base)?;
    let marker = state_dir.to_string_lossy().into_owned();
    replace_private_file(&area.join(MARKER), marker.as_bytes())?;
    replace_private_file(
        &state_dir.join(POINTER),
        format!("{}\n", area.display()).as_bytes(),
    )?;
    Ok(area)
}

/// An area checked as it is now: its path and the directory's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedArea {
    pub path: PathBuf,
    /// `(st_dev, st_ino)` of the directory checked.
    pub id: (u64, u64),
}

/// Why an area path is not (or no longer) the area.
#[derive(Debug, thiserror::Error)]
pub enum AreaError {
    #[error("the state dir records no runtime area")]
    NotRecorded,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A symlink, another account's, open to others, or not a directory.
    #[error("{}: not a private directory of this user (owner {owner}, mode {mode:o})", path.display())]
    NotPrivate {
        path: PathBuf,
        owner: u32,
        mode: u32,
    },
    #[error("{}: it does not name this gateway's state dir", path.display())]
    NotThisGateways { path: PathBuf },
}

/// The area `state_dir` records now, checked by [`verify_area`].
pub fn verified_area(state_dir: &Path) -> Result<VerifiedArea, AreaError> {
    let area = recorded(state_dir).ok_or(AreaError::NotRecorded)?;
    verify_area(&area, state_dir)
}

/// Whether `area` is the runtime area of `state_dir`: opened without following a symlink, a
/// directory of ours open to no one else, whose marker (read through that descriptor, never
/// followed) names `state_dir`. Its identity, to compare with a later look.
pub fn verify_area(area: &Path, state_dir: &Path) -> Result<VerifiedArea, AreaError> {
    use rustix::fs::{Mode, OFlags};
    let io = |e: rustix::io::Errno| AreaError::Io {
        path: area.to_path_buf(),
        source: e.into(),
    };
    let dir = rustix::fs::open(
        area,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let dir = match dir {
        Ok(dir) => dir,
        // A symlink (ELOOP) or something else than a directory at the name.
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            let meta = crate::look::symlink_metadata(area).map_err(|source| AreaError::Io {
                path: area.to_path_buf(),
                source,
            })?;
            use std::os::unix::fs::MetadataExt;
            return Err(AreaError::NotPrivate {
                path: area.to_path_buf(),
                owner: meta.uid(),
                mode: meta.mode() & 0o7777,
            });
        }
        Err(e) => return Err(io(e)),
    };
    let stat = rustix::fs::fstat(&dir).map_err(io)?;
    let mode = (stat.st_mode as u32) & 0o7777;
    if stat.st_uid != uid() || mode & 0o077 != 0 {
        return Err(AreaError::NotPrivate {
            path: area.to_path_buf(),
            owner: stat.st_uid,
            mode,
        });
    }
    let marker = rustix::fs::openat(
        &dir,
        MARKER,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| AreaError::NotThisGateways {
        path: area.to_path_buf(),
    })?;
    let mut text = String::new();
    let read = std::fs::File::from(marker)
        .take(MAX_RECORD)
        .read_to_string(&mut text);
    if read.is_err() || Path::new(&text) != state_dir {
        return Err(AreaError::NotThisGateways {
            path: area.to_path_buf(),
        });
    }
    #[allow(clippy::unnecessary_cast)] // dev_t and ino_t are not u64 on every target
    let id = (stat.st_dev as u64, stat.st_ino as u64);
    Ok(VerifiedArea {
        path: area.to_path_buf(),
        id,
    })
}

/// The areas the given state dirs record now (each well formed, not checked further): what a
/// running broker adds to its protected set when an area is replaced.
pub fn recorded_areas(state_dirs: &[PathBuf]) -> Vec<PathBuf> {
    state_dirs.iter().filter_map(|s| recorded(s)).collect()
}

/// `mkdir` a new `ngw-run-<uid>-<random>` in `base` (fails on any existing name, symlinks
/// included: another name is drawn) and check what was made is ours and private.
fn create_unpredictable(base: &Path) -> std::io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..32 {
        let area = base.join(format!("{PREFIX}{}-{}", uid(), random_hex()?));
        match create_private_dir(&area) {
            Ok(()) => return Ok(area),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// 16 hex digits from the kernel's random source.
fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    crate::look::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Areas of this uid in `/tmp` that no gateway uses any more: named like an area of ours, a
/// private directory of ours, unchanged for two minutes, and either recording a state dir that is gone or no longer
/// recording this area, or (a legacy name) not the legacy name of any of `live_state_dirs` (every
/// state dir in the host's registries). Never `keep`.
pub fn orphan_areas(live_state_dirs: &[PathBuf], keep: &Path) -> Vec<PathBuf> {
    orphans_in(Path::new(BASE), live_state_dirs, keep, ORPHAN_MIN_AGE)
}

/// An area younger than this is never an orphan: another gateway may be making it (between its
/// `mkdir` and its records).
const ORPHAN_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(120);

fn older_than(path: &Path, age: std::time::Duration) -> bool {
    crate::look::symlink_metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|elapsed| elapsed >= age)
}

fn orphans_in(
    base: &Path,
    live_state_dirs: &[PathBuf],
    keep: &Path,
    min_age: std::time::Duration,
) -> Vec<PathBuf> {
    let ours = format!("{PREFIX}{}-", uid());
    let legacy: Vec<String> = live_state_dirs
        .iter()
        .filter_map(|s| {
            legacy_runtime_area(s)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .collect();
    let Ok(entries) = crate::look::read_dir(base) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let area = base.join(&name);
        if !name.starts_with(&ours)
            || area == keep
            || check_private_dir(&area).is_err()
            || !older_than(&area, min_age)
        {
            continue;
        }
        let orphan = match read_small(&area.join(MARKER)) {
            Some(state) => {
                let state = PathBuf::from(state);
                !crate::look::is_dir(&state) || recorded_in(base, &state).is_some_and(|r| r != area)
            }
            None => !legacy.contains(&name),
        };
        if orphan {
            out.push(area);
        }
    }
    out.sort();
    out
}

/// The name of a session's dir in the area: what the broker makes and the gateway sweeps.
pub fn session_dir_name(session_id: &str) -> String {
    session_id
        .trim_start_matches("ns_")
        .chars()
        .take(12)
        .collect()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
