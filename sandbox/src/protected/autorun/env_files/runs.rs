//! What the owner's shell start-up files run by an absolute path (red team 43a B1, B1b): the
//! programs on their lines, in aliases, traps and `PROMPT_COMMAND`, and the scripts shells and
//! interpreters are given there — places, and read in turn when the shell runs them.

use std::path::{Path, PathBuf};

use super::shell_words::Word;
use super::{At, MARK, MAX_EXPANSION_DEPTH, Reader};

/// Builtins and wrappers that run the rest of the line as the command, with how many
/// positional words of their own come first (`timeout 30`, `flock /tmp/l`, `chrt 10`).
const WRAPPERS: &[(&str, usize)] = &[
    ("command", 0),
    ("exec", 0),
    ("nohup", 0),
    ("builtin", 0),
    ("noglob", 0),
    ("nice", 0),
    ("sudo", 0),
    ("env", 0),
    ("setsid", 0),
    ("stdbuf", 0),
    ("ionice", 0),
    ("time", 0),
    ("caffeinate", 0),
    ("timeout", 1),
    ("flock", 1),
    ("chrt", 1),
    ("taskset", 1),
];

/// `words` without the wrappers in front of the command (their options, `NAME=value`
/// assignments of `env`, their own positional words), and without a `function NAME` header
/// and its `{`: the command itself. `command -v x` (a lookup) runs nothing: empty.
fn skip_wrappers(words: &[Word]) -> &[Word] {
    let mut rest = words;
    if rest.first().and_then(Word::literal).as_deref() == Some("function") {
        rest = rest.get(2..).unwrap_or_default();
        if rest.first().and_then(Word::literal).as_deref() == Some("{") {
            rest = &rest[1..];
        }
    }
    while let Some(first) = rest.first().and_then(Word::literal) {
        let Some((_, positional)) = WRAPPERS.iter().find(|(w, _)| *w == first) else {
            break;
        };
        rest = &rest[1..];
        while let Some(option) = rest.first().and_then(Word::literal) {
            if first == "command" && matches!(option.as_str(), "-v" | "-V") {
                return &[];
            }
            let assignment = first == "env" && option.contains('=') && !option.starts_with('=');
            if !option.starts_with('-') && !assignment {
                break;
            }
            rest = &rest[1..];
        }
        rest = rest.get(*positional..).unwrap_or_default();
    }
    rest
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
        let rest = skip_wrappers(words);
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
                    if let Some(dir) = args.first() {
                        let dirs = self.expand(dir, at, 0);
                        self.shell_cwd = dirs.into_iter().find(|d| d.starts_with('/'));
                    }
                    return;
                }
                // `complete -C prog`: bash runs it at each completion; `bind -x 'KEY: line'`
                // at each key press.
                "complete" | "compgen" => {
                    if let Some(at_c) = args
                        .iter()
                        .position(|a| a.literal().as_deref() == Some("-C"))
                        && let Some(line) = literal(at_c + 1)
                        && depth < MAX_EXPANSION_DEPTH
                    {
                        self.code(&line, at, depth + 1);
                    }
                    return;
                }
                "bind" => {
                    if args.first().and_then(Word::literal).as_deref() == Some("-x")
                        && let Some(binding) = literal(1)
                        && let Some((_, line)) = binding.split_once(':')
                        && depth < MAX_EXPANSION_DEPTH
                    {
                        self.code(line.trim().trim_matches('"'), at, depth + 1);
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
            } else if program.contains('/')
                && let Some(cwd) = self.shell_cwd.clone()
            {
                self.ran_file(format!("{cwd}/{program}"));
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
                    Some(option) if option.starts_with('-') => continue,
                    _ => {}
                }
                for script in self.expand(arg, at, 0) {
                    if script.contains(MARK) {
                        continue;
                    }
                    if script.starts_with('/') {
                        self.ran_file(script);
                    } else if script.contains('/')
                        && let Some(cwd) = self.shell_cwd.clone()
                    {
                        self.ran_file(format!("{cwd}/{script}"));
                    }
                }
                break;
            }
        }
    }

    /// A file a start-up file runs by an absolute path: a place, and read in turn when the
    /// shell runs it (no `#!`, or a shell's).
    fn ran_file(&mut self, path: String) {
        self.runs.push(PathBuf::from(&path));
        let head = super::super::read_head(Path::new(&path), 256).unwrap_or_default();
        let first = head.lines().next().unwrap_or_default();
        if matches!(
            super::super::shell_command::shebang_runner(first),
            None | Some(super::super::shell_command::ScriptRunner::Shell)
        ) && !self.ran.contains(&path)
        {
            self.ran.push(path);
        }
    }
}

#[cfg(test)]
mod tests;
