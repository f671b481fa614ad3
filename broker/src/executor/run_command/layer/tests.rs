//! Tests of `layer`.

use super::*;

/// macOS's writable session dir: made with its redirected dirs, kept across commands,
/// emptied by `fresh_layer`, and refused past the budget like the layer.
#[test]
fn the_session_dir_lives_and_is_bounded_like_the_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("layer");
    let layer = SessionLayer::new(dir.clone(), tmp.path().join(".discarded"), 1 << 30);
    let turn = layer.begin(View::SessionDir, false).unwrap();
    assert!(turn.spec.roots.is_empty());
    assert!(dir.join("cargo-target").is_dir() && dir.join("pytest-cache").is_dir());
    std::fs::write(dir.join("cargo-target/kept"), "x").unwrap();
    assert_eq!(turn.finish(), None);
    let turn = layer.begin(View::SessionDir, false).unwrap();
    assert!(dir.join("cargo-target/kept").exists());
    assert_eq!(turn.note, None);
    drop(turn);
    let turn = layer.begin(View::SessionDir, true).unwrap();
    assert!(!dir.join("cargo-target/kept").exists());
    assert!(dir.join("cargo-target").is_dir());
    assert_eq!(
        turn.note.as_deref(),
        Some("started from a clean layer (fresh_layer)")
    );
    drop(turn);
    // A budget of one byte: the dirs alone are over it once measured after a command.
    let small = SessionLayer::new(tmp.path().join("small"), tmp.path().join(".discarded"), 1);
    let _ = small.begin(View::SessionDir, false).unwrap().finish();
    let refused = small.begin(View::SessionDir, false).err();
    assert!(matches!(refused, Some(LayerRefusal::OverBudget { .. })));
    let words = refused.map(|r| r.to_string()).unwrap_or_default();
    assert!(
        words.starts_with("the session's command layer holds ")
            && words.contains("over its budget of 0 MiB: run the command with `fresh_layer: true`")
            && words.ends_with("or the owner raises CLAUDE_TOOLS_COMMAND_LAYER_MB"),
        "{words}"
    );
    assert!(small.begin(View::SessionDir, true).is_ok());
}

/// A new layer needs room for a full budget on the disk (layers still being deleted count): a
/// budget beyond the disk refuses the session's first command and a fresh layer, in words
/// naming the budget and what to do; an existing layer keeps working.
#[test]
fn a_new_or_fresh_layer_without_room_for_its_budget_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let huge = SessionLayer::new(
        tmp.path().join("s/layer"),
        tmp.path().join(".discarded"),
        1 << 60,
    );
    let refused = huge.begin(View::SessionDir, false).err();
    assert!(
        matches!(refused, Some(LayerRefusal::NoRoom(_))),
        "{refused:?}"
    );
    let words = refused.map(|r| r.to_string()).unwrap_or_default();
    assert!(
        words.contains("less than one session layer's budget of 1099511627776 MiB")
            && words.ends_with("the owner can lower CLAUDE_TOOLS_COMMAND_LAYER_MB"),
        "{words}"
    );
    // A layer that exists already is not a new one.
    std::fs::create_dir_all(tmp.path().join("s/layer")).unwrap();
    assert!(huge.begin(View::SessionDir, false).is_ok());
    assert!(matches!(
        huge.begin(View::SessionDir, true).err(),
        Some(LayerRefusal::NoRoom(_))
    ));
}

#[test]
fn roots_nest_under_home_and_keep_the_worktree_under_its_mask() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let home = base.join("home");
    let project = home.join("project");
    let state = home.join("state");
    let worktree = state.join("worktrees/s1");
    let repo_git = base.join("repo/.git");
    for dir in [&project, &worktree, &repo_git.join("worktrees/s1")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let layer = base.join("tmp/layer");
    let masks = [state.clone()];
    // A project under HOME: HOME alone.
    assert_eq!(
        roots(&home, &project, None, &masks, &layer),
        vec![home.clone()]
    );
    // The worktree under the masked state dir keeps its own overlay, and its Git dir too.
    std::fs::write(
        worktree.join(".git"),
        format!("gitdir: {}/worktrees/s1\n", repo_git.display()),
    )
    .unwrap();
    assert_eq!(
        roots(&home, &worktree, Some(&worktree), &masks, &layer),
        [home.clone(), worktree.clone(), repo_git.clone()]
    );
    // Another place under a mask is not a root; `/` and a root holding the layer neither.
    assert_eq!(
        roots(&home, &worktree, None, &masks, &layer),
        [home.clone(), repo_git.clone()]
    );
    assert_eq!(
        roots(Path::new("/"), &base, None, &[], &layer),
        Vec::<PathBuf>::new()
    );
}
