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
//!
//! Red team 39 (finding 4, and 3, 5, 8): a variable holds *every* value the files assign it
//! (which one holds when a program starts depends on what the shell ran: a branch, a function
//! never called, a here-doc), and each is read; `+=` appends, `${X:=y}` assigns, `export
//! "NAME=…"` and `declare 'NAME='…` are assignments (the builtin splits the word), `~name` is
//! that account's home, `cd dir` in an `.envrc` adds a `$PWD`, an alias's body and a literal
//! `eval` are read as commands, `for f in dir/*` gives `$f` every file, zsh's tied arrays
//! (`typeset -T`) fail closed. An entry built on what is not read protects everything below
//! its literal directory part (not only what is named like a module there). More start-up
//! files are read (`.bash_login`, `.zlogin`, zsh's `$ZDOTDIR`, fish's `conf.d` and universal
//! variables, `environment.d`), past the bounds on files and depth the tree is refused, and a
//! file a start-up file sources by a relative path is named in every tree (it is sourced from
//! wherever the shell is: a `cd` or `chpwd` function).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::owner_env::{self, Names};
use super::shell_words::{self, Dialect, Piece, Word};
pub(super) use assigned::Assigned;
use files::{SHELL_FILES, STARTUP_DIRS, SYSTEM_SHELL_FILES, SYSTEM_STARTUP_DIRS, ZSH_FILES};

/// What a piece not read here expands to: no file or value holds it (a variable's value cannot).
const MARK: char = '\0';

/// Why a value is unreadable.
const NOT_READ: &str = "its value is built from what is not read here (a command's output, a \
     positional parameter or a variable set nowhere the gateway reads)";

/// Bytes of one file read.
const MAX_FILE: u64 = 1024 * 1024;

/// How deep files a read file sources are followed, and how many files are read in all: past
/// either, the tree is refused (what the files past them assign is not known).
const MAX_SOURCE_DEPTH: usize = 6;
const MAX_FILES: usize = 128;

/// Most values one variable, or one word's expansion, is read to hold; past it the rest is not
/// read ([`MARK`]).
const MAX_VALUES: usize = 16;

/// How many files `for f in dir/*` gives `$f` at most (past it: not read).
const MAX_GLOB: usize = 64;

/// Variables whose value is shell code, or text whose command substitutions run, before or at
/// each prompt: bash's `PROMPT_COMMAND` and `PS0`–`PS4`, zsh's `PROMPT`/`RPROMPT`/`RPS1`
/// (with `prompt_subst`): what it sources runs from wherever the shell is.
const PROMPT_CODE: [&str; 8] = [
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "PROMPT",
    "RPROMPT",
    "RPS1",
];

/// Why the bounds refuse a tree.
const PAST_BOUNDS: &str = "the owner's start-up files source more files, deeper or larger \
     than the gateway reads, so what those assign is not known";

/// How deep a value's own words are read again (`${A:-${B:-…}}`, `$(expand_path …)`).
const MAX_EXPANSION_DEPTH: usize = 4;

/// What the `.envrc` direnv loads for `root` and the root's `.env` assign, with the files they
/// source (`source_env`, `dotenv`, `source`, `.`), read against the file's directory.
pub(super) fn of_root(root: &Path, home: Option<&Path>) -> Assigned {
    let mut reader = Reader::default();
    let stop = home.filter(|home| root.starts_with(home));
    for dir in root.ancestors() {
        let envrc = dir.join(".envrc");
        if crate::look::is_file(&envrc) {
            reader.file(&envrc, Some(dir), dir, 0);
            // What it makes bash read (`export $(xargs < .env.local)`, `eval "$(cat f)"`, a
            // sourced file's own sources): their assignments are the `.envrc`'s (red team 39
            // finding 1).
            // (A watched `package-lock.json` past the bound is data, not what the shell ran.)
            // A parent's `.envrc` (`source_up`) runs in its own directory, as direnv's
            // `source_env` does: its `$PWD` is there, not here.
            let real_dir = crate::look::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            for name in super::envrc::named_places(dir).unwrap_or_default() {
                let path = dir.join(name);
                let real = crate::look::canonicalize(&path).unwrap_or_else(|_| path.clone());
                let at = match real.parent() {
                    Some(own) if !real.starts_with(&real_dir) => own.to_path_buf(),
                    _ => dir.to_path_buf(),
                };
                if crate::look::metadata(&path).is_ok_and(|meta| meta.len() <= MAX_FILE) {
                    reader.file(&path, Some(&at), &at, 1);
                }
            }
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
    // Twice: the second read starts with every variable the first found, so one a file
    // exports is known in a file read before it (`.profile` exports `PROJ`, `.bashrc`, read
    // first here, sources `$PROJ/x.sh`: a login shell reads them the other way; red team 47b
    // B7). Values only add, so the second read names all the first did.
    let first = read_shell(home, HashMap::new());
    let mut assigned = Assigned::new(read_shell(home, first.vars));
    let system = super::system_root();
    let mut looked_for: Vec<PathBuf> = SHELL_FILES.iter().map(|f| home.join(f)).collect();
    looked_for.extend(STARTUP_DIRS.iter().map(|(dir, _)| home.join(dir)));
    looked_for.extend(SYSTEM_SHELL_FILES.iter().map(|f| system.join(f)));
    looked_for.extend(SYSTEM_STARTUP_DIRS.iter().map(|(dir, _)| system.join(dir)));
    looked_for.retain(|f| !assigned.read.contains(f));
    assigned.read.extend(looked_for);
    assigned
}

/// One read of `home`'s shell start-up files, starting from `vars`.
fn read_shell(home: &Path, elsewhere: HashMap<String, Vec<String>>) -> Reader {
    let mut reader = Reader {
        home: Some(home.to_string_lossy().into_owned()),
        elsewhere,
        ..Reader::default()
    };
    // The system's first, as a login shell reads them.
    let system = super::system_root();
    for file in SYSTEM_SHELL_FILES {
        reader.file(&system.join(file), None, home, 0);
    }
    for (dir, suffix) in SYSTEM_STARTUP_DIRS {
        reader.dir(&system.join(dir), suffix, home);
    }
    for file in SHELL_FILES {
        reader.file(&home.join(file), None, home, 0);
    }
    // zsh reads its files in `$ZDOTDIR` instead, when `.zshenv` sets it.
    for zdotdir in reader.values_of("ZDOTDIR") {
        for file in ZSH_FILES {
            reader.file(&Path::new(&zdotdir).join(file), None, home, 0);
        }
    }
    for (dir, suffix) in STARTUP_DIRS {
        reader.dir(&home.join(dir), suffix, home);
    }
    reader.fish_universal(&home.join(".config/fish/fish_variables"));
    reader
}

/// Files read so far and what they assign.
#[derive(Default)]
struct Reader {
    out: Vec<(&'static str, OsString)>,
    /// git's config variables as assigned (expanded).
    git: Vec<(String, String)>,
    unreadable: Vec<(String, String)>,
    /// Every value each variable assigned so far may hold, expanded ([`MARK`] where a piece
    /// was not read).
    vars: HashMap<String, Vec<String>>,
    /// What an earlier read of the same files gave each variable: a variable one file sets is
    /// known in a file read before it ([`of_shell`]).
    elsewhere: HashMap<String, Vec<String>>,
    read: Vec<PathBuf>,
    below: Vec<(&'static str, PathBuf)>,
    relative_sources: Vec<PathBuf>,
    runs: Vec<PathBuf>,
    bare_runs: Vec<String>,
    /// Names the start-up files define as functions or aliases: typed, they run the
    /// definition, not a program found on `PATH`.
    defined: Vec<String>,
    run_dirs: Vec<PathBuf>,
    /// Shell scripts a start-up file ran by an absolute path, not yet read.
    ran: Vec<String>,
    /// Where a start-up file's `cd` to an absolute directory went: a relative program after it
    /// (`cd /p && ./x`) runs from there.
    shell_cwd: Option<String>,
    /// The home whose files are read (`$HOME`, `~`); none: this process's.
    home: Option<String>,
    /// zsh's tied arrays (`typeset -T PERL5LIB perl5lib`): the array → the variable.
    ties: HashMap<String, String>,
}

/// Where a file's text is read: its directory for `.envrc`/`.env` (`$PWD`, relative entries),
/// none for a shell start-up file (its relative entries stay relative).
#[derive(Clone, Copy)]
struct At<'a> {
    dir: Option<&'a Path>,
}

impl Reader {
    /// Read every file of `dir` whose name ends in `suffix`, in name order (a start-up
    /// directory: `conf.d`, `profile.d`).
    fn dir(&mut self, dir: &Path, suffix: &str, home: &Path) {
        let Ok(entries) = crate::look::read_dir(dir) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.to_string_lossy().ends_with(suffix))
            .collect();
        files.sort();
        for file in files {
            self.file(&file, None, home, 0);
        }
    }

    /// Read `path` (once, within the bounds): its assignments, then the files it sources,
    /// relative to `base`.
    fn file(&mut self, path: &Path, dir: Option<&Path>, base: &Path, depth: usize) {
        // By the file it is (`env/../.envrc` is `.envrc`): a cycle of sources ends.
        let real = crate::look::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.read.contains(&real) || !crate::look::is_file(&real) {
            return;
        }
        if self.read.len() >= MAX_FILES
            || crate::look::metadata(&real).is_ok_and(|meta| meta.len() > MAX_FILE)
        {
            return self.past_bounds(&real);
        }
        let Some(text) = super::read_head(path, MAX_FILE) else {
            return;
        };
        self.read.push(real.clone());
        let dialect = match path.extension() {
            Some(ext) if ext == "fish" => Dialect::Fish,
            _ => Dialect::Posix,
        };
        let at = At { dir };
        if dir.is_none() {
            self.files_named(&text, dialect, at);
        }
        let commands = shell_words::commands(&text, dialect);
        let mut sourced = Vec::new();
        for words in &commands {
            self.command(words, at);
            // direnv's `source_up [FILE]`: the nearest FILE (`.envrc`) above this directory,
            // read in its own directory (red team 40's open shape: its assignments were not
            // read).
            if let (Some(here), Some(verb)) = (dir, words.first().and_then(Word::literal))
                && matches!(verb.as_str(), "source_up" | "source_up_if_exists")
            {
                let name = words.get(1).and_then(Word::literal);
                let name = name.as_deref().unwrap_or(".envrc");
                let found = here
                    .parent()
                    .and_then(|up| up.ancestors().find(|a| crate::look::is_file(a.join(name))));
                if let Some(found) = found {
                    sourced.push(found.join(name).to_string_lossy().into_owned());
                }
            }
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
                for text in self.expand(file, at, 0) {
                    // From wherever the shell is when it runs this (a `cd` or `chpwd`
                    // function, `. "$PWD/.localrc"`): named in every tree (red team 39 #8).
                    if dir.is_none() && !text.starts_with('/') && !text.contains(MARK) {
                        self.relative_sources.push(PathBuf::from(&text));
                    }
                    sourced.push(text);
                }
            }
        }
        if dir.is_none() {
            // A start-up file's sources and the shell scripts it runs by absolute path: places
            // (their text runs in the owner's shell), read in turn for what they assign,
            // source and run.
            for text in &sourced {
                if text.starts_with('/') && !text.contains(MARK) {
                    self.runs.push(PathBuf::from(text));
                }
            }
            sourced.append(&mut self.ran);
        }
        if depth >= MAX_SOURCE_DEPTH {
            if sourced.iter().any(|text| !text.contains(MARK)) {
                self.past_bounds(&real);
            }
            return;
        }
        for text in sourced {
            // A computed path (`. "$(brew --prefix)/x"`): not read (a stated limit).
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
    /// `declare`/`typeset`/`local`/`readonly` (options skipped; a quoted `"NAME=…"` too, the
    /// builtin splits it) or of a bare assignment (also those before a command: read, never
    /// run, so counted), `NAME+=value`, `${NAME:=value}` anywhere, direnv's `path_add NAME
    /// dir`, fish's `set -x/-gx/-a/-p NAME value…`, an alias's body and a literal `eval`'s
    /// text (read as commands), `for NAME in words` (each word, a pattern's files) and, in an
    /// `.envrc`, `cd dir` (another `$PWD`).
    fn command(&mut self, words: &[Word], at: At) {
        self.command_at(words, at, 0);
    }

    fn command_at(&mut self, words: &[Word], at: At, depth: usize) {
        // `: "${PYTHONPATH:=$HOME/src}"`: assigned where it is expanded.
        for piece in words.iter().flat_map(|word| &word.pieces) {
            if let Piece::VarOr { name, op, word } = piece
                && (op == ":=" || op == "=")
            {
                let word = shell_words::word(word, Dialect::Posix);
                for value in self.expand(&word, at, 1) {
                    self.assign(name, value, at);
                }
            }
        }
        let first = words.first().and_then(Word::literal);
        match first.as_deref() {
            // direnv: `PATH_add DIR…` prepends to `PATH`, `path_add NAME DIR…` to NAME (each
            // directory made absolute against the `.envrc`'s, as direnv's `expand_path` does).
            Some(verb @ ("path_add" | "PATH_add")) => {
                let (name, dirs) = match (verb, words) {
                    ("PATH_add", [_, dirs @ ..]) => (Some("PATH".to_string()), dirs),
                    (_, [_, name, dirs @ ..]) => (name.literal(), dirs),
                    _ => (None, &words[..0]),
                };
                if let Some(name) = name {
                    let here = at.dir.map(Path::to_path_buf);
                    for dir in dirs
                        .iter()
                        .flat_map(|d| shell_words::brace_expand(d, Dialect::Posix))
                    {
                        for value in self.expand(&dir, at, 0) {
                            let value = match &here {
                                Some(here) if !value.starts_with(['/', MARK]) => {
                                    here.join(value).to_string_lossy().into_owned()
                                }
                                _ => value,
                            };
                            self.assign(&name, value, at);
                        }
                    }
                }
            }
            // direnv's layouts and `load_prefix` put directories of the tree on `PATH` (and a
            // prefix's `lib` on the loader's path); the others' directories lie in `.direnv/`,
            // a place of its own.
            Some(verb @ ("layout" | "load_prefix")) if at.dir.is_some() => {
                let here = at.dir.map(Path::to_path_buf).unwrap_or_default();
                let layout = words.get(1).and_then(Word::literal);
                let dirs: Vec<(&str, PathBuf)> = match (verb, layout.as_deref()) {
                    ("layout", Some("go")) => vec![("PATH", here.join("bin"))],
                    ("layout", Some("node")) => vec![("PATH", here.join("node_modules/.bin"))],
                    ("layout", Some("php")) => vec![("PATH", here.join("vendor/bin"))],
                    ("load_prefix", _) => words
                        .get(1)
                        .into_iter()
                        .flat_map(|w| self.expand(w, at, 0))
                        .flat_map(|prefix| {
                            let prefix = here.join(prefix);
                            [
                                ("PATH", prefix.join("bin")),
                                ("LD_LIBRARY_PATH", prefix.join("lib")),
                            ]
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                for (name, dir) in dirs {
                    self.assign(name, dir.to_string_lossy().into_owned(), at);
                }
            }
            Some("set") => self.fish_set(&words[1..], at),
            Some("export" | "declare" | "typeset" | "local" | "readonly") => {
                let flags: String = words[1..]
                    .iter()
                    .filter_map(Word::literal)
                    .filter(|w| w.starts_with('-'))
                    .collect();
                // Arguments: brace-expanded (`export PYTHONPATH=/x/{a,b}` assigns twice).
                let names: Vec<Word> = words[1..]
                    .iter()
                    .filter(|w| !w.literal().is_some_and(|w| w.starts_with('-')))
                    .flat_map(|w| shell_words::brace_expand(w, Dialect::Posix))
                    .collect();
                // bash: `declare -n ref=PYTHONPATH`: assigning `ref` assigns the variable.
                if flags.contains('n') {
                    for word in &names {
                        if let Some((reference, target)) =
                            word.literal().as_deref().and_then(|w| w.split_once('='))
                        {
                            self.ties.insert(reference.to_string(), target.to_string());
                        }
                    }
                }
                // zsh: `typeset -T PERL5LIB perl5lib` ties the array to the variable.
                if flags.contains('T')
                    && let [var, array, ..] = names.as_slice()
                    && let (Some(var), Some(array)) = (var.literal(), array.literal())
                {
                    self.ties.insert(array.clone(), var.clone());
                    self.tied(&array, at);
                }
                for word in &names {
                    // `declare -n ref=NAME` makes a reference, read above, not an assignment.
                    if flags.contains('n') {
                        continue;
                    }
                    if !self.assignment(word, at, true) && !self.computed_assignment(word, at) {
                        // `export X`: an array tied to it may have been assigned.
                        if let Some(name) = word.literal() {
                            self.tied(&name, at);
                        }
                    }
                }
            }
            Some("cd" | "pushd") if at.dir.is_some() => {
                if let Some(target) = words.get(1) {
                    let here = at.dir.map(Path::to_path_buf).unwrap_or_default();
                    for value in self.expand(target, at, 0) {
                        let value = here.join(value).to_string_lossy().into_owned();
                        self.assign("PWD", value, at);
                    }
                }
            }
            Some("for") => {
                if let [_, name, keyword, items @ ..] = words
                    && keyword.literal().is_some_and(|k| k == "in")
                    && let Some(name) = name.literal()
                {
                    for item in items
                        .iter()
                        .flat_map(|i| shell_words::brace_expand(i, Dialect::Posix))
                    {
                        for value in self.expand_pattern(&item, at) {
                            self.assign(&name, value, at);
                        }
                    }
                }
            }
            // Builtins that assign a variable named by an argument, with a value not read here
            // (red team 40: `printf -v`, `read`, zsh's `print -v`, `mapfile`, a nameref).
            Some("printf" | "print" | "read" | "mapfile" | "readarray") => {
                self.assigned_by_name(first.as_deref().unwrap_or(""), &words[1..], at);
            }
            // `env NAME=value cmd`: assignments for the command (read, never run).
            Some("env") => {
                for word in words[1..]
                    .iter()
                    .skip_while(|w| w.literal().is_some_and(|w| w.starts_with('-')))
                {
                    if !self.assignment(word, at, false) {
                        break;
                    }
                }
                if at.dir.is_none() {
                    self.program_run(words, at, depth);
                }
            }
            // `trap 'code' SIGNAL`: code the shell runs later, from wherever it is then.
            Some("trap") if depth < MAX_EXPANSION_DEPTH => {
                if let Some(code) = words.get(1).and_then(Word::literal) {
                    self.code(&code, at, depth + 1);
                }
            }
            Some("alias" | "eval") if depth < MAX_EXPANSION_DEPTH => {
                let alias = first.as_deref() == Some("alias");
                let mut texts = Vec::new();
                for word in &words[1..] {
                    // `eval "$(cat .x)"`, `eval "$(< .x)"`: the file printed is the code
                    // (red teams 49, 51); what the substitution runs is read too.
                    for piece in &word.pieces {
                        if let Piece::Command(inner) = piece {
                            self.printed_code(inner);
                            self.code(inner, at, depth + 1);
                        }
                    }
                    for text in self.expand(word, at, 0) {
                        if text.contains(MARK) {
                            // `eval "$(pyenv init -)"`: a program's output (a stated limit).
                            continue;
                        }
                        match text.split_once('=') {
                            Some((_, body)) if alias => texts.push(body.to_string()),
                            _ if !alias => texts.push(text),
                            _ => {}
                        }
                    }
                }
                let text = if alias {
                    texts.join("\n")
                } else {
                    texts.join(" ")
                };
                for words in shell_words::commands(&text, Dialect::Posix) {
                    self.command_at(&words, at, depth + 1);
                }
            }
            _ => {
                for (i, word) in words.iter().enumerate() {
                    if !self.assignment(word, at, false) {
                        if i == 0 && at.dir.is_none() {
                            self.program_run(words, at, depth);
                        }
                        // `IFS=: read -r PERL5LIB`: the command after the prefix assignments.
                        if i > 0 && depth < MAX_EXPANSION_DEPTH {
                            self.command_at(&words[i..], at, depth + 1);
                        }
                        break;
                    }
                }
            }
        }
    }

    /// `export "$V=value"`: an assignment to the variable(s) `$V` may name (red team 40), each
    /// assigned; a name not read here makes the tree unreadable. False when the word holds no
    /// `=` after its expansions (no assignment).
    fn computed_assignment(&mut self, word: &Word, at: At) -> bool {
        let Some(split) = word
            .pieces
            .iter()
            .position(|piece| matches!(piece, Piece::Text { text, .. } if text.contains('=')))
        else {
            return false;
        };
        let Piece::Text { text, quoted } = &word.pieces[split] else {
            return false;
        };
        let (head, tail) = text.split_once('=').unwrap_or((text, ""));
        let mut name_pieces = word.pieces[..split].to_vec();
        name_pieces.push(Piece::Text {
            text: head.to_string(),
            quoted: *quoted,
        });
        for name in self.expand(
            &Word {
                pieces: name_pieces,
            },
            at,
            0,
        ) {
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                self.unreadable.push((
                    "a variable named by an expansion".to_string(),
                    "an `export` or `declare` assigns a variable whose name is not read here"
                        .to_string(),
                ));
                continue;
            }
            let mut pieces = vec![Piece::Text {
                text: format!("{name}={tail}"),
                quoted: false,
            }];
            pieces.extend(word.pieces[split + 1..].iter().cloned());
            self.assignment(&Word { pieces }, at, true);
        }
        true
    }

    /// Shell code held in a string (`trap`, `PROMPT_COMMAND`): its commands read as the file's,
    /// and a file it sources by a relative path named in every tree.
    fn code(&mut self, text: &str, at: At, depth: usize) {
        // The commands of its substitutions too (a prompt's `$(. ./x)` runs at every prompt).
        for words in shell_words::commands_reading(text, Dialect::Posix, MAX_EXPANSION_DEPTH) {
            self.command_at(&words, at, depth);
            if let [verb, file, ..] = words.as_slice()
                && verb.literal().is_some_and(|v| v == "source" || v == ".")
                && let Some(file) = file.literal()
                && !file.starts_with('/')
                && at.dir.is_none()
                && !self.relative_sources.contains(&PathBuf::from(&file))
            {
                self.relative_sources.push(PathBuf::from(file));
            }
        }
    }

    /// `printf -v NAME`, `read [-a] NAME…`, `print -v NAME`, `mapfile`/`readarray NAME`: the
    /// variables they assign hold what is not read here; one the rules read, or one named by
    /// an expansion, makes that variable (or the tree) unreadable.
    fn assigned_by_name(&mut self, verb: &str, args: &[Word], at: At) {
        let _ = at;
        let mut targets: Vec<Option<String>> = Vec::new();
        let mut after_v = false;
        for word in args {
            let literal = word.literal();
            match (verb, literal.as_deref()) {
                ("printf" | "print", Some("-v")) => after_v = true,
                ("printf" | "print", _) if after_v => {
                    targets.push(literal.clone());
                    after_v = false;
                }
                ("read" | "mapfile" | "readarray", Some(flag)) if flag.starts_with('-') => {}
                ("read" | "mapfile" | "readarray", _) => targets.push(literal.clone()),
                _ => {}
            }
        }
        for target in targets {
            let name = match target {
                Some(name) => name.split('[').next().unwrap_or("").to_string(),
                None => "a variable named by an expansion".to_string(),
            };
            let read_here = owner_env::read_by_rules(&name) || owner_env::is_git_config_var(&name);
            if read_here || name.starts_with("a variable") {
                self.unreadable.push((
                    name,
                    format!("it is assigned by `{verb}`, whose value is not read here"),
                ));
            }
        }
    }

    /// A zsh array tied to a variable (`perl5lib`, tied to `PERL5LIB`) assigned in the files:
    /// its elements are not read here, so the variable is not either.
    fn tied(&mut self, array: &str, _at: At) {
        if let Some(var) = self.ties.get(array).cloned()
            && self.vars.contains_key(array)
        {
            self.unreadable.push((
                var,
                "it is assigned through another name (a zsh tied array, a bash nameref) whose \
                 values are not read here"
                    .to_string(),
            ));
        }
    }

    /// A `NAME=value` (or `NAME+=value`) word, assigned; false when the word is no assignment.
    /// `builtin` (an argument of `export` and its kin): the name may be quoted.
    fn assignment(&mut self, word: &Word, at: At, builtin: bool) -> bool {
        let mut name = String::new();
        let mut value: Option<Vec<Piece>> = None;
        for (i, piece) in word.pieces.iter().enumerate() {
            let Piece::Text { text, quoted } = piece else {
                return false;
            };
            if *quoted && !builtin {
                return false;
            }
            match text.split_once('=') {
                Some((head, tail)) => {
                    name.push_str(head);
                    let mut pieces = vec![Piece::Text {
                        text: tail.to_string(),
                        quoted: *quoted,
                    }];
                    pieces.extend(word.pieces[i + 1..].iter().cloned());
                    value = Some(pieces);
                    break;
                }
                None => name.push_str(text),
            }
        }
        let Some(pieces) = value else {
            return false;
        };
        let (name, append) = match name.strip_suffix('+') {
            Some(name) => (name.to_string(), true),
            None => (name, false),
        };
        // `a[1]=x`: an element (bash's element 0 is the scalar).
        let name = match name.split_once('[') {
            Some((base, subscript)) if subscript.ends_with(']') => base.to_string(),
            _ => name,
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return false;
        }
        let values = match pieces.as_slice() {
            // `NAME=(a b)`, `NAME+=(c)`: each element is a value the variable holds (bash
            // exports the first, zsh joins a tied array's with `:`, `PROMPT_COMMAND` runs each).
            [Piece::Text { text, .. }, Piece::Array(elements)] if text.is_empty() => elements
                .iter()
                .flat_map(|element| self.expand(element, at, 0))
                .collect(),
            _ => {
                let values = self.expand(&Word { pieces }, at, 0);
                if append {
                    let old = self.lookup(&name, at).unwrap_or_default();
                    let old = if old.is_empty() {
                        vec![String::new()]
                    } else {
                        old
                    };
                    combine(old, &values)
                } else {
                    values
                }
            }
        };
        if PROMPT_CODE.contains(&name.as_str()) {
            // Code bash runs before each prompt, from wherever the shell is (red team 40).
            for value in &values {
                self.code(value, at, 1);
            }
        }
        // Through another name: zsh's `path` or a tied array (`typeset -T`), a bash nameref.
        let through = zsh_tied(&name)
            .map(str::to_string)
            .or_else(|| self.ties.get(&name).cloned());
        for value in values {
            if let Some(var) = &through {
                self.assign(var, value.clone(), at);
            }
            self.assign(&name, value, at);
        }
        true
    }

    /// The home whose files are read: the one given, else this process's `$HOME`.
    fn home_dir(&self) -> Option<String> {
        self.home
            .clone()
            .or_else(|| std::env::var("HOME").ok())
            .filter(|h| !h.is_empty())
    }

    /// The values `name` was assigned in the files read.
    fn values_of(&self, name: &str) -> Vec<String> {
        self.vars
            .get(name)
            .into_iter()
            .flatten()
            .filter(|value| !value.contains(MARK) && !value.is_empty())
            .cloned()
            .collect()
    }

    /// The files past the bounds, the first found at `file`: what they assign is not known. The
    /// file is named (in whichever home it is: red team 48 F6 — another gateway's home past the
    /// bounds refused every write with nothing to look for).
    fn past_bounds(&mut self, file: &Path) {
        if self.unreadable.iter().any(|(_, why)| why == PAST_BOUNDS) {
            return;
        }
        let entry = (
            format!(
                "the owner's start-up files (past the bounds at {})",
                file.display()
            ),
            PAST_BOUNDS.to_string(),
        );
        self.unreadable.push(entry);
    }

    /// Record `name = value`: every variable for later expansions; the table's variables
    /// (read by their kind) and git's config variables for the rules.
    fn assign(&mut self, name: &str, value: String, at: At) {
        let values = self.vars.entry(name.to_string()).or_default();
        let value = if is_search_list(name) {
            // A search list (`PATH`, `PYTHONPATH`…) holds one value: every entry it may hold,
            // in the order first seen. Each place rule is per entry, never per order, and
            // every line `PATH="x:$PATH"` doubling its possible values had reached the bound
            // after four such lines: past it, every file named like a program anywhere was
            // refused (a real `.bashrc` has more: red team 44a C3-B1).
            let mut entries: Vec<String> = values
                .first()
                .map(|v| v.split(':').map(str::to_string).collect())
                .unwrap_or_default();
            let known = entries.len();
            for entry in value.split(':') {
                if !entries.iter().any(|e| e == entry) {
                    entries.push(entry.to_string());
                }
            }
            if known == entries.len() && !values.is_empty() {
                return;
            }
            *values = vec![entries.join(":")];
            value
        } else {
            // Past the bound: this one and later ones are not read.
            let value = if values.len() >= MAX_VALUES {
                MARK.to_string()
            } else {
                value
            };
            if values.contains(&value) {
                return;
            }
            values.push(value.clone());
            value
        };
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
            | Names::GoFlags
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
                if let Some(home) = self.home_dir() {
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
                let program_path = matches!(names, Names::ProgramPath);
                for entry in value.split(separators) {
                    // An empty `PATH` entry is the working directory, wherever the shell is.
                    let mut text = match entry {
                        "" if program_path => ".".to_string(),
                        "" => continue,
                        entry => entry.to_string(),
                    };
                    if let Some(mark) = text.find(MARK) {
                        // Built on what is not read: its literal directory part, and
                        // everything below it (red team 39 #5: `build/$(uname -m)`).
                        match text[..mark].rfind('/') {
                            Some(slash) if slash > 0 => {
                                text.truncate(slash);
                                let dir = match at.dir {
                                    Some(dir) if !text.starts_with('/') => dir.join(&text),
                                    _ => PathBuf::from(&text),
                                };
                                self.below.push((var, dir));
                            }
                            // `ENV=$STAGE` (an application's setting): no file either way.
                            _ if *var == "ENV" => continue,
                            // `$(go env GOPATH)/bin`: any directory may be on `PATH`; what
                            // that costs is a file named like a program anywhere
                            // (`Scope::ProgramsBelow`), not every write of the tree.
                            _ if program_path => {
                                self.below.push((var, PathBuf::from("/")));
                                continue;
                            }
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

pub(super) mod agents;
mod assigned;
mod expand;
mod files;
mod fish;
mod runs;

use expand::{combine, is_search_list, variable, zsh_tied};

#[cfg(test)]
mod path_tests;
#[cfg(test)]
mod tests;
