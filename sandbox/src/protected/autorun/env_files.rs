//! The owner's environment set where the gateway does not see it (red team 33 `pypath2 envrc`):
//! assignments of [`super::owner_env::VARS`] in the `.envrc` direnv loads for a root (the
//! nearest one from the root up to the home), the root's `.env` (direnv's `dotenv`, VS Code's
//! Python extension, python-dotenv) and the account's shell start-up files (`~/.bashrc`,
//! `~/.profile`, zsh's, fish's `set -x`). Lines are read, never run: `export NAME=value`,
//! `NAME=value`, direnv's `path_add NAME dir`, fish's `set -gx NAME value…`. Values expand `~`,
//! `$HOME`, and for `.envrc`/`.env` `$PWD`/`${PWD}`/`$(pwd)` (the file's directory); a
//! self-reference (`$PYTHONPATH`) is dropped; an entry built on anything else is read as its
//! literal directory part before the expansion (fail closed), or dropped when it has none.
//! git's config variables (`GIT_CONFIG_COUNT` with `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`,
//! `GIT_CONFIG_PARAMETERS`, red team 35 N4) are read into config entries as the gateway's own
//! are ([`super::owner_env::git_entries`]), the last assignment of each counting.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::git_syntax::Entry;
use super::owner_env::{self, Names};

/// What a set of files assigns.
#[derive(Debug, Default)]
pub(super) struct Assigned {
    /// The table's variables ([`owner_env::VARS`]), in the order assigned.
    pub env: Vec<(&'static str, OsString)>,
    /// The config entries git's config variables assigned there give.
    pub git_entries: Vec<Entry>,
}

impl Assigned {
    /// `env` with `git`'s assignments read into config entries.
    fn new(env: Vec<(&'static str, OsString)>, git: &[(String, OsString)]) -> Self {
        let git_entries = owner_env::git_entries(|name| {
            git.iter()
                .rev()
                .find(|(var, _)| var == name)
                .map(|(_, value)| value.clone())
                .filter(|value| !value.is_empty())
        });
        Self { env, git_entries }
    }
}

/// The account's shell start-up files, relative to its home.
const SHELL_FILES: [&str; 7] = [
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshenv",
    ".zshrc",
    ".zprofile",
    ".config/fish/config.fish",
];

/// Bytes of one file read.
const MAX_FILE: u64 = 256 * 1024;

/// What the `.envrc` direnv loads for `root` and the root's `.env` assign.
pub(super) fn of_root(root: &Path, home: Option<&Path>) -> Assigned {
    let (mut out, mut git) = (Vec::new(), Vec::new());
    let stop = home.filter(|home| root.starts_with(home));
    for dir in root.ancestors() {
        if let Some(text) = super::read_head(&dir.join(".envrc"), MAX_FILE) {
            assignments(&text, Some(dir), &mut out, &mut git);
            break;
        }
        if Some(dir) == stop {
            break;
        }
    }
    if let Some(text) = super::read_head(&root.join(".env"), MAX_FILE) {
        assignments(&text, Some(root), &mut out, &mut git);
    }
    Assigned::new(out, &git)
}

/// What the account's shell start-up files in `home` assign.
pub(super) fn of_shell(home: &Path) -> Assigned {
    let (mut out, mut git) = (Vec::new(), Vec::new());
    for file in SHELL_FILES {
        if let Some(text) = super::read_head(&home.join(file), MAX_FILE) {
            assignments(&text, None, &mut out, &mut git);
        }
    }
    Assigned::new(out, &git)
}

/// The assignments of table variables in `text`; `dir` is the file's directory where `$PWD`
/// and relative entries are read against it (`None`: a shell start-up file, whose relative
/// entries stay relative); git's config variables go to `git` as assigned (unquoted, `$HOME`
/// expanded).
fn assignments(
    text: &str,
    dir: Option<&Path>,
    out: &mut Vec<(&'static str, OsString)>,
    git: &mut Vec<(String, OsString)>,
) {
    for line in text.lines() {
        let line = line.trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        let (name, value) = match words.as_slice() {
            ["path_add" | "PATH_add", name, value, ..] => (*name, *value),
            ["set", flags @ .., name, value]
                if flags.iter().any(|f| f.contains('x') || *f == "--export") =>
            {
                (*name, *value)
            }
            _ => {
                let rest = line
                    .strip_prefix("export ")
                    .or_else(|| line.strip_prefix("declare -x "))
                    .unwrap_or(line)
                    .trim_start();
                let Some((name, value)) = rest.split_once('=') else {
                    continue;
                };
                (name, value.split(" #").next().unwrap_or("").trim())
            }
        };
        if owner_env::is_git_config_var(name) {
            let mut value = unquote(value).to_string();
            if let Some(home) = std::env::var("HOME").ok().filter(|h| !h.is_empty()) {
                value = variable(&value, "HOME", &home);
            }
            git.push((name.to_string(), OsString::from(value)));
            continue;
        }
        let Some((var, names)) = owner_env::VARS.iter().find(|(var, _)| *var == name) else {
            continue;
        };
        if matches!(
            names,
            Names::Options(_)
                | Names::Command
                | Names::InputFilter
                | Names::CommandList
                | Names::ExCommands
                | Names::CodeOrAtFile
        ) {
            // A command line: its words are read where the variable is (relative to the
            // write root, as the gateway's own value).
            let mut value = unquote(value).to_string();
            if let Some(home) = std::env::var("HOME").ok().filter(|h| !h.is_empty()) {
                value = variable(&value, "HOME", &home);
                if value.starts_with("~/") {
                    value = format!("{home}{}", &value[1..]);
                }
            }
            // `EDITOR=$VISUAL`: that variable is read by itself.
            let names_variable = value.strip_prefix('$').is_some_and(|rest| {
                let rest = rest.trim_start_matches('{');
                super::owner_env::VARS
                    .iter()
                    .any(|(v, _)| rest.starts_with(v))
            });
            if !value.is_empty() && !names_variable {
                out.push((var, OsString::from(value)));
            }
            continue;
        }
        let entries = expand(unquote(value), var, dir);
        if !entries.is_empty() {
            out.push((var, OsString::from(entries.join(":"))));
        }
    }
}

/// A value without its outer quotes (`"…"`, `'…'`), and a trailing `;`.
fn unquote(value: &str) -> &str {
    let value = value.trim_end_matches(';');
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// The entries of a `:`-separated value, expanded (see the module's comment).
fn expand(value: &str, var: &str, dir: Option<&Path>) -> Vec<String> {
    let home = std::env::var("HOME").ok().filter(|h| !h.is_empty());
    let mut out = Vec::new();
    for entry in value.split(':').filter(|e| !e.is_empty()) {
        if [format!("${var}"), format!("${{{var}}}")]
            .iter()
            .any(|s| entry == s)
        {
            continue;
        }
        let mut text = entry.to_string();
        if let Some(home) = &home {
            if text == "~" || text.starts_with("~/") {
                text = format!("{home}{}", &text[1..]);
            }
            text = variable(&text, "HOME", home);
        }
        if let Some(dir) = dir.and_then(Path::to_str) {
            text = variable(&text, "PWD", dir)
                .replace("$(pwd)", dir)
                .replace("`pwd`", dir);
        }
        if let Some(at) = text.find(['$', '`']) {
            // Built on what is not read here: its literal directory part.
            text = match text[..at].rfind('/') {
                Some(slash) if slash > 0 => text[..slash].to_string(),
                _ => continue,
            };
        }
        let path = match dir {
            Some(dir) if !text.starts_with('/') => dir.join(&text),
            _ => PathBuf::from(&text),
        };
        out.push(path.to_string_lossy().into_owned());
    }
    out
}

/// `text` with `${name}` and `$name` (not a longer name: `$HOME_X`) replaced by `value`.
fn variable(text: &str, name: &str, value: &str) -> String {
    let text = text.replace(&format!("${{{name}}}"), value);
    let pattern = format!("${name}");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(&pattern) {
        let after = &rest[at + pattern.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            out.push_str(&pattern);
        } else {
            out.push_str(value);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
