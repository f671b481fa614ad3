//! What the owner's shell start-up files run by an absolute path (red team 43a B1, B1b): the
//! programs on their lines, in aliases, traps and `PROMPT_COMMAND`, and the scripts shells and
//! interpreters are given there — places, and read in turn when the shell runs them.

use std::path::{Path, PathBuf};

use super::shell_words::{self, Dialect, Piece, Word};
use super::{At, MARK, MAX_EXPANSION_DEPTH, Reader};

/// Most bare program names kept from the start-up files.
const MAX_BARE_RUNS: usize = 4096;

/// Most scripts named by a relative path kept (each is a place at every depth of each tree).
const MAX_RELATIVE_RUNS: usize = 256;

/// Most files the start-up files' words name.
const MAX_NAMED: usize = 4096;

/// Builtins whose words only assign, unset or change directory: what they name is not run by
/// them (an assignment's value is read by kind, a `cd`'s directory is where relative programs
/// run from).
const NOT_RUNNING: [&str; 9] = [
    "cd", "pushd", "popd", "export", "declare", "typeset", "local", "readonly", "unset",
];

/// What a command's words run once the wrappers in front (`nohup`, `timeout -s KILL 5`,
/// `flock -w 3 LOCK`, `env -u X`, `sudo -u me`, …: each by its option grammar,
/// `shell_command::startup_wrapper_grammar`) and a `function NAME {` header are skipped.
enum Command<'a> {
    /// The command itself (program first).
    Words(&'a [Word]),
    /// A line a wrapper runs (`flock LOCK -c LINE`, `su -c LINE`, `env -S LINE`, `watch`'s).
    Line(Line<'a>),
    /// A wrapper's option the grammar does not know, or one that changes the directory: where
    /// the command begins is not told, so every later word naming a file counts as run
    /// (relative ones from the wrapper's directory when it names one).
    Unclear(&'a [Word], Option<&'a Word>),
    /// Nothing runs (`command -v x`, a wrapper with no command).
    Nothing,
}

/// Where a wrapper's line is: a word, an option's attached text, or words joined (`watch`).
enum Line<'a> {
    Word(&'a Word),
    Text(String),
    Joined(&'a [Word]),
}

fn skip_wrappers(words: &[Word]) -> Command<'_> {
    use super::super::shell_command::{CHDIR_OPTIONS, LINE_OPTIONS, startup_wrapper_grammar};
    let mut rest = words;
    if rest.first().and_then(Word::literal).as_deref() == Some("function") {
        rest = rest.get(2..).unwrap_or_default();
        if rest.first().and_then(Word::literal).as_deref() == Some("{") {
            rest = &rest[1..];
        }
    }
    while let Some(name) = rest.first().and_then(Word::literal) {
        let Some(grammar) = startup_wrapper_grammar(&name) else {
            break;
        };
        rest = &rest[1..];
        let mut leading = grammar.leading;
        loop {
            let Some(word) = rest.first() else {
                return Command::Nothing;
            };
            let text = word.literal().unwrap_or_default();
            let next = |n: usize| rest.get(n..).unwrap_or_default();
            if text == "--" {
                // `timeout -- 5 cmd`: the options end, the duration still comes first.
                rest = next(1 + leading);
                break;
            }
            if name == "env" && text.contains('=') && !text.starts_with(['=', '-']) {
                rest = next(1);
                continue;
            }
            if !text.starts_with('-') || text == "-" && !grammar.flags.contains(&"-") {
                if leading > 0 {
                    // `timeout 30`, `flock LOCK`, `chrt 5`: the duration, lock, priority.
                    leading -= 1;
                    rest = next(1);
                    continue;
                }
                if name == "watch" {
                    // watch runs its words joined as one `sh -c` line.
                    return Command::Line(Line::Joined(rest));
                }
                break;
            }
            // `nice -10`: the old spelling of an adjustment.
            if grammar.valued.contains(&"-n") && text[1..].chars().all(|c| c.is_ascii_digit()) {
                rest = next(1);
                continue;
            }
            let (option, attached) = match text.split_once('=') {
                Some((option, value)) if option.starts_with("--") => (option, Some(value)),
                _ if !text.starts_with("--") && text.len() > 2 && text.is_char_boundary(2) => {
                    (&text[..2], Some(&text[2..]))
                }
                _ => (text.as_str(), None),
            };
            if grammar.refused.contains(&option) {
                if name == "command" {
                    return Command::Nothing;
                }
                if LINE_OPTIONS.contains(&option) {
                    return match attached {
                        Some(line) => Command::Line(Line::Text(line.to_string())),
                        None => rest
                            .get(1)
                            .map_or(Command::Nothing, |w| Command::Line(Line::Word(w))),
                    };
                }
                let dir = CHDIR_OPTIONS
                    .contains(&option)
                    .then(|| rest.get(1))
                    .flatten()
                    .filter(|_| attached.is_none());
                return Command::Unclear(next(1), dir);
            }
            if grammar.flags.contains(&option) && attached.is_none() {
                rest = next(1);
            } else if grammar.valued.contains(&option) {
                rest = next(if attached.is_none() { 2 } else { 1 });
            } else {
                return Command::Unclear(next(1), None);
            }
        }
    }
    Command::Words(rest)
}

/// Whether a project runner's first word names a script rather than a program.
fn looks_like_script(word: &str) -> bool {
    const ENDINGS: [&str; 12] = [
        ".py", ".pyw", ".sh", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".rb", ".pl",
    ];
    word.contains('/') || ENDINGS.iter().any(|e| word.ends_with(e))
}

impl Reader {
    /// What a shell start-up file's command runs by an absolute path (red team 43a B1b): the
    /// program itself (`/p/tools/motd.sh`, in an alias or `PROMPT_COMMAND` too), a file it
    /// sources (`. /p/.devrc` in an alias or a prompt's code), the script a shell or an
    /// interpreter is given (`bash ~/p/x.sh`), and the line of a shell's `-c`. Relative ones
    /// run from wherever the shell is and name a file of every tree only when sourced (read
    /// in [`Self::file`] and [`Self::code`]); a relative program is left alone (as a git
    /// alias's is).
    pub(super) fn program_run(&mut self, words: &[Word], at: At, depth: usize) {
        // The commands of its substitutions run too, and their output is often the code
        // (`eval "$(cat .x)"`, `. <(cat .x)`, red team 49).
        if depth < MAX_EXPANSION_DEPTH {
            let inner: Vec<String> = words
                .iter()
                .flat_map(|w| &w.pieces)
                .filter_map(|piece| match piece {
                    Piece::Command(text) => Some(text.clone()),
                    _ => None,
                })
                .collect();
            for text in inner {
                self.code(&text, at, depth + 1);
            }
        }
        let rest = match skip_wrappers(words) {
            Command::Words(rest) => rest,
            Command::Nothing => return,
            Command::Line(line) => {
                if depth < MAX_EXPANSION_DEPTH {
                    let lines = match line {
                        Line::Word(word) => self.expand(word, at, 0),
                        Line::Text(text) => vec![text],
                        Line::Joined(words) => words
                            .iter()
                            .map(Word::literal)
                            .collect::<Option<Vec<_>>>()
                            .map(|w| vec![w.join(" ")])
                            .unwrap_or_default(),
                    };
                    for line in lines.iter().filter(|l| !l.contains(MARK)) {
                        self.code(line, at, depth + 1);
                    }
                }
                return;
            }
            Command::Unclear(rest, dir) => {
                // After a directory option, its value comes first.
                let from_wrapper = dir.is_some();
                let program = rest.get(usize::from(from_wrapper)..).unwrap_or_default();
                // Relative ones from the wrapper's directory, else from where a `cd` went
                // (`cd /p && flock -xn LOCK ./x`, red team 47a).
                let dir = dir
                    .and_then(|d| {
                        self.expand(d, at, 0)
                            .into_iter()
                            .find(|d| d.starts_with('/'))
                    })
                    .or_else(|| self.shell_cwd.clone());
                // What it runs, from there (`env -C /p bash x.sh`, red team 49).
                if let Some(dir) = dir
                    .clone()
                    .filter(|_| from_wrapper && depth < MAX_EXPANSION_DEPTH)
                {
                    let saved = self.shell_cwd.replace(dir);
                    self.program_run(program, at, depth + 1);
                    self.shell_cwd = saved;
                }
                for word in rest {
                    for path in self.expand(word, at, 0) {
                        if path.contains(MARK) {
                            continue;
                        }
                        let path = match (&dir, path.starts_with('/')) {
                            (_, true) => path,
                            (Some(dir), false) if path.contains('/') => format!("{dir}/{path}"),
                            _ => continue,
                        };
                        if !crate::look::is_dir(Path::new(&path)) {
                            self.ran_file(path);
                        }
                    }
                }
                return;
            }
        };
        let Some((program, args)) = rest.split_first() else {
            return;
        };
        let literal = |i: usize| args.get(i).and_then(Word::literal);
        for program in self.expand(program, at, 0) {
            if program.contains(MARK) {
                continue;
            }
            match program.as_str() {
                // `cd /p && ./x` (red team 44a C1-B1): later relative programs run from there.
                "cd" | "pushd" => {
                    // `cd -P DIR`: its options first.
                    let dir = args.iter().find(|a| {
                        !a.literal()
                            .is_some_and(|t| t.starts_with('-') && t.len() > 1)
                    });
                    if let Some(dir) = dir {
                        let dirs = self.expand(dir, at, 0);
                        self.shell_cwd = dirs.into_iter().find(|d| d.starts_with('/'));
                    }
                    return;
                }
                // Project runners (`uv run x.py`, `poetry run python x.py`, red team 50): what
                // follows `run` is a script or a command, run from where the shell is.
                "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "rye"
                    if literal(0).as_deref() == Some("run") =>
                {
                    let rest = &args[1..];
                    let start = rest
                        .iter()
                        .position(|w| !w.literal().is_some_and(|t| t.starts_with('-')))
                        .unwrap_or(rest.len());
                    let rest = &rest[start..];
                    match rest.first().and_then(Word::literal) {
                        Some(first) if looks_like_script(&first) => {
                            self.script_run(first, "python");
                        }
                        Some(_) if depth < MAX_EXPANSION_DEPTH => {
                            self.program_run(rest, at, depth + 1);
                        }
                        _ => {}
                    }
                    return;
                }
                // make runs its makefile's recipes (`[ -f .x.mk ] && make -f .x.mk`, `make -C
                // /p -f x.mk`, red team 49): the makefile is a script, from `-C`'s directory.
                "make" | "gmake" => {
                    let mut dir: Option<String> = None;
                    let mut files = Vec::new();
                    let mut words = args.iter().filter_map(Word::literal);
                    while let Some(word) = words.next() {
                        let value = |w: &str, short: &str, long: &[&str]| {
                            long.iter()
                                .find_map(|l| w.strip_prefix(l))
                                .or_else(|| w.strip_prefix(short).filter(|v| !v.is_empty()))
                                .map(str::to_string)
                        };
                        if word == "-C" || word == "--directory" {
                            dir = words.next();
                        } else if word == "-f" || word == "--file" || word == "--makefile" {
                            files.extend(words.next());
                        } else if let Some(v) = value(&word, "-C", &["--directory="]) {
                            dir = Some(v);
                        } else if let Some(v) = value(&word, "-f", &["--file=", "--makefile="]) {
                            files.push(v);
                        }
                    }
                    let (base, prefix) = match dir {
                        Some(d) if d.starts_with('/') => (Some(d), None),
                        Some(d) => match self.shell_cwd.clone() {
                            Some(cwd) => (Some(format!("{cwd}/{d}")), None),
                            None => (None, Some(d)),
                        },
                        None => (self.shell_cwd.clone(), None),
                    };
                    let saved = std::mem::replace(&mut self.shell_cwd, base);
                    for file in files {
                        let file = match (&prefix, file.starts_with('/')) {
                            (Some(d), false) => format!("{d}/{file}"),
                            _ => file,
                        };
                        self.script_run(file, "make");
                    }
                    self.shell_cwd = saved;
                }
                // `complete -C prog`: bash runs it at each completion; `bind -x 'KEY: line'`
                // at each key press.
                "complete" | "compgen" => {
                    // `-C prog` or `-C"prog"` (attached).
                    let line = args.iter().enumerate().find_map(|(i, a)| {
                        let text = a.literal()?;
                        match text.strip_prefix("-C")? {
                            "" => literal(i + 1),
                            attached => Some(attached.to_string()),
                        }
                    });
                    if let Some(line) = line.filter(|_| depth < MAX_EXPANSION_DEPTH) {
                        self.code(&line, at, depth + 1);
                    }
                    return;
                }
                "bind" => {
                    // `bind -x 'KEY: line'`, also after `-m KEYMAP`.
                    if let Some(at_x) = args
                        .iter()
                        .position(|a| a.literal().as_deref() == Some("-x"))
                        && let Some(binding) = literal(at_x + 1)
                        && let Some((_, line)) = binding.split_once(':')
                        && depth < MAX_EXPANSION_DEPTH
                    {
                        self.code(line.trim().trim_matches('"'), at, depth + 1);
                    }
                    return;
                }
                // tmux and screen run their command words as shell lines (`tmux new-session
                // -d 'line'`, `tmux run-shell 'line'`, `screen -dmS name prog`).
                "tmux" | "screen" => {
                    if depth < MAX_EXPANSION_DEPTH {
                        for line in args.iter().filter_map(Word::literal) {
                            if !line.starts_with('-') {
                                self.code(&line, at, depth + 1);
                            }
                        }
                    }
                    return;
                }
                // `script -qc 'line'`, `find … -exec prog {} ;`, `xargs prog`: the line or the
                // program they run.
                "script" | "find" | "xargs" => {
                    let option = |i: usize| args.get(i).and_then(Word::literal);
                    let is =
                        |i: usize, test: &dyn Fn(&str) -> bool| option(i).is_some_and(|w| test(&w));
                    // Where what it runs begins: the word after `-c`/`-qc` (script's line),
                    // after `-exec` and its kin (find's command), or xargs' first non-option.
                    let start = (0..args.len()).find(|&i| match program.as_str() {
                        "script" => is(i, &|w| {
                            w == "-c"
                                || (w.starts_with('-') && !w.starts_with("--") && w.ends_with('c'))
                        }),
                        "find" => is(i, &|w| matches!(w, "-exec" | "-execdir" | "-ok" | "-okdir")),
                        _ => !is(i, &|w| w.starts_with('-')),
                    });
                    let start = match program.as_str() {
                        "xargs" => start,
                        _ => start.map(|i| i + 1),
                    };
                    if let Some(start) = start.filter(|_| depth < MAX_EXPANSION_DEPTH) {
                        if program == "script" {
                            if let Some(line) = literal(start) {
                                self.code(&line, at, depth + 1);
                            }
                        } else if start < args.len() {
                            self.program_run(&args[start..], at, depth + 1);
                        }
                    }
                    return;
                }
                _ => {}
            }
            if program.starts_with('/') {
                self.ran_file(program.clone());
            } else if !program.contains('/') {
                // A bare name is found on PATH: a file of that name in a tree dir on the
                // owner's PATH runs in its place (red team 46a).
                if self.bare_runs.len() < MAX_BARE_RUNS && !self.bare_runs.contains(&program) {
                    self.bare_runs.push(program.clone());
                }
            } else if let Some(cwd) = self.shell_cwd.clone() {
                self.ran_file(format!("{cwd}/{program}"));
            } else if self.relative_sources.len() < MAX_RELATIVE_RUNS {
                // `./x.sh` or `tools/x` with no `cd` before it runs from wherever the shell is
                // (a `cd` hook, an agent's hook in the project it is opened in): a file at
                // every depth (red team 49).
                let script = PathBuf::from(program.trim_start_matches("./"));
                if !self.relative_sources.contains(&script) {
                    self.relative_sources.push(script);
                }
            }
            if !matches!(program.as_str(), "." | "source")
                && !super::super::shell_command::runs_script(&program)
            {
                continue;
            }
            let mut args = args.iter();
            while let Some(arg) = args.next() {
                let literal = arg.literal();
                match literal.as_deref() {
                    Some("-c") => {
                        if let Some(line) = args.next().and_then(Word::literal)
                            && depth < MAX_EXPANSION_DEPTH
                        {
                            self.code(&line, at, depth + 1);
                        }
                        break;
                    }
                    // `python -m pkg.mod`: the module's file or package, from where the
                    // interpreter starts (red team 49: an MCP server's `-m` with its `cwd`).
                    Some("-m") if program.contains("python") => {
                        if let Some(module) = args.next().and_then(Word::literal) {
                            let rel = module.replace('.', "/");
                            for script in [format!("{rel}.py"), rel] {
                                self.script_run(script, &program);
                            }
                        }
                        break;
                    }
                    Some(option) if option.starts_with('-') => continue,
                    // `deno run x.ts`, `bun run x.ts`: the subcommand, then the script.
                    Some("run" | "test")
                        if matches!(
                            Path::new(&program).file_name().and_then(|n| n.to_str()),
                            Some("deno" | "bun")
                        ) =>
                    {
                        continue;
                    }
                    _ => {}
                }
                for script in self.expand(arg, at, 0) {
                    if script.contains(MARK) {
                        continue;
                    }
                    self.script_run(script, &program);
                }
                break;
            }
        }
    }

    /// The files a substitution prints that `eval` runs as code: `cat FILE…`, `< FILE`. Only
    /// there: `echo "$(cat .nvmrc)"` prints data (red team 51: a rule on every `cat` refused
    /// `.nvmrc` and `.python-version`).
    pub(super) fn printed_code(&mut self, inner: &str) {
        let inner = inner.trim();
        if let Some(file) = inner.strip_prefix('<') {
            let file = file.trim().trim_matches(['"', '\'']);
            if !file.is_empty() && !file.contains(char::is_whitespace) {
                self.script_run(file.to_string(), "eval");
            }
            return;
        }
        for words in shell_words::commands(inner, Dialect::Posix) {
            if words.first().and_then(Word::literal).as_deref() == Some("cat") {
                for file in words[1..].iter().filter_map(Word::literal) {
                    if !file.starts_with('-') {
                        self.script_run(file, "eval");
                    }
                }
            }
        }
    }

    /// A script `program` (an interpreter, `.`) is given by `script`.
    fn script_run(&mut self, script: String, program: &str) {
        // A script given by a bare name is a file too (an interpreter reads its operand from
        // where it is, `(cd /p && bash start.sh)`, red team 48 F8b). With no `cd` before it,
        // from wherever the shell is (a terminal opened in the project, a `cd` hook): sourced
        // by a relative path (F8).
        if script.starts_with('/') {
            self.ran_file(script);
        } else if let Some(cwd) = self.shell_cwd.clone() {
            self.ran_file(format!("{cwd}/{script}"));
        } else if !matches!(program, "." | "source")
            && self.relative_sources.len() < MAX_RELATIVE_RUNS
        {
            // (`.`'s file is the source reading's.)
            let script = PathBuf::from(script);
            if !self.relative_sources.contains(&script) {
                self.relative_sources.push(script);
            }
        }
    }

    /// Every file a shell start-up file's commands name by an absolute path — a word of any
    /// command (its program, an argument, `--opt=/p/x`, a token of a quoted line), a
    /// redirection's target, a word of a command substitution's command, an array's element —
    /// is a run, but for the words of lookups and of builtins that only assign or change
    /// directory. Reading which word a command runs (wrapper grammars, interpreter options)
    /// kept missing shapes (red team 47a: `$EMPTY /p/x`, `prlimit -n /p/x`, `timeout -- 5
    /// /p/x`, `ssh-agent /p/x`, `bash -o pipefail /p/x`, `eval "$(/p/x init)"`, `bash < /p/x`),
    /// so the spelling decides, as for tool configs; these are not read in turn (the program
    /// reading above follows what it knows runs). An existing directory is not named.
    pub(super) fn files_named(&mut self, text: &str, dialect: Dialect, at: At) {
        self.definitions(text);
        for words in shell_words::commands_reading(text, dialect, MAX_EXPANSION_DEPTH) {
            let first = words.first().and_then(Word::literal).unwrap_or_default();
            let lookup = matches!(
                first.as_str(),
                "type" | "which" | "hash" | "whence" | "where"
            ) || (first == "command"
                && words
                    .get(1)
                    .and_then(Word::literal)
                    .is_some_and(|o| o == "-v" || o == "-V"));
            if lookup || NOT_RUNNING.contains(&first.as_str()) {
                continue;
            }
            for word in &words {
                let elements: Vec<Word> = match word.pieces.as_slice() {
                    [.., Piece::Array(elements)] => elements.clone(),
                    // An alias's body is a line the shell runs.
                    _ if word.is_assignment() && first != "alias" => continue,
                    // `. /p/{a,b}.sh` sources both (red team 47b B17).
                    _ => shell_words::brace_expand(word, dialect),
                };
                for element in &elements {
                    // A pattern's directory (red team 47b B6): what is made there later
                    // matches too.
                    if element.is_pattern_or_tilde() {
                        for value in self.expand(element, at, 0) {
                            if let Some((dir, last)) = value.rsplit_once('/')
                                && last.contains(['*', '?', '['])
                                && dir.starts_with('/')
                                && !dir.contains(['*', '?', '[', MARK])
                                // `~/.bash_*`: the home or above names no directory of runs.
                                && !self
                                    .home
                                    .as_deref()
                                    .is_some_and(|home| Path::new(home).starts_with(dir))
                                && self.run_dirs.len() < MAX_NAMED
                            {
                                self.run_dirs.push(PathBuf::from(dir));
                            }
                        }
                    }
                    for value in self.expand(element, at, 0) {
                        let value = match value.split_once('=') {
                            Some((_, body)) if first == "alias" => body.to_string(),
                            _ => value,
                        };
                        for token in value.split_whitespace() {
                            // `--config=/p/x`, git's `-c core.pager=/p/x`.
                            let token = match token.split_once("=/") {
                                Some((_, path)) => format!("/{path}"),
                                None => token.to_string(),
                            };
                            let token = token.trim_end_matches([';', ')', '"', '\'']);
                            if token.starts_with('/')
                                && !token.contains(MARK)
                                && !crate::look::is_dir(Path::new(token))
                                && self.runs.len() < MAX_NAMED
                            {
                                self.runs.push(PathBuf::from(token));
                            }
                        }
                    }
                }
            }
        }
    }

    /// The names `text` defines as functions (`f() {`, `function f`, fish's `function f`) or
    /// aliases (`alias f=…`, fish's `alias f '…'`), read by line.
    fn definitions(&mut self, text: &str) {
        let name_of = |word: &str| {
            let name: String = word
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
                .collect();
            (!name.is_empty()).then_some(name)
        };
        for line in text.lines().map(str::trim_start) {
            let mut words = line.split_whitespace();
            let name = match words.next() {
                Some("function" | "alias") => words.next().and_then(name_of),
                Some(first) if line.contains("()") => {
                    name_of(first).filter(|n| line[n.len()..].trim_start().starts_with("()"))
                }
                _ => None,
            };
            if let Some(name) = name
                && self.defined.len() < MAX_BARE_RUNS
                && !self.defined.contains(&name)
            {
                self.defined.push(name);
            }
        }
    }

    /// A file a start-up file runs by an absolute path: a place, and read in turn when the
    /// shell runs it (no `#!`, or a shell's).
    fn ran_file(&mut self, path: String) {
        self.runs.push(PathBuf::from(&path));
        // A program (an ELF, any binary) is no shell text: reading `/bin/bash` as a script had
        // passed the size bound, and past it every write of every session was refused (red
        // team 47a: `exec /bin/bash -l`, `alias g=/usr/bin/git` in a `.bashrc`). A file not
        // there yet is read when it is.
        let exists = crate::look::is_file(Path::new(&path));
        let text = super::super::read_text_head(Path::new(&path), 512);
        let binary = exists && text.is_none();
        let head = text.unwrap_or_default();
        let first = head.lines().next().unwrap_or_default();
        if !binary
            && matches!(
                super::super::shell_command::shebang_runner(first),
                None | Some(super::super::shell_command::ScriptRunner::Shell)
            )
            && !self.ran.contains(&path)
        {
            self.ran.push(path);
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
