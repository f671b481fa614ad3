//! RunCommand policy, before anything runs: resolving the executable (absolute path, a name on the
//! fixed system PATH, or a relative path inside the working directory) and the deny list of
//! DESIGN §5, matched by name and by the resolved path's canonical target, also behind wrappers
//! (`env`, `xargs`, `nice`, `timeout`, `nohup`, `stdbuf`, `setsid`, `time`) and multi-call
//! binaries (`busybox`, `toybox`, `coreutils --coreutils-prog=`).
//!
//! The deny list is a courtesy that gives the model a clear refusal; the OS sandbox is the control.

// Every look at the owner's files goes through `crate::look` (sandbox/clippy.toml).
#![deny(clippy::disallowed_methods)]

use std::path::{Component, Path, PathBuf};

use common::outcome::OutcomeCode;

/// The search path for bare executable names when the owner's PATH gives none (never the caller's
/// `PATH`).
#[cfg(not(target_os = "macos"))]
pub const FIXED_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The search path for bare executable names when the owner's PATH gives none.
#[cfg(target_os = "macos")]
pub const FIXED_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/opt/homebrew/bin";

/// How deep wrappers may nest (`env nice timeout 5 xargs …`) before we refuse.
const MAX_WRAPPER_DEPTH: usize = 8;

/// Privilege escalation, deletion, system control and process killing.
const DENIED_NAMES: &[(&str, &str)] = &[
    ("sudo", "privilege escalation"),
    ("su", "privilege escalation"),
    ("doas", "privilege escalation"),
    ("pkexec", "privilege escalation"),
    ("rm", "deleting files"),
    ("rmdir", "deleting files"),
    ("mv", "moving files"),
    ("unlink", "deleting files"),
    ("shred", "deleting files"),
    ("shutdown", "system control"),
    ("reboot", "system control"),
    ("halt", "system control"),
    ("poweroff", "system control"),
    ("launchctl", "system control"),
    ("systemctl", "system control"),
    ("kill", "killing processes"),
    ("pkill", "killing processes"),
    ("killall", "killing processes"),
];

/// Model CLIs: ChatGPT is the only model of a session.
const MODEL_CLIS: &[&str] = &[
    "claude", "codex", "gemini", "deepseek", "ollama", "aider", "llm",
];

/// npm packages of model CLIs (reached through `npx`, `node …/cli.js`, `bunx`, …).
const MODEL_PACKAGES: &[&str] = &[
    "@anthropic-ai/claude-code",
    "@openai/codex",
    "@google/gemini-cli",
    "claude-code/cli",
];

/// `find` actions that delete, run programs or write files.
const FIND_DENIED: &[&str] = &[
    "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// Multi-call binaries whose applet is named by argv0 or their first argument.
const MULTI_CALL: &[&str] = &["busybox", "toybox"];

/// Why a command was refused before start. `Display` names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandRefusal {
    #[error("argv is empty")]
    Empty,
    #[error("`{name}` is refused by the RunCommand deny list ({reason})")]
    Denied { name: String, reason: &'static str },
    #[error(
        "`{name}` is refused by the RunCommand deny list (model CLIs: ChatGPT is the only model)"
    )]
    ModelCli { name: String },
    #[error(
        "`find {action}` is refused by the RunCommand deny list (it deletes, executes or writes)"
    )]
    FindAction { action: String },
    #[error("`rg {flag}` is refused by the RunCommand deny list (preprocessors run programs)")]
    RipgrepPre { flag: String },
    #[error(
        "`git {flag}` is refused by the RunCommand deny list (command-line config can run programs)"
    )]
    GitConfig { flag: String },
    #[error(
        "`{wrapper}`: option `{option}` is not understood by the RunCommand policy; call the wrapped command directly"
    )]
    WrapperOption { wrapper: String, option: String },
    #[error("wrappers nest too deeply")]
    TooDeep,
    #[error("executable `{name}` was not found on the command PATH {search}")]
    NotFound { name: String, search: String },
    #[error("executable `{path}` does not exist")]
    Missing { path: String },
    #[error("`{path}` is not an executable regular file")]
    NotExecutable { path: String },
    #[error(
        "relative executable `{path}` must stay inside the working directory (no `..` above it)"
    )]
    OutsideWorkingDirectory { path: String },
}

impl CommandRefusal {
    /// Stable machine code for the action outcome.
    pub fn code(&self) -> OutcomeCode {
        match self {
            Self::NotFound { .. } | Self::Missing { .. } => OutcomeCode::NotFound,
            Self::Empty | Self::OutsideWorkingDirectory { .. } => OutcomeCode::InvalidArgument,
            _ => OutcomeCode::NotPermitted,
        }
    }
}

/// The executable to `execve` and the argv to give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedCommand {
    /// Absolute path as resolved (symlinks not followed, so multi-call names keep working).
    pub program: PathBuf,
    /// The canonical target of `program` (every symlink followed).
    pub canonical: PathBuf,
    /// argv as asked (`argv[0]` kept: the path or name the caller gave).
    pub argv: Vec<String>,
}

/// Resolve `argv[0]` and apply the deny list to the whole argv, wrappers included.
/// `cwd` is where the command runs (already checked to be inside `working_directory`).
pub fn check(
    argv: &[String],
    working_directory: &Path,
    cwd: &Path,
    search: &str,
) -> Result<ResolvedCommand, CommandRefusal> {
    let first = argv.first().ok_or(CommandRefusal::Empty)?;
    let program = resolve_executable(first, working_directory, cwd, search)?;
    let canonical = crate::look::canonicalize(&program).map_err(|_| CommandRefusal::Missing {
        path: program.display().to_string(),
    })?;
    // argv[0] stays as asked: a venv's `python` finds its venv from it, rustup's proxies their
    // tool; the deny rules look at the resolved program's names, not at argv[0].
    let resolved_argv = argv.to_vec();
    check_words(
        &program,
        &canonical,
        &resolved_argv,
        working_directory,
        cwd,
        search,
        0,
    )?;
    Ok(ResolvedCommand {
        program,
        canonical,
        argv: resolved_argv,
    })
}

/// Find an executable: absolute, relative with `/` (inside the working directory), or a bare name
/// on `search` (the command PATH, see [`command_path`]).
pub fn resolve_executable(
    word: &str,
    working_directory: &Path,
    cwd: &Path,
    search: &str,
) -> Result<PathBuf, CommandRefusal> {
    if word.is_empty() {
        return Err(CommandRefusal::Empty);
    }
    let path = if word.starts_with('/') {
        PathBuf::from(word)
    } else if word.contains('/') {
        let joined = normalize(&cwd.join(word));
        let root = normalize(working_directory);
        if !joined.starts_with(&root) {
            return Err(CommandRefusal::OutsideWorkingDirectory {
                path: word.to_string(),
            });
        }
        joined
    } else {
        return search
            .split(':')
            .filter(|dir| dir.starts_with('/'))
            .map(|dir| Path::new(dir).join(word))
            .find(|candidate| is_executable_file(candidate))
            .ok_or_else(|| CommandRefusal::NotFound {
                name: word.to_string(),
                search: search.to_string(),
            });
    };
    match crate::look::metadata(&path) {
        Err(_) => Err(CommandRefusal::Missing {
            path: word.to_string(),
        }),
        Ok(_) if !is_executable_file(&path) => Err(CommandRefusal::NotExecutable {
            path: word.to_string(),
        }),
        Ok(_) => Ok(path),
    }
}

/// The PATH commands get: the owner's (`CLAUDE_TOOLS_COMMAND_PATH`, else the gateway's own `PATH`
/// at start), without relative, missing, world-writable (anyone could plant a `cargo` there) or
/// protected directories, and without repeats; [`FIXED_PATH`] when nothing is left.
pub fn command_path(owner: Option<&str>, is_protected: impl Fn(&Path) -> bool) -> String {
    use std::os::unix::fs::PermissionsExt;
    let mut kept: Vec<&str> = Vec::new();
    for dir in owner.unwrap_or("").split(':') {
        let path = Path::new(dir);
        let usable = dir.starts_with('/')
            && !kept.contains(&dir)
            && crate::look::metadata(path)
                .is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o002 == 0)
            && !is_protected(path)
            && crate::look::canonicalize(path).is_ok_and(|c| !is_protected(&c));
        if usable {
            kept.push(dir);
        }
    }
    if kept.is_empty() {
        FIXED_PATH.to_string()
    } else {
        kept.join(":")
    }
}

/// Lexical normalisation (`.` dropped, `..` pops); never touches the file system.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    crate::look::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The deny rules for one (possibly wrapped) command word and its arguments.
fn check_words(
    program: &Path,
    canonical: &Path,
    argv: &[String],
    working_directory: &Path,
    cwd: &Path,
    search: &str,
    depth: usize,
) -> Result<(), CommandRefusal> {
    if depth > MAX_WRAPPER_DEPTH {
        return Err(CommandRefusal::TooDeep);
    }
    let names = [file_name(program), file_name(canonical)];
    let args = &argv[1..];
    // Multi-call binaries: the applet is argv0 (a link named `rm`) or the first argument.
    let canonical_name = names[1].to_ascii_lowercase();
    if MULTI_CALL.contains(&canonical_name.as_str()) {
        let invoked = names[0].to_ascii_lowercase();
        if MULTI_CALL.contains(&invoked.as_str()) {
            // `busybox rm …`: the applet is the first argument (options like `--list` are harmless).
            return match args.first() {
                Some(applet) if !applet.starts_with('-') => {
                    check_wrapped(args, working_directory, cwd, search, depth, true)
                }
                _ => Ok(()),
            };
        }
        return check_name_rules(&invoked, args, working_directory, cwd, search, depth);
    }
    if canonical_name == "coreutils"
        && let Some(prog) = args
            .iter()
            .find_map(|a| a.strip_prefix("--coreutils-prog="))
    {
        {
            let rest: Vec<String> = args
                .iter()
                .filter(|a| !a.starts_with("--coreutils-prog"))
                .cloned()
                .collect();
            return check_name_rules(
                &prog.to_ascii_lowercase(),
                &rest,
                working_directory,
                cwd,
                search,
                depth,
            );
        }
    }
    for name in &names {
        check_name_rules(
            &name.to_ascii_lowercase(),
            args,
            working_directory,
            cwd,
            search,
            depth,
        )?;
    }
    Ok(())
}

/// Rules that depend on the command's name: the deny list, wrappers, `find`, `rg`, `git`.
fn check_name_rules(
    name: &str,
    args: &[String],
    working_directory: &Path,
    cwd: &Path,
    search: &str,
    depth: usize,
) -> Result<(), CommandRefusal> {
    if let Some((_, reason)) = DENIED_NAMES.iter().find(|(denied, _)| *denied == name) {
        return Err(CommandRefusal::Denied {
            name: name.to_string(),
            reason,
        });
    }
    if MODEL_CLIS.contains(&name) {
        return Err(CommandRefusal::ModelCli {
            name: name.to_string(),
        });
    }
    if let Some(package) = args
        .iter()
        .find_map(|a| MODEL_PACKAGES.iter().find(|p| a.contains(**p)))
    {
        return Err(CommandRefusal::ModelCli {
            name: (*package).to_string(),
        });
    }
    match name {
        "find" => {
            if let Some(action) = args.iter().find(|a| FIND_DENIED.contains(&a.as_str())) {
                return Err(CommandRefusal::FindAction {
                    action: action.clone(),
                });
            }
        }
        "rg" | "ripgrep" => {
            if let Some(flag) = args.iter().find(|a| a.starts_with("--pre")) {
                return Err(CommandRefusal::RipgrepPre { flag: flag.clone() });
            }
        }
        "git" => {
            if let Some(flag) = args.iter().take_while(|a| a.starts_with('-')).find(|a| {
                *a == "-c"
                    || a.starts_with("--config-env")
                    || a.starts_with("--exec-path=")
                    || (a.starts_with("-c") && a.len() > 2)
            }) {
                return Err(CommandRefusal::GitConfig { flag: flag.clone() });
            }
        }
        _ => {}
    }
    if let Some(rest) = wrapped_command(name, args)? {
        return check_wrapped(rest, working_directory, cwd, search, depth, false);
    }
    Ok(())
}

/// A wrapped command word: resolve it the way the wrapper would (fixed PATH, or a path) and check
/// it. `applet` = busybox-style: a bare name is an applet, not looked up.
fn check_wrapped(
    argv: &[String],
    working_directory: &Path,
    cwd: &Path,
    search: &str,
    depth: usize,
    applet: bool,
) -> Result<(), CommandRefusal> {
    let Some(word) = argv.first() else {
        return Ok(());
    };
    if applet && !word.contains('/') {
        return check_name_rules(
            &word.to_ascii_lowercase(),
            &argv[1..],
            working_directory,
            cwd,
            search,
            depth + 1,
        );
    }
    // Name rules first, so a denied name is refused even where it would not resolve.
    let base = word.rsplit('/').next().unwrap_or(word).to_ascii_lowercase();
    check_name_rules(&base, &argv[1..], working_directory, cwd, search, depth + 1)?;
    if MULTI_CALL.contains(&base.as_str()) {
        match argv.get(1) {
            Some(next) if !next.starts_with('-') => {
                check_wrapped(&argv[1..], working_directory, cwd, search, depth + 1, true)?;
            }
            _ => {}
        }
    }
    let resolved = if word.starts_with('/') {
        Some(PathBuf::from(word))
    } else {
        resolve_executable(word, working_directory, cwd, search).ok()
    };
    if let Some(program) = resolved
        && let Ok(canonical) = crate::look::canonicalize(&program)
    {
        {
            check_words(
                &program,
                &canonical,
                argv,
                working_directory,
                cwd,
                search,
                depth + 1,
            )?;
        }
    }
    Ok(())
}

/// Options of a wrapper: which take a separate value.
struct WrapperSpec {
    /// Short options that take a value (`-n 5` or `-n5`).
    short_with_value: &'static str,
    /// Short flags without a value.
    short_flags: &'static str,
    /// Long options that take a value (`--x=v` or `--x v`).
    long_with_value: &'static [&'static str],
    /// Long flags without a value (a `--x=v` form is accepted for optional values).
    long_flags: &'static [&'static str],
    /// `NAME=value` words before the command are skipped (`env`).
    assignments: bool,
    /// Positional words to skip before the command (`timeout`'s duration).
    positional: usize,
    /// Legacy `-N` numeric option (`nice -10`).
    numeric_option: bool,
}

fn wrapper_spec(name: &str) -> Option<WrapperSpec> {
    let none: &[&str] = &[];
    Some(match name {
        "env" => WrapperSpec {
            short_with_value: "uCS",
            short_flags: "i0v",
            long_with_value: &["unset", "chdir", "split-string"],
            long_flags: &[
                "ignore-environment",
                "null",
                "debug",
                "default-signal",
                "ignore-signal",
                "block-signal",
                "list-signal-handling",
            ],
            assignments: true,
            positional: 0,
            numeric_option: false,
        },
        "xargs" => WrapperSpec {
            short_with_value: "adEeIiLlnPs",
            short_flags: "0oprtx",
            long_with_value: &[
                "arg-file",
                "delimiter",
                "eof",
                "replace",
                "max-lines",
                "max-args",
                "max-procs",
                "max-chars",
                "process-slot-var",
            ],
            long_flags: &[
                "null",
                "open-tty",
                "interactive",
                "no-run-if-empty",
                "verbose",
                "exit",
                "show-limits",
            ],
            assignments: false,
            positional: 0,
            numeric_option: false,
        },
        "nice" => WrapperSpec {
            short_with_value: "n",
            short_flags: "",
            long_with_value: &["adjustment"],
            long_flags: none,
            assignments: false,
            positional: 0,
            numeric_option: true,
        },
        "timeout" => WrapperSpec {
            short_with_value: "ks",
            short_flags: "v",
            long_with_value: &["kill-after", "signal"],
            long_flags: &["preserve-status", "foreground", "verbose"],
            assignments: false,
            positional: 1,
            numeric_option: false,
        },
        "nohup" => WrapperSpec {
            short_with_value: "",
            short_flags: "",
            long_with_value: none,
            long_flags: none,
            assignments: false,
            positional: 0,
            numeric_option: false,
        },
        "stdbuf" => WrapperSpec {
            short_with_value: "ioe",
            short_flags: "",
            long_with_value: &["input", "output", "error"],
            long_flags: none,
            assignments: false,
            positional: 0,
            numeric_option: false,
        },
        "setsid" => WrapperSpec {
            short_with_value: "",
            short_flags: "cfw",
            long_with_value: none,
            long_flags: &["ctty", "fork", "wait"],
            assignments: false,
            positional: 0,
            numeric_option: false,
        },
        "time" => WrapperSpec {
            short_with_value: "fo",
            short_flags: "apvq",
            long_with_value: &["format", "output"],
            long_flags: &["append", "portability", "verbose", "quiet"],
            assignments: false,
            positional: 0,
            numeric_option: false,
        },
        _ => return None,
    })
}

/// For a wrapper, the argv of the command it runs (`None`: not a wrapper, or nothing wrapped).
fn wrapped_command<'a>(
    name: &str,
    args: &'a [String],
) -> Result<Option<&'a [String]>, CommandRefusal> {
    let Some(spec) = wrapper_spec(name) else {
        return Ok(None);
    };
    let refuse = |option: &str| CommandRefusal::WrapperOption {
        wrapper: name.to_string(),
        option: option.to_string(),
    };
    let mut i = 0;
    let mut positional = spec.positional;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            i += 1;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (key, has_value) = match long.split_once('=') {
                Some((key, _)) => (key, true),
                None => (long, false),
            };
            if key == "help" || key == "version" {
                return Ok(None);
            }
            if spec.long_with_value.contains(&key) {
                if name == "env" && key == "split-string" {
                    return Err(refuse(arg));
                }
                i += if has_value { 1 } else { 2 };
                continue;
            }
            if spec.long_flags.contains(&key) {
                i += 1;
                continue;
            }
            return Err(refuse(arg));
        }
        if arg.len() > 1 && arg.starts_with('-') {
            let body = &arg[1..];
            if spec.numeric_option && body.bytes().all(|b| b.is_ascii_digit()) {
                i += 1;
                continue;
            }
            // A cluster of short flags, possibly ending in one that takes a value.
            let mut consumed_next = false;
            for (pos, ch) in body.char_indices() {
                if spec.short_flags.contains(ch) {
                    continue;
                }
                if spec.short_with_value.contains(ch) {
                    if name == "env" && ch == 'S' {
                        return Err(refuse(arg));
                    }
                    consumed_next = pos + ch.len_utf8() == body.len();
                    break;
                }
                return Err(refuse(arg));
            }
            i += if consumed_next { 2 } else { 1 };
            continue;
        }
        if spec.assignments && arg.contains('=') && !arg.starts_with('=') {
            i += 1;
            continue;
        }
        if positional > 0 {
            positional -= 1;
            i += 1;
            continue;
        }
        break;
    }
    let rest = args.get(i..).unwrap_or(&[]);
    if rest.is_empty() {
        Ok(None)
    } else {
        Ok(Some(rest))
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
