//! Auto-run places recognised by what a directory holds rather than by its name (issue 23,
//! F3 and F6): a directory git takes as a repository, and a Python virtual environment.
//!
//! *Git directories.* `git status` in a directory that holds `HEAD` with `objects/` and
//! `refs/` (or with a `commondir` naming where those are) uses it as its repository, whatever
//! it is called — an embedded bare repository, a gitfile's `gitdir:` target, a worktree's admin
//! dir — and runs what its `config` names (`core.fsmonitor`, hooks, pager). The rule counts the
//! pieces git looks for — `HEAD`, `objects`, `refs`, `commondir`, `config`, of any file type and
//! as they would be *after* the write — in every directory from the write root down to the
//! target's parent, and in the root's own ancestors: a directory with three of them, or with
//! `HEAD` and `commondir`, is refused whole. A repository needs four (`HEAD`, `objects`, `refs`
//! and a `config` to name a program), or `HEAD` + `commondir` plus three in the common dir, so
//! whichever write would complete one is refused, in any order; an ordinary directory rarely
//! holds three of these names.
//!
//! *Virtual environments.* Every file in the `bin/` (or `Scripts/`) of a directory holding
//! `pyvenv.cfg` (or a conda environment's `conda-meta/`) runs as the environment's programs
//! (`python`, `pip`, `activate`, entry points) when the owner uses the environment.

use std::ffi::OsStr;
use std::path::Path;

use super::{AutorunClass, fold};

/// What git looks for in a directory to take it as a repository (and its config).
const GIT_PIECES: [&str; 5] = ["head", "objects", "refs", "commondir", "config"];

/// The class of the place `relative` (the write target, root-relative, real) is by what the
/// directories on its way hold now, with the target's missing parents and itself counted as
/// created by the write; `None` for an ordinary path.
pub fn content_class(root: &Path, relative: &Path) -> Option<AutorunClass> {
    for ancestor in root.ancestors().skip(1) {
        if looks_like_git_dir(ancestor, None) {
            return Some(AutorunClass::VcsConfig);
        }
    }
    let mut dir = root.to_path_buf();
    for name in relative {
        if looks_like_git_dir(&dir, Some(name)) {
            return Some(AutorunClass::VcsConfig);
        }
        dir.push(name);
    }
    venv_class(root, relative)
}

/// Whether `relative` lies in the `bin/` or `Scripts/` of a virtual environment (a directory
/// holding `pyvenv.cfg`) or a conda environment (holding `conda-meta/`), looked up through the file system as given (symlinks followed: also
/// for a path the target is reachable as).
pub fn venv_class(root: &Path, relative: &Path) -> Option<AutorunClass> {
    let names: Vec<&OsStr> = relative.iter().collect();
    let mut dir = root.to_path_buf();
    for (i, name) in names.iter().enumerate() {
        let folded = fold(name);
        let in_environment = || {
            ["pyvenv.cfg", "conda-meta"]
                .iter()
                .any(|marker| crate::look::symlink_metadata(dir.join(marker)).is_ok())
        };
        if i + 1 < names.len() && (folded == "bin" || folded == "scripts") && in_environment() {
            return Some(AutorunClass::PythonStartup);
        }
        // pip reads `<sys.prefix>/pip.conf` (`pip.ini` on Windows) and nothing in a project
        // directory: the environment's root is the one place it names package sources.
        if i + 1 == names.len() && (folded == "pip.conf" || folded == "pip.ini") && in_environment()
        {
            return Some(AutorunClass::ToolchainConfig);
        }
        dir.push(name);
    }
    None
}

/// Whether `dir` (which may not exist yet), with `adding` created in it, holds three of git's
/// pieces, or `HEAD` and `commondir`. A path that cannot be looked at (a symlink loop, no
/// permission) is one the write's own resolution refuses anyway.
fn looks_like_git_dir(dir: &Path, adding: Option<&OsStr>) -> bool {
    let adding = adding.map(fold);
    let have: Vec<bool> = GIT_PIECES
        .iter()
        .map(|piece| {
            adding.as_deref() == Some(*piece)
                || crate::look::symlink_metadata(dir.join(piece_name(piece))).is_ok()
        })
        .collect();
    let (head, commondir) = (have[0], have[3]);
    (head && commondir) || have.iter().filter(|present| **present).count() >= 3
}

/// The on-disk name git uses for a piece.
fn piece_name(piece: &str) -> &str {
    if piece == "head" { "HEAD" } else { piece }
}

/// The program a yarn rc file names — `.yarnrc.yml`'s top-level `yarnPath: x` (yarn 2+) or
/// `.yarnrc`'s `yarn-path "x"` (yarn 1) — which yarn runs for every `yarn` command in the project,
/// as written (relative to the file's directory).
pub fn yarn_path(rc: &str) -> Option<String> {
    rc.lines().find_map(|line| {
        let value = line
            .strip_prefix("yarnPath:")
            .or_else(|| line.strip_prefix("yarn-path "))?
            .trim();
        let value = match value.chars().next()? {
            quote @ ('"' | '\'') => value[1..].split(quote).next()?,
            _ => value.split(" #").next()?.trim(),
        };
        (!value.is_empty()).then(|| value.to_string())
    })
}
