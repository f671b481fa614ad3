//! Unit tests of what an `.envrc` names.

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

/// Red team 39 finding 1: a file bash reads while direnv runs the `.envrc` — by a
/// redirection, a command substitution, a literal path anywhere — is named, whatever
/// command reads it; directories put on PATH and printed text are not.
#[test]
fn files_the_envrc_makes_bash_read_or_run_are_named() {
    for envrc in [
        "export $(grep -v '^#' .env.local | xargs)",
        "source /dev/stdin < .env.local",
        "eval \"$(cat .env.local)\"",
        ". <(sed 's/^/export /' .env.local)",
        "export $(xargs < .env.local)",
        "set -a; eval \"$(< .env.local)\"",
        "source <(grep -v '^#' .env.local)",
        "while IFS= read -r line; do export \"$line\"; done < .env.local",
        "[ -f \"$PWD/.env.local\" ] && cat \"$PWD/.env.local\" > /dev/null",
    ] {
        let got = names(envrc).unwrap();
        assert!(
            got.iter()
                .any(|p| p == Path::new(".env.local") || p == Path::new("./.env.local")),
            "{envrc}: {got:?}"
        );
    }
    let got = names("eval \"$(./bin/env-setup --shell)\"\npython3 tools/env.py\n").unwrap();
    assert!(got.contains(&PathBuf::from("./bin/env-setup")), "{got:?}");
    assert!(got.contains(&PathBuf::from("tools/env.py")), "{got:?}");
    let got = names("PATH_add node_modules/.bin\necho see docs/setup.md\nlayout python3\n");
    assert_eq!(got.unwrap(), Vec::<PathBuf>::new());
}

/// Red team 39 finding 6: what a sourced file sources or reads is named (against its own
/// directory and the `.envrc`'s), and `source_up` reads the parent's `.envrc`.
#[test]
fn what_sourced_files_and_the_parent_envrc_name_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::write(
        root.join(".envrc"),
        "source_env scripts/env.sh\nsource_up\n",
    )
    .unwrap();
    std::fs::write(
        root.join("scripts/env.sh"),
        "source_env_if_exists env.local.sh\n[ -f scripts/local.sh ] && . scripts/local.sh\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".envrc"), "source_env proj/shared.sh\n").unwrap();
    let got = named_places(&root).unwrap();
    for want in [
        "scripts/env.sh",
        "scripts/env.local.sh",
        "env.local.sh",
        "scripts/local.sh",
    ] {
        assert!(got.contains(&PathBuf::from(want)), "{want}: {got:?}");
    }
    assert!(
        got.contains(&dir.path().join("proj/shared.sh")),
        "the parent's .envrc: {got:?}"
    );
}

/// Red team 36 B1: directives and files spelled in quote-joined pieces are the words the
/// shell makes.
#[test]
fn quote_joined_directives_and_files_are_read_whole() {
    let got = names("wat\"ch\"_file 'nix/'sh\\ell.nix\nsource_\"env\" \"a b\"\n").unwrap();
    assert_eq!(got, [PathBuf::from("nix/shell.nix"), PathBuf::from("a b")]);
}
