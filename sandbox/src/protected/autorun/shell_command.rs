//! The files a shell command line names (issue 23): the values git's configuration runs
//! through the shell (`core.fsmonitor`, a filter, a diff driver, an `!` alias) and the lines of
//! hook files and the shell scripts they run, read as the shell reads them, so a session cannot
//! change the program such a line runs. The reader trusts only what it understands completely:
//! a small grammar of simple commands, separators, subshells, wrappers whose every option is
//! encoded, shells, Python, and arguments. Anything else in a line git runs by itself names the
//! whole tree ([`Reading::Strict`]). A line the owner runs by name (an alias, a difftool) names
//! only what it spells out ([`Reading::Literal`]).

/// Nested `sh -c '…'` lines read before giving up (each level drops a layer of quotes).
const MAX_DEPTH: usize = 4;

/// Commands that run what the shell or a tool computes (an evaluated line, names found from
/// files), define code that runs later (traps, aliases) or change how later words are read.
const COMPUTED_COMMANDS: [&str; 11] = [
    "eval", "xargs", "find", "busybox", "trap", "alias", "builtin", "enable", "fc", "parallel",
    "popd",
];

/// Programs that run the command after their own arguments by a grammar not encoded here:
/// followed nowhere (the whole tree).
const UNREAD_WRAPPERS: [&str; 24] = [
    "sudo",
    "doas",
    "su",
    "runuser",
    "chrt",
    "taskset",
    "nsenter",
    "unshare",
    "chroot",
    "firejail",
    "bwrap",
    "systemd-run",
    "strace",
    "ltrace",
    "valgrind",
    "gdb",
    "watch",
    "unbuffer",
    "rlwrap",
    "ccache",
    "faketime",
    "fakeroot",
    "xvfb-run",
    "script",
];

/// Commands that read no file named by their arguments.
const INERT_COMMANDS: [&str; 11] = [
    "[", "[[", "test", "echo", "printf", "true", "false", "exit", "return", ":", "set",
];

/// Endings of script files: an unknown program given one may run it with anything.
const SCRIPT_EXTENSIONS: [&str; 24] = [
    ".py", ".pyw", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx", ".sh", ".bash",
    ".zsh", ".rb", ".pl", ".pm", ".php", ".lua", ".r", ".jl", ".tcl", ".groovy", ".kts", ".ps1",
];

/// Builtins that set shell variables or export them to every program after them.
const DECLARING_COMMANDS: [&str; 5] = ["export", "declare", "typeset", "readonly", "local"];

/// Programs that run a script or inline code given to them (beside shells and Python); what a
/// script of theirs loads (`require('../x')`, `import`) may lie anywhere, so a script of theirs
/// in the tree names the whole tree.
const INTERPRETERS: [&str; 24] = [
    "node", "nodejs", "bun", "deno", "perl", "ruby", "php", "lua", "luajit", "rscript", "java",
    "tclsh", "julia", "elixir", "erl", "escript", "guile", "racket", "irb", "groovy", "tsx",
    "ts-node", "awk", "gawk",
];

/// Runners that fetch or resolve a package and run it by their own rules (`npx` has a grammar
/// below): what they run cannot be told from the line.
const PACKAGE_RUNNERS: [&str; 5] = ["pnpx", "bunx", "uvx", "pipx", "dlx"];

/// `(package manager, subcommand)` pairs that run a package the manager resolves.
const PACKAGE_RUNNER_SUBCOMMANDS: [(&str, &str); 7] = [
    ("yarn", "dlx"),
    ("pnpm", "dlx"),
    ("pnpm", "exec"),
    ("npm", "exec"),
    ("npm", "x"),
    ("bun", "x"),
    ("uv", "run"),
];

/// Options whose value (attached, after `=`, or the next word) is a file or a search path a
/// program loads: `make -f mk`, `sed -f x`, `ssh -F cfg`, `sqlite3 -init x`.
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

/// Shells: their `-c` argument is another command line, their first argument a script.
const SHELLS: [&str; 8] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"];

/// Variables naming a place in the tree (the working directory, git's dirs, the script
/// itself): an argument built on them is a file there nobody can name here.
const TREE_VARIABLES: [&str; 9] = [
    "PWD",
    "OLDPWD",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "0",
    "BASH_SOURCE",
    "CDPATH",
];

/// Environment assignments before a command that change nothing it loads.
const HARMLESS_ASSIGNMENTS: [&str; 8] = [
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLUMNS",
    "NO_COLOR",
    "FORCE_COLOR",
    "CI",
];

/// How far a value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// Git runs it by itself (`core.fsmonitor` at every `git status`, a hook): what cannot be
    /// resolved to files names the whole tree.
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
    /// What Python can import from this directory when it is first on `sys.path`
    /// (`python -m MODULE` run from the top, [`python_module_places`]): its module files
    /// ([`python::MODULE_SUFFIXES`]: sources, bytecode, extension modules), its `__pycache__/`, and a
    /// regular package's `__init__` file one level down, by any name, since each shadows an
    /// installed module of that name the tool imports.
    Imports,
    /// Below a directory named like a module every Python of the account imports, in a
    /// directory on its path (a package of that name would shadow it): its module files at any
    /// depth and its `__pycache__/`s; its other files (a web site's `site/index.html`, a
    /// `test/app.test.js`) are no module.
    ModulesBelow,
    /// A file directly in this directory named like a program the owner runs by name
    /// ([`super::programs`]): the directory is on the owner's `PATH`.
    Programs,
    /// A file anywhere below this directory named like such a program: a `PATH` entry that is
    /// relative (searched from wherever the shell is) or built on what is not read.
    ProgramsBelow,
    /// The path (relative to the root) at any depth of the tree, and what is below it: a file
    /// the owner's shell sources by a relative path from wherever it is (a `cd` hook sources
    /// `sub/.localrc` on `cd sub`, red team 48 F8).
    AtAnyDepth,
}

impl Scope {
    /// Whether a write to `below` (folded names under the place) touches what the place covers.
    pub(super) fn reaches(self, below: &[String]) -> bool {
        match (self, below) {
            (Self::Below | Self::AtAnyDepth, _) => true,
            (Self::Imports, below) => imports_reach(below),
            (Self::ModulesBelow, below) => python::modules_below_reach(below),
            (Self::Programs, [name]) => super::programs::is_program_name(name),
            (Self::ProgramsBelow, [.., name]) => super::programs::is_program_name(name),
            (Self::Programs | Self::ProgramsBelow, _) => false,
        }
    }
}

/// What runs a script, which decides what else of the tree is a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScriptRunner {
    /// Python, with the script's directory first on `sys.path`: that directory's whole subtree
    /// (a package's own modules and data files run or load too).
    Python,
    /// A shell: its directory, and the files its own lines name (read from the file).
    Shell,
    /// Another interpreter (`node`, `perl`, `tsx`…): it may load files from anywhere, so a
    /// script of its in the tree names the whole tree.
    Interpreter,
    /// Run directly: its `#!` line says which.
    Shebang,
}

/// One file or directory a value names, relative to where git runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NamedPath {
    pub path: String,
    /// Where it runs from (after a `cd`), relative to the top: a script's own relative paths
    /// are taken from there.
    pub cwd: String,
    pub scope: Scope,
    /// A script: what it loads is a place too, by its runner.
    pub script: Option<ScriptRunner>,
}

/// What a value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Named {
    Paths(Vec<NamedPath>),
    /// Nothing narrower can be said (why, in words for the refusal).
    WholeTree(&'static str),
}

/// The files in the tree a command value may run or read, relative to the working tree's top
/// (where git runs it). Read [`Reading::Strict`]ly, only this grammar is trusted: simple
/// commands joined by `;`, `&&`, `||`, `|`, newlines, subshells `( … )` (a `cd` inside ends at
/// `)`), groups; `cd DIR` at the top level; wrappers whose every option is encoded
/// ([`wrapper_grammar`]); shells with `-c LINE` or a script; Python with a script (its whole
/// directory); a command with a `/` (its `#!` decides); arguments with a `/` or `.`; option
/// values that name files. Everything else names the whole tree: an environment assignment,
/// inline code (`-c`, `-e`, `-m` without `-I`), another interpreter's script in the tree, a
/// variable or glob where a program is, `$(…)`, a here-document, a `cd` inside a group or
/// function or after `||`, an unknown option of a wrapper, a package runner (`pnpm exec`,
/// `uvx`, `npx -p`).
pub(super) fn program_paths(value: &str, reading: Reading) -> Named {
    let mut collector = Collector {
        literal: reading == Reading::Literal,
        out: Vec::new(),
        cwd: Some(String::new()),
        functions: false,
        stdin: None,
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

/// What a command word runs, by its name.
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

/// Whether `command` (a name or a path) is a shell or an interpreter, which runs the script
/// it is given.
pub(super) fn runs_script(command: &str) -> bool {
    runner_of(command).is_some()
}

/// What runs a script whose first line is `line` (its `#!`): `None` for no `#!` (the shell
/// runs it). `#!/usr/bin/env -S …` or an unknown program is another interpreter.
pub(super) fn shebang_runner(line: &str) -> Option<ScriptRunner> {
    let rest = line.strip_prefix("#!")?;
    let mut words = rest.split_whitespace();
    let mut program = words.next().unwrap_or_default();
    if base_name(program) == "env" {
        program = match words.next() {
            Some(next) if !next.starts_with('-') && !next.contains('=') => next,
            _ => return Some(ScriptRunner::Interpreter),
        };
    }
    Some(match runner_of(program) {
        Some(Runner::Shell) if program != "." => ScriptRunner::Shell,
        Some(Runner::Python) => ScriptRunner::Python,
        _ => ScriptRunner::Interpreter,
    })
}

/// What the words of a value (and the lines nested in it) name.
struct Collector {
    /// [`Reading::Literal`]: scripts name themselves only (the owner's own command).
    literal: bool,
    out: Vec<NamedPath>,
    /// Where relative paths are taken from (after `cd dir`), relative to the top; `None` once a
    /// `cd` went somewhere unknowable.
    cwd: Option<String>,
    /// A function was defined: its body, read where it stands, runs where it is called.
    functions: bool,
    /// The file the current simple command has on standard input (`< x.py`); `None` when it
    /// reads the hook's own input, a pipe or another descriptor, whose content is unknown.
    stdin: Option<Word>,
    result: Result<(), &'static str>,
}

/// Where a simple command stands among its neighbours, for what a `cd` in it does.
#[derive(Debug, Clone, Copy, Default)]
struct Context {
    /// Inside a `{ … }` group or a function body: a `cd` there runs at a time the reader
    /// cannot place.
    grouped: bool,
    /// After `||`, or in a pipeline or background job: it may not run, or runs in a subshell.
    conditional: bool,
}

impl Collector {
    fn fail(&mut self, why: &'static str) {
        if self.result.is_ok() {
            self.result = Err(why);
        }
    }

    fn push(&mut self, path: &str, script: Option<ScriptRunner>) {
        if path.is_empty() {
            return;
        }
        let Some(cwd) = self.cwd.clone() else {
            return self.fail("it runs from a directory the reader lost");
        };
        let path = if path.starts_with(['/', '~']) || cwd.is_empty() {
            path.to_string()
        } else {
            format!("{cwd}/{path}")
        };
        self.out.push(NamedPath {
            path,
            cwd,
            scope: Scope::Below,
            script: script.filter(|_| !self.literal),
        });
    }

    /// An option's value: read as a line when it holds blanks, else a file when it looks
    /// like one (`any`: whatever it looks like).
    fn value(&mut self, value: &str, depth: usize, any: bool) {
        if value.contains(char::is_whitespace) {
            self.line(value, depth + 1);
        } else if value.contains('$') {
            self.variable_argument(value);
        } else if !value.is_empty()
            && !value.starts_with('-')
            && (any || value.contains(['/', '.']))
        {
            self.push(value, None);
        }
    }

    /// An argument holding a variable: no file name (`$1`, `$HOME/.ssh/k`, `password=$TOKEN`)
    /// unless it is built on a variable naming a place in the tree (`$PWD/x`, `$0`).
    fn variable_argument(&mut self, text: &str) {
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            let after = &rest[at + 1..];
            let name: String = after
                .trim_start_matches('{')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if TREE_VARIABLES.contains(&name.as_str()) {
                return self.fail("an argument is built on a variable naming a place in the tree");
            }
            rest = after;
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
        let tokens = match split(value) {
            Ok(tokens) => tokens,
            Err(why) => {
                self.fail(why);
                return;
            }
        };
        // Saved working directories of open subshells; open groups (`{`) and function bodies.
        let mut subshells: Vec<Option<String>> = Vec::new();
        let mut groups = 0usize;
        let mut context = Context::default();
        let mut words: Vec<Word> = Vec::new();
        let mut i = 0;
        while i <= tokens.len() {
            let token = tokens.get(i);
            i += 1;
            if let Some(Token::Word(word)) = token {
                words.push(word.clone());
                continue;
            }
            let op = match token {
                Some(Token::Op(op)) => Some(*op),
                _ => None,
            };
            // A function definition `name ( )`: its body is a group that runs when called.
            if op == Some(Op::Open)
                && !words.is_empty()
                && matches!(tokens.get(i), Some(Token::Op(Op::Close)))
            {
                i += 1;
                words.clear();
                self.functions = true;
                continue;
            }
            let piped = matches!(op, Some(Op::Pipe | Op::Background));
            // Compound commands' reserved words: what runs inside `if`/`while`/`for`/`case`
            // may not run, or runs many times, as a group does.
            while let Some(first) = words.first().map(|w| w.text.clone()) {
                match first.as_str() {
                    "if" | "while" | "until" | "case" | "for" | "select" => groups += 1,
                    "fi" | "done" | "esac" => groups = groups.saturating_sub(1),
                    "then" | "else" | "elif" | "do" => {}
                    _ => break,
                }
                context.grouped = groups > 0;
                words.remove(0);
                if matches!(first.as_str(), "for" | "select" | "case") {
                    // `for NAME in WORDS`, `case WORD in`: no command (a `case` pattern's `)`
                    // is read as an unmatched parenthesis: the whole tree).
                    words.clear();
                }
            }
            if !words.is_empty() {
                let mut here = context;
                here.conditional |= piped;
                self.command(&std::mem::take(&mut words), depth, here);
            }
            match op {
                Some(Op::Open) => subshells.push(self.cwd.clone()),
                Some(Op::Close) => match subshells.pop() {
                    Some(cwd) => self.cwd = cwd,
                    None => self.fail("its parentheses do not match"),
                },
                Some(Op::GroupOpen) => groups += 1,
                Some(Op::GroupClose) => groups = groups.saturating_sub(1),
                _ => {}
            }
            context.grouped = groups > 0;
            // After `&&` or `||` a command may not run; in a pipeline it runs in a subshell.
            context.conditional = matches!(op, Some(Op::And | Op::Or | Op::Pipe | Op::Background));
        }
        if !subshells.is_empty() {
            self.fail("its parentheses do not match");
        }
    }

    /// One simple command: assignments, then the command and its arguments; its redirections
    /// apart (their targets are files it reads or writes; a file on standard input is the
    /// program of one that reads its code from there).
    fn command(&mut self, words: &[Word], depth: usize, context: Context) {
        let (redirections, words): (Vec<Word>, Vec<Word>) =
            words.iter().cloned().partition(|w| w.redirect.is_some());
        // The last redirection of standard input wins, over a pipe too.
        let mut stdin = None;
        for target in &redirections {
            match target.redirect {
                Some(Redirect::Stdin) if !target.glob && !target.text.contains('$') => {
                    stdin = Some(target.clone());
                }
                Some(Redirect::Stdin | Redirect::StdinDescriptor) => stdin = None,
                _ => {}
            }
        }
        self.stdin = stdin;
        self.command_words(&words, depth, context);
        self.stdin = None;
        // What it reads as data (`< in.txt`, `3< cfg`) is named as its arguments are; what it
        // writes (`> out`, `2>&1`) runs nothing.
        for target in &redirections {
            if matches!(target.redirect, Some(Redirect::Output)) || target.glob {
                continue;
            }
            if target.text.contains('$') {
                self.variable_argument(&target.text);
            } else if target.text.contains(['/', '.']) {
                self.push(&target.text, None);
            }
        }
    }

    fn command_words(&mut self, words: &[Word], depth: usize, context: Context) {
        let mut rest = words;
        while let Some((first, after)) = rest.split_first() {
            let Some((name, value)) = assignment(&first.text) else {
                break;
            };
            if !HARMLESS_ASSIGNMENTS.contains(&name) && !name.starts_with("LC_")
                || value.contains('$')
            {
                self.fail("an environment assignment changes what the command loads");
            }
            rest = after;
        }
        self.run(rest, depth, context);
    }

    /// `words[0]` is the program.
    fn run(&mut self, words: &[Word], depth: usize, context: Context) {
        let Some((program, args)) = words.split_first() else {
            return;
        };
        let text = program.text.as_str();
        if program.glob {
            return self.fail("the shell expands a pattern where a program is named");
        }
        if text.contains('$') {
            return self.fail("the shell computes the program it runs");
        }
        // `~name/…` is the shell's tilde expansion like `~/…`: expanded where it is placed
        // (gitconfig's `expand_shell_path`).
        let name = base_name(text);
        if text.contains('/') && !text.starts_with(['/', '~']) {
            // A program in the tree, whatever its name (`./python3`, `bin/timeout`): its own
            // `#!` line says what runs it.
            self.push(text, Some(ScriptRunner::Shebang));
            return self.unknown_program_arguments(args, depth);
        }
        if matches!(text, "cd" | "pushd" | "chdir") {
            return self.cd(args, context);
        }
        if UNREAD_WRAPPERS.contains(&name.as_str()) {
            // Read literally, what it spells out is still named.
            self.fail("it runs a command through a program whose options are not read");
            return self.arguments(args, depth);
        }
        // `command -v x`: it looks a name up, running nothing.
        if INERT_COMMANDS.contains(&text)
            || (name == "command"
                && args
                    .first()
                    .is_some_and(|a| matches!(a.text.as_str(), "-v" | "-V")))
        {
            return;
        }
        if COMPUTED_COMMANDS.contains(&name.as_str()) {
            return self.fail(
                "it evaluates a line, defines code run later or runs names computed from files",
            );
        }
        if DECLARING_COMMANDS.contains(&name.as_str()) {
            if args.iter().any(|w| w.text.contains('=')) {
                self.fail("it sets variables the programs after it read");
            }
            return;
        }
        if PACKAGE_RUNNERS.contains(&name.as_str())
            || args.first().is_some_and(|sub| {
                PACKAGE_RUNNER_SUBCOMMANDS.contains(&(name.as_str(), sub.text.as_str()))
            })
        {
            return self.fail("a package runner resolves what it runs by its own rules");
        }
        if name == "git"
            && args
                .iter()
                .take_while(|w| w.text.starts_with('-'))
                .any(|w| {
                    let t = w.text.as_str();
                    t == "-c"
                        || t == "-C"
                        || ["--config-env", "--exec-path", "--git-dir", "--work-tree"]
                            .iter()
                            .any(|o| t.starts_with(o))
                })
        {
            return self.fail("it runs git with its own configuration or directory");
        }
        if let Some(grammar) = wrapper_grammar(&name) {
            if text.contains('/') {
                self.push(text, None);
            }
            return self.wrapper(&grammar, args, depth, context);
        }
        match runner_of(text) {
            Some(Runner::Shell) => {
                if text.contains('/') {
                    self.push(text, None);
                }
                self.shell(args, depth)
            }
            Some(Runner::Python) => {
                if text.contains('/') {
                    self.push(text, None);
                }
                self.python(args, depth)
            }
            Some(Runner::Interpreter) => {
                if text.contains('/') {
                    self.push(text, None);
                }
                self.interpreter(args, depth)
            }
            None => {
                // A bare name is found on PATH, never in the tree; an absolute path is outside
                // it or read as its `#!` says.
                if text.contains('/') {
                    self.push(text, Some(ScriptRunner::Shebang));
                }
                self.unknown_program_arguments(args, depth);
            }
        }
    }

    /// The arguments of a program not known here, and any script among them, which it may run
    /// with anything.
    fn unknown_program_arguments(&mut self, args: &[Word], depth: usize) {
        self.arguments(args, depth);
        for arg in args {
            let lower = arg.text.to_lowercase();
            if !arg.text.starts_with('-')
                && !arg.text.contains(['$', ' ', '\t', '\n'])
                && SCRIPT_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
            {
                self.script(arg, ScriptRunner::Interpreter);
            }
        }
    }

    /// `cd DIR`: where later relative paths are taken from, when known.
    fn cd(&mut self, args: &[Word], context: Context) {
        let target = match args {
            [dir] => dir,
            _ => {
                self.cwd = None;
                return self.fail("it changes to a directory the reader cannot tell (cd with options, none or several)");
            }
        };
        let text = target.text.as_str();
        if context.grouped || context.conditional || self.functions {
            self.cwd = None;
            return self
                .fail("it changes directory inside a group, a function, a pipeline or after ||");
        }
        if text.contains('$') || target.glob || text.starts_with(['~', '-']) {
            self.cwd = None;
            return self.fail("it changes to a directory the shell computes");
        }
        self.cwd = if text.starts_with('/') {
            Some(text.to_string())
        } else {
            self.cwd.take().map(|cwd| {
                if cwd.is_empty() {
                    text.to_string()
                } else {
                    format!("{cwd}/{text}")
                }
            })
        };
    }

    /// A wrapper's options by its grammar, then the command it runs.
    fn wrapper(&mut self, grammar: &WrapperGrammar, args: &[Word], depth: usize, context: Context) {
        let mut i = 0;
        let mut leading = grammar.leading;
        while let Some(word) = args.get(i) {
            let text = word.text.as_str();
            i += 1;
            if text == "--" {
                // `timeout -- 5 cmd`: the options end, the duration still comes first (red
                // team 47a).
                i += leading;
                leading = 0;
                break;
            }
            if let Some((name, _)) = assignment(text) {
                // `env NAME=value cmd`: an assignment like one before the command.
                if !HARMLESS_ASSIGNMENTS.contains(&name) && !name.starts_with("LC_") {
                    self.fail("an environment assignment changes what the command loads");
                }
                continue;
            }
            if !text.starts_with('-') || text == "-" && !grammar.flags.contains(&"-") {
                if leading > 0 {
                    // `timeout 30`, `flock /tmp/l`: the duration, the lock file.
                    leading -= 1;
                    continue;
                }
                i -= 1;
                break;
            }
            // `nice -10`: the old spelling of an adjustment.
            if grammar.valued.contains(&"-n") && text[1..].chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            let (option, attached) = match text.split_once('=') {
                Some((option, value)) if option.starts_with("--") => (option, Some(value)),
                _ if !text.starts_with("--") && text.len() > 2 && text.is_char_boundary(2) => {
                    (&text[..2], Some(&text[2..]))
                }
                _ => (text, None),
            };
            if grammar.refused.contains(&option) {
                return self.fail("a wrapper's option changes its directory, splits or runs a line, or runs no command");
            }
            if grammar.flags.contains(&option) && attached.is_none() {
                continue;
            }
            if grammar.valued.contains(&option) {
                if attached.is_none() {
                    i += 1;
                }
                continue;
            }
            return self.fail("a wrapper's option is not one the reader knows");
        }
        if leading > 0 && grammar.leading > 0 {
            // `flock 9`: a descriptor, no command.
            return;
        }
        self.run(&args[i.min(args.len())..], depth, context)
    }

    /// `sh [options] (-c LINE [$0 args] | SCRIPT args)`.
    fn shell(&mut self, args: &[Word], depth: usize) {
        let mut line_next = false;
        let mut i = 0;
        while let Some(word) = args.get(i) {
            let text = word.text.as_str();
            i += 1;
            if text == "--" || text == "-" {
                break;
            }
            if let Some(option) = text.strip_prefix("--") {
                if matches!(option.split('=').next(), Some("rcfile" | "init-file")) {
                    match option.split_once('=') {
                        Some((_, value)) => self.value(value, depth, true),
                        None => {
                            if let Some(value) = args.get(i) {
                                self.value(&value.text, depth, true);
                            }
                            i += 1;
                        }
                    }
                }
                continue;
            }
            let Some(letters) = text.strip_prefix(['-', '+']) else {
                i -= 1;
                break;
            };
            if letters.contains('s') {
                return self.fail("a shell reads its script from standard input");
            }
            if letters.contains(['o', 'O']) {
                i += 1;
            }
            line_next |= letters.contains('c');
        }
        let rest = &args[i.min(args.len())..];
        let Some((first, script_args)) = rest.split_first() else {
            return self.fail("a shell reads its script from standard input");
        };
        if line_next {
            // A child shell: its `cd` ends with it.
            let cwd = self.cwd.clone();
            self.line(&first.text, depth + 1);
            self.cwd = cwd;
            return;
        }
        self.script(first, ScriptRunner::Shell);
        self.arguments(script_args, depth);
    }

    /// Another interpreter: inline code names the whole tree; its script names what its
    /// runner decides (the whole tree when in it); path options name what they load.
    fn interpreter(&mut self, args: &[Word], depth: usize) {
        let mut i = 0;
        while let Some(word) = args.get(i) {
            let text = word.text.as_str();
            i += 1;
            if text == "--" {
                break;
            }
            let Some(option) = text.strip_prefix('-') else {
                i -= 1;
                break;
            };
            let single = !option.starts_with('-');
            let long = option.trim_start_matches('-');
            if (single
                && option.contains(['e', 'E', 'p'])
                && !PATH_OPTIONS.iter().any(|o| text.starts_with(o)))
                || ["eval", "print", "input-type"]
                    .iter()
                    .any(|o| long.starts_with(o))
            {
                return self.fail("an interpreter runs inline code, which may load any file");
            }
            if let Some(path_option) = PATH_OPTIONS.iter().find(|o| text.starts_with(**o)) {
                let attached = text[path_option.len()..].trim_start_matches('=');
                let value = if attached.is_empty() {
                    i += 1;
                    args.get(i - 1).map(|w| w.text.clone()).unwrap_or_default()
                } else {
                    attached.to_string()
                };
                // A module it preloads by a relative path (`node --import ./x.mjs`, `ruby
                // -r./x`) loads like a script: from the tree, anything in it. A bare name
                // (`tsx/cjs`) is an installed package; an include dir (`-I lib`) a place.
                if value.starts_with("./") || value.starts_with("../") || value == "." {
                    return self.fail("an interpreter preloads a module from the tree");
                }
                self.value(&value, depth, false);
            }
        }
        let Some((script, script_args)) = args[i.min(args.len())..].split_first() else {
            return self.fail("an interpreter reads its program from standard input");
        };
        self.script(script, ScriptRunner::Interpreter);
        self.arguments(script_args, depth);
    }

    /// A script a runner runs.
    fn script(&mut self, word: &Word, runner: ScriptRunner) {
        let Some(word) = self.descriptor_script(word) else {
            return;
        };
        if word.text.contains('$') || word.glob {
            return self.fail("the shell computes the script it runs");
        }
        self.push(&word.text, Some(runner));
    }

    /// A program's arguments: files it may read as code or configuration.
    fn arguments(&mut self, args: &[Word], depth: usize) {
        let mut path_next = false;
        for word in args {
            let text = word.text.as_str();
            if word.glob {
                continue;
            }
            if std::mem::take(&mut path_next) && !text.starts_with('-') {
                self.value(text, depth, true);
                continue;
            }
            if text.contains('$') {
                self.variable_argument(text);
                continue;
            }
            if let Some(option) = text.strip_prefix('-') {
                let single = !option.starts_with('-');
                if let Some(path_option) = PATH_OPTIONS.iter().find(|o| text.starts_with(**o)) {
                    let attached = text[path_option.len()..].trim_start_matches('=');
                    if attached.is_empty() {
                        path_next = true;
                    } else {
                        // For a command's own short options the letters run together
                        // (`less -FRX`) unless the rest looks like a path.
                        let any = path_option.len() > 2;
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
            if let Some((_, assigned)) = text.split_once('=') {
                for part in assigned.split('=') {
                    self.value(part, depth, false);
                }
                continue;
            }
            if !matches!(text, "." | "..") && text.contains(['/', '.']) {
                self.push(text, None);
            }
            if text.contains(char::is_whitespace) {
                // A quoted line given to a command (`difftool -x 'sh tools/d.sh'`): what it
                // names too, without failing on a name with a space.
                let (result, cwd) = (self.result, self.cwd.clone());
                self.line(text, depth + 1);
                (self.result, self.cwd) = (result, cwd);
            }
        }
    }
}

mod lexer;
mod python;
mod wrappers;

use lexer::{Op, Redirect, Token, Word, assignment, split};
pub(super) use python::{imports_reach, python_module_places};
use wrappers::wrapper_grammar;
pub(super) use wrappers::{CHDIR_OPTIONS, LINE_OPTIONS, WrapperGrammar, startup_wrapper_grammar};

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
