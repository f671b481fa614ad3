//! Unit tests of the split of a command's copy-on-write roots around mounts.

use super::*;

/// A canonical temp dir and `dirs` made under it.
fn tree(dirs: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    for dir in dirs {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    (tmp, base)
}

#[test]
fn roots_nest_under_home_and_keep_the_worktree_under_its_mask() {
    let (_tmp, base) = tree(&[
        "home/project",
        "home/state/worktrees/s1",
        "repo/.git/worktrees/s1",
    ]);
    let home = base.join("home");
    let project = home.join("project");
    let state = home.join("state");
    let worktree = state.join("worktrees/s1");
    let repo_git = base.join("repo/.git");
    let layer = base.join("tmp/layer");
    let masks = [state.clone()];
    let dirs = |home: &Path, wd: &Path, own: Option<&Path>, masks: &[PathBuf]| {
        let roots = roots_among(home, wd, own, masks, &layer, &[]);
        assert_eq!((roots.around.len(), roots.past_most), (0, 0));
        roots.dirs
    };
    // A project under HOME: HOME alone.
    assert_eq!(dirs(&home, &project, None, &masks), vec![home.clone()]);
    // The worktree under the masked state dir keeps its own overlay, and its Git dir too.
    std::fs::write(
        worktree.join(".git"),
        format!("gitdir: {}/worktrees/s1\n", repo_git.display()),
    )
    .unwrap();
    assert_eq!(
        dirs(&home, &worktree, Some(&worktree), &masks),
        [home.clone(), worktree.clone(), repo_git.clone()]
    );
    // Another place under a mask is not a root; `/` neither.
    assert_eq!(
        dirs(&home, &worktree, None, &masks),
        [home.clone(), repo_git.clone()]
    );
    assert_eq!(
        dirs(Path::new("/"), &repo_git, None, &[]),
        std::slice::from_ref(&repo_git)
    );
}

/// Red team 46: one mount inside HOME made every command fail (no overlay over a directory
/// holding locked mounts). HOME is split around it: its other directories are roots, the mount
/// and the directories leading to it are not, a masked directory is never a root of its own,
/// and the note names the mount.
#[test]
fn a_mount_inside_home_splits_it_around_the_mount() {
    let (_tmp, base) = tree(&[
        "home/project/src",
        "home/.cache/pip",
        "home/.ssh",
        "home/mnt/fuse/deep",
        "home/mnt/other",
    ]);
    let home = base.join("home");
    std::fs::write(home.join(".bashrc"), "").unwrap();
    let fuse = home.join("mnt/fuse");
    let layer = base.join("area/layer");
    let masks = [home.join(".ssh")];
    let roots = roots_among(
        &home,
        &home.join("project"),
        None,
        &masks,
        &layer,
        &[PathBuf::from("/"), home.clone(), fuse.clone()],
    );
    assert_eq!(
        roots.dirs,
        [
            home.join(".cache"),
            home.join("mnt/other"),
            home.join("project")
        ]
    );
    assert_eq!(roots.around, std::slice::from_ref(&fuse));
    let note = roots.note().unwrap();
    assert!(
        note.contains(&format!("({})", fuse.display())) && note.contains("read-only"),
        "{note}"
    );
    // A mount below the project itself: the project is split too.
    let deep = home.join("project/src/mounted");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::create_dir_all(home.join("project/src/lib")).unwrap();
    let roots = roots_among(
        &home,
        &home.join("project"),
        None,
        &masks,
        &layer,
        &[fuse.clone(), deep.clone()],
    );
    assert_eq!(
        roots.dirs,
        [
            home.join(".cache"),
            home.join("mnt/other"),
            home.join("project/src/lib")
        ]
    );
    assert_eq!(roots.around, [fuse, deep]);
}

/// The project on a mount of its own inside HOME stays copy-on-write (the mount is split in
/// turn) and is not named read-only; the layer dir inside HOME (which before left HOME wholly
/// read-only) is a hole the note does not name.
#[test]
fn the_project_s_own_mount_and_the_layer_dir_are_holes_not_losses() {
    let (_tmp, base) = tree(&["home/work/app", "home/.cache/ngw/layer", "home/.config"]);
    let home = base.join("home");
    let work = home.join("work");
    let layer = home.join(".cache/ngw/layer");
    let roots = roots_among(
        &home,
        &work.join("app"),
        None,
        &[],
        &layer,
        std::slice::from_ref(&work),
    );
    assert_eq!(roots.dirs, [home.join(".config"), work.clone()]);
    assert_eq!(roots.around, Vec::<PathBuf>::new());
    assert_eq!(roots.note(), None);
}

/// Past [`MOST_ROOTS`] overlays the working directory's comes first and the rest stay read-only,
/// counted in the note.
#[test]
fn a_wide_home_is_bounded_and_keeps_the_project_first() {
    let names: Vec<String> = (0..70).map(|n| format!("d{n:02}")).collect();
    let mut dirs: Vec<&str> = names.iter().map(String::as_str).collect();
    dirs.extend(["zz-project", "mnt/m"]);
    let (_tmp, base) = tree(&dirs);
    let roots = roots_among(
        &base,
        &base.join("zz-project"),
        None,
        &[],
        Path::new("/elsewhere/layer"),
        &[base.join("mnt/m")],
    );
    assert_eq!(roots.dirs.len(), MOST_ROOTS);
    assert_eq!(roots.dirs[0], base.join("zz-project"));
    assert_eq!(roots.past_most, 71 - MOST_ROOTS);
    let note = roots.note().unwrap();
    assert!(note.contains("; 7 further directories"), "{note}");
}
