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
        "/p/mcp.json",
        "/p/.envrc.example",
        "/p/bashrc",
        "/p/src/sitecustomize.py",
        "/p/.github/workflows/ci.yml",
        "/p/site-packages",
        "/p/lib/site-packages-old/module.py",
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

#[test]
fn toolchain_vcs_and_environment_places_are_classified() {
    let cases = [
        ("/p/.cargo/config.toml", "toolchain_config"),
        ("/p/sub/.cargo/config", "toolchain_config"),
        ("/p/rust-toolchain.toml", "toolchain_config"),
        ("/p/rust-toolchain", "toolchain_config"),
        ("/p/.npmrc", "toolchain_config"),
        ("/p/.yarnrc", "toolchain_config"),
        ("/p/.yarnrc.yml", "toolchain_config"),
        ("/p/.pnpmfile.cjs", "toolchain_config"),
        ("/p/.hg/hgrc", "vcs_config"),
        ("/p/.jj/repo/config.toml", "vcs_config"),
        ("/p/.sl/config", "vcs_config"),
        ("/p/.mise/config.toml", "directory_hooks"),
        ("/p/.mise/tasks/build", "directory_hooks"),
        ("/p/.config/mise/config.toml", "directory_hooks"),
        ("/p/.config/mise/conf.d/a.toml", "directory_hooks"),
        ("/p/.config/mise.toml", "directory_hooks"),
        ("/p/mise/config.toml", "directory_hooks"),
        ("/p/mise.dev.toml", "directory_hooks"),
        ("/p/.mise.dev.local.toml", "directory_hooks"),
        ("/p/.rtx.toml", "directory_hooks"),
        ("/p/.tool-versions", "directory_hooks"),
        ("/p/env/etc/conda/activate.d/x.sh", "python_startup"),
        ("/p/.cursor/mcp.json", "agent_config"),
        ("/p/.cursor/hooks.json", "agent_config"),
        ("/p/.windsurf/hooks.json", "agent_config"),
        ("/p/.roo/mcp.json", "agent_config"),
        ("/p/opencode.json", "agent_config"),
        ("/p/.opencode/plugin/p.ts", "agent_config"),
    ];
    for (path, want) in cases {
        assert_eq!(class(path), Some(want), "{path}");
    }
    for path in [
        "/p/.cargo/audit.toml",
        "/p/cargo/config.toml",
        "/p/config.toml",
        "/p/src/mise.rs",
        "/p/mise/README.md",
        "/p/tools/bin/run.sh",
        "/p/scripts/activate_env.sh",
        "/p/.env.local",
        "/p/.env.example",
        "/p/yarn/notes.md",
        "/p/src/node_modules.rs",
        "/p/docs/pip.conf.md",
        // pip reads pip.conf only at an environment's root (by content, write policy).
        "/p/docker/pip.conf",
        "/p/.yarn/versions/1a2b3c4d.yml",
        "/p/assets/levels/level1.iws",
        "/p/conda/recipe/meta.yaml",
        // A venv's `bin/` is recognised by its `pyvenv.cfg` (write policy), not by names.
        "/p/src/bin/activate.rs",
        "/p/scripts/bin/activate_account.py",
        "/p/venv/bin/activate",
    ] {
        assert_eq!(class(path), None, "{path}");
    }
}

#[test]
fn instruction_files_are_text_and_stay_writable() {
    for path in [
        "/p/CLAUDE.md",
        "/p/sub/CLAUDE.local.md",
        "/p/.claude/CLAUDE.md",
        "/p/.claude/rules/style.md",
        "/p/.claude/rules/a/b.md",
        "/p/AGENTS.md",
        "/p/GEMINI.md",
        "/p/.gemini/GEMINI.md",
        "/p/.cursorrules",
        "/p/.cursor/rules/style.mdc",
        "/p/.windsurf/rules/r.md",
        "/p/.windsurfrules",
        "/p/.clinerules",
        "/p/.clinerules/a.md",
        "/p/.roo/rules/r.md",
        "/p/.github/copilot-instructions.md",
        "/p/.github/instructions/x.instructions.md",
    ] {
        assert_eq!(class(path), None, "{path}");
    }
    // Configuration next to them, instruction names where they are commands, and auto-run
    // places inside a rules directory stay refused.
    for path in [
        "/p/.claude/settings.json",
        "/p/.claude/commands/CLAUDE.md",
        "/p/.claude/agents/rules/x.md",
        "/p/.cursor/rules/.claude/settings.json",
        "/p/.cursor/rules/.mcp.json",
        "/p/.cursor/rules/.envrc",
    ] {
        assert!(class(path).is_some(), "{path}");
    }
}

#[test]
fn everything_below_site_packages_is_python_startup() {
    // A `.pth` file's module (setuptools' `_distutils_hack`, virtualenv's `_virtualenv.py`) and
    // `pip` itself run at interpreter start or as `bin/pip`: any installed file is start-up code.
    for path in [
        "/p/.venv/lib/python3.11/site-packages/_distutils_hack/__init__.py",
        "/p/.venv/lib/python3.12/site-packages/_virtualenv.py",
        "/p/.venv/lib/python3.12/site-packages/pip/__init__.py",
        "/p/.venv/lib/python3.12/site-packages/distutils-precedence.pth",
        "/p/.venv/Lib/Site-Packages/x/y/z.txt",
        "/usr/lib/python3/dist-packages/apt/__init__.py",
        "/p/x.pth/lib/site-packages/module.py",
        "/p/site-packages/module.py",
    ] {
        assert_eq!(class(path), Some("python_startup"), "{path}");
    }
}

#[test]
fn more_agent_editor_hook_and_toolchain_names_are_classified() {
    let cases = [
        ("/p/.qwen/settings.json", "agent_config"),
        ("/p/.iflow/settings.json", "agent_config"),
        ("/p/.factory/hooks/h.sh", "agent_config"),
        ("/p/.junie/mcp/mcp.json", "agent_config"),
        ("/p/.amp/settings.json", "agent_config"),
        ("/p/.trae/mcp.json", "agent_config"),
        ("/p/.augment/settings.json", "agent_config"),
        ("/p/.continuerc.json", "agent_config"),
        ("/p/.clinerules/hooks/PreToolUse", "agent_config"),
        ("/p/.clinerules/hooks/rules/x.md", "agent_config"),
        ("/p/.clinerules/hooks/CLAUDE.md", "agent_config"),
        ("/p/.github/hooks/hooks.json", "agent_config"),
        ("/p/.helix/languages.toml", "editor_config"),
        ("/p/.helix/config.toml", "editor_config"),
        ("/p/.vimrc", "editor_config"),
        ("/p/_vimrc", "editor_config"),
        ("/p/.gvimrc", "editor_config"),
        ("/p/.lazy.lua", "editor_config"),
        ("/p/.lefthook-local.yml", "git_hooks"),
        ("/p/lefthook-local.yml", "git_hooks"),
        ("/p/lefthook.yml", "git_hooks"),
        ("/p/.lefthook.yaml", "git_hooks"),
        ("/p/lefthook.toml", "git_hooks"),
        ("/p/lefthook-local.jsonc", "git_hooks"),
        ("/p/.lintstagedrc", "git_hooks"),
        ("/p/.lintstagedrc.json", "git_hooks"),
        ("/p/.lintstagedrc.mjs", "git_hooks"),
        ("/p/lint-staged.config.js", "git_hooks"),
        ("/p/.bazeliskrc", "toolchain_config"),
        ("/p/.bazelversion", "toolchain_config"),
        ("/p/bunfig.toml", "toolchain_config"),
        ("/p/.bazelrc", "toolchain_config"),
        ("/p/.mvn/jvm.config", "toolchain_config"),
        ("/p/sub/.mvn/maven.config", "toolchain_config"),
        ("/p/.mvn/extensions.xml", "toolchain_config"),
        (
            "/p/.mvn/wrapper/maven-wrapper.properties",
            "toolchain_config",
        ),
        ("/p/.mvn/wrapper/maven-wrapper.jar", "toolchain_config"),
        (
            "/p/gradle/wrapper/gradle-wrapper.properties",
            "toolchain_config",
        ),
        (
            "/p/app/gradle/wrapper/gradle-wrapper.jar",
            "toolchain_config",
        ),
        ("/p/.opencode.json", "agent_config"),
        ("/p/.opencode.jsonc", "agent_config"),
        ("/p/.overcommit.yml", "git_hooks"),
        ("/p/.dir-locals.el", "editor_config"),
        ("/p/src/.dir-locals-2.el", "editor_config"),
        ("/p/proj.code-workspace", "editor_config"),
        ("/p/Team.Code-Workspace", "editor_config"),
        // Issue 23d: what tools load from the working directory by themselves.
        ("/p/.env", "directory_hooks"),
        ("/p/.autoenv.zsh", "directory_hooks"),
        ("/p/.rvmrc", "directory_hooks"),
        ("/p/.shadowenv.d/500_env.lisp", "directory_hooks"),
        ("/p/.pdbrc", "shell_startup"),
        ("/p/.perldb", "shell_startup"),
        ("/p/.Rprofile", "shell_startup"),
        ("/p/app/.Renviron", "shell_startup"),
        ("/p/.irbrc", "shell_startup"),
        ("/p/.iex.exs", "shell_startup"),
        ("/p/.ghci", "shell_startup"),
        ("/p/.gdbinit", "shell_startup"),
        ("/p/.jvmopts", "toolchain_config"),
        ("/p/.sbtopts", "toolchain_config"),
        ("/p/.mill-jvm-opts", "toolchain_config"),
        ("/p/gradle/gradle-daemon-jvm.properties", "toolchain_config"),
        ("/p/.bsp/sbt.json", "toolchain_config"),
        ("/p/.corepack.env", "toolchain_config"),
        ("/p/deploy/ansible.cfg", "toolchain_config"),
        ("/p/.direnv/flake-profile-a.rc", "directory_hooks"),
        ("/p/commitlint.config.js", "git_hooks"),
        ("/p/.commitlintrc.json", "git_hooks"),
        ("/p/.bundle/config", "toolchain_config"),
        ("/p/hie.yaml", "editor_config"),
        ("/p/.lsp/config.edn", "editor_config"),
        ("/p/.vim/coc-settings.json", "editor_config"),
        ("/p/_exrc", "editor_config"),
        ("/p/.theia/tasks.json", "editor_config"),
        ("/p/.vs/tasks.vs.json", "editor_config"),
        ("/p/x.sublime-project", "editor_config"),
        ("/p/.externalToolBuilders/b.launch", "editor_config"),
        ("/p/.openhands/setup.sh", "agent_config"),
        ("/p/node_modules/eslint/lib/api.js", "installed_packages"),
        ("/p/web/node_modules/.bin/jest", "installed_packages"),
        ("/p/.yarn/plugins/p.cjs", "installed_packages"),
        ("/p/.pnp.cjs", "installed_packages"),
    ];
    for (path, want) in cases {
        assert_eq!(class(path), Some(want), "{path}");
    }
    // Instruction text next to them stays writable; ordinary look-alikes are not places.
    for path in [
        "/p/.clinerules/style.md",
        "/p/.clinerules/workflows/release.md",
        "/p/.github/workflows/hooks.yml",
        "/p/.github/instructions/hooks.md",
        "/p/.junie/guidelines.md",
        "/p/.trae/rules/project_rules.md",
        "/p/.augment/rules/r.md",
        "/p/.qwen/QWEN.md",
        "/p/QWEN.md",
        "/p/pnpm-workspace.yaml",
        "/p/docs/lefthook.md",
        "/p/lefthook.yml.orig",
        "/p/lint-staged.md",
        "/p/vimrc",
        "/p/src/hooks/useThing.ts",
        // The project's own build definitions stay writable (see docs/design/protected-set.md).
        "/p/pom.xml",
        "/p/build.gradle",
        "/p/gradle.properties",
        "/p/gradlew",
        "/p/mvnw",
        "/p/BUILD.bazel",
        "/p/jvm.config",
        "/p/src/main/resources/extensions.xml",
        "/p/docs/workspace.md",
    ] {
        assert_eq!(class(path), None, "{path}");
    }
}

#[test]
fn git_config_is_parsed_as_git_reads_it() {
    use super::gitconfig::{Entry, parse};
    let text = "# c\n[Core]\n\tHooksPath = a b  ; x\n[core] hookspath = \"q;#\\\"\" \n\
                [includeIf \"gitdir:~/a b/\"] path = x\\\ny\n[section.Sub]\nbare\n\
                [broken\nkey = v\nbad = \"open\n[include]path=\\q\n";
    let got: Vec<(String, Option<String>, String, Option<String>)> = parse(text)
        .into_iter()
        .map(
            |Entry {
                 section,
                 subsection,
                 key,
                 value,
             }| (section, subsection, key, value),
        )
        .collect();
    let own = |s: &str| s.to_string();
    assert_eq!(
        got,
        vec![
            (own("core"), None, own("hookspath"), Some(own("a b"))),
            (own("core"), None, own("hookspath"), Some(own("q;#\""))),
            (
                own("includeif"),
                Some(own("gitdir:~/a b/")),
                own("path"),
                Some(own("xy"))
            ),
            (own("section"), Some(own("sub")), own("bare"), None),
            (own("section"), Some(own("sub")), own("key"), Some(own("v"))),
        ]
    );
}
