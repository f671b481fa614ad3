//! The owner's environment set where the gateway does not see it (red team 33 `pypath2 envrc`):
//! assignments of [`super::owner_env::VARS`] in the `.envrc` direnv loads for a root (the
//! nearest one from the root up to the home), the root's `.env` (direnv's `dotenv`, VS Code's
//! Python extension, python-dotenv) and the account's shell start-up files (`~/.bashrc`,
//! `~/.profile`, zsh's, fish's `set -x`), and the files those source. Text is read, never run,
//! as simple commands (lines joined at a backslash, split at `;`, `&&`, `||`, `|`, comments
//! dropped: the reviewer found `[ -d x ] && export …`, `export A=1 PYTHONPATH=…`,
//! `declare -gx`, fish's `set -gx V a b` read as nothing): every `NAME=value` word of `export`,
//! `declare`/`typeset`, a bare assignment, direnv's `path_add NAME dir`, fish's
//! `set -gx NAME value…`. Values expand `~`,
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

/// How deep files a read file sources are followed, and how many files are read in all.
const MAX_SOURCE_DEPTH: usize = 3;
const MAX_FILES: usize = 32;

/// What the `.envrc` direnv loads for `root` and the root's `.env` assign, with the files they
/// source (`source_env`, `dotenv`, `source`, `.`), read against the file's directory.
pub(super) fn of_root(root: &Path, home: Option<&Path>) -> Assigned {
    let mut reader = Reader::default();
    let stop = home.filter(|home| root.starts_with(home));
    for dir in root.ancestors() {
        let envrc = dir.join(".envrc");
        if envrc.is_file() {
            reader.file(&envrc, Some(dir), dir, 0);
            break;
        }
        if Some(dir) == stop {
            break;
        }
    }
    reader.file(&root.join(".env"), Some(root), root, 0);
    Assigned::new(reader.out, &reader.git)
}

/// What the account's shell start-up files in `home` assign, with the files they source
/// (`source ~/.bash_env`: relative to the home, where a login shell starts).
pub(super) fn of_shell(home: &Path) -> Assigned {
    let mut reader = Reader::default();
    for file in SHELL_FILES {
        reader.file(&home.join(file), None, home, 0);
    }
    Assigned::new(reader.out, &reader.git)
}

/// Files read so far and what they assign.
#[derive(Default)]
struct Reader {
    out: Vec<(&'static str, OsString)>,
    git: Vec<(String, OsString)>,
    read: Vec<PathBuf>,
}

impl Reader {
    /// Read `path` (once, within the bounds): its assignments (`dir` as [`assignments`] takes
    /// it), then the files it sources, relative to `base`.
    fn file(&mut self, path: &Path, dir: Option<&Path>, base: &Path, depth: usize) {
        // By the file it is (`env/../.envrc` is `.envrc`): a cycle of sources ends.
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.read.len() >= MAX_FILES || self.read.contains(&real) {
            return;
        }
        let Some(text) = super::read_head(path, MAX_FILE) else {
            return;
        };
        self.read.push(real);
        assignments(&text, dir, &mut self.out, &mut self.git);
        if depth >= MAX_SOURCE_DEPTH {
            return;
        }
        for named in sourced(&text) {
            let mut text = unquote(&named).to_string();
            if let Some(home) = std::env::var("HOME").ok().filter(|h| !h.is_empty()) {
                if text == "~" || text.starts_with("~/") {
                    text = format!("{home}{}", &text[1..]);
                }
                text = variable(&text, "HOME", &home);
            }
            if let Some(d) = dir.and_then(Path::to_str) {
                text = variable(&text, "PWD", d);
            }
            if text.contains(['$', '`']) {
                continue;
            }
            let next = base.join(&text);
            let next_dir = dir.map(|_| next.parent().unwrap_or(base).to_path_buf());
            let next_base = next_dir.clone().unwrap_or_else(|| base.to_path_buf());
            self.file(&next, next_dir.as_deref(), &next_base, depth + 1);
        }
    }
}

/// The files a shell or direnv file sources: `source`/`.` (shell), direnv's `source_env`,
/// `source_env_if_exists`, `dotenv`, `dotenv_if_exists` with an argument.
fn sourced(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for words in simple_commands(text) {
        if let [
            "source" | "." | "source_env" | "source_env_if_exists" | "dotenv" | "dotenv_if_exists",
            file,
            ..,
        ] = words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            out.push(file.to_string());
        }
    }
    out
}

/// The simple commands of shell text, each as its words (quotes kept, so a value is unquoted
/// where it is read): lines joined at a trailing backslash, `#` comments dropped, commands
/// separated by newlines, `;`, `&`, `|` (and `&&`, `||`) outside quotes, and a leading `then`,
/// `do`, `else`, `{`, `(` or `!` dropped (`[ -d x ] && export A=1` is two commands).
fn simple_commands(text: &str) -> Vec<Vec<String>> {
    let text = text.replace("\\\n", "");
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    let end_word = |word: &mut String, words: &mut Vec<String>, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    let end_command = |words: &mut Vec<String>, commands: &mut Vec<Vec<String>>| {
        while words
            .first()
            .is_some_and(|w| ["then", "do", "else", "{", "(", "!"].contains(&w.as_str()))
        {
            words.remove(0);
        }
        if !words.is_empty() {
            commands.push(std::mem::take(words));
        }
    };
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            word.push(c);
            if c == q {
                quote = None;
            } else if c == '\\'
                && q == '"'
                && let Some(next) = chars.next()
            {
                word.push(next);
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                in_word = true;
                word.push(c);
            }
            '\\' => {
                in_word = true;
                word.push(c);
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '#' if !in_word => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
                end_command(&mut words, &mut commands);
            }
            '\n' | ';' | '&' | '|' => {
                end_word(&mut word, &mut words, &mut in_word);
                end_command(&mut words, &mut commands);
            }
            c if c.is_whitespace() => end_word(&mut word, &mut words, &mut in_word),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut words, &mut in_word);
    end_command(&mut words, &mut commands);
    commands
}

/// The `(name, value)` pairs a simple command assigns: every `NAME=value` word of `export`,
/// `declare`/`typeset`/`local`/`readonly` (options skipped) or of a bare assignment (also
/// those before a command: read, never run, so counted), direnv's `path_add NAME dir`, and
/// fish's `set -x/-gx NAME value…` (its values joined by `:`, a list).
fn assigned_by(words: &[String]) -> Vec<(String, String)> {
    let word = |i: usize| words.get(i).map(String::as_str);
    match word(0) {
        Some("path_add" | "PATH_add") => match (word(1), word(2)) {
            (Some(name), Some(value)) => vec![(name.to_string(), value.to_string())],
            _ => Vec::new(),
        },
        Some("set") => {
            let rest: Vec<&str> = words[1..].iter().map(String::as_str).collect();
            let flags: Vec<&&str> = rest.iter().take_while(|w| w.starts_with('-')).collect();
            let exported = flags
                .iter()
                .any(|f| (!f.starts_with("--") && f.contains('x')) || **f == "--export");
            match rest.get(flags.len()..) {
                Some([name, values @ ..]) if exported && !values.is_empty() => {
                    let values: Vec<&str> = values.iter().map(|v| unquote(v)).collect();
                    vec![(name.to_string(), values.join(":"))]
                }
                _ => Vec::new(),
            }
        }
        Some("export" | "declare" | "typeset" | "local" | "readonly") => words[1..]
            .iter()
            .filter(|w| !w.starts_with('-'))
            .filter_map(|w| assignment(w))
            .collect(),
        _ => words.iter().map_while(|w| assignment(w)).collect(),
    }
}

/// A `NAME=value` word as its name and value.
fn assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| (name.to_string(), value.to_string()))
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
    let pairs: Vec<(String, String)> = simple_commands(text)
        .iter()
        .flat_map(|words| assigned_by(words))
        .collect();
    for (name, value) in &pairs {
        let (name, value) = (name.as_str(), value.as_str());
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
