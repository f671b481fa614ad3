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
    ] {
        assert_eq!(
            class_at(&places, rel),
            Some(AutorunClass::ShellStartup),
            "{rel}: {places:?}"
        );
    }
    for ordinary in ["perl/MyApp.pm", "perl/MyApp", "rb/myapp.rb", "perl", "rb"] {
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
