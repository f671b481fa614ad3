//! Unit tests of the owner's variables read from `.envrc`, `.env` and shell start-up files.

// Tests make their fixtures directly.
#![allow(clippy::disallowed_methods)]

use super::*;

/// What `text` (a `.envrc` in `dir`, or a start-up file with `None`) assigns.
pub(super) fn reader(text: &str, dir: Option<&Path>, dialect: Dialect) -> Reader {
    let mut reader = Reader::default();
    for words in shell_words::commands(text, dialect) {
        reader.command(&words, At { dir });
    }
    reader
}

pub(super) fn read(text: &str, dir: Option<&Path>) -> Vec<(&'static str, String)> {
    values(reader(text, dir, Dialect::Posix))
}

/// Every entry of every value `env` assigns the search list `name`.
pub(super) fn entries(env: &[(&'static str, OsString)], name: &str) -> Vec<String> {
    env.iter()
        .filter(|(k, _)| *k == name)
        .flat_map(|(_, v)| {
            let v = v.to_string_lossy().into_owned();
            v.split(':').map(str::to_string).collect::<Vec<_>>()
        })
        .collect()
}

fn values(reader: Reader) -> Vec<(&'static str, String)> {
    reader
        .out
        .into_iter()
        .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
        .collect()
}

#[test]
fn envrc_and_dotenv_values_are_read_against_the_file_s_directory() {
    let dir = Path::new("/w/proj");
    let got = read(
        "export PYTHONPATH=src\nexport PYTHONPATH=\"$PWD/lib:$PYTHONPATH\"\n\
         PYTHONPATH=${PWD}/a:$(pwd)/b # note\npath_add PERL5LIB perl\nexport PATH=$PWD/bin\n\
         export PYTHONPATH=\"/opt/$(uname -m)/z:tools\"\nexport NODE_OPTIONS=\"--require ./h.js\"\n\
         layout python3\nexport PERL5LIB='$X/gen'\n",
        Some(dir),
    );
    let want = [
        ("PYTHONPATH", "/w/proj/src"),
        // `$PYTHONPATH` is the value assigned before.
        ("PYTHONPATH", "/w/proj/lib:/w/proj/src"),
        ("PYTHONPATH", "/w/proj/a:/w/proj/b"),
        ("PERL5LIB", "/w/proj/perl"),
        ("PATH", "/w/proj/bin"),
        ("PYTHONPATH", "/opt:/w/proj/tools"),
        ("NODE_OPTIONS", "--require ./h.js"),
        // Single-quoted: a literal `$` in a directory's name.
        ("PERL5LIB", "/w/proj/$X/gen"),
    ];
    assert_eq!(got, want.map(|(k, v)| (k, v.to_string())));
}

#[test]
fn shell_start_up_files_keep_relative_entries_relative_and_expand_home() {
    let home = std::env::var("HOME").unwrap();
    let got = read(
        "export PYTHONPATH=~/lib/py:src\nset -gx PERL5LIB ~/perl\nset -x RUBYLIB rb\n\
         if [ -d x ]; then\n  export GIT_EXEC_PATH=$HOME/gx\nfi\n",
        None,
    );
    let want = [
        ("PYTHONPATH", format!("{home}/lib/py:src")),
        ("PERL5LIB", format!("{home}/perl")),
        ("RUBYLIB", "rb".to_string()),
        ("GIT_EXEC_PATH", format!("{home}/gx")),
    ];
    assert_eq!(got, want);
}

/// Red team 33 `pypath2 envrc`: a root's `.envrc` exporting `PYTHONPATH=src` (the gateway's
/// environment has none) makes `src/` an import root; the nearest `.envrc` up to the home is
/// read, and the root's `.env`.
#[test]
fn a_root_s_envrc_or_dotenv_puts_its_dirs_on_the_import_path() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    let root = home.join("proj/app");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(home.join("proj/.envrc"), "export PYTHONPATH=$PWD/app/src\n").unwrap();
    std::fs::write(root.join(".env"), "PERL5LIB=perl\n").unwrap();
    let got = of_root(&root, Some(&home));
    let want = [
        ("PYTHONPATH", root.join("src")),
        ("PERL5LIB", root.join("perl")),
    ];
    let got: Vec<_> = got
        .env
        .into_iter()
        .map(|(k, v)| (k, PathBuf::from(v)))
        .collect();
    assert_eq!(got, want);
    let account = super::super::gitconfig::Account::default();
    let places = super::super::gitconfig::places_with(&root, &[], &account);
    let at: Vec<_> = places.iter().map(|p| p.at.clone()).collect();
    assert!(at.contains(&PathBuf::from("src/encodings")), "{places:?}");
    assert!(at.contains(&PathBuf::from("perl/strict.pm")), "{places:?}");
    assert!(!at.iter().any(|p| p.starts_with("src/mypkg")), "{places:?}");
}

#[test]
fn command_values_expand_home_and_a_reference_to_another_variable_reads_its_value() {
    let home = std::env::var("HOME").unwrap();
    let got = read(
        "export EDITOR=\"$HOME/bin/ed -w\"\nexport VISUAL=$EDITOR\nexport GIT_PAGER='~/bin/p'\n\
         export PERL5OPT=\"-I$HOME/perl -MFoo\"\n",
        None,
    );
    let want = [
        ("EDITOR", format!("{home}/bin/ed -w")),
        ("VISUAL", format!("{home}/bin/ed -w")),
        ("GIT_PAGER", format!("{home}/bin/p")),
        ("PERL5OPT", format!("-I{home}/perl -MFoo")),
    ];
    assert_eq!(got, want);
}

/// Red team 35 N3: the command-like variables added are read as command lines.
#[test]
fn new_command_like_variables_expand_home_as_command_lines() {
    let home = std::env::var("HOME").unwrap();
    let got = read(
        "export LESSOPEN=\"|sh ~/root/lessfilter.sh %s\"\nexport VIMINIT=\"source ~/root/vimrc\"\n\
         export BROWSER=~/root/bin/browser\nexport LUA_INIT=@$HOME/i.lua\n\
         export NPM_CONFIG_USERCONFIG=~/root/npmrc\n",
        None,
    );
    let want = [
        ("LESSOPEN", "|sh ~/root/lessfilter.sh %s".to_string()),
        ("VIMINIT", "source ~/root/vimrc".to_string()),
        ("BROWSER", format!("{home}/root/bin/browser")),
        ("LUA_INIT", format!("@{home}/i.lua")),
        ("NPM_CONFIG_USERCONFIG", format!("{home}/root/npmrc")),
    ];
    assert_eq!(got, want);
}

/// Red team 35 N4: git's config variables set in an `.envrc` or a start-up file are read into
/// config entries like the gateway's own, each spelling; the hooks dir they name is a place.
#[test]
fn git_s_config_variables_in_envrc_or_start_up_files_are_read() {
    for (file, text) in [
        (
            ".envrc",
            "export GIT_CONFIG_COUNT=1\nexport GIT_CONFIG_KEY_0=core.hooksPath\n\
             export GIT_CONFIG_VALUE_0=\"$HOME/proj/hk\"\n",
        ),
        (
            ".envrc",
            "export GIT_CONFIG_PARAMETERS=\"'core.hooksPath'='$HOME/proj/hk'\"\n",
        ),
        (
            ".env",
            "GIT_CONFIG_PARAMETERS=\"'core.hooksPath=$HOME/proj/hk'\"\n",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(tmp.path()).unwrap();
        let root = home.join("proj");
        std::fs::create_dir_all(&root).unwrap();
        let text = text.replace("$HOME", home.to_str().unwrap());
        std::fs::write(root.join(file), &text).unwrap();
        let got = of_root(&root, Some(&home));
        assert!(got.env.is_empty(), "{text}: {:?}", got.env);
        let entry = got.git_entries.first().expect("an entry");
        assert_eq!(
            (entry.section.as_str(), entry.key.as_str()),
            ("core", "hookspath")
        );
        let account = super::super::gitconfig::Account::default();
        let places = super::super::gitconfig::places_with(&root, &[], &account);
        assert!(
            places.iter().any(|p| p.at == Path::new("hk")),
            "{text}: {places:?}"
        );
    }
    let got = Assigned::new(reader(
        "export GIT_CONFIG_COUNT=2\nGIT_CONFIG_KEY_0=core.fsmonitor\n\
         GIT_CONFIG_VALUE_0=\\~/x\nexport GIT_CONFIG_KEY_1='alias.st'\nGIT_CONFIG_VALUE_1='!sh y'\n",
        None,
        Dialect::Posix,
    ))
    .git_entries;
    let keys: Vec<_> = got
        .iter()
        .map(|e| (e.key.clone(), e.value.clone()))
        .collect();
    assert_eq!(
        keys,
        [
            ("fsmonitor".to_string(), Some("~/x".to_string())),
            ("st".to_string(), Some("!sh y".to_string())),
        ]
    );
}

/// The whole-diff review's shapes, each read as nothing before: several assignments in one
/// `export`, an assignment after `&&`, `declare -gx`/`typeset -x`, a tab after `export`, fish's
/// list, `;`-joined commands, a backslash continuation, an assignment before a command.
#[test]
fn assignments_in_every_simple_command_are_read() {
    let dir = Path::new("/w/p");
    let got = read(
        "export A=1 PYTHONPATH=/x1\n[ -d x ] && export PYTHONPATH=/x2\ndeclare -gx PERL5LIB=/x3\n\
         typeset -x RUBYLIB=/x4\nexport\tPYTHONPATH=/x5\nset -gx PYTHONPATH /x6 /x7\n\
         export PYTHONPATH=/x8; cd ..\nexport PYTHONPATH=/x9:\\\n/x10\n\
         PYTHONPATH=/x11 python3 -c pass\nif true; then export PYTHONPATH=/x12; fi\n\
         echo 'PYTHONPATH=/not' # PYTHONPATH=/not\n",
        Some(dir),
    );
    let want = [
        ("PYTHONPATH", "/x1"),
        ("PYTHONPATH", "/x2"),
        ("PERL5LIB", "/x3"),
        ("RUBYLIB", "/x4"),
        ("PYTHONPATH", "/x5"),
        ("PYTHONPATH", "/x6:/x7"),
        ("PYTHONPATH", "/x8"),
        ("PYTHONPATH", "/x9:/x10"),
        ("PYTHONPATH", "/x11"),
        ("PYTHONPATH", "/x12"),
    ];
    assert_eq!(got, want.map(|(k, v)| (k, v.to_string())));
}

/// Files a `.envrc` or a shell start-up file sources are read too (direnv's `source_env` and
/// `dotenv` against the `.envrc`'s directory, the shell's `source`/`.` against the home), once
/// each, a cycle ending.
#[test]
fn sourced_files_are_read_against_their_base() {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    let root = top.join("proj");
    std::fs::create_dir_all(root.join("env")).unwrap();
    std::fs::write(
        root.join(".envrc"),
        "source_env env/dev.sh\ndotenv env/local.env\n",
    )
    .unwrap();
    std::fs::write(
        root.join("env/dev.sh"),
        "export PYTHONPATH=$PWD/lib\nsource_env ../.envrc\n",
    )
    .unwrap();
    std::fs::write(root.join("env/local.env"), "PERL5LIB=perl\n").unwrap();
    let got: Vec<(&str, String)> = of_root(&root, Some(&top))
        .env
        .into_iter()
        .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
        .collect();
    let env = root.join("env");
    assert_eq!(
        got,
        [
            ("PYTHONPATH", env.join("lib").display().to_string()),
            ("PERL5LIB", env.join("perl").display().to_string()),
        ]
    );
    let home = top.join("home");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    std::fs::write(home.join(".bashrc"), ". .config/env.sh\n").unwrap();
    std::fs::write(
        home.join(".config/env.sh"),
        "export RUBYLIB=/r\nsource ~/.bashrc\n",
    )
    .unwrap();
    // (`~/.bashrc` is the real home's, which may set `PATH`.)
    let shell: Vec<_> = of_shell(&home)
        .env
        .into_iter()
        .filter(|(name, _)| *name != "PATH")
        .collect();
    assert_eq!(shell, [("RUBYLIB", std::ffi::OsString::from("/r"))]);
}

/// Red team 36 B1: words the shell joins from quoted and escaped pieces are read whole, so the
/// directory or hooks path they name is the one the shell makes.
#[test]
fn quote_joined_values_name_what_the_shell_makes() {
    let home = std::env::var("HOME").unwrap();
    let dir = Path::new("/w/p");
    let got = read(
        "export PERL5OPT='-Mlib='\"$HOME\"'/evil'\nexport PERL5LIB=pl\"i\"b:e\\vil\n\
         export RUBYOPT=$'-r\\x2e/x.rb'\n",
        Some(dir),
    );
    let want = [
        ("PERL5OPT", format!("-Mlib={home}/evil")),
        ("PERL5LIB", "/w/p/plib:/w/p/evil".to_string()),
        ("RUBYOPT", "-r./x.rb".to_string()),
    ];
    assert_eq!(got, want);
    let git = Assigned::new(reader(
        "export GIT_CONFIG_PARAMETERS=''\\''core.hooksPath'\\''='\\''/w/p/hk'\\'''\n",
        Some(dir),
        Dialect::Posix,
    ))
    .git_entries;
    assert_eq!(git.len(), 1, "{git:?}");
    assert_eq!(
        (git[0].key.as_str(), git[0].value.as_deref()),
        ("hookspath", Some("/w/p/hk"))
    );
}

/// Red team 36 B2: fish exports a list joined by `:` only for a name ending in `PATH`, else by a
/// space (`PERL5OPT` is options); a list variable of another kind is read for each element too.
#[test]
fn fish_lists_are_joined_as_fish_exports_them() {
    let got = values(reader(
        "set -gx PERL5OPT -w -Mlib=/d\nset -gx PERL5LIB /a /b\nset -x LD_LIBRARY_PATH /l /m\n",
        None,
        Dialect::Fish,
    ));
    let want = [
        ("PERL5OPT", "-w"),
        ("PERL5OPT", "-Mlib=/d"),
        ("PERL5OPT", "-w -Mlib=/d"),
        ("PERL5LIB", "/a"),
        ("PERL5LIB", "/b"),
        ("PERL5LIB", "/a /b"),
        ("LD_LIBRARY_PATH", "/l:/m"),
    ];
    assert_eq!(got, want.map(|(k, v)| (k, v.to_string())));
    let (_, dirs) = owner_env::option_names(owner_env::Lang::Perl, std::ffi::OsStr::new(&got[2].1));
    assert_eq!(dirs, ["/d"]);
}

/// Red team 36 B3 and values built on other variables: direnv's `expand_path`, `$(pwd)`, a
/// variable assigned before (in any file read), local::lib's `${PERL5LIB:+:${PERL5LIB}}`.
#[test]
fn values_built_on_expand_path_and_other_variables_are_expanded() {
    let home = std::env::var("HOME").unwrap();
    let dir = Path::new("/w/p");
    let got = read(
        "export PYTHONPATH=$(expand_path lib):$PYTHONPATH\n\
         export PERL5LIB=\"$(expand_path ../x /w/p/sub)\"\nLIBS=$PWD/l\n\
         export RUBYLIB=${LIBS}/rb\nexport PYTHONPATH=${UNSET_IN_TEST_X:-$LIBS/d}\n\
         PERL5LIB=\"$HOME/perl5/lib/perl5${PERL5LIB:+:${PERL5LIB}}\"; export PERL5LIB;\n",
        Some(dir),
    );
    let want = [
        ("PYTHONPATH", "/w/p/lib".to_string()),
        ("PERL5LIB", "/w/p/sub/../x".to_string()),
        ("RUBYLIB", "/w/p/l/rb".to_string()),
        ("PYTHONPATH", "/w/p/l/d".to_string()),
        ("PERL5LIB", format!("{home}/perl5/lib/perl5:/w/p/sub/../x")),
    ];
    assert_eq!(got, want);
}

/// What is not read fails closed: an entry keeps its literal directory part, a value with none
/// is unreadable (the tree refused, naming the variable); a load or switch built on it too; a
/// command's program built on it reads as computed.
#[test]
fn values_not_read_here_fail_closed() {
    let dir = Path::new("/w/p");
    let r = reader(
        "export PYTHONPATH=$(brew --prefix)/lib\nexport PERL5LIB=/opt/$(uname -m)/lib:$1\n\
         export ZDOTDIR=\"$UNSET_IN_TEST_X\"\nexport NODE_OPTIONS=\"--require $UNSET_IN_TEST_X\"\n\
         export NODE_OPTIONS=\"--max-old-space-size=$UNSET_IN_TEST_X\"\n\
         export PERL5OPT=\"-$UNSET_IN_TEST_X\"\nexport LUA_INIT=\"$UNSET_IN_TEST_X\"\n\
         export EDITOR=\"$(pick-editor) -f\"\nexport ENV=$STAGE_IN_TEST_X\n",
        Some(dir),
        Dialect::Posix,
    );
    let names: Vec<&str> = r.unreadable.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "PYTHONPATH",
            "PERL5LIB",
            "ZDOTDIR",
            "NODE_OPTIONS",
            "PERL5OPT",
            "LUA_INIT"
        ]
    );
    let got = values(r);
    let want = [
        ("PERL5LIB", "/opt"),
        ("NODE_OPTIONS", "--max-old-space-size=${NGW_UNREAD}"),
        ("EDITOR", "${NGW_UNREAD} -f"),
    ];
    // A program found on PATH reads as its bare name; one named by a path does not.
    let on_path = read(
        "export EDITOR=\"$(which nvim) -f\"\nexport VISUAL=$(command -v code)\n\
         export PAGER=$(which ./x)\n",
        Some(dir),
    );
    let found = [
        ("EDITOR", "nvim -f"),
        ("VISUAL", "code"),
        ("PAGER", "${NGW_UNREAD}"),
    ];
    assert_eq!(on_path, found.map(|(k, v)| (k, v.to_string())));
    assert_eq!(got, want.map(|(k, v)| (k, v.to_string())));
    // A git entry built on it, and the whole tree refused for each.
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(
        root.join(".envrc"),
        "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath\n\
         export GIT_CONFIG_VALUE_0=\"$(brew --prefix)/hk\"\n",
    )
    .unwrap();
    let got = of_root(&root, None);
    assert!(got.git_entries.is_empty(), "{:?}", got.git_entries);
    assert_eq!(got.unreadable.len(), 1, "{:?}", got.unreadable);
    let account = super::super::gitconfig::Account::default();
    let places = super::super::gitconfig::places_with(&root, &[], &account);
    let whole = places
        .iter()
        .find(|p| p.at.as_os_str().is_empty() || p.at == Path::new("."))
        .expect("the whole tree");
    assert!(
        whole.why.contains("GIT_CONFIG (core.hookspath)"),
        "{}",
        whole.why
    );
    assert!(
        whole.why.contains("every write there is refused"),
        "{}",
        whole.why
    );
}

/// PERL5OPT and RUBYOPT words without a dash and bundled switches load what they name.
#[test]
fn dashless_and_bundled_switches_are_read() {
    use owner_env::{Lang, option_names};
    let names = |lang, value: &str| option_names(lang, std::ffi::OsStr::new(value));
    assert_eq!(
        names(Lang::Perl, "MFoo Mlib=/d -wMBar -wIinc w -Wmstrict"),
        (
            vec![
                "Foo".to_string(),
                "lib".into(),
                "Bar".into(),
                "strict".into()
            ],
            vec!["/d".to_string(), "inc".into()]
        )
    );
    assert_eq!(
        names(
            Lang::Ruby,
            "rubygems -wrx -W2ry -W:no-deprecated -I/i --enable=jit"
        ),
        (
            vec!["ubygems".to_string(), "x".into(), "y".into()],
            vec!["/i".to_string()]
        )
    );
}

/// Every value of `name` in what `text` (an `.envrc` in `/w/p`, or a start-up file) assigns.
pub(super) fn values_of(text: &str, dir: Option<&Path>, name: &str) -> Vec<String> {
    read(text, dir)
        .into_iter()
        .filter(|(var, _)| *var == name)
        .map(|(_, value)| value)
        .collect()
}

/// Red team 39 finding 4: a helper variable holds every value the text assigns it (a branch,
/// a function never called, a here-doc): the exported variable is read with each.
#[test]
fn every_value_a_helper_variable_may_hold_is_read() {
    let dir = Path::new("/w/p");
    for text in [
        "LIB=$PWD/lib\nif [ -n \"$CI\" ]; then LIB=/opt/ci/lib; fi\nexport PERL5LIB=$LIB\n",
        "LIB=$PWD/lib\n: <<'OLD'\nLIB=/opt/ci/lib\nOLD\nexport PERL5LIB=$LIB\n",
        "LIB=$PWD/lib\nsetlib() { LIB=/opt/ci/lib; }\nexport PERL5LIB=$LIB\n",
    ] {
        let got = values_of(text, Some(dir), "PERL5LIB");
        assert!(got.contains(&"/w/p/lib".to_string()), "{text}: {got:?}");
        assert!(got.contains(&"/opt/ci/lib".to_string()), "{text}: {got:?}");
    }
}

/// Red team 39 finding 4: `export "NAME=…"`, `NAME+=…`, `${NAME:=…}`, `~name` and a CRLF line
/// are read as the shell reads them.
#[test]
fn appends_defaults_quoted_builtins_and_other_homes_are_read() {
    let dir = Path::new("/w/p");
    let home = std::env::var("HOME").unwrap();
    let root_home = crate::protected::instances::named_account_home("root").unwrap();
    for (text, name, want) in [
        (
            "export \"PYTHONPATH=$HOME/a/src\"",
            "PYTHONPATH",
            format!("{home}/a/src"),
        ),
        (
            "export 'PERL5LIB='\"$PWD/lib\"",
            "PERL5LIB",
            "/w/p/lib".to_string(),
        ),
        (
            "export PYTHONPATH\nPYTHONPATH+=\":$HOME/c4/src\"",
            "PYTHONPATH",
            format!("{home}/c4/src"),
        ),
        (
            "export PERL5LIB=/a\nexport PERL5LIB+=\":$PWD/lib\"",
            "PERL5LIB",
            "/a:/w/p/lib".to_string(),
        ),
        (
            ": \"${PYTHONPATH:=$HOME/c25/src}\"\nexport PYTHONPATH",
            "PYTHONPATH",
            format!("{home}/c25/src"),
        ),
        (
            "export PYTHONPATH=~root/c27/src",
            "PYTHONPATH",
            format!("{root_home}/c27/src"),
        ),
        (
            "export PERL5LIB=$PWD/lib\r\n",
            "PERL5LIB",
            "/w/p/lib\r".to_string(),
        ),
        (
            "alias py='PYTHONPATH=$HOME/c20/src python3'",
            "PYTHONPATH",
            format!("{home}/c20/src"),
        ),
        (
            "eval 'export PERL5LIB=$PWD/e'",
            "PERL5LIB",
            "/w/p/e".to_string(),
        ),
        (
            "cd backend\nexport PERL5LIB=$PWD/lib",
            "PERL5LIB",
            "/w/p/backend/lib".to_string(),
        ),
    ] {
        let got = values_of(text, Some(dir), name);
        assert!(
            got.iter()
                .any(|v| v.split(':').any(|e| e == want) || *v == want),
            "{text}: {got:?}"
        );
    }
    // A quoted word before a command is a command, not an assignment.
    assert!(values_of("\"PYTHONPATH=/x\" true", Some(dir), "PYTHONPATH").is_empty());
}

/// An entry built on what is not read protects everything below its literal directory part
/// (red team 39 #5), and a file sourced by a relative path from a start-up file is named in
/// every tree (#8: `cd`/`chpwd` functions, `. "$PWD/.localrc"`).
#[test]
fn unread_tails_protect_below_and_relative_sources_are_every_tree_s() {
    let dir = Path::new("/w/p");
    let reader = reader(
        "export PYTHONPATH=$PWD/build/$(uname -m)\n",
        Some(dir),
        Dialect::Posix,
    );
    assert_eq!(reader.below, [("PYTHONPATH", PathBuf::from("/w/p/build"))]);
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(
        home.join(".bashrc"),
        "cd() { builtin cd \"$@\" || return; if [ -f .dev-env ]; then . ./.dev-env; fi; }\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".zshrc"),
        "chpwd() { [[ -f .project-env ]] && source .project-env }\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".profile"),
        ". \"$PWD/.localrc\"\nprecmd() { bash .autorun2.sh; python3 .hook3.py; }\n",
    )
    .unwrap();
    let sources = of_shell(&home).relative_sources;
    for want in [
        "./.dev-env",
        ".project-env",
        "./.localrc",
        ".autorun2.sh",
        ".hook3.py",
    ] {
        assert!(
            sources.contains(&PathBuf::from(want)),
            "{want}: {sources:?}"
        );
    }
}

/// Red team 39 finding 3: start-up files the shells read beyond the usual ones.
#[test]
fn more_start_up_files_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    let write = |rel: &str, text: &str| {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".bashrc",
        "for rc in ~/.bashrc.d/*; do [ -f \"$rc\" ] && . \"$rc\"; done\n"
            .replace('~', home.to_str().unwrap())
            .as_str(),
    );
    write(".bashrc.d/dev.sh", "export PYTHONPATH=/c6\n");
    write(".bash_login", "export PERL5LIB=/c35\n");
    write(
        ".zshenv",
        &format!("export ZDOTDIR={}/.config/zsh\n", home.display()),
    );
    write(".config/zsh/.zshrc", "export RUBYLIB=/c34\n");
    write(".config/fish/conf.d/py.fish", "set -gx PYTHONPATH /c30\n");
    write(
        ".config/fish/fish_variables",
        "# This file contains fish universal variable definitions.\nSETUVAR --export \
         PERL5OPT:\\x2dMlib\\x3d\\x2fc29\nSETUVAR fish_greeting:hi\n",
    );
    write(
        ".config/environment.d/50-py.conf",
        "NODE_OPTIONS=--require=/c33.js\n",
    );
    write(
        ".config/fish/config.fish",
        "set -gx PYTHONPATH /opt/none\nset -a PYTHONPATH /c31\n",
    );
    let env: Vec<(&str, String)> = of_shell(&home)
        .env
        .into_iter()
        .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
        .collect();
    for (name, want) in [
        ("PYTHONPATH", "/c6"),
        ("PERL5LIB", "/c35"),
        ("RUBYLIB", "/c34"),
        ("PYTHONPATH", "/c30"),
        ("PERL5OPT", "-Mlib=/c29"),
        ("NODE_OPTIONS", "--require=/c33.js"),
        ("PYTHONPATH", "/c31"),
    ] {
        assert!(
            env.iter()
                .any(|(k, v)| *k == name && v.split(':').any(|e| e == want)),
            "{name}={want}: {env:?}"
        );
    }
}

/// Past the bounds (sources too deep, too many files) the files' assignments are not known:
/// the tree is refused; a zsh tied array fails closed.
#[test]
fn past_the_bounds_and_tied_arrays_fail_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(home.join(".bashrc"), ". ./s0\n").unwrap();
    for i in 0..MAX_SOURCE_DEPTH + 2 {
        std::fs::write(home.join(format!("s{i}")), format!(". ./s{}\n", i + 1)).unwrap();
    }
    std::fs::write(home.join(".profile"), "export PYTHONPATH=$(date)\n").unwrap();
    let shell = of_shell(&home);
    assert!(
        shell
            .unreadable
            .iter()
            .any(|(what, why)| what.contains("start-up files")
                && what.contains(&*home.to_string_lossy())
                && why == PAST_BOUNDS),
        "{:?}",
        shell.unreadable
    );
    // Another gateway's `$HOME` past the bounds is read as far as the bounds and no further
    // (red team 49 F6); what it cannot read otherwise still fails closed.
    let other = shell.unbounded_as_unread().unreadable;
    assert!(other.iter().all(|(_, why)| why != PAST_BOUNDS), "{other:?}");
    assert!(
        other.iter().any(|(what, _)| what == "PYTHONPATH"),
        "{other:?}"
    );
    // A tied array assigned as an array is read into its variable (zsh joins it with `:`;
    // each element is an entry); assigned another way it is not read.
    let tied = reader(
        "typeset -xT PERL5LIB perl5lib\nperl5lib=($HOME/c7/lib $perl5lib)\n",
        None,
        Dialect::Posix,
    );
    assert!(tied.unreadable.is_empty(), "{:?}", tied.unreadable);
    let home = std::env::var("HOME").unwrap();
    assert!(
        values(tied).contains(&("PERL5LIB", format!("{home}/c7/lib"))),
        "PERL5LIB"
    );
    // An element by a subscript not read here (`perl5lib[$i]=…`) is not an assignment read:
    // the array, assigned before the tie, fails closed at `typeset -T`.
    let reader = reader(
        "perl5lib=($HOME/c7/lib)\ntypeset -xT PERL5LIB perl5lib\n",
        None,
        Dialect::Posix,
    );
    assert!(
        reader.unreadable.iter().any(|(var, _)| var == "PERL5LIB"),
        "{:?}",
        reader.unreadable
    );
}

/// Ordinary `.envrc` and start-up lines the red team saw refuse every write (o2, o8, o9): the
/// repository's top, a command's alternatives and Python's user site are read.
#[test]
fn the_repository_top_and_alternatives_of_a_substitution_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::create_dir_all(top.join(".git")).unwrap();
    std::fs::create_dir_all(top.join("sub")).unwrap();
    let reader = reader(
        "export PYTHONPATH=$(git rev-parse --show-toplevel)/src\n\
         export PAGER=\"$(command -v bat || echo less)\"\n\
         export PYTHONPATH=\"$(python3 -m site --user-site)\"\n",
        Some(&top.join("sub")),
        Dialect::Posix,
    );
    assert!(reader.unreadable.is_empty(), "{:?}", reader.unreadable);
    let got = values(reader);
    assert!(got.contains(&("PYTHONPATH", top.join("src").display().to_string())));
    assert!(got.contains(&("PAGER", "bat".to_string())), "{got:?}");
    assert!(got.contains(&("PAGER", "less".to_string())), "{got:?}");
    let home = std::env::var("HOME").unwrap();
    assert!(
        got.iter().any(|(k, v)| *k == "PYTHONPATH"
            && v.starts_with(&format!("{home}/.local/lib/python3"))
            && v.ends_with("site-packages")),
        "{got:?}"
    );
}

/// Red team 40: builtins that assign a variable by name (`printf -v`, `read`, zsh's `print -v`,
/// `mapfile`, a nameref) fail closed for the rules' variables; a computed name is expanded;
/// `env NAME=v cmd`, `$"…"`, `PROMPT_COMMAND` and `trap` code, and fish's `--path` universal
/// variables are read.
#[test]
fn names_assigned_by_builtins_and_code_in_strings_are_read_or_fail_closed() {
    for text in [
        "printf -v PYTHONPATH '%s/src' \"$HOME\"",
        "read -r PYTHONPATH <<< \"$HOME/src\"",
        "IFS=: read -r PERL5LIB X <<EOF\n/a:/b\nEOF",
        "print -v PYTHONPATH $HOME/src",
        "export \"$(tr a-z A-Z <<< pythonpath)=$HOME/src\"",
    ] {
        let reader = reader(text, None, Dialect::Posix);
        assert!(
            !reader.unreadable.is_empty(),
            "{text}: read as {:?}",
            reader.out
        );
    }
    // A nameref's and a tied array's assignments, scalar, element or array, are the
    // variable's (red team 40 had them fail closed; they are read now).
    let home = std::env::var("HOME").unwrap();
    for text in [
        "declare -n ref=PYTHONPATH\nref=$HOME/src",
        "typeset -n ref=PYTHONPATH\nref=($HOME/src)",
        "typeset -T PYTHONPATH pythonpath\npythonpath[2]=$HOME/src",
        "PYTHONPATH[0]=$HOME/src",
    ] {
        let reader = reader(text, None, Dialect::Posix);
        assert!(
            reader.unreadable.is_empty(),
            "{text}: {:?}",
            reader.unreadable
        );
        let got = values(reader);
        assert_eq!(got, [("PYTHONPATH", format!("{home}/src"))], "{text}");
    }
    // Other variables assigned so stay readable (`read -r line` in a loop).
    assert!(
        reader("while read -r line; do :; done < f", None, Dialect::Posix)
            .unreadable
            .is_empty()
    );
    let home = std::env::var("HOME").unwrap();
    for (text, name, want) in [
        (
            "V=PYTHONPATH\nexport \"$V=$HOME/c40\"",
            "PYTHONPATH",
            format!("{home}/c40"),
        ),
        (
            "py() { env PYTHONPATH=\"$HOME/c41\" python3 \"$@\"; }",
            "PYTHONPATH",
            format!("{home}/c41"),
        ),
        (
            "export PERL5LIB=$\"$HOME/c43\"",
            "PERL5LIB",
            format!("{home}/c43"),
        ),
    ] {
        let got = values_of(text, None, name);
        assert!(got.contains(&want), "{text}: {got:?}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let home_dir = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(
        home_dir.join(".bashrc"),
        "PROMPT_COMMAND='[ -f .pc-env ] && . .pc-env'\ntrap 'source .trap-env' DEBUG\n",
    )
    .unwrap();
    std::fs::create_dir_all(home_dir.join(".config/fish")).unwrap();
    std::fs::write(
        home_dir.join(".config/fish/fish_variables"),
        "SETUVAR --export --path PYTHONPATH:\\x2fc29\\x1e\\x2fc29b\n",
    )
    .unwrap();
    let shell = of_shell(&home_dir);
    for want in [".pc-env", ".trap-env"] {
        assert!(
            shell.relative_sources.contains(&PathBuf::from(want)),
            "{want}: {:?}",
            shell.relative_sources
        );
    }
    let env = entries(&shell.env, "PYTHONPATH");
    // Each entry (a search list's order never decides a place).
    assert!(
        env.iter().any(|e| e == "/c29") && env.iter().any(|e| e == "/c29b"),
        "{env:?}"
    );
}

/// Red team 40's open shapes: bash's `PROMPT_COMMAND` array, zsh's `path` array, fish's
/// `{$HOME}` and brace lists in `export` arguments are read.
#[test]
fn arrays_and_braces_are_read() {
    let home = std::env::var("HOME").unwrap();
    let reader = reader(
        "PROMPT_COMMAND=('history -a' '. ./.pc-env')\npath=(~/proj/bin $path)\n\
         export PYTHONPATH=/x/{a,b}\n",
        None,
        Dialect::Posix,
    );
    assert_eq!(reader.relative_sources, [PathBuf::from("./.pc-env")]);
    let got = values(reader);
    assert!(
        got.iter()
            .any(|(k, v)| *k == "PATH" && v == &format!("{home}/proj/bin")),
        "{got:?}"
    );
    assert!(got.contains(&("PYTHONPATH", "/x/a".to_string())), "{got:?}");
    assert!(got.contains(&("PYTHONPATH", "/x/b".to_string())), "{got:?}");
    let fish = values(reader_fish("set -gx PYTHONPATH {$HOME}/proj/lib\n"));
    assert_eq!(fish, [("PYTHONPATH", format!("{home}/proj/lib"))]);
}

fn reader_fish(text: &str) -> Reader {
    reader(text, None, Dialect::Fish)
}

/// Red team 40's open shape: the parent's `.envrc` that `source_up` loads runs in its own
/// directory (direnv's `source_env`), so its `$PWD` is there; an entry it puts in the project
/// is read where it points.
#[test]
fn a_parent_envrc_loaded_by_source_up_is_read_in_its_own_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    let root = top.join("proj");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        top.join(".envrc"),
        "export PYTHONPATH=$PWD/proj/lib\nPATH_add tools\n",
    )
    .unwrap();
    std::fs::write(root.join(".envrc"), "source_up\n").unwrap();
    let got: Vec<(&str, String)> = of_root(&root, Some(&top))
        .env
        .into_iter()
        .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        got,
        [
            ("PYTHONPATH", root.join("lib").display().to_string()),
            ("PATH", top.join("tools").display().to_string()),
        ]
    );
}

/// Red team 40's ordinary-work refusals: values built with a pattern removal, `realpath`,
/// `readlink -f`, `dirname`, `basename` and fish's non-exported helpers are read (each refused
/// every write of the owner's trees before); a pattern not literal still fails closed.
#[test]
fn pattern_removals_path_helpers_and_fish_helpers_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::create_dir_all(top.join("src")).unwrap();
    let read = reader(
        "export PYTHONPATH=${PWD%/}/a\nexport PYTHONPATH=$(realpath ./src)\n\
         export PYTHONPATH=\"$(dirname \"$PWD\")/b\"\nexport PERL5LIB=$(readlink -f ../c)\n\
         X=/opt/tool/bin\nexport PERL5LIB=${X%/*}/lib:${X##*/}\nexport RUBYLIB=${X%%/*}r\n",
        Some(&top),
        Dialect::Posix,
    );
    assert!(read.unreadable.is_empty(), "{:?}", read.unreadable);
    let got = values(read);
    let parent = top.parent().unwrap();
    for want in [
        ("PYTHONPATH", top.join("a").display().to_string()),
        ("PYTHONPATH", top.join("src").display().to_string()),
        ("PYTHONPATH", parent.join("b").display().to_string()),
        ("PERL5LIB", parent.join("c").display().to_string()),
        (
            "PERL5LIB",
            format!("/opt/tool/lib:{}", top.join("bin").display()),
        ),
        ("RUBYLIB", top.join("r").display().to_string()),
    ] {
        assert!(got.contains(&want), "{want:?} in {got:?}");
    }
    let fish = values(reader_fish(
        "set -l d /x\nset d2 $d/y\nset -gx PYTHONPATH $d2/lib\n",
    ));
    assert!(
        fish.contains(&("PYTHONPATH", "/x/y/lib".to_string())),
        "{fish:?}"
    );
    let unread = reader("export PYTHONPATH=${PWD%$S}\n", None, Dialect::Posix);
    assert!(!unread.unreadable.is_empty());
}

/// A prompt's command substitutions run at every prompt, from wherever the shell is (red team
/// 41's session): a relative file they source is named in every tree, like `PROMPT_COMMAND`'s.
#[test]
fn a_prompt_s_substitutions_are_read_as_code() {
    let got = reader(
        "PS1='\\u@\\h $(. ./.prompt-env; echo x) \\$ '\nRPROMPT='$(source .rprompt)'\n",
        None,
        Dialect::Posix,
    );
    assert_eq!(
        got.relative_sources,
        [PathBuf::from("./.prompt-env"), PathBuf::from(".rprompt")]
    );
}
