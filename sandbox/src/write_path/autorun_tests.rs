//! Unit tests of the write policy's auto-run checks that look at the file system: targets
//! reachable as an auto-run place through the root's symlinks (issue 23, F2), directories git
//! takes as a repository (F3) and virtual environments' `bin/` (F6).

use super::*;
use std::os::unix::fs::symlink;

use super::tests::{Fixture, fixture};

impl Fixture {
    pub(super) fn mkdir(&self, rel: &str) {
        std::fs::create_dir_all(self.root.join(rel)).unwrap();
    }

    pub(super) fn file(&self, rel: &str) {
        self.put(rel, "x");
    }

    pub(super) fn put(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub(super) fn link(&self, rel: &str, target: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    /// A fresh root each time: the symlink scan is cached per root.
    pub(super) fn write(&self, rel: &str) -> Result<WriteTarget, WriteRefusal> {
        WriteRoot::open(&self.policy, &self.root).unwrap().resolve(
            &self.policy,
            &self.root.join(rel),
            Parents::Create,
        )
    }

    pub(super) fn refused(&self, rel: &str, class: &str) -> String {
        match self.write(rel) {
            Err(err @ WriteRefusal::AutorunPlace { class: got, .. }) if got == class => {
                assert_eq!(err.code(), OutcomeCode::NotPermitted);
                err.to_string()
            }
            other => panic!("{rel}: expected {class}, got {other:?}"),
        }
    }

    /// [`Self::refused`], and the refusal says `says`.
    pub(super) fn refused_saying(&self, rel: &str, class: &str, says: &str) {
        let message = self.refused(rel, class);
        assert!(message.contains(says), "{rel}: {message}");
    }

    pub(super) fn allowed(&self, rel: &str) {
        if let Err(err) = self.write(rel) {
            panic!("{rel}: {err}");
        }
    }
}

#[test]
fn a_symlinked_auto_run_directory_makes_its_target_one() {
    let f = fixture();
    // Dangling now: the write would create the directory the link names.
    f.link(".claude", "cfg/cl");
    f.refused_saying(
        "cfg/cl/settings.json",
        "agent_config",
        &format!(
            "reachable as {} through a symlink",
            f.root.join(".claude/settings.json").display()
        ),
    );
    assert!(!f.root.join("cfg").exists(), "no parent was created");
    f.mkdir("cfg/cl/commands");
    f.refused("cfg/cl/commands/x.md", "agent_config");
    // `..` and an absolute target into the root; a subproject's link.
    f.link("sub/.vscode", "../x/../y");
    f.refused("y/tasks.json", "editor_config");
    f.link(".mcp.json", &f.root.join("data/m.json").to_string_lossy());
    f.refused("data/m.json", "agent_config");
    // A symlinked `site-packages`.
    f.link(".venv/lib/python3.12/site-packages", "../../../pkgs");
    f.refused("pkgs/evil.pth", "python_startup");
    f.refused("pkgs/module.py", "python_startup");
    // Ordinary files next to them, and ordinary symlinks, change nothing.
    f.allowed("cfg/other.json");
    f.link("docs/README.md", "../README.md");
    f.allowed("README.md");
    f.link("out", "/tmp");
    f.allowed("src/new.rs");
}

#[test]
fn symlinked_files_and_chains_are_followed() {
    let f = fixture();
    f.file("notes/x");
    f.link(".envrc", "notes/x");
    f.refused("notes/x", "directory_hooks");
    // A chain of directory links.
    f.link(".vscode", "a");
    f.link("a", "b");
    f.refused("b/settings.json", "editor_config");
    // A link inside a linked directory.
    f.mkdir("cfg");
    f.link(".claude", "cfg");
    f.link("cfg/settings.json", "../notes/y");
    f.refused("notes/y", "agent_config");
    // A link through another link's name, and a loop.
    f.link("lnk", "deep/er");
    f.link(".zshrc", "lnk/z");
    f.refused("deep/er/z", "shell_startup");
    f.link("loop1", "loop2");
    f.link("loop2", "loop1");
    f.allowed("src/new.rs");
}

#[test]
fn an_auto_run_name_linked_to_the_root_makes_everything_one() {
    let f = fixture();
    f.link("tools/.claude", "..");
    f.refused("src/lib.rs", "agent_config");
}

#[test]
fn the_owner_allowing_the_class_allows_its_aliases() {
    use crate::protected::autorun::AutorunAllowed;
    let mut f = fixture();
    f.policy = f
        .policy
        .clone()
        .with_autorun_allowed(AutorunAllowed::parse("agent_config").unwrap());
    f.link(".claude", "cfg/cl");
    f.allowed("cfg/cl/settings.json");
    f.link(".envrc", "notes/x");
    f.refused("notes/x", "directory_hooks");
}

#[test]
fn an_embedded_repository_is_refused_whole() {
    let f = fixture();
    for piece in ["tools/objects/pack", "tools/refs/heads"] {
        f.mkdir(piece);
    }
    f.file("tools/HEAD");
    for rel in [
        "tools/config",
        "tools/hooks/pre-commit",
        "tools/HEAD",
        "tools/description",
        "tools/objects/ab/cd",
    ] {
        f.refused(rel, "vcs_config");
    }
    f.refused_saying(
        "tools/config",
        "vcs_config",
        "a directory on its way holds or would hold git's HEAD, objects, refs or \
             commondir: git would take it for a repository and run what its config names",
    );
    // A gitfile's target is the same kind of directory; a worktree's admin dir has `commondir`.
    f.file("wt/HEAD");
    f.refused("wt/commondir", "vcs_config");
    f.file("wt/commondir");
    f.refused("wt/config.worktree", "vcs_config");
    // A common dir (objects and refs) cannot get a config.
    f.mkdir("common/objects");
    f.mkdir("common/refs");
    f.refused("common/config", "vcs_config");
    f.allowed("common/objects/readme.txt");
}

#[test]
fn the_write_that_would_complete_a_repository_is_refused_in_any_order() {
    let orders: [[&str; 4]; 4] = [
        ["HEAD", "refs/heads/main", "objects/x", "config"],
        ["config", "HEAD", "objects/x", "refs/x"],
        ["objects/x", "refs/x", "config", "HEAD"],
        ["refs/x", "config", "HEAD", "objects/x"],
    ];
    for order in orders {
        let f = fixture();
        let rel = |piece: &str| format!("tools/{piece}");
        for piece in &order[..2] {
            f.allowed(&rel(piece));
            f.file(&rel(piece));
        }
        for piece in &order[2..] {
            f.refused(&rel(piece), "vcs_config");
        }
    }
    // Ordinary directories with one or two of the names stay writable.
    let f = fixture();
    f.mkdir("app/config");
    f.mkdir("app/refs");
    f.allowed("app/config/settings.toml");
    f.allowed("app/main.py");
    f.allowed("docs/HEAD.md");
}

#[test]
fn a_root_inside_a_repository_is_refused() {
    let f = fixture();
    let base = &f.base;
    std::fs::create_dir_all(base.join("objects")).unwrap();
    std::fs::create_dir_all(base.join("refs")).unwrap();
    std::fs::write(base.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    f.refused("src/lib.rs", "vcs_config");
}

#[test]
fn a_virtual_environment_s_programs_are_refused() {
    let f = fixture();
    f.file(".venv/pyvenv.cfg");
    f.refused(".venv/bin/pip", "python_startup");
    f.refused(".venv/bin/python3.12", "python_startup");
    f.refused(".venv/Scripts/activate.bat", "python_startup");
    f.allowed(".venv/README.txt");
    // pip's configuration at the environment's root names package sources; elsewhere pip
    // never reads a pip.conf.
    f.refused(".venv/pip.conf", "toolchain_config");
    f.refused(".venv/PIP.INI", "toolchain_config");
    f.allowed("docker/pip.conf");
    f.allowed("tools/bin/run.sh");
    // Only a real environment's `bin/` whole; its activation scripts by name too: auto-venv
    // shell plugins source `venv/bin/activate` without a pyvenv.cfg (red team 28).
    f.refused("tools/bin/activate", "python_startup");
    f.allowed("src/bin/activate.rs");
    f.allowed("scripts/bin/activate_account.py");
    // Through a symlinked `bin`.
    f.link(".venv/bin", "../programs");
    f.refused("programs/pip", "python_startup");
}

#[test]
fn a_conda_environment_s_programs_are_refused_and_the_message_says_why() {
    let f = fixture();
    f.mkdir("cenv/conda-meta");
    f.refused_saying(
        "cenv/bin/pip",
        "python_startup",
        "it is in the bin/ of a Python environment, a directory holding pyvenv.cfg or \
             conda-meta/: its programs run whenever the environment is used",
    );
    f.refused("cenv/bin/activate", "python_startup");
    f.refused("cenv/lib/python3.11/site-packages/x.pth", "python_startup");
    f.refused("cenv/etc/conda/activate.d/x.sh", "python_startup");
    f.allowed("cenv/README.md");
}

#[test]
fn a_repository_completed_after_resolution_is_caught_before_the_rename() {
    let f = fixture();
    f.mkdir("tools/objects");
    let root = WriteRoot::open(&f.policy, &f.root).unwrap();
    let target = root
        .resolve(&f.policy, &f.root.join("tools/HEAD"), Parents::Create)
        .unwrap();
    target.verify_parent(&root, &f.policy).unwrap();
    // Another writer adds the third piece meanwhile.
    f.mkdir("tools/refs");
    let err = target.verify_parent(&root, &f.policy).unwrap_err();
    assert!(
        matches!(
            err,
            WriteRefusal::AutorunPlace {
                class: "vcs_config",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn protected_directories_inside_the_root_are_not_scanned() {
    let mut f = fixture();
    let secret = f.root.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    f.policy = PathPolicy::new(f.base.join("home"), f.base.join("state"), vec![secret]);
    f.link("secret/.claude", "../cfg");
    f.allowed("cfg/settings.json");
    f.link("open/.claude", "../cfg");
    f.refused("cfg/settings.json", "agent_config");
}

#[test]
fn a_symlink_in_git_hooks_makes_its_target_a_hook() {
    let f = fixture();
    f.mkdir(".git/hooks");
    f.file("scripts/pre-commit");
    f.link(".git/hooks/pre-commit", "../../scripts/pre-commit");
    f.refused_saying(
        "scripts/pre-commit",
        "git_hooks",
        "in a git hooks directory (core.hooksPath, hooks/) or what a symlink there names",
    );
    f.allowed("scripts/build.sh");
}

#[test]
fn a_symlinked_hooks_dir_of_a_gitfile_s_repository_is_refused() {
    let f = fixture();
    // A gitfile naming a git dir outside the root whose `hooks` is a link into the root.
    let git_dir = f.base.join("elsewhere.git");
    std::fs::create_dir_all(&git_dir).unwrap();
    symlink(f.root.join("sub/ci-hooks"), git_dir.join("hooks")).unwrap();
    f.mkdir("sub");
    f.put("sub/.git", &format!("gitdir: {}\n", git_dir.display()));
    f.refused("sub/ci-hooks/post-checkout", "git_hooks");
    f.allowed("sub/ci/post-checkout");
}

#[test]
fn core_hooks_path_names_a_hook_directory() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[user]\n\tname = a\n[core] hooksPath = \"tools/\\\n hooks\" ; comment\n",
    );
    f.refused_saying("tools/ hooks/pre-commit", "git_hooks", "tools/ hooks");
    f.allowed("tools/hooks/pre-commit");
}

#[test]
fn included_config_files_are_version_control_config() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[include]\n\tpath = ../shared.gitconfig\n\
         [includeIf \"gitdir:~/never/\"]\n\tpath = ../cfg/cond.inc\n",
    );
    // An included file's own include and hooksPath count too.
    f.mkdir("cfg");
    f.put(
        "cfg/cond.inc",
        "[core]\n\thookspath = hk\n[include]\n\tpath = deeper.inc\n",
    );
    f.refused("shared.gitconfig", "vcs_config");
    f.refused("cfg/cond.inc", "vcs_config");
    f.refused("cfg/deeper.inc", "vcs_config");
    // Relative to the working tree's top, not to the file that set it.
    f.refused("hk/x", "git_hooks");
    f.allowed("cfg/hk/x");
}

#[test]
fn a_linked_worktree_s_hooks_path_is_relative_to_its_top() {
    let f = fixture();
    // The main repository keeps the config; the worktree's gitfile and commondir lead there.
    f.mkdir("main/.git/worktrees/wt");
    f.put("main/.git/config", "[core]\nhooksPath=hooks\n");
    f.put("main/.git/worktrees/wt/commondir", "../..\n");
    f.mkdir("wt");
    f.put("wt/.git", "gitdir: ../main/.git/worktrees/wt\n");
    f.refused("wt/hooks/post-checkout", "git_hooks");
    f.refused("main/hooks/post-checkout", "git_hooks");
    f.allowed("wt/src/hooks.rs");
}

#[test]
fn a_link_through_the_reader_s_context_reaches_its_class_everywhere() {
    let f = fixture();
    f.link(".claude", "/proc/self/cwd/cfg");
    let message = f.refused("cfg/settings.json", "agent_config");
    assert!(
        message.contains("depends on who reads it") && message.contains("/work/.claude"),
        "{message}"
    );
    // It may name the root itself: every file is reachable below it.
    f.refused("notes.txt", "agent_config");
    // A tail of the path below the link's name decides, as for any directory it may name.
    let g = fixture();
    g.link(".cargo", "/dev/fd/3/lib");
    g.refused("lib/config.toml", "toolchain_config");
    g.allowed("lib/module.py");
    g.link("data", "/proc/thread-self/root/srv");
    g.allowed("notes.txt");
    // Everything below a `site-packages` is installed code: such a link may reach any file.
    let h = fixture();
    h.link("site-packages", "/dev/fd/3/lib");
    h.refused("lib/evil.pth", "python_startup");
    h.refused("notes.txt", "python_startup");
}

#[test]
fn the_program_yarn_path_names_is_refused() {
    let f = fixture();
    f.file("yarnbin/yarn-4.cjs");
    f.put(
        ".yarnrc.yml",
        "nodeLinker: pnp\nyarnPath: \"yarnbin/yarn-4.cjs\" # pinned\n",
    );
    f.refused_saying("yarnbin/yarn-4.cjs", "toolchain_config", "yarnPath");
    f.allowed("yarnbin/other.cjs");
    // Yarn 1's `.yarnrc` names the program with `yarn-path`, quoted or not.
    f.file("legacy/yarnbin/y1.js");
    f.put("legacy/.yarnrc", "yarn-path \"yarnbin/y1.js\"\n");
    f.refused_saying("legacy/yarnbin/y1.js", "toolchain_config", "yarn-path");
    f.file("bare/tools/y.js");
    f.put("bare/.yarnrc", "# pinned\nyarn-path tools/y.js\n");
    f.refused("bare/tools/y.js", "toolchain_config");
    f.allowed("bare/tools/other.js");
    // Inside `.yarn/` everything is yarn's own (installed_packages) whatever names it.
    f.refused(".yarn/releases/any.cjs", "installed_packages");
}

#[test]
fn jvm_and_bazel_tool_config_is_refused_and_the_build_definition_is_not() {
    let f = fixture();
    for (rel, class) in [
        (".mvn/jvm.config", "toolchain_config"),
        (".mvn/maven.config", "toolchain_config"),
        (".mvn/extensions.xml", "toolchain_config"),
        (".mvn/wrapper/maven-wrapper.properties", "toolchain_config"),
        (
            "gradle/wrapper/gradle-wrapper.properties",
            "toolchain_config",
        ),
        ("gradle/wrapper/gradle-wrapper.jar", "toolchain_config"),
        (".bazelrc", "toolchain_config"),
        ("ws.code-workspace", "editor_config"),
        (".dir-locals.el", "editor_config"),
        (".overcommit.yml", "git_hooks"),
    ] {
        f.refused_saying(rel, class, class);
    }
    // A directory that is `.mvn` through a symlink is one under its own name too.
    f.mkdir("sub/cfg");
    f.link("sub/.mvn", "cfg");
    f.refused("sub/cfg/jvm.config", "toolchain_config");
    f.allowed("sub/cfg/notes.txt");
    for rel in [
        "pom.xml",
        "build.gradle",
        "gradle.properties",
        "gradlew",
        "mvnw",
        "BUILD.bazel",
    ] {
        f.allowed(rel);
    }
}

#[test]
fn a_linked_worktree_inherits_the_places_of_its_main_tree() {
    // The root is a linked worktree of `main`, outside it, as a worktree_write session's is.
    let f = fixture();
    let main = f.base.join("main");
    let mkdir = |rel: &str| std::fs::create_dir_all(main.join(rel)).unwrap();
    mkdir(".git/worktrees/wt");
    mkdir(".git/hooks");
    mkdir("scripts");
    mkdir("docs");
    std::fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
    symlink(
        "../../scripts/pre-commit",
        main.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    symlink(main.join("docs/oc.yml"), main.join(".overcommit.yml")).unwrap();
    f.put(".git", "gitdir: ../main/.git/worktrees/wt\n");
    // What the worktree holds at these paths is, after a merge, the main tree's hook and
    // overcommit's config.
    f.refused_saying("scripts/pre-commit", "git_hooks", "hooks");
    f.refused("docs/oc.yml", "git_hooks");
    f.allowed("scripts/build.sh");
    f.allowed("docs/readme.md");
}

#[test]
fn a_worktree_carries_the_places_of_the_directory_it_merges_into_whatever_the_layout() {
    // `git init --separate-git-dir`: the source's git dir is elsewhere and says nothing of the
    // source, so only the session's own record (the merge target) leads there.
    let f = fixture();
    let source = f.base.join("source");
    let git_dir = f.base.join("gd");
    std::fs::create_dir_all(git_dir.join("hooks")).unwrap();
    std::fs::create_dir_all(git_dir.join("worktrees/wt")).unwrap();
    std::fs::create_dir_all(source.join("scripts")).unwrap();
    std::fs::write(
        source.join(".git"),
        format!("gitdir: {}\n", git_dir.display()),
    )
    .unwrap();
    std::fs::write(git_dir.join("worktrees/wt/commondir"), "../..\n").unwrap();
    symlink(
        source.join("scripts/pre-commit"),
        git_dir.join("hooks/pre-commit"),
    )
    .unwrap();
    symlink(source.join("notes/x"), source.join(".envrc")).unwrap();
    f.put(
        ".git",
        &format!("gitdir: {}\n", git_dir.join("worktrees/wt").display()),
    );
    let write = |policy: &PathPolicy, rel: &str| {
        WriteRoot::open(policy, &f.root).unwrap().resolve(
            policy,
            &f.root.join(rel),
            Parents::Create,
        )
    };
    // Without the merge target nothing leads to the source (the common dir is not `.git`).
    assert!(write(&f.policy, "scripts/pre-commit").is_ok());
    let policy = f.policy.clone().with_merge_target(source.clone());
    for (rel, class) in [
        ("scripts/pre-commit", "git_hooks"),
        ("notes/x", "directory_hooks"),
    ] {
        match write(&policy, rel) {
            Err(WriteRefusal::AutorunPlace { class: got, .. }) if got == class => {}
            other => panic!("{rel}: expected {class}, got {other:?}"),
        }
    }
    assert!(write(&policy, "scripts/build.sh").is_ok());
}

#[test]
fn programs_git_s_configuration_names_in_the_tree_are_refused() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[core]\n\tfsmonitor = ./tools/fsmon\n[diff \"pdf\"]\n\ttextconv = sh scripts/pdf2txt --x\n\
         [filter \"lfs2\"]\n\tclean = \"bin/clean %f\"\n[alias]\n\tst = !./git-st.sh && true\n\
         [core]\n\tpager = less\n",
    );
    for rel in ["tools/fsmon", "scripts/pdf2txt", "bin/clean", "git-st.sh"] {
        f.refused_saying(rel, "git_hooks", "a program git's configuration runs (`");
    }
    // A bare name is found on PATH, never in the tree; the options are no files.
    for rel in ["less", "sh", "--x", "tools/other"] {
        f.allowed(rel);
    }
}

#[test]
fn a_hook_into_another_checkout_of_the_repository_is_refused_in_every_checkout() {
    // The root is the main tree; the owner's linked worktree `dev` elsewhere holds the hook's
    // target. A branch sync brings the root's file there.
    let f = fixture();
    let dev = f.base.join("dev");
    std::fs::create_dir_all(dev.join("scripts")).unwrap();
    f.mkdir(".git/worktrees/dev");
    f.mkdir(".git/hooks");
    std::fs::write(
        f.root.join(".git/worktrees/dev/gitdir"),
        format!("{}\n", dev.join(".git").display()),
    )
    .unwrap();
    std::fs::write(dev.join(".git"), "gitdir: ../work/.git/worktrees/dev\n").unwrap();
    std::fs::write(f.root.join(".git/worktrees/dev/commondir"), "../..\n").unwrap();
    symlink(
        dev.join("scripts/pre-commit"),
        f.root.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    f.refused("scripts/pre-commit", "git_hooks");
    f.allowed("scripts/build.sh");
}

#[test]
fn programs_named_as_the_shell_reads_them_or_the_whole_tree() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[core]\n\tfsmonitor = sh hooks/fsm.sh\n[diff \"y\"]\n\ttextconv = './tools/my conv.sh'\n\
         [alias]\n\ttt = !sh tt.sh\n\tenv = !env X=1 tools/e.sh\n",
    );
    // What a shell script sources is read from its lines, relative to where git runs it.
    f.put("hooks/fsm.sh", "#!/bin/sh\n. hooks/lib.sh\n");
    for rel in [
        "hooks/fsm.sh",
        "hooks/lib.sh",
        "tools/my conv.sh",
        "tt.sh",
        "tools/e.sh",
    ] {
        f.refused(rel, "git_hooks");
    }
    for rel in [
        "tools/my",
        "conv.sh",
        "X=1",
        "docs/readme.md",
        "hooks/other.sh",
    ] {
        f.allowed(rel);
    }
    // A program the shell computes, or a directory it computes: nothing can say which file
    // runs, so the whole tree is refused, naming why.
    for value in [
        "cd $DIR && ./conv.sh",
        "sh scripts/*.sh",
        "$HOME/p/tools/conv.sh",
        "\"$(git rev-parse --show-toplevel)\"/tools/conv.sh",
    ] {
        let g = fixture();
        g.mkdir(".git");
        g.put(
            ".git/config",
            &format!("[diff \"y\"]\n\ttextconv = {value}\n"),
        );
        let message = g.refused("docs/readme.md", "git_hooks");
        assert!(
            message
                .contains("git's configuration runs `diff.y.textconv`, whose files cannot be told"),
            "{value}: {message}"
        );
    }
}

#[test]
fn a_fifo_where_git_or_yarn_reads_a_file_never_hangs_a_write() {
    let f = fixture();
    f.mkdir(".git/worktrees/w");
    f.mkdir("sub");
    for rel in [
        ".git/config",
        ".git/commondir",
        ".git/worktrees/w/gitdir",
        ".yarnrc",
        "sub/.git",
    ] {
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, f.root.join(rel), mode).unwrap();
    }
    let (done, answered) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f.allowed("src/new.rs");
        let _ = done.send(());
    });
    answered
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("a write in a root whose git and yarn files are FIFOs is answered");
}

/// Red team 23h: keys git runs during ordinary commands that were not read, a script's
/// imports, `python -m`, `core.worktree`; and the owner's own aliases and helpers with `$1`,
/// `$@`, `-m` or `cd` no longer refuse every write of every repository.
#[test]
fn every_key_git_runs_by_itself_is_read_and_the_owner_s_commands_by_name_literally() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[diff]\n\texternal = sh/d.sh\n[gpg \"ssh\"]\n\tdefaultKeyCommand = sh sh/key.sh\n\
         [remote \"o\"]\n\tuploadpack = ./up/up.sh\n[difftool \"t\"]\n\tcmd = sh dt/dt.sh \"$LOCAL\"\n\
         [alias]\n\tdt = difftool -y -x 'sh dt/dx.sh'\n\tpr = \"!f() { git fetch origin pull/$1/head:pr-$1; }; f\"\n\
         \tac = !git add . && git commit\n\tup = !cd \"${GIT_PREFIX:-.}\" && ./dt/al.sh\n\
         [credential]\n\thelper = !aws codecommit credential-helper $@\n\thelper = !/usr/bin/gh auth git-credential\n\
         \thelper = \"!f() { echo \\\"password=$GITHUB_TOKEN\\\"; }; f\"\n\
         [core]\n\tsshCommand = ssh -i $HOME/.ssh/id_work\n\tpager = less -+$LESS -FRX\n\
         [diff \"json\"]\n\ttextconv = jq -S .\n[filter \"nbstripout\"]\n\tclean = python3 -I -m nbstripout\n\
         [diff \"j\"]\n\ttextconv = python3 py/conv.py\n",
    );
    for rel in [
        "sh/d.sh",
        "sh/key.sh",
        "up/up.sh",
        "dt/dt.sh",
        "dt/dx.sh",
        "py/conv.py",
        // Python's `sys.path[0]` is the script's directory: all of it, at any depth.
        "py/json.py",
        "py/newpkg/__init__.py",
        "py/readme.md",
        "py/pkg/mod.py",
    ] {
        f.refused_saying(rel, "git_hooks", "a program git's configuration runs (`");
    }
    // Ordinary work: the aliases, helpers, pagers and filters spell out no tree file (a `$`
    // in an argument is no file name), a package's own modules and other files beside a
    // Python script are the project's code, the owner's own commands name only their scripts.
    for rel in [
        "README.md",
        "auth/views.py",
        "src/main.rs",
        // A shell script (not there yet) loads nothing from beside it; `python3 -I -m`
        // imports nothing from the tree.
        "sh/lib.sh",
        "nbstripout.py",
        "json.py",
        "dt/notes.md",
        "tests/test_a.py",
        "origin",
    ] {
        f.allowed(rel);
    }
}

/// H4b: nbstripout's filter (`python -m nbstripout` from the top) makes what Python imports
/// from the top a place, matched case-insensitively, in the top and in a `core.worktree`;
/// the project's sources, notebooks and docs stay writable.
#[test]
fn python_m_from_the_top_refuses_what_shadows_its_imports() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[core]\n\tworktree = ../sub\n[filter \"nbstripout\"]\n\
         \tclean = \\\"/usr/bin/python3\\\" -m nbstripout\n",
    );
    for rel in [
        "nbstripout.py",
        "json.py",
        "JSON.PY",
        "newpkg/__init__.py",
        "nbstripout/x.py",
        "__pycache__/x.pyc",
        "_socket.so",
        "sub/json.py",
        "sub/nbstripout/__main__.py",
    ] {
        f.refused_saying(
            rel,
            "git_hooks",
            "a program git's configuration runs (`filter.nbstripout.clean`)",
        );
    }
    for rel in [
        "src/pkg/module.py",
        "notebooks/x.ipynb",
        "README.md",
        "tests/test_a.py",
        "sub/src/pkg/module.py",
        "sub/pkg/sub/__init__.py",
    ] {
        f.allowed(rel);
    }
}

#[test]
fn a_program_git_runs_in_another_worktree_or_a_submodule_is_placed_there() {
    let f = fixture();
    f.mkdir(".git");
    f.put(
        ".git/config",
        "[core]\n\tworktree = ../sub\n\tfsmonitor = sh hooks/fsm.sh\n",
    );
    f.refused("sub/hooks/fsm.sh", "git_hooks");
    f.refused("hooks/fsm.sh", "git_hooks");
    f.allowed("sub/src/x.rs");
    let g = fixture();
    g.mkdir(".git");
    g.put(
        ".git/config",
        "[submodule \"s\"]\n\tupdate = !sh tools/su.sh\n",
    );
    let message = g.refused("s/tools/su.sh", "git_hooks");
    assert!(message.contains("it runs inside a submodule"), "{message}");
    // An update mode that is no command names nothing.
    let h = fixture();
    h.mkdir(".git");
    h.put(".git/config", "[submodule \"s\"]\n\tupdate = rebase\n");
    h.allowed("s/tools/su.sh");
}

/// Red team 23j D: a value whose files cannot be told refuses the whole write root, not only
/// its repository (`cd ..` reaches past the repository's top).
#[test]
fn a_value_whose_files_cannot_be_told_refuses_the_whole_root() {
    let f = fixture();
    f.mkdir("w1/.git");
    f.put(
        "w1/.git/config",
        "[diff \"d\"]\n\ttextconv = cd \"$(dirname \"$PWD\")\" && sh tools/conv.sh\n",
    );
    for rel in ["tools/conv.sh", "w1/src/x.rs"] {
        f.refused(rel, "git_hooks");
    }
}
