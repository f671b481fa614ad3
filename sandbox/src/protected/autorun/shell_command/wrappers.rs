//! The wrappers the reader follows (`env`, `nice`, `timeout`, `flock`, …): each one's complete
//! option grammar, so the command it runs is found without guessing.

/// The option grammar of a wrapper that runs the command after its options: options without a
/// value, options taking the next word (or an attached value, `-sKILL`, `--signal=KILL`),
/// options the reader refuses to follow (they change directory, split a line, run a line),
/// and how many plain words come before the command (`timeout`'s duration, `flock`'s file).
pub(super) struct WrapperGrammar {
    pub(super) flags: &'static [&'static str],
    pub(super) valued: &'static [&'static str],
    pub(super) refused: &'static [&'static str],
    pub(super) leading: usize,
}

pub(super) fn wrapper_grammar(name: &str) -> Option<WrapperGrammar> {
    let grammar = |flags, valued, refused, leading| WrapperGrammar {
        flags,
        valued,
        refused,
        leading,
    };
    Some(match name {
        "env" => grammar(
            &[
                "-i",
                "--ignore-environment",
                "-0",
                "--null",
                "-v",
                "--debug",
                "-",
            ],
            &["-u", "--unset"],
            &[
                "-C",
                "--chdir",
                "-S",
                "--split-string",
                "--default-signal",
                "--ignore-signal",
                "--block-signal",
                "-P",
            ],
            0,
        ),
        "nice" => grammar(&[], &["-n", "--adjustment"], &[], 0),
        "nohup" => grammar(&[], &[], &[], 0),
        "timeout" => grammar(
            &[
                "--foreground",
                "--preserve-status",
                "-v",
                "--verbose",
                "-f",
                "-p",
            ],
            &["-s", "--signal", "-k", "--kill-after"],
            &[],
            1,
        ),
        "stdbuf" => grammar(
            &[],
            &["-i", "-o", "-e", "--input", "--output", "--error"],
            &[],
            0,
        ),
        "flock" => grammar(
            &[
                "-s",
                "--shared",
                "-x",
                "-e",
                "--exclusive",
                "-u",
                "--unlock",
                "-n",
                "--nb",
                "--nonblock",
                "-o",
                "--close",
                "-F",
                "--no-fork",
                "--verbose",
            ],
            &["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"],
            &["-c", "--command"],
            1,
        ),
        "command" => grammar(&["-p"], &[], &["-v", "-V"], 0),
        "exec" => grammar(&["-c", "-l"], &["-a"], &[], 0),
        "time" => grammar(
            &[
                "-p",
                "-a",
                "--append",
                "-v",
                "--verbose",
                "-q",
                "--quiet",
                "--portability",
            ],
            &["-f", "--format", "-o", "--output"],
            &[],
            0,
        ),
        "setsid" => grammar(
            &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
            &[],
            &[],
            0,
        ),
        "ionice" => grammar(
            &["-t", "--ignore"],
            &["-c", "--class", "-n", "--classdata"],
            &["-p", "-P", "-u"],
            0,
        ),
        // npx runs a package's bin found in `node_modules/.bin` (installed packages, refused as
        // such; a workspace package is reached there through a symlink) or fetched outside.
        "npx" => grammar(
            &["-y", "--yes", "--no", "--no-install", "-q", "--quiet"],
            &[],
            &[
                "-p",
                "--package",
                "-c",
                "--call",
                "--prefix",
                "-w",
                "--workspace",
            ],
            0,
        ),
        _ => return None,
    })
}
