//! What a symlink's target names, relative to a root: followed through the real file system
//! (chains, `..`, absolute targets, up to the kernel's hop limit), a missing part taken
//! lexically, and a target outside the root or whose meaning depends on the reader
//! (`/proc/self/…`, `/dev/fd/…`) told apart. Shared by the symlink scan and the places git's
//! configuration names.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Most symlinks followed to resolve one link, as the kernel's limit.
const MAX_HOPS: usize = 40;

/// One step of a path being resolved.
enum Step {
    Up,
    Name(OsString),
}

/// Where a link's target is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resolved {
    /// This real path, relative to the root.
    Inside(PathBuf),
    /// Outside the root, or through a loop.
    Outside,
    /// Through `/proc` or `/dev/fd`-like names, whose meaning depends on the process reading
    /// (`/proc/self/cwd`, `/proc/thread-self/root`, `/dev/stdin`): unknowable here.
    Context,
}

/// Whether `path` (absolute) is in `/proc` or names a process's descriptors.
fn reader_dependent(path: &Path) -> bool {
    [
        "/proc",
        "/dev/fd",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
    ]
    .iter()
    .any(|prefix| path.starts_with(prefix))
}

/// The real path `target` (read from a link in `parent`) names, relative to `root`.
pub(super) fn resolve(root: &Path, parent: &Path, target: &Path) -> Resolved {
    resolve_noting(root, parent, target, &mut |_| {})
}

/// [`resolve`], telling `followed` each link followed on the way.
fn resolve_noting(
    root: &Path,
    parent: &Path,
    target: &Path,
    followed: &mut dyn FnMut(&Path),
) -> Resolved {
    let mut out = parent.to_path_buf();
    let mut pending: Vec<Step> = Vec::new();
    push_steps(&mut pending, &mut out, target);
    let mut hops = 0;
    while let Some(step) = pending.pop() {
        // `/proc` itself is not yet a process's name (`/proc/self/root` is looked at below).
        if out != Path::new("/proc") && reader_dependent(&out) {
            return Resolved::Context;
        }
        match step {
            Step::Up => {
                out.pop();
            }
            Step::Name(name) => {
                // `/proc/self/root` and `/proc/thread-self/root` are `/` for the owner's
                // processes (none runs chrooted): resolved as `/`, not dropped (red team 30 N6).
                if out == Path::new("/proc")
                    && (name == "self" || name == "thread-self")
                    && matches!(pending.last(), Some(Step::Name(root)) if root == "root")
                {
                    pending.pop();
                    out = PathBuf::from("/");
                    continue;
                }
                let next = out.join(&name);
                match crate::look::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        hops += 1;
                        followed(&next);
                        let Ok(link) = crate::look::read_link(&next) else {
                            return Resolved::Outside;
                        };
                        if hops > MAX_HOPS {
                            return Resolved::Outside;
                        }
                        push_steps(&mut pending, &mut out, &link);
                    }
                    _ => out = next,
                }
            }
        }
    }
    if reader_dependent(&out) {
        return Resolved::Context;
    }
    match out.strip_prefix(root) {
        Ok(inside) => Resolved::Inside(inside.to_path_buf()),
        Err(_) => Resolved::Outside,
    }
}

/// The real path `path` (absolute) names: every link on the way followed (chains, `..`
/// after a link), resolved as far as it exists and the rest joined as written, a `..` after a
/// missing component cancelling it. `None` through a loop or a reader-dependent name.
pub(crate) fn resolved(path: &Path) -> Option<PathBuf> {
    resolved_noting(path, &mut |_| {})
}

/// [`resolved`], telling `followed` each link followed on the way (whose directory a change
/// of the chain shows in).
pub(crate) fn resolved_noting(path: &Path, followed: &mut dyn FnMut(&Path)) -> Option<PathBuf> {
    resolved_telling(path, followed).ok().flatten()
}

/// [`resolved_noting`], telling a reader-dependent name (`Err`: `/proc/<pid>/…`, `/dev/fd/…`)
/// apart from a loop (`Ok(None)`), so a caller can fail closed on the first.
pub(crate) fn resolved_telling(
    path: &Path,
    followed: &mut dyn FnMut(&Path),
) -> Result<Option<PathBuf>, ReaderDependent> {
    match resolve_noting(Path::new("/"), Path::new("/"), path, followed) {
        Resolved::Inside(rel) => Ok(Some(Path::new("/").join(rel))),
        Resolved::Outside => Ok(None),
        Resolved::Context => Err(ReaderDependent),
    }
}

/// A path whose meaning depends on the process reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReaderDependent;

/// Queue `path`'s steps (its first on top); an absolute path restarts from `/`.
fn push_steps(pending: &mut Vec<Step>, out: &mut PathBuf, path: &Path) {
    if path.is_absolute() {
        *out = PathBuf::from("/");
    }
    let steps: Vec<Step> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Step::Name(name.to_os_string())),
            Component::ParentDir => Some(Step::Up),
            _ => None,
        })
        .collect();
    pending.extend(steps.into_iter().rev());
}
