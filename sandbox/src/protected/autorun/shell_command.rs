//! The files a shell command line names (issue 23): the values git's configuration runs
//! through the shell (`core.fsmonitor`, a filter, a diff driver, an `!` alias) read as the shell
//! reads them, so a session cannot change the program such a value runs. A value git runs by
//! itself fails closed: when its meaning depends on more than its words, it names the whole
//! tree. A value the owner runs by name (an alias, a difftool) names only what it spells out.

/// Nested `sh -c '…'` lines read before giving up (each level drops a layer of quotes).
const MAX_DEPTH: usize = 4;

/// Words that change what the rest means: another directory, a sourced or evaluated file, a
/// program found from file names the shell or a tool computes.
const CHANGES_MEANING: [&str; 10] = [
    "cd", "pushd", "popd", ".", "source", "eval", "exec", "xargs", "find", "busybox",
];

/// Programs that run code given inline or found through a search path, which may be any file
/// of the tree (`ruby -Ilib -rx`, `node --require=./x`, `awk -f x`).
const INTERPRETERS: [&str; 28] = [
    "python", "pypy", "node", "nodejs", "bun", "deno", "perl", "ruby", "php", "lua", "luajit",
    "rscript", "java", "tclsh", "julia", "elixir", "erl", "escript", "guile", "racket", "irb",
    "groovy", "tsx", "ts-node", "awk", "gawk", "mawk", "nawk",
];

/// Options of those programs that take inline code, a search path or a script by another name.
const CODE_OPTIONS: [&str; 16] = [
    "-c",
    "-e",
    "-E",
    "-r",
    "-I",
    "-M",
    "-f",
    "-p",
    "-x",
    "-cp",
    "--eval",
    "--print",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
];

/// Shells: their `-c` argument is another command line.
const SHELLS: [&str; 8] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"];

/// How far a value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// Git runs it by itself (`core.fsmonitor` at every `git status`): what cannot be resolved
    /// to files names the whole tree.
    Strict,
    /// The owner runs it by name (`git <alias>`, `git difftool`): like a Makefile target, it
    /// names what it spells out and nothing more.
    Literal,
}

/// What one place covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The path and everything below it.
    Below,
    /// What Python imports from this directory when it is first on `sys.path` (the directory
    /// of a script it runs, the working directory for `-m`): its module files (`.py`, `.pyc`,
    /// `.so`, `.pyd`) and package `__init__.py` files one level down, by any name, since such a
    /// file shadows the module of that name the program imports.
    Imports,
}

/// One file or directory a value names, relative to where git runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NamedPath {
    pub path: String,
    pub scope: Scope,
}

/// What a value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Named {
    Paths(Vec<NamedPath>),
    /// Nothing narrower can be said (why, in words for the refusal).
    WholeTree(&'static str),
}

/// One word of a command line, quotes and backslashes removed.
struct Word {
    text: String,
    /// In a command's place (first, or after `;`, `&&`, `|`, `(`…): found on PATH when bare.
    command: bool,
    /// Holds an unquoted `*`, `?`, `[` or `{…,…}`: the shell expands it to files nobody can
    /// list here.
    glob: bool,
}

/// The files in the tree a command value may run or read, relative to the working tree's top
/// (where git runs it, through the shell): every word of it (quotes and backslashes removed, as
/// the shell reads them) but a command's own name without a `/` (found on PATH) and options;
/// the value after `=` in an assignment or option (`X=./a`, `--rcfile=./b`) and after a short
/// option's letter (`-fconv.awk`); the words of the line a shell's `-c` runs. For a script an
/// interpreter runs, its directory (Python: what it imports from there; `python -m`: from the
/// top). Read [`Reading::Strict`]ly, a line whose words the shell computes (`$NAME`, backticks,
/// globs, `~user`; git's own arguments `$1`, `$@` are no file names), that changes directory,
/// sources or runs computed names (`cd`, `env -C`, `.`, `eval`, `xargs`, `find`), feeds a shell
/// its script on stdin, or gives an interpreter inline code or a search path (`python3 -c`,
/// `ruby -I`) names the whole tree.
pub(super) fn program_paths(value: &str, reading: Reading) -> Named {
    let mut out = Vec::new();
    match paths(value, reading, 0, &mut out) {
        Err(why) if reading == Reading::Strict => Named::WholeTree(why),
        _ => Named::Paths(out),
    }
}

/// Git's arguments to the program (`$1`…`$9`, `$@`, `$*`, `$#`…): values git passes, not file
/// names the shell computes from the tree.
fn without_parameters(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some(&next) if next.is_ascii_digit() || "@*#?!-".contains(next) => {
                chars.next();
            }
            Some('{') => {
                let inner: String = chars.clone().skip(1).take_while(|&c| c != '}').collect();
                if !inner.is_empty() && inner.chars().all(|c| c.is_ascii_digit() || c == '@') {
                    chars.nth(inner.len() + 1);
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn base_name(word: &str) -> String {
    let name = word.rsplit('/').next().unwrap_or_default().to_lowercase();
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        .to_string()
}

/// Collect what `value` names into `out`; `Err`: what makes it unknowable.
fn paths(
    value: &str,
    reading: Reading,
    depth: usize,
    out: &mut Vec<NamedPath>,
) -> Result<(), &'static str> {
    if depth > MAX_DEPTH {
        return Err("its shell lines nest too deep to read");
    }
    let value = without_parameters(value);
    let words = split(&value);
    let env = words.iter().any(|word| base_name(&word.text) == "env");
    let mut result = Ok(());
    let mut fail = |why| {
        if result.is_ok() {
            result = Err(why);
        }
    };
    if value.contains('$') || value.contains('`') {
        fail("the shell computes part of it ($…, `…`)");
    }
    if value.contains("\\\n") {
        fail("it continues over lines");
    }
    fn push(out: &mut Vec<NamedPath>, path: &str, scope: Scope) {
        if !path.is_empty() {
            out.push(NamedPath {
                path: path.to_string(),
                scope,
            });
        }
    }
    // What the current command runs: a shell or an interpreter take a script (or a line).
    let mut runner: Option<Runner> = None;
    let mut script_taken = false;
    // `X=1 tool`, `env X=1 tool`: the command's place passes to the next word.
    let mut command_next = false;
    // A shell's `-c` (also `-ec`, `-c --`): the next word that is not an option is a line.
    let mut line_next = false;
    let mut module_next = false;
    let mut stdin_script = false;
    for word in &words {
        let text = word.text.as_str();
        let command = word.command || std::mem::take(&mut command_next);
        if word.command && std::mem::take(&mut stdin_script) {
            fail("a shell reads its script from standard input");
        }
        if word.glob {
            fail("the shell expands a pattern in it");
        }
        if CHANGES_MEANING.contains(&text) {
            fail("it changes directory, sources a file or runs names computed from files");
        }
        if env && (text == "-C" || text.starts_with("--chdir") || text.starts_with("-S")) {
            fail("env runs it from another directory or splits a line");
        }
        if text.starts_with('~') && !text.starts_with("~/") {
            fail("it names another account's home (~user)");
        }
        if !text.starts_with('-')
            && let Some((name, assigned)) = text.split_once('=')
        {
            let assignment =
                !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            command_next = command && assignment;
            assigned_paths(assigned, false, reading, depth, out, &mut fail);
            continue;
        }
        if command {
            let name = base_name(text);
            runner = if SHELLS.contains(&name.as_str()) {
                Some(Runner::Shell)
            } else if name == "python" || name == "pypy" {
                Some(Runner::Python)
            } else if INTERPRETERS.contains(&name.as_str()) {
                Some(Runner::Interpreter)
            } else {
                None
            };
            script_taken = false;
            stdin_script = runner == Some(Runner::Shell);
            command_next = WRAPPERS.contains(&name.as_str());
            if text.contains('/') {
                push(out, text, Scope::Below);
            }
            continue;
        }
        if std::mem::take(&mut module_next) {
            // `python -m pkg.mod`: the package or module at the top, and what the program
            // imports from the top (first on `sys.path`).
            let first = text.split('.').next().unwrap_or_default();
            push(out, first, Scope::Below);
            push(out, &format!("{first}.py"), Scope::Below);
            push(out, ".", Scope::Imports);
            script_taken = true;
            stdin_script = false;
            continue;
        }
        if line_next && !text.starts_with('-') {
            line_next = false;
            if let Err(why) = paths(text, reading, depth + 1, out) {
                fail(why);
            }
            script_taken = true;
            stdin_script = false;
            continue;
        }
        if let Some(option) = text.strip_prefix('-') {
            match runner {
                Some(Runner::Shell) if !option.starts_with('-') && option.contains('c') => {
                    line_next = true;
                }
                Some(Runner::Shell) if !option.starts_with('-') && option.contains('s') => {
                    fail("a shell reads its script from standard input");
                }
                Some(Runner::Python) if option == "m" => module_next = true,
                Some(Runner::Python | Runner::Interpreter)
                    if CODE_OPTIONS
                        .iter()
                        .any(|code| text == *code || text.starts_with(code)) =>
                {
                    fail("an interpreter runs inline code or loads from a search path");
                }
                // `-fconv.awk`: a short option's value written against its letter.
                _ if !option.starts_with('-')
                    && option.len() > 1
                    && option.contains(['.', '/']) =>
                {
                    push(out, &option[1..], Scope::Below);
                }
                _ => {}
            }
            // `--rcfile=rc`, `-Dx=./y`: the value may be a file the program reads.
            if let Some((_, assigned)) = text.split_once('=') {
                assigned_paths(assigned, true, reading, depth, out, &mut fail);
            }
            continue;
        }
        if runner.is_some() && !std::mem::replace(&mut script_taken, true) {
            // A script: what it loads from beside it runs too.
            stdin_script = false;
            let dir = text.rsplit_once('/').map_or(".", |(dir, _)| dir);
            let dir = if dir.is_empty() { "/" } else { dir };
            push(out, text, Scope::Below);
            match runner {
                Some(Runner::Python) => push(out, dir, Scope::Imports),
                Some(Runner::Interpreter) => push(out, dir, Scope::Below),
                _ => {}
            }
            // `--rcfile=rc`, `-Dx=./y`: the value may be a file the program reads.
            if let Some((_, assigned)) = text.split_once('=') {
                assigned_paths(assigned, true, reading, depth, out, &mut fail);
            }
            continue;
        }
        match reading {
            // An argument: a file the program may read as code or configuration.
            Reading::Strict if text.contains(['/', '.']) => push(out, text, Scope::Below),
            // `difftool -x 'sh tools/d.sh'`: a quoted line given to the command.
            Reading::Literal if text.contains(char::is_whitespace) => {
                let _ = paths(text, reading, depth + 1, out);
            }
            _ => {}
        }
    }
    if stdin_script {
        fail("a shell reads its script from standard input");
    }
    result
}

/// The files an assigned value (`X=./a`, `--config=./c`) names: each part after `=`, read as
/// a line when it holds blanks; a variable's value only when it looks like a path.
fn assigned_paths(
    assigned: &str,
    option: bool,
    reading: Reading,
    depth: usize,
    out: &mut Vec<NamedPath>,
    fail: &mut impl FnMut(&'static str),
) {
    for part in assigned.split('=') {
        if part.contains(char::is_whitespace) {
            if let Err(why) = paths(part, reading, depth + 1, out) {
                fail(why);
            }
        } else if !part.is_empty()
            && !part.starts_with('-')
            && (option || part.contains(['/', '.']))
        {
            out.push(NamedPath {
                path: part.to_string(),
                scope: Scope::Below,
            });
        }
    }
}

/// What a command word runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Shell,
    Python,
    Interpreter,
}

/// Commands that run the next word as the command (`env X=1 tool`, `nice tool`).
const WRAPPERS: [&str; 8] = [
    "env", "nice", "nohup", "sudo", "command", "time", "stdbuf", "setsid",
];

/// The words of a command line as the shell splits them.
fn split(value: &str) -> Vec<Word> {
    /// The word being read, started (in a command's place or not) at its first character.
    fn current<'a>(word: &'a mut Option<Word>, command_next: &mut bool) -> &'a mut Word {
        word.get_or_insert_with(|| Word {
            text: String::new(),
            command: std::mem::take(command_next),
            glob: false,
        })
    }
    let (mut words, mut word, mut quoting, mut command_next) = (Vec::new(), None, None, true);
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoting, c) {
            (Some(q), c) if c == q => quoting = None,
            // In double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and a newline.
            (Some('"'), '\\') => {
                let word = current(&mut word, &mut command_next);
                match chars.peek() {
                    Some(&next) if "$`\"\\\n".contains(next) => {
                        word.text.push(next);
                        chars.next();
                    }
                    _ => word.text.push('\\'),
                }
            }
            (Some(_), c) => current(&mut word, &mut command_next).text.push(c),
            (None, '\'' | '"') => {
                current(&mut word, &mut command_next);
                quoting = Some(c);
            }
            (None, '\\') => current(&mut word, &mut command_next)
                .text
                .extend(chars.next()),
            (None, c) if c.is_whitespace() || c == '<' || c == '>' => words.extend(word.take()),
            (None, ';' | '&' | '|' | '(' | ')' | '!') => {
                words.extend(word.take());
                command_next = true;
            }
            (None, '{') if word.is_none() && chars.peek().is_some_and(|c| c.is_whitespace()) => {
                // A group `{ …; }`: a reserved word, not part of a name.
                command_next = true;
            }
            (None, '}') if word.is_none() => {
                // A group `{ …; }`: a reserved word, not part of a name.
                command_next = true;
            }
            (None, c) => {
                let word = current(&mut word, &mut command_next);
                word.glob |= matches!(c, '*' | '?' | '[')
                    || (c == '}' && word.text.contains('{') && word.text.contains(','));
                word.text.push(c);
            }
        }
    }
    words.extend(word.take());
    words
}

#[cfg(test)]
mod tests;
