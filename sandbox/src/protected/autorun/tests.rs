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
        // Red team 28 B1: imported at every start from anywhere on the path.
        ("/p/src/sitecustomize.py", "python_startup"),
        ("/p/src/usercustomize.py", "python_startup"),
        ("/p/src/UserCustomize.py", "python_startup"),
        ("/p/src/usercustomize.pyc", "python_startup"),
        (
            "/p/src/__pycache__/sitecustomize.cpython-312.pyc",
            "python_startup",
        ),
        (
            "/p/lib/usercustomize.cpython-312-x86_64-linux-gnu.so",
            "python_startup",
        ),
        ("/p/src/sitecustomize/__init__.py", "python_startup"),
        ("/p/venv/bin/activate", "python_startup"),
        ("/p/env/bin/activate.fish", "python_startup"),
        ("/p/.letta/settings.json", "agent_config"),
        ("/p/.vibe/config.toml", "agent_config"),
        ("/p/.envrc.local", "directory_hooks"),
        ("/p/.rbenv-vars", "directory_hooks"),
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
        "/p/src/sitecustomize_test.py",
        "/p/docs/usercustomize.md",
        "/p/bin/activate_all.sh",
        "/p/scripts/activate",
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
        // A venv's `bin/` is recognised by its `pyvenv.cfg` (write policy); by name only its
        // activation scripts (auto-venv shell plugins source them without one).
        "/p/src/bin/activate.rs",
        "/p/scripts/bin/activate_account.py",
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
        ("/p/.huskyrc", "git_hooks"),
        ("/p/.huskyrc.json", "git_hooks"),
        ("/p/husky.config.js", "git_hooks"),
        ("/p/.simple-git-hooks.json", "git_hooks"),
        ("/p/simple-git-hooks.cjs", "git_hooks"),
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
        ("/p/.codebuddy/settings.json", "agent_config"),
        ("/p/.flox/env/manifest.toml", "directory_hooks"),
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

/// A repository in a temporary write root, and what git's configuration and hooks name in it.
struct Repo {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
}

impl Repo {
    fn new(config: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("work");
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), config).unwrap();
        Self { _tmp: tmp, root }
    }

    fn put(&self, rel: &str, content: &str) -> &Self {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        self
    }

    /// Why a write to `rel` is refused as a place git names, if it is.
    fn why(&self, rel: &str) -> Option<String> {
        gitconfig::places(&self.root, &[std::path::PathBuf::from(".git")])
            .into_iter()
            .find(|place| {
                let Ok(below) = Path::new(rel).strip_prefix(&place.at) else {
                    return false;
                };
                let names: Vec<String> = below
                    .iter()
                    .map(|n| n.to_str().unwrap().to_lowercase())
                    .collect();
                place.scope.reaches(&names)
            })
            .map(|place| place.why)
    }

    fn refused(&self, rels: &[&str]) {
        for rel in rels {
            assert!(self.why(rel).is_some(), "{rel} should be refused");
        }
    }

    fn allowed(&self, rels: &[&str]) {
        for rel in rels {
            assert_eq!(self.why(rel), None, "{rel} should be writable");
        }
    }

    /// Every write refused, the key named.
    fn whole_tree(&self, key: &str) {
        let why = self.why("src/unrelated.rs").expect("whole tree refused");
        assert!(why.contains(key) && why.contains("cannot be told"), "{why}");
    }
}

/// Red team 23 c1 B1a, B1b: wrapper options are read by each wrapper's grammar, and a
/// package runner's interpreter script names the whole tree.
#[test]
fn rt_c1_b1a_b1b_wrappers_leave_no_script_directory_writable() {
    let repo = Repo::new(
        "[diff \"nb\"]\n\ttextconv = timeout -s KILL 30 python3 tools/nbconv.py\n\
         [filter \"f2\"]\n\tclean = env -u PYTHONPATH python3 tools2/c.py\n\
         [diff \"s\"]\n\ttextconv = stdbuf -o L python3 tools3/c.py\n\
         [diff \"fl\"]\n\ttextconv = flock /tmp/l python3 tools8/tc.py\n",
    );
    repo.refused(&[
        "tools/json.py",
        "tools2/json.py",
        "tools3/json.py",
        "tools8/json.py",
        "tools8/deep/data.json",
    ]);
    repo.allowed(&["src/lib.rs", "tmp/l", "30", "L"]);
    let npx = Repo::new("[merge \"m\"]\n\tdriver = npx tsx tools5/merge.ts %O %A %B\n");
    npx.put("tools5/merge.ts", "import './lib'\n");
    npx.whole_tree("merge.m.driver");
}

/// B1c, B1d, B1e: `-m` run elsewhere than the top, an assignment before the command and inline
/// code.
#[test]
fn rt_c1_b1c_b1d_b1e_modules_elsewhere_assignments_and_inline_code_are_the_whole_tree() {
    for (config, key) in [
        (
            "[core]\n\tfsmonitor = cd tools && python3 -mfsmon\n",
            "core.fsmonitor",
        ),
        (
            "[diff \"j9\"]\n\ttextconv = PYTHONPATH=tools9 python3 -m tcmod\n",
            "diff.j9.textconv",
        ),
        (
            "[diff \"j6\"]\n\ttextconv = node -e \"require('./tools6/tc.js')\"\n",
            "diff.j6.textconv",
        ),
        (
            "[core]\n\tpager = python3 -X dev -c 'import p'\n",
            "core.pager",
        ),
        ("[core]\n\tpager = deno run pager.ts\n", "core.pager"),
        (
            "[core]\n\tpager = bash -c \"node -r ./x.js\"\n",
            "core.pager",
        ),
    ] {
        Repo::new(config).whole_tree(key);
    }
    // `-I` keeps the tree off `sys.path`.
    Repo::new("[filter \"nb\"]\n\tclean = python3 -I -m nbstripout\n")
        .allowed(&["nbstripout.py", "src/lib.rs"]);
}

/// H4b: `python -m MODULE` from the top (nbstripout's filter) names what Python imports from
/// there, not the whole tree: the project's sources, notebooks and docs stay writable.
#[test]
fn python_m_from_the_top_names_only_what_shadows_its_imports() {
    for config in [
        // As git writes what `nbstripout --install` sets (quotes escaped in the file).
        "[filter \"nbstripout\"]\n\tclean = \\\"/usr/bin/python3\\\" -m nbstripout\n\
         \tsmudge = cat\n[diff \"ipynb\"]\n\ttextconv = \\\"/usr/bin/python3\\\" -m nbstripout -t\n",
        "[filter \"nbstripout\"]\n\tclean = \"/usr/bin/python3\" -m nbstripout\n",
        "[filter \"nbstripout\"]\n\tclean = python3 -m nbstripout --attributes .nbstripout\n",
        "[filter \"nbstripout\"]\n\tclean = '/opt/conda/bin/python3.11' -mnbstripout\n",
    ] {
        let repo = Repo::new(config);
        repo.put("mypkg/__init__.py", "")
            .put("src/pkg/module.py", "");
        repo.allowed(&[
            "src/pkg/module.py",
            "src/pkg/__init__.py",
            "notebooks/x.ipynb",
            "README.md",
            "mypkg/module.py",
            "docs/conf.py",
            "tests/test_x.py",
        ]);
        repo.refused(&[
            "nbstripout.py",
            "json.py",
            "JSON.py",
            "mypkg/__init__.py",
            "newpkg/__init__.py",
            "newpkg/__init__.cpython-312-x86_64-linux-gnu.so",
            "newpkg/__init__.pyc",
            "nbstripout/x.py",
            "nbstripout/data/notes.txt",
            "__pycache__/x.pyc",
            "__pycache__/deep/x",
            "_socket.so",
            "_socket.cpython-312-x86_64-linux-gnu.so",
            "yaml.pyc",
            "x.pyd",
        ]);
        let why = repo.why("json.py").unwrap();
        assert!(
            why.contains("filter.nbstripout.clean") && !why.contains("cannot be told"),
            "{why}"
        );
    }
    // Named with its arguments: nbstripout's attributes file is read as its configuration.
    Repo::new(
        "[filter \"nbstripout\"]\n\tclean = python3 -m nbstripout --attributes .nbstripout\n",
    )
    .refused(&[".nbstripout"]);
    // Elsewhere than the top, or a module that is no dotted name: every write.
    Repo::new("[filter \"nb\"]\n\tclean = cd sub && python3 -m nbstripout\n")
        .whole_tree("filter.nb.clean");
    Repo::new("[filter \"nb\"]\n\tclean = python3 -m ./nbstripout\n").whole_tree("filter.nb.clean");
    // A script run from elsewhere runs `python -m` there.
    let script = Repo::new("[filter \"nb\"]\n\tclean = cd tools && sh run.sh\n");
    script.put("tools/run.sh", "python3 -m nbstripout\n");
    script.whole_tree("filter.nb.clean");
    // A hook runs from the top: same reading for its lines, and for the scripts it runs there.
    let hook = Repo::new("");
    hook.put(
        ".git/hooks/pre-commit",
        "#!/bin/sh\nset -e\npython3 -m mylint --fix\nsh scripts/check.sh\n",
    )
    .put("scripts/check.sh", "python3 -m other_check\n");
    hook.allowed(&["src/pkg/module.py", "notebooks/x.ipynb", "README.md"]);
    hook.refused(&[
        "mylint.py",
        "mylint/rules.py",
        "other_check/x.py",
        "json.py",
        "scripts/check.sh",
    ]);
}

/// B1f, B1g: a subshell's `cd` ends at `)`; Python's script directory is a place at any depth.
#[test]
fn rt_c1_b1f_b1g_subshells_and_python_packages() {
    let repo = Repo::new(
        "[diff \"j10\"]\n\ttextconv = \"(cd tools10 && true); python3 sub/conv10.py\"\n\
         [diff \"ok\"]\n\ttextconv = python3 toolsok/conv.py\n",
    );
    repo.refused(&[
        "sub/conv10.py",
        "sub/json.py",
        "toolsok/nblib/util.py",
        "toolsok/nblib/__init__.py",
        "toolsok/data/table.csv",
    ]);
    repo.allowed(&["tools10/sub/conv10.py", "src/lib.rs", "tools10/x.py"]);
}

/// B2: a regular hook file's lines name what it runs, and so on through the shell scripts it
/// runs; a hook manager's generated hook runs only the manager.
#[test]
fn rt_c1_b2_hook_files_are_read_for_what_they_run() {
    let repo = Repo::new("[core]\n\thooksPath = ci/hooks\n");
    repo.put(
        ".git/hooks/pre-commit",
        "#!/bin/sh\nexec ./scripts/pre-commit.sh \"$@\"\n",
    )
    .put(
        "scripts/pre-commit.sh",
        "#!/bin/sh\nset -e\n. ./scripts/lib/common.sh\npython3 tools/lint.py\n",
    )
    .put(
        ".git/hooks/post-merge.sample",
        "#!/bin/sh\nexec ./scripts/sample.sh\n",
    )
    .put(
        "ci/hooks/pre-push",
        "#!/usr/bin/env bash\n# checks\nsh \\\n  ci/push.sh\n",
    )
    .put(
        "ci/hooks/commit-msg",
        "#!/bin/sh\nnpx --no -- commitlint --edit \"$1\" && npm test && make check\n",
    );
    repo.refused(&[
        "scripts/pre-commit.sh",
        "scripts/lib/common.sh",
        "tools/lint.py",
        "tools/helpers/x.py",
        "ci/push.sh",
        "ci/hooks/anything",
    ]);
    repo.allowed(&[
        "scripts/sample.sh",
        "scripts/other.sh",
        "src/lib.rs",
        "ci/other.sh",
    ]);
    // A hook whose lines compute what they run, or another interpreter's hook, is the whole tree.
    for hook in [
        "#!/bin/sh\nexec \"$(git rev-parse --show-toplevel)/scripts/x.sh\"\n",
        "#!/usr/bin/env node\nrequire('../../tools/x')\n",
        "#!/bin/sh\nexec node tools/h.js\n",
        "#!/bin/sh\nPYTHONPATH=tools python3 -m checks\n",
    ] {
        let repo = Repo::new("");
        repo.put(".git/hooks/pre-commit", hook);
        repo.whole_tree("pre-commit");
    }
    // A `#!/usr/bin/env python3` hook: its directory (the hooks dir) is already the place.
    let py = Repo::new("[core]\n\thooksPath = hk\n");
    py.put("hk/pre-commit", "#!/usr/bin/env python3\nimport checks\n");
    py.refused(&["hk/checks.py"]);
    py.allowed(&["src/lib.rs"]);
    // Generated hooks of pre-commit and lefthook run their manager, whose config is refused
    // by name; what that config runs is the project's checks (writable, like a Makefile).
    let managed = Repo::new("");
    managed
        .put(
            ".git/hooks/pre-commit",
            "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n\
             HERE=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nexec \"$INSTALL_PYTHON\" -mpre_commit\n",
        )
        .put(
            ".git/hooks/pre-push",
            "#!/bin/sh\ncall_lefthook()\n{\n  \"$LEFTHOOK_BIN\" \"$@\"\n}\ncall_lefthook run pre-push\n",
        );
    managed.allowed(&["src/lib.rs", "scripts/lint.sh", "tools/yaml.py"]);
    // pre-commit's hook runs `python -mpre_commit` from the top: what shadows its imports
    // there is a place.
    managed.refused(&[
        "pre_commit.py",
        "pre_commit/main.py",
        "yaml.py",
        "cfgv/__init__.py",
        "__pycache__/yaml.cpython-312.pyc",
        "_yaml.cpython-312-x86_64-linux-gnu.so",
    ]);
    managed.allowed(&["src/pkg/module.py", "notebooks/x.ipynb", "README.md"]);
}

/// husky 9 points core.hooksPath at `.husky/_`, whose runner runs `.husky/<hook>` with `sh -e`;
/// husky 8's hooks source `_/husky.sh` through `$(dirname -- "$0")`.
#[test]
fn husky_hooks_are_read_through_husky_s_runner() {
    let v9 = Repo::new("[core]\n\thooksPath = .husky/_\n");
    v9.put(
        ".husky/_/h",
        "#!/usr/bin/env sh\nn=$(basename \"$0\")\nsh -e \"$s\" \"$@\"\n",
    )
    .put(
        ".husky/_/pre-commit",
        "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n",
    )
    .put(
        ".husky/_/pre-push",
        "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n",
    )
    .put(".husky/pre-commit", "npx lint-staged\nnpm test\n")
    .put(".husky/pre-push", "sh scripts/push-check.sh\n");
    v9.refused(&["scripts/push-check.sh"]);
    v9.allowed(&["src/lib.rs", "scripts/other.sh"]);
    let v8 = Repo::new("[core]\n\thooksPath = .husky\n");
    v8.put(
        ".husky/_/husky.sh",
        "#!/usr/bin/env sh\nreadonly hook_name=\"$(basename -- \"$0\")\"\nsh -e \"$0\" \"$@\"\n",
    )
    .put(
        ".husky/pre-commit",
        "#!/usr/bin/env sh\n. \"$(dirname -- \"$0\")/_/husky.sh\"\n\nnpx lint-staged\n",
    );
    v8.allowed(&["src/lib.rs"]);
}

/// B4: git-lfs's program keys and any key whose name says it runs a program.
#[test]
fn rt_c1_b4_program_keys_of_extensions_are_read() {
    let repo = Repo::new(
        "[lfs \"extension.x\"]\n\tclean = python3 scripts/lfsx.py %f\n\tsmudge = ./bin/lfs-smudge %f\n\
         [lfs \"customtransfer.t\"]\n\tpath = tools/xfer\n\targs = tools/xfer-args.sh\n\
         [someext]\n\thookcommand = ./ext/run\n",
    );
    repo.refused(&[
        "scripts/lfsx.py",
        "scripts/other.py",
        "bin/lfs-smudge",
        "tools/xfer",
        "tools/xfer-args.sh",
        "ext/run",
    ]);
    repo.allowed(&["src/lib.rs", "tools/other"]);
}

/// Programs outside the tree, and a project with no program values, name nothing in it.
#[test]
fn programs_outside_the_tree_leave_the_project_writable() {
    let repo = Repo::new(
        "[filter \"lfs\"]\n\tprocess = git-lfs filter-process\n\trequired = true\n\
         \tclean = git-lfs clean -- %f\n[diff]\n\ttool = meld\n[difftool \"meld\"]\n\tpath = /usr/bin/meld\n\
         [core]\n\tpager = delta\n\tquotePath = false\n[interactive]\n\tdiffFilter = delta --color-only\n\
         [credential]\n\thelper = cache --timeout=3600\n[submodule \"s\"]\n\tpath = libs/s\n",
    );
    repo.allowed(&["src/lib.rs", "libs/s/x.c", "README.md", "tools/a.py"]);
    Repo::new("[user]\n\tname = a\n").allowed(&["src/lib.rs", "scripts/x.sh"]);
}

#[test]
fn every_hook_manager_s_places_and_red_team_25_s_editor_configs_are_classified() {
    for path in [
        "/p/.nano-staged.json",
        "/p/.nanostagedrc",
        "/p/nano-staged.js",
        "/p/.nano-staged.mjs",
        "/p/nano-staged.cjs",
        "/p/.lefthook/pre-commit/check.sh",
        "/p/.lefthook-local/pre-commit/x.sh",
        "/p/.config/lefthook.yml",
        "/p/hk.pkl",
        "/p/hk.local.pkl",
        "/p/.rusty-hook.toml",
        "/p/rusty-hook.toml",
        "/p/captainhook.json",
        "/p/grumphp.yml",
        "/p/grumphp.yml.dist",
        "/p/grumphp.dist.yaml",
        "/p/.cargo-husky/hooks/pre-commit",
        "/p/git_hooks/pre-commit/x",
        "/p/.git-hooks/pre_commit/x.rb",
        "/p/.pre-commit-config.yml",
        "/p/.config/commitlintrc.js",
        "/p/.config/commitlintrc",
        "/p/.mookme.json",
        "/p/.hooks/pre-commit.json",
        "/p/.gitlint",
        "/p/.husky/pre-commit",
        "/p/.husky/CLAUDE.md",
        "/p/sub/.githooks/pre-push",
        "/p/.Lefthook/PRE-COMMIT/x.sh",
    ] {
        assert_eq!(class(path), Some("git_hooks"), "{path}");
    }
    for path in [
        "/p/.lazygit.yml",
        "/p/app/sub/.lazygit.yml",
        "/p/.lazygit.yaml",
        "/p/rust-analyzer.toml",
        "/p/.luarc.json",
        "/p/.luarc.jsonc",
        "/p/.lvimrc",
        "/p/.ycm_extra_conf.py",
    ] {
        assert_eq!(class(path), Some("editor_config"), "{path}");
    }
    assert_eq!(class("/p/devbox.json"), Some("directory_hooks"));
    // Ordinary files with similar names elsewhere stay writable.
    for path in [
        "/p/docs/nano-staged.md",
        "/p/nano-staged.txt",
        "/p/src/lefthook/runner.go",
        "/p/lefthook/x.sh",
        "/p/docs/grumphp.md",
        "/p/hk.toml",
        "/p/src/hooks/useThing.ts",
        "/p/src/git_hooks.py",
        "/p/commitlintrc.js",
        "/p/cfg/commitlintrc.js",
        "/p/lazygit.yml",
        "/p/docs/rust-analyzer.md",
        "/p/luarc.json",
        "/p/devbox.lock",
        "/p/package.yaml",
        "/p/.talismanrc",
        "/p/deno.json",
    ] {
        assert_eq!(class(path), None, "{path}");
    }
}

/// Red team 25 B5 and B6: Python reading its program from a file on stdin imports from the
/// working directory (its whole subtree); `python -m` from the top makes a directory named
/// like an installed namespace package a place, other top-level directories stay writable.
#[test]
fn rt25_b5_b6_stdin_programs_and_namespace_packages() {
    let repo = Repo::new("");
    repo.put(
        ".git/hooks/pre-commit",
        "#!/bin/sh\npython3 -B < ci/chk.py\n",
    );
    repo.refused(&["ci/chk.py", "chkhelp.py", "helpers/h.py", "src/lib.rs"]);
    let repo = Repo::new("");
    repo.put(
        ".git/hooks/pre-commit",
        "#!/bin/sh\ncd ci && python3 < chk.py\n",
    );
    repo.refused(&["ci/chk.py", "ci/chkhelp.py", "ci/helpers/h.py"]);
    repo.allowed(&["chkhelp.py", "src/lib.rs"]);
    let repo = Repo::new("");
    repo.put(
        ".git/hooks/pre-commit",
        "#!/bin/sh\npython3 -m rt25acmetool\n",
    )
    .put(".venv/lib/python3.12/site-packages/acme/util.py", "")
    .put(".venv/lib/python3.12/site-packages/regular/__init__.py", "");
    repo.refused(&[
        "acme/util.py",
        "acme/sub/deep.py",
        "google/protobuf/x.py",
        "jaraco/context.py",
        "chkhelp.py",
        "tests/__init__.py",
    ]);
    repo.allowed(&[
        "regular/util.py",
        "tests/test_x.py",
        "scripts/release.py",
        "src/pkg/module.py",
        "acmex/util.py",
        "docs/conf.py",
    ]);
}

/// Red team 25 B4: what lefthook's configuration names under names of the project's choosing
/// (an `extends:` target, a `source_dir`) is a place; a form not read names the whole tree.
#[test]
fn rt25_b4_lefthook_s_extended_files_and_script_dirs() {
    let repo = Repo::new("");
    repo.put(
        "lefthook.yml",
        "extends:\n  - config/hooks-extra.yml\nsource_dir: tools/lh\n",
    );
    repo.refused(&["config/hooks-extra.yml", "tools/lh/pre-commit/x.sh"]);
    repo.allowed(&["config/other.yml", "tools/x.sh", "src/lib.rs"]);
    let repo = Repo::new("");
    repo.put("lefthook.yml", "{extends: [config/x.yml]}\n");
    repo.whole_tree("lefthook");
}

/// Red team 28 B7: nix-direnv re-evaluates the flake an `.envrc` uses at the next `cd`; what it
/// sources runs with it. Both are places; a variable names the whole tree.
#[test]
fn what_an_envrc_sources_or_evaluates_is_a_directory_hook() {
    let repo = Repo::new("");
    repo.put(".envrc", "use flake\nsource_env_if_exists env/local.sh\n");
    for rel in ["flake.nix", "flake.lock", "env/local.sh"] {
        let why = repo.why(rel).unwrap_or_else(|| panic!("{rel} not a place"));
        assert!(why.contains(".envrc"), "{rel}: {why}");
    }
    assert!(repo.why("src/main.rs").is_none());
    repo.put(".envrc", "watch_file $NIX_FILES\n");
    let why = repo.why("src/main.rs").expect("whole tree refused");
    assert!(why.contains("cannot be told"), "{why}");
}

/// Red team 28 B2: a global config's `core.hooksPath` (directly or through an include) into a
/// write root that is no repository and lies in none makes that directory every repository's
/// hooks dir; a relative one names nothing there (it is relative to each repository's top).
#[test]
fn a_global_hooks_path_into_a_root_without_a_repository_is_a_place() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = std::fs::canonicalize(dir.path()).unwrap();
    let root = tmp.join("shared");
    std::fs::create_dir_all(root.join("githooks")).unwrap();
    std::fs::create_dir_all(root.join("hooks2")).unwrap();
    std::fs::create_dir_all(root.join("relhooks")).unwrap();
    let global = tmp.join("gitconfig");
    let included = tmp.join("more.conf");
    let hooks = root.join("githooks");
    let text = format!(
        "[core]\n\thooksPath = {}\n[include]\n\tpath = more.conf\n",
        hooks.display()
    );
    std::fs::write(&global, text).unwrap();
    let text = format!("[core]\n\thooksPath = {}\n", root.join("hooks2").display());
    std::fs::write(&included, text).unwrap();
    let local = tmp.join("local.conf");
    std::fs::write(&local, "[core]\n\thooksPath = relhooks\n").unwrap();
    let account = gitconfig::Account {
        configs: vec![global, local],
        ..Default::default()
    };
    let places = gitconfig::places_with(&root, &[], &account);
    let at: Vec<_> = places.iter().map(|p| p.at.clone()).collect();
    assert!(
        at.contains(&std::path::PathBuf::from("githooks")),
        "{places:?}"
    );
    assert!(
        at.contains(&std::path::PathBuf::from("hooks2")),
        "{places:?}"
    );
    assert!(
        !at.contains(&std::path::PathBuf::from("relhooks")),
        "{places:?}"
    );
    assert!(
        places.iter().all(|p| p.class == AutorunClass::GitHooks),
        "{places:?}"
    );
    // Without the global configs, nothing names them.
    assert!(gitconfig::places_with(&root, &[], &gitconfig::Account::default()).is_empty());
}

/// Red team 43a B3, B4: JavaScript linters' and formatters' configs in code form, which editor
/// extensions load on open or save, are `editor_config` (as pylint's and RuboCop's are);
/// their data forms and test runners' and bundlers' configs stay writable. autoenv's
/// `.env.leave` runs on leaving the directory.
#[test]
fn code_configs_editor_extensions_load_are_editor_config() {
    for path in [
        "/p/eslint.config.js",
        "/p/web/eslint.config.mjs",
        "/p/eslint.config.ts",
        "/p/.eslintrc.js",
        "/p/.eslintrc.cjs",
        "/p/prettier.config.cjs",
        "/p/.prettierrc.js",
        "/p/.prettierrc.mjs",
        "/p/stylelint.config.js",
        "/p/tailwind.config.ts",
        "/p/ESLint.Config.JS",
    ] {
        assert_eq!(class(path), Some("editor_config"), "{path}");
    }
    assert_eq!(class("/p/app/.env.leave"), Some("directory_hooks"));
    for path in [
        "/p/.eslintrc.json",
        "/p/.eslintrc.yml",
        "/p/.prettierrc",
        "/p/.prettierrc.json",
        "/p/jest.config.js",
        "/p/vite.config.ts",
        "/p/vitest.config.ts",
        "/p/src/eslint.config.js.md",
        "/p/tsconfig.json",
        "/p/.env.leave.example",
    ] {
        assert_eq!(class(path), None, "{path}");
    }
}
