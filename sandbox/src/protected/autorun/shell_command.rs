//! The files a shell command line names (issue 23): the values git's configuration runs
//! through the shell (`core.fsmonitor`, a filter, a diff driver, an `!` alias) read as the shell
//! reads them, so a session cannot change the program such a value runs. A value git runs by
//! itself fails closed: when its meaning depends on more than its words, it names the whole
//! tree. A value the owner runs by name (an alias, a difftool) names only what it spells out.

/// Nested `sh -c '…'` lines read before giving up (each level drops a layer of quotes).
const MAX_DEPTH: usize = 4;

/// Commands that run what the shell or a tool computes: an evaluated line, names found from
/// files.
const COMPUTED_COMMANDS: [&str; 4] = ["eval", "xargs", "find", "busybox"];

/// Programs that run a script given as their first argument (beside shells and Python), and
/// load what it needs from beside it.
const INTERPRETERS: [&str; 22] = [
    "node", "nodejs", "bun", "deno", "perl", "ruby", "php", "lua", "luajit", "rscript", "java",
    "tclsh", "julia", "elixir", "erl", "escript", "guile", "racket", "irb", "groovy", "tsx",
    "ts-node",
];

/// Options whose value (attached, after `=`, or the next word) is a file or a search path a
/// program loads: `ruby -Ilib`, `node --require=./x`, `java -cp .`, `make -f mk`, `sed -f x`,
/// `ssh -F cfg`, `sqlite3 -init x`, `bash --rcfile x`.
const PATH_OPTIONS: [&str; 14] = [
    "-I",
    "-r",
    "-M",
    "-f",
    "-F",
    "-cp",
    "-classpath",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "--rcfile",
    "--init-file",
    "-init",
];

/// Python options that take a value (the next word is no script).
const PYTHON_VALUE_OPTIONS: [&str; 2] = ["-W", "-X"];

/// Shells: their `-c` argument is another command line, their first argument a script.
const SHELLS: [&str; 8] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"];

/// Commands that run the next word (after their options and numbers) as the command.
const WRAPPERS: [&str; 12] = [
    "env", "nice", "nohup", "sudo", "command", "time", "stdbuf", "setsid", "timeout", "ionice",
    "chrt", "exec",
];

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
    /// of a script it runs, the working directory for `-m` and `-c`): its module files (`.py`,
    /// `.pyc`, `.so`, `.pyd`) and package `__init__.py` files one level down, by any name,
    /// since such a file shadows the module of that name the program imports.
    Imports,
}

/// What runs a script, which decides what of its directory is a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScriptRunner {
    /// Python: what it imports from the script's directory ([`Scope::Imports`]).
    Python,
    /// A shell or another interpreter: the script's directory (what it sources or requires).
    Other,
    /// Run directly: its `#!` line says which.
    Shebang,
}

/// One file or directory a value names, relative to where git runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NamedPath {
    pub path: String,
    pub scope: Scope,
    /// A script: its (link-resolved) directory is a place too.
    pub script: Option<ScriptRunner>,
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
/// (where git runs it, through the shell), read as the shell reads its words: a command with a
/// `/` and a shell's or an interpreter's script (each with its directory, [`ScriptRunner`]);
/// other arguments with a `/` or `.`; option values that name files or search paths
/// ([`PATH_OPTIONS`], `--x=v`); assignments that look like paths (`PYTHONPATH=.`); the line of
/// a shell's `-c`; paths after a literal `cd dir` are taken from there. `python -m mod` and
/// `python -c` import from the top. Git's own arguments (`$1`, `$@`) and variables in
/// ordinary arguments (`-i $HOME/.ssh/k`, `password=$TOKEN`) are no file names. Read
/// [`Reading::Strict`]ly, a value whose *program* the shell computes (a variable or glob where
/// a command or script is, `$(…)`, backticks, `~user`), that changes to a computed directory,
/// sources or `eval`s, runs names computed from files (`xargs`, `find`) or feeds a shell its
/// script on stdin names the whole tree.
pub(super) fn program_paths(value: &str, reading: Reading) -> Named {
    let mut collector = Collector {
        literal: reading == Reading::Literal,
        out: Vec::new(),
        cwd: Some(String::new()),
        result: Ok(()),
    };
    collector.line(value, 0);
    match collector.result {
        Err(why) if reading == Reading::Strict => Named::WholeTree(why),
        _ => Named::Paths(collector.out),
    }
}

fn base_name(word: &str) -> String {
    let name = word.rsplit('/').next().unwrap_or_default().to_lowercase();
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        .to_string()
}

/// What a command word runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Shell,
    Python,
    Interpreter,
}

fn runner_of(command: &str) -> Option<Runner> {
    let name = base_name(command);
    if SHELLS.contains(&name.as_str()) || matches!(command, "." | "source") {
        Some(Runner::Shell)
    } else if name == "python" || name == "pypy" {
        Some(Runner::Python)
    } else {
        INTERPRETERS
            .contains(&name.as_str())
            .then_some(Runner::Interpreter)
    }
}

/// What the words of a value (and the lines nested in it) name.
struct Collector {
    /// [`Reading::Literal`]: scripts name themselves only (the owner's own command).
    literal: bool,
    out: Vec<NamedPath>,
    /// Where relative paths are taken from (after `cd dir`), relative to the top; `None` once a
    /// `cd` went somewhere unknowable.
    cwd: Option<String>,
    result: Result<(), &'static str>,
}

impl Collector {
    fn fail(&mut self, why: &'static str) {
        if self.result.is_ok() {
            self.result = Err(why);
        }
    }

    fn push(&mut self, path: &str, scope: Scope, script: Option<ScriptRunner>) {
        if path.is_empty() {
            return;
        }
        let path = if path.starts_with(['/', '~']) {
            path.to_string()
        } else {
            match &self.cwd {
                Some(cwd) if cwd.is_empty() => path.to_string(),
                Some(cwd) => format!("{cwd}/{path}"),
                None => return,
            }
        };
        self.out.push(NamedPath {
            path,
            scope,
            script: script.filter(|_| !self.literal),
        });
    }

    /// An option's or assignment's value: read as a line when it holds blanks.
    fn value(&mut self, value: &str, depth: usize, any: bool) {
        if value.contains(char::is_whitespace) {
            self.line(value, depth + 1);
        } else if !value.is_empty()
            && !value.starts_with('-')
            && !value.contains('$')
            && (any || value.contains(['/', '.']))
        {
            self.push(value, Scope::Below, None);
        }
    }

    /// Read one command line.
    fn line(&mut self, value: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return self.fail("its shell lines nest too deep to read");
        }
        if value.contains("$(") || value.contains('`') {
            self.fail("the shell computes part of it ($(…), `…`)");
        }
        if value.contains("\\\n") {
            self.fail("it continues over lines");
        }
        let words = split(value);
        let mut runner: Option<Runner> = None;
        let mut script_taken = true;
        let mut command_next = false;
        let mut line_next = false;
        let mut module_next = false;
        let mut cd_next = false;
        let mut skip_next = false;
        let mut path_next = false;
        let mut stdin_script = false;
        for word in &words {
            let text = word.text.as_str();
            let variable = text.contains('$');
            if word.command && std::mem::take(&mut stdin_script) {
                self.fail("a shell reads its script from standard input");
            }
            if std::mem::take(&mut cd_next) {
                if variable || word.glob || text.starts_with('~') || text.starts_with('-') {
                    self.fail("it changes to a directory the shell computes");
                    self.cwd = None;
                } else if !text.starts_with('/') {
                    self.cwd = self.cwd.take().map(|cwd| {
                        if cwd.is_empty() {
                            text.to_string()
                        } else {
                            format!("{cwd}/{text}")
                        }
                    });
                } else {
                    self.cwd = Some(text.to_string());
                }
                continue;
            }
            if std::mem::take(&mut skip_next) {
                continue;
            }
            if std::mem::take(&mut path_next) && !text.starts_with('-') {
                self.value(text, depth, true);
                continue;
            }
            // `timeout 5s`, `nice -n 5`: options and numbers before the command.
            let number = text.starts_with(|c: char| c.is_ascii_digit())
                && text
                    .chars()
                    .all(|c| c.is_ascii_digit() || ".smhd".contains(c));
            let pending_command = command_next && (text.starts_with('-') || number);
            let command = word.command || (command_next && !pending_command);
            if command {
                command_next = false;
            }
            if word.glob {
                if command || !script_taken {
                    self.fail("the shell expands a pattern where a program is named");
                }
                continue;
            }
            if command && COMPUTED_COMMANDS.contains(&base_name(text).as_str()) {
                self.fail("it evaluates a line or runs names computed from files");
            }
            if text.starts_with('~') && !text.starts_with("~/") {
                self.fail("it names another account's home (~user)");
                continue;
            }
            if matches!(text, "cd" | "pushd") && command {
                cd_next = true;
                continue;
            }
            if runner.is_none()
                && (text == "-C"
                    || text.starts_with("--chdir")
                    || text == "-S"
                    || text.starts_with("--split-string"))
                && words.iter().any(|w| base_name(&w.text) == "env")
            {
                self.fail("env runs it from another directory or splits a line");
                continue;
            }
            if !text.starts_with('-')
                && let Some((name, assigned)) = text.split_once('=')
            {
                let assignment =
                    !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
                if command && assignment {
                    command_next = true;
                }
                for part in assigned.split('=') {
                    self.value(part, depth, false);
                }
                continue;
            }
            if command {
                if variable {
                    self.fail("the shell computes the program it runs");
                    continue;
                }
                runner = runner_of(text);
                script_taken = runner.is_none();
                stdin_script = runner == Some(Runner::Shell);
                command_next = WRAPPERS.contains(&base_name(text).as_str());
                if text.contains('/') {
                    let script = runner.is_none().then_some(ScriptRunner::Shebang);
                    self.push(text, Scope::Below, script);
                }
                continue;
            }
            if std::mem::take(&mut module_next) {
                // `python -m pkg.mod`: the package or module at the top, and what the program
                // imports from the top (first on `sys.path`).
                let first = text.split('.').next().unwrap_or_default();
                self.push(first, Scope::Below, None);
                self.push(&format!("{first}.py"), Scope::Below, None);
                self.push(".", Scope::Imports, None);
                script_taken = true;
                continue;
            }
            if line_next && !text.starts_with('-') {
                line_next = false;
                stdin_script = false;
                script_taken = true;
                self.line(text, depth + 1);
                continue;
            }
            if let Some(option) = text.strip_prefix('-') {
                let single = !option.starts_with('-');
                match runner {
                    Some(Runner::Shell) if single && option.contains('c') => line_next = true,
                    Some(Runner::Shell) if single && option.contains('s') => {
                        self.fail("a shell reads its script from standard input");
                    }
                    Some(Runner::Shell) if single && option.len() == 1 && "oO".contains(option) => {
                        skip_next = true;
                    }
                    Some(Runner::Python) if option == "m" => module_next = true,
                    Some(Runner::Python) if single && option.starts_with('c') => {
                        // Inline code imports from the working directory.
                        self.push(".", Scope::Imports, None);
                        script_taken = true;
                        stdin_script = false;
                    }
                    Some(Runner::Python) if PYTHON_VALUE_OPTIONS.contains(&text) => {
                        skip_next = true;
                    }
                    Some(Runner::Interpreter)
                        if single && option.contains(['e', 'E']) && !option.contains('=') =>
                    {
                        // Inline code: the owner's own text, run where it is.
                        script_taken = true;
                        skip_next = true;
                    }
                    _ => {}
                }
                if let Some(path_option) = PATH_OPTIONS.iter().find(|o| text.starts_with(**o)) {
                    let attached = text[path_option.len()..].trim_start_matches('=');
                    if attached.is_empty() {
                        path_next = true;
                    } else {
                        // `ruby -Ilib`; for other commands a short option's letters run
                        // together (`less -FRX`) unless the rest looks like a path.
                        let any = runner.is_some() || path_option.len() > 2;
                        for part in attached.split('=') {
                            self.value(part, depth, any);
                        }
                    }
                } else if let Some((_, assigned)) = text.split_once('=') {
                    // `--config=c`: the value may be a file the program reads.
                    for part in assigned.split('=') {
                        self.value(part, depth, true);
                    }
                } else if single && option.len() > 1 && option.contains(['.', '/']) {
                    // `-fconv.awk`: a short option's value written against its letter.
                    self.value(&option[1..], depth, true);
                }
                continue;
            }
            if !std::mem::replace(&mut script_taken, true) {
                // A script: what it loads from beside it runs too.
                stdin_script = false;
                if variable {
                    self.fail("the shell computes the script it runs");
                    continue;
                }
                let script = match runner {
                    Some(Runner::Python) => ScriptRunner::Python,
                    _ => ScriptRunner::Other,
                };
                self.push(text, Scope::Below, Some(script));
                continue;
            }
            if !variable && !matches!(text, "." | "..") && text.contains(['/', '.']) {
                // An argument: a file the program may read as code or configuration.
                self.push(text, Scope::Below, None);
            }
            if text.contains(char::is_whitespace) {
                // A quoted line given to a command (`difftool -x 'sh tools/d.sh'`): what it
                // names too, without failing on a name with a space.
                let (result, cwd) = (self.result, self.cwd.clone());
                self.line(text, depth + 1);
                (self.result, self.cwd) = (result, cwd);
            }
        }
        if stdin_script {
            self.fail("a shell reads its script from standard input");
        }
    }
}

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
