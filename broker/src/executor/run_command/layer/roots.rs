//! Which directories a command sees copy-on-write, and how a root holding mounts is split.
//!
//! The kernel takes no directory with mounts below it as an overlay's lower layer when the
//! mounts are locked to the command's namespace (they all are: it is a new user namespace), so
//! one FUSE mount, bind or tmpfs anywhere inside the owner's HOME made every command of every
//! session fail (red team 46). Such a root is split instead: each subdirectory with no mount
//! inside gets an overlay of its own; the mounts themselves, and the directories leading to
//! them (their files included), stay read-only. The layer dir is such a hole too.

use std::path::{Path, PathBuf};

/// Most overlays one command gets once mounts split its roots: each is a mount made in every
/// command's namespace; a home holds tens of directories at a level, not hundreds. Directories
/// past it (in path order, after the working directory's) stay read-only.
const MOST_ROOTS: usize = 64;

/// The directories a command sees copy-on-write, and what of them stays read-only.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Roots {
    pub dirs: Vec<PathBuf>,
    /// Mounts inside the roots the overlays go around: the command sees them, and the
    /// directories leading to them, read-only.
    pub around: Vec<PathBuf>,
    /// Directories past [`MOST_ROOTS`], left read-only.
    pub past_most: usize,
}

impl Roots {
    /// The command header's note when roots were split (`None`: every root is whole).
    pub fn note(&self) -> Option<String> {
        if self.around.is_empty() {
            return None;
        }
        let shown: Vec<String> = self
            .around
            .iter()
            .take(3)
            .map(|p| sandbox::escape::path_for_display(p).into_owned())
            .collect();
        let more = match self.around.len() - shown.len() {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let past = match self.past_most {
            0 => String::new(),
            n => format!("; {n} further directories beside them too (over {MOST_ROOTS} overlays)"),
        };
        Some(format!(
            "mounts inside the command's copy-on-write directories ({}{more}) and the \
             directories leading to them (files directly in them included) are read-only: a \
             copy-on-write layer cannot be made over a directory holding mounts{past}",
            shown.join(", ")
        ))
    }
}

/// The directories a command sees copy-on-write: the owner's HOME, the working directory (the
/// managed worktree in a worktree session) and, for a linked worktree, its repository's Git
/// dir (so `git commit` in a command lands in the layer too). Nested ones are covered by their
/// ancestor; `/` and a root inside a masked place other than the session's own worktree stay
/// read-only; a root holding mounts (this namespace's) or the layer dir is split around them.
pub fn roots(
    home: &Path,
    wd: &Path,
    own_worktree: Option<&Path>,
    masked: &[PathBuf],
    layer_dir: &Path,
) -> Roots {
    // Unreadable: no root is split, and a mount inside one fails the command (closed).
    let mounts: Vec<PathBuf> = sandbox::protected::read_mount_table()
        .map(|table| table.into_iter().map(|m| m.mount_point).collect())
        .unwrap_or_default();
    roots_among(home, wd, own_worktree, masked, layer_dir, &mounts)
}

/// [`roots`] with this namespace's mount points given.
fn roots_among(
    home: &Path,
    wd: &Path,
    own_worktree: Option<&Path>,
    masked: &[PathBuf],
    layer_dir: &Path,
    mounts: &[PathBuf],
) -> Roots {
    let mut candidates: Vec<PathBuf> = Vec::new();
    for path in [
        Some(home.to_path_buf()),
        Some(wd.to_path_buf()),
        git_common_dir(wd),
    ]
    .into_iter()
    .flatten()
    {
        if let Ok(canonical) = std::fs::canonicalize(&path)
            && canonical.is_dir()
        {
            candidates.push(canonical);
        }
    }
    let under_mask = |root: &Path| masked.iter().any(|m| root.starts_with(m));
    let allowed = |root: &Path| {
        root != Path::new("/") && (own_worktree.is_some_and(|w| root == w) || !under_mask(root))
    };
    // A root inside an ancestor root is covered by the ancestor's overlay — unless a mask lies
    // over it (the worktree in the state dir), which would hide it there.
    let mut kept: Vec<PathBuf> = Vec::new();
    for root in candidates.into_iter().filter(|r| allowed(r)) {
        if kept.iter().any(|k| root.starts_with(k)) && !under_mask(&root) {
            continue;
        }
        kept.retain(|k| !k.starts_with(&root) || under_mask(k));
        kept.push(root);
    }
    let holes: Vec<&Path> = mounts
        .iter()
        .map(PathBuf::as_path)
        .chain(std::iter::once(layer_dir))
        .filter(|h| kept.iter().any(|k| h.starts_with(k) && h != k))
        .collect();
    let mut split = Roots::default();
    let wd_real = std::fs::canonicalize(wd).unwrap_or_else(|_| wd.to_path_buf());
    let split_by = Split {
        masked: &under_mask,
        wd: &wd_real,
    };
    for root in &kept {
        split_by.around(root, &holes, &mut split.dirs);
        // The layer dir is not named (an internal path), nor a mount the project lies in.
        split.around.extend(
            holes
                .iter()
                .filter(|h| {
                    h.starts_with(root) && *h != root && **h != layer_dir && !wd_real.starts_with(h)
                })
                .map(|h| h.to_path_buf()),
        );
    }
    split.around.sort();
    split.around.dedup();
    if split.dirs.len() > MOST_ROOTS {
        // The working directory's own overlay first.
        let wd = wd_real;
        split
            .dirs
            .sort_by_key(|d| (!(wd.starts_with(d) || d.starts_with(&wd)), d.clone()));
        split.past_most = split.dirs.len() - MOST_ROOTS;
        split.dirs.truncate(MOST_ROOTS);
    }
    split
}

/// How a root holding holes is split.
struct Split<'a> {
    /// Whether a directory is masked: never a root of its own, since roots under a mask are
    /// mounted after the masks (the managed worktree's way) and its overlay would show what the
    /// mask hides.
    masked: &'a dyn Fn(&Path) -> bool,
    /// The working directory: a mount it lies in (a project on a disk of its own inside HOME)
    /// is split in turn, so the project stays copy-on-write; other mounts stay read-only.
    wd: &'a Path,
}

impl Split<'_> {
    /// `root` whole when no hole lies inside it; else each subdirectory of it but the holes,
    /// split in turn. Unreadable directories, symlinks and files are left read-only.
    fn around(&self, root: &Path, holes: &[&Path], dirs: &mut Vec<PathBuf>) {
        let inside: Vec<&Path> = holes
            .iter()
            .copied()
            .filter(|h| h.starts_with(root) && *h != root)
            .collect();
        if inside.is_empty() {
            dirs.push(root.to_path_buf());
            return;
        }
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        let mut children: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|child| {
                !(self.masked)(child)
                    && (!inside.contains(&child.as_path()) || self.wd.starts_with(child))
            })
            .collect();
        children.sort();
        for child in children {
            self.around(&child, &inside, dirs);
        }
    }
}

/// A linked worktree's repository Git dir (`<repo>/.git` for `.git` = `gitdir: <repo>/.git/worktrees/<name>`).
fn git_common_dir(wd: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(wd.join(".git")).ok()?;
    let gitdir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    let worktrees = gitdir.parent()?;
    (worktrees.file_name()? == "worktrees").then(|| worktrees.parent().map(Path::to_path_buf))?
}

#[cfg(test)]
mod tests;
