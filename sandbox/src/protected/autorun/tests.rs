//! Unit tests of the auto-run classification and the owner's per-class opt-in.

use super::*;

fn class(path: &str) -> Option<&'static str> {
    autorun_class(Path::new(path)).map(AutorunClass::name)
}

#[test]
fn places_are_classified() {
    let cases = [
        ("/p/.claude/settings.json", "agent_config"),
        ("/p/.claude/settings.local.json", "agent_config"),
        ("/p/.claude/commands/x.md", "agent_config"),
        ("/p/.claude/agents/a.md", "agent_config"),
        ("/p/.claude/hooks/h.sh", "agent_config"),
        ("/p/sub/project/.claude/settings.json", "agent_config"),
        ("/p/.mcp.json", "agent_config"),
        ("/p/.CLAUDE/Settings.json", "agent_config"),
        ("/p/.Mcp.JSON", "agent_config"),
        ("/p/.vscode/tasks.json", "editor_config"),
        ("/p/.VSCode/tasks.json", "editor_config"),
        ("/p/.idea/workspace.xml", "editor_config"),
        ("/p/.envrc", "directory_hooks"),
        ("/p/a/b/.envrc", "directory_hooks"),
        (
            "/p/.venv/lib/python3.12/site-packages/evil.pth",
            "python_startup",
        ),
        (
            "/p/.venv/lib/python3.12/site-packages/x/evil.PTH",
            "python_startup",
        ),
        (
            "/usr/lib/python3/dist-packages/sitecustomize.py",
            "python_startup",
        ),
        (
            "/p/v/lib/python3.12/site-packages/sitecustomize/__init__.py",
            "python_startup",
        ),
        (
            "/p/v/lib/site-packages/__pycache__/usercustomize.cpython-312.pyc",
            "python_startup",
        ),
        ("/p/.venv/pyvenv.cfg", "python_startup"),
        ("/p/.husky/pre-commit", "git_hooks"),
        ("/p/.pre-commit-config.yaml", "git_hooks"),
        ("/p/.bashrc", "shell_startup"),
        ("/p/x/.zshenv", "shell_startup"),
        // Unicode case folding: the Kelvin sign meets `k`.
        ("/p/v/site-pac\u{212a}ages/a.pth", "python_startup"),
    ];
    for (path, want) in cases {
        assert_eq!(class(path), Some(want), "{path}");
    }
}

#[test]
fn ordinary_files_with_similar_names_are_not_places() {
    for path in [
        "/p/docs/.vscode.md",
        "/p/src/settings.json",
        "/p/claude/settings.json",
        "/p/.claude.md",
        "/p/evil.pth",
        "/p/lib/python3.12/packages/evil.pth",
        "/p/site-packages.txt",
        "/p/site-packages/module.py",
        "/p/mcp.json",
        "/p/.envrc.example",
        "/p/bashrc",
        "/p/src/sitecustomize.py",
        "/p/v/lib/site-packages/sitecustomizer.py",
        "/p/.github/workflows/ci.yml",
        "/p/x.pth/lib/site-packages/module.py",
    ] {
        assert_eq!(class(path), None, "{path}");
    }
}

#[test]
fn the_opt_in_is_per_class() {
    let allowed = AutorunAllowed::parse("editor_config, directory_hooks").unwrap();
    assert!(allowed.allows(AutorunClass::EditorConfig));
    assert!(allowed.allows(AutorunClass::DirectoryHooks));
    assert!(!allowed.allows(AutorunClass::AgentConfig));
    assert_eq!(allowed.names(), ["editor_config", "directory_hooks"]);
    assert_eq!(AutorunAllowed::from_names(allowed.names()), allowed);
    assert_eq!(AutorunAllowed::parse("").unwrap(), AutorunAllowed::NONE);
    assert_eq!(AutorunAllowed::parse("all").unwrap(), AutorunAllowed::all());
    let err = AutorunAllowed::parse("editor").unwrap_err();
    assert!(err.contains("unknown class \"editor\""), "{err}");
    assert_eq!(
        AutorunAllowed::from_names(["future_class"]),
        AutorunAllowed::NONE
    );
}
