//! Unit tests of what the owner's start-up files run by an absolute path.

use std::path::PathBuf;

use super::super::of_shell;

/// Red team 43a B1, B1b, B8: what the owner's start-up files (and direnv's `direnvrc`) source or
/// run by an absolute path, however spelled, in whatever position the shell runs it — and the
/// files those run in turn. Relative programs, `command -v`, a directory and data named in an
/// assignment are not runs.
#[test]
fn files_start_up_files_source_or_run_by_absolute_paths_are_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (home, p) = (root.join("home"), root.join("proj"));
    std::fs::create_dir_all(home.join(".config/direnv/lib")).unwrap();
    std::fs::create_dir_all(p.join("tools")).unwrap();
    let proj = p.to_string_lossy();
    std::fs::write(
        home.join(".bashrc"),
        format!(
            "source {proj}/.devrc\n\
             [ -f \"$HOME/../proj/tools/aliases.sh\" ] && . \"$HOME/../proj/tools/aliases.sh\"\n\
             if [ -d {proj} ]; then . {proj}/etc/shellenv; fi\n\
             {proj}/tools/motd.sh\n\
             PROMPT_COMMAND={proj}/tools/prompt.sh\n\
             alias ll='{proj}/tools/ll.sh -la'\n\
             alias dv='. {proj}/tools/dv.sh'\n\
             trap '{proj}/tools/on-exit.sh' EXIT\n\
             greet() {{ bash ~/../proj/tools/greet.sh; }}\n\
             P={proj}/tools; exec nohup \"$P/exec.sh\"\n\
             command -v {proj}/tools/looked-up.sh\n\
             sh -c '{proj}/tools/in-c.sh'\n\
             python3 -u {proj}/tools/py.py\n\
             ./relative.sh\n\
             export DATA={proj}/data.csv\n"
        ),
    )
    .unwrap();
    std::fs::write(home.join(".profile"), format!(". {proj}/etc/profile.sh\n")).unwrap();
    // What a run shell script runs in turn (no `#!`: the shell runs it).
    std::fs::write(p.join("tools/motd.sh"), format!("{proj}/tools/second.sh\n")).unwrap();
    // A Python script is not read as shell.
    std::fs::write(
        p.join("tools/py.py"),
        format!("#!/usr/bin/python3\n{proj}/tools/not-run.sh\n"),
    )
    .unwrap();
    std::fs::write(
        home.join(".config/direnv/direnvrc"),
        format!("source {proj}/tools/direnv-lib.sh\nexport PYTHONPATH={proj}/dlib\n"),
    )
    .unwrap();
    std::fs::write(
        home.join(".config/direnv/lib/x.sh"),
        format!("source_env {proj}/tools/lib-env.sh\n. {proj}/tools/lib-sourced.sh\n"),
    )
    .unwrap();
    let shell = of_shell(&home);
    let runs: Vec<String> = shell
        .runs
        .iter()
        .map(|r| {
            // `home/../proj` as the kernel resolves it.
            let mut normal = PathBuf::new();
            for part in r.components() {
                match part {
                    std::path::Component::ParentDir => {
                        normal.pop();
                    }
                    part => normal.push(part),
                }
            }
            normal
                .strip_prefix(&p)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_else(|_| r.to_string_lossy().into_owned())
        })
        .collect();
    for want in [
        ".devrc",
        "tools/aliases.sh",
        "etc/shellenv",
        "tools/motd.sh",
        "tools/second.sh",
        "tools/prompt.sh",
        "tools/ll.sh",
        "tools/dv.sh",
        "tools/on-exit.sh",
        "tools/greet.sh",
        "tools/exec.sh",
        "tools/in-c.sh",
        "tools/py.py",
        "etc/profile.sh",
        "tools/direnv-lib.sh",
        "tools/lib-sourced.sh",
    ] {
        assert!(runs.iter().any(|r| r == want), "{want}: {runs:?}");
    }
    for not in [
        "tools/looked-up.sh",
        "tools/not-run.sh",
        "relative.sh",
        "./relative.sh",
        "data.csv",
    ] {
        assert!(!runs.iter().any(|r| r == not), "{not}: {runs:?}");
    }
    // direnvrc's exports are the owner's environment.
    assert!(
        shell
            .env
            .iter()
            .any(|(k, v)| *k == "PYTHONPATH" && v.to_string_lossy() == format!("{proj}/dlib")),
        "{:?}",
        shell.env
    );
}

/// Red team 44a C1-B1: what a start-up file runs through wrappers (`env`, `timeout`, `setsid`,
/// `stdbuf`, `flock`, `script -c`, `find -exec`, `xargs`), `complete -C`, `bind -x`, the
/// `function f { … }` form, and a relative program after `cd /abs` (also in an alias).
#[test]
fn wrappers_completions_bindings_and_cd_runs_are_runs() {
    let (_tmp, home, p) = home_and_project();
    let proj = p.to_string_lossy();
    std::fs::write(
        home.join(".bashrc"),
        format!(
            "env FOO=1 {proj}/tools/env.sh\n\
             timeout 5 {proj}/tools/timeout.sh\n\
             setsid -f {proj}/tools/setsid.sh\n\
             stdbuf -oL {proj}/tools/stdbuf.sh\n\
             flock /tmp/l {proj}/tools/flock.sh\n\
             script -qc '{proj}/tools/script.sh' /dev/null\n\
             find /tmp -maxdepth 0 -exec {proj}/tools/find.sh {{}} \\;\n\
             echo x | xargs -r {proj}/tools/xargs.sh\n\
             complete -C {proj}/tools/complete.sh mycmd\n\
             bind -x '\"\\C-x\": {proj}/tools/bind.sh'\n\
             function f {{ {proj}/tools/function.sh; }}\n\
             alias go2='cd {proj} && ./tools/aliased.sh'\n\
             (cd {proj}/tools && bash start2.sh; python3 s2.py)\n\
             cd {proj}\n\
             ./tools/after-cd.sh\n\
             command -v {proj}/tools/looked-up.sh\n"
        ),
    )
    .unwrap();
    let runs: Vec<PathBuf> = of_shell(&home).runs;
    for want in [
        "env.sh",
        "timeout.sh",
        "setsid.sh",
        "stdbuf.sh",
        "flock.sh",
        "script.sh",
        "find.sh",
        "xargs.sh",
        "complete.sh",
        "bind.sh",
        "function.sh",
        "aliased.sh",
        "after-cd.sh",
        "start2.sh",
        "s2.py",
    ] {
        let want = p.join("tools").join(want);
        let found = runs.iter().any(|r| {
            r == &want
                || std::path::absolute(r).ok().is_some_and(|a| a == want)
                || r.to_string_lossy().replace("/./", "/") == want.to_string_lossy()
        });
        assert!(found, "{want:?}: {runs:?}");
    }
    assert!(
        !runs.iter().any(|r| r.ends_with("looked-up.sh")),
        "{runs:?}"
    );
}

/// Red team 46a: wrappers with option arguments or not listed before (one grammar per wrapper,
/// shared with the hooks' reader), lines wrappers run (`flock -c`, `su -c`, `env -S`, `watch`,
/// tmux and screen), `complete -C"…"` attached, `bind -m KEYMAP -x`, `cd -P`, and a wrapper's
/// option the grammar does not know (every later word naming a file counts).
#[test]
fn wrappers_with_options_and_the_lines_they_run_are_runs() {
    let (_tmp, home, p) = home_and_project();
    let proj = p.to_string_lossy();
    std::fs::write(
        home.join(".bashrc"),
        format!(
            "timeout -s KILL 5 {proj}/tools/t1.sh\n\
             timeout --signal=TERM -k 2 5 {proj}/tools/t2.sh\n\
             nice -n 5 {proj}/tools/nice.sh\n\
             nice -10 {proj}/tools/nice10.sh\n\
             flock -w 3 /tmp/l {proj}/tools/flockw.sh\n\
             flock /tmp/l -c '{proj}/tools/flockc.sh'\n\
             env -S '{proj}/tools/envs.sh a b'\n\
             env -u X -C {proj} ./tools/envc.sh\n\
             prlimit --nofile=64 {proj}/tools/prlimit.sh\n\
             runuser -u me -- {proj}/tools/runuser.sh\n\
             su -c '{proj}/tools/su.sh' me\n\
             sudo -u root -E {proj}/tools/sudo.sh\n\
             unshare -r --propagation private {proj}/tools/unshare.sh\n\
             watch -n 5 {proj}/tools/watch.sh\n\
             exec -a name {proj}/tools/execa.sh\n\
             time -p {proj}/tools/time.sh\n\
             coproc {proj}/tools/coproc.sh\n\
             chrt -f 10 {proj}/tools/chrt.sh\n\
             taskset -c 0 {proj}/tools/taskset.sh\n\
             tmux new-session -d -s w '{proj}/tools/tmux.sh'\n\
             screen -dmS s {proj}/tools/screen.sh\n\
             complete -C\"{proj}/tools/completec.sh\" cmd\n\
             bind -m vi -x '\"\\C-x\": {proj}/tools/bindm.sh'\n\
             cd -P {proj} && ./tools/cdp.sh\n\
             stdbuf --weird-option {proj}/tools/unknown-option.sh\n\
             nice -é {proj}/tools/multibyte-option.sh\n\
             cd {proj} && flock -xn /tmp/l ./tools/flock-relative.sh\n\
             alias m='nohup mytool --fast'\n\
             up() {{ cd ..; }}\nfunction mk {{ make \"$@\"; }}\nalias ll='ls -l'\nup; mk; ll\n"
        ),
    )
    .unwrap();
    let shell = of_shell(&home);
    // Functions and aliases the files define run their definitions, not a program.
    for defined in ["up", "mk", "ll"] {
        assert!(
            !shell.bare_runs.iter().any(|n| n == defined),
            "{defined}: {:?}",
            shell.bare_runs
        );
    }
    assert!(
        shell.bare_runs.iter().any(|n| n == "make"),
        "{:?}",
        shell.bare_runs
    );
    // A bare name is a program name (a file of it in a tree dir on PATH runs in its place).
    assert!(
        shell.bare_runs.iter().any(|n| n == "mytool"),
        "{:?}",
        shell.bare_runs
    );
    assert!(
        !shell.bare_runs.iter().any(|n| n.contains('/')),
        "{:?}",
        shell.bare_runs
    );
    let runs: Vec<String> = shell
        .runs
        .iter()
        .map(|r| r.to_string_lossy().replace("/./", "/"))
        .collect();
    for want in [
        "t1.sh",
        "t2.sh",
        "nice.sh",
        "nice10.sh",
        "flockw.sh",
        "flockc.sh",
        "envs.sh",
        "envc.sh",
        "prlimit.sh",
        "runuser.sh",
        "su.sh",
        "sudo.sh",
        "unshare.sh",
        "watch.sh",
        "execa.sh",
        "time.sh",
        "coproc.sh",
        "chrt.sh",
        "taskset.sh",
        "tmux.sh",
        "screen.sh",
        "completec.sh",
        "bindm.sh",
        "cdp.sh",
        "unknown-option.sh",
        "multibyte-option.sh",
        "flock-relative.sh",
    ] {
        let want = p.join("tools").join(want).to_string_lossy().into_owned();
        assert!(runs.contains(&want), "{want}: {runs:?}");
    }
    // Option values and durations are not runs (the lock file is named by spelling).
    for not in ["5", "KILL"] {
        assert!(!runs.iter().any(|r| r == not), "{not}: {runs:?}");
    }
}

/// A temp dir holding `home/` and `proj/tools/` (canonical paths).
fn home_and_project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (home, p) = (root.join("home"), root.join("proj"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(p.join("tools")).unwrap();
    (tmp, home, p)
}

/// Red team 47a: which word a command runs is not always readable (an empty variable before
/// the program, an optional-argument option, `--` before a wrapper's operand, programs that
/// run their arguments and are in no grammar, interpreter options with values, a wrapper by
/// its path, command substitutions, here-strings and input redirections, arrays, `printf -v`):
/// every file a start-up file's command names by an absolute path is a run. Assignments,
/// lookups and `cd` name none.
#[test]
fn every_file_a_start_up_command_names_is_a_run() {
    let (_tmp, home, p) = home_and_project();
    let lines = [
        "$NOTHING @",
        "${EMPTY} @",
        "nice $NOTHING @",
        "prlimit -n @",
        "timeout -- 5 @",
        "flock -- /tmp/l @",
        "exec ssh-agent @",
        "dbus-launch --exit-with-session @",
        "setpriv --reuid=0 @",
        "xargs -a /dev/null @",
        "eval \"$(@ init bash)\"",
        "source \"$(@ path)\"",
        "bash -o pipefail @",
        "python3 -W ignore @",
        "/usr/bin/time -f %e @",
        "a=(@); ${a[0]}",
        "printf -v X %s @; $X",
        "read X <<< @; $X",
        "coproc X { @; }",
        "su root -c '@ --now'",
        "sh -s < @",
        "cat @ | bash",
        "alias q='ssh-agent @'",
        "tool --config=@",
        "git -c core.pager=@ log",
        ". {@,/dev/null}",
        "timeout -- 5 @",
    ];
    let file = |i: usize| {
        p.join(format!("tools/f{i}.sh"))
            .to_string_lossy()
            .into_owned()
    };
    let mut text: String = lines
        .iter()
        .enumerate()
        .map(|(i, line)| format!("{}\n", line.replace('@', &file(i))))
        .collect();
    let (data, other, looked) = (p.join("data.csv"), p.join("other.csv"), p.join("l.sh"));
    text.push_str(&format!(
        "export DATA={}\nD={}\ncommand -v {}\nwhich {}\ncd {}\n",
        data.display(),
        other.display(),
        looked.display(),
        looked.display(),
        p.display()
    ));
    std::fs::write(home.join(".bashrc"), text).unwrap();
    let runs = of_shell(&home).runs;
    for (i, line) in lines.iter().enumerate() {
        assert!(runs.contains(&PathBuf::from(file(i))), "{line}: {runs:?}");
    }
    for not in [&data, &other, &looked, &p] {
        assert!(!runs.contains(not), "{not:?}: {runs:?}");
    }
}

/// Red team 47a, zsh and fish: a process substitution's program, zsh's `autoload` and `repeat`,
/// fish's command substitution, its `alias NAME 'line'` and `bass`.
#[test]
fn zsh_and_fish_start_up_files_name_their_runs_too() {
    let (_tmp, home, p) = home_and_project();
    let f = |name: &str| p.join("tools").join(name).to_string_lossy().into_owned();
    std::fs::write(
        home.join(".zshrc"),
        format!(
            "source <({} completion zsh)\nautoload -Uz {}\nrepeat 1 {}\n",
            f("z1"),
            f("z2"),
            f("z3")
        ),
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".config/fish")).unwrap();
    std::fs::write(
        home.join(".config/fish/config.fish"),
        format!(
            "eval ({} init)\nalias x '{}'\nbass source {}\n",
            f("f1"),
            f("f2"),
            f("f3")
        ),
    )
    .unwrap();
    let runs = of_shell(&home).runs;
    for name in ["z1", "z2", "z3", "f1", "f2", "f3"] {
        assert!(runs.contains(&PathBuf::from(f(name))), "{name}: {runs:?}");
    }
}

/// Red team 47a (availability): a start-up file running a system program by its path (`exec
/// /bin/bash -l`, `alias g=/usr/bin/git`) read that binary as a shell script; past the size
/// bound every write of every session was refused. A binary is not read.
#[test]
fn programs_run_by_path_are_not_read_as_scripts() {
    let (_tmp, home, _p) = home_and_project();
    let bash = std::fs::canonicalize("/bin/bash").unwrap();
    assert!(
        std::fs::metadata(&bash).unwrap().len() > 1024 * 1024,
        "a large binary"
    );
    std::fs::write(
        home.join(".bashrc"),
        format!("alias b={}\nexec {} -l\n", bash.display(), bash.display()),
    )
    .unwrap();
    let shell = of_shell(&home);
    assert!(shell.unreadable.is_empty(), "{:?}", shell.unreadable);
    assert!(!shell.read.contains(&bash), "{:?}", shell.read);
}

/// Red team 47b B6: a directory a start-up file sources by a pattern (`for f in /p/rc.d/*.sh; do
/// . "$f"; done`) holds runs made later too: the directory is named whole. The home (`~/.bash_*`)
/// and a pattern's own directory part with a pattern are not.
#[test]
fn a_pattern_s_directory_is_a_directory_of_runs() {
    let (_tmp, home, p) = home_and_project();
    std::fs::create_dir_all(p.join("rc.d")).unwrap();
    std::fs::write(
        home.join(".bashrc"),
        format!(
            "for f in {p}/rc.d/*.sh; do . \"$f\"; done\n\
             [ -d {p}/rcd2 ] && for f in {p}/rcd2/*.bash; do source $f; done\n\
             for f in ~/.bash_*; do . \"$f\"; done\nls {p}/*/x\n",
            p = p.display()
        ),
    )
    .unwrap();
    let dirs = of_shell(&home).run_dirs;
    assert_eq!(dirs, [p.join("rc.d"), p.join("rcd2")], "{dirs:?}");
}

/// Red team 47b B7: a variable `.profile` exports is known in `.bashrc`, which is read first
/// here (a login shell reads `.profile` first and it often sources `.bashrc`).
#[test]
fn a_variable_one_start_up_file_exports_is_known_in_the_others() {
    let (_tmp, home, p) = home_and_project();
    std::fs::write(home.join(".bashrc"), ". \"$PROJ/xvar.sh\"\n").unwrap();
    std::fs::write(
        home.join(".profile"),
        format!("export PROJ={}\n", p.display()),
    )
    .unwrap();
    let runs = of_shell(&home).runs;
    assert!(runs.contains(&p.join("xvar.sh")), "{runs:?}");
}

/// Red team 48 F1: the system's start-up files (`/etc/profile`, `/etc/profile.d/*.sh`,
/// `/etc/bash.bashrc`, `/etc/zsh/zshrc`, fish's `/etc/fish/conf.d`) run what they source or run
/// for every shell of every account, as the account's own do; they are read first, under the
/// system's root (a tmp dir standing in for `/` on this test's thread), and watched.
#[test]
fn the_systems_start_up_files_runs_are_runs() {
    let (tmp, home, p) = home_and_project();
    let system = tmp.path().canonicalize().unwrap().join("sys");
    let write = |rel: &str, text: String| {
        let at = system.join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    };
    let p = p.display();
    write(
        "etc/profile",
        "for i in /etc/profile.d/*.sh; do . $i; done\n".into(),
    );
    write("etc/profile.d/proj.sh", format!(". {p}/tools/env.sh\n"));
    write(
        "etc/profile.d/skipped.txt",
        format!(". {p}/tools/not-sh.sh\n"),
    );
    write("etc/bash.bashrc", format!("{p}/tools/motd.sh\n"));
    write("etc/zsh/zshrc", format!("source {p}/tools/z.zsh\n"));
    write(
        "etc/fish/conf.d/x.fish",
        format!("source {p}/tools/x.fish\n"),
    );
    super::super::super::TEST_SYSTEM_ROOT.with(|root| *root.borrow_mut() = Some(system.clone()));
    let assigned = of_shell(&home);
    for run in ["env.sh", "motd.sh", "z.zsh", "x.fish"] {
        let run = PathBuf::from(format!("{p}/tools/{run}"));
        assert!(assigned.runs.contains(&run), "{run:?}: {:?}", assigned.runs);
    }
    let not = PathBuf::from(format!("{p}/tools/not-sh.sh"));
    assert!(!assigned.runs.contains(&not));
    assert!(assigned.read.contains(&system.join("etc/profile.d")));
    assert!(assigned.read.contains(&system.join("etc/environment")));
}

/// Red team 49: a makefile given to make, a file `cat` feeds to `eval`, and what `env
/// -C` runs name their files, relative ones at every depth.
#[test]
fn make_files_cat_fed_code_and_env_chdir_runs_are_runs() {
    let (_tmp, home, p) = home_and_project();
    let p = p.display();
    std::fs::write(
        home.join(".bashrc"),
        format!(
            "cd() {{ builtin cd \"$@\" || return; [ -f .r9.mk ] && make -f .r9.mk; \
             eval \"$(cat .r13)\"; eval \"$(< .r35)\"; echo \"$(cat .nvmrc)\"; }}\n\
             env -C {p} bash s4.sh\n\
             make -C {p} -f s5.mk\n\
             make -C sub --file=s6.mk\n"
        ),
    )
    .unwrap();
    let assigned = of_shell(&home);
    // What `cat` prints elsewhere is data (red team 51).
    assert!(
        !assigned.relative_sources.contains(&PathBuf::from(".nvmrc")),
        "{:?}",
        assigned.relative_sources
    );
    for rel in [".r9.mk", ".r13", ".r35", "sub/s6.mk"] {
        assert!(
            assigned.relative_sources.contains(&PathBuf::from(rel)),
            "{rel}: {:?}",
            assigned.relative_sources
        );
    }
    for file in ["s4.sh", "s5.mk"] {
        let want = PathBuf::from(format!("{p}/{file}"));
        assert!(assigned.runs.contains(&want), "{file}: {:?}", assigned.runs);
    }
}
