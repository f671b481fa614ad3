//! Auto-run places with the real runner (issue 23, item 1): a `direct_write` and a
//! `worktree_write` session cannot create or change files that run by themselves later
//! (`.claude/settings.json` with a hook, `.mcp.json`, `.vscode/tasks.json`, `.envrc`, a `.pth` in
//! a venv's `site-packages` or a module a `.pth` imports, a subproject's `.claude/`, Copilot's
//! `.github/hooks/`, lefthook's local config), through Write (also creating the
//! parent), Edit or NotebookEdit; ordinary files with similar names stay writable; the owner's
//! per-class opt-in opens exactly its class. Also (F2, F3, F6): paths reachable from an auto-run
//! name through a repository's symlinks, embedded git repositories, a venv's `bin/`, and what a
//! command makes in its layer (never the real tree).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;
use crate::writes::{NOTEBOOK, reply_calls, start_profile};

pub(crate) fn results(v: &Value) -> Vec<Value> {
    v["pending_turn"]["tool_results"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool results in {v}"))
        .clone()
}

pub(crate) fn write(path: &Path, content: &str) -> Value {
    json!({"name": "Write", "arguments": {"file_path": path.to_string_lossy(), "content": content}})
}

const HOOK: &str =
    r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}"#;

/// The places the test tries, relative to the root, with the class each must be refused as.
const PLACES: &[(&str, &str)] = &[
    (".claude/settings.json", "agent_config"),
    ("sub/app/.claude/commands/x.md", "agent_config"),
    (".mcp.json", "agent_config"),
    (".vscode/tasks.json", "editor_config"),
    (".envrc", "directory_hooks"),
    (
        ".venv/lib/python3.12/site-packages/evil.pth",
        "python_startup",
    ),
    (
        ".venv/lib/python3.12/site-packages/_distutils_hack/__init__.py",
        "python_startup",
    ),
    (".github/hooks/hooks.json", "agent_config"),
    ("lefthook-local.yml", "git_hooks"),
    (".env", "directory_hooks"),
    (".pdbrc", "shell_startup"),
    (".mvn/jvm.config", "toolchain_config"),
    ("web/node_modules/eslint/lib/api.js", "installed_packages"),
    // Red team 28: imported at every interpreter start from an editable install's `src/`;
    // sourced on `cd` by auto-venv plugins; Letta Code's hooks.
    ("src/usercustomize.py", "python_startup"),
    ("venv/bin/activate", "python_startup"),
    (".letta/settings.json", "agent_config"),
];

/// Ordinary files with similar names: written.
const ORDINARY: &[&str] = &[
    "docs/.vscode.md",
    "src/settings.json",
    "evil.pth",
    "src/bin/activate.rs",
    "scripts/bin/activate_account.py",
    "pnpm-workspace.yaml",
    "src/sitecustomize_helpers.py",
];

/// Tries every place and every ordinary file in `root` in one reply, plus an Edit of an
/// existing `.claude/settings.local.json` and a NotebookEdit of `.idea/n.ipynb`; checks each
/// answer and that no auto-run file changed. `allowed` is the class the owner opened.
async fn try_places(chat: &ScriptedChatGpt, v: &Value, root: &Path, key: &str, allowed: &str) {
    let mut calls: Vec<Value> = PLACES
        .iter()
        .map(|(rel, _)| write(&root.join(rel), HOOK))
        .collect();
    calls.extend(ORDINARY.iter().map(|rel| write(&root.join(rel), "plain\n")));
    calls.push(json!({"name": "Edit", "arguments": {
        "file_path": root.join(".claude/settings.local.json").to_string_lossy(),
        "old_string": "{}", "new_string": HOOK}}));
    calls.push(json!({"name": "NotebookEdit", "arguments": {
        "notebook_path": root.join(".idea/n.ipynb").to_string_lossy(),
        "cell_id": "c2", "edit_mode": "replace", "new_source": "import os"}}));
    let v = reply_calls(chat, v, key, Value::Array(calls)).await;
    let got = results(&v);
    let classes = PLACES
        .iter()
        .copied()
        .chain([
            (".claude/settings.local.json", "agent_config"),
            (".idea/n.ipynb", "editor_config"),
        ])
        .map(|(rel, class)| (rel, Some(class)))
        .collect::<Vec<_>>();
    let expected: Vec<(&str, Option<&str>)> = classes[..PLACES.len()]
        .iter()
        .copied()
        .chain(ORDINARY.iter().map(|rel| (*rel, None)))
        .chain(classes[PLACES.len()..].iter().copied())
        .collect();
    assert_eq!(got.len(), expected.len(), "{v}");
    for (result, (rel, class)) in got.iter().zip(&expected) {
        let output = result["output"].as_str().unwrap_or_default();
        match class {
            Some(class) if *class != allowed => {
                assert_eq!(result["status"], "error", "{rel}: {result}");
                assert!(output.starts_with("not_permitted"), "{rel}: {output}");
                assert!(output.contains("auto-run place"), "{rel}: {output}");
                assert!(output.contains(&format!("({class}:")), "{rel}: {output}");
                assert!(
                    output.contains(&format!("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES={class}")),
                    "{rel}: {output}"
                );
            }
            _ => assert_eq!(result["status"], "ok", "{rel}: {result}"),
        }
    }
    // Nothing refused exists or changed; the parents Write would have created were not made.
    for (rel, class) in PLACES {
        if *class != allowed {
            assert!(!root.join(rel).exists(), "{rel} was written");
        }
    }
    if allowed != "agent_config" {
        assert!(!root.join("sub/app/.claude").exists());
        let local = std::fs::read_to_string(root.join(".claude/settings.local.json")).unwrap();
        assert_eq!(local, "{}");
    }
    if allowed == "editor_config" {
        assert_eq!(
            std::fs::read_to_string(root.join(".vscode/tasks.json")).unwrap(),
            HOOK
        );
    } else {
        assert_eq!(
            std::fs::read_to_string(root.join(".idea/n.ipynb")).unwrap(),
            NOTEBOOK
        );
        assert!(!root.join(".vscode").exists());
    }
}

/// Files the test edits in place: an existing Claude Code local settings file and a notebook in
/// an IDE's directory.
fn plant(root: &Path) {
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(root.join(".claude/settings.local.json"), "{}").unwrap();
    std::fs::create_dir_all(root.join(".idea")).unwrap();
    std::fs::write(root.join(".idea/n.ipynb"), NOTEBOOK).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_never_write_auto_run_places_unless_the_owner_allows_the_class() {
    // direct_write, nothing allowed.
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    plant(&root);
    let v = start_profile(&chat, &root, "direct_write", "ar-direct").await;
    try_places(&chat, &v, &root, "ar-direct-r", "").await;
    chat.stop(&session_id(&v), &lease_id(&v), "ar-direct-stop", None)
        .await
        .unwrap();

    // worktree_write, with the owner's opt-in for editor configuration only.
    let gw = gateway_with(&[("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES", "editor_config")]).await;
    let chat = chatgpt(&gw).await;
    let (_repo, source) = crate::writes::repo();
    plant(&source);
    crate::writes::git(&source, &["add", "-A"]);
    crate::writes::git(&source, &["commit", "-q", "-m", "planted"]);
    let v = start_profile(&chat, &source, "worktree_write", "ar-tree").await;
    let worktree = std::path::PathBuf::from(v["working_directory"].as_str().unwrap());
    try_places(&chat, &v, &worktree, "ar-tree-r", "editor_config").await;
    chat.stop(&session_id(&v), &lease_id(&v), "ar-tree-stop", None)
        .await
        .unwrap();
}

/// Asserts that `result` is the refusal of an auto-run place of `class`.
pub(crate) fn assert_refused(result: &Value, rel: &str, class: &str) {
    let output = result["output"].as_str().unwrap_or_default();
    assert_eq!(result["status"], "error", "{rel}: {result}");
    assert!(output.starts_with("not_permitted"), "{rel}: {output}");
    assert!(output.contains("auto-run place"), "{rel}: {output}");
    assert!(output.contains(&format!("({class}:")), "{rel}: {output}");
}

/// A repository with what an attacker would commit to make ordinary paths auto-run places
/// (issue 23, F2, F3, F6): symlinks from auto-run names to ordinary paths, an embedded bare
/// repository, a virtual environment.
fn hostile_repo() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, source) = crate::writes::repo();
    let put = |rel: &str, content: &str| {
        let path = source.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    };
    std::os::unix::fs::symlink("cfg/cl", source.join(".claude")).unwrap();
    put("notes/x", "plain\n");
    std::os::unix::fs::symlink("notes/x", source.join(".envrc")).unwrap();
    put("tools/HEAD", "ref: refs/heads/main\n");
    put("tools/objects/info/keep", "");
    put("tools/refs/heads/keep", "");
    put("bare2/objects/keep", "");
    put("bare2/refs/keep", "");
    put(".venv/pyvenv.cfg", "home = /usr/bin\n");
    crate::writes::git(&source, &["add", "-A"]);
    crate::writes::git(&source, &["commit", "-q", "-m", "hostile"]);
    (dir, source)
}

#[tokio::test(flavor = "multi_thread")]
async fn symlinks_embedded_repositories_and_environments_do_not_open_auto_run_places() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let (_repo, source) = hostile_repo();
    let v = start_profile(&chat, &source, "worktree_write", "arl-start").await;
    let tree = std::path::PathBuf::from(v["working_directory"].as_str().unwrap());
    assert!(
        tree.join(".claude").is_symlink(),
        "the checkout has the link"
    );
    let refused = [
        ("cfg/cl/settings.json", "agent_config"),
        ("notes/x", "directory_hooks"),
        ("tools/config", "vcs_config"),
        ("tools/hooks/pre-commit", "vcs_config"),
        ("bare2/HEAD", "vcs_config"),
        (".venv/bin/pip", "python_startup"),
        (".cargo/config.toml", "toolchain_config"),
        (".cursor/hooks.json", "agent_config"),
    ];
    let written = [
        "CLAUDE.md",
        "AGENTS.md",
        ".cursor/rules/style.mdc",
        "cfg/cl/CLAUDE.md",
        "cfg/other.json",
    ];
    let calls: Vec<Value> = refused
        .iter()
        .map(|(rel, _)| write(&tree.join(rel), HOOK))
        .chain(
            written
                .iter()
                .map(|rel| write(&tree.join(rel), "# notes\n")),
        )
        .collect();
    let v = reply_calls(&chat, &v, "arl-r1", Value::Array(calls)).await;
    let got = results(&v);
    assert_eq!(got.len(), refused.len() + written.len(), "{v}");
    for (result, (rel, class)) in got.iter().zip(&refused) {
        assert_refused(result, rel, class);
    }
    let through = got[0]["output"].as_str().unwrap_or_default();
    assert!(
        through.contains(&format!(
            "reachable as {} through a symlink",
            tree.join(".claude/settings.json").display()
        )),
        "{through}"
    );
    for (result, rel) in got[refused.len()..].iter().zip(written) {
        assert_eq!(result["status"], "ok", "{rel}: {result}");
    }
    // Nothing refused was written; `cfg/cl/CLAUDE.md` is `.claude/CLAUDE.md` through the link,
    // an instruction file.
    assert!(!tree.join("cfg/cl/settings.json").exists());
    assert_eq!(
        std::fs::read_to_string(tree.join("notes/x")).unwrap(),
        "plain\n"
    );
    for rel in [
        "tools/config",
        "tools/hooks",
        "bare2/HEAD",
        ".venv/bin",
        ".cargo",
    ] {
        assert!(!tree.join(rel).exists(), "{rel}");
    }
    assert!(tree.join(".claude/CLAUDE.md").is_file());
    chat.stop(&session_id(&v), &lease_id(&v), "arl-stop", None)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn symlinks_and_repositories_a_command_makes_stay_in_its_layer() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let v = start_profile(&chat, &root, "direct_write", "arc-start").await;
    let run = |argv: &[&str]| json!({"name": "RunCommand", "arguments": {"argv": argv}});
    let calls = json!([
        run(&["ln", "-s", "cfg2", ".vscode"]),
        run(&["mkdir", "-p", "tools2/objects", "tools2/refs"]),
    ]);
    let v = reply_calls(&chat, &v, "arc-r1", calls).await;
    for result in results(&v) {
        assert_eq!(result["status"], "ok", "{result}");
        assert_eq!(result["receipt"]["exit_code"], 0, "{result}");
    }
    // The real tree has neither: the writes see ordinary paths and go through.
    assert!(std::fs::symlink_metadata(root.join(".vscode")).is_err());
    assert!(!root.join("tools2").exists());
    let calls = json!([
        write(&root.join("cfg2/tasks.json"), "{}"),
        write(&root.join("tools2/HEAD"), "ref: refs/heads/main\n"),
    ]);
    let v = reply_calls(&chat, &v, "arc-r2", calls).await;
    for result in results(&v) {
        assert_eq!(result["status"], "ok", "{result}");
    }
    assert!(std::fs::symlink_metadata(root.join(".vscode")).is_err());
    assert!(!root.join("tools2/objects").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "arc-stop", None)
        .await
        .unwrap();
}

/// Git's own indirections (issue 23, round 2): a hook linked from `.git/hooks`, the directory
/// `core.hooksPath` names (also in a managed worktree, relative to its top) and a file
/// `include.path` names are refused; ordinary files next to them are written.
#[tokio::test(flavor = "multi_thread")]
async fn places_git_s_configuration_names_are_refused_in_both_profiles() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let (_repo, source) = crate::writes::repo();
    std::fs::create_dir_all(source.join("scripts")).unwrap();
    std::fs::write(source.join("scripts/pre-commit"), "#!/bin/sh\ntrue\n").unwrap();
    std::os::unix::fs::symlink(
        "../../scripts/pre-commit",
        source.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    crate::writes::git(&source, &["config", "core.hooksPath", "hooks"]);
    crate::writes::git(&source, &["config", "include.path", "../shared.gitconfig"]);
    std::fs::write(source.join("shared.gitconfig"), "[user]\n").unwrap();
    crate::writes::git(&source, &["add", "-A"]);
    crate::writes::git(&source, &["commit", "-q", "-m", "scripts"]);

    let v = start_profile(&chat, &source, "worktree_write", "agc-wt").await;
    let tree = std::path::PathBuf::from(v["working_directory"].as_str().unwrap());
    let calls = json!([
        write(
            &tree.join("hooks/post-checkout"),
            "#!/bin/sh\ntouch /tmp/pwned\n"
        ),
        write(&tree.join("scripts/build.sh"), "#!/bin/sh\n"),
        // The main repository's hook symlink names this file once the owner merges.
        write(
            &tree.join("scripts/pre-commit"),
            "#!/bin/sh\ntouch /tmp/pwned\n"
        ),
    ]);
    let v = reply_calls(&chat, &v, "agc-wt-r1", calls).await;
    let got = results(&v);
    assert_refused(&got[0], "hooks/post-checkout", "git_hooks");
    assert_eq!(got[1]["status"], "ok", "{}", got[1]);
    assert_refused(&got[2], "scripts/pre-commit", "git_hooks");
    assert_eq!(
        std::fs::read_to_string(tree.join("scripts/pre-commit")).unwrap(),
        "#!/bin/sh\ntrue\n"
    );
    assert!(!tree.join("hooks").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "agc-wt-stop", None)
        .await
        .unwrap();

    let v = start_profile(&chat, &source, "direct_write", "agc-dw").await;
    let calls = json!([
        write(
            &source.join("scripts/pre-commit"),
            "#!/bin/sh\ntouch /tmp/pwned\n"
        ),
        write(
            &source.join("shared.gitconfig"),
            "[core]\nfsmonitor = touch /tmp/pwned\n"
        ),
        write(&source.join("hooks/pre-push"), "#!/bin/sh\n"),
        write(&source.join("scripts/build.sh"), "#!/bin/sh\n"),
    ]);
    let v = reply_calls(&chat, &v, "agc-dw-r1", calls).await;
    let got = results(&v);
    assert_refused(&got[0], "scripts/pre-commit", "git_hooks");
    assert_refused(&got[1], "shared.gitconfig", "vcs_config");
    assert_refused(&got[2], "hooks/pre-push", "git_hooks");
    assert_eq!(got[3]["status"], "ok", "{}", got[3]);
    assert_eq!(
        std::fs::read_to_string(source.join("shared.gitconfig")).unwrap(),
        "[user]\n"
    );
    chat.stop(&session_id(&v), &lease_id(&v), "agc-dw-stop", None)
        .await
        .unwrap();
}

/// A source whose git dir lives apart (`git init --separate-git-dir`): nothing in the managed
/// worktree's git files leads back to the source, so the broker carries the source's places
/// from the session's record (its merge target).
#[tokio::test(flavor = "multi_thread")]
async fn a_worktree_carries_the_source_s_places_whatever_the_repository_layout() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = crate::writes::write_dir();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let source = base.join("src-tree");
    std::fs::create_dir_all(source.join("scripts")).unwrap();
    let git_dir = base.join("gd");
    crate::writes::git(
        &base,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            git_dir.to_str().unwrap(),
            source.to_str().unwrap(),
        ],
    );
    crate::writes::git(&source, &["config", "user.email", "t@example.invalid"]);
    crate::writes::git(&source, &["config", "user.name", "t"]);
    std::fs::write(source.join("scripts/pre-commit"), "#!/bin/sh\ntrue\n").unwrap();
    std::fs::create_dir_all(git_dir.join("hooks")).unwrap();
    std::os::unix::fs::symlink(
        source.join("scripts/pre-commit"),
        git_dir.join("hooks/pre-commit"),
    )
    .unwrap();
    crate::writes::git(&source, &["add", "-A"]);
    crate::writes::git(&source, &["commit", "-q", "-m", "scripts"]);

    let v = start_profile(&chat, &source, "worktree_write", "agc-sep").await;
    let tree = std::path::PathBuf::from(v["working_directory"].as_str().unwrap());
    let calls = json!([
        write(
            &tree.join("scripts/pre-commit"),
            "#!/bin/sh\ntouch /tmp/pwned\n"
        ),
        write(&tree.join("scripts/build.sh"), "#!/bin/sh\n"),
    ]);
    let v = reply_calls(&chat, &v, "agc-sep-r1", calls).await;
    let got = results(&v);
    assert_refused(&got[0], "scripts/pre-commit", "git_hooks");
    assert_eq!(got[1]["status"], "ok", "{}", got[1]);
    assert_eq!(
        std::fs::read_to_string(tree.join("scripts/pre-commit")).unwrap(),
        "#!/bin/sh\ntrue\n"
    );
    chat.stop(&session_id(&v), &lease_id(&v), "agc-sep-stop", None)
        .await
        .unwrap();
}

/// Red team 23 c1 with the real runner: a git value the reader does not fully understand
/// (`cd tools && python3 -mfsmon` as `core.fsmonitor`) refuses every write in the tree, naming the key, why
/// and the opt-in; a regular hook file's `exec ./scripts/pre-commit.sh` makes that script a
/// place while its neighbours stay writable; a package.json edit that changes the
/// `lint-staged` section is refused and one that bumps the version is not.
#[tokio::test(flavor = "multi_thread")]
async fn values_the_reader_cannot_tell_hook_contents_and_hook_sections_are_refused() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;

    let (_strict, strict) = crate::writes::repo();
    std::fs::write(strict.join("fsmon.py"), "print('ok')\n").unwrap();
    crate::writes::git(
        &strict,
        &["config", "core.fsmonitor", "cd tools && python3 -mfsmon"],
    );
    let v = start_profile(&chat, &strict, "direct_write", "c1-strict").await;
    let calls = json!([
        write(&strict.join("fsmon.py"), "import os\n"),
        write(&strict.join("src/unrelated.rs"), "fn main() {}\n"),
    ]);
    let v = reply_calls(&chat, &v, "c1-strict-r1", calls).await;
    let got = results(&v);
    for (result, rel) in got.iter().zip(["fsmon.py", "src/unrelated.rs"]) {
        assert_refused(result, rel, "git_hooks");
        let output = result["output"].as_str().unwrap_or_default();
        assert!(
            output
                .contains("git's configuration runs `core.fsmonitor`, whose files cannot be told")
                && output.contains(
                    "python -m imports from the directory it runs in, which is not the working \
                     tree's top"
                )
                && output.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=git_hooks"),
            "{rel}: {output}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(strict.join("fsmon.py")).unwrap(),
        "print('ok')\n"
    );
    assert!(!strict.join("src/unrelated.rs").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "c1-strict-stop", None)
        .await
        .unwrap();

    let (_hooks, source) = crate::writes::repo();
    std::fs::create_dir_all(source.join("scripts")).unwrap();
    std::fs::write(source.join("scripts/pre-commit.sh"), "#!/bin/sh\ntrue\n").unwrap();
    std::fs::write(
        source.join(".git/hooks/pre-commit"),
        "#!/bin/sh\n# project checks\nexec ./scripts/pre-commit.sh \"$@\"\n",
    )
    .unwrap();
    let package = "{\n  \"name\": \"a\",\n  \"version\": \"1.0.0\",\n  \"lint-staged\": {\"*.js\": \"eslint\"}\n}\n";
    std::fs::write(source.join("package.json"), package).unwrap();
    let v = start_profile(&chat, &source, "direct_write", "c1-hook").await;
    let calls = json!([
        write(
            &source.join("scripts/pre-commit.sh"),
            "#!/bin/sh\ntouch /tmp/pwned\n"
        ),
        write(&source.join("scripts/build.sh"), "#!/bin/sh\n"),
        write(
            &source.join("package.json"),
            "{\"name\": \"a\", \"version\": \"1.0.0\", \"lint-staged\": {\"*.js\": \"node tools/x.js\"}}\n"
        ),
        json!({"name": "Edit", "arguments": {
            "file_path": source.join("package.json").to_string_lossy(),
            "old_string": "\"1.0.0\"", "new_string": "\"1.1.0\""}}),
    ]);
    let v = reply_calls(&chat, &v, "c1-hook-r1", calls).await;
    let got = results(&v);
    assert_refused(&got[0], "scripts/pre-commit.sh", "git_hooks");
    let output = got[0]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("a file the git hook `pre-commit` runs"),
        "{output}"
    );
    assert_eq!(got[1]["status"], "ok", "{}", got[1]);
    assert_refused(&got[2], "package.json", "git_hooks");
    let output = got[2]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("it changes package.json's \"lint-staged\" section"),
        "{output}"
    );
    assert_eq!(got[3]["status"], "ok", "{}", got[3]);
    assert_eq!(
        std::fs::read_to_string(source.join("scripts/pre-commit.sh")).unwrap(),
        "#!/bin/sh\ntrue\n"
    );
    assert_eq!(
        std::fs::read_to_string(source.join("package.json")).unwrap(),
        package.replace("1.0.0", "1.1.0")
    );
    chat.stop(&session_id(&v), &lease_id(&v), "c1-hook-stop", None)
        .await
        .unwrap();
}

/// H4b with the real runner: nbstripout's filter as `nbstripout --install` writes it
/// (`"/usr/bin/python3" -m nbstripout`, run from the top) refuses what Python imports from the
/// top — a module that shadows one it imports, a package's `__init__.py`, its own package, a
/// bytecode cache, an extension module — naming the key, and leaves the project's sources,
/// notebooks and docs writable.
#[tokio::test(flavor = "multi_thread")]
async fn python_m_from_the_top_refuses_only_what_shadows_its_imports() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;

    let (_tree, tree) = crate::writes::repo();
    std::fs::create_dir_all(tree.join("mypkg")).unwrap();
    std::fs::write(tree.join("mypkg/__init__.py"), "").unwrap();
    crate::writes::git(
        &tree,
        &[
            "config",
            "filter.nbstripout.clean",
            "\"/usr/bin/python3\" -m nbstripout",
        ],
    );
    let v = start_profile(&chat, &tree, "direct_write", "h4b-nb").await;
    let refused = [
        "nbstripout.py",
        "json.py",
        "mypkg/__init__.py",
        "nbstripout/x.py",
        "__pycache__/x.pyc",
        "_socket.so",
    ];
    let writable = ["src/pkg/module.py", "notebooks/x.ipynb", "README.md"];
    let calls: Vec<Value> = refused
        .iter()
        .chain(writable.iter())
        .map(|rel| write(&tree.join(rel), "x = 1\n"))
        .collect();
    let v = reply_calls(&chat, &v, "h4b-nb-r1", json!(calls)).await;
    let got = results(&v);
    for (result, rel) in got.iter().zip(refused) {
        assert_refused(result, rel, "git_hooks");
        let output = result["output"].as_str().unwrap_or_default();
        assert!(
            output.contains("a program git's configuration runs (`filter.nbstripout.clean`)")
                && !output.contains("cannot be told")
                && output.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=git_hooks"),
            "{rel}: {output}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(tree.join("mypkg/__init__.py")).unwrap(),
        ""
    );
    for rel in ["nbstripout.py", "json.py", "nbstripout/x.py", "_socket.so"] {
        assert!(!tree.join(rel).exists(), "{rel}");
    }
    for (result, rel) in got[refused.len()..].iter().zip(writable) {
        assert_eq!(result["status"], "ok", "{rel}: {result}");
        assert_eq!(std::fs::read_to_string(tree.join(rel)).unwrap(), "x = 1\n");
    }
    chat.stop(&session_id(&v), &lease_id(&v), "h4b-nb-stop", None)
        .await
        .unwrap();
}

/// A package.json with a git-hook section, and the same one with that section changed.
const HOOKED_PACKAGE: &str =
    "{\"name\": \"a\", \"version\": \"1.0.0\", \"lint-staged\": {\"*.js\": \"eslint\"}}\n";

/// Red team 24 B4 with the real runner: rules keyed on a file's name hold whatever name the
/// bytes are written through. `package.json -> pkg/real.json` (and an absolute link) make
/// `pkg/real.json` a package.json: Write and Edit changing its `lint-staged` section are refused
/// as `git_hooks` naming the link, a version bump is written; `.git/config -> ../gitconfig`
/// makes `gitconfig` git's config; a NotebookEdit through `.vscode -> cfg/vs` is refused; a
/// command writing through every link changes only its layer. In a worktree, a link committed
/// in the repository and one only the source directory holds do the same.
#[tokio::test(flavor = "multi_thread")]
async fn rules_by_name_hold_under_every_name_a_file_is_written_through() {
    use std::os::unix::fs::symlink;
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let (_repo, root) = crate::writes::repo();
    let put = |rel: &str, content: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    };
    put("pkg/real.json", HOOKED_PACKAGE);
    put("pkg/web.json", HOOKED_PACKAGE);
    put("cfg/vs/n.ipynb", NOTEBOOK);
    symlink("pkg/real.json", root.join("package.json")).unwrap();
    std::fs::create_dir_all(root.join("web")).unwrap();
    symlink(root.join("pkg/web.json"), root.join("web/package.json")).unwrap();
    symlink("cfg/vs", root.join(".vscode")).unwrap();
    let gitconfig = std::fs::read_to_string(root.join(".git/config")).unwrap();
    std::fs::rename(root.join(".git/config"), root.join("gitconfig")).unwrap();
    symlink("../gitconfig", root.join(".git/config")).unwrap();
    // A link out of the root, to a file a shell start-up could source.
    let outside = tempfile::tempdir().unwrap();
    let outside_file = std::fs::canonicalize(outside.path()).unwrap().join("rc");
    std::fs::write(&outside_file, "plain\n").unwrap();
    symlink(&outside_file, root.join("ext-rc")).unwrap();
    let v = start_profile(&chat, &root, "direct_write", "alias-direct").await;
    let changed = HOOKED_PACKAGE.replace("eslint", "node tools/x.js");
    let edit = |rel: &str, old: &str, new: &str| {
        json!({"name": "Edit", "arguments": {"file_path": root.join(rel).to_string_lossy(),
            "old_string": old, "new_string": new}})
    };
    let layer = "printf '{}' > package.json && printf '{}' > web/package.json && \
                 printf x > .vscode/n.ipynb && cat pkg/real.json pkg/web.json";
    let calls = json!([
        write(&root.join("pkg/real.json"), &changed),
        edit("pkg/real.json", "\"eslint\"", "\"node tools/x.js\""),
        write(&root.join("pkg/web.json"), &changed),
        write(&root.join("gitconfig"), "[core]\n\tfsmonitor = ./x\n"),
        json!({"name": "NotebookEdit", "arguments": {
            "notebook_path": root.join("cfg/vs/n.ipynb").to_string_lossy(),
            "cell_id": "c2", "edit_mode": "replace", "new_source": "import os"}}),
        edit("pkg/real.json", "\"1.0.0\"", "\"1.1.0\""),
        json!({"name": "RunCommand", "arguments": {"argv": ["sh", "-c", layer]}}),
        json!({"name": "RunCommand", "arguments": {"argv": ["sh", "-c", "echo evil >> ext-rc"]}}),
    ]);
    let v = reply_calls(&chat, &v, "alias-direct-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 8, "{v}");
    for (result, (rel, class)) in got.iter().zip([
        ("pkg/real.json", "git_hooks"),
        ("pkg/real.json", "git_hooks"),
        ("pkg/web.json", "git_hooks"),
        ("gitconfig", "vcs_config"),
        ("cfg/vs/n.ipynb", "editor_config"),
    ]) {
        assert_refused(result, rel, class);
    }
    for (result, link) in got
        .iter()
        .zip(["package.json", "package.json", "web/package.json"])
    {
        let output = result["output"].as_str().unwrap_or_default();
        assert!(
            output.contains(&format!(
                "reachable as {} through a symlink; it changes package.json's \"lint-staged\" section",
                root.join(link).display()
            )),
            "{output}"
        );
    }
    let output = got[3]["output"].as_str().unwrap_or_default();
    assert!(output.contains("a config file git reads"), "{output}");
    assert_eq!(got[5]["status"], "ok", "{}", got[5]);
    assert_eq!(got[6]["status"], "ok", "{}", got[6]);
    assert_eq!(got[6]["receipt"]["exit_code"], 0, "{}", got[6]);
    let output = got[6]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("{}{}"),
        "the layer saw its writes: {output}"
    );
    // The real files: only the version bump landed.
    let bumped = HOOKED_PACKAGE.replace("1.0.0", "1.1.0");
    assert_eq!(
        std::fs::read_to_string(root.join("pkg/real.json")).unwrap(),
        bumped
    );
    for (rel, content) in [
        ("pkg/web.json", HOOKED_PACKAGE),
        ("gitconfig", gitconfig.as_str()),
        ("cfg/vs/n.ipynb", NOTEBOOK),
    ] {
        assert_eq!(
            std::fs::read_to_string(root.join(rel)).unwrap(),
            content,
            "{rel}"
        );
    }
    assert!(root.join("package.json").is_symlink());
    // Out of the root the file system is read-only to commands.
    let refused = got[7]["receipt"]["exit_code"]
        .as_i64()
        .is_some_and(|code| code != 0);
    let output = got[7]["output"].as_str().unwrap_or_default();
    assert!(
        refused && output.contains("Read-only file system"),
        "{}",
        got[7]
    );
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "plain\n");
    chat.stop(&session_id(&v), &lease_id(&v), "alias-direct-stop", None)
        .await
        .unwrap();

    // worktree_write: a link the repository commits, and one only the source directory holds
    // (an ignored one: the merge brings the worktree's bytes under it).
    let (_repo, source) = crate::writes::repo();
    for rel in ["pkg/real.json", "pkg/web.json"] {
        std::fs::create_dir_all(source.join("pkg")).unwrap();
        std::fs::write(source.join(rel), HOOKED_PACKAGE).unwrap();
    }
    symlink("pkg/real.json", source.join("package.json")).unwrap();
    crate::writes::git(&source, &["add", "-A"]);
    crate::writes::git(&source, &["commit", "-q", "-m", "linked manifest"]);
    std::fs::create_dir_all(source.join("web")).unwrap();
    symlink("../pkg/web.json", source.join("web/package.json")).unwrap();
    // Ignored, so the checkout counts as clean.
    std::fs::write(
        source.join(".git/info/exclude"),
        "web/
",
    )
    .unwrap();
    let v = start_profile(&chat, &source, "worktree_write", "alias-tree").await;
    let tree = std::path::PathBuf::from(v["working_directory"].as_str().unwrap());
    assert!(
        !tree.join("web").exists(),
        "only the source holds the second link"
    );
    let calls = json!([
        write(&tree.join("pkg/real.json"), &changed),
        write(&tree.join("pkg/web.json"), &changed),
    ]);
    let v = reply_calls(&chat, &v, "alias-tree-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 2, "{v}");
    for (result, link) in got.iter().zip(["package.json", "web/package.json"]) {
        assert_refused(result, "pkg", "git_hooks");
        let output = result["output"].as_str().unwrap_or_default();
        assert!(
            output.contains("\"lint-staged\" section"),
            "{link}: {output}"
        );
    }
    for rel in ["pkg/real.json", "pkg/web.json"] {
        assert_eq!(
            std::fs::read_to_string(tree.join(rel)).unwrap(),
            HOOKED_PACKAGE
        );
    }
    chat.stop(&session_id(&v), &lease_id(&v), "alias-tree-stop", None)
        .await
        .unwrap();
}

/// Red team 24 B1, the owner's opt-in: with `CLAUDE_TOOLS_STRICT_HOOKS=1` the definitions of
/// the checks a git hook runs (a Makefile, jest's config, also through a symlink, and
/// package.json's `scripts`) are refused as `git_hooks` naming the mode; a version bump and the
/// project's sources stay writable. Without it (every other test here) they are written.
#[tokio::test(flavor = "multi_thread")]
async fn strict_hooks_refuse_the_definitions_of_the_checks_hooks_run() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_STRICT_HOOKS", "1")]).await;
    let chat = chatgpt(&gw).await;
    let (_repo, root) = crate::writes::repo();
    std::fs::write(root.join("Makefile"), "lint:\n\ttrue\n").unwrap();
    std::fs::write(root.join("package.json"), HOOKED_PACKAGE).unwrap();
    std::fs::create_dir_all(root.join("cfg")).unwrap();
    // (ESLint's code config is `editor_config` whatever the mode: red team 43a B3.)
    std::os::unix::fs::symlink("cfg/lint.mjs", root.join("jest.config.mjs")).unwrap();
    let v = start_profile(&chat, &root, "direct_write", "strict-start").await;
    let edit = |old: &str, new: &str| {
        json!({"name": "Edit", "arguments": {
            "file_path": root.join("package.json").to_string_lossy(),
            "old_string": old, "new_string": new}})
    };
    let calls = json!([
        write(&root.join("Makefile"), "lint:\n\ttouch /tmp/pwned\n"),
        write(&root.join("cfg/lint.mjs"), "export default [];\n"),
        write(&root.join("web/.eslintrc.json"), "{}\n"),
        edit(
            "\"name\": \"a\",",
            "\"name\": \"a\", \"scripts\": {\"test\": \"node x.js\"},"
        ),
        edit("\"1.0.0\"", "\"1.1.0\""),
        write(&root.join("src/new.rs"), "fn f() {}\n"),
    ]);
    let v = reply_calls(&chat, &v, "strict-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 6, "{v}");
    for (result, rel) in got
        .iter()
        .zip(["Makefile", "cfg/lint.mjs", "web/.eslintrc.json"])
    {
        assert_refused(result, rel, "git_hooks");
        let output = result["output"].as_str().unwrap_or_default();
        assert!(
            output
                .contains("CLAUDE_TOOLS_STRICT_HOOKS is on, and it defines checks a git hook runs"),
            "{rel}: {output}"
        );
    }
    let through = got[1]["output"].as_str().unwrap_or_default();
    assert!(
        through.contains("jest.config.mjs through a symlink"),
        "{through}"
    );
    assert_refused(&got[3], "package.json", "git_hooks");
    let output = got[3]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("package.json's \"scripts\" section"),
        "{output}"
    );
    assert_eq!(got[4]["status"], "ok", "{}", got[4]);
    assert_eq!(got[5]["status"], "ok", "{}", got[5]);
    assert_eq!(
        std::fs::read_to_string(root.join("Makefile")).unwrap(),
        "lint:\n\ttrue\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("package.json")).unwrap(),
        HOOKED_PACKAGE.replace("1.0.0", "1.1.0")
    );
    assert!(!root.join("cfg/lint.mjs").exists());
    assert!(!root.join("web").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "strict-stop", None)
        .await
        .unwrap();
}

/// A strict-hooks value other than `0` or `1` stops the gateway at start (exit code 2), naming
/// the variable and the value: a typo never leaves the owner's intent unapplied.
#[tokio::test(flavor = "multi_thread")]
async fn a_strict_hooks_value_other_than_0_or_1_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let outcome = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_TOOLS_STRICT_HOOKS", "yes")
        .state_dir(&state)
        .run_to_exit(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(outcome.code(), Some(2), "{}", outcome.stderr);
    assert!(
        outcome
            .stderr
            .contains("CLAUDE_TOOLS_STRICT_HOOKS: \"yes\" is neither 1 (on) nor 0 (off)"),
        "{}",
        outcome.stderr
    );
}

/// Red team 34 B1 with the real runner: `.pylintrc` (pylint `exec`s its `init-hook`) and an
/// Edit giving pyproject.toml a pylint `init-hook` are refused as `editor_config`, naming the
/// key; an Edit of the same pyproject.toml elsewhere is written.
#[tokio::test(flavor = "multi_thread")]
async fn linters_configs_that_load_code_are_refused_and_other_pyproject_edits_written() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let (_repo, root) = crate::writes::repo();
    let pyproject = "[project]\nname = \"a\"\n\n[tool.pylint.main]\njobs = 2\n\n[tool.ruff]\nline-length = 88\n";
    std::fs::write(root.join("pyproject.toml"), pyproject).unwrap();
    let v = start_profile(&chat, &root, "direct_write", "rt34-start").await;
    let edit = |old: &str, new: &str| {
        json!({"name": "Edit", "arguments": {
            "file_path": root.join("pyproject.toml").to_string_lossy(),
            "old_string": old, "new_string": new}})
    };
    let calls = json!([
        write(
            &root.join(".pylintrc"),
            "[MAIN]\ninit-hook='import os; os.system(\"id\")'\n"
        ),
        edit("jobs = 2", "jobs = 2\ninit-hook = \"import os\""),
        edit("line-length = 88", "line-length = 100"),
    ]);
    let v = reply_calls(&chat, &v, "rt34-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 3, "{v}");
    assert_refused(&got[0], ".pylintrc", "editor_config");
    assert_refused(&got[1], "pyproject.toml", "editor_config");
    let output = got[1]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("it changes tool.pylint.main.init-hook in pyproject.toml")
            && output.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=editor_config"),
        "{output}"
    );
    assert_eq!(got[2]["status"], "ok", "{}", got[2]);
    assert!(!root.join(".pylintrc").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("pyproject.toml")).unwrap(),
        pyproject.replace("88", "100")
    );
    chat.stop(&session_id(&v), &lease_id(&v), "rt34-stop", None)
        .await
        .unwrap();
}
