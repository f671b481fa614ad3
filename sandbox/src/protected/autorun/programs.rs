//! The names the owner runs programs by: every entry of the system's command directories and
//! the home's usual ones, and what the shell start-up files run by a bare name, folded as the
//! write rules fold names, read again at most once a minute. A file of the tree under one of these names, in a directory the owner's `PATH`
//! holds, runs in place of that program whenever the owner types its name there.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the system keeps its commands.
const SYSTEM_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Where owners' own tools usually are, relative to the home: install dirs and the shims of
/// version managers (pyenv, rbenv, nodenv, asdf, mise, Volta, Bun, Deno), which put every
/// tool they manage on `PATH` by name (red team 43a B2).
const HOME_DIRS: [&str; 14] = [
    ".local/bin",
    "bin",
    ".cargo/bin",
    "go/bin",
    ".npm-global/bin",
    ".pyenv/bin",
    ".pyenv/shims",
    ".rbenv/shims",
    ".nodenv/shims",
    ".asdf/shims",
    ".local/share/mise/shims",
    ".volta/bin",
    ".bun/bin",
    ".deno/bin",
];

/// How long one reading of the directories is used.
const FRESH_FOR: Duration = Duration::from_secs(60);

/// At most this many names are read from one directory (a huge `/usr/bin` still costs little).
const MAX_PER_DIR: usize = 20_000;

type Names = Arc<HashSet<String>>;

static CACHE: Mutex<Option<(Instant, Names)>> = Mutex::new(None);

/// Whether `folded` (a name folded by [`super::fold`]) is a program the owner runs by name.
pub(super) fn is_program_name(folded: &str) -> bool {
    names().contains(folded)
}

fn names() -> Names {
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((at, names)) = cache.as_ref()
        && at.elapsed() < FRESH_FOR
    {
        return Arc::clone(names);
    }
    let names = Arc::new(read());
    *cache = Some((Instant::now(), Arc::clone(&names)));
    names
}

/// The directories read: the system's, the usual ones of every home of the account (its
/// `$HOME`, its passwd home, its other gateways' `$HOME`s: red team 43a B6), and every
/// absolute entry of the owner's `PATH` — the environment's and what the account's shell
/// start-up files put there (`PATH="$HOME/tools:$PATH"`, red team 43a B2); and the names those
/// files run programs by.
fn read() -> HashSet<String> {
    let mut dirs: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    let homes = crate::protected::instances::own_homes();
    for home in &homes {
        dirs.extend(HOME_DIRS.iter().map(|d| home.join(d)));
    }
    let mut paths: Vec<std::ffi::OsString> = super::owner_env::var("PATH").into_iter().collect();
    let mut names = HashSet::new();
    for home in &homes {
        let assigned = super::env_files::of_shell(home);
        // What the start-up files run by a bare name (an alias's `mytool`, red team 46a).
        names.extend(
            assigned
                .bare_runs
                .iter()
                .map(|name| super::fold(OsStr::new(name))),
        );
        paths.extend(
            assigned
                .env
                .into_iter()
                .filter(|(name, _)| *name == "PATH")
                .map(|(_, value)| value),
        );
    }
    for value in &paths {
        dirs.extend(std::env::split_paths(value).filter(|dir| dir.is_absolute()));
    }
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        let Ok(entries) = crate::look::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_PER_DIR) {
            names.insert(super::fold(OsStr::new(&entry.file_name())));
        }
    }
    names
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;

    #[test]
    fn the_systems_commands_are_program_names_and_project_names_are_not() {
        for name in ["sh", "ls", "env"] {
            assert!(is_program_name(name), "{name}");
        }
        // Folded as the write rules fold: `LS` on a case-insensitive file system opens `ls`.
        assert!(is_program_name(&super::super::fold(OsStr::new("LS"))));
        for name in ["build.rs", "run-my-tests", "Cargo.toml", ""] {
            assert!(!is_program_name(name), "{name}");
        }
    }
}
