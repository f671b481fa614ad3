//! How the owner's files' words expand ([`Reader::expand`]): every value a word may take, a
//! variable's values, `~` and `~name`, a `for` list's pattern, the command substitutions read.

use std::path::{Path, PathBuf};

use super::super::owner_env::{self, Names};
use super::super::shell_words::{self, Dialect, Piece, Word};
use super::{At, MARK, MAX_EXPANSION_DEPTH, MAX_GLOB, MAX_VALUES, Reader};

impl Reader {
    /// Every value `word` may expand to, as the shell expands it in an assignment: [`MARK`]
    /// for what is not read here.
    pub(super) fn expand(&self, word: &Word, at: At, depth: usize) -> Vec<String> {
        let mut outs = vec![String::new()];
        for piece in &word.pieces {
            match piece {
                Piece::Text {
                    text,
                    quoted: false,
                } => {
                    for out in &mut outs {
                        let expanded = self.unquoted(out, text, at);
                        out.push_str(&expanded);
                    }
                }
                Piece::Text { text, .. } => outs.iter_mut().for_each(|out| out.push_str(text)),
                Piece::Var(name) => {
                    let values = self.lookup(name, at).unwrap_or_else(|| vec![MARK.into()]);
                    outs = combine(outs, &values);
                }
                Piece::VarOr { name, op, word } => {
                    let other = || {
                        if depth >= MAX_EXPANSION_DEPTH {
                            return vec![MARK.to_string()];
                        }
                        let word = shell_words::word(word, Dialect::Posix);
                        self.expand(&word, at, depth + 1)
                    };
                    let mut values = Vec::new();
                    // `${PWD%/}`, `${X##*/}`: a literal pattern removed from each value (red
                    // team 40: `${PWD%/}/src` refused every write); one not literal is not read.
                    if matches!(op.as_str(), "%" | "%%" | "#" | "##") {
                        let pattern = shell_words::word(word, Dialect::Posix).literal();
                        let set = self.lookup(name, at);
                        let values = match (pattern, set) {
                            (Some(pattern), Some(set)) => set
                                .iter()
                                .map(|v| remove_pattern(v, op, &pattern))
                                .collect(),
                            _ => vec![MARK.to_string()],
                        };
                        outs = combine(outs, &values);
                        continue;
                    }
                    match self.lookup(name, at) {
                        // Set nowhere read: unset, as far as can be told; the default is what
                        // the author meant (`${XDG_DATA_HOME:-$HOME/.local/share}`).
                        None if matches!(op.as_str(), ":-" | "-" | ":=" | "=") => {
                            values.extend(other())
                        }
                        None => values.push(MARK.to_string()),
                        Some(set) => {
                            for v in set {
                                match op.as_str() {
                                    ":-" | ":=" if v.is_empty() => values.extend(other()),
                                    ":+" if v.is_empty() => values.push(String::new()),
                                    "+" | ":+" => values.extend(other()),
                                    _ => values.push(v),
                                }
                            }
                        }
                    }
                    outs = combine(outs, &values);
                }
                Piece::Command(text) => {
                    let values = self.substitution(text, at, depth);
                    outs = combine(outs, &values.unwrap_or_else(|| vec![MARK.into()]));
                }
                Piece::Other(_) => outs.iter_mut().for_each(|out| out.push(MARK)),
                // Elsewhere than a whole assigned value: any element.
                Piece::Array(elements) => {
                    let values: Vec<String> = elements
                        .iter()
                        .flat_map(|element| self.expand(element, at, depth + 1))
                        .collect();
                    outs = combine(outs, &values);
                }
            }
        }
        outs
    }

    /// Unquoted text after `out`: `~` at the start and after a `:` (an assignment's list),
    /// before `/`, `:` or the end, is the home; `~name` that account's.
    pub(super) fn unquoted(&self, out: &str, text: &str, at: At) -> String {
        let mut expanded = String::new();
        let mut rest = text;
        while !rest.is_empty() {
            let at_start = (out.is_empty() && expanded.is_empty())
                || expanded.ends_with(':')
                || (expanded.is_empty() && out.ends_with(':'));
            if at_start && let Some(after) = rest.strip_prefix('~') {
                let end = after.find(['/', ':']).unwrap_or(after.len());
                let user = &after[..end];
                let home = if user.is_empty() {
                    self.lookup("HOME", at).and_then(|h| h.into_iter().next())
                } else if user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                {
                    crate::protected::instances::named_account_home(user)
                } else {
                    None
                };
                match home {
                    Some(home) => expanded.push_str(&home),
                    // `~x+y` or an account there is none of: the shell leaves the word.
                    None if !user.is_empty() => {
                        expanded.push('~');
                        expanded.push_str(user);
                    }
                    None => expanded.push(MARK),
                }
                rest = &after[end..];
                continue;
            }
            let next = rest
                .char_indices()
                .skip(1)
                .find(|(_, c)| *c == ':')
                .map_or(rest.len(), |(i, _)| i + 1);
            expanded.push_str(&rest[..next]);
            rest = &rest[next..];
        }
        expanded
    }

    /// `word` of a `for` list: a pattern in its last component gives each file it matches
    /// (`~/.bashrc.d/*`, Fedora's start-up files); anything else as [`Self::expand`].
    pub(super) fn expand_pattern(&self, word: &Word, at: At) -> Vec<String> {
        if !word.is_pattern_or_tilde() {
            return self.expand(word, at, 0);
        }
        let mut out = Vec::new();
        for text in self.expand(word, at, 0) {
            let (dir, pattern) = match text.rsplit_once('/') {
                Some((dir, pattern)) => (dir.to_string(), pattern.to_string()),
                None => (".".to_string(), text.clone()),
            };
            if !pattern.contains(['*', '?', '[']) || dir.contains(['*', '?', '[', MARK]) {
                out.push(text);
                continue;
            }
            let base = match at.dir {
                Some(here) => here.join(&dir),
                None => PathBuf::from(&dir),
            };
            let Ok(entries) = crate::look::read_dir(&base) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|name| !name.starts_with('.') && matches_pattern(&pattern, name))
                .collect();
            names.sort();
            if names.len() > MAX_GLOB {
                out.push(format!("{dir}/{MARK}"));
                continue;
            }
            out.extend(names.into_iter().map(|name| format!("{dir}/{name}")));
        }
        out
    }

    /// Every value a variable may hold: `HOME`; `PWD` (the file's directory, and where a `cd`
    /// went; `.` in a shell start-up file, read against the root); one assigned before; a
    /// table variable not assigned before is read by itself (empty here); another from the
    /// owner's environment.
    pub(super) fn lookup(&self, name: &str, at: At) -> Option<Vec<String>> {
        match name {
            "HOME" => self.home_dir().map(|h| vec![h]),
            "PWD" => {
                let mut values = vec![
                    at.dir
                        .map_or_else(|| ".".to_string(), |d| d.to_string_lossy().into_owned()),
                ];
                values.extend(self.vars.get("PWD").into_iter().flatten().cloned());
                Some(values)
            }
            _ if self.vars.contains_key(name) => self.vars.get(name).cloned(),
            // Set in another of the files, read later (`.profile` after `.bashrc`).
            _ if self.elsewhere.contains_key(name) => self.elsewhere.get(name).cloned(),
            // zsh's `path=(~/bin $path)`: an array tied to a variable is its value.
            "path" => self.lookup("PATH", at),
            "fpath" => self.lookup("FPATH", at),
            _ if self.ties.contains_key(name) => {
                let var = self.ties.get(name)?.clone();
                if var == name {
                    None
                } else {
                    self.lookup(&var, at)
                }
            }
            // `PATH="$HOME/bin:$PATH"`: the owner's own `PATH`, never empty (an empty entry
            // would be the working directory).
            "PATH" => Some(vec![owner_env::var(name).map_or_else(
                || "/usr/bin:/bin".to_string(),
                |v| v.to_string_lossy().into_owned(),
            )]),
            _ if owner_env::read_by_rules(name) => Some(vec![String::new()]),
            _ => owner_env::var(name).map(|v| vec![v.to_string_lossy().into_owned()]),
        }
    }

    /// What a command substitution may give: what each of its commands prints
    /// ([`Self::one_substitution`]), `None` when one is not read.
    pub(super) fn substitution(&self, text: &str, at: At, depth: usize) -> Option<Vec<String>> {
        // `$(command -v bat || echo less)`: each command's output may be the value (red team
        // 39 o8); one not read makes the whole not read.
        let commands = shell_words::commands(text, Dialect::Posix);
        if commands.is_empty() || commands.len() > 4 {
            return None;
        }
        commands
            .iter()
            .map(|words| self.one_substitution(words, at, depth))
            .collect()
    }

    /// What one command of a substitution prints, where it is read: `pwd`, `echo words`,
    /// `which NAME` / `command -v NAME` (the name), direnv's `expand_path PATH [BASE]`
    /// (absolute, relative to the `.envrc`'s directory) and `git rev-parse --show-toplevel`
    /// (the repository holding the `.envrc`).
    pub(super) fn one_substitution(&self, words: &[Word], at: At, depth: usize) -> Option<String> {
        let here = at.dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let arg = |i: usize| -> Option<String> {
            if depth >= MAX_EXPANSION_DEPTH {
                return None;
            }
            let word = words.get(i)?;
            match self.expand(word, at, depth + 1).as_slice() {
                [value] if !value.contains(MARK) => Some(value.clone()),
                _ => None,
            }
        };
        let literals: Vec<Option<String>> = words.iter().map(Word::literal).collect();
        let is = |i: usize, text: &str| literals.get(i).and_then(Option::as_deref) == Some(text);
        match (literals[0].as_deref(), words.len()) {
            (Some("pwd"), 1) => Some(here.to_string_lossy().into_owned()),
            (Some("echo"), n) if n > 1 && !is(1, "-e") && !is(1, "-n") => (1..n)
                .map(arg)
                .collect::<Option<Vec<_>>>()
                .map(|w| w.join(" ")),
            // `$(which vim)`, `$(command -v nvim)`: the program found on PATH, as the bare name
            // reads (`EDITOR=vim`).
            (Some("which"), 2) | (Some("command" | "type"), 3)
                if words.len() == 2 || is(1, "-v") || is(1, "-p") =>
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
            // Python's user site (red team 39 o9: `PYTHONPATH=$(python3 -m site --user-site)`
            // refused every write): `~/.local` and its newest `lib/python3.*/site-packages`,
            // which lie in the home's hidden dirs no write root holds.
            (Some("python" | "python3"), 4) if is(1, "-m") && is(2, "site") => {
                let home = self.home_dir()?;
                let base = Path::new(&home).join(".local");
                if is(3, "--user-base") {
                    return Some(base.to_string_lossy().into_owned());
                }
                if !is(3, "--user-site") {
                    return None;
                }
                let mut sites: Vec<PathBuf> = crate::look::read_dir(base.join("lib"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
                    })
                    .collect();
                sites.sort();
                let dir = sites.pop().unwrap_or_else(|| base.join("lib/python3"));
                Some(dir.join("site-packages").to_string_lossy().into_owned())
            }
            // `$(realpath src)`, `$(readlink -f ../lib)`, `$(dirname "$X")`, `$(basename …)`
            // (red team 40: each refused every write), against the file's directory.
            (Some("realpath"), 2) | (Some("readlink"), 3)
                if words.len() == 2 || is(1, "-f") || is(1, "-e") || is(1, "-m") =>
            {
                let given = PathBuf::from(arg(words.len() - 1)?);
                // In a start-up file a relative path is from wherever the shell is: left so.
                if at.dir.is_none() && given.is_relative() {
                    return Some(given.to_string_lossy().into_owned());
                }
                let path = here.join(given);
                let real = crate::look::canonicalize(&path)
                    .unwrap_or_else(|_| crate::command::normalize(&path));
                Some(real.to_string_lossy().into_owned())
            }
            // A name without a `/` (`$(which python3)` reads as the bare name) has no
            // directory read here.
            (Some("dirname"), 2) => {
                let path = PathBuf::from(arg(1).filter(|a| a.contains('/'))?);
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                Some(parent.map_or_else(|| ".".to_string(), |p| p.to_string_lossy().into_owned()))
            }
            (Some("basename"), 2) => {
                let path = PathBuf::from(arg(1)?);
                Some(path.file_name()?.to_string_lossy().into_owned())
            }
            (Some("git"), 3) if is(1, "rev-parse") && is(2, "--show-toplevel") => {
                // Outside a repository git prints nothing (red team 40: that refused the tree).
                let dir = at.dir?;
                Some(
                    dir.ancestors()
                        .find(|d| crate::look::exists(d.join(".git")))
                        .map(|top| top.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                )
            }
            _ => None,
        }
    }
}

/// Every `head + value` (each of `heads` with each of `values`); past [`MAX_VALUES`] the first
/// head with a [`MARK`] (not read).
pub(super) fn combine(heads: Vec<String>, values: &[String]) -> Vec<String> {
    if heads.len().saturating_mul(values.len()) > MAX_VALUES {
        let first = heads.into_iter().next().unwrap_or_default();
        return vec![format!("{first}{MARK}")];
    }
    heads
        .iter()
        .flat_map(|head| values.iter().map(move |value| format!("{head}{value}")))
        .collect()
}

/// `value` without the shortest (`%`, `#`) or longest (`%%`, `##`) suffix (`%`) or prefix
/// (`#`) `pattern` matches; [`MARK`] stays (a value not read keeps its mark).
fn remove_pattern(value: &str, op: &str, pattern: &str) -> String {
    let cuts: Vec<usize> = value
        .char_indices()
        .map(|(i, _)| i)
        .chain([value.len()])
        .collect();
    let suffix = op.starts_with('%');
    let longest = op.len() == 2;
    let fits = |at: usize| {
        let part = if suffix { &value[at..] } else { &value[..at] };
        !part.contains(MARK) && matches_pattern(pattern, part)
    };
    // Suffixes: the shortest starts last; prefixes: the shortest ends first.
    let order: Vec<usize> = match (suffix, longest) {
        (true, false) | (false, true) => cuts.iter().rev().copied().collect(),
        _ => cuts.clone(),
    };
    match order.into_iter().find(|at| fits(*at)) {
        Some(at) if suffix => value[..at].to_string(),
        Some(at) => value[at..].to_string(),
        None => value.to_string(),
    }
}

/// Whether the table's variable `name` is a `:`-separated search list, whose entries each name
/// a place whatever their order.
pub(super) fn is_search_list(name: &str) -> bool {
    owner_env::VARS.iter().any(|(var, names)| {
        *var == name
            && matches!(
                names,
                Names::ProgramPath | Names::ImportPath(_) | Names::RunDir | Names::LibraryPath
            )
    })
}

/// The variable zsh ties an array to by itself (`path` is `PATH` as a list).
pub(super) fn zsh_tied(array: &str) -> Option<&'static str> {
    match array {
        "path" => Some("PATH"),
        "fpath" => Some("FPATH"),
        _ => None,
    }
}

/// `text` with `${name}` and `$name` (not a longer name: `$HOME_X`) replaced by `value`.
pub(super) fn variable(text: &str, name: &str, value: &str) -> String {
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

/// Whether `name` matches a shell pattern of `*`, `?` and literal characters (a `[` class is
/// taken as matching any one character: more files, never fewer).
fn matches_pattern(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('[', rest)) => {
                let close = rest.iter().position(|c| *c == ']').map_or(0, |i| i + 1);
                !n.is_empty() && go(&rest[close..], &n[1..])
            }
            Some(('?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    go(&p, &n)
}
