//! What a path inside a write root is reachable as through the root's symlinks (issue 23,
//! F2): with `.claude -> cfg/cl` in a repository, `cfg/cl/settings.json` *is* Claude Code's
//! settings, and with `.envrc -> notes/x`, `notes/x` is direnv's hook. The write policy refuses
//! a target when any name it is reachable as is an auto-run place.
//!
//! [`Symlinks::scan`] lists every symlink below the root (not following any, not crossing
//! mounts, skipping `.git` — a clone never brings symlinks there, so those are the owner's own
//! set-up — and protected directories) and resolves each to the real path it names, root-relative: chains, `..` and
//! absolute targets are followed through the real file system, a missing part is taken
//! lexically (a later Write may create it as a real directory), and a target outside the root
//! is dropped (nothing outside is ever written). [`Symlinks::aliases`] then gives every path
//! that reaches a target: the link's own path plus the rest, repeated for chains.
//! Sessions cannot add symlinks to the real tree (Write makes regular files, commands write
//! only their discarded layer), so a scan stays true for the session's own doing; the write
//! policy rescans when the last scan is [`MAX_AGE`] old, which bounds what the owner's own
//! changes meanwhile can hide.

use std::collections::{HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::AutorunClass;
use super::gitconfig::Scope;
use super::link_target::{Resolved, resolve};

/// The rc files yarn reads (2+ and 1), each of which may name the program every `yarn` runs.
const YARN_RC_FILES: [&str; 2] = [".yarnrc.yml", ".yarnrc"];

/// How old a scan may be before a write rescans the root.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// Most directories a scan visits; a bigger tree refuses writes (fail closed).
const MAX_DIRS: usize = 500_000;

/// Deepest directory a scan descends to; a deeper tree refuses writes (fail closed).
const MAX_DEPTH: usize = 256;

/// Most names one path may be reachable as.
const MAX_ALIASES: usize = 4096;

/// Why a scan or an alias search could not finish: the write is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incomplete {
    #[error("the write root has more than {MAX_DIRS} directories to look for symlinks in")]
    TooManyDirs,
    #[error("the write root is more than {MAX_DEPTH} directories deep")]
    TooDeep,
    #[error("the path is reachable under more than {MAX_ALIASES} names through symlinks")]
    TooManyAliases,
    #[error("the write root could not be listed ({0})")]
    Io(String),
}

/// One symlink: where it is and the real path it names, both relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    at: PathBuf,
    /// Folded components of the resolved target, for prefix matching.
    to: Vec<String>,
}

/// The symlinks of a write root whose targets lie inside it, the links whose target depends
/// on who reads it, and the places the root's repositories name ([`super::gitconfig`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symlinks {
    links: Vec<Link>,
    /// Links (root-relative) through `/proc/self/…`, `/dev/fd/…`: they name what the reader's
    /// working directory or descriptors are, so they may reach anything in the root.
    context: Vec<PathBuf>,
    /// Folded components of each git-named place, with its class and why.
    places: Vec<(Vec<String>, AutorunClass, String, Scope)>,
}

impl Symlinks {
    /// List and resolve every symlink below `root` (held open; `root_path` is its real path),
    /// not descending into directories `skip` names by `(dev, ino)` (the protected set: the
    /// state dir inside a root is no project content, and its listing is private).
    pub fn scan(
        root: BorrowedFd<'_>,
        root_path: &Path,
        merge_target: Option<&Path>,
        skip: &dyn Fn(u64, u64) -> bool,
    ) -> Result<Self, Incomplete> {
        let mut found = Self::scan_tree(root, root_path, skip)?;
        // What the root holds reaches the repository's other checkouts (its main tree, its
        // linked worktrees) and the directory a worktree session was started on
        // (`merge_target`, whatever the layout) through a merge or a branch sync: a hook
        // symlink into one of them (`.git/hooks/pre-commit -> ../../scripts/x`) or a link
        // committed with an absolute target there names the file the root holds at the same
        // relative path. Each is scanned like the root (fail closed when one is too big).
        let mut trees: Vec<PathBuf> = merge_target.map(Path::to_path_buf).into_iter().collect();
        trees.extend(super::gitconfig::checkouts(root_path));
        trees.sort();
        trees.dedup();
        for tree in trees.iter().filter(|tree| tree.as_path() != root_path) {
            let io = |err: rustix::io::Errno| Incomplete::Io(err.to_string());
            crate::look::answers(tree).map_err(|err| Incomplete::Io(err.to_string()))?;
            let fd = rustix::fs::open(tree, dir_flags(), Mode::empty()).map_err(io)?;
            let of_tree = Self::scan_tree(fd.as_fd(), tree, skip)?;
            found.links.extend(of_tree.links);
            found.context.extend(of_tree.context);
            found.places.extend(of_tree.places);
        }
        Ok(found)
    }

    /// [`Self::scan`] of one tree.
    fn scan_tree(
        root: BorrowedFd<'_>,
        root_path: &Path,
        skip: &dyn Fn(u64, u64) -> bool,
    ) -> Result<Self, Incomplete> {
        let io = |err: rustix::io::Errno| Incomplete::Io(err.to_string());
        let (dev, _) = crate::path_policy::ident(&rustix::fs::fstat(root).map_err(io)?);
        let top = rustix::fs::openat(root, ".", dir_flags(), Mode::empty()).map_err(io)?;
        let mut scan = Scan {
            root_path,
            skip,
            dev,
            dirs: 0,
            links: Vec::new(),
            context: Vec::new(),
            dot_gits: Vec::new(),
            yarnrcs: Vec::new(),
        };
        scan.walk(top, &PathBuf::new(), 0)?;
        let mut places: Vec<_> = super::gitconfig::places(root_path, &scan.dot_gits)
            .into_iter()
            .map(|place| (fold_all(&place.at), place.class, place.why, place.scope))
            .collect();
        // yarn reads its rc files in the project and its ancestors; the program they name runs.
        let ancestors = root_path
            .ancestors()
            .skip(1)
            .flat_map(|dir| YARN_RC_FILES.map(|name| dir.join(name)));
        for rc in scan
            .yarnrcs
            .iter()
            .map(|rel| root_path.join(rel))
            .chain(ancestors)
        {
            let Some(text) = super::read_text(&rc) else {
                continue;
            };
            let (Some(program), Some(dir)) = (super::repository::yarn_path(&text), rc.parent())
            else {
                continue;
            };
            if let Resolved::Inside(at) = resolve(root_path, Path::new("/"), &dir.join(program)) {
                let why = "the program a .yarnrc.yml's yarnPath or a .yarnrc's yarn-path names";
                let why = why.to_string();
                places.push((
                    fold_all(&at),
                    AutorunClass::ToolchainConfig,
                    why,
                    Scope::Below,
                ));
            }
        }
        Ok(Self {
            links: scan.links,
            context: scan.context,
            places,
        })
    }

    /// Every auto-run class `path` (root-relative, real; its own names already checked by the
    /// caller) is reached as, with how: through a symlink (each name it is reachable as,
    /// classified by name or as a venv's `bin/`), through a link whose target depends on the
    /// reader (any tail of the path below the link's name), or as a place git's configuration
    /// names. Also every other name it is reachable as ([`Self::aliases`]), so that rules
    /// keyed on a name other than the auto-run classes (a `package.json`'s hook sections) see
    /// them too.
    pub fn reached_as(&self, root: &Path, path: &Path) -> Result<Reached, Incomplete> {
        let mut out = Vec::new();
        let aliases = self.aliases(path)?;
        let mut maybe: Vec<PathBuf> = Vec::new();
        for alias in std::iter::once(path).chain(aliases.iter().map(PathBuf::as_path)) {
            let shown = crate::path_policy::show(&root.join(alias));
            if alias != path {
                let class = super::autorun_class(&root.join(alias))
                    .or_else(|| super::repository::venv_class(root, alias));
                if let Some(class) = class {
                    out.push((class, format!(" (reachable as {shown} through a symlink)")));
                }
            }
            let folded = fold_all(alias);
            for (place, class, why, scope) in &self.places {
                if covers(place, *scope, &folded) {
                    out.push((*class, format!(" ({shown} is {why})")));
                }
            }
            let names = normal(alias);
            for link in &self.context {
                let shown_link = crate::path_policy::show(&root.join(link));
                for start in 0..=names.len() {
                    // Every such tail may be a name of the file (a `package.json` link through
                    // `/proc/self/cwd` is compared whatever it reaches).
                    let mut tail = link.clone();
                    tail.extend(&names[start..]);
                    if maybe.len() >= MAX_ALIASES {
                        return Err(Incomplete::TooManyAliases);
                    }
                    maybe.push(tail);
                    let mut reached = root.join(link);
                    reached.extend(&names[start..]);
                    if let Some(class) = super::autorun_class(&reached) {
                        out.push((
                            class,
                            format!(
                                " (the symlink {shown_link} names a place that depends on \
                                 who reads it, so it may reach this file)"
                            ),
                        ));
                        break;
                    }
                }
            }
        }
        let mut aliases = aliases;
        aliases.extend(maybe);
        Ok(Reached {
            places: out,
            aliases,
        })
    }

    /// Every other root-relative path that reaches `path` (root-relative, real) through the
    /// symlinks, each symlink used once per chain.
    pub fn aliases(&self, path: &Path) -> Result<Vec<PathBuf>, Incomplete> {
        let mut out = Vec::new();
        let mut seen: HashSet<PathBuf> = HashSet::from([path.to_path_buf()]);
        let mut queue = VecDeque::from([(path.to_path_buf(), Vec::<usize>::new())]);
        while let Some((current, used)) = queue.pop_front() {
            let names: Vec<&OsStr> = normal(&current);
            let folded: Vec<String> = names.iter().map(|n| super::fold(n)).collect();
            for (i, link) in self.links.iter().enumerate() {
                if used.contains(&i) || !folded.starts_with(&link.to) {
                    continue;
                }
                let mut alias = link.at.clone();
                alias.extend(&names[link.to.len()..]);
                if seen.insert(alias.clone()) {
                    if seen.len() > MAX_ALIASES {
                        return Err(Incomplete::TooManyAliases);
                    }
                    out.push(alias.clone());
                    let mut chain = used.clone();
                    chain.push(i);
                    queue.push_back((alias, chain));
                }
            }
        }
        Ok(out)
    }

    /// How many symlinks into the root, reader-dependent links and git-named places were found.
    pub fn len(&self) -> usize {
        self.links.len() + self.context.len() + self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a path is reached as ([`Symlinks::reached_as`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reached {
    /// Each auto-run class it is reached as, with how (for the refusal).
    pub places: Vec<(AutorunClass, String)>,
    /// Every other root-relative name it is reachable as through the symlinks, and every name
    /// a link whose target depends on the reader may reach it as.
    pub aliases: Vec<PathBuf>,
}

struct Scan<'a> {
    root_path: &'a Path,
    skip: &'a dyn Fn(u64, u64) -> bool,
    dev: u64,
    dirs: usize,
    links: Vec<Link>,
    context: Vec<PathBuf>,
    /// Root-relative `.git` entries (directories or gitfiles), which are not descended into.
    dot_gits: Vec<PathBuf>,
    /// Root-relative `.yarnrc.yml` files.
    yarnrcs: Vec<PathBuf>,
}

impl Scan<'_> {
    /// Depth first, one open directory per level.
    fn walk(&mut self, dir: OwnedFd, rel: &Path, depth: usize) -> Result<(), Incomplete> {
        if depth > MAX_DEPTH {
            return Err(Incomplete::TooDeep);
        }
        self.dirs += 1;
        if self.dirs > MAX_DIRS {
            return Err(Incomplete::TooManyDirs);
        }
        let io = |err: rustix::io::Errno| Incomplete::Io(err.to_string());
        let listing = rustix::fs::Dir::new(rustix::io::dup(&dir).map_err(io)?).map_err(io)?;
        let mut subdirs: Vec<OsString> = Vec::new();
        for entry in listing {
            let entry = entry.map_err(io)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            // A FUSE mount found hung is never asked (`crate::look`); what it holds is
            // protected whole by its path.
            if name == "."
                || name == ".."
                || crate::protected::is_hung_mount(&self.root_path.join(rel).join(name))
            {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => FileType::from_raw_mode(st.st_mode),
                        Err(_) => continue,
                    }
                }
                kind => kind,
            };
            if crate::path_policy::is_git_name(name) {
                self.dot_gits.push(rel.join(name));
                continue;
            }
            match kind {
                FileType::Directory => subdirs.push(name.to_os_string()),
                FileType::RegularFile if YARN_RC_FILES.contains(&super::fold(name).as_str()) => {
                    self.yarnrcs.push(rel.join(name));
                }
                FileType::Symlink => {
                    let Ok(target) = rustix::fs::readlinkat(&dir, name, Vec::new()) else {
                        continue;
                    };
                    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    let parent = self.root_path.join(rel);
                    match resolve(self.root_path, &parent, &target) {
                        Resolved::Inside(to) => self.links.push(Link {
                            at: rel.join(name),
                            to: fold_all(&to),
                        }),
                        Resolved::Context => self.context.push(rel.join(name)),
                        Resolved::Outside => {}
                    }
                }
                _ => {}
            }
        }
        for name in subdirs {
            // A directory that vanished or cannot be read is not one a tool opens either.
            let Ok(sub) = rustix::fs::openat(&dir, &name, dir_flags(), Mode::empty()) else {
                continue;
            };
            match rustix::fs::fstat(&sub).map(|st| crate::path_policy::ident(&st)) {
                Ok((dev, ino)) if dev == self.dev && !(self.skip)(dev, ino) => {}
                _ => continue,
            }
            self.walk(sub, &rel.join(&name), depth + 1)?;
        }
        Ok(())
    }
}

/// The folded names of `path`, for prefix matching.
/// Whether a write to `path` (folded components) touches the place `place` covers.
pub(super) fn covers(place: &[String], scope: Scope, path: &[String]) -> bool {
    if scope == Scope::AtAnyDepth {
        return (0..path.len()).any(|at| path[at..].starts_with(place));
    }
    if !path.starts_with(place) {
        return false;
    }
    scope.reaches(&path[place.len()..])
}

pub(super) fn fold_all(path: &Path) -> Vec<String> {
    normal(path).iter().map(|n| super::fold(n)).collect()
}

fn normal(path: &Path) -> Vec<&OsStr> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}
