//! Red team 30 N2: the account's git configuration read for a root that is no repository —
//! git's `~name/` spelling, the template directory, the programs it runs everywhere.

use std::path::{Path, PathBuf};

use super::super::{AutorunClass, GitPlace, places_with};
use super::{Account, expand_user_path};

/// This process's account name and home, from `/etc/passwd`.
fn own_account() -> (String, PathBuf) {
    let uid = rustix::process::geteuid().as_raw().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[2] == uid)
        .map(|f| (f[0].to_string(), PathBuf::from(f[5])))
        .expect("this account in /etc/passwd")
}

/// A root that is no repository (`<tmp>/shared`), the tmp dir's real path, and the account.
fn setup(parent: &Path) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir_in(parent).unwrap();
    let tmp = std::fs::canonicalize(dir.path()).unwrap();
    let root = tmp.join("shared");
    std::fs::create_dir_all(&root).unwrap();
    (dir, tmp, root)
}

fn account(configs: Vec<PathBuf>) -> Account {
    Account {
        configs,
        ..Default::default()
    }
}

fn place<'a>(places: &'a [GitPlace], rel: &str) -> Option<&'a GitPlace> {
    places.iter().find(|p| p.at == Path::new(rel))
}

#[test]
fn git_user_paths_expand_as_git_does() {
    let (name, home) = own_account();
    let home = home.to_string_lossy().into_owned();
    assert_eq!(
        expand_user_path(&format!("~{name}/x/y")),
        Some(PathBuf::from(format!("{home}/x/y")))
    );
    assert_eq!(
        expand_user_path(&format!("~{name}")),
        Some(PathBuf::from(&home))
    );
    assert_eq!(
        expand_user_path("~/x"),
        Some(PathBuf::from(format!(
            "{}/x",
            std::env::var("HOME").unwrap()
        )))
    );
    // git refuses an account it does not know (`interpolate_path` returns NULL).
    assert_eq!(expand_user_path("~no-such-account-rt30/x"), None);
    assert_eq!(expand_user_path("/abs/x"), Some(PathBuf::from("/abs/x")));
    assert_eq!(
        expand_user_path("%(prefix)/share/t"),
        Some(PathBuf::from("/usr/share/t"))
    );
}

/// `core.hooksPath = ~name/…`, `include.path = ~name/…` and a program by `~name/…` in a global
/// config name places in a root inside that account's home; an unknown account names nothing.
#[test]
fn a_global_config_naming_by_tilde_user_names_places() {
    let (name, home) = own_account();
    let (_dir, tmp, root) = setup(&home);
    let rel = root.strip_prefix(&home).unwrap().display().to_string();
    for sub in ["githooks", "inc"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("fs1"), "true\n").unwrap();
    let global = tmp.join("gitconfig");
    let text = format!(
        "[core]\n\thooksPath = ~{name}/{rel}/githooks\n[include]\n\tpath = ~{name}/{rel}/inc/x.conf\n\
         \tpath = ~no-such-account-rt30/{rel}/other.conf\n"
    );
    std::fs::write(&global, text).unwrap();
    let text = format!("[core]\n\tfsmonitor = sh ~{name}/{rel}/fs1\n");
    std::fs::write(root.join("inc/x.conf"), text).unwrap();
    let places = places_with(&root, &[], &account(vec![global]));
    let hooks = place(&places, "githooks").expect("hooksPath ~name/ a place");
    assert_eq!(hooks.class, AutorunClass::GitHooks);
    let inc = place(&places, "inc/x.conf").expect("include ~name/ a place");
    assert_eq!(inc.class, AutorunClass::VcsConfig);
    let fs1 = place(&places, "fs1").expect("fsmonitor's script a place");
    assert!(fs1.why.contains("core.fsmonitor"), "{fs1:?}");
    assert!(place(&places, "other.conf").is_none(), "{places:?}");
    assert!(place(&places, "").is_none(), "{places:?}");
}

/// `init.templateDir` (a global config's, `GIT_TEMPLATE_DIR`'s) into the root: its hooks, its
/// config and what that config runs are places; a relative one refuses the tree.
#[test]
fn a_template_directory_in_the_root_is_a_place() {
    let (_dir, tmp, root) = setup(&std::env::temp_dir());
    for sub in ["tmpl/hooks", "envtmpl/hooks"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("tmpl/hooks/post-checkout"), "#!/bin/sh\n").unwrap();
    let text = format!("[core]\n\tfsmonitor = {}\n", root.join("fs2").display());
    std::fs::write(root.join("tmpl/config"), text).unwrap();
    let global = tmp.join("gitconfig");
    let text = format!("[init]\n\ttemplateDir = {}\n", root.join("tmpl").display());
    std::fs::write(&global, text).unwrap();
    let mut account = account(vec![global.clone()]);
    account
        .template_dirs
        .push(root.join("envtmpl").display().to_string());
    let places = places_with(&root, &[], &account);
    for (rel, class) in [
        ("tmpl/hooks", AutorunClass::GitHooks),
        ("tmpl", AutorunClass::VcsConfig),
        ("tmpl/config", AutorunClass::VcsConfig),
        ("fs2", AutorunClass::GitHooks),
        ("envtmpl/hooks", AutorunClass::GitHooks),
        ("envtmpl", AutorunClass::VcsConfig),
    ] {
        let got = place(&places, rel).unwrap_or_else(|| panic!("{rel}: {places:?}"));
        assert_eq!(got.class, class, "{rel}");
    }
    assert!(place(&places, "").is_none(), "{places:?}");
    std::fs::write(&global, "[init]\n\ttemplateDir = tmpl\n").unwrap();
    account.template_dirs.clear();
    let places = places_with(&root, &[], &account);
    let whole = place(&places, "").expect("a relative template dir refuses the tree");
    assert!(whole.why.contains("template directory"), "{whole:?}");
    // git's own prefix is a system directory: it names nothing here, and refuses nothing.
    std::fs::write(&global, "[init]\n\ttemplateDir = %(prefix)/share/t\n").unwrap();
    let places = places_with(&root, &[], &account);
    assert!(place(&places, "").is_none(), "{places:?}");
}

/// Every program key of a global config names, by an absolute or `~/` path, a place in a root
/// that is no repository; a relative one names nothing; one that cannot be read refuses the tree.
#[test]
fn a_global_configs_programs_into_a_root_without_a_repository_are_places() {
    let (_dir, tmp, root) = setup(&std::env::temp_dir());
    let at = |rel: &str| root.join(rel).display().to_string();
    let global = tmp.join("gitconfig");
    let text = format!(
        "[core]\n\tfsmonitor = {}\n\tpager = {} -R\n\teditor = tools/ed\n\
         [credential]\n\thelper = !{}\n[gpg]\n\tprogram = {}\n[diff]\n\texternal = {}\n\
         [alias]\n\tx = !sh {}\n",
        at("fsmon"),
        at("pager"),
        at("cred"),
        at("gpg"),
        at("diffx"),
        at("alias.sh"),
    );
    std::fs::write(&global, text).unwrap();
    let places = places_with(&root, &[], &account(vec![global.clone()]));
    for rel in ["fsmon", "pager", "cred", "gpg", "diffx", "alias.sh"] {
        let got = place(&places, rel).unwrap_or_else(|| panic!("{rel}: {places:?}"));
        assert_eq!(got.class, AutorunClass::GitHooks, "{rel}");
    }
    assert!(place(&places, "tools/ed").is_none(), "{places:?}");
    assert!(place(&places, "").is_none(), "{places:?}");
    std::fs::write(&global, "[core]\n\tfsmonitor = \"$(cat list)\"\n").unwrap();
    let places = places_with(&root, &[], &account(vec![global]));
    let whole = place(&places, "").expect("an unreadable program refuses the tree");
    assert!(whole.why.contains("core.fsmonitor"), "{whole:?}");
}

/// The same spellings in a repository's own config, read from its top: `~name/` expanded,
/// `init.templateDir` there read as the account's.
#[test]
fn a_repository_config_naming_by_tilde_user_names_places() {
    let (name, home) = own_account();
    let (_dir, _tmp, root) = setup(&home);
    let rel = root.strip_prefix(&home).unwrap().display().to_string();
    for sub in [".git", "hooks2", "tmpl/hooks"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("fsm"), "true\n").unwrap();
    let text = format!(
        "[core]\n\thooksPath = ~{name}/{rel}/hooks2\n\tfsmonitor = ~{name}/{rel}/fsm\n\
         [init]\n\ttemplateDir = ~{name}/{rel}/tmpl\n"
    );
    std::fs::write(root.join(".git/config"), text).unwrap();
    let places = places_with(&root, &[PathBuf::from(".git")], &account(Vec::new()));
    for (rel, class) in [
        ("hooks2", AutorunClass::GitHooks),
        ("fsm", AutorunClass::GitHooks),
        ("tmpl/hooks", AutorunClass::GitHooks),
        ("tmpl", AutorunClass::VcsConfig),
    ] {
        let got = place(&places, rel).unwrap_or_else(|| panic!("{rel}: {places:?}"));
        assert_eq!(got.class, class, "{rel}");
    }
    assert!(place(&places, "").is_none(), "{places:?}");
}

/// Red team 46a (availability): a program value built on a variable the owner's start-up files
/// give an absolute value (`core.pager = $TOOLS/pager`) names that file, under each value, as
/// git started from that shell runs it; it no longer refuses the whole tree. A variable set
/// nowhere read still does, and `$TOOLSX` is not `$TOOLS`.
#[test]
fn program_values_on_the_owner_s_variables_name_their_files() {
    let (_dir, tmp, root) = setup(&std::env::temp_dir());
    let global = tmp.join("gitconfig");
    std::fs::write(
        &global,
        "[core]\n\tpager = $TOOLS/pager -R\n\teditor = ${TOOLS}/ed\n",
    )
    .unwrap();
    let mut owner = account(vec![global.clone()]);
    owner.absolute_vars.insert(
        "TOOLS".into(),
        vec![
            root.join("tools").display().to_string(),
            root.join("more").display().to_string(),
        ],
    );
    let places = places_with(&root, &[], &owner);
    for rel in ["tools/pager", "more/pager", "tools/ed", "more/ed"] {
        let got = place(&places, rel).unwrap_or_else(|| panic!("{rel}: {places:?}"));
        assert_eq!(got.class, AutorunClass::GitHooks, "{rel}");
    }
    assert!(place(&places, "").is_none(), "{places:?}");
    for value in ["$UNSET/pager", "$TOOLSX/pager"] {
        std::fs::write(&global, format!("[core]\n\tpager = {value}\n")).unwrap();
        let places = places_with(&root, &[], &owner);
        assert!(place(&places, "").is_some(), "{value}: {places:?}");
    }
}
