//! Tests of the owner's environment table and git's environment config parsing.

use std::collections::HashMap;
use std::ffi::OsString;

use super::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let map: HashMap<String, OsString> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |name| map.get(name).cloned()
}

fn entries_of(get: impl Fn(&str) -> Option<OsString>) -> Vec<Entry> {
    let mut unreadable = Vec::new();
    let got = git_entries(get, &mut unreadable);
    assert!(unreadable.is_empty(), "{unreadable:?}");
    got
}

fn pairs(entries: &[Entry]) -> Vec<(String, Option<String>, String, Option<String>)> {
    entries
        .iter()
        .map(|e| {
            (
                e.section.clone(),
                e.subsection.clone(),
                e.key.clone(),
                e.value.clone(),
            )
        })
        .collect()
}

#[test]
fn git_config_parameters_are_read_as_git_reads_them() {
    let got = entries_of(env(&[(
        "GIT_CONFIG_PARAMETERS",
        " 'core.hooksPath'='/x' 'a.b'='c'\t'core.hookspath=/old' 'Diff.My.Sub.textconv'='it'\\''s' \
         'alias.x' 'e.f'= 'g.h'='a'\\!'b'",
    )]));
    let want = [
        ("core", None, "hookspath", Some("/x")),
        ("a", None, "b", Some("c")),
        ("core", None, "hookspath", Some("/old")),
        ("diff", Some("My.Sub"), "textconv", Some("it's")),
        ("alias", None, "x", None),
        ("e", None, "f", Some("")),
        ("g", None, "h", Some("a!b")),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(s, sub, k, v)| {
            (
                s.to_string(),
                sub.map(String::from),
                k.to_string(),
                v.map(String::from),
            )
        })
        .collect();
    assert_eq!(pairs(&got), want);
    // git refuses what follows a malformed item; what came before stays read (fail closed).
    let got = entries_of(env(&[(
        "GIT_CONFIG_PARAMETERS",
        "'a.b'='c' bogus 'd.e'='f'",
    )]));
    assert_eq!(pairs(&got).len(), 1);
}

#[test]
fn git_config_count_reads_its_numbered_keys() {
    let got = entries_of(env(&[
        ("GIT_CONFIG_COUNT", "2"),
        ("GIT_CONFIG_KEY_0", "core.hooksPath"),
        ("GIT_CONFIG_VALUE_0", "/h"),
        ("GIT_CONFIG_KEY_1", "core.fsmonitor"),
        ("GIT_CONFIG_VALUE_1", "/f"),
        ("GIT_CONFIG_KEY_2", "core.pager"),
        ("GIT_CONFIG_VALUE_2", "/not-counted"),
    ]));
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[1].key.as_str(), got[1].value.as_deref()),
        ("fsmonitor", Some("/f"))
    );
}

/// Red team 36: git reads as many entries as `GIT_CONFIG_COUNT` says; past the bound read here
/// the rest is unknown, so the whole tree is refused; a count past the keys there is git's
/// error (it runs nothing), not unreadable.
#[test]
fn a_git_config_count_past_the_bound_is_unreadable() {
    let mut owned: Vec<(String, String)> = (0..=MAX_GIT_COUNT)
        .flat_map(|n| {
            [
                (format!("GIT_CONFIG_KEY_{n}"), "a.b".to_string()),
                (format!("GIT_CONFIG_VALUE_{n}"), n.to_string()),
            ]
        })
        .collect();
    owned.push(("GIT_CONFIG_COUNT".into(), (MAX_GIT_COUNT + 1).to_string()));
    let pairs: Vec<(&str, &str)> = owned
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut unreadable = Vec::new();
    let got = git_entries(env(&pairs), &mut unreadable);
    assert_eq!(got.len(), MAX_GIT_COUNT);
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert_eq!(unreadable[0].0, "GIT_CONFIG_COUNT");
    // Exactly the bound, or a count beyond the keys set: read whole, nothing unreadable.
    for count in [MAX_GIT_COUNT.to_string(), "99999".to_string()] {
        let mut few = vec![
            ("GIT_CONFIG_KEY_0", "core.hooksPath"),
            ("GIT_CONFIG_VALUE_0", "/h"),
        ];
        few.push(("GIT_CONFIG_COUNT", count.as_str()));
        assert_eq!(entries_of(env(&few)).len(), 1);
    }
}

#[test]
fn brokers_are_handed_every_variable_the_rules_read_and_no_other() {
    for name in [
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_17",
        "PERL5OPT",
        "LD_PRELOAD",
        "ZDOTDIR",
        "PATH",
    ] {
        assert!(read_by_rules(name), "{name}");
    }
    for name in [
        "GIT_CONFIG_KEY_",
        "GIT_CONFIG_KEY_x",
        "HOME",
        "TERM",
        "SECRET_TOKEN",
    ] {
        assert!(!read_by_rules(name), "{name}");
    }
    let vars = [
        ("TERM", "xterm"),
        ("PATH", "/bin"),
        ("NODE_OPTIONS", "-r x"),
        ("GIT_CONFIG_KEY_3", "a.b"),
    ]
    .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let got = handed(vars);
    let names: Vec<_> = got
        .iter()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            format!("{HANDED_PREFIX}PATH"),
            format!("{HANDED_PREFIX}NODE_OPTIONS"),
            format!("{HANDED_PREFIX}GIT_CONFIG_KEY_3")
        ]
    );
}

#[test]
fn options_name_the_files_and_modules_they_load() {
    let node = option_names(
        Lang::Node,
        OsStr::new(
            "--max-old-space-size=4096 --require ./hook.js -r /opt/a.js --import=file:///x/b.mjs",
        ),
    );
    assert_eq!(node.0, ["./hook.js", "/opt/a.js", "file:///x/b.mjs"]);
    let perl = option_names(
        Lang::Perl,
        OsStr::new("-MFoo::Bar=x,y -Ilib2 -I extra -mstrict -d:NYTProf -w"),
    );
    assert_eq!(perl.0, ["Foo::Bar", "strict", "Devel::NYTProf"]);
    assert_eq!(perl.1, ["lib2", "extra"]);
    let ruby = option_names(Lang::Ruby, OsStr::new("-rjson -r ./x/y.rb -Ivendor -W0"));
    assert_eq!(ruby.0, ["json", "./x/y.rb"]);
    assert_eq!(ruby.1, ["vendor"]);
}

/// Red team 35 N2: `PERL5OPT=-Mlib=DIR` is `use lib DIR` at every start: an include
/// directory exactly as `-I DIR` is, in each spelling.
#[test]
fn perl_s_lib_module_in_options_names_include_directories() {
    for (value, dirs) in [
        ("-Mlib=plib", vec!["plib"]),
        ("-Mlib=/a/p,rel/q", vec!["/a/p", "rel/q"]),
        ("-mlib=m", vec!["m"]),
        ("-M lib=spaced", vec!["spaced"]),
        ("-w -MFoo -Mlib=x,y -Iz", vec!["x", "y", "z"]),
        ("-Mlib", vec![]),
        ("-Mlibrary=n", vec![]),
        ("-M-lib=gone", vec![]),
    ] {
        let (_, got) = option_names(Lang::Perl, OsStr::new(value));
        assert_eq!(got, dirs, "{value}");
    }
}

/// Red team 35 N3: the JVM's options variables load agents by path.
#[test]
fn java_options_name_the_agents_they_load() {
    let (files, dirs) = option_names(
        Lang::Java,
        OsStr::new(
            "-Xmx2g -javaagent:/opt/a.jar=opt,x -Dx=1 -agentpath:lib/p.so=k -agentlib:jdwp=y \
             -javaagent:rel.jar",
        ),
    );
    assert_eq!(files, ["/opt/a.jar", "lib/p.so", "rel.jar"]);
    assert!(dirs.is_empty());
}

/// Red team 35 N3: the variables added to the table are handed to brokers; git's config
/// variables are told apart from the table's others (env_files reads them into entries).
#[test]
fn red_team_35_s_variables_are_read_and_git_s_are_told_apart() {
    for name in [
        "LESSOPEN",
        "LESSCLOSE",
        "MANPAGER",
        "SUDO_EDITOR",
        "FCEDIT",
        "BROWSER",
        "VIMINIT",
        "EXINIT",
        "GVIMINIT",
        "NPM_CONFIG_USERCONFIG",
        "npm_config_userconfig",
        "NPM_CONFIG_GLOBALCONFIG",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "LUA_INIT",
        "R_PROFILE_USER",
        "IRBRC",
        "PYTHONHOME",
    ] {
        assert!(read_by_rules(name), "{name}");
        assert!(!is_git_config_var(name), "{name}");
    }
    for name in [
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_12",
    ] {
        assert!(is_git_config_var(name), "{name}");
    }
    for name in [
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_KEY_",
        "GIT_CONFIG_KEY_x",
        "EDITOR",
    ] {
        assert!(!is_git_config_var(name), "{name}");
    }
}
