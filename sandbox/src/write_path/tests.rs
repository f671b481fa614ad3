//! Unit tests of the write-target resolver: containment, `.git` and protected refusals, symlinks
//! at every position, hard links, FIFOs, parent creation and the parent re-verification.

use super::*;
use std::os::unix::fs::symlink;

pub(super) struct Fixture {
    _tmp: tempfile::TempDir,
    pub(super) base: PathBuf,
    pub(super) root: PathBuf,
    pub(super) policy: PathPolicy,
}

/// A root `work/` with `src/lib.rs`, next to a home with `.ssh`.
pub(super) fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("work");
    let home = base.join("home");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn main() {}\n").unwrap();
    let policy = PathPolicy::new(home, base.join("state"), vec![]);
    Fixture {
        _tmp: tmp,
        base,
        root,
        policy,
    }
}

fn resolve(f: &Fixture, path: &Path, parents: Parents) -> Result<WriteTarget, WriteRefusal> {
    WriteRoot::open(&f.policy, &f.root)
        .unwrap()
        .resolve(&f.policy, path, parents)
}

fn code(f: &Fixture, path: &Path, parents: Parents) -> OutcomeCode {
    resolve(f, path, parents).unwrap_err().code()
}

#[test]
fn resolves_existing_and_new_files() {
    let f = fixture();
    let t = resolve(&f, &f.root.join("src/lib.rs"), Parents::MustExist).unwrap();
    assert_eq!(t.name(), "lib.rs");
    let id = t.existing().unwrap();
    assert_eq!(id.size, 13);
    let (_, opened) = t.open_existing(&f.policy).unwrap().unwrap();
    assert_eq!((opened.dev, opened.ino), (id.dev, id.ino));
    let t = resolve(&f, &f.root.join("src/new.rs"), Parents::MustExist).unwrap();
    assert!(t.existing().is_none());
    assert!(t.open_existing(&f.policy).unwrap().is_none());
    // A file directly in the root.
    let t = resolve(&f, &f.root.join("top.txt"), Parents::MustExist).unwrap();
    assert!(t.existing().is_none());
    t.verify_parent(&WriteRoot::open(&f.policy, &f.root).unwrap(), &f.policy)
        .unwrap();
}

#[test]
fn creates_missing_parents_only_when_asked() {
    let f = fixture();
    let path = f.root.join("a/b/c/file.txt");
    assert_eq!(code(&f, &path, Parents::MustExist), OutcomeCode::NotFound);
    assert!(!f.root.join("a").exists());
    let t = resolve(&f, &path, Parents::Create).unwrap();
    assert!(t.existing().is_none());
    assert!(f.root.join("a/b/c").is_dir());
}

#[test]
fn refuses_outside_the_root() {
    let f = fixture();
    std::fs::write(f.base.join("outside.txt"), "x").unwrap();
    let err = resolve(&f, &f.base.join("outside.txt"), Parents::MustExist).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
    assert!(err.to_string().contains("outside the write root"), "{err}");
    assert_eq!(
        code(&f, &f.root.join("../outside.txt"), Parents::MustExist),
        OutcomeCode::InvalidArgument
    );
    assert_eq!(
        code(&f, &f.root.join("src/../../outside.txt"), Parents::Create),
        OutcomeCode::InvalidArgument
    );
    assert_eq!(
        code(&f, Path::new("relative.txt"), Parents::Create),
        OutcomeCode::InvalidArgument
    );
    assert_eq!(
        code(&f, Path::new("/etc/passwd"), Parents::Create),
        OutcomeCode::NotPermitted
    );
    // A sibling whose name starts with the root's name is outside too.
    std::fs::create_dir(f.base.join("work2")).unwrap();
    assert_eq!(
        code(&f, &f.base.join("work2/x"), Parents::Create),
        OutcomeCode::NotPermitted
    );
    // The root itself and trailing slashes name directories.
    assert_eq!(code(&f, &f.root, Parents::Create), OutcomeCode::NotAFile);
    assert_eq!(
        code(
            &f,
            Path::new(&format!("{}/src/", f.root.display())),
            Parents::Create
        ),
        OutcomeCode::NotAFile
    );
}

#[test]
fn refuses_git_in_any_case() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join(".git")).unwrap();
    // Also the spellings HFS+ and other insensitive file systems open as `.git` (ignorable
    // code points, Unicode case), on every platform.
    for rel in [
        ".git/config",
        ".GIT/config",
        "sub/.Git/HEAD",
        ".git",
        ".git\u{200c}/config",
        "sub/.g\u{200d}it/HEAD",
        "sub/\u{feff}.git/config",
    ] {
        let err = resolve(&f, &f.root.join(rel), Parents::Create).unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
        assert!(err.to_string().contains("`.git`"), "{rel}: {err}");
    }
    assert!(!f.root.join("sub").exists(), "nothing created on refusal");
}

#[test]
fn refuses_protected_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let policy = PathPolicy::new(home.clone(), base.join("state"), vec![]);
    // The whole home is the write root here.
    let root = WriteRoot::open(&policy, &home).unwrap();
    for rel in [".ssh/authorized_keys", ".aws/credentials", ".netrc"] {
        let err = root
            .resolve(&policy, &home.join(rel), Parents::Create)
            .unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
    }
    assert!(!home.join(".aws").exists());
}

#[test]
fn refuses_symlinks_anywhere() {
    let f = fixture();
    let outside = f.base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("f"), "x").unwrap();
    symlink(&outside, f.root.join("linkdir")).unwrap();
    symlink("src", f.root.join("inner_link")).unwrap();
    symlink(outside.join("f"), f.root.join("filelink")).unwrap();
    symlink("missing", f.root.join("dangling")).unwrap();
    symlink("loop", f.root.join("loop")).unwrap();
    for (rel, parents) in [
        ("linkdir/f", Parents::MustExist),
        ("linkdir/new/f", Parents::Create),
        ("inner_link/lib.rs", Parents::MustExist),
        ("filelink", Parents::MustExist),
        ("dangling", Parents::Create),
        ("loop", Parents::Create),
        ("loop/x", Parents::Create),
    ] {
        let err = resolve(&f, &f.root.join(rel), parents).unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}: {err}");
        assert!(err.to_string().contains("symbolic link"), "{rel}: {err}");
    }
    assert!(!outside.join("new").exists());
}

#[test]
fn refuses_symlinked_root() {
    let f = fixture();
    symlink(&f.root, f.base.join("rootlink")).unwrap();
    let err = WriteRoot::open(&f.policy, &f.base.join("rootlink")).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
}

#[test]
fn refuses_hard_links_and_non_regular_files() {
    let f = fixture();
    std::fs::hard_link(f.root.join("src/lib.rs"), f.base.join("alias")).unwrap();
    let err = resolve(&f, &f.root.join("src/lib.rs"), Parents::MustExist).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
    assert!(err.to_string().contains("hard links"), "{err}");

    assert_eq!(
        code(&f, &f.root.join("src"), Parents::MustExist),
        OutcomeCode::NotAFile
    );
    let fifo = f.root.join("fifo");
    nix_mkfifo(&fifo);
    let started = std::time::Instant::now();
    assert_eq!(code(&f, &fifo, Parents::MustExist), OutcomeCode::NotAFile);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    // A file where a directory is expected.
    assert_eq!(
        code(&f, &f.root.join("src/lib.rs/x"), Parents::Create),
        OutcomeCode::NotADirectory
    );
}

#[test]
fn open_existing_refuses_a_fifo_swapped_in_without_blocking() {
    let f = fixture();
    let path = f.root.join("src/lib.rs");
    let t = resolve(&f, &path, Parents::MustExist).unwrap();
    std::fs::remove_file(&path).unwrap();
    nix_mkfifo(&path);
    let started = std::time::Instant::now();
    let err = t.open_existing(&f.policy).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotAFile);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn verify_parent_detects_a_moved_or_swapped_parent() {
    let f = fixture();
    let root = WriteRoot::open(&f.policy, &f.root).unwrap();
    let t = root
        .resolve(&f.policy, &f.root.join("src/lib.rs"), Parents::MustExist)
        .unwrap();
    t.verify_parent(&root, &f.policy).unwrap();
    let moved = f.base.join("moved");
    std::fs::rename(f.root.join("src"), &moved).unwrap();
    symlink(&moved, f.root.join("src")).unwrap();
    let err = t.verify_parent(&root, &f.policy).unwrap_err();
    assert_eq!(err.code(), OutcomeCode::Conflict);
    // Replaced by another real directory: also refused.
    std::fs::remove_file(f.root.join("src")).unwrap();
    std::fs::create_dir(f.root.join("src")).unwrap();
    assert_eq!(
        t.verify_parent(&root, &f.policy).unwrap_err().code(),
        OutcomeCode::Conflict
    );
}

fn nix_mkfifo(path: &Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, Mode::from_raw_mode(0o600)).unwrap();
}

#[test]
fn component_walk_refuses_symlinks_and_creates_directories() {
    // The portable walk (used off Linux, for diagnosis and for creating parents) on its own.
    let f = fixture();
    let root = WriteRoot::open(&f.policy, &f.root).unwrap();
    symlink(f.base.join("home"), f.root.join("linkdir")).unwrap();
    let target = f.root.join("linkdir/x");
    let err = root
        .walk(
            &f.policy,
            &[OsStr::new("linkdir")],
            &target,
            Parents::Create,
        )
        .unwrap_err();
    assert_eq!(err.code(), OutcomeCode::NotPermitted, "{err}");
    let fd = root
        .walk(
            &f.policy,
            &[OsStr::new("n1"), OsStr::new("n2")],
            &f.root.join("n1/n2/x"),
            Parents::Create,
        )
        .unwrap();
    let st = rustix::fs::fstat(&fd).unwrap();
    assert_eq!(FileType::from_raw_mode(st.st_mode), FileType::Directory);
    assert!(f.root.join("n1/n2").is_dir());
}

#[test]
fn odd_names_are_refused_or_outside() {
    let f = fixture();
    let long = "x".repeat(256);
    let nul = PathBuf::from(OsStr::from_bytes(
        format!("{}/a\0b", f.root.display()).as_bytes(),
    ));
    for (path, code) in [
        (
            PathBuf::from(format!("/proc/self/root{}/x", f.root.display())),
            OutcomeCode::NotPermitted,
        ),
        (PathBuf::from("/dev/fd/3"), OutcomeCode::NotPermitted),
        (f.root.join(&long), OutcomeCode::InvalidArgument),
        (nul, OutcomeCode::InvalidArgument),
        (
            PathBuf::from(format!("{}//x", f.root.display())),
            OutcomeCode::InvalidArgument,
        ),
        (
            PathBuf::from(format!("{}/./x", f.root.display())),
            OutcomeCode::InvalidArgument,
        ),
    ] {
        assert_eq!(code_of(&f, &path), code, "{}", path.display());
    }
    // Backslashes and invalid UTF-8 are ordinary name bytes on Unix.
    let t = resolve(&f, &f.root.join("a\\b"), Parents::MustExist).unwrap();
    assert_eq!(t.name(), "a\\b");
    let odd = f.root.join(OsStr::from_bytes(b"bad\xffname"));
    assert!(
        resolve(&f, &odd, Parents::MustExist)
            .unwrap()
            .existing()
            .is_none()
    );
}

fn code_of(f: &Fixture, path: &Path) -> OutcomeCode {
    code(f, path, Parents::Create)
}

#[test]
fn a_root_holding_the_state_dir_never_writes_into_it() {
    // Issue 11, finding 4: a direct-write root that contains the state dir (the default
    // `./state` of a checkout). The read policy opens `<state>/worktrees`; the write policy opens
    // only the session's own worktree, and never another's.
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("checkout");
    let state = root.join("state");
    let other = state.join("worktrees/ns_other");
    let own = state.join("worktrees/ns_own");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::create_dir_all(&own).unwrap();
    std::fs::create_dir_all(state.join("auth")).unwrap();
    let plain = PathPolicy::new(base.join("home"), state.clone(), vec![]);
    for policy in [plain.clone(), plain.clone().with_open_subtree(own.clone())] {
        let w = WriteRoot::open(&policy, &root).unwrap();
        for target in [
            other.join("lib.rs"),
            other.join("deep/new.rs"),
            state.join("auth/access-token"),
            state.join("new.txt"),
            own.join("x.rs"),
        ] {
            let err = w.resolve(&policy, &target, Parents::Create).unwrap_err();
            assert!(
                matches!(err, WriteRefusal::Path(PathRefusal::Protected { .. })),
                "{target:?}: {err:?}"
            );
            assert_eq!(err.code(), OutcomeCode::NotPermitted);
        }
        assert!(!other.join("deep").exists());
        w.resolve(&policy, &root.join("src/ok.rs"), Parents::Create)
            .unwrap();
    }
    // The worktree session itself: its root is its own worktree, which it may write.
    let policy = plain.with_open_subtree(own.clone());
    let w = WriteRoot::open(&policy, &own).unwrap();
    w.resolve(&policy, &own.join("src/lib.rs"), Parents::Create)
        .unwrap();
}

#[test]
fn the_state_dir_under_another_name_is_refused_by_identity() {
    // The state dir reached under a name the lexical rules do not know (a rename after the
    // policy was built): the walk up from the parent meets its identity.
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("checkout");
    let state = root.join("state");
    std::fs::create_dir_all(state.join("run/deep")).unwrap();
    let policy = PathPolicy::new(base.join("home"), state.clone(), vec![]);
    std::fs::rename(&state, root.join("renamed")).unwrap();
    let w = WriteRoot::open(&policy, &root).unwrap();
    let err = w
        .resolve(
            &policy,
            &root.join("renamed/run/deep/x"),
            Parents::MustExist,
        )
        .unwrap_err();
    assert!(
        matches!(err, WriteRefusal::Path(PathRefusal::Protected { .. })),
        "{err:?}"
    );
}

#[test]
fn install_locations_are_never_written() {
    let f = fixture();
    let package = f.root.join("node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("package.json"), "{}").unwrap();
    std::fs::write(package.join("cli.js"), "x").unwrap();
    let bin = f.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(package.join("cli.js"), bin.join("claude")).unwrap();
    let gateway = f.base.join("opt/gateway");
    std::fs::create_dir_all(gateway.parent().unwrap()).unwrap();
    std::fs::write(&gateway, "x").unwrap();
    let policy = f
        .policy
        .clone()
        .with_write_protected(crate::protected::install_locations(
            &gateway,
            &bin.join("claude"),
        ));
    let w = WriteRoot::open(&policy, &f.root).unwrap();
    for target in [
        package.join("cli.js"),
        package.join("new.js"),
        package.join("sub/dir/x.js"),
        bin.join("claude"),
    ] {
        let err = w.resolve(&policy, &target, Parents::Create).unwrap_err();
        assert!(
            matches!(err, WriteRefusal::InstallLocation { .. }),
            "{target:?}: {err:?}"
        );
        assert_eq!(err.code(), OutcomeCode::NotPermitted);
        assert!(
            err.to_string()
                .contains("where the gateway or Claude Code is installed")
        );
    }
    assert!(!package.join("sub").exists());
    // A root inside an install location cannot be opened for writes at all.
    let err = WriteRoot::open(&policy, &package).unwrap_err();
    assert!(
        matches!(err, WriteRefusal::InstallLocation { .. }),
        "{err:?}"
    );
    // Elsewhere in the root writes go on.
    w.resolve(&policy, &f.root.join("src/ok.rs"), Parents::Create)
        .unwrap();
}

#[test]
fn a_root_replaced_at_its_path_is_never_resolved_into() {
    let f = fixture();
    let root = WriteRoot::open(&f.policy, &f.root).unwrap();
    let target = f.root.join("src/lib.rs");
    assert!(root.resolve(&f.policy, &target, Parents::MustExist).is_ok());
    // Moved away, another directory in its place: the held descriptor is the old one, the path
    // names the new one; writing either would make the receipt's path lie.
    std::fs::rename(&f.root, f.base.join("work.old")).unwrap();
    std::fs::create_dir_all(f.root.join("src")).unwrap();
    let refusal = root
        .resolve(&f.policy, &target, Parents::MustExist)
        .unwrap_err();
    assert!(
        matches!(refusal, WriteRefusal::RootReplaced { .. }),
        "{refusal:?}"
    );
    assert_eq!(refusal.code(), OutcomeCode::NotPermitted);
    assert!(
        refusal.to_string().contains("no longer the directory"),
        "{refusal}"
    );
    // Gone altogether: the same.
    std::fs::remove_dir_all(&f.root).unwrap();
    assert!(matches!(
        root.resolve(&f.policy, &target, Parents::MustExist),
        Err(WriteRefusal::RootReplaced { .. })
    ));
}

#[test]
fn a_root_opened_as_another_directory_than_recorded_is_refused() {
    let f = fixture();
    let identity = WriteRoot::open(&f.policy, &f.root).unwrap().identity();
    assert!(
        WriteRoot::open(&f.policy, &f.root)
            .unwrap()
            .expecting(Some(identity))
            .is_ok()
    );
    assert!(
        WriteRoot::open(&f.policy, &f.root)
            .unwrap()
            .expecting(None)
            .is_ok()
    );
    let other = (identity.0, identity.1 + 1);
    let refusal = WriteRoot::open(&f.policy, &f.root)
        .unwrap()
        .expecting(Some(other))
        .unwrap_err();
    assert!(
        matches!(refusal, WriteRefusal::RootReplaced { .. }),
        "{refusal:?}"
    );
}

#[test]
fn auto_run_places_are_refused_and_nothing_is_created() {
    let f = fixture();
    for rel in [
        ".claude/settings.json",
        ".claude/commands/deploy.md",
        "sub/project/.claude/settings.local.json",
        ".mcp.json",
        ".vscode/tasks.json",
        ".VSCode/tasks.json",
        ".idea/workspace.xml",
        ".envrc",
        ".venv/lib/python3.12/site-packages/evil.pth",
        ".bashrc",
    ] {
        let path = f.root.join(rel);
        let err = resolve(&f, &path, Parents::Create).unwrap_err();
        assert_eq!(err.code(), OutcomeCode::NotPermitted, "{rel}");
        assert!(
            matches!(err, WriteRefusal::AutorunPlace { .. }),
            "{rel}: {err}"
        );
        let text = err.to_string();
        assert!(text.contains("auto-run place"), "{text}");
        assert!(
            text.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES="),
            "{text}"
        );
        // Write's parent creation never ran: the refusal comes before any directory is made.
        let first = Path::new(rel).components().next().unwrap();
        if Path::new(rel).components().count() > 1 {
            assert!(
                !f.root.join(first).exists(),
                "{rel}: a directory was created"
            );
        }
    }
    let err = resolve(&f, &f.root.join(".claude/settings.json"), Parents::Create).unwrap_err();
    assert!(err.to_string().contains("(agent_config:"), "{err}");
}

#[test]
fn ordinary_files_with_auto_run_like_names_stay_writable() {
    let f = fixture();
    for rel in [
        "docs/.vscode.md",
        "src/settings.json",
        "claude/settings.json",
        "evil.pth",
        "lib/packages/x.pth",
        ".envrc.example",
    ] {
        resolve(&f, &f.root.join(rel), Parents::Create)
            .unwrap_or_else(|err| panic!("{rel}: {err}"));
    }
}

#[test]
fn the_owner_can_allow_one_class() {
    use crate::protected::autorun::AutorunAllowed;
    let mut f = fixture();
    f.policy = f
        .policy
        .clone()
        .with_autorun_allowed(AutorunAllowed::parse("editor_config").unwrap());
    resolve(&f, &f.root.join(".vscode/tasks.json"), Parents::Create).unwrap();
    let err = resolve(&f, &f.root.join(".claude/settings.json"), Parents::Create).unwrap_err();
    assert!(matches!(
        err,
        WriteRefusal::AutorunPlace {
            class: "agent_config",
            ..
        }
    ));
}
