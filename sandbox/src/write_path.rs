//! Resolving the target of a logical write (`Edit`, `Write`, `NotebookEdit`) inside a write root
//! without following symlinks, and the file-level checks a write needs.
//!
//! Rules (DESIGN §5, reference §7.3):
//! - The path passes [`PathPolicy::check`] (absolute, no `.`/`..`/empty components, no NUL, not
//!   too long, not protected by name, no `.git` component in any case) and lies strictly below the
//!   write root, compared component-wise with the root as given (aliases are refused, not
//!   canonicalised).
//! - The root is opened once with the policy's no-follow opener and kept as a descriptor; the
//!   parent directory is resolved from it: on Linux with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`, elsewhere (and to name the
//!   offending component, and to create missing directories) one component at a time with
//!   `openat(O_DIRECTORY | O_NOFOLLOW)`, each directory on the root's device and not a protected
//!   identity. Missing parents are created with `mkdirat`, one component at a time, each new
//!   entry made durable with an `fsync` of the directory holding it.
//! - An existing target must be a regular file with exactly one link, not a protected identity;
//!   it is looked at with `fstatat(AT_SYMLINK_NOFOLLOW)` and opened only with
//!   `O_NOFOLLOW | O_NONBLOCK`, so a FIFO can never hang a write.
//! - [`WriteTarget::verify_parent`] re-resolves the parent from the root and requires the same
//!   `(dev, ino)` as the held descriptor: a parent moved out of the root (and perhaps replaced by
//!   a symlink) after resolution is detected before anything is written through it.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::outcome::OutcomeCode;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::path_policy::{
    PathPolicy, PathRefusal, WriteProtection, classify, ident, io_refusal, is_git_name, show,
};
use crate::protected::autorun::owner_files;
use crate::protected::autorun::symlinks::{self, Incomplete, Symlinks};

/// A root's symlinks as scanned, or why the scan could not finish.
type ScannedLinks = Arc<Result<Symlinks, Incomplete>>;

/// Mode of directories created for a write (before the umask).
const NEW_DIR_MODE: u32 = 0o755;

/// Why a write target was refused. `code()` is the stable machine code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteRefusal {
    #[error("{path}: is outside the write root {root}; writes are confined to it")]
    OutsideRoot { path: String, root: String },
    #[error("{path}: is inside a `.git` directory; the write tools never modify Git internals")]
    GitDir { path: String },
    #[error(
        "{path}: `{component}` is on another file system or mount than the write root; writes do not cross mounts"
    )]
    CrossesMount { path: String, component: String },
    #[error(
        "{path}: the parent directory was moved or replaced while the write was in progress; nothing was written"
    )]
    ParentChanged { path: String },
    #[error("{path}: names a directory, not a file")]
    IsDirectory { path: String },
    #[error(
        "{path}: is where the gateway or Claude Code is installed, or a start-up file or \
         directory that runs code later outside the sandbox; sessions never write there"
    )]
    InstallLocation { path: String },
    #[error(
        "{path}: is the target of {link}, a link in a start-up place of the home: it runs at \
         login or shell start, outside every sandbox, so sessions do not write it ({class}). If \
         editing it is the task, the owner can remove the link, or allow the class by starting \
         the gateway with {env}={class}"
    )]
    StartupLinkTarget {
        path: String,
        /// The link, `~/…` in the owner's home.
        link: String,
        class: &'static str,
        env: &'static str,
    },
    #[error(
        "{path}: is named by {file}, a tool's configuration file in the home (a program it runs \
         or a file it loads at its start): it runs outside every sandbox, so sessions do not \
         write it ({class}). If editing it is the task, the owner can take the name out of \
         {file}, or allow the class by starting the gateway with {env}={class}"
    )]
    StartupNamed {
        path: String,
        /// The configuration file, `~/…` in the owner's home.
        file: String,
        class: &'static str,
        env: &'static str,
    },
    #[error(
        "{path}: could not be checked against the links in {place}: it holds more entries, or \
         deeper, than are looked at ({class}: a link there makes its target a start-up file); nothing \
         was written. The owner can move bulky data out of {place}, or allow the class by \
         starting the gateway with {env}={class}"
    )]
    StartupLinksUnchecked {
        path: String,
        /// The start-up tree, `~/…` in the owner's home.
        place: String,
        class: &'static str,
        env: &'static str,
    },
    #[error(
        "{path}: could not be checked against the start-up link {link}: it names its target \
         through /proc or /dev/fd, whose meaning depends on the process reading it ({class}); \
         nothing was written. The owner can point the link at a plain path, or allow the class \
         by starting the gateway with {env}={class}"
    )]
    StartupLinkUnknowable {
        path: String,
        /// The link, `~/…` in the owner's home.
        link: String,
        class: &'static str,
        env: &'static str,
    },
    #[error(
        "{path}: is no longer the directory this session started in (it was replaced or moved); \
         nothing is written here. Start a new session on the directory"
    )]
    RootReplaced { path: String },
    #[error(
        "{path}: is an auto-run place{via} ({class}: {places}); files there run by themselves \
         when the project is next opened or used, outside every sandbox, so sessions do not \
         write them. If editing it is the task, the owner can allow the class by starting the \
         gateway with {env}={class}"
    )]
    AutorunPlace {
        path: String,
        /// Empty, or why the path is one: through a symlink (` (reachable as … through a
        /// symlink)`), or by what its directories hold (an embedded repository, a venv's `bin/`).
        via: String,
        class: &'static str,
        places: &'static str,
        env: &'static str,
    },
    #[error(
        "{path}: could not tell whether it is an auto-run place reached through a symlink \
         ({reason}); nothing was written"
    )]
    AutorunUnknown { path: String, reason: String },
    #[error(transparent)]
    Path(#[from] PathRefusal),
}

impl WriteRefusal {
    /// Stable machine code (`not_permitted`, `invalid_argument`, `not_found`, `not_a_file`,
    /// `conflict`, and the codes of [`PathRefusal`]).
    pub fn code(&self) -> OutcomeCode {
        match self {
            Self::OutsideRoot { .. }
            | Self::GitDir { .. }
            | Self::CrossesMount { .. }
            | Self::InstallLocation { .. }
            | Self::StartupLinkTarget { .. }
            | Self::StartupNamed { .. }
            | Self::StartupLinksUnchecked { .. }
            | Self::StartupLinkUnknowable { .. }
            | Self::RootReplaced { .. }
            | Self::AutorunPlace { .. }
            | Self::AutorunUnknown { .. } => OutcomeCode::NotPermitted,
            Self::ParentChanged { .. } => OutcomeCode::Conflict,
            Self::IsDirectory { .. } => OutcomeCode::NotAFile,
            Self::Path(refusal) => refusal.code(),
        }
    }
}

/// What a write needs to know about an existing target, from `fstat` of the checked object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
}

impl FileIdentity {
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    fn from_stat(st: &Stat) -> Self {
        let (dev, ino) = ident(st);
        Self {
            dev,
            ino,
            mode: (st.st_mode as u32) & 0o7777,
            uid: st.st_uid as u32,
            gid: st.st_gid as u32,
            size: st.st_size as u64,
        }
    }
}

/// Whether missing parent directories of a target may be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parents {
    /// The parent must exist (`Edit`, `NotebookEdit`).
    MustExist,
    /// Create missing directories inside the root (`Write`).
    Create,
}

/// The write root, held open. Everything a write touches is resolved from this descriptor.
#[derive(Debug)]
pub struct WriteRoot {
    fd: OwnedFd,
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// The root's symlinks as last scanned, when, and the generation of the owner's start-up
    /// files then (see [`symlinks`], [`owner_files`]).
    symlinks: Mutex<Option<(Instant, u64, ScannedLinks)>>,
}

impl WriteRoot {
    /// Open the root directory (absolute, not protected) without following any symlink.
    pub fn open(policy: &PathPolicy, root: &Path) -> Result<Self, WriteRefusal> {
        policy.refresh_write_protected();
        if let Some(why) = policy.write_protection(root) {
            return Err(write_protected_refusal(show(root), why));
        }
        let (file, _) = policy.open_dir_no_follow(root).map_err(git_refusal)?;
        let fd = OwnedFd::from(file);
        let st = rustix::fs::fstat(&fd).map_err(|err| io_refusal(&show(root), err))?;
        let (dev, ino) = ident(&st);
        if let Some(why) = policy.write_protection_identity(dev, ino) {
            return Err(write_protected_refusal(show(root), why));
        }
        Ok(Self {
            fd,
            path: root.to_path_buf(),
            dev,
            ino,
            symlinks: Mutex::new(None),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root directory's (device, inode), as opened.
    pub fn identity(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// Whether the root's path still names the directory held open.
    fn path_names_root(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.is_dir() && (m.dev(), m.ino()) == self.identity())
    }

    /// Refuse the root when it is not the directory `expected` names (recorded when the session
    /// started): a directory replaced at the same path is never written.
    pub fn expecting(self, expected: Option<(u64, u64)>) -> Result<Self, WriteRefusal> {
        match expected {
            Some(identity) if identity != self.identity() => Err(WriteRefusal::RootReplaced {
                path: show(&self.path),
            }),
            _ => Ok(self),
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Resolve `path` (absolute, strictly below the root) to its parent directory descriptor and
    /// file name; see the module rules. With [`Parents::Create`] missing directories are made.
    pub fn resolve(
        &self,
        policy: &PathPolicy,
        path: &Path,
        parents: Parents,
    ) -> Result<WriteTarget, WriteRefusal> {
        policy.check(path).map_err(git_refusal)?;
        let shown = show(path);
        // A link the owner made in a start-up place since the last write counts now.
        policy.refresh_write_protected();
        if let Some(why) = policy.write_protection(path) {
            return Err(write_protected_refusal(shown, why));
        }
        if path.as_os_str().as_bytes().ends_with(b"/") {
            return Err(WriteRefusal::IsDirectory { path: shown });
        }
        let Ok(relative) = path.strip_prefix(&self.path) else {
            return Err(WriteRefusal::OutsideRoot {
                path: shown,
                root: show(&self.path),
            });
        };
        // The root is held open, but the path a receipt names must be the file written: when
        // the root's path names another directory now (replaced or moved), nothing is written.
        if !self.path_names_root() {
            return Err(WriteRefusal::RootReplaced {
                path: show(&self.path),
            });
        }
        let comps = normal_components(relative);
        let Some((name, dirs)) = comps.split_last() else {
            return Err(WriteRefusal::IsDirectory { path: shown });
        };
        if comps.iter().any(|c| is_git_name(c)) {
            return Err(WriteRefusal::GitDir { path: shown });
        }
        // By the whole path: a root inside an auto-run place makes every file in it one; then by
        // what the directories on the way hold and by every name the target is reachable as.
        if let Some(class) = policy.autorun_refused(path) {
            return Err(autorun_refusal(shown, String::new(), class));
        }
        let aliases =
            self.check_reachable_autorun(policy, &comps.iter().collect::<PathBuf>(), &shown)?;
        // Rules keyed on what a file is read as hold under every name it is reachable as (red
        // team 24 B4: `package.json -> pkg/real.json` made a write to `pkg/real.json` escape
        // the hook-section comparison).
        let names: Vec<PathBuf> = std::iter::once(path.to_path_buf())
            .chain(aliases.iter().map(|alias| self.path.join(alias)))
            .collect();
        check_strict_hooks(policy, &names, &shown)?;
        let content_checked: Vec<PathBuf> = names
            .into_iter()
            .filter(|name| {
                name.file_name()
                    .and_then(crate::protected::autorun::package_files::CheckedFile::of)
                    .is_some()
            })
            .collect();
        let parent = self.open_parent(policy, dirs, path, parents)?;
        self.check_ancestors(policy, &parent, dirs.len(), path)?;
        let parent_st = rustix::fs::fstat(&parent).map_err(|err| io_refusal(&shown, err))?;
        let (parent_dev, parent_ino) = ident(&parent_st);
        let existing = match rustix::fs::statat(&parent, *name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                policy.check_opened_file(&st, path)?;
                let (dev, ino) = ident(&st);
                if let Some(why) = policy.write_protection_identity(dev, ino) {
                    return Err(write_protected_refusal(shown, why));
                }
                Some(FileIdentity::from_stat(&st))
            }
            Err(Errno::NOENT) => None,
            Err(err) => return Err(classify(&parent, name, path, &shown, err, false).into()),
        };
        Ok(WriteTarget {
            parent,
            parent_ident: (parent_dev, parent_ino),
            parent_rel: dirs.iter().collect(),
            name: name.to_os_string(),
            path: path.to_path_buf(),
            existing,
            content_checked,
        })
    }

    /// Refuse a target that is an auto-run place by its directories' content (an embedded git
    /// repository, a virtual environment's `bin/`) or through a symlink of the root
    /// ([`crate::protected::autorun::symlinks`]); skipped when the owner allowed every class.
    /// Returns the other root-relative names the target is reachable as (none when skipped).
    fn check_reachable_autorun(
        &self,
        policy: &PathPolicy,
        relative: &Path,
        shown: &str,
    ) -> Result<Vec<PathBuf>, WriteRefusal> {
        use crate::protected::autorun::{AutorunClass, repository};
        if AutorunClass::ALL
            .iter()
            .all(|class| policy.autorun_refused_class(Some(*class)).is_none())
        {
            return Ok(Vec::new());
        }
        let content = repository::content_class(&self.path, relative);
        if let Some(class) = policy.autorun_refused_class(content) {
            return Err(content_refusal(shown.to_string(), class));
        }
        let unknown = |reason: &Incomplete| WriteRefusal::AutorunUnknown {
            path: shown.to_string(),
            reason: reason.to_string(),
        };
        let links = self.symlinks(policy);
        let links = links.as_ref().as_ref().map_err(unknown)?;
        if links.is_empty() {
            return Ok(Vec::new());
        }
        let reached = links
            .reached_as(&self.path, relative)
            .map_err(|err| unknown(&err))?;
        for (class, via) in reached.places {
            if let Some(class) = policy.autorun_refused_class(Some(class)) {
                return Err(autorun_refusal(shown.to_string(), via, class));
            }
        }
        Ok(reached.aliases)
    }

    /// The root's symlinks (and the places the owner's files name), rescanned when the last
    /// scan is older than [`symlinks::MAX_AGE`] or the owner's start-up files changed since
    /// (red team 44a C1-B6).
    fn symlinks(&self, policy: &PathPolicy) -> ScannedLinks {
        let mut cache = self
            .symlinks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((at, generation, links)) = cache.as_ref()
            && at.elapsed() < symlinks::MAX_AGE
            && *generation == owner_files::generation()
        {
            return links.clone();
        }
        let skip = |dev, ino| policy.is_protected_identity(dev, ino);
        let fresh = Arc::new(Symlinks::scan(
            self.fd.as_fd(),
            &self.path,
            policy.merge_target(),
            &skip,
        ));
        *cache = Some((Instant::now(), owner_files::generation(), fresh.clone()));
        fresh
    }

    /// Refuse by identity: walk from `parent` up `depth` levels (`..`, never a name) to the
    /// root, refusing when a directory on the way is protected (the state dir reached inside a
    /// direct-write root, whatever it is called there) or write-protected (an install location),
    /// and when the walk does not end at the root (the tree changed meanwhile).
    fn check_ancestors(
        &self,
        policy: &PathPolicy,
        parent: &OwnedFd,
        depth: usize,
        path: &Path,
    ) -> Result<(), WriteRefusal> {
        let shown = || show(path);
        let mut current = rustix::fs::openat(parent, ".", up_flags(), Mode::empty())
            .map_err(|err| io_refusal(&shown(), err))?;
        for _ in 0..depth {
            let st = rustix::fs::fstat(&current).map_err(|err| io_refusal(&shown(), err))?;
            let (dev, ino) = ident(&st);
            if policy.is_protected_object(&current, dev, ino) {
                return Err(PathRefusal::Protected { path: shown() }.into());
            }
            if let Some(why) = policy.write_protection_identity(dev, ino) {
                return Err(write_protected_refusal(shown(), why));
            }
            current = rustix::fs::openat(&current, "..", up_flags(), Mode::empty())
                .map_err(|err| io_refusal(&shown(), err))?;
        }
        let st = rustix::fs::fstat(&current).map_err(|err| io_refusal(&shown(), err))?;
        if ident(&st) != (self.dev, self.ino) {
            return Err(WriteRefusal::ParentChanged { path: shown() });
        }
        Ok(())
    }

    /// Open the directory `dirs` (relative to the root) for reading, without following symlinks.
    fn open_parent(
        &self,
        policy: &PathPolicy,
        dirs: &[&OsStr],
        path: &Path,
        parents: Parents,
    ) -> Result<OwnedFd, WriteRefusal> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let relative: PathBuf = dirs.iter().collect();
            match openat2_beneath(&self.fd, &relative) {
                Ok(fd) => {
                    self.check_dir(policy, &fd, path, &self.path.join(&relative))?;
                    return Ok(fd);
                }
                Err(Errno::NOENT) if parents == Parents::Create => {}
                Err(Errno::NOSYS) => {}
                Err(err) => {
                    // Walk only to say which component is at fault; the refusal stands even
                    // if the walk (racing a change) succeeds.
                    self.walk(policy, dirs, path, Parents::MustExist)?;
                    return Err(match err {
                        Errno::XDEV => WriteRefusal::CrossesMount {
                            path: show(path),
                            component: show(&self.path.join(&relative)),
                        },
                        Errno::LOOP => PathRefusal::Symlink {
                            path: show(path),
                            component: show(&self.path.join(&relative)),
                        }
                        .into(),
                        other => io_refusal(&show(path), other).into(),
                    });
                }
            }
        }
        self.walk(policy, dirs, path, parents)
    }

    /// Open `dirs` one component at a time from the root with `O_DIRECTORY | O_NOFOLLOW`,
    /// creating missing ones with [`Parents::Create`].
    fn walk(
        &self,
        policy: &PathPolicy,
        dirs: &[&OsStr],
        path: &Path,
        parents: Parents,
    ) -> Result<OwnedFd, WriteRefusal> {
        let shown = show(path);
        let mut current = rustix::fs::openat(&self.fd, ".", dir_flags(), Mode::empty())
            .map_err(|err| io_refusal(&shown, err))?;
        let mut prefix = self.path.clone();
        for name in dirs {
            prefix.push(name);
            let opened = match rustix::fs::openat(&current, *name, dir_flags(), Mode::empty()) {
                Err(Errno::NOENT) if parents == Parents::Create => {
                    match rustix::fs::mkdirat(&current, *name, mode_bits(NEW_DIR_MODE)) {
                        // The new entry is durable before anything is written below it.
                        Ok(()) => {
                            rustix::fs::fsync(&current).map_err(|err| io_refusal(&shown, err))?
                        }
                        Err(Errno::EXIST) => {}
                        Err(err) => {
                            return Err(classify(&current, name, &prefix, &shown, err, true).into());
                        }
                    }
                    rustix::fs::openat(&current, *name, dir_flags(), Mode::empty())
                }
                other => other,
            };
            let next = match opened {
                Ok(fd) => fd,
                Err(err) => return Err(classify(&current, name, &prefix, &shown, err, true).into()),
            };
            self.check_dir(policy, &next, path, &prefix)?;
            current = next;
        }
        Ok(current)
    }

    /// A resolved directory must be a directory on the root's device and not protected.
    fn check_dir(
        &self,
        policy: &PathPolicy,
        fd: &OwnedFd,
        path: &Path,
        component: &Path,
    ) -> Result<(), WriteRefusal> {
        let st = rustix::fs::fstat(fd).map_err(|err| io_refusal(&show(path), err))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(PathRefusal::NotADirectory {
                path: show(path),
                component: show(component),
            }
            .into());
        }
        let (dev, ino) = ident(&st);
        if dev != self.dev {
            return Err(WriteRefusal::CrossesMount {
                path: show(path),
                component: show(component),
            });
        }
        if policy.is_protected_object(fd, dev, ino) {
            return Err(PathRefusal::Protected { path: show(path) }.into());
        }
        Ok(())
    }
}

/// A resolved write target: its parent directory (held open), its name in it, and what exists
/// there now.
#[derive(Debug)]
pub struct WriteTarget {
    parent: OwnedFd,
    parent_ident: (u64, u64),
    /// The parent relative to the root (empty for the root itself).
    parent_rel: PathBuf,
    name: OsString,
    path: PathBuf,
    existing: Option<FileIdentity>,
    /// The names under which the file is read as a file whose content is checked
    /// ([`crate::protected::autorun::package_files`]: a `package.json`, a `pyproject.toml`, …):
    /// its own path, or names it is reachable as through a symlink.
    content_checked: Vec<PathBuf>,
}

impl WriteTarget {
    /// Whether the new content must pass [`Self::check_content`]: the file is read as a
    /// `package.json`, `package.yaml`, `pyproject.toml`, `setup.cfg` or `tox.ini` under its own
    /// name or one it is reachable as.
    pub fn checks_content(&self) -> bool {
        !self.content_checked.is_empty()
    }

    /// Refuse new content that changes what runs through the target's text — a `package.json`'s
    /// hook sections (`git_hooks`), a `pyproject.toml`'s pylint `init-hook` (`editor_config`):
    /// the class and the reason come from the kind of file it is read as, under every name it is
    /// written through ([`crate::protected::autorun::package_files::CheckedFile`]) — unless the
    /// owner allowed that class.
    pub fn check_content(
        &self,
        policy: &PathPolicy,
        old: Option<&[u8]>,
        new: &[u8],
    ) -> Result<(), WriteRefusal> {
        use crate::protected::autorun::package_files::CheckedFile;
        let kinds = self.content_checked.iter().flat_map(|read_as| {
            let kind = read_as.file_name().and_then(CheckedFile::of);
            kind.into_iter()
                .flat_map(CheckedFile::with_companions)
                .map(move |kind| (read_as, kind))
        });
        for (read_as, kind) in kinds {
            if policy.autorun_refused_class(Some(kind.class())).is_none() {
                continue;
            }
            let Some(why) = kind.refusal(old, new, policy.strict_hooks()) else {
                continue;
            };
            let through = if *read_as == self.path {
                String::new()
            } else {
                format!("reachable as {} through a symlink; ", show(read_as))
            };
            return Err(autorun_refusal(
                show(&self.path),
                format!(" ({through}{why})"),
                kind.class(),
            ));
        }
        Ok(())
    }

    /// The parent directory, opened for reading (usable with `*at` calls and `fsync`).
    pub fn parent(&self) -> BorrowedFd<'_> {
        self.parent.as_fd()
    }

    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// The path as the caller gave it (for messages and receipts).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The target as it was when resolved; `None` when it did not exist.
    pub fn existing(&self) -> Option<FileIdentity> {
        self.existing
    }

    /// Open the target for reading (`O_NOFOLLOW | O_NONBLOCK`) and check the opened object:
    /// regular file, one link, not protected. `Ok(None)` when it does not exist.
    pub fn open_existing(
        &self,
        policy: &PathPolicy,
    ) -> Result<Option<(File, FileIdentity)>, WriteRefusal> {
        let shown = show(&self.path);
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(&self.parent, &self.name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::NXIO) => {
                return Err(PathRefusal::NotAFile {
                    path: shown,
                    kind: "a socket or device",
                }
                .into());
            }
            Err(err) => {
                return Err(
                    classify(&self.parent, &self.name, &self.path, &shown, err, false).into(),
                );
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(|err| io_refusal(&shown, err))?;
        policy.check_opened_file(&st, &self.path)?;
        Ok(Some((File::from(fd), FileIdentity::from_stat(&st))))
    }

    /// Re-resolve the parent from the root and require the descriptor held since resolution:
    /// refuses ([`WriteRefusal::ParentChanged`]) when the parent was moved or replaced (e.g. by
    /// a symlink) in the meantime, and ([`WriteRefusal::AutorunPlace`]) when the directories on
    /// the way now make the target an auto-run place by their content.
    pub fn verify_parent(&self, root: &WriteRoot, policy: &PathPolicy) -> Result<(), WriteRefusal> {
        let dirs = normal_components(&self.parent_rel);
        let changed = || WriteRefusal::ParentChanged {
            path: show(&self.path),
        };
        let fd = root
            .open_parent(policy, &dirs, &self.path, Parents::MustExist)
            .map_err(|_| changed())?;
        let st = rustix::fs::fstat(&fd).map_err(|err| io_refusal(&show(&self.path), err))?;
        if ident(&st) != self.parent_ident {
            return Err(changed());
        }
        // What the directories hold may have changed since resolution (another session on the
        // same root writing the piece that completes a git directory): checked again.
        let content = crate::protected::autorun::repository::content_class(
            root.path(),
            &self.parent_rel.join(&self.name),
        );
        match policy.autorun_refused_class(content) {
            Some(class) => Err(content_refusal(show(&self.path), class)),
            None => Ok(()),
        }
    }
}

/// `openat2` of a directory beneath `root`, refusing any symlink, magic link or mount crossing;
/// retried a few times on `EAGAIN` (a rename raced somewhere on the host).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn openat2_beneath(root: &OwnedFd, relative: &Path) -> Result<OwnedFd, Errno> {
    use rustix::fs::ResolveFlags;
    let relative: &Path = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    let resolve = ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV;
    let mut last = Errno::AGAIN;
    for _ in 0..4 {
        match rustix::fs::openat2(root, relative, dir_flags(), Mode::empty(), resolve) {
            Err(Errno::AGAIN) => last = Errno::AGAIN,
            other => return other,
        }
        // Retry only EAGAIN; anything else returned above.
    }
    Err(last)
}

/// Flags for the walk up to the root: `O_PATH` where available (no read permission needed).
fn up_flags() -> OFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let base = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let base = OFlags::RDONLY;
    base | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Directories are opened readable (not `O_PATH`) so that the parent can be `fsync`ed.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn normal_components(path: &Path) -> Vec<&OsStr> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

/// Under the owner's strict hooks, refuse a target that defines checks a git hook runs under
/// any of its `names` (its path first, then the names it is reachable as through symlinks).
fn check_strict_hooks(
    policy: &PathPolicy,
    names: &[PathBuf],
    shown: &str,
) -> Result<(), WriteRefusal> {
    use crate::protected::autorun::{AutorunClass, strict_hooks};
    if !policy.strict_hooks() {
        return Ok(());
    }
    let Some(name) = names
        .iter()
        .find(|name| name.file_name().is_some_and(strict_hooks::defines_checks))
    else {
        return Ok(());
    };
    let through = if Some(name) == names.first() {
        String::new()
    } else {
        format!("reachable as {} through a symlink; ", show(name))
    };
    let why = format!(
        " ({through}{} is on, and it defines checks a git hook runs)",
        strict_hooks::STRICT_HOOKS_ENV
    );
    Err(autorun_refusal(
        shown.to_string(),
        why,
        AutorunClass::GitHooks,
    ))
}

/// The refusal of a write to an auto-run place of `class`.
fn autorun_refusal(
    path: String,
    via: String,
    class: crate::protected::autorun::AutorunClass,
) -> WriteRefusal {
    WriteRefusal::AutorunPlace {
        path,
        via,
        class: class.name(),
        places: class.places(),
        env: crate::protected::autorun::ALLOW_ENV,
    }
}

/// The refusal of a write to an entry only writes refuse ([`PathPolicy::write_protection`]).
fn write_protected_refusal(path: String, why: WriteProtection) -> WriteRefusal {
    use crate::protected::autorun::{ALLOW_ENV, AutorunClass};
    match why {
        WriteProtection::InstallLocation => WriteRefusal::InstallLocation { path },
        WriteProtection::StartupLinkTarget { link } => WriteRefusal::StartupLinkTarget {
            path,
            link,
            class: AutorunClass::StartupLinks.name(),
            env: ALLOW_ENV,
        },
        WriteProtection::StartupNamed { file } => WriteRefusal::StartupNamed {
            path,
            file,
            class: AutorunClass::StartupLinks.name(),
            env: ALLOW_ENV,
        },
        WriteProtection::StartupLinkUnknowable { link } => WriteRefusal::StartupLinkUnknowable {
            path,
            link,
            class: AutorunClass::StartupLinks.name(),
            env: ALLOW_ENV,
        },
        WriteProtection::StartupLinksUnchecked { place } => WriteRefusal::StartupLinksUnchecked {
            path,
            place,
            class: AutorunClass::StartupLinks.name(),
            env: ALLOW_ENV,
        },
    }
}

/// The refusal of a write to a place that is an auto-run place by what its directories hold,
/// saying why (the path's names alone look ordinary).
fn content_refusal(path: String, class: crate::protected::autorun::AutorunClass) -> WriteRefusal {
    use crate::protected::autorun::AutorunClass;
    let why = match class {
        AutorunClass::VcsConfig => {
            " (a directory on its way holds or would hold git's HEAD, objects, refs or \
             commondir: git would take it for a repository and run what its config names)"
        }
        AutorunClass::PythonStartup => {
            " (it is in the bin/ of a Python environment, a directory holding pyvenv.cfg or \
             conda-meta/: its programs run whenever the environment is used)"
        }
        _ => "",
    };
    autorun_refusal(path, why.to_string(), class)
}

/// The policy's `.git` refusal, worded for writes.
fn git_refusal(refusal: PathRefusal) -> WriteRefusal {
    match refusal {
        PathRefusal::GitDir { path } => WriteRefusal::GitDir { path },
        other => WriteRefusal::Path(other),
    }
}

/// A permission `Mode` from `u32` bits (`mode_t` is 16 bits on macOS, 32 on Linux).
#[allow(clippy::unnecessary_cast)]
pub fn mode_bits(bits: u32) -> Mode {
    Mode::from_bits_truncate(bits as rustix::fs::RawMode)
}

#[cfg(test)]
mod alias_tests;
#[cfg(test)]
mod autorun_tests;
#[cfg(test)]
mod lint_config_tests;
#[cfg(test)]
mod tests;
