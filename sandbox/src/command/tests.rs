//! Unit tests of the RunCommand policy: executable resolution and the deny list, directly and
//! through wrappers, symlinks and multi-call binaries.

use super::*;
use std::os::unix::fs::PermissionsExt;

struct Fixture {
    _tmp: tempfile::TempDir,
    wd: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let wd = std::fs::canonicalize(tmp.path()).unwrap().join("work");
    std::fs::create_dir_all(wd.join("sub")).unwrap();
    Fixture { _tmp: tmp, wd }
}

fn exe(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn run(f: &Fixture, words: &[&str]) -> Result<ResolvedCommand, CommandRefusal> {
    check(&argv(words), &f.wd, &f.wd, FIXED_PATH)
}

fn refused(f: &Fixture, words: &[&str]) -> CommandRefusal {
    match run(f, words) {
        Ok(ok) => panic!("{words:?} was allowed: {ok:?}"),
        Err(err) => err,
    }
}

fn denied_name(f: &Fixture, words: &[&str]) -> String {
    match refused(f, words) {
        CommandRefusal::Denied { name, .. } => name,
        other => panic!("{words:?}: expected a deny-list refusal, got {other:?}"),
    }
}

#[test]
fn bare_names_resolve_on_the_command_path_only() {
    let f = fixture();
    let ok = run(&f, &["true"]).unwrap();
    assert!(
        ["/usr/local/bin/true", "/usr/bin/true", "/bin/true"]
            .contains(&ok.program.to_str().unwrap()),
        "{ok:?}"
    );
    assert_eq!(ok.argv, ["true"]);
    let err = refused(&f, &["definitely-not-a-command-xyz"]);
    assert!(matches!(err, CommandRefusal::NotFound { .. }), "{err:?}");
    assert_eq!(err.code(), OutcomeCode::NotFound);
    assert!(err.to_string().contains("/usr/local/bin:/usr/bin:/bin"));
    // A file in the working directory is not found by bare name (no `.` on the PATH).
    exe(&f.wd.join("mytool"));
    assert!(matches!(
        refused(&f, &["mytool"]),
        CommandRefusal::NotFound { .. }
    ));
}

#[test]
fn absolute_and_relative_paths() {
    let f = fixture();
    exe(&f.wd.join("script.sh"));
    let ok = run(&f, &["./script.sh", "a"]).unwrap();
    assert_eq!(ok.program, f.wd.join("script.sh"));
    // argv[0] as asked: a venv's interpreter finds its venv from it.
    assert_eq!(ok.argv, ["./script.sh", "a"]);
    // Relative to cwd, which is inside the working directory.
    let ok = check(
        &argv(&["../script.sh"]),
        &f.wd,
        &f.wd.join("sub"),
        FIXED_PATH,
    )
    .unwrap();
    assert_eq!(ok.program, f.wd.join("script.sh"));
    let err = refused(&f, &["../../../bin/true"]);
    assert!(
        matches!(err, CommandRefusal::OutsideWorkingDirectory { .. }),
        "{err:?}"
    );
    assert_eq!(err.code(), OutcomeCode::InvalidArgument);
    let abs = f.wd.join("script.sh").display().to_string();
    assert!(run(&f, &[&abs]).is_ok());
    assert!(matches!(
        refused(&f, &["/nonexistent/tool"]),
        CommandRefusal::Missing { .. }
    ));
    std::fs::write(f.wd.join("data.txt"), "x").unwrap();
    assert!(matches!(
        refused(&f, &["./data.txt"]),
        CommandRefusal::NotExecutable { .. }
    ));
    assert!(matches!(
        refused(&f, &["./sub"]),
        CommandRefusal::NotExecutable { .. }
    ));
    assert!(matches!(refused(&f, &[]), CommandRefusal::Empty));
}

#[test]
fn deny_list_by_name_and_path() {
    let f = fixture();
    for name in ["rm", "rmdir", "mv", "unlink", "shred"] {
        assert_eq!(denied_name(&f, &[name, "x"]), name);
    }
    assert_eq!(denied_name(&f, &["/bin/rm", "-rf", "/"]), "rm");
    assert_eq!(denied_name(&f, &["/usr/bin/rm"]), "rm");
    let err = refused(&f, &["rm"]);
    assert_eq!(err.code(), OutcomeCode::NotPermitted);
    assert!(err.to_string().contains("deny list"), "{err}");
    assert!(err.to_string().contains("deleting files"), "{err}");
    // A workspace file named like a denied command.
    exe(&f.wd.join("rm"));
    assert_eq!(denied_name(&f, &["./rm"]), "rm");
    exe(&f.wd.join("KILL"));
    assert_eq!(denied_name(&f, &["./KILL"]), "kill");
}

#[test]
fn deny_list_by_canonical_target_of_a_symlink() {
    let f = fixture();
    let rm = std::fs::canonicalize("/bin/rm").unwrap();
    std::os::unix::fs::symlink(&rm, f.wd.join("cleanup")).unwrap();
    assert_eq!(denied_name(&f, &["./cleanup", "x"]), "rm");
    // Through a wrapper as well.
    assert_eq!(denied_name(&f, &["env", "./cleanup", "x"]), "rm");
}

#[test]
fn wrappers_are_seen_through() {
    let f = fixture();
    let cases: &[&[&str]] = &[
        &["env", "rm", "x"],
        &["env", "-i", "FOO=bar", "rm", "x"],
        &["env", "-u", "HOME", "rm"],
        &["env", "-uHOME", "rm"],
        &["env", "--unset=HOME", "-0", "rm"],
        &["env", "--chdir=/", "rm"],
        &["env", "-C", "/", "rm"],
        &["env", "--", "rm"],
        &["/usr/bin/env", "A=1", "B=2", "/bin/rm"],
        &["xargs", "rm"],
        &["xargs", "-0", "-n", "1", "rm"],
        &["xargs", "-n1", "-P4", "rm"],
        &["xargs", "--max-args=1", "--null", "rm"],
        &["xargs", "-I", "{}", "rm", "{}"],
        &["nice", "rm"],
        &["nice", "-n", "5", "rm"],
        &["nice", "-n5", "rm"],
        &["nice", "-10", "rm"],
        &["nice", "--adjustment=3", "rm"],
        &["timeout", "5", "rm"],
        &["timeout", "-s", "KILL", "5s", "rm"],
        &["timeout", "--kill-after=1", "--preserve-status", "5", "rm"],
        &["timeout", "-k1", "5", "rm"],
        &["nohup", "rm"],
        &["stdbuf", "-oL", "rm"],
        &["stdbuf", "-o", "L", "-e0", "rm"],
        &["stdbuf", "--output=L", "rm"],
        &[
            "env", "nice", "-n", "1", "timeout", "5", "nohup", "xargs", "rm",
        ],
    ];
    for case in cases {
        assert_eq!(denied_name(&f, case), "rm", "{case:?}");
    }
    // Wrappers around allowed commands are fine.
    for ok in [
        &["env", "-i", "A=1", "true"][..],
        &["nice", "-n", "5", "true"],
        &["timeout", "5", "true"],
        &["env"],
        &["xargs"],
    ] {
        assert!(run(&f, ok).is_ok(), "{ok:?}");
    }
}

#[test]
fn wrapper_options_we_do_not_understand_are_refused() {
    let f = fixture();
    for case in [
        &["env", "--frobnicate", "true"][..],
        &["env", "-S", "rm x"],
        &["env", "-Srm x"],
        &["env", "--split-string=rm x"],
        &["xargs", "-Z", "true"],
        &["nice", "-q", "true"],
    ] {
        let err = refused(&f, case);
        assert!(
            matches!(err, CommandRefusal::WrapperOption { .. }),
            "{case:?}: {err:?}"
        );
        assert_eq!(err.code(), OutcomeCode::NotPermitted);
    }
}

#[test]
fn wrappers_nest_only_so_deep() {
    let f = fixture();
    let mut words = vec!["env"; 12];
    words.push("true");
    assert!(matches!(refused(&f, &words), CommandRefusal::TooDeep));
}

#[test]
fn multi_call_binaries() {
    let f = fixture();
    exe(&f.wd.join("bin/busybox"));
    assert_eq!(denied_name(&f, &["./bin/busybox", "rm", "x"]), "rm");
    assert_eq!(
        denied_name(&f, &["./bin/busybox", "env", "busybox", "rm"]),
        "rm"
    );
    assert!(run(&f, &["./bin/busybox", "ls"]).is_ok());
    assert!(run(&f, &["./bin/busybox", "--list"]).is_ok());
    // A link named after an applet.
    std::os::unix::fs::symlink(f.wd.join("bin/busybox"), f.wd.join("bin/unlink")).unwrap();
    assert_eq!(denied_name(&f, &["./bin/unlink", "x"]), "unlink");
    std::os::unix::fs::symlink(f.wd.join("bin/busybox"), f.wd.join("bin/del")).unwrap();
    assert!(run(&f, &["./bin/del", "x"]).is_ok());
    exe(&f.wd.join("bin/coreutils"));
    assert_eq!(
        denied_name(&f, &["./bin/coreutils", "--coreutils-prog=shred", "x"]),
        "shred"
    );
    assert!(run(&f, &["./bin/coreutils", "--coreutils-prog=ls"]).is_ok());
}

#[test]
fn find_actions_are_refused() {
    let f = fixture();
    for action in [
        "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls",
    ] {
        let err = refused(&f, &["find", ".", "-name", "x", action, "rm", "{}", ";"]);
        assert_eq!(
            err,
            CommandRefusal::FindAction {
                action: action.to_string()
            }
        );
        assert!(err.to_string().contains(action));
    }
    assert!(matches!(
        refused(&f, &["env", "find", ".", "-delete"]),
        CommandRefusal::FindAction { .. }
    ));
    assert!(run(&f, &["find", ".", "-name", "*.rs", "-type", "f"]).is_ok());
}

#[test]
fn ripgrep_preprocessors_are_refused() {
    let f = fixture();
    exe(&f.wd.join("rg"));
    for flag in ["--pre=/bin/sh", "--pre", "--pre-glob=*", "--pre-glob"] {
        let err = refused(&f, &["./rg", flag, "x", "needle"]);
        assert!(
            matches!(err, CommandRefusal::RipgrepPre { .. }),
            "{flag}: {err:?}"
        );
    }
    assert!(run(&f, &["./rg", "-n", "needle"]).is_ok());
}

#[test]
fn git_command_line_config_is_refused() {
    let f = fixture();
    exe(&f.wd.join("git"));
    for case in [
        &["./git", "-c", "core.fsmonitor=./x", "status"][..],
        &["./git", "-ccore.pager=x", "log"],
        &["./git", "--config-env=core.pager=X", "log"],
        &["./git", "--exec-path=/tmp", "status"],
    ] {
        assert!(
            matches!(refused(&f, case), CommandRefusal::GitConfig { .. }),
            "{case:?}"
        );
    }
    assert!(run(&f, &["./git", "status"]).is_ok());
    assert!(run(&f, &["./git", "-C", "sub", "log", "-c"]).is_ok());
}

#[test]
fn model_clis_are_refused() {
    let f = fixture();
    for name in [
        "claude", "codex", "gemini", "deepseek", "ollama", "aider", "llm",
    ] {
        exe(&f.wd.join(name));
        let err = refused(&f, &[&format!("./{name}"), "-p", "hi"]);
        assert!(matches!(err, CommandRefusal::ModelCli { .. }), "{name}");
        assert_eq!(err.code(), OutcomeCode::NotPermitted);
    }
    let err = refused(&f, &["env", "npx", "@anthropic-ai/claude-code", "-p", "x"]);
    assert!(matches!(err, CommandRefusal::ModelCli { .. }), "{err:?}");
    exe(&f.wd.join("node"));
    let err = refused(
        &f,
        &[
            "./node",
            "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
        ],
    );
    assert!(matches!(err, CommandRefusal::ModelCli { .. }), "{err:?}");
}

#[test]
fn the_owners_path_keeps_only_absolute_private_unprotected_dirs() {
    let f = fixture();
    let tools = f.wd.join("tools/bin");
    let open = f.wd.join("open");
    let secret = f.wd.join("secret");
    for dir in [&tools, &open, &secret] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    exe(&tools.join("mytool"));
    let owner = format!(
        "relative/bin:{}:{}:{}:/nonexistent:{}:/usr/bin",
        tools.display(),
        open.display(),
        secret.display(),
        tools.display()
    );
    let search = command_path(Some(&owner), |p| p.starts_with(&secret));
    assert_eq!(search, format!("{}:/usr/bin", tools.display()));
    let ok = check(&argv(&["mytool"]), &f.wd, &f.wd, &search).unwrap();
    assert_eq!(ok.program, tools.join("mytool"));
    assert_eq!(ok.argv, ["mytool"]);
    // Nothing usable: the fixed PATH.
    assert_eq!(
        command_path(Some("rel:/nonexistent"), |_| false),
        FIXED_PATH
    );
    assert_eq!(command_path(None, |_| false), FIXED_PATH);
    let err = refused(&f, &["mytool"]);
    assert!(err.to_string().contains("command PATH"), "{err}");
}
