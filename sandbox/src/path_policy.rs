//! Path policy for the logical read tools: the protected set (credential stores, the gateway state
//! dir, `.git`, owner extras), lexical checks, and opening files/directories component by component
//! without following symlinks.
//!
//! Rules (DESIGN §5, reference §7):
//! - Paths must be absolute; `.`/`..`/empty components and NUL are refused, never normalised.
//! - A path is protected when a protected entry is a component-wise prefix of it (exact on Linux;
//!   case- and Unicode-normalisation-insensitive on macOS, like APFS/HFS+, see `fold_insensitive`),
//!   when any component is `.git` (any case), or when it names a private SSH host key in
//!   `/etc/ssh`. Protected entries are also compared by `(dev, ino)` while opening,
//!   so an alias (bind mount, case variant, a symlinked credential dir's target) is refused too.
//! - Opening walks from `/` with `openat(O_NOFOLLOW)`; a symlink anywhere is refused, naming the
//!   component. The final open is `O_NONBLOCK` (a FIFO cannot hang it) and the opened fd must be a
//!   regular file with exactly one link.
//! - Walks (`PathPolicy::walk`) are fd-relative: every directory is read through a descriptor
//!   opened with `O_NOFOLLOW` from its parent's descriptor, never by re-resolving a path string, so
//!   a symlink swapped into an ancestor cannot redirect the walk; `.git` and protected entries are
//!   never entered, and files are opened relative to their directory's descriptor. Read-ahead
//!   threads list directories (and `lstat` files) ahead of the visitor; the visitor still sees
//!   every entry in path order (`path_policy/walk.rs`).

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use common::outcome::OutcomeCode;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

/// Longest path accepted (Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;
/// Longest single component accepted (`NAME_MAX`).
const MAX_NAME_BYTES: usize = 255;

/// The home-relative catalogue entries (see [`crate::protected::CATALOGUE`]).
pub fn home_protected() -> impl Iterator<Item = &'static str> {
    crate::protected::CATALOGUE
        .iter()
        .filter(|e| e.anchor == crate::protected::Anchor::Home)
        .map(|e| e.path)
}

use crate::fold::fold_insensitive;
use crate::protected::SSH_HOST_KEY_DIRS;

/// Per-process files under `/proc` that expose another process's secrets (environment, memory).
#[cfg(any(target_os = "linux", target_os = "android"))]
const PROC_SECRET_NAMES: &[&str] = &["environ", "mem", "auxv", "pagemap", "kcore", "kmsg"];

/// Whether a `/proc` entry is a process's directory (`<pid>`, `self`, `thread-self`): its maps,
/// fds, cwd, cgroup and status show the gateway's, brokers' and runners' pids and internal paths,
/// so the read tools refuse all of it (commands get a procfs of their own pid namespace).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn is_process_dir(name: &[u8]) -> bool {
    name == b"self"
        || name == b"thread-self"
        || (!name.is_empty() && name.iter().all(u8::is_ascii_digit))
}

/// Why a path was refused. `code()` is the stable machine code; `Display` says which component and
/// why, mentioning only the path the caller gave (or a prefix of it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    #[error("{path}: must be an absolute path")]
    Relative { path: String },
    #[error(
        "{path}: `{component}` path components are not allowed (paths are not normalised); give the path without them"
    )]
    Traversal { path: String, component: String },
    #[error("{path}: empty path component (`//`) is not allowed")]
    EmptyComponent { path: String },
    #[error("{path}: path contains a NUL byte")]
    Nul { path: String },
    #[error("{path}: path or one of its components is too long")]
    TooLong { path: String },
    #[error(
        "{path}: is inside a `.git` directory; the read and search tools do not access Git internals"
    )]
    GitDir { path: String },
    #[error(
        "{path}: is a protected location (credentials, secrets or gateway state); access is refused"
    )]
    Protected { path: String },
    #[error("{path}: `{component}` is a symbolic link; symlinks are never followed")]
    Symlink { path: String, component: String },
    #[error("{path}: the file has {nlink} hard links; hard-linked files are refused")]
    HardLinked { path: String, nlink: u64 },
    #[error("{path}: `{component}` does not exist")]
    NotFound { path: String, component: String },
    #[error("{path}: not a regular file (it is {kind})")]
    NotAFile { path: String, kind: &'static str },
    #[error("{path}: `{component}` is not a directory")]
    NotADirectory { path: String, component: String },
    #[error("{path}: permission denied at `{component}`")]
    PermissionDenied { path: String, component: String },
    #[error(
        "{path}: is on a kernel pseudo file system ({fs}); the read tools never read process or \
         kernel state there (RunCommand, with full confinement, sees its own sandbox's /proc; \
         network_boundary says whether commands have it)"
    )]
    PseudoFileSystem { path: String, fs: &'static str },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl PathRefusal {
    /// Stable machine code.
    pub fn code(&self) -> OutcomeCode {
        match self {
            Self::GitDir { .. }
            | Self::Protected { .. }
            | Self::Symlink { .. }
            | Self::HardLinked { .. }
            | Self::PseudoFileSystem { .. } => OutcomeCode::NotPermitted,
            Self::Relative { .. }
            | Self::Traversal { .. }
            | Self::EmptyComponent { .. }
            | Self::Nul { .. }
            | Self::TooLong { .. } => OutcomeCode::InvalidArgument,
            Self::NotFound { .. } => OutcomeCode::NotFound,
            Self::NotAFile { .. } => OutcomeCode::NotAFile,
            Self::NotADirectory { .. } => OutcomeCode::NotADirectory,
            Self::PermissionDenied { .. } => OutcomeCode::PermissionDenied,
            Self::Io { .. } => OutcomeCode::IoError,
        }
    }
}

/// Which rule makes a path protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protection {
    Git,
    Protected,
}

/// The protected set and the no-follow openers. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PathPolicy {
    home: PathBuf,
    state_dir: PathBuf,
    /// Protected entries as folded component lists (every variant: as given and canonical).
    protected: Vec<Vec<Vec<u8>>>,
    /// Folded component lists of directories holding private SSH host keys.
    host_key_dirs: Vec<Vec<Vec<u8>>>,
    /// `(dev, ino)` of protected entries that existed when the policy was built.
    identities: Vec<(u64, u64)>,
    /// Their birth times where known, sorted by identity ([`birth`]).
    identity_births: Vec<((u64, u64), birth::Birth)>,
    /// Names compare case- and normalisation-insensitively ([`fold_insensitive`]): on macOS,
    /// whose default file systems match names that way.
    insensitive: bool,
    /// A directory inside a protected one that is readable anyway (the managed worktrees).
    open_subtree: Option<OpenSubtree>,
    /// Entries only writes refuse (install locations, start-up files and links' targets).
    write_only: write_only::WriteOnly,
    /// The auto-run classes the owner allowed writes to (none by default).
    autorun_allowed: crate::protected::autorun::AutorunAllowed,
    /// The owner's strict-hooks mode ([`crate::protected::autorun::strict_hooks`]).
    strict_hooks: bool,
    /// Where a write root's content goes at a merge (a worktree session's source directory):
    /// its auto-run places count in the write root at the same relative paths.
    merge_target: Option<PathBuf>,
    /// Gateways registered after the policy was built ([`Self::refresh_instances`]); shared by
    /// every clone (the write policy, the executor's).
    late: Arc<late::LateInstances>,
}

/// Why a session's working directory was refused at start. Messages name the reason, never the
/// resolved path (it may be an internal one, e.g. behind `/proc/self/root`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkingDirRefusal {
    #[error("working_directory does not exist or cannot be read")]
    NotFound,
    #[error("working_directory is not a directory")]
    NotADirectory,
    #[error(
        "working_directory resolves into a kernel pseudo file system (/proc, /sys or /dev); give a real directory"
    )]
    PseudoFileSystem,
    #[error(
        "working_directory is, or is inside, a protected location (credentials, secrets or the gateway's private state), also when reached through a symlink, a /proc link or a bind mount; choose another directory"
    )]
    Protected,
    #[error("working_directory is inside a `.git` directory; give the repository's top directory")]
    GitDir,
    #[error("working_directory changed while it was being checked; try again")]
    Changed,
}

impl WorkingDirRefusal {
    pub fn code(&self) -> OutcomeCode {
        match self {
            Self::NotFound | Self::NotADirectory | Self::Changed => OutcomeCode::InvalidArgument,
            Self::PseudoFileSystem | Self::Protected | Self::GitDir => OutcomeCode::NotPermitted,
        }
    }
}

/// A readable directory below protected ones (DESIGN §6: `<state>/worktrees` is the one part of
/// the state dir that is not protected).
#[derive(Debug, Clone)]
struct OpenSubtree {
    /// Folded components of the directory (as given and canonical).
    folded: Vec<Vec<Vec<u8>>>,
    /// The protected entries that still apply inside it (those that are not its ancestors).
    protected_inside: Vec<Vec<Vec<u8>>>,
    /// `(dev, ino)` of the protected ancestors a path into it may pass through.
    ancestor_identities: Vec<(u64, u64)>,
}

impl PathPolicy {
    /// Build the policy. `extra_protected` adds owner-configured entries; the built-ins cannot be
    /// removed. Entries that exist are also recorded by canonical path and by `(dev, ino)`.
    pub fn new(home: PathBuf, state_dir: PathBuf, extra_protected: Vec<PathBuf>) -> Self {
        Self::build(home, state_dir, extra_protected, INSENSITIVE_NAMES)
    }

    /// [`Self::new`] with the name matching chosen (tests exercise the macOS matching anywhere).
    fn build(
        home: PathBuf,
        state_dir: PathBuf,
        extra_protected: Vec<PathBuf>,
        insensitive: bool,
    ) -> Self {
        // The one rule set (`crate::protected`): catalogue, state dir, extras, host keys and
        // their mount-table aliases; the home's catalogue again under its canonical spelling.
        let set = crate::protected::protected_set(&home, &state_dir, &extra_protected);
        // Gateways registered after the set's own read of the registries show at the first
        // refresh.
        let late = Arc::new(late::LateInstances::new(
            &set,
            state_dir.clone(),
            insensitive,
        ));
        let mut entries = set.paths.clone();
        if let Some(canonical) = canonical_variant(&home) {
            entries.extend(
                crate::protected::catalogue_paths(&canonical)
                    .into_iter()
                    .filter(|p| p.starts_with(&canonical)),
            );
        }

        let mut all = Vec::new();
        let mut identities = Vec::new();
        let mut identity_births = Vec::new();
        for entry in entries {
            if !entry.is_absolute() {
                continue;
            }
            // A hung FUSE mirror's mount point by its path alone: a `stat` of it never returns.
            let by_identity = !set.is_name_only(&entry) && !crate::protected::is_hung_mount(&entry);
            if let Some(meta) = by_identity
                .then(|| std::fs::metadata(&entry).ok())
                .flatten()
            {
                use std::os::unix::fs::MetadataExt;
                identities.push((meta.dev(), meta.ino()));
                if let Some(born) = birth::of_metadata(&meta) {
                    identity_births.push(((meta.dev(), meta.ino()), born));
                }
            }
            // Other gateways' entries by name only, never followed: a symlink another account
            // put at such a name would otherwise protect its target (red team 26 B2).
            if let Some(canonical) = by_identity.then(|| canonical_variant(&entry)).flatten() {
                all.push(canonical);
            }
            all.push(entry);
        }
        let mut protected: Vec<Vec<Vec<u8>>> = all
            .iter()
            .map(|p| folded_components(p, insensitive))
            .collect();
        protected.sort();
        protected.dedup();
        identities.sort_unstable();
        identities.dedup();
        identity_births.sort_unstable();
        identity_births.dedup_by_key(|(identity, _)| *identity);

        let mut host_key_dirs = Vec::new();
        for dir in SSH_HOST_KEY_DIRS {
            let dir = PathBuf::from(dir);
            if let Some(canonical) = canonical_variant(&dir) {
                host_key_dirs.push(folded_components(&canonical, insensitive));
            }
            host_key_dirs.push(folded_components(&dir, insensitive));
        }
        host_key_dirs.dedup();

        Self {
            home,
            state_dir,
            protected,
            host_key_dirs,
            identities,
            identity_births,
            open_subtree: None,
            insensitive,
            write_only: write_only::WriteOnly::default(),
            autorun_allowed: crate::protected::autorun::AutorunAllowed::NONE,
            strict_hooks: false,
            merge_target: None,
            late,
        }
    }

    /// Bring the other gateways' state dirs up to date from the instance registries (before each
    /// tool call: a gateway started after this policy is protected from then on). A registry
    /// that cannot be read adds nothing and takes nothing away.
    pub fn refresh_instances(&self) {
        self.late.refresh()
    }

    /// `masked` (sorted and without duplicates, as [`crate::masked_paths`] returns it) plus the
    /// state dirs of gateways registered after this policy was built: what a new command hides.
    pub fn with_late_masks(&self, masked: &[PathBuf]) -> Vec<PathBuf> {
        let late = self.late.paths();
        let mut out = masked.to_vec();
        // Nothing late (the common case): `masked` as `masked_paths` made it, sorted and without
        // duplicates already; sorting ~1,100 `Path`s again cost each command ≈0.17 ms.
        if late.is_empty() {
            return out;
        }
        out.extend(late.iter().cloned());
        out.sort();
        out.dedup();
        out
    }

    /// The directory write roots merge into ([`Self::merge_target`]).
    pub fn with_merge_target(mut self, target: PathBuf) -> Self {
        self.merge_target = Some(target);
        self
    }

    /// The directory write roots merge into: a worktree session's source directory.
    pub fn merge_target(&self) -> Option<&Path> {
        self.merge_target.as_deref()
    }

    /// Allow writes to these auto-run classes (the owner's opt-in,
    /// [`crate::protected::autorun::ALLOW_ENV`]).
    pub fn with_autorun_allowed(
        mut self,
        allowed: crate::protected::autorun::AutorunAllowed,
    ) -> Self {
        self.autorun_allowed = allowed;
        self
    }

    /// The auto-run class a write to `path` would create or change, unless the owner allowed it
    /// ([`crate::protected::autorun`]).
    pub fn autorun_refused(&self, path: &Path) -> Option<crate::protected::autorun::AutorunClass> {
        self.autorun_refused_class(crate::protected::autorun::autorun_class(path))
    }

    /// `class` unless the owner allowed it.
    pub fn autorun_refused_class(
        &self,
        class: Option<crate::protected::autorun::AutorunClass>,
    ) -> Option<crate::protected::autorun::AutorunClass> {
        class.filter(|class| !self.autorun_allowed.allows(*class))
    }

    /// Refuse writes to the definitions of the checks git hooks run
    /// ([`crate::protected::autorun::strict_hooks`], the owner's opt-in).
    pub fn with_strict_hooks(mut self, strict: bool) -> Self {
        self.strict_hooks = strict;
        self
    }

    /// Whether strict hooks are on and `git_hooks` is not allowed: the checks' definitions are
    /// refused.
    pub fn strict_hooks(&self) -> bool {
        self.strict_hooks
            && self
                .autorun_refused_class(Some(crate::protected::autorun::AutorunClass::GitHooks))
                .is_some()
    }

    /// Resolve a session's working directory by identity: canonical (every symlink and `/proc`
    /// magic link followed, as the sandboxes will see it), then opened from `/` without following
    /// anything, every component's `(dev, ino)` checked. Refused when it, or a directory above
    /// it, is protected by name or identity (mount-table aliases are in the set), when it lies
    /// in `/proc`, `/sys` or `/dev`, or when it changed between the two looks. Returns the
    /// canonical path, which the session then uses.
    pub fn resolve_working_directory(&self, given: &Path) -> Result<PathBuf, WorkingDirRefusal> {
        let lexical = |path: &Path| match self.protection(path) {
            Some(Protection::Git) => Err(WorkingDirRefusal::GitDir),
            Some(Protection::Protected) => Err(WorkingDirRefusal::Protected),
            None => Ok(()),
        };
        lexical(given)?;
        let canonical = std::fs::canonicalize(given).map_err(|_| WorkingDirRefusal::NotFound)?;
        if let Some(Component::Normal(top)) = canonical.components().nth(1)
            && [OsStr::new("proc"), OsStr::new("sys"), OsStr::new("dev")].contains(&top)
        {
            return Err(WorkingDirRefusal::PseudoFileSystem);
        }
        lexical(&canonical)?;
        let (_, opened) = self
            .open_dir_no_follow(&canonical)
            .map_err(|refusal| match refusal {
                PathRefusal::Protected { .. } => WorkingDirRefusal::Protected,
                PathRefusal::GitDir { .. } => WorkingDirRefusal::GitDir,
                PathRefusal::NotADirectory { .. } => WorkingDirRefusal::NotADirectory,
                PathRefusal::PseudoFileSystem { .. } => WorkingDirRefusal::PseudoFileSystem,
                PathRefusal::Symlink { .. } => WorkingDirRefusal::Changed,
                _ => WorkingDirRefusal::NotFound,
            })?;
        // The directory the caller named (following its links) must be the one checked.
        let named = std::fs::metadata(given).map_err(|_| WorkingDirRefusal::Changed)?;
        use std::os::unix::fs::MetadataExt;
        if (named.dev(), named.ino()) != (opened.dev(), opened.ino()) {
            return Err(WorkingDirRefusal::Changed);
        }
        Ok(canonical)
    }

    /// Make `dir` (and everything below it) readable even though a protected entry (the state
    /// dir) contains it. Only the lexical path into `dir` may pass through the protected
    /// ancestors' directories; the same directories reached by another path (a bind mount, an
    /// alias) stay refused by identity. Protected entries inside `dir` still apply.
    pub fn with_open_subtree(mut self, dir: PathBuf) -> Self {
        let mut variants = vec![self.folded_components(&dir)];
        if let Some(canonical) = canonical_variant(&dir) {
            variants.push(self.folded_components(&canonical));
        }
        variants.dedup();
        let protected_inside = self
            .protected
            .iter()
            .filter(|p| !variants.iter().any(|v| v.starts_with(p)))
            .cloned()
            .collect();
        let mut ancestor_identities = Vec::new();
        for ancestor in dir.ancestors().skip(1) {
            if self.is_protected(ancestor)
                && let Ok(meta) = std::fs::metadata(ancestor)
            {
                use std::os::unix::fs::MetadataExt;
                ancestor_identities.push((meta.dev(), meta.ino()));
            }
        }
        self.open_subtree = Some(OpenSubtree {
            folded: variants,
            protected_inside,
            ancestor_identities,
        });
        self
    }

    /// Whether a walk along `folded` (a path inside the open subtree) may pass through the
    /// protected directory `(dev, ino)`.
    fn passes_into_open_subtree(&self, path: &Path, dev: u64, ino: u64) -> bool {
        let Some(open) = &self.open_subtree else {
            return false;
        };
        let folded = self.folded_components(path);
        open.folded.iter().any(|o| folded.starts_with(o))
            && open.ancestor_identities.contains(&(dev, ino))
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Lexical checks only: absolute, no `.`/`..`/empty components, no NUL, not too long, not
    /// protected. Touches no file system.
    pub fn check(&self, path: &Path) -> Result<(), PathRefusal> {
        let shown = show(path);
        let bytes = path.as_os_str().as_bytes();
        if bytes.contains(&0) {
            return Err(PathRefusal::Nul {
                path: shown.escape_debug().to_string(),
            });
        }
        if bytes.len() > MAX_PATH_BYTES {
            return Err(PathRefusal::TooLong { path: shown });
        }
        let Some(rest) = bytes.strip_prefix(b"/") else {
            return Err(PathRefusal::Relative { path: shown });
        };
        if !rest.is_empty() {
            let segments: Vec<&[u8]> = rest.split(|b| *b == b'/').collect();
            let last = segments.len() - 1;
            for (i, segment) in segments.iter().enumerate() {
                match *segment {
                    b"" if i == last => {} // one trailing slash is tolerated
                    b"" => return Err(PathRefusal::EmptyComponent { path: shown }),
                    b"." | b".." => {
                        return Err(PathRefusal::Traversal {
                            path: shown,
                            component: String::from_utf8_lossy(segment).into_owned(),
                        });
                    }
                    s if s.len() > MAX_NAME_BYTES => {
                        return Err(PathRefusal::TooLong { path: shown });
                    }
                    _ => {}
                }
            }
        }
        match self.protection(path) {
            Some(Protection::Git) => Err(PathRefusal::GitDir { path: shown }),
            Some(Protection::Protected) => Err(PathRefusal::Protected { path: shown }),
            None => Ok(()),
        }
    }

    /// Whether `path` is protected by name. Fails closed: a relative path or one containing `..`
    /// counts as protected.
    pub fn is_protected(&self, path: &Path) -> bool {
        self.protection(path).is_some()
    }

    /// Whether an opened object with this `(dev, ino)` is one of the protected entries.
    pub fn is_protected_identity(&self, dev: u64, ino: u64) -> bool {
        self.identities.binary_search(&(dev, ino)).is_ok()
    }

    /// [`Self::is_protected_identity`] for an object open as `fd`: not when its birth time,
    /// and the entry's, are known and differ (the number was reused after the entry was
    /// deleted; [`birth`]).
    pub fn is_protected_object(&self, fd: impl std::os::fd::AsFd, dev: u64, ino: u64) -> bool {
        if !self.is_protected_identity(dev, ino) {
            return false;
        }
        let recorded = self
            .identity_births
            .binary_search_by_key(&(dev, ino), |(identity, _)| *identity)
            .ok()
            .map(|i| self.identity_births[i].1);
        birth::same_object(recorded, recorded.and_then(|_| birth::of_fd(fd.as_fd())))
    }

    fn protection(&self, path: &Path) -> Option<Protection> {
        if !path.is_absolute() {
            return Some(Protection::Protected);
        }
        let mut comps: Vec<&OsStr> = Vec::new();
        for component in path.components() {
            match component {
                Component::Normal(name) => comps.push(name),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => return Some(Protection::Protected),
            }
        }
        if comps.iter().any(|c| self.is_git(c)) {
            return Some(Protection::Git);
        }
        let folded: Vec<Vec<u8>> = comps.iter().map(|c| fold(c, self.insensitive)).collect();
        let protected = match &self.open_subtree {
            Some(open) if open.folded.iter().any(|o| folded.starts_with(o)) => {
                &open.protected_inside
            }
            _ => &self.protected,
        };
        if protected.iter().any(|p| folded.starts_with(p)) || self.late.covers(&folded) {
            return Some(Protection::Protected);
        }
        for dir in &self.host_key_dirs {
            if folded.len() > dir.len()
                && folded.starts_with(dir)
                && crate::protected::is_host_key_name(&folded[dir.len()])
            {
                return Some(Protection::Protected);
            }
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if folded.first().is_some_and(|c| c.as_slice() == b"proc")
            && (folded[1..].iter().any(|c| {
                PROC_SECRET_NAMES
                    .iter()
                    .any(|s| c.as_slice() == s.as_bytes())
            }) || folded.get(1).is_some_and(|c| is_process_dir(c)))
        {
            return Some(Protection::Protected);
        }
        None
    }

    /// Open a regular file for reading without following any symlink. The fd is checked, not the
    /// path: regular file, exactly one link, not a protected identity.
    pub fn open_file_no_follow(&self, path: &Path) -> Result<(File, Metadata), PathRefusal> {
        self.check(path)?;
        let shown = show(path);
        let (parent, name) = self.walk_to_parent(path, &shown)?;
        let Some(name) = name else {
            return Err(PathRefusal::NotAFile {
                path: shown,
                kind: "a directory",
            });
        };
        // Look before opening so that devices and FIFOs are never opened at all.
        let before = match rustix::fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(err) => return Err(classify(&parent, &name, path, &shown, err, false)),
        };
        let kind = FileType::from_raw_mode(before.st_mode);
        if kind == FileType::Symlink {
            return Err(PathRefusal::Symlink {
                component: shown.clone(),
                path: shown,
            });
        }
        if kind != FileType::RegularFile {
            return Err(PathRefusal::NotAFile {
                path: shown,
                kind: kind_name(kind),
            });
        }
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(&parent, &name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NXIO) => {
                return Err(PathRefusal::NotAFile {
                    path: shown,
                    kind: "a socket or device",
                });
            }
            Err(err) => return Err(classify(&parent, &name, path, &shown, err, false)),
        };
        let after = rustix::fs::fstat(&fd).map_err(|err| io_refusal(&shown, err))?;
        let kind = FileType::from_raw_mode(after.st_mode);
        if kind != FileType::RegularFile {
            return Err(PathRefusal::NotAFile {
                path: shown,
                kind: kind_name(kind),
            });
        }
        if ident(&after) != ident(&before) {
            return Err(PathRefusal::Io {
                path: shown,
                message: "the file changed while it was being opened; try again".into(),
            });
        }
        let nlink = nlink(&after);
        if nlink != 1 {
            return Err(PathRefusal::HardLinked { path: shown, nlink });
        }
        self.finish_open(fd, &after, shown)
    }

    /// Open a directory (read-only) without following any symlink; used for search roots.
    pub fn open_dir_no_follow(&self, path: &Path) -> Result<(File, Metadata), PathRefusal> {
        self.check(path)?;
        let shown = show(path);
        let (parent, name) = self.walk_to_parent(path, &shown)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match &name {
            None => rustix::fs::openat(&parent, ".", flags, Mode::empty())
                .map_err(|err| io_refusal(&shown, err))?,
            Some(name) => match rustix::fs::openat(&parent, name, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(err) => return Err(classify(&parent, name, path, &shown, err, true)),
            },
        };
        let st = rustix::fs::fstat(&fd).map_err(|err| io_refusal(&shown, err))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(PathRefusal::NotADirectory {
                component: shown.clone(),
                path: shown,
            });
        }
        self.finish_open(fd, &st, shown)
    }

    /// Last check of an opened file or directory: its identity must not be a protected one (an
    /// alias, a bind mount, a renamed credential dir). Then hand it out with its metadata.
    fn finish_open(
        &self,
        fd: rustix::fd::OwnedFd,
        st: &Stat,
        shown: String,
    ) -> Result<(File, Metadata), PathRefusal> {
        let (dev, ino) = ident(st);
        if self.is_protected_object(&fd, dev, ino) {
            return Err(PathRefusal::Protected { path: shown });
        }
        if let Some(fs) = pseudo_fs(&fd) {
            return Err(PathRefusal::PseudoFileSystem { path: shown, fs });
        }
        let file = File::from(fd);
        let meta = file.metadata().map_err(|err| PathRefusal::Io {
            path: shown,
            message: err.to_string(),
        })?;
        Ok((file, meta))
    }

    /// Open every directory from `/` down to the parent of the last component, each with
    /// `O_DIRECTORY|O_NOFOLLOW`, and return the parent fd and the last name (`None` for `/`).
    fn walk_to_parent(
        &self,
        path: &Path,
        shown: &str,
    ) -> Result<(OwnedFd, Option<OsString>), PathRefusal> {
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        let root = rustix::fs::openat(rustix::fs::CWD, "/", dir_walk_flags(), Mode::empty())
            .map_err(|err| io_refusal(shown, err))?;
        let Some((last, intermediate)) = names.split_last() else {
            return Ok((root, None));
        };
        let mut current = root;
        let mut prefix = PathBuf::from("/");
        for name in intermediate {
            prefix.push(name);
            let next = match rustix::fs::openat(&current, *name, dir_walk_flags(), Mode::empty()) {
                Ok(fd) => fd,
                Err(err) => return Err(classify(&current, name, &prefix, shown, err, true)),
            };
            let st = rustix::fs::fstat(&next).map_err(|err| io_refusal(shown, err))?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                // O_PATH|O_NOFOLLOW can open a symlink itself; never treat it as a directory.
                return Err(classify(
                    &current,
                    name,
                    &prefix,
                    shown,
                    Errno::NOTDIR,
                    true,
                ));
            }
            let (dev, ino) = ident(&st);
            if self.is_protected_identity(dev, ino)
                && !self.passes_into_open_subtree(path, dev, ino)
            {
                return Err(PathRefusal::Protected {
                    path: shown.to_string(),
                });
            }
            current = next;
        }
        Ok((current, Some(last.to_os_string())))
    }
}

/// The kernel pseudo file system an opened object lies on, by `fstatfs` magic (Linux): any type
/// of the one list, `protected::pseudo_fs::PSEUDO_FILE_SYSTEMS` (procfs — every mount of it,
/// wherever: a second procfs showed the gateway's `/proc/<pid>/maps` —, sysfs, cgroup, nsfs…).
/// By type, not path, so no mount point or bind mount reaches them. `None` elsewhere, or when
/// `fstatfs` fails on another OS.
pub(crate) fn pseudo_fs(fd: &impl std::os::fd::AsFd) -> Option<&'static str> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // An unreadable file system type is refused like a pseudo one: fail closed.
        let Ok(stat) = rustix::fs::fstatfs(fd) else {
            return Some("unknown");
        };
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let kind = stat.f_type as i64;
        crate::protected::pseudo_fs::by_magic(kind)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = fd;
        None
    }
}

mod birth;
mod late;
mod walk;
mod write_only;

pub use walk::{
    EntryKind, MAX_WALK_DEPTH, WalkControl, WalkDir, WalkEntry, WalkOptions, WalkStats,
    default_walk_threads,
};
pub use write_only::WriteProtection;

/// Flags for intermediate directories: `O_PATH` where available (no read permission needed).
fn dir_walk_flags() -> OFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let base = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let base = OFlags::RDONLY;
    base | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Turn a failed `openat` of `name` (under `dir`, shown to the caller as `component`) into a refusal
/// that names the component. The extra `lstat` only chooses the message; the refusal itself came
/// from the kernel.
pub(crate) fn classify(
    dir: &OwnedFd,
    name: &OsStr,
    component: &Path,
    shown: &str,
    err: Errno,
    want_dir: bool,
) -> PathRefusal {
    let path = shown.to_string();
    let component = show(component);
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let kind = FileType::from_raw_mode(st.st_mode);
            if kind == FileType::Symlink {
                return PathRefusal::Symlink { path, component };
            }
            if want_dir && kind != FileType::Directory {
                return PathRefusal::NotADirectory { path, component };
            }
        }
        Err(Errno::NOENT) => return PathRefusal::NotFound { path, component },
        Err(_) => {}
    }
    match err {
        Errno::LOOP => PathRefusal::Symlink { path, component },
        Errno::NOENT => PathRefusal::NotFound { path, component },
        Errno::NOTDIR => PathRefusal::NotADirectory { path, component },
        Errno::ACCESS | Errno::PERM => PathRefusal::PermissionDenied { path, component },
        Errno::NAMETOOLONG => PathRefusal::TooLong { path },
        Errno::NXIO => PathRefusal::NotAFile {
            path,
            kind: "a socket or device",
        },
        other => io_refusal(&path, other),
    }
}

pub(crate) fn io_refusal(shown: &str, err: Errno) -> PathRefusal {
    PathRefusal::Io {
        path: shown.to_string(),
        message: std::io::Error::from(err).to_string(),
    }
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "an unknown kind of file",
    }
}

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
pub(crate) fn ident(st: &Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn nlink(st: &Stat) -> u64 {
    st.st_nlink as u64
}

/// A path for messages: one unambiguous line ([`crate::escape::path_for_display`]).
pub(crate) fn show(path: &Path) -> String {
    crate::escape::path_for_display(path).into_owned()
}

/// Whether a name a write would use is `.git` in any spelling a case- and normalisation-
/// insensitive file system opens as `.git` (`.GIT`, `.g\u{200c}it`), on every platform, as the
/// auto-run names are matched: such a file system can be mounted anywhere (macOS, ext4
/// casefold, vfat), and refusing the variant elsewhere costs nothing real.
pub(crate) fn is_git_name(name: &OsStr) -> bool {
    is_git_name_in(name, true)
}

/// Whether `name` is `.git`: in any ASCII case everywhere; under insensitive matching also in any
/// Unicode case or normalisation, or with code points HFS+ ignores (`.g\u{200c}it`).
fn is_git_name_in(name: &OsStr, insensitive: bool) -> bool {
    let bytes = name.as_bytes();
    if bytes.eq_ignore_ascii_case(b".git") {
        return true;
    }
    insensitive && !bytes.is_ascii() && fold_insensitive(bytes) == b".git"
}

/// Whether names are matched case- and normalisation-insensitively on this platform: macOS
/// (APFS and HFS+ are insensitive by default). Elsewhere names are matched exactly.
const INSENSITIVE_NAMES: bool = cfg!(target_os = "macos");

/// Name comparison key: [`fold_insensitive`] under insensitive matching, else the bytes.
fn fold(name: &OsStr, insensitive: bool) -> Vec<u8> {
    if insensitive {
        fold_insensitive(name.as_bytes())
    } else {
        name.as_bytes().to_vec()
    }
}

fn folded_components(path: &Path, insensitive: bool) -> Vec<Vec<u8>> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(fold(name, insensitive)),
            _ => None,
        })
        .collect()
}

impl PathPolicy {
    /// [`is_git_name`] under this policy's name matching.
    fn is_git(&self, name: &OsStr) -> bool {
        is_git_name_in(name, self.insensitive)
    }

    fn folded_components(&self, path: &Path) -> Vec<Vec<u8>> {
        folded_components(path, self.insensitive)
    }
}

/// The canonical spelling of `path` when it differs (symlinked home, `/etc` -> `/private/etc`),
/// also when it does not exist: every link on the way followed as far as it exists, the rest
/// joined as written (red team 28 B3: a dangling `~/.config` link, two missing levels below a
/// linked one).
fn canonical_variant(path: &Path) -> Option<PathBuf> {
    let canonical = crate::look::canonicalize(path)
        .ok()
        .or_else(|| crate::protected::autorun::link_target::resolved(path))?;
    (canonical != path).then_some(canonical)
}

#[cfg(test)]
mod tests;
