//! Red team 33: what the owner's environment names to run, read for a root that is no
//! repository — git's config variables, programs, start-up dirs, import paths and options.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::super::{Account, AutorunClass, GitPlace, places_with};

/// A root (real path) and the account whose environment is `vars` (values may hold `{root}`).
fn account(vars: &[(&'static str, &str)]) -> (tempfile::TempDir, PathBuf, Account) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let vars: Vec<(&'static str, OsString)> = vars
        .iter()
        .map(|(k, v)| {
            (
                *k,
                OsString::from(v.replace("{root}", root.to_str().unwrap())),
            )
        })
        .collect();
    let lookup = vars.clone();
    let mut account = Account::of_env(move |name| {
        lookup
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    });
    account.configs.clear();
    account.template_dirs.clear();
    account.env = vars;
    (dir, root, account)
}

fn class_at(places: &[GitPlace], rel: &str) -> Option<AutorunClass> {
    places
        .iter()
        .find(|p| p.at == Path::new(rel))
        .map(|p| p.class)
}

#[test]
fn git_s_config_variables_name_hooks_and_programs_like_a_global_config() {
    for vars in [
        vec![
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "core.hooksPath"),
            ("GIT_CONFIG_VALUE_0", "{root}/hooks"),
            ("GIT_CONFIG_KEY_1", "core.fsmonitor"),
            ("GIT_CONFIG_VALUE_1", "{root}/fsmon.sh"),
        ],
        vec![(
            "GIT_CONFIG_PARAMETERS",
            "'core.hooksPath'='{root}/hooks' 'core.fsmonitor'='{root}/fsmon.sh'",
        )],
        vec![(
            "GIT_CONFIG_PARAMETERS",
            "'core.hooksPath={root}/hooks' 'core.fsmonitor={root}/fsmon.sh'",
        )],
    ] {
        let (_dir, root, account) = account(&vars);
        let places = places_with(&root, &[], &account);
        assert_eq!(
            class_at(&places, "hooks"),
            Some(AutorunClass::GitHooks),
            "{vars:?}: {places:?}"
        );
        assert_eq!(
            class_at(&places, "fsmon.sh"),
            Some(AutorunClass::GitHooks),
            "{vars:?}"
        );
        assert!(class_at(&places, "src").is_none());
    }
}

#[test]
fn programs_start_up_dirs_and_preloads_the_environment_names_are_places() {
    let (_dir, root, account) = account(&[
        ("GIT_SSH", "{root}/bin/ssh"),
        ("GIT_SSH_COMMAND", "{root}/bin/ssh2 -o X=1"),
        ("GIT_EDITOR", "{root}/bin/ed --wait"),
        ("GIT_EXTERNAL_DIFF", "{root}/bin/diff"),
        ("GIT_EXEC_PATH", "{root}/libexec"),
        ("BASH_ENV", "{root}/sh/bashenv"),
        ("ENV", "{root}/sh/env"),
        ("ZDOTDIR", "{root}/zsh"),
        ("LD_PRELOAD", "{root}/lib/a.so {root}/lib/b.so"),
        ("LD_LIBRARY_PATH", "{root}/ld:/usr/lib"),
        (
            "NODE_OPTIONS",
            "--require {root}/hook.js --import=./esm.mjs -r ts-node/register",
        ),
    ]);
    let places = places_with(&root, &[], &account);
    for (rel, class) in [
        ("bin/ssh", AutorunClass::GitHooks),
        ("bin/ssh2", AutorunClass::GitHooks),
        ("bin/ed", AutorunClass::GitHooks),
        ("bin/diff", AutorunClass::GitHooks),
        ("libexec", AutorunClass::GitHooks),
        ("sh/bashenv", AutorunClass::ShellStartup),
        ("sh/env", AutorunClass::ShellStartup),
        ("zsh", AutorunClass::ShellStartup),
        ("lib/a.so", AutorunClass::ShellStartup),
        ("lib/b.so", AutorunClass::ShellStartup),
        ("ld/libc.so.6", AutorunClass::ShellStartup),
        ("hook.js", AutorunClass::ShellStartup),
        ("esm.mjs", AutorunClass::ShellStartup),
    ] {
        assert_eq!(class_at(&places, rel), Some(class), "{rel}: {places:?}");
    }
    for ordinary in [
        "bin",
        "lib",
        "sh",
        "ts-node",
        "src",
        "ld",
        "ld/libmyproj.so",
    ] {
        assert!(class_at(&places, ordinary).is_none(), "{ordinary}");
    }
}

#[test]
fn an_import_path_ahead_of_perl_s_and_ruby_s_library_protects_only_names_like_theirs() {
    let (_dir, root, account) = account(&[
        ("PERL5LIB", "{root}/perl"),
        ("PERL5OPT", "-MMy::Tool -I{root}/perl2"),
        ("RUBYLIB", "rb"),
        ("RUBYOPT", "-rmyhook"),
        // Red team 46a: node's `-r mod` found through NODE_PATH.
        ("NODE_PATH", "{root}/nlib"),
        ("NODE_OPTIONS", "-r nodehook --max-old-space-size=4096"),
    ]);
    let places = places_with(&root, &[], &account);
    for rel in [
        "perl/strict.pm",
        "perl/warnings.pm",
        "perl/My/Tool.pm",
        "perl2/strict.pm",
        "perl2/My/Tool.pm",
        "rb/rubygems.rb",
        "rb/bundler",
        "rb/myhook.rb",
        "nlib/nodehook.js",
        "nlib/nodehook.cjs",
        "nlib/nodehook",
    ] {
        assert_eq!(
            class_at(&places, rel),
            Some(AutorunClass::ShellStartup),
            "{rel}: {places:?}"
        );
    }
    for ordinary in [
        "perl/MyApp.pm",
        "perl/MyApp",
        "rb/myapp.rb",
        "perl",
        "rb",
        "nlib/app.js",
        "nlib",
    ] {
        assert!(class_at(&places, ordinary).is_none(), "{ordinary}");
    }
}

/// The owner's everyday editors and pagers name no place of the tree (and never the whole
/// tree): only a program by a path in it is one.
#[test]
fn everyday_editor_and_pager_values_refuse_nothing() {
    for (name, value) in [
        ("EDITOR", "vim"),
        ("EDITOR", "code --wait"),
        ("EDITOR", "emacsclient -t -a ''"),
        ("VISUAL", "/usr/bin/nvim"),
        ("PAGER", "less -FRX"),
        ("GIT_PAGER", "delta --dark --paging=always"),
        (
            "GIT_SSH_COMMAND",
            "ssh -i ~/.ssh/id_deploy -o IdentitiesOnly=yes",
        ),
        ("GIT_EDITOR", "subl -n -w"),
        ("NODE_OPTIONS", "--max-old-space-size=8192"),
        ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64"),
        ("ENV", "production"),
    ] {
        let (_dir, root, account) = account(&[(name, value)]);
        let places = places_with(&root, &[], &account);
        assert!(places.is_empty(), "{name}={value}: {places:?}");
    }
}

/// Red team 35 N2, N3: `-Mlib=`, less's filters, vim's start-up commands, npm's config files,
/// cargo's wrappers, the JVM's agents, Lua's, R's and irb's start-up files, Python's home.
#[test]
fn red_team_35_s_variables_name_places() {
    let (_dir, root, account) = account(&[
        ("PERL5OPT", "-w -Mlib={root}/plib,{root}/plib2"),
        ("LESSOPEN", "|{root}/bin/lessfilter %s"),
        ("LESSCLOSE", "{root}/bin/lessclose %s %s"),
        ("MANPAGER", "{root}/bin/manpager -R"),
        ("SUDO_EDITOR", "{root}/bin/sudoed"),
        ("FCEDIT", "{root}/bin/fced"),
        ("BROWSER", "firefox:{root}/bin/browser"),
        (
            "VIMINIT",
            "set nocp | so {root}/vim/init.vim | :source! {root}/vim/two.vim",
        ),
        ("EXINIT", "source {root}/exrc"),
        ("NPM_CONFIG_USERCONFIG", "{root}/npmrc"),
        ("npm_config_globalconfig", "{root}/gnpmrc"),
        ("RUSTC_WRAPPER", "{root}/bin/wrap"),
        ("JAVA_TOOL_OPTIONS", "-javaagent:{root}/agent.jar=x -Xmx1g"),
        ("JDK_JAVA_OPTIONS", "-agentpath:native/p.so"),
        ("LUA_INIT", "@{root}/init.lua"),
        ("R_PROFILE_USER", "{root}/Rprofile"),
        ("IRBRC", "{root}/irbrc"),
        ("PYTHONHOME", "{root}/pyhome"),
        // Red team 47b B8.
        ("SUDO_ASKPASS", "{root}/bin/askpass"),
        ("INPUTRC", "{root}/inputrc"),
    ]);
    let places = places_with(&root, &[], &account);
    for (rel, class) in [
        ("plib/strict.pm", AutorunClass::ShellStartup),
        ("plib2/warnings.pm", AutorunClass::ShellStartup),
        ("bin/lessfilter", AutorunClass::GitHooks),
        ("bin/lessclose", AutorunClass::GitHooks),
        ("bin/manpager", AutorunClass::GitHooks),
        ("bin/sudoed", AutorunClass::GitHooks),
        ("bin/fced", AutorunClass::GitHooks),
        ("bin/browser", AutorunClass::GitHooks),
        ("vim/init.vim", AutorunClass::EditorConfig),
        ("vim/two.vim", AutorunClass::EditorConfig),
        ("exrc", AutorunClass::EditorConfig),
        ("npmrc", AutorunClass::ToolchainConfig),
        ("gnpmrc", AutorunClass::ToolchainConfig),
        ("bin/wrap", AutorunClass::ToolchainConfig),
        ("agent.jar", AutorunClass::ShellStartup),
        ("native/p.so", AutorunClass::ShellStartup),
        ("init.lua", AutorunClass::ShellStartup),
        ("Rprofile", AutorunClass::ShellStartup),
        ("irbrc", AutorunClass::ShellStartup),
        ("pyhome", AutorunClass::PythonStartup),
        ("bin/askpass", AutorunClass::ShellStartup),
        ("inputrc", AutorunClass::ShellStartup),
    ] {
        assert_eq!(class_at(&places, rel), Some(class), "{rel}: {places:?}");
    }
    for ordinary in ["bin", "vim", "plib/MyApp.pm", "src", "firefox"] {
        assert!(class_at(&places, ordinary).is_none(), "{ordinary}");
    }
}

/// Everyday values of the new variables name nothing.
#[test]
fn everyday_values_of_red_team_35_s_variables_refuse_nothing() {
    for (name, value) in [
        ("LESSOPEN", "| /usr/bin/nonexist-x %s"),
        ("LESSCLOSE", "/usr/bin/lesspipe %s %s"),
        ("MANPAGER", "less -s"),
        ("BROWSER", "firefox:chromium"),
        ("VIMINIT", "set nocompatible"),
        ("JAVA_TOOL_OPTIONS", "-Dfile.encoding=UTF-8"),
        ("LUA_INIT", "print('hi')"),
        ("LESSOPEN", "| /usr/bin/lesspipe %s"),
    ] {
        let (_dir, root, account) = account(&[(name, value)]);
        let places = places_with(&root, &[], &account);
        assert!(places.is_empty(), "{name}={value}: {places:?}");
    }
}

/// Red team 36: a program a command-like variable names by a relative path runs from where the
/// owner runs the tool: read against the root.
#[test]
fn relative_programs_in_command_variables_are_read_against_the_root() {
    let (_dir, root, account) = account(&[
        ("LESSOPEN", "|bin/lessfilter %s"),
        ("EDITOR", "./tools/ed -w"),
        ("BROWSER", "firefox:scripts/open"),
        ("PAGER", "less -R"),
    ]);
    let places = places_with(&root, &[], &account);
    for rel in ["bin/lessfilter", "tools/ed", "scripts/open"] {
        assert_eq!(
            class_at(&places, rel),
            Some(AutorunClass::GitHooks),
            "{rel}: {places:?}"
        );
    }
    for ordinary in ["bin", "tools", "less", "firefox", "src"] {
        assert!(class_at(&places, ordinary).is_none(), "{ordinary}");
    }
}

/// A variable whose value is not read (`unreadable`) refuses the whole tree, naming it.
#[test]
fn an_unreadable_variable_refuses_the_whole_tree_naming_it() {
    let (_dir, root, mut account) = account(&[]);
    assert!(places_with(&root, &[], &account).is_empty());
    account.unreadable.push((
        "PYTHONPATH".into(),
        "its value is built from what is not read".into(),
    ));
    let places = places_with(&root, &[], &account);
    let whole = places
        .iter()
        .find(|p| p.at.as_os_str().is_empty())
        .expect("the whole tree");
    assert_eq!(whole.class, AutorunClass::PythonStartup);
    assert!(whole.why.contains("PYTHONPATH"), "{}", whole.why);
}

/// Red team 39 finding 2: git's config variables assigned in the root's `.envrc` or `.env`
/// name the files git reads and the template directory it copies, as when the shell's start-up
/// files or the environment set them.
#[test]
fn git_s_config_files_named_in_the_root_s_env_files_are_read() {
    for (file, line, config) in [
        (
            ".envrc",
            "export GIT_CONFIG_GLOBAL=$PWD/.gitconfig.dev",
            ".gitconfig.dev",
        ),
        (".env", "GIT_CONFIG_GLOBAL=./dev.gitconfig", "dev.gitconfig"),
        (
            ".envrc",
            "export XDG_CONFIG_HOME=\"$PWD/.config\"",
            ".config/git/config",
        ),
        (
            ".envrc",
            "export GIT_TEMPLATE_DIR=$PWD/.git-templates",
            ".git-templates/config",
        ),
    ] {
        let (_dir, root, account) = account(&[]);
        std::fs::write(root.join(file), format!("{line}\n")).unwrap();
        let path = root.join(config);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let fsmonitor = format!("[core]\n\tfsmonitor = {}/tools/fsm.sh\n", root.display());
        std::fs::write(&path, fsmonitor).unwrap();
        let places = places_with(&root, &[], &account);
        // The file itself (the session cannot write it), and what it runs.
        assert!(class_at(&places, config).is_some(), "{line}: {places:?}");
        assert!(
            class_at(&places, "tools/fsm.sh").is_some(),
            "{line}: {places:?}"
        );
        if line.contains("TEMPLATE") {
            assert!(class_at(&places, ".git-templates/hooks").is_some());
        }
    }
}

/// Red team 39 finding 7: files whose entries run programs and directories whose files run,
/// named by variables beyond git's and the interpreters'.
#[test]
fn tool_config_files_and_dirs_the_environment_names_are_places() {
    let (_dir, root, account) = account(&[
        (
            "KUBECONFIG",
            "{root}/deploy/kube.yaml:{root}/deploy/other.yaml",
        ),
        ("AWS_CONFIG_FILE", "{root}/aws.cfg"),
        ("PSQLRC", "{root}/psqlrc"),
        ("HGRCPATH", "{root}/hgrc"),
        ("LESSKEYIN", "{root}/conf/lesskey"),
        ("IPYTHONDIR", "{root}/ipy"),
        ("XDG_CONFIG_HOME", "{root}/.config"),
    ]);
    let places = places_with(&root, &[], &account);
    for rel in [
        "deploy/kube.yaml",
        "deploy/other.yaml",
        "aws.cfg",
        "psqlrc",
        "hgrc",
        "conf/lesskey",
        "ipy",
        ".config",
    ] {
        assert!(class_at(&places, rel).is_some(), "{rel}: {places:?}");
    }
    assert!(class_at(&places, "deploy").is_none());
}

/// Red team 40: an entry built on an unread part whose literal directory holds the tree
/// (`$HOME/c${USER:0:0}/src` leaves `$HOME`) refuses the whole tree; one beside it protects
/// only below itself.
#[test]
fn an_unread_tail_above_the_tree_refuses_the_tree() {
    let (_dir, root, mut above) = account(&[]);
    let parent = root.parent().unwrap().to_path_buf();
    above.below.push(("PYTHONPATH", parent));
    let places = places_with(&root, &[], &above);
    assert!(
        places.iter().any(|p| p.at.as_os_str().is_empty()),
        "{places:?}"
    );
    let (_dir2, root, mut beside) = account(&[]);
    beside.below.push(("PYTHONPATH", root.join("build")));
    let places = places_with(&root, &[], &beside);
    assert_eq!(
        class_at(&places, "build"),
        Some(AutorunClass::PythonStartup)
    );
    assert!(!places.iter().any(|p| p.at.as_os_str().is_empty()));
}

/// Whether a write to `rel` is covered by a place, each by its scope.
fn covered(places: &[GitPlace], rel: &str) -> bool {
    places.iter().any(|p| {
        Path::new(rel).strip_prefix(&p.at).is_ok_and(|below| {
            let below: Vec<String> = below
                .iter()
                .map(|c| c.to_string_lossy().to_lowercase())
                .collect();
            p.scope.reaches(&below)
        })
    })
}

/// A directory of the tree on the owner's `PATH` (red team 41, found while aiming it: direnv's
/// `PATH_add bin`): a file there named like one of the system's programs would run whenever
/// the owner types that name, so it is a place; the project's own scripts stay writable. A
/// relative entry (`bin`, `.`), searched from wherever the shell is, and one built on what is
/// not read cover such names anywhere in the tree, and nothing else.
#[test]
fn a_path_entry_in_the_tree_protects_files_named_like_the_system_s_programs() {
    let (_dir, root, owner) = account(&[("PATH", "{root}/bin:/usr/bin:/bin")]);
    let places = places_with(&root, &[], &owner);
    for rel in ["bin/ls", "bin/sh", "bin/env", "bin/LS"] {
        assert!(covered(&places, rel), "{rel}: {places:?}");
    }
    for ordinary in [
        "bin/run-tests",
        "bin/ls/x",
        "src/ls",
        "ls",
        "bin",
        "bin/setup.sh",
    ] {
        assert!(!covered(&places, ordinary), "{ordinary}: {places:?}");
    }
    for path in ["tools:/usr/bin", ":/usr/bin", "/usr/bin:."] {
        let (_dir, root, owner) = account(&[("PATH", path)]);
        let places = places_with(&root, &[], &owner);
        for rel in ["ls", "src/deep/sh", "tools/env"] {
            assert!(covered(&places, rel), "{path} {rel}: {places:?}");
        }
        for ordinary in ["src/main.rs", "tools/run-tests", "ls/readme.md"] {
            assert!(!covered(&places, ordinary), "{path} {ordinary}: {places:?}");
        }
    }
    let (_dir, root, mut unread) = account(&[]);
    unread.below.push(("PATH", PathBuf::from("/")));
    let places = places_with(&root, &[], &unread);
    assert!(covered(&places, "a/b/ls"), "{places:?}");
    assert!(!covered(&places, "a/b/c.txt"), "{places:?}");
    // The system's own directories are no place of the tree.
    let (_dir, root, system) = account(&[("PATH", "/usr/local/bin:/usr/bin")]);
    assert!(places_with(&root, &[], &system).is_empty());
}

/// make's `MAKEFILES` (read at every run) and `GOFLAGS`' programs and files (red team 41's
/// session) are places; everyday `GOFLAGS` name nothing.
#[test]
fn makefiles_and_goflags_name_places() {
    let (_dir, root, owner) = account(&[
        ("MAKEFILES", "local.mk {root}/ci/common.mk"),
        (
            "GOFLAGS",
            "-mod=mod -toolexec=./tools/wrap.sh -overlay={root}/overlay.json",
        ),
    ]);
    let places = places_with(&root, &[], &owner);
    // (The program, read as git's programs are, is refused as theirs: `git_hooks`.)
    assert_eq!(
        class_at(&places, "tools/wrap.sh"),
        Some(AutorunClass::GitHooks)
    );
    for rel in ["local.mk", "ci/common.mk", "overlay.json"] {
        assert_eq!(
            class_at(&places, rel),
            Some(AutorunClass::ToolchainConfig),
            "{rel}: {places:?}"
        );
    }
    assert!(!covered(&places, "main.go") && !covered(&places, "Makefile"));
    let (_dir, root, everyday) = account(&[("GOFLAGS", "-mod=vendor -buildvcs=false -trimpath")]);
    assert!(places_with(&root, &[], &everyday).is_empty());
}

/// Red team 43a B1: a file the owner's start-up files source or run by an absolute path is a
/// place of the tree it lies in (through `..` too); one naming the tree itself, or a directory
/// of it, refuses nothing more; one outside the tree names nothing there.
#[test]
fn files_start_up_files_source_or_run_are_places() {
    let (_dir, root, mut account) = account(&[]);
    std::fs::create_dir_all(root.join("src")).unwrap();
    account.startup_runs = vec![
        root.join(".devrc"),
        root.join("src/../tools/motd.sh"),
        root.clone(),
        root.join("src"),
        PathBuf::from("/usr/share/bash-completion/bash_completion"),
    ];
    let places = places_with(&root, &[], &account);
    assert_eq!(
        class_at(&places, ".devrc"),
        Some(AutorunClass::ShellStartup)
    );
    assert!(covered(&places, "tools/motd.sh"), "{places:?}");
    assert!(!covered(&places, "src/app.py"), "{places:?}");
    assert!(!covered(&places, "README.md"), "{places:?}");
    assert_eq!(places.len(), 2, "{places:?}");
}

/// Red team 43a B7: Emacs's load path (its `site-start.el` and `default.el` run at every start)
/// and the XDG config dirs (their `autostart/*.desktop` run at login) are places below each
/// directory of the tree they name; the system's own entries name nothing there.
#[test]
fn emacs_load_path_and_xdg_config_dirs_are_places() {
    let (_dir, root, account) = account(&[
        ("EMACSLOADPATH", "{root}/elisp:"),
        ("XDG_CONFIG_DIRS", "{root}/xdg:/etc/xdg"),
    ]);
    let places = places_with(&root, &[], &account);
    assert!(covered(&places, "elisp/site-start.el"), "{places:?}");
    assert!(covered(&places, "xdg/autostart/x.desktop"), "{places:?}");
    assert!(!covered(&places, "src/main.el"), "{places:?}");
    assert_eq!(places.len(), 2, "{places:?}");
}

/// Red team 44a C2: the variables found outside the table name places — vim's runtime, the XDG
/// data dirs, direnv's config dir, Gradle's user home, Julia's depot, Doom's dir, Python's
/// bytecode prefix, starship's and ripgrep's configs, fzf's command, the loader's auditors — and
/// ruby's `-r/p/x` loads `/p/x.rb` (node's `--require /p/y` `/p/y.js`).
#[test]
fn red_team_44_s_variables_name_places() {
    let (_dir, root, account) = account(&[
        ("VIMRUNTIME", "{root}/vimruntime"),
        ("XDG_DATA_HOME", "{root}/xdgdata"),
        ("XDG_DATA_DIRS", "{root}/share:/usr/share"),
        ("DIRENV_CONFIG", "{root}/direnvcfg"),
        ("GRADLE_USER_HOME", "{root}/gradlehome"),
        ("JULIA_DEPOT_PATH", "{root}/julia"),
        ("DOOMDIR", "{root}/doom"),
        ("PYTHONPYCACHEPREFIX", "{root}/pycache"),
        ("STARSHIP_CONFIG", "{root}/starship.toml"),
        ("RIPGREP_CONFIG_PATH", "{root}/rgrc"),
        ("FZF_DEFAULT_COMMAND", "{root}/tools/fzf.sh --all"),
        ("LD_AUDIT", "{root}/audit.so"),
        ("RUBYOPT", "-r{root}/rb/boot"),
        ("NODE_OPTIONS", "--require {root}/js/boot"),
    ]);
    let places = places_with(&root, &[], &account);
    for rel in [
        "vimruntime/plugin/x.vim",
        "xdgdata/nvim/site/plugin/x.vim",
        "share/fish/vendor_conf.d/x.fish",
        "direnvcfg/direnvrc",
        "gradlehome/init.d/x.gradle",
        "julia/config/startup.jl",
        "doom/config.el",
        "pycache/x.cpython-312.pyc",
        "starship.toml",
        "rgrc",
        "tools/fzf.sh",
        "audit.so",
        "rb/boot.rb",
        "js/boot.js",
    ] {
        assert!(covered(&places, rel), "{rel}: {places:?}");
    }
    for rel in ["src/main.rs", "rb/other.rb", "README.md"] {
        assert!(!covered(&places, rel), "{rel}: {places:?}");
    }
}

/// Red team 46 C5-B3: a root that is another path of the project (a bind mount or a FUSE mirror
/// of it) gets the places the owner's files name under the project's usual path, rebased.
#[test]
fn places_named_under_another_path_of_the_root_are_the_root_s() {
    let (_dir, root, mut account) = account(&[]);
    let usual = PathBuf::from("/work/projects/app");
    account.startup_runs = vec![usual.join(".devrc"), usual.join("tools/motd.sh")];
    let places = super::super::places_with_aliases(&root, &[], &account, vec![usual.clone()]);
    assert_eq!(
        class_at(&places, ".devrc"),
        Some(AutorunClass::ShellStartup)
    );
    assert!(covered(&places, "tools/motd.sh"), "{places:?}");
    assert!(!covered(&places, "src/app.py"), "{places:?}");
    // Without the alias nothing there is a place (the control).
    assert!(places_with(&root, &[], &account).is_empty());
}

/// Red team 48 F8: a file the owner's shell sources by a relative path (a `cd` hook's
/// `. ./.dev-env`) is sourced from whichever directory the shell enters, so its name is a place
/// at every depth of the tree (only the top was: `sub/.dev-env` was written and sourced on
/// `cd sub`); other names stay writable.
#[test]
fn a_relatively_sourced_name_is_a_place_at_any_depth() {
    use super::super::super::symlinks::{covers, fold_all};
    let (_dir, root, mut owner) = account(&[]);
    owner.relative_sources.push(PathBuf::from("./.dev-env"));
    let places = places_with(&root, &[], &owner);
    let refused = |rel: &str| {
        places
            .iter()
            .any(|p| covers(&fold_all(&p.at), p.scope, &fold_all(Path::new(rel))))
    };
    for rel in [".dev-env", "sub/.dev-env", "a/b/.DEV-ENV"] {
        assert!(refused(rel), "{rel}: {places:?}");
    }
    for rel in ["sub/dev-env", ".dev-env.bak", "src/main.rs", "sub"] {
        assert!(!refused(rel), "{rel}");
    }
}

/// Red team 49: what the coding agents' user settings run is a place: by its absolute path,
/// and a relative one at every depth of every tree (the project the agent is opened in).
#[test]
fn what_coding_agents_run_is_a_place_at_its_path_and_relative_ones_at_every_depth() {
    let (_dir, root, mut account) = account(&[]);
    account.agent_runs = vec![root.join("hooks/start.sh")];
    account.agent_relative_runs = vec![PathBuf::from("scripts/h.sh")];
    let places = places_with(&root, &[], &account);
    assert_eq!(
        class_at(&places, "hooks/start.sh"),
        Some(AutorunClass::StartupLinks)
    );
    let relative = places
        .iter()
        .find(|p| p.at == Path::new("scripts/h.sh"))
        .expect("the relative run is a place");
    assert_eq!(
        relative.scope,
        crate::protected::autorun::shell_command::Scope::AtAnyDepth
    );
    assert!(relative.why.contains("coding agent"), "{}", relative.why);
    assert!(class_at(&places, "scripts").is_none());
}
