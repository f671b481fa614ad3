//! Unit tests: the content check takes its class and reason from the kind of file a target is
//! read as — a `pyproject.toml` or `setup.cfg` gaining a key that makes a linter load code is
//! refused as `editor_config` (red team 34 B1), also under a name it is reachable as through a
//! symlink, and the owner's `editor_config` opt-in (not `git_hooks`) opens it.

use super::*;

use super::tests::fixture;

const PYPROJECT: &str = "[project]\nname = \"a\"\n\n[tool.ruff]\nline-length = 88\n";
const HOOKED: &str = "[project]\nname = \"a\"\n\n[tool.ruff]\nline-length = 88\n\n[tool.pylint.main]\ninit-hook = \"import os\"\n";

fn check(
    policy: &PathPolicy,
    root: &Path,
    rel: &str,
    old: &str,
    new: &str,
) -> Result<(), WriteRefusal> {
    let target = WriteRoot::open(policy, root)
        .unwrap()
        .resolve(policy, &root.join(rel), Parents::Create)
        .unwrap();
    assert!(target.checks_content(), "{rel}");
    target.check_content(policy, Some(old.as_bytes()), new.as_bytes())
}

#[test]
fn a_code_key_change_is_refused_as_editor_config_under_every_name() {
    use crate::protected::autorun::AutorunAllowed;
    let f = fixture();
    std::fs::write(f.root.join("pyproject.toml"), PYPROJECT).unwrap();
    std::fs::create_dir_all(f.root.join("cfg")).unwrap();
    std::fs::write(f.root.join("cfg/py.toml"), PYPROJECT).unwrap();
    std::os::unix::fs::symlink("../cfg/py.toml", f.root.join("src/pyproject.toml")).unwrap();
    for (rel, through) in [
        ("pyproject.toml", None),
        ("cfg/py.toml", Some("src/pyproject.toml")),
    ] {
        let err = check(&f.policy, &f.root, rel, PYPROJECT, HOOKED).unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted);
        let message = err.to_string();
        assert!(
            matches!(
                err,
                WriteRefusal::AutorunPlace {
                    class: "editor_config",
                    ..
                }
            ) && message.contains(
                "it changes tool.pylint.main.init-hook in pyproject.toml, a key that makes the \
                 owner's linters or editor extensions load code"
            ) && message.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=editor_config")
                && through.is_none_or(|name| {
                    message.contains(&format!(
                        "reachable as {} through a symlink",
                        f.root.join(name).display()
                    ))
                }),
            "{rel}: {message}"
        );
        // Other edits pass, also of a file that has the key already.
        check(
            &f.policy,
            &f.root,
            rel,
            PYPROJECT,
            &PYPROJECT.replace("88", "100"),
        )
        .unwrap();
        check(
            &f.policy,
            &f.root,
            rel,
            HOOKED,
            &HOOKED.replace("88", "100"),
        )
        .unwrap();
    }
    let hooks = f
        .policy
        .clone()
        .with_autorun_allowed(AutorunAllowed::parse("git_hooks").unwrap());
    assert!(check(&hooks, &f.root, "pyproject.toml", PYPROJECT, HOOKED).is_err());
    let editors = f
        .policy
        .clone()
        .with_autorun_allowed(AutorunAllowed::parse("editor_config").unwrap());
    check(&editors, &f.root, "cfg/py.toml", PYPROJECT, HOOKED).unwrap();
    // setup.cfg's reason names the section and key; an unreadable one names the format.
    let cfg = "[metadata]\nname = a\n\n[mypy]\nplugins = a.mypy\n";
    std::fs::write(f.root.join("setup.cfg"), cfg).unwrap();
    let err = check(
        &f.policy,
        &f.root,
        "setup.cfg",
        cfg,
        &cfg.replace("a.mypy", "./x.py"),
    );
    assert!(
        err.as_ref()
            .unwrap_err()
            .to_string()
            .contains("it changes [mypy] plugins in setup.cfg"),
        "{err:?}"
    );
    let err = check(&f.policy, &f.root, "setup.cfg", cfg, "plugins = x\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("the new setup.cfg is no INI this gateway can read"),
        "{err}"
    );
}
