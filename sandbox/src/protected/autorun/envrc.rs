//! What an `.envrc` names (red team 28 B7). direnv runs the `.envrc` itself on `cd` (refused by
//! name), and with it the files it sources (`source_env`, `source_env_if_exists`, `dotenv`,
//! `dotenv_if_exists`) and watches (`watch_file`, `watch_dir`: a change re-runs it), and through
//! nix-direnv and devenv the Nix files `use flake` / `use nix` / `use devenv` evaluate — whose
//! `shellHook` runs again at the next `cd` after a change, without a new `direnv allow`. Those
//! files are `directory_hooks` places. No shell is trusted: the directives are read as plain
//! lines of literal words; an argument the reader cannot place (`$`, quotes, globs, `~`) names
//! the whole tree.
//!
//! Red team 39 (finding 1, 6): direnv runs the `.envrc` as bash, so every file it makes bash
//! read or run is a place too, whatever the command — a redirection's source (`source
//! /dev/stdin < .env.local`, `done < .env.local`), a file named by a literal path anywhere,
//! in command substitutions too (`export $(grep -v '^#' .env.local | xargs)`, `eval "$(cat
//! .env.local)"`, `./scripts/env.sh`) — but the directories `PATH_add` and its kin put on a
//! path and the text `echo`/`log_status` print. A file the `.envrc` sources is read the same
//! way (its directives and names, against its directory and the `.envrc`'s), and `source_up`
//! reads the parent's `.envrc` (against its own directory).

use std::path::{Path, PathBuf};

/// What `use <kind>` evaluates by default, beside any files it is given.
const USE_DEFAULTS: [(&str, &[&str]); 5] = [
    ("flake", &["flake.nix", "flake.lock"]),
    ("nix", &["shell.nix", "default.nix"]),
    (
        "devenv",
        &[
            "devenv.nix",
            "devenv.yaml",
            "devenv.lock",
            "devenv.local.nix",
        ],
    ),
    // direnv's own `use guix` (the environment `guix shell` builds) and `use vim` (Vim sources
    // the file in every session started below the directory), red team 30 N8.
    ("guix", &["manifest.scm", "guix.scm", "channels.scm"]),
    ("vim", &[".vimrc.local"]),
];

/// Directives whose arguments are files direnv sources or watches.
const FILE_DIRECTIVES: [&str; 8] = [
    // The shell's own.
    "source",
    ".",
    "source_env",
    "source_env_if_exists",
    "dotenv",
    "dotenv_if_exists",
    "watch_file",
    "watch_dir",
];

/// Commands whose words are no files bash reads: the directories they put on a path, and text.
const NAMES_NO_FILE: [&str; 12] = [
    "PATH_add",
    "path_add",
    "MANPATH_add",
    "PATH_rm",
    "path_rm",
    "echo",
    "printf",
    "log_status",
    "log_error",
    "has",
    "layout",
    "export",
];

/// How deep sourced files are followed (past it: the whole tree).
const MAX_DEPTH: usize = 4;

/// The files (relative to `dir`, possibly with `..`) the `.envrc` in `dir` names; `Err` (why)
/// when one of its directives names files in a form not read here.
pub(super) fn named_places(dir: &Path) -> Result<Vec<PathBuf>, &'static str> {
    let mut out = Vec::new();
    named_by_file(&dir.join(".envrc"), &[dir.to_path_buf()], dir, 0, &mut out)?;
    let mut seen = std::collections::HashSet::new();
    out.retain(|name| seen.insert(name.clone()));
    Ok(out)
}

/// What `file` names, relative to `dir` (the `.envrc`'s), each of its names read against every
/// one of `bases` (a sourced file's relative names: bash's working directory, or direnv's
/// `source_env` changing into the file's own); files it sources read in turn.
fn named_by_file(
    file: &Path,
    bases: &[PathBuf],
    dir: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
) -> Result<(), &'static str> {
    let Some(text) = super::read_head(file, 1 << 20) else {
        return Ok(());
    };
    let relative = |name: &Path| -> Vec<PathBuf> {
        bases
            .iter()
            .map(|base| match base.strip_prefix(dir) {
                Ok(rel) => rel.join(name),
                Err(_) => base.join(name),
            })
            .collect()
    };
    let (directives, sourced) = directive_names(&text)?;
    let read = read_names(&text, bases);
    let mut followed = Vec::new();
    for name in &directives {
        out.extend(relative(name));
    }
    for name in sourced.iter().chain(&read) {
        followed.extend(relative(name));
    }
    out.extend(read.iter().flat_map(|name| relative(name)));
    // The files it sources or reads (not those only watched), and the parent's `.envrc`
    // (`source_up`).
    let mut next: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for name in &followed {
        let path = dir.join(name);
        if crate::look::is_file(&path) && path != file {
            let own = path.parent().map(Path::to_path_buf).unwrap_or_default();
            next.push((path, vec![bases[0].clone(), own]));
        }
    }
    if text.contains("source_up") {
        let from = file.parent().and_then(Path::parent);
        if let Some(parent) = from.and_then(|d| {
            d.ancestors()
                .find(|a| crate::look::is_file(a.join(".envrc")))
        }) {
            next.push((parent.join(".envrc"), vec![parent.to_path_buf()]));
        }
    }
    if next.is_empty() {
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err("its .envrc sources files deeper than the gateway reads");
    }
    for (path, bases) in next {
        named_by_file(&path, &bases, dir, depth + 1, out)?;
    }
    Ok(())
}

/// Every file bash reads or runs for the text's commands (a redirection's source, a literal
/// path, in command substitutions too), but what [`NAMES_NO_FILE`] commands are given: by a
/// path (a `/` in it), a dot-name (`.env.local`), or the name of a file in one of `bases`.
fn read_names(text: &str, bases: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for words in super::shell_words::commands_reading(text, super::shell_words::Dialect::Posix, 4) {
        if words
            .first()
            .and_then(super::shell_words::Word::literal)
            .is_some_and(|first| NAMES_NO_FILE.contains(&first.as_str()))
        {
            continue;
        }
        for word in &words {
            let Some(name) = literal_with_pwd(word) else {
                continue;
            };
            let path_like = name.contains('/')
                || (name.starts_with('.') && name.len() > 1 && name != "..")
                || bases
                    .iter()
                    .any(|base| crate::look::is_file(base.join(&name)));
            let no_file = name.starts_with('-') || name.contains("://") || name.contains('=');
            if path_like && !no_file {
                out.push(PathBuf::from(name));
            }
        }
    }
    out
}

/// A word's text with `$PWD` (bash's working directory, the `.envrc`'s) as `.`; `None` with
/// another expansion in it.
fn literal_with_pwd(word: &super::shell_words::Word) -> Option<String> {
    use super::shell_words::Piece;
    let mut out = String::new();
    for piece in &word.pieces {
        match piece {
            Piece::Text { text, .. } => out.push_str(text),
            Piece::Var(name) if name == "PWD" => out.push('.'),
            _ => return None,
        }
    }
    Some(out)
}

/// The files the text's directives source, watch or evaluate, and of those the ones sourced.
type Named = (Vec<PathBuf>, Vec<PathBuf>);

fn directive_names(text: &str) -> Result<Named, &'static str> {
    let mut out = Vec::new();
    let mut sourced = Vec::new();
    // Each simple command, its words as the shell makes them (red team 36 B1: `"wat"ch_file`,
    // `watch_file 'a'"b"` are the words `watch_file` and `ab`).
    let commands = super::shell_words::commands(text, super::shell_words::Dialect::Posix);
    for words in commands {
        let Some((first, args)) = words.split_first() else {
            continue;
        };
        let Some(directive) = first.literal() else {
            // A computed command (`$cmd x`, `"$(which source_env)" x`): any directive.
            if args.is_empty() {
                continue;
            }
            return Err("its .envrc runs a command named by a variable or a substitution");
        };
        let args: Vec<String> =
            args.iter()
                .map(literal)
                .collect::<Result<_, _>>()
                .or_else(|why| {
                    if is_directive(&directive) {
                        Err(why)
                    } else {
                        Ok(Vec::new())
                    }
                })?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let args = args.as_slice();
        let directive = directive.as_str();
        let (files, defaults): (&[&str], &[&str]) = match directive {
            d if FILE_DIRECTIVES.contains(&d) => (args, &[]),
            "use" | "use_flake" | "use_nix" | "use_devenv" | "use_guix" | "use_vim" => {
                let (kind, rest) = match directive.strip_prefix("use_") {
                    Some(kind) => (kind, args),
                    None => match args.split_first() {
                        Some((kind, rest)) => (*kind, rest),
                        None => continue,
                    },
                };
                let Some((_, defaults)) = USE_DEFAULTS.iter().find(|(k, _)| *k == kind) else {
                    continue;
                };
                out.extend(defaults.iter().map(PathBuf::from));
                for word in rest.iter().filter(|w| !w.starts_with('-')) {
                    if kind == "flake" {
                        // A flake reference: a directory (`.`, `./nix`, `path:./nix#shell`)
                        // whose flake.nix and flake.lock are evaluated; `nixpkgs#hello`,
                        // `github:o/r` name none of the tree.
                        let reference = word.split('#').next().unwrap_or("");
                        let dir = reference.strip_prefix("path:").unwrap_or(reference);
                        if dir.starts_with('.') || dir.starts_with('/') {
                            let dir = PathBuf::from(dir);
                            out.push(dir.join("flake.nix"));
                            out.push(dir.join("flake.lock"));
                        }
                    } else if word.ends_with(".nix") || word.contains('/') {
                        out.push(PathBuf::from(word));
                    }
                }
                continue;
            }
            _ => continue,
        };
        out.extend(defaults.iter().map(PathBuf::from));
        out.extend(files.iter().map(PathBuf::from));
        if SOURCING.contains(&directive) {
            sourced.extend(files.iter().map(PathBuf::from));
        }
    }
    Ok((out, sourced))
}

/// Directives whose files bash reads as shell text.
const SOURCING: [&str; 4] = ["source", ".", "source_env", "source_env_if_exists"];

/// A literal argument, or why it cannot be placed (a variable, a substitution, a pattern, `~`).
fn literal(word: &super::shell_words::Word) -> Result<String, &'static str> {
    match word.literal() {
        Some(text) if !word.is_pattern_or_tilde() => Ok(text),
        _ => Err("its .envrc names files by a variable, a pattern or a substitution"),
    }
}

/// Whether `directive` is one whose arguments name files (see [`named_places`]).
fn is_directive(directive: &str) -> bool {
    FILE_DIRECTIVES.contains(&directive) || directive == "use" || directive.starts_with("use_")
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
