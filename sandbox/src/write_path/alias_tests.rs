//! Unit tests: every rule keyed on a file's name holds whatever name the bytes are written
//! through (red team 24 B4) — a `package.json` reached through a symlink (chains, absolute and
//! dangling targets, a case variant, a worktree's merge target), a hard link, a hook manager's
//! directory or config reached through a link, and git's own files under another name.

use super::*;
use std::os::unix::fs::symlink;

use super::tests::{Fixture, fixture};

const HOOKED: &str = "{\"name\":\"a\",\"version\":\"1.0.0\",\"lint-staged\":{\"*.js\":\"eslint\"}}";
const CHANGED: &str =
    "{\"name\":\"a\",\"version\":\"1.0.0\",\"lint-staged\":{\"*.js\":\"node x.js\"}}";
const BUMPED: &str = "{\"name\":\"a\",\"version\":\"1.1.0\",\"lint-staged\":{\"*.js\":\"eslint\"}}";

/// The content check of a write of `rel` from `old` to `new`, with `policy`.
fn content(
    f: &Fixture,
    policy: &PathPolicy,
    rel: &str,
    old: Option<&str>,
    new: &str,
) -> Result<(), WriteRefusal> {
    let target = WriteRoot::open(policy, &f.root)
        .unwrap()
        .resolve(policy, &f.root.join(rel), Parents::Create)
        .unwrap();
    assert!(target.checks_content(), "{rel} is read as a package.json");
    target.check_content(policy, old.map(str::as_bytes), new.as_bytes())
}

/// Asserts that changing the hook section of `rel`, read as `read_as`, is refused as
/// `git_hooks` naming both, and that a version bump is not.
fn hook_change_refused(f: &Fixture, rel: &str, read_as: &str, old: Option<&str>) {
    let err = content(f, &f.policy, rel, old, CHANGED).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
    let message = err.to_string();
    assert!(
        matches!(
            err,
            WriteRefusal::AutorunPlace {
                class: "git_hooks",
                ..
            }
        ) && message.contains(&format!(
            "reachable as {} through a symlink",
            f.root.join(read_as).display()
        )) && message.contains("it changes package.json's \"lint-staged\" section"),
        "{rel}: {message}"
    );
    if old.is_some() {
        content(f, &f.policy, rel, old, BUMPED).unwrap();
    }
    git_hooks_refusal(&content(f, &f.policy, rel, old, "{\"a\":\"\\ud800\"").unwrap_err());
}

/// Asserts that `err` refuses a write as a `git_hooks` place.
fn git_hooks_refusal(err: &WriteRefusal) {
    assert!(
        matches!(
            err,
            WriteRefusal::AutorunPlace {
                class: "git_hooks",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_package_json_reached_through_a_symlink_is_compared_under_every_name() {
    let f = fixture();
    // B4 itself: the link named like the manifest, the bytes written under the target's name.
    f.put("pkg/real.json", HOOKED);
    f.link("package.json", "pkg/real.json");
    hook_change_refused(&f, "pkg/real.json", "package.json", Some(HOOKED));
    // A chain through a directory link, an absolute target, a case variant, a subproject's.
    f.put("store/b.json", HOOKED);
    f.link("data", "store");
    f.link("web/package.json", "../data/b.json");
    hook_change_refused(&f, "store/b.json", "web/package.json", Some(HOOKED));
    f.put("abs/c.json", HOOKED);
    f.link(
        "api/package.json",
        &f.root.join("abs/c.json").to_string_lossy(),
    );
    hook_change_refused(&f, "abs/c.json", "api/package.json", Some(HOOKED));
    f.put("case/d.json", HOOKED);
    f.link("ui/Package.JSON", "../case/d.json");
    hook_change_refused(&f, "case/d.json", "ui/Package.JSON", Some(HOOKED));
    // Dangling: a Write would create the file the manifest's name reaches.
    f.link("cli/package.json", "../fresh/e.json");
    hook_change_refused(&f, "fresh/e.json", "cli/package.json", None);
    // The file under its own name is compared as before; ordinary JSON is not.
    f.put("lib/package.json", HOOKED);
    assert!(content(&f, &f.policy, "lib/package.json", Some(HOOKED), CHANGED).is_err());
    let plain = WriteRoot::open(&f.policy, &f.root)
        .unwrap()
        .resolve(&f.policy, &f.root.join("pkg/other.json"), Parents::Create)
        .unwrap();
    assert!(!plain.checks_content());
    // The owner's opt-in for git hooks opens the aliases too.
    use crate::protected::autorun::AutorunAllowed;
    let open = f
        .policy
        .clone()
        .with_autorun_allowed(AutorunAllowed::parse("git_hooks").unwrap());
    content(&f, &open, "pkg/real.json", Some(HOOKED), CHANGED).unwrap();
}

#[test]
fn a_worktree_compares_a_manifest_only_its_merge_target_links() {
    // The source links `package.json` to a file both checkouts hold; the worktree has only the
    // file: merged back, the worktree's bytes become the source's hook section.
    let f = fixture();
    let source = f.base.join("source");
    std::fs::create_dir_all(source.join("pkg")).unwrap();
    std::fs::write(source.join("pkg/real.json"), HOOKED).unwrap();
    symlink("pkg/real.json", source.join("package.json")).unwrap();
    f.put("pkg/real.json", HOOKED);
    let policy = f.policy.clone().with_merge_target(source.clone());
    let err = content(&f, &policy, "pkg/real.json", Some(HOOKED), CHANGED).unwrap_err();
    git_hooks_refusal(&err);
    content(&f, &policy, "pkg/real.json", Some(HOOKED), BUMPED).unwrap();
}

#[test]
fn a_hard_link_to_an_auto_run_file_is_refused() {
    let f = fixture();
    f.put("pkg/real.json", HOOKED);
    std::fs::hard_link(f.root.join("pkg/real.json"), f.root.join("package.json")).unwrap();
    f.put("notes/env", "x");
    std::fs::hard_link(f.root.join("notes/env"), f.root.join(".envrc")).unwrap();
    for rel in ["pkg/real.json", "package.json", "notes/env", ".envrc"] {
        match f.write(rel) {
            Err(err @ WriteRefusal::Path(PathRefusal::HardLinked { .. })) => {
                assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
            }
            Err(err @ WriteRefusal::AutorunPlace { .. }) if rel == ".envrc" => {
                assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
            }
            other => panic!("{rel}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn hook_managers_reached_through_links_are_refused() {
    let f = fixture();
    f.put("tools/hooks/pre-commit", "#!/bin/sh\nnpm test\n");
    f.link(".husky", "tools/hooks");
    f.refused("tools/hooks/pre-commit", "git_hooks");
    f.refused("tools/hooks/pre-push", "git_hooks");
    f.link(".lintstagedrc.json", "cfg/ls.json");
    f.refused("cfg/ls.json", "git_hooks");
    f.link("lefthook.yml", "a/l.yml");
    f.link("a", "b");
    f.refused("b/l.yml", "git_hooks");
    f.allowed("tools/build.sh");
    f.allowed("cfg/other.json");
}

#[test]
fn git_s_own_files_under_another_name_are_refused() {
    let f = fixture();
    // `.git/hooks -> ../scripts`: every file there is a hook.
    f.put(".git/HEAD", "ref: refs/heads/main\n");
    f.mkdir(".git/objects");
    f.mkdir(".git/refs");
    f.link(".git/hooks", "../scripts");
    f.refused("scripts/pre-commit", "git_hooks");
    // `.git/config -> ../gitconfig` (a versioned repository config) and a linked `info/`.
    f.put("gitconfig", "[user]\n\tname = a\n");
    f.link(".git/config", "../gitconfig");
    f.refused_saying("gitconfig", "vcs_config", "a config file git reads");
    f.link(".git/info", "../meta");
    f.refused("meta/attributes", "vcs_config");
    f.allowed("src/new.rs");
    f.allowed("gitconfig.md");
}

#[test]
fn a_dot_git_that_is_a_link_into_the_tree_is_refused_whole() {
    let f = fixture();
    // A gitfile reached through `sub/.git`, and the git dir it names.
    f.put("cfg/gitlink", "gitdir: ../gd\n");
    f.put("gd/HEAD", "ref: refs/heads/main\n");
    f.link("sub/.git", "../cfg/gitlink");
    f.refused_saying("cfg/gitlink", "vcs_config", "one of git's own files");
    f.refused("gd/config", "vcs_config");
    f.allowed("cfg/other");
}

#[test]
fn strict_hooks_refuse_the_checks_definitions_under_every_name() {
    use crate::protected::autorun::AutorunAllowed;
    let mut f = fixture();
    f.put("pkg/real.json", HOOKED);
    f.link("package.json", "pkg/real.json");
    f.link("Makefile", "build/rules.mk");
    // Off (the default): the build's definition is the work.
    f.allowed("sub/Makefile");
    f.allowed("build/rules.mk");
    content(
        &f,
        &f.policy,
        "pkg/real.json",
        Some(HOOKED),
        &HOOKED.replace("{\"name\"", "{\"scripts\":{\"test\":\"x\"},\"name\""),
    )
    .unwrap();
    let plain = f.policy.clone();
    f.policy = plain.clone().with_strict_hooks(true);
    for rel in [
        "sub/Makefile",
        "sub/GNUmakefile",
        "jest.config.mjs",
        "web/.eslintrc.json",
        "tests/conftest.py",
    ] {
        f.refused_saying(rel, "git_hooks", "CLAUDE_TOOLS_STRICT_HOOKS is on");
    }
    f.refused_saying("build/rules.mk", "git_hooks", "reachable as");
    f.allowed("src/main.rs");
    f.allowed("docs/Makefile.md");
    // package.json's scripts are compared like its hook sections; other fields stay writable.
    let scripts = HOOKED.replace("{\"name\"", "{\"scripts\":{\"test\":\"x\"},\"name\"");
    let err = content(&f, &f.policy, "pkg/real.json", Some(HOOKED), &scripts).unwrap_err();
    assert!(err.to_string().contains("\"scripts\" section"), "{err}");
    content(&f, &f.policy, "pkg/real.json", Some(HOOKED), BUMPED).unwrap();
    // The owner's git_hooks opt-in opens them again.
    f.policy = plain
        .with_strict_hooks(true)
        .with_autorun_allowed(AutorunAllowed::parse("git_hooks").unwrap());
    f.allowed("sub/Makefile");
    content(&f, &f.policy, "pkg/real.json", Some(HOOKED), &scripts).unwrap();
}

#[test]
fn a_manifest_link_through_the_reader_s_context_compares_every_write() {
    // `/proc/self/cwd` is whatever directory the reader runs in: the link may reach any file of
    // the root, so every write is compared as a package.json (fail closed).
    let f = fixture();
    f.put("pkg/x.json", HOOKED);
    f.link("package.json", "/proc/self/cwd/pkg/x.json");
    let err = content(&f, &f.policy, "pkg/x.json", Some(HOOKED), CHANGED).unwrap_err();
    assert!(err.to_string().contains("\"lint-staged\" section"), "{err}");
    content(&f, &f.policy, "pkg/x.json", Some(HOOKED), BUMPED).unwrap();
    let err = content(&f, &f.policy, "src/new.rs", None, "fn f() {}\n").unwrap_err();
    git_hooks_refusal(&err);
}
