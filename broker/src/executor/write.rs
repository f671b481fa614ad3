//! The durable compare-and-swap write behind `Edit`, `Write` and `NotebookEdit` (DESIGN §5,
//! reference §8.1), and the pieces recovery needs after a crash.
//!
//! Protocol of [`durable_write`], on a target resolved by `sandbox::write_path`:
//! 1. read the current bytes through a no-follow descriptor -> `pre_sha256` (absent for a new
//!    file) and the `(dev, ino)`; refuse if `expected_sha256` was given and differs; compute the
//!    new bytes -> `post_sha256`;
//! 2. `journal.prepared(..)`: the caller persists the intent at the gateway and waits for the
//!    acknowledgement; if that fails nothing is written;
//! 3. re-verify the parent, create a temp file in the same directory (`O_CREAT | O_EXCL |
//!    O_NOFOLLOW | O_CLOEXEC`, the target's permission bits, 0644 less the umask for a new file),
//!    write, `fsync`;
//! 4. compare-and-swap: re-verify the parent, re-open the target without following links; it must
//!    still hash to `pre_sha256` with the same `(dev, ino)` (or still be absent) — else
//!    `conflict`, the temp file is removed and nothing was written;
//! 5. `renameat` over the target (`RENAME_NOREPLACE` for a new file on Linux);
//! 6. `fsync` the directory;
//! 7. return the receipt; the caller persists `committed`.
//!
//! Every failure before the rename removes the temp file and says so ([`Disposition`]). A failure
//! after it (the directory `fsync`) leaves the outcome to [`resolve_after_crash`]: an `fsync`
//! error is never retried. Guarantee: a cooperating writer's change between steps 1 and 4 is
//! detected; one landing between the check in step 4 and the rename in step 5 (a window of two
//! syscalls) is not, as no mandatory locks exist. Ownership, ACLs and extended attributes of the
//! old file are not carried over (a file owned by another user is refused instead); setuid and
//! setgid bits are dropped.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::outcome::OutcomeCode;
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;
use sandbox::path_policy::PathPolicy;
use sandbox::write_path::{FileIdentity, Parents, WriteRefusal, WriteRoot, WriteTarget};

use super::content::{self, NewContent};
use super::edit_ops::{self, Computed, EditError, MAX_EDIT_FILE_BYTES, NotebookEdit};
use super::failpoint::{self, Failpoint};
use common::hash::sha256_hex;

/// Temp files are named `<TEMP_PREFIX><32 lowercase hex><TEMP_SUFFIX>` in the target's directory.
pub const TEMP_PREFIX: &str = ".ng-write-";
pub const TEMP_SUFFIX: &str = ".tmp";
/// Mode of a new file, before the umask.
const NEW_FILE_MODE: u32 = 0o644;

pub use common::protocol::PreparedWrite;

/// Why a write's intent could not be made durable; the write is then refused with nothing
/// written (`journal_failed`, quoting these words).
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// An executor without a gateway: nothing records writes.
    #[error("no gateway records writes here")]
    NoGateway,
    /// The gateway's protocol predates write records with verdicts.
    #[error("the gateway speaks protocol {version}, which does not approve writes")]
    ProtocolTooOld { version: u32 },
    /// The gateway refused the write (its action is not approved, or the sub-session ended).
    #[error("the gateway refused the write: {0}")]
    Refused(String),
    /// The gateway did not confirm it stored the intent within the bound.
    #[error("the gateway did not acknowledge the intent in time")]
    NotAcknowledged,
    /// A journal closure's own reason (in-process journals: tests, benches), in its words.
    #[error("{0}")]
    Failed(String),
}

/// Persists a write's intent durably before it happens (the broker sends it to the gateway and
/// waits for the acknowledgement). An error aborts the write with nothing written.
pub trait WriteJournal {
    fn prepared(&mut self, prepared: &PreparedWrite) -> Result<(), JournalError>;
}

/// A closure journal says why it failed in its own words ([`JournalError::Failed`]).
impl<F> WriteJournal for F
where
    F: FnMut(&PreparedWrite) -> Result<(), String>,
{
    fn prepared(&mut self, prepared: &PreparedWrite) -> Result<(), JournalError> {
        self(prepared).map_err(JournalError::Failed)
    }
}

/// What a committed write did; the caller persists it as `committed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReceipt {
    pub action_id: String,
    pub path: String,
    pub pre_sha256: Option<String>,
    pub post_sha256: String,
    pub bytes_written: u64,
    /// The file did not exist before.
    pub created: bool,
    /// One line for the model, e.g. `replaced 1 occurrence`.
    pub summary: String,
    pub duration: Duration,
}

/// Where a failed write left things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Failed before `prepared` was recorded: nothing to resolve.
    NotPrepared,
    /// `prepared` was recorded; the target is untouched and the temp file removed. The caller
    /// records the action as not applied.
    NotApplied,
    /// The rename may have happened but is not known durable; resolve with
    /// [`resolve_after_crash`] (or [`recover_prepared`]) and never retry blindly.
    Indeterminate,
}

/// A failed write: stable code, message for the model, the path, and what state it left.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WriteFailure {
    pub code: OutcomeCode,
    pub message: String,
    pub path: String,
    pub disposition: Disposition,
}

/// Write `target` durably with the new bytes `compute` derives from the current ones (`None`:
/// the file does not exist). See the module protocol.
#[allow(clippy::too_many_arguments)]
pub fn durable_write<'c>(
    policy: &PathPolicy,
    root: &WriteRoot,
    target: &WriteTarget,
    action_id: &str,
    expected_sha256: Option<&str>,
    compute: impl FnOnce(Option<&[u8]>) -> Result<Computed<'c>, EditError>,
    journal: &mut dyn WriteJournal,
) -> Result<WriteReceipt, WriteFailure> {
    let started = Instant::now();
    let path = target.path().display().to_string();
    let fail = |code: OutcomeCode, message: String, disposition: Disposition| WriteFailure {
        code,
        message,
        path: path.clone(),
        disposition,
    };
    let refused =
        |r: WriteRefusal, disposition: Disposition| fail(r.code(), r.to_string(), disposition);
    let io = |what: &str, err: std::io::Error, disposition: Disposition| {
        fail(io_code(&err), format!("{path}: {what}: {err}"), disposition)
    };

    // (a) Read what is there now.
    let current = read_current(policy, target, Buffer::Spare)
        .map_err(|r| refused(r, Disposition::NotPrepared))?;
    if let Some((_, id)) = &current {
        let euid = rustix::process::geteuid().as_raw();
        if id.uid != euid {
            return Err(fail(
                OutcomeCode::NotPermitted,
                format!(
                    "{path}: the file belongs to another user; replacing it would change its owner"
                ),
                Disposition::NotPrepared,
            ));
        }
    }
    // The old bytes are hashed (on a second thread for a large file) while the new content is
    // computed; the new content's hash reuses the old one's state over their common prefix.
    let current_bytes = current.as_ref().map(|(bytes, _)| &bytes[..]);
    let (pre_sha256, computed) =
        content::hash_around(current_bytes, || compute(current_bytes), |c| &c.content);
    if let Some(expected) = expected_sha256
        && pre_sha256.as_deref() != Some(expected.to_ascii_lowercase().as_str())
    {
        let actual = pre_sha256
            .as_deref()
            .unwrap_or("absent (the file does not exist)");
        return Err(fail(
            OutcomeCode::Sha256Mismatch,
            format!(
                "{path}: expected_sha256 is {expected} but the file's SHA-256 is {actual}; read it again"
            ),
            Disposition::NotPrepared,
        ));
    }
    let (computed, post_sha256) = computed.map_err(|err| {
        fail(
            err.code,
            format!("{path}: {}", err.message),
            Disposition::NotPrepared,
        )
    })?;
    // What the new text makes run: a package.json's or package.yaml's lint-staged section, a
    // pyproject.toml's pylint init-hook (also when the file is one only through a symlink's name).
    if target.checks_content() {
        let old = current_bytes.unwrap_or_default();
        let new: Vec<u8> = computed.content.slices(old).flatten().copied().collect();
        target
            .check_content(policy, current_bytes, &new)
            .map_err(|r| refused(r, Disposition::NotPrepared))?;
    }
    failpoint::hit(Failpoint::AfterRead)
        .map_err(|e| io("before prepare", e, Disposition::NotPrepared))?;

    // (b) The gateway records the intent.
    let temp_name = format!(
        "{TEMP_PREFIX}{}{TEMP_SUFFIX}",
        uuid::Uuid::new_v4().simple()
    );
    let prepared = PreparedWrite {
        action_id: action_id.to_string(),
        path: path.clone(),
        pre_sha256: pre_sha256.clone(),
        post_sha256: post_sha256.clone(),
        temp_name: temp_name.clone(),
        pre_identity: current.as_ref().map(|(_, id)| (id.dev, id.ino)),
    };
    journal.prepared(&prepared).map_err(|err| {
        fail(
            OutcomeCode::JournalFailed,
            format!("{path}: the write could not be recorded before it happens ({err}); nothing was written"),
            Disposition::NotPrepared,
        )
    })?;
    let not_applied = Disposition::NotApplied;
    failpoint::hit(Failpoint::AfterPrepared).map_err(|e| io("after prepare", e, not_applied))?;

    // (c) The new content in a synced temp file next to the target.
    target
        .verify_parent(root, policy)
        .map_err(|r| refused(r, not_applied))?;
    let mode = current
        .as_ref()
        .map_or(NEW_FILE_MODE, |(_, id)| id.mode & 0o1777);
    let mut temp = TempFile::create(target.parent(), &temp_name, mode)
        .map_err(|e| io("cannot create a temporary file next to it", e, not_applied))?;
    if current.is_some() {
        // Exactly the old permission bits, whatever the umask.
        rustix::fs::fchmod(&temp.file, sandbox::write_path::mode_bits(mode))
            .map_err(|e| io("cannot set the file mode", e.into(), not_applied))?;
    }
    write_content(
        &mut temp.file,
        &computed.content,
        current_bytes.unwrap_or_default(),
    )
    .map_err(|e| io("cannot write the new content", e, not_applied))?;
    failpoint::hit(Failpoint::AfterTempWritten).map_err(|e| io("writing", e, not_applied))?;
    temp.file
        .sync_all()
        .map_err(|e| io("cannot sync the new content to disk", e, not_applied))?;
    failpoint::hit(Failpoint::AfterTempFsync).map_err(|e| io("syncing", e, not_applied))?;

    // (d) Compare and swap: still the file we read, in the directory we resolved?
    target
        .verify_parent(root, policy)
        .map_err(|r| refused(r, not_applied))?;
    // Same inode, same bytes as the ones `pre_sha256` was computed from (compared in chunks:
    // exact, and cheaper than reading the whole file again and hashing it).
    let unchanged = match &current {
        None => target
            .open_existing(policy)
            .map_err(|r| refused(r, not_applied))?
            .is_none(),
        Some((old, before)) => match target
            .open_existing(policy)
            .map_err(|r| refused(r, not_applied))?
        {
            Some((file, after)) => {
                (before.dev, before.ino) == (after.dev, after.ino)
                    && same_content(file, old).map_err(|e| {
                        io("cannot read it again before replacing it", e, not_applied)
                    })?
            }
            None => false,
        },
    };
    if !unchanged {
        return Err(fail(
            OutcomeCode::Conflict,
            format!(
                "{path}: the file changed while the write was being prepared; nothing was written, read it again"
            ),
            not_applied,
        ));
    }
    failpoint::hit(Failpoint::AfterCas).map_err(|e| io("after the check", e, not_applied))?;

    // (e) Rename over the target.
    rename_into_place(
        target.parent(),
        &temp_name,
        target.name(),
        current.is_none(),
    )
    .map_err(|err| match err {
        RenameError::Exists => fail(
            OutcomeCode::Conflict,
            format!("{path}: the file was created by someone else meanwhile; nothing was written"),
            not_applied,
        ),
        RenameError::Io(e) => io("cannot move the new content into place", e, not_applied),
    })?;
    temp.disarm();
    let indeterminate = Disposition::Indeterminate;
    failpoint::hit(Failpoint::AfterRename).map_err(|e| io("after the rename", e, indeterminate))?;

    // (f) Make the rename durable.
    rustix::fs::fsync(target.parent()).map_err(|e| {
        io(
            "the file was replaced but syncing its directory failed; its state on disk is unknown",
            e.into(),
            indeterminate,
        )
    })?;
    failpoint::hit(Failpoint::AfterDirFsync).map_err(|e| io("after the sync", e, indeterminate))?;

    Ok(WriteReceipt {
        action_id: action_id.to_string(),
        path,
        pre_sha256,
        post_sha256,
        bytes_written: computed.content.len() as u64,
        created: current.is_none(),
        summary: computed.summary,
        duration: started.elapsed(),
    })
}

/// One logical write, with the arguments of its tool (besides `expected_sha256`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Edit {
        file_path: String,
        old_string: String,
        new_string: String,
        replace_all: bool,
    },
    Write {
        file_path: String,
        content: String,
    },
    NotebookEdit {
        notebook_path: String,
        edit: NotebookEdit,
    },
}

impl From<&common::tools::EditArgs> for WriteOp {
    fn from(a: &common::tools::EditArgs) -> Self {
        Self::Edit {
            file_path: a.file_path.clone(),
            old_string: a.old_string.clone(),
            new_string: a.new_string.clone(),
            replace_all: a.replace_all.unwrap_or(false),
        }
    }
}

impl From<&common::tools::WriteArgs> for WriteOp {
    fn from(a: &common::tools::WriteArgs) -> Self {
        Self::Write {
            file_path: a.file_path.clone(),
            content: a.content.clone(),
        }
    }
}

impl From<&common::tools::NotebookEditArgs> for WriteOp {
    fn from(a: &common::tools::NotebookEditArgs) -> Self {
        Self::NotebookEdit {
            notebook_path: a.notebook_path.clone(),
            edit: NotebookEdit {
                cell_id: a.cell_id.clone(),
                mode: a.edit_mode,
                new_source: a.new_source.clone(),
                cell_type: a.cell_type,
            },
        }
    }
}

impl WriteOp {
    pub fn path(&self) -> &str {
        match self {
            Self::Edit { file_path, .. } | Self::Write { file_path, .. } => file_path,
            Self::NotebookEdit { notebook_path, .. } => notebook_path,
        }
    }
}

/// Resolve the op's target inside `root` (`Write` creates missing parent directories; they stay
/// if the write is refused later) and write it with [`durable_write`]. `Edit` and
/// `NotebookEdit` need an existing file.
pub fn run_write(
    policy: &PathPolicy,
    root: &WriteRoot,
    action_id: &str,
    op: &WriteOp,
    expected_sha256: Option<&str>,
    journal: &mut dyn WriteJournal,
) -> Result<WriteReceipt, WriteFailure> {
    let path = Path::new(op.path());
    let parents = match op {
        WriteOp::Write { .. } => Parents::Create,
        WriteOp::Edit { .. } | WriteOp::NotebookEdit { .. } => Parents::MustExist,
    };
    let target = root
        .resolve(policy, path, parents)
        .map_err(|r| WriteFailure {
            code: r.code(),
            message: r.to_string(),
            path: op.path().to_string(),
            disposition: Disposition::NotPrepared,
        })?;
    let missing = || EditError::new(OutcomeCode::NotFound, "the file does not exist");
    let new_cell_id = sha256_hex(action_id.as_bytes())[..8].to_string();
    let compute = |current: Option<&[u8]>| match op {
        WriteOp::Edit {
            old_string,
            new_string,
            replace_all,
            ..
        } => edit_ops::apply_edit(
            current.ok_or_else(missing)?,
            old_string,
            new_string,
            *replace_all,
        ),
        WriteOp::Write { content, .. } => edit_ops::apply_write(current, content),
        WriteOp::NotebookEdit { edit, .. } => {
            edit_ops::apply_notebook_edit(current.ok_or_else(missing)?, edit, &new_cell_id)
        }
    };
    durable_write(
        policy,
        root,
        &target,
        action_id,
        expected_sha256,
        compute,
        journal,
    )
}

/// How a `prepared` write without a `committed` record ended, judged from the real file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashResolution {
    /// The file holds the new content: record `committed`.
    Committed,
    /// The file holds the old content (or is still absent for a create): record not applied;
    /// never retried automatically.
    NotApplied,
    /// Anything else: stop with `recovery_required`, rewrite nothing.
    Indeterminate,
}

/// Classify a crashed write by the real file's hash (`None`: absent) against the prepared pre
/// (`None`: a create) and post hashes.
pub fn resolve_after_crash(
    real_sha256: Option<&str>,
    pre_sha256: Option<&str>,
    post_sha256: &str,
) -> CrashResolution {
    if real_sha256 == Some(post_sha256) {
        CrashResolution::Committed
    } else if real_sha256 == pre_sha256 {
        CrashResolution::NotApplied
    } else {
        CrashResolution::Indeterminate
    }
}

/// Resolve a `prepared` write after a restart: hash the real file through the same no-follow
/// resolver (a symlink, hard link, non-regular file or unreadable file there is
/// `Indeterminate`), classify it with [`resolve_after_crash`], and unless indeterminate remove
/// the write's temp file if one is left.
pub fn recover_prepared(
    policy: &PathPolicy,
    root: &WriteRoot,
    prepared: &PreparedWrite,
) -> CrashResolution {
    let target = match root.resolve(policy, Path::new(&prepared.path), Parents::MustExist) {
        Ok(target) => target,
        // A missing parent directory: the file is absent.
        Err(r) if r.code() == OutcomeCode::NotFound => {
            return resolve_after_crash(
                None,
                prepared.pre_sha256.as_deref(),
                &prepared.post_sha256,
            );
        }
        Err(_) => return CrashResolution::Indeterminate,
    };
    // Recovery runs in the gateway, rarely: it keeps no buffer.
    let real = match read_current(policy, &target, Buffer::Fresh) {
        Ok(current) => current.map(|(bytes, _)| sha256_hex(&bytes)),
        Err(_) => return CrashResolution::Indeterminate,
    };
    let resolution = resolve_after_crash(
        real.as_deref(),
        prepared.pre_sha256.as_deref(),
        &prepared.post_sha256,
    );
    if resolution != CrashResolution::Indeterminate && is_temp_name(OsStr::new(&prepared.temp_name))
    {
        let _ = remove_if_regular(target.parent(), OsStr::new(&prepared.temp_name));
    }
    resolution
}

/// Remove every regular file in `dir` named like a write temp file; returns the names removed.
pub fn cleanup_temp_files(dir: impl AsFd) -> std::io::Result<Vec<OsString>> {
    let dir = dir.as_fd();
    let listing = rustix::fs::Dir::new(rustix::io::dup(dir)?)?;
    let mut removed = Vec::new();
    for entry in listing {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if is_temp_name(name) && remove_if_regular(dir, name)? {
            removed.push(name.to_os_string());
        }
    }
    removed.sort();
    Ok(removed)
}

/// Whether `name` is a write temp file name.
pub fn is_temp_name(name: &OsStr) -> bool {
    let bytes = name.as_bytes();
    bytes
        .strip_prefix(TEMP_PREFIX.as_bytes())
        .and_then(|rest| rest.strip_suffix(TEMP_SUFFIX.as_bytes()))
        .is_some_and(|hex| {
            hex.len() == 32 && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

/// Write the new content's runs (few: see `edit_ops::MAX_SPLICED_MATCHES`).
fn write_content(file: &mut File, content: &NewContent<'_>, old: &[u8]) -> std::io::Result<()> {
    content
        .slices(old)
        .try_for_each(|slice| file.write_all(slice))
}

fn remove_if_regular(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<bool> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
            rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
            Ok(true)
        }
        Ok(_) | Err(Errno::NOENT) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// Whether `file` holds exactly `expected` (read in 64 KiB chunks, stopping at the first
/// difference).
fn same_content(mut file: File, expected: &[u8]) -> std::io::Result<bool> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut offset = 0;
    loop {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if n == 0 {
            return Ok(offset == expected.len());
        }
        if expected.get(offset..offset + n) != Some(&chunk[..n]) {
            return Ok(false);
        }
        offset += n;
    }
}

/// The current bytes and identity of the target (no-follow, checked), or `None` when absent.
fn read_current(
    policy: &PathPolicy,
    target: &WriteTarget,
    buffer: Buffer,
) -> Result<Option<(ReadBuffer, FileIdentity)>, WriteRefusal> {
    let Some((file, id)) = target.open_existing(policy)? else {
        return Ok(None);
    };
    let shown = target.path().display().to_string();
    let too_large = || {
        WriteRefusal::Path(sandbox::path_policy::PathRefusal::Io {
            path: shown.clone(),
            message: format!(
                "the file is larger than {MAX_EDIT_FILE_BYTES} bytes; it is not edited"
            ),
        })
    };
    if id.size > MAX_EDIT_FILE_BYTES as u64 {
        return Err(too_large());
    }
    let mut bytes = ReadBuffer::take(
        usize::try_from(id.size).unwrap_or(0).saturating_add(1),
        buffer,
    );
    file.take(MAX_EDIT_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes.bytes)
        .map_err(|err| {
            WriteRefusal::Path(sandbox::path_policy::PathRefusal::Io {
                path: shown.clone(),
                message: err.to_string(),
            })
        })?;
    if bytes.len() > MAX_EDIT_FILE_BYTES {
        return Err(too_large());
    }
    Ok(Some((bytes, id)))
}

/// The buffer a file's current bytes are read into. The broker keeps one spare buffer of up to
/// [`SPARE_BUFFER_MAX`] bytes between writes: a fresh multi-MiB buffer costs a page fault for
/// each 4 KiB page, about three times what copying the file from the page cache does (4 MiB:
/// 2.2 ms read into a fresh buffer, 0.5 ms into a reused one).
struct ReadBuffer {
    bytes: Vec<u8>,
    keep: bool,
}

/// Whether a read may take and give back the spare buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buffer {
    Spare,
    Fresh,
}

/// Largest buffer kept for the next write: files up to 4 MiB reuse it. (The allocator keeps
/// freed buffers of that size anyway: see the memory figures in `WRITE_RESULTS.md`.)
const SPARE_BUFFER_MAX: usize = 4 * 1024 * 1024 + 64 * 1024;
static SPARE_BUFFER: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

impl ReadBuffer {
    fn take(capacity: usize, buffer: Buffer) -> Self {
        let keep = buffer == Buffer::Spare;
        let mut bytes = if keep {
            SPARE_BUFFER
                .lock()
                .map(|mut spare| std::mem::take(&mut *spare))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        bytes.clear();
        bytes.reserve(capacity);
        Self { bytes, keep }
    }
}

impl std::ops::Deref for ReadBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        if self.keep
            && self.bytes.capacity() <= SPARE_BUFFER_MAX
            && let Ok(mut spare) = SPARE_BUFFER.lock()
            && spare.capacity() < self.bytes.capacity()
        {
            *spare = std::mem::take(&mut self.bytes);
        }
    }
}

/// A temp file that is removed when dropped unless disarmed (after the rename).
struct TempFile<'a> {
    dir: BorrowedFd<'a>,
    name: OsString,
    file: File,
    armed: bool,
}

impl<'a> TempFile<'a> {
    fn create(dir: BorrowedFd<'a>, name: &str, mode: u32) -> std::io::Result<Self> {
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let fd = rustix::fs::openat(dir, name, flags, sandbox::write_path::mode_bits(mode))?;
        Ok(Self {
            dir,
            name: OsString::from(name),
            file: File::from(fd),
            armed: true,
        })
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = rustix::fs::unlinkat(self.dir, &self.name, AtFlags::empty());
        }
    }
}

enum RenameError {
    /// A create found the name taken.
    Exists,
    Io(std::io::Error),
}

/// Rename `temp` over `name` in `dir`; for a create, refuse to replace anything that appeared.
fn rename_into_place(
    dir: BorrowedFd<'_>,
    temp: &str,
    name: &OsStr,
    create: bool,
) -> Result<(), RenameError> {
    if create {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        match rustix::fs::renameat_with(dir, temp, dir, name, rustix::fs::RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(Errno::EXIST) => return Err(RenameError::Exists),
            // The file system cannot: fall back to look-then-rename.
            Err(Errno::INVAL | Errno::NOSYS) => {}
            Err(err) => return Err(RenameError::Io(err.into())),
        }
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => {}
            Ok(_) => return Err(RenameError::Exists),
            Err(err) => return Err(RenameError::Io(err.into())),
        }
    }
    rustix::fs::renameat(dir, temp, dir, name).map_err(|err| RenameError::Io(err.into()))
}

/// Stable code for an I/O failure.
fn io_code(err: &std::io::Error) -> OutcomeCode {
    match Errno::from_io_error(err) {
        Some(Errno::ACCESS | Errno::PERM) => OutcomeCode::PermissionDenied,
        Some(Errno::ROFS) => OutcomeCode::ReadOnlyFileSystem,
        Some(Errno::NOSPC | Errno::DQUOT) => OutcomeCode::NoSpace,
        _ => OutcomeCode::IoError,
    }
}

#[cfg(test)]
mod tests;
