//! The files a shell command line names (issue 23): the values git's configuration runs
//! through the shell (`core.fsmonitor`, a filter, a diff driver, an `!` alias) read as the shell
//! reads them, so a session cannot change the program such a value runs. Fail closed: a line
//! whose meaning depends on more than its words names the whole tree.

/// What a line names when nothing narrower can be said: the working tree's top, every write
/// below it refused.
const WHOLE_TREE: &str = ".";

/// Nested `sh -c '…'` lines read before giving up (each level drops a layer of quotes).
const MAX_DEPTH: usize = 4;

/// Words that change what the rest means: another directory, a sourced or evaluated file, a
/// module looked up by name.
const CHANGES_MEANING: [&str; 8] = ["cd", "pushd", "popd", ".", "source", "eval", "exec", "-m"];

/// Programs that run code given inline or found through a search path, which may be any file
/// of the tree (`python3 -c 'import fsm'`, `ruby -Ilib -rx`, `node --require=./x`).
const INTERPRETERS: [&str; 24] = [
    "python", "pypy", "node", "nodejs", "bun", "deno", "perl", "ruby", "php", "lua", "luajit",
    "rscript", "java", "tclsh", "julia", "elixir", "erl", "escript", "guile", "racket", "irb",
    "groovy", "tsx", "ts-node",
];

/// Options of those programs that take code or a search path.
const CODE_OPTIONS: [&str; 16] = [
    "-c",
    "-e",
    "-E",
    "-r",
    "-I",
    "-M",
    "-m",
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

/// One word of a command line, quotes and backslashes removed.
struct Word {
    text: String,
    /// In a command's place (first, or after `;`, `&&`, `|`, `(`…): found on PATH when bare.
    command: bool,
    /// Holds an unquoted `*`, `?` or `[`: the shell expands it to files nobody can list here.
    glob: bool,
}

/// The files in the tree a command value may run or read, relative to the working tree's top
/// (where git runs it, through the shell): every word of it (quotes and backslashes removed, as
/// the shell reads them) but a command's own name without a `/` (found on PATH) and options;
/// the value after `=` in an assignment or option (`X=./a`, `--rcfile=./b`); the words of a
/// quoted line another shell runs (`sh -c 'sh fsm.sh'`). A line whose words the shell computes
/// (`$…`, backticks, globs), that changes directory (`cd`, `env -C`), runs a module (`-m`),
/// sources a file (`.`, `source`, `eval`) or gives an interpreter inline code or a search path
/// (`python3 -c`, `ruby -I`) names `.`: the whole tree, fail closed.
pub(super) fn program_paths(value: &str) -> Vec<String> {
    paths(value, 0).unwrap_or_else(|| vec![WHOLE_TREE.to_string()])
}

/// `None`: the whole tree.
fn paths(value: &str, depth: usize) -> Option<Vec<String>> {
    if depth > MAX_DEPTH || value.contains('$') || value.contains('`') {
        return None;
    }
    let words = split(value);
    let program = |word: &Word| {
        let name = word
            .text
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_lowercase();
        name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
            .to_string()
    };
    let interpreter = words
        .iter()
        .any(|word| INTERPRETERS.contains(&program(word).as_str()));
    let env = words.iter().any(|word| program(word) == "env");
    let mut out = Vec::new();
    // `X=1 tool`: an assignment leaves the command's place to the next word.
    let mut command_after_assignment = false;
    for (i, word) in words.iter().enumerate() {
        let text = word.text.as_str();
        let command = word.command || std::mem::take(&mut command_after_assignment);
        // `sh -c '…'`, `bash -lc '…'`: the argument is a line another shell reads.
        let shell_line = i > 0 && {
            let option = words[i - 1].text.as_str();
            option.starts_with('-') && !option.starts_with("--") && option.ends_with('c')
        };
        let code_option = interpreter
            && CODE_OPTIONS
                .iter()
                .any(|option| text == *option || text.starts_with(option));
        let changes_directory = env && (text == "-C" || text.starts_with("--chdir"));
        if word.glob || CHANGES_MEANING.contains(&text) || code_option || changes_directory {
            return None;
        }
        if shell_line {
            out.extend(paths(text, depth + 1)?);
            continue;
        }
        if let Some((name, assigned)) = text.split_once('=') {
            command_after_assignment = command
                && !name.is_empty()
                && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            for part in assigned.split('=') {
                if part.contains(char::is_whitespace) {
                    out.extend(paths(part, depth + 1)?);
                } else if !part.is_empty() && !part.starts_with('-') {
                    out.push(part.to_string());
                }
            }
            continue;
        }
        let on_path = command && !text.contains('/');
        if text.is_empty() || on_path || text.starts_with('-') {
            continue;
        }
        out.push(text.to_string());
    }
    Some(out)
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
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match (quoting, c) {
            (Some(q), c) if c == q => quoting = None,
            (Some('"'), '\\') => current(&mut word, &mut command_next)
                .text
                .extend(chars.next()),
            (Some(_), c) => current(&mut word, &mut command_next).text.push(c),
            (None, '\'' | '"') => {
                current(&mut word, &mut command_next);
                quoting = Some(c);
            }
            (None, '\\') => current(&mut word, &mut command_next)
                .text
                .extend(chars.next()),
            (None, c) if c.is_whitespace() || c == '<' || c == '>' => words.extend(word.take()),
            (None, ';' | '&' | '|' | '(' | ')' | '{' | '}' | '!') => {
                words.extend(word.take());
                command_next = true;
            }
            (None, c) => {
                let word = current(&mut word, &mut command_next);
                word.glob |= matches!(c, '*' | '?' | '[');
                word.text.push(c);
            }
        }
    }
    words.extend(word.take());
    words
}

#[cfg(test)]
mod tests {
    use super::program_paths;

    fn names(value: &str) -> Vec<String> {
        program_paths(value)
    }

    #[test]
    fn words_as_the_shell_reads_them() {
        assert_eq!(names("sh fsm.sh"), ["fsm.sh"]);
        assert_eq!(names("'./tools/my conv.sh' --flag"), ["./tools/my conv.sh"]);
        assert_eq!(names("!env X=1 tools/e.sh"), ["1", "tools/e.sh"]);
        assert_eq!(names("git-lfs filter-process"), ["filter-process"]);
        assert_eq!(names("less -FRX"), Vec::<String>::new());
        // A command's bare name is looked up on PATH, not in the tree.
        assert_eq!(names("a.sh; b.sh && ./c.sh"), ["./c.sh"]);
        assert_eq!(names("f() { ./x.sh; }; f"), ["./x.sh"]);
        assert_eq!(
            names("./x.sh 2>/dev/null <in"),
            ["./x.sh", "2", "/dev/null", "in"]
        );
    }

    #[test]
    fn assignments_and_option_values_name_their_value() {
        assert_eq!(names("tool --config=./c.toml t"), ["./c.toml", "t"]);
        assert_eq!(names("X=./a ./run"), ["./a", "./run"]);
        assert_eq!(names("sh --rcfile=rc x.sh"), ["rc", "x.sh"]);
        assert_eq!(names("NODE_OPTIONS='--require ./h.js' tool"), ["./h.js"]);
        assert_eq!(names("A=1 B=2 tool ./x"), ["1", "2", "./x"]);
    }

    #[test]
    fn a_line_another_shell_runs_is_read_too() {
        assert_eq!(names("sh -c 'sh fsm.sh'"), ["fsm.sh"]);
        assert_eq!(names("bash -lc \"python3 tools/x.py\""), ["tools/x.py"]);
    }

    #[test]
    fn what_the_shell_computes_or_an_interpreter_loads_is_the_whole_tree() {
        for value in [
            "cd tools && ./conv.sh",
            "python3 -m tools.conv",
            "$HOME/p/tools/conv.sh",
            "`pwd`/x.sh",
            "sh scripts/*.sh",
            "sh ./x?.sh",
            "python3 -c 'import fsm'",
            "python3.12 -cimport\\ fsm",
            "/usr/bin/ruby -Ilib -rfsm -e 0",
            "node -e \"require('./x')\"",
            "perl -Mlib=. -MFsm -e 1",
            "java -cp . Fsm",
            "env -C tools ./x.sh",
            "env --chdir=tools ./x.sh",
            "sh -c 'sh -c \"python3 -c 1\"'",
            "sh -c \"source ./x.sh\"",
            ". ./x.sh",
            "exec ./x.sh",
        ] {
            assert_eq!(names(value), ["."], "{value}");
        }
    }

    #[test]
    fn nesting_past_the_bound_is_the_whole_tree() {
        let nest = |levels: usize| {
            let mut line = "./x.sh".to_string();
            for _ in 0..levels {
                let quoted = line.replace('\\', "\\\\").replace('"', "\\\"");
                line = format!("sh -c \"{quoted}\"");
            }
            line
        };
        assert_eq!(names(&nest(3)), ["./x.sh"]);
        assert_eq!(names(&nest(8)), ["."]);
    }
}
