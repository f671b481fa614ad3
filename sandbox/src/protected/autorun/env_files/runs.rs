//! What the owner's shell start-up files run by an absolute path (red team 43a B1, B1b): the
//! programs on their lines, in aliases, traps and `PROMPT_COMMAND`, and the scripts shells and
//! interpreters are given there — places, and read in turn when the shell runs them.

use std::path::{Path, PathBuf};

use super::shell_words::Word;
use super::{At, MARK, MAX_EXPANSION_DEPTH, Reader};

impl Reader {
    /// What a shell start-up file's command runs by an absolute path (red team 43a B1b): the
    /// program itself (`/p/tools/motd.sh`, in an alias or `PROMPT_COMMAND` too), a file it
    /// sources (`. /p/.devrc` in an alias or a prompt's code), the script a shell or an
    /// interpreter is given (`bash ~/p/x.sh`), and the line of a shell's `-c`. Relative ones
    /// run from wherever the shell is and name a file of every tree only when sourced (read
    /// in [`Self::file`] and [`Self::code`]); a relative program is left alone (as a git
    /// alias's is).
    pub(super) fn program_run(&mut self, words: &[Word], at: At, depth: usize) {
        let mut rest = words;
        // Builtins and wrappers that run the rest as the command (`command -v x` looks up).
        while let Some(first) = rest.first().and_then(Word::literal) {
            if !matches!(
                first.as_str(),
                "command" | "exec" | "nohup" | "builtin" | "noglob" | "nice" | "sudo"
            ) {
                break;
            }
            rest = &rest[1..];
            while let Some(option) = rest.first().and_then(Word::literal) {
                if !option.starts_with('-') {
                    break;
                }
                if first == "command" && matches!(option.as_str(), "-v" | "-V") {
                    return;
                }
                rest = &rest[1..];
            }
        }
        let Some((program, args)) = rest.split_first() else {
            return;
        };
        for program in self.expand(program, at, 0) {
            if program.contains(MARK) {
                continue;
            }
            if program.starts_with('/') {
                self.ran_file(program.clone());
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
                    if script.starts_with('/') && !script.contains(MARK) {
                        self.ran_file(script);
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
