//! What an `.envrc` names (red team 28 B7). direnv runs the `.envrc` itself on `cd` (refused by
//! name), and with it the files it sources (`source_env`, `source_env_if_exists`, `dotenv`,
//! `dotenv_if_exists`) and watches (`watch_file`, `watch_dir`: a change re-runs it), and through
//! nix-direnv and devenv the Nix files `use flake` / `use nix` / `use devenv` evaluate — whose
//! `shellHook` runs again at the next `cd` after a change, without a new `direnv allow`. Those
//! files are `directory_hooks` places. No shell is trusted: the directives are read as plain
//! lines of literal words; an argument the reader cannot place (`$`, quotes, globs, `~`) names
//! the whole tree.

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

/// The files (relative to `dir`, possibly with `..`) the `.envrc` in `dir` names; `Err` (why)
/// when one of its directives names files in a form not read here.
pub(super) fn named_places(dir: &Path) -> Result<Vec<PathBuf>, &'static str> {
    let Some(text) = super::read_head(&dir.join(".envrc"), 1 << 20) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // Each simple command, its words as the shell makes them (red team 36 B1: `"wat"ch_file`,
    // `watch_file 'a'"b"` are the words `watch_file` and `ab`).
    let commands = super::shell_words::commands(&text, super::shell_words::Dialect::Posix);
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
    }
    Ok(out)
}

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
mod tests {
    use super::*;

    fn names(envrc: &str) -> Result<Vec<PathBuf>, &'static str> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".envrc"), envrc).unwrap();
        named_places(dir.path())
    }

    #[test]
    fn sourced_watched_and_evaluated_files_are_named() {
        let got = names(
            "source_env_if_exists .envrc.private\ndotenv_if_exists .env.local\n\
             watch_file nix/shell.nix pkgs.nix # the shell\nuse flake . --impure\n\
             if has nix; then\n  use_nix dev/shell.nix\nfi\nuse devenv\nlayout python3\n\
             use flake nixpkgs#hello\nuse vim\n",
        )
        .unwrap();
        let want = [
            ".envrc.private",
            ".env.local",
            "nix/shell.nix",
            "pkgs.nix",
            "flake.nix",
            "flake.lock",
            "./flake.nix",
            "./flake.lock",
            "shell.nix",
            "default.nix",
            "dev/shell.nix",
            "devenv.nix",
            "devenv.yaml",
            "devenv.lock",
            "devenv.local.nix",
            "flake.nix",
            "flake.lock",
            ".vimrc.local",
        ];
        assert_eq!(got, want.map(PathBuf::from));
        assert_eq!(
            names("export FOO=1\nPATH_add bin\n").unwrap(),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn a_file_named_by_a_variable_or_pattern_names_the_whole_tree() {
        for envrc in [
            "source_env $HOME/x",
            "watch_file \"$X\"",
            "watch_file 'a'\"$(echo b)\"",
            "watch_file src/*.nix",
            "dotenv ~/.env",
            "$cmd .env.evil",
        ] {
            assert!(names(envrc).is_err(), "{envrc}");
        }
    }

    /// Red team 36 B1: directives and files spelled in quote-joined pieces are the words the
    /// shell makes.
    #[test]
    fn quote_joined_directives_and_files_are_read_whole() {
        let got = names("wat\"ch\"_file 'nix/'sh\\ell.nix\nsource_\"env\" \"a b\"\n").unwrap();
        assert_eq!(got, [PathBuf::from("nix/shell.nix"), PathBuf::from("a b")]);
    }
}
