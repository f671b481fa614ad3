//! The owner's environment set where the gateway does not see it (red team 33 `pypath2 envrc`):
//! assignments of [`super::owner_env::VARS`] in the `.envrc` direnv loads for a root (the
//! nearest one from the root up to the home), the root's `.env` (direnv's `dotenv`, VS Code's
//! Python extension, python-dotenv) and the account's shell start-up files (`~/.bashrc`,
//! `~/.profile`, zsh's, fish's `set -x`), and the files those source. Text is read, never run,
//! as the shell splits it ([`super::shell_words`]: quote-joined words are the words the shell
//! makes, red team 36 B1): every `NAME=value` word of `export`, `declare`/`typeset`, a bare
//! assignment, direnv's `path_add NAME dir`, fish's `set -gx NAME value…` (a list, exported
//! joined by `:` when the name ends in `PATH`, else by a space, as fish does: red team 36 B2).
//! Values expand `~`, `$HOME`, every variable assigned before in the files read, `${X:-y}` and
//! its kin, and for `.envrc`/`.env` `$PWD` and `$(pwd)` (the file's directory) and direnv's
//! `$(expand_path dir [base])` (red team 36 B3); a table variable not assigned there is read by
//! itself (the owner's own value), another from the owner's environment. What is still not
//! read (a command's output, `$1`, a variable set nowhere seen) fails closed: an entry keeps
//! its literal directory part before it, and a value with none is *unreadable*, which refuses
//! every write of the tree (naming the variable). git's config variables (`GIT_CONFIG_COUNT`
//! with `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`, `GIT_CONFIG_PARAMETERS`, red team 35 N4) are
//! read into config entries as the gateway's own are ([`super::owner_env::git_entries`]), the
//! last assignment of each counting.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::git_syntax::Entry;
use super::owner_env::{self, Names};
use super::shell_words::{self, Dialect, Piece, Word};

/// What a set of files assigns.
#[derive(Debug, Default)]
pub(super) struct Assigned {
    /// The table's variables ([`owner_env::VARS`]), in the order assigned.
    pub env: Vec<(&'static str, OsString)>,
    /// The config entries git's config variables assigned there give.
    pub git_entries: Vec<Entry>,
    /// Variables assigned a value not read here, with why: the whole tree is refused.
    pub unreadable: Vec<(String, String)>,
}

impl Assigned {
    /// What `reader` read, git's assignments read into config entries.
    fn new(reader: Reader) -> Self {
        let mut unreadable = reader.unreadable;
        let git = reader.git;
        let mut git_entries = owner_env::git_entries(
            |name| {
                git.iter()
                    .rev()
                    .find(|(var, _)| var == name)
                    .map(|(_, value)| OsString::from(value))
                    .filter(|value| !value.is_empty())
            },
            &mut unreadable,
        );
        // An entry built on what is not read (`GIT_CONFIG_VALUE_0=$(…)`) may name anything.
        git_entries.retain(|entry| {
            let marked = [
                Some(&entry.key),
                entry.subsection.as_ref(),
                entry.value.as_ref(),
            ]
            .into_iter()
            .flatten()
            .any(|text| text.contains(MARK));
            if marked {
                unreadable.push((
                    format!(
                        "GIT_CONFIG ({}.{})",
                        entry.section,
                        entry.key.replace(MARK, "?")
                    ),
                    NOT_READ.to_string(),
                ));
            }
            !marked
        });
        Self {
            env: reader.out,
            git_entries,
            unreadable,
        }
    }
}

/// What a piece not read here expands to: no file or value holds it (a variable's value cannot).
const MARK: char = '\0';

/// Why a value is unreadable.
const NOT_READ: &str = "its value is built from what is not read here (a command's output, a \
     positional parameter or a variable set nowhere the gateway reads)";

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

/// How deep a value's own words are read again (`${A:-${B:-…}}`, `$(expand_path …)`).
const MAX_EXPANSION_DEPTH: usize = 4;

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
    Assigned::new(reader)
}

/// What the account's shell start-up files in `home` assign, with the files they source
/// (`source ~/.bash_env`: relative to the home, where a login shell starts).
pub(super) fn of_shell(home: &Path) -> Assigned {
    let mut reader = Reader::default();
    for file in SHELL_FILES {
        reader.file(&home.join(file), None, home, 0);
    }
    Assigned::new(reader)
}

/// Files read so far and what they assign.
#[derive(Default)]
struct Reader {
    out: Vec<(&'static str, OsString)>,
    /// git's config variables as assigned (expanded).
    git: Vec<(String, String)>,
    unreadable: Vec<(String, String)>,
    /// Every variable assigned so far, expanded ([`MARK`] where a piece was not read).
    vars: HashMap<String, String>,
    read: Vec<PathBuf>,
}

/// Where a file's text is read: its directory for `.envrc`/`.env` (`$PWD`, relative entries),
/// none for a shell start-up file (its relative entries stay relative).
#[derive(Clone, Copy)]
struct At<'a> {
    dir: Option<&'a Path>,
}

impl Reader {
    /// Read `path` (once, within the bounds): its assignments, then the files it sources,
    /// relative to `base`.
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
        let dialect = match path.extension() {
            Some(ext) if ext == "fish" => Dialect::Fish,
            _ => Dialect::Posix,
        };
        let at = At { dir };
        let commands = shell_words::commands(&text, dialect);
        let mut sourced = Vec::new();
        for words in &commands {
            self.command(words, at);
            if let [first, file, ..] = words.as_slice()
                && first.literal().is_some_and(|verb| {
                    matches!(
                        verb.as_str(),
                        "source"
                            | "."
                            | "source_env"
                            | "source_env_if_exists"
                            | "dotenv"
                            | "dotenv_if_exists"
                    )
                })
            {
                sourced.push(self.expand(file, at, 0));
            }
        }
        if depth >= MAX_SOURCE_DEPTH {
            return;
        }
        for text in sourced {
            if text.contains(MARK) {
                continue;
            }
            let next = base.join(&text);
            let next_dir = dir.map(|_| next.parent().unwrap_or(base).to_path_buf());
            let next_base = next_dir.clone().unwrap_or_else(|| base.to_path_buf());
            self.file(&next, next_dir.as_deref(), &next_base, depth + 1);
        }
    }

    /// The assignments of one simple command: every `NAME=value` word of `export`,
    /// `declare`/`typeset`/`local`/`readonly` (options skipped) or of a bare assignment (also
    /// those before a command: read, never run, so counted), direnv's `path_add NAME dir`, and
    /// fish's `set -x/-gx NAME value…`.
    fn command(&mut self, words: &[Word], at: At) {
        let first = words.first().and_then(Word::literal);
        match first.as_deref() {
            Some("path_add" | "PATH_add") => {
                if let [_, name, value, ..] = words
                    && let Some(name) = name.literal()
                {
                    let value = self.expand(value, at, 0);
                    self.assign(&name, value, at);
                }
            }
            Some("set") => {
                let flags = words[1..]
                    .iter()
                    .take_while(|w| w.literal().is_some_and(|w| w.starts_with('-')))
                    .filter_map(Word::literal)
                    .collect::<Vec<_>>();
                let exported = flags
                    .iter()
                    .any(|f| (!f.starts_with("--") && f.contains('x')) || f == "--export");
                let rest = &words[1 + flags.len()..];
                if let [name, values @ ..] = rest
                    && exported
                    && !values.is_empty()
                    && let Some(name) = name.literal()
                {
                    let values: Vec<String> =
                        values.iter().map(|v| self.expand(v, at, 0)).collect();
                    let joiner = if name.ends_with("PATH") { ":" } else { " " };
                    if values.len() > 1 && joiner == " " {
                        // Each element alone too: what reads the value as a list of its own
                        // (`PERL5LIB`'s `:`) is read for every element (fail closed).
                        for value in &values {
                            self.assign(&name, value.clone(), at);
                        }
                    }
                    self.assign(&name, values.join(joiner), at);
                }
            }
            Some("export" | "declare" | "typeset" | "local" | "readonly") => {
                for word in &words[1..] {
                    if word.literal().is_some_and(|w| w.starts_with('-')) {
                        continue;
                    }
                    self.assignment(word, at);
                }
            }
            _ => {
                for word in words {
                    if !self.assignment(word, at) {
                        break;
                    }
                }
            }
        }
    }

    /// A `NAME=value` word, assigned; false when the word is no assignment.
    fn assignment(&mut self, word: &Word, at: At) -> bool {
        let Some(Piece::Text {
            text,
            quoted: false,
        }) = word.pieces.first()
        else {
            return false;
        };
        let Some((name, value)) = text.split_once('=') else {
            return false;
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return false;
        }
        let mut pieces = vec![Piece::Text {
            text: value.to_string(),
            quoted: false,
        }];
        pieces.extend(word.pieces[1..].iter().cloned());
        let name = name.to_string();
        let value = self.expand(&Word { pieces }, at, 0);
        self.assign(&name, value, at);
        true
    }

    /// `word` as the shell expands it in an assignment: [`MARK`] for what is not read here.
    fn expand(&self, word: &Word, at: At, depth: usize) -> String {
        let mut out = String::new();
        for piece in &word.pieces {
            match piece {
                Piece::Text {
                    text,
                    quoted: false,
                } => {
                    // `~` at the start and after a `:` (an assignment's list), before `/`, `:`
                    // or the end.
                    let chars: Vec<char> = text.chars().collect();
                    for (i, c) in chars.iter().enumerate() {
                        let at_start = out.is_empty() || out.ends_with(':');
                        let ends = matches!(chars.get(i + 1), None | Some('/' | ':'));
                        if *c == '~' && at_start && ends {
                            out.push_str(&self.lookup("HOME", at).unwrap_or(MARK.into()));
                        } else {
                            out.push(*c);
                        }
                    }
                }
                Piece::Text { text, .. } => out.push_str(text),
                Piece::Var(name) => out.push_str(&self.lookup(name, at).unwrap_or(MARK.into())),
                Piece::VarOr { name, op, word } => {
                    let value = self.lookup(name, at);
                    let other = || {
                        if depth >= MAX_EXPANSION_DEPTH {
                            return MARK.to_string();
                        }
                        let word = shell_words::word(word, Dialect::Posix);
                        self.expand(&word, at, depth + 1)
                    };
                    out.push_str(&match (op.as_str(), value) {
                        // Set nowhere read: unset, as far as can be told; the default is what
                        // the author meant (`${XDG_DATA_HOME:-$HOME/.local/share}`).
                        (":-" | "-" | ":=" | "=", None) => other(),
                        (_, None) => MARK.to_string(),
                        (":-" | ":=", Some(v)) if v.is_empty() => other(),
                        (":+", Some(v)) if v.is_empty() => String::new(),
                        ("+" | ":+", Some(_)) => other(),
                        (_, Some(v)) => v,
                    });
                }
                Piece::Command(text) => {
                    out.push_str(&self.substitution(text, at, depth).unwrap_or(MARK.into()))
                }
                Piece::Other(_) => out.push(MARK),
            }
        }
        out
    }

    /// What a variable expands to: `HOME`; `PWD` (the file's directory; `.` in a shell
    /// start-up file, read against the root); one assigned before; a table variable not
    /// assigned before is read by itself (empty here); another from the owner's environment.
    fn lookup(&self, name: &str, at: At) -> Option<String> {
        match name {
            "HOME" => std::env::var("HOME").ok().filter(|h| !h.is_empty()),
            "PWD" => Some(
                at.dir
                    .map_or_else(|| ".".to_string(), |d| d.to_string_lossy().into_owned()),
            ),
            _ if self.vars.contains_key(name) => self.vars.get(name).cloned(),
            _ if owner_env::read_by_rules(name) => Some(String::new()),
            _ => owner_env::var(name).map(|v| v.to_string_lossy().into_owned()),
        }
    }

    /// What a command substitution gives, where it is read: `pwd`, `which NAME` / `command -v
    /// NAME` (the name), and direnv's `expand_path PATH [BASE]` (absolute, relative to the
    /// `.envrc`'s directory).
    fn substitution(&self, text: &str, at: At, depth: usize) -> Option<String> {
        let commands = shell_words::commands(text, Dialect::Posix);
        let [words] = commands.as_slice() else {
            return None;
        };
        let here = at.dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let arg = |i: usize| -> Option<String> {
            if depth >= MAX_EXPANSION_DEPTH {
                return None;
            }
            let word = words.get(i)?;
            Some(self.expand(word, at, depth + 1)).filter(|v| !v.contains(MARK))
        };
        match (words[0].literal().as_deref(), words.len()) {
            (Some("pwd"), 1) => Some(here.to_string_lossy().into_owned()),
            // `$(which vim)`, `$(command -v nvim)`: the program found on PATH, as the bare name
            // reads (`EDITOR=vim`).
            (Some("which"), 2) | (Some("command" | "type"), 3)
                if words.len() == 2
                    || words[1].literal().is_some_and(|f| f == "-v" || f == "-p") =>
            {
                words.last()?.literal().filter(|name| {
                    !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
                })
            }
            (Some("expand_path"), 2 | 3) if at.dir.is_some() => {
                let base = match words.len() {
                    3 => here.join(arg(2)?),
                    _ => here,
                };
                Some(base.join(arg(1)?).to_string_lossy().into_owned())
            }
            _ => None,
        }
    }

    /// Record `name = value`: every variable for later expansions; the table's variables
    /// (read by their kind) and git's config variables for the rules.
    fn assign(&mut self, name: &str, value: String, at: At) {
        self.vars.insert(name.to_string(), value.clone());
        if owner_env::is_git_config_var(name) {
            self.git.push((name.to_string(), value));
            return;
        }
        let Some((var, names)) = owner_env::VARS.iter().find(|(var, _)| *var == name) else {
            return;
        };
        let unreadable = |why: &str| (var.to_string(), why.to_string());
        match names {
            Names::Options(_)
            | Names::Command
            | Names::InputFilter
            | Names::CommandList
            | Names::ExCommands
            | Names::CodeOrAtFile => {
                // A command line or options: its words are read where the variable is
                // (relative to the write root, as the gateway's own value).
                // The value is itself shell text where a shell runs it (`sh -c "$EDITOR"`):
                // `$HOME` and a leading `~/` in it are expanded there.
                let mut value = value;
                if let Some(home) = std::env::var("HOME").ok().filter(|h| !h.is_empty()) {
                    value = variable(&value, "HOME", &home);
                    if value.starts_with("~/") {
                        value = format!("{home}{}", &value[1..]);
                    }
                }
                if value.contains(MARK) {
                    let loads_unread = match names {
                        Names::Options(lang) => {
                            let (loads, dirs) =
                                owner_env::option_names(*lang, std::ffi::OsStr::new(&value));
                            // Not read where a switch's letters are (`-\0`, `-w\0`: maybe
                            // `-MFoo`), only in an option's value (`--max-old-space-size=\0`).
                            let in_switch = value.split_whitespace().any(|word| {
                                word.find(MARK).is_some_and(|at| !word[..at].contains('='))
                            });
                            in_switch || loads.iter().chain(&dirs).any(|n| n.contains(MARK))
                        }
                        Names::CodeOrAtFile => value.starts_with(['@', MARK]),
                        Names::ExCommands => true,
                        // The shell reads a computed program as such (the whole tree).
                        _ => false,
                    };
                    if loads_unread {
                        return self.unreadable.push(unreadable(NOT_READ));
                    }
                    value = value.replace(MARK, "${NGW_UNREAD}");
                }
                // `EDITOR='$VISUAL'`: that variable is read by itself.
                let names_variable = value.strip_prefix('$').is_some_and(|rest| {
                    let rest = rest.trim_start_matches('{');
                    owner_env::VARS.iter().any(|(v, _)| rest.starts_with(v))
                });
                if !value.is_empty() && !names_variable {
                    self.out.push((var, OsString::from(value)));
                }
            }
            _ => {
                let mut entries = Vec::new();
                let separators: &[char] = match names {
                    Names::FileList => &[':', ' ', '\t'],
                    _ => &[':'],
                };
                for entry in value.split(separators).filter(|e| !e.is_empty()) {
                    let mut text = entry.to_string();
                    if let Some(mark) = text.find(MARK) {
                        // Built on what is not read: its literal directory part.
                        match text[..mark].rfind('/') {
                            Some(slash) if slash > 0 => text.truncate(slash),
                            // `ENV=$STAGE` (an application's setting): no file either way.
                            _ if *var == "ENV" => continue,
                            _ => {
                                self.unreadable.push(unreadable(NOT_READ));
                                continue;
                            }
                        }
                    }
                    let path = match at.dir {
                        Some(dir) if !text.starts_with('/') => dir.join(&text),
                        _ => PathBuf::from(&text),
                    };
                    entries.push(path.to_string_lossy().into_owned());
                }
                if !entries.is_empty() {
                    self.out.push((var, OsString::from(entries.join(":"))));
                }
            }
        }
    }
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
