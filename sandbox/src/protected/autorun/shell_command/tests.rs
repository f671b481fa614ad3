//! How command lines from git's configuration are read: what they name, and when the whole
//! tree (red teams 23g, 23h and 23j).

use super::{Named, NamedPath, Reading, Scope, ScriptRunner, program_paths};

/// A plain place.
fn at(path: &str) -> NamedPath {
    NamedPath {
        path: path.into(),
        cwd: String::new(),
        scope: Scope::Below,
        script: None,
    }
}

/// A script, whose directory is a place too.
fn script(path: &str, runner: ScriptRunner) -> NamedPath {
    NamedPath {
        path: path.into(),
        cwd: String::new(),
        scope: Scope::Below,
        script: Some(runner),
    }
}

fn strict(value: &str) -> Named {
    program_paths(value, Reading::Strict)
}

fn paths(named: &[NamedPath]) -> Named {
    Named::Paths(named.to_vec())
}

use ScriptRunner::{Interpreter, Python, Shebang, Shell};

#[test]
fn words_as_the_shell_reads_them() {
    assert_eq!(strict("sh fsm.sh"), paths(&[script("fsm.sh", Shell)]));
    assert_eq!(
        strict("'./tools/my conv.sh' --flag"),
        paths(&[script("./tools/my conv.sh", Shebang)])
    );
    assert_eq!(
        strict("!env LANG=C tools/e.sh"),
        paths(&[script("tools/e.sh", Shebang)])
    );
    // Arguments without a `/` or `.` are subcommands, not files (`gh auth git-credential`);
    // a bare `.` is an argument (jq's filter), not the tree.
    assert_eq!(strict("git-lfs filter-process"), paths(&[]));
    assert_eq!(
        strict("!/usr/bin/gh auth git-credential"),
        paths(&[script("/usr/bin/gh", Shebang)])
    );
    assert_eq!(strict("jq -S ."), paths(&[]));
    assert_eq!(strict("less -FRX"), paths(&[]));
    // A command's bare name is looked up on PATH, not in the tree.
    assert_eq!(
        strict("a.sh; b.sh && ./c.sh"),
        paths(&[script("./c.sh", Shebang)])
    );
    assert_eq!(
        strict("./x.sh 2>/dev/null <in.txt"),
        paths(&[script("./x.sh", Shebang), at("in.txt")])
    );
    // In double quotes a backslash stays unless it escapes `$`, `` ` ``, `"` or `\`.
    assert_eq!(
        strict("sh \"conv\\x.sh\""),
        paths(&[script("conv\\x.sh", Shell)])
    );
    assert_eq!(strict("tool -fconv.awk"), paths(&[at("conv.awk")]));
    // Wrappers and their options pass the command's place on.
    for value in [
        "timeout 5 sh conv3",
        "stdbuf -oL sh conv3",
        "nice -n 5 sh conv3",
        "sh -o errexit conv3",
        "bash -O extglob conv3",
        "exec sh conv3",
    ] {
        assert_eq!(strict(value), paths(&[script("conv3", Shell)]), "{value}");
    }
}

#[test]
fn git_s_own_arguments_and_variables_in_arguments_are_no_file_names() {
    assert_eq!(strict("!aws codecommit credential-helper $@"), paths(&[]));
    assert_eq!(
        strict("!f() { ./x.sh \"$1\" ${2}; }; f"),
        paths(&[script("./x.sh", Shebang)])
    );
    assert_eq!(
        strict("!f() { echo \"password=$GITHUB_TOKEN\"; }; f"),
        paths(&[])
    );
    assert_eq!(strict("ssh -i $HOME/.ssh/id_work"), paths(&[]));
    assert_eq!(strict("less -+$LESS -FRX"), paths(&[]));
}

#[test]
fn option_values_name_what_programs_load_and_assignments_are_the_whole_tree() {
    assert_eq!(
        strict("tool --config=c t.cfg"),
        paths(&[at("c"), at("t.cfg")])
    );
    assert_eq!(
        strict("sh --rcfile=rc x.sh"),
        paths(&[at("rc"), script("x.sh", Shell)])
    );
    assert_eq!(strict("make -s -f mk12"), paths(&[at("mk12")]));
    assert_eq!(strict("sed -f clean"), paths(&[at("clean")]));
    assert_eq!(strict("sqlite3 -init conv21"), paths(&[at("conv21")]));
    assert_eq!(
        strict("node --require=/opt/hook.js t"),
        paths(&[at("/opt/hook.js"), script("t", Interpreter)])
    );
    // Locale and terminal settings change nothing a program loads.
    assert_eq!(
        strict("LC_ALL=C TZ=UTC ./run"),
        paths(&[script("./run", Shebang)])
    );
    for value in [
        "X=./a ./run",
        "PYTHONPATH=tools9 python3 -m tcmod",
        "PYTHONPATH=. tool",
        "NODE_OPTIONS='--require ./h.js' tool",
        "env -u PYTHONPATH PERL5OPT=-Mx perl /opt/x.pl",
        "LANG=$X ./run",
        "export PYTHONPATH=tools; python3 /opt/c.py",
        "/usr/bin/ruby -Ilib -rfsm -e 0",
        "perl -Mlib=. -e 1",
        "java -cp . Fsm",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

#[test]
fn a_line_another_shell_runs_is_read_too() {
    for value in [
        "sh -c 'sh fsm.sh'",
        "sh -ce 'sh fsm.sh'",
        "sh -c -- 'sh fsm.sh'",
        "bash -lc \"sh fsm.sh\"",
    ] {
        assert_eq!(strict(value), paths(&[script("fsm.sh", Shell)]), "{value}");
    }
    let nest = |levels: usize| {
        let mut line = "sh ./x.sh".to_string();
        for _ in 0..levels {
            let quoted = line.replace('\\', "\\\\").replace('"', "\\\"");
            line = format!("sh -c \"{quoted}\"");
        }
        line
    };
    assert_eq!(strict(&nest(3)), paths(&[script("./x.sh", Shell)]));
    assert!(matches!(strict(&nest(8)), Named::WholeTree(_)));
}

#[test]
fn a_literal_cd_moves_where_paths_are_taken_from() {
    let from = |path: &str, runner, cwd: &str| NamedPath {
        cwd: cwd.into(),
        ..script(path, runner)
    };
    assert_eq!(
        strict("cd tools && ./conv.sh"),
        paths(&[from("tools/./conv.sh", Shebang, "tools")])
    );
    assert_eq!(
        strict("cd .. && sh tools/conv.sh"),
        paths(&[from("../tools/conv.sh", Shell, "..")])
    );
    // A subshell's `cd` ends at its `)`; a `cd` in a group, a function, a pipeline or after
    // `||` cannot be placed.
    assert_eq!(
        strict("(cd tools10 && true); python3 conv10.py"),
        paths(&[script("conv10.py", Python)])
    );
    assert_eq!(
        strict("(cd a && (cd b; sh x.sh); sh y.sh); sh z.sh"),
        paths(&[
            from("a/b/x.sh", Shell, "a/b"),
            from("a/y.sh", Shell, "a"),
            script("z.sh", Shell)
        ])
    );
    for value in [
        "{ cd tools; }; sh x.sh",
        "f() { cd tools; }; f; sh x.sh",
        "true || cd tools; sh x.sh",
        "cd tools | true; sh x.sh",
        "if true; then cd tools; fi; sh x.sh",
        "cd; ./x.sh",
        "true && cd tools; sh x.sh",
        "f() { sh x.sh; }; cd tools; f",
        "cd -P tools && ./x.sh",
        "(cd tools; sh x.sh",
        "sh x.sh)",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
    assert_eq!(
        program_paths("cd tools && sh m.sh", Reading::Literal),
        paths(&[NamedPath {
            cwd: "tools".into(),
            ..at("tools/m.sh")
        }])
    );
}

#[test]
fn python_s_script_is_read_with_its_directory_and_inline_code_is_the_whole_tree() {
    assert_eq!(
        strict("python3 tools/conv.py"),
        paths(&[script("tools/conv.py", Python)])
    );
    assert_eq!(
        strict("python3 -W ignore -X utf8 -Bu tools/c.py"),
        paths(&[script("tools/c.py", Python)])
    );
    assert_eq!(
        strict("nice -n 5 python3 tools/c.py"),
        paths(&[script("tools/c.py", Python)])
    );
    // `-I`/`-P` keep the working directory and the script's off `sys.path`.
    assert_eq!(strict("python3 -I -m nbstripout"), paths(&[]));
    assert_eq!(strict("python3 -Im nbstripout"), paths(&[]));
    assert_eq!(strict("python3 -P tools/c.py"), paths(&[at("tools/c.py")]));
    for value in [
        "python3 -c 'import fsm'",
        "python -X utf8 -c 1",
        "python3 --weird tools/c.py",
        "python3 -Z tools/c.py",
        "python3",
        "python3 -",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

#[test]
fn other_interpreters_scripts_are_theirs_and_inline_code_is_the_whole_tree() {
    assert_eq!(
        strict("node tools/x.js"),
        paths(&[script("tools/x.js", Interpreter)])
    );
    assert_eq!(
        strict("node --import=/opt/hook.mjs -r tsx/cjs /opt/t.js"),
        paths(&[
            at("/opt/hook.mjs"),
            at("tsx/cjs"),
            script("/opt/t.js", Interpreter)
        ])
    );
    for value in [
        "node -e \"require('./tools6/tc.js')\"",
        "node --import ./tools/hook.mjs /opt/t.js",
        "node --require=./hook.js /opt/t.js",
        "node --eval=1",
        "node -p 1",
        "perl -pe 's/\\r//'",
        "ruby -e 0",
        "node",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

#[test]
fn what_the_shell_computes_as_a_program_is_the_whole_tree() {
    for value in [
        "cd \"$(dirname \"$PWD\")\" && sh tools/conv.sh",
        "sh \"$(dirname \"$PWD\")/tools/conv.sh\"",
        "$HOME/p/tools/conv.sh",
        "sh $SCRIPT",
        "`pwd`/x.sh",
        "sh scripts/*.sh",
        "sh ./x?.sh",
        "bash -c 'sh {conv,x}.sh'",
        "cd $DIR && ./x.sh",
        "env -C tools ./x.sh",
        "env --chdir=tools ./x.sh",
        "env -S 'sh fsm.sh'",
        "sh -c \"eval ./x.sh\"",
        "echo 'sh fsm.sh' | sh -s",
        "cat fsm.txt | sh",
        "ls | grep fsm | xargs -r sh",
        "find . -name 'fsm.s?' -exec sh {} +",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
    // `~name/` is the shell's tilde expansion, named as written and expanded where it is placed
    // (red team 30 N2: gitconfig's `expand_shell_path`).
    let named = strict("sh ~rt23u/x.sh");
    assert!(
        matches!(&named, Named::Paths(p) if p.iter().any(|n| n.path == "~rt23u/x.sh")),
        "{named:?}"
    );
}

#[test]
fn a_command_the_owner_runs_by_name_names_what_it_spells_out() {
    for (value, named) in [
        ("!f() { git fetch origin pull/$1/head:pr-$1; }; f", vec![]),
        ("!cd \"${GIT_PREFIX:-.}\" && ./x.sh", vec![]),
        ("!git add . && git commit", vec![]),
        (
            "difftool -y -x 'sh tools/d.sh'",
            vec![at("sh tools/d.sh"), at("tools/d.sh")],
        ),
    ] {
        assert_eq!(
            program_paths(value, Reading::Literal),
            Named::Paths(named),
            "{value}"
        );
    }
}

/// Red team 23 c1 (B1a, B1b): a wrapper is followed only by its whole option grammar; an
/// option it does not know, and a runner that resolves packages itself, is the whole tree.
#[test]
fn wrappers_are_read_by_their_whole_option_grammar() {
    for value in [
        "timeout -s KILL 30 python3 tools/nbconv.py",
        "timeout --signal=KILL -k 5 --foreground 30s python3 tools/nbconv.py",
        "stdbuf -o L python3 tools/nbconv.py",
        "stdbuf -oL -e0 python3 tools/nbconv.py",
        "env -u PYTHONPATH python3 tools/nbconv.py",
        "env --unset=PYTHONPATH -i python3 tools/nbconv.py",
        "flock /tmp/l python3 tools/nbconv.py",
        "flock -w 10 -x /tmp/l python3 tools/nbconv.py",
        "nice -n 5 nohup python3 tools/nbconv.py",
        "nice -10 python3 tools/nbconv.py",
        "command -p exec -a x time -p python3 tools/nbconv.py",
        "setsid -w python3 tools/nbconv.py",
        "ionice -c 3 python3 tools/nbconv.py",
        "env -- python3 tools/nbconv.py",
    ] {
        assert_eq!(
            strict(value),
            paths(&[script("tools/nbconv.py", Python)]),
            "{value}"
        );
    }
    // npx runs an installed package's bin: its script is read like any other.
    assert_eq!(strict("npx --no -- commitlint --edit \"$1\""), paths(&[]));
    assert!(matches!(
        strict("npx tsx tools5/merge.ts"),
        Named::Paths(p) if p == [script("tools5/merge.ts", Interpreter)]
    ));
    for value in [
        "timeout --weird 30 python3 tools/nbconv.py",
        "stdbuf -x L python3 tools/nbconv.py",
        "env -C tools python3 nbconv.py",
        "env -S 'python3 x.py'",
        "flock -c 'sh x.sh' /tmp/l",
        "flock --command=x /tmp/l",
        "sudo python3 /opt/x.py",
        "chrt -f 10 python3 /opt/x.py",
        "npx -p tsx tsx /opt/m.ts",
        "pnpm exec tsx /opt/m.ts",
        "yarn dlx tsx /opt/m.ts",
        "bunx tsx /opt/m.ts",
        "uvx ruff",
        "pipx run black",
        "npm exec -- x",
        "git -c core.fsmonitor=./x status",
        "git -C tools status",
        "xargs sh",
        "busybox sh x.sh",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

/// What the shell does beside simple commands: line continuations, comments and `if` are read;
/// here-documents, process substitution, `$(…)` and variables naming the tree are not.
#[test]
fn shell_syntax_is_read_or_names_the_whole_tree() {
    assert_eq!(
        strict("python3 \\\n  tools/c.py"),
        paths(&[script("tools/c.py", Python)])
    );
    assert_eq!(
        strict(
            "#!/bin/sh\n# run the checks\nset -e\n[ -f x ] && exec ./scripts/pre-commit.sh \"$@\"\n"
        ),
        paths(&[script("./scripts/pre-commit.sh", Shebang)])
    );
    assert_eq!(
        strict("if [ -x ./bin/fmt ]; then ./bin/fmt; else sh tools/fmt.sh; fi"),
        paths(&[script("./bin/fmt", Shebang), script("tools/fmt.sh", Shell)])
    );
    assert_eq!(
        strict("sh -c 'sh -c \"python3 deep/x.py\"'"),
        paths(&[script("deep/x.py", Python)])
    );
    assert_eq!(
        strict(". ./lib.sh && run"),
        paths(&[script("./lib.sh", Shell)])
    );
    assert_eq!(strict("npm test && make check"), paths(&[]));
    assert_eq!(
        strict("command -v pre-commit >/dev/null && pre-commit run"),
        paths(&[])
    );
    // A program in the tree is a script whatever its name; a wrapper by absolute path is one.
    assert_eq!(
        strict("./python3 x && /usr/bin/timeout 5 python3 /opt/t/c.py"),
        paths(&[
            script("./python3", Shebang),
            at("/usr/bin/timeout"),
            script("/opt/t/c.py", Python)
        ])
    );
    for value in [
        "sh <<EOF\n./x.sh\nEOF",
        "diff <(./x.sh) y",
        "python3 $PWD/tools/x.py",
        "tool --config $PWD/cfg.toml",
        "tool ${GIT_DIR}/../x",
        "sh \"$0.d/x\"",
        "for f in hooks/*; do sh $f; done",
        "case $1 in x) sh a.sh;; esac",
        "sh 'open",
        "sh",
        "bash -s < x.sh",
        "trap 'sh x.sh' EXIT",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

#[test]
fn a_shebang_line_says_what_runs_a_script() {
    use super::shebang_runner;
    for (line, want) in [
        ("#!/bin/sh", Some(Shell)),
        ("#!/usr/bin/env bash", Some(Shell)),
        ("#!/usr/bin/env python3", Some(Python)),
        ("#!/usr/bin/python3.12 -u", Some(Python)),
        ("#!/usr/bin/env node", Some(Interpreter)),
        ("#!/usr/bin/env -S deno run", Some(Interpreter)),
        ("#!/opt/weird", Some(Interpreter)),
        ("echo hi", None),
    ] {
        assert_eq!(shebang_runner(line), want, "{line}");
    }
}

/// What `python -m MODULE` from the top may import: what shadows an import there, MODULE's
/// package and module file.
fn module_places(first: &str) -> Vec<NamedPath> {
    vec![
        NamedPath {
            path: String::new(),
            cwd: String::new(),
            scope: Scope::Imports,
            script: None,
        },
        at(first),
        at(&format!("{first}.py")),
    ]
}

#[test]
fn python_m_from_the_top_names_what_python_imports_from_there() {
    // nbstripout's filter as `nbstripout --install` writes it, and spellings of `-m`.
    let mut absolute = vec![at("/usr/bin/python3")];
    absolute.extend(module_places("nbstripout"));
    assert_eq!(
        strict("\"/usr/bin/python3\" -m nbstripout"),
        paths(&absolute)
    );
    for (value, first) in [
        ("python3 -m nbstripout", "nbstripout"),
        ("python -mnbstripout", "nbstripout"),
        ("python3.12 -B -u -m nbstripout", "nbstripout"),
        ("python3 -Bmfsmon", "fsmon"),
        ("python3 -X utf8 -W ignore -m a.b.c", "a"),
        ("timeout 30 python3 -m pkg_x", "pkg_x"),
        ("true && python3 -m nbstripout", "nbstripout"),
    ] {
        assert_eq!(strict(value), paths(&module_places(first)), "{value}");
    }
    // The module's own arguments are read as any program's.
    let mut with_config = module_places("nbstripout");
    with_config.push(at(".nbstripout"));
    assert_eq!(
        strict("python3 -m nbstripout --attributes .nbstripout"),
        paths(&with_config)
    );
    // `-I`/`-P` keep the working directory off `sys.path`: only the arguments.
    assert_eq!(
        strict("python3 -I -m nbstripout --attributes .nbstripout"),
        paths(&[at(".nbstripout")])
    );
    assert_eq!(strict("python3 -P -mx"), paths(&[]));
    // The owner's alias names the module it spells out only.
    assert_eq!(
        program_paths("!python3 -m http.server", Reading::Literal),
        paths(&module_places("http")[1..])
    );
}

#[test]
fn python_m_elsewhere_than_the_top_or_of_an_unreadable_module_is_the_whole_tree() {
    for value in [
        // Its directory first on `sys.path` is not the top.
        "cd sub && python3 -m x",
        "cd sub; python3 -m nbstripout",
        "(cd sub && python3 -m x)",
        // Not a dotted name of identifiers.
        "python3 -m ../x",
        "python3 -m 'a b'",
        "python3 -m 1x",
        "python3 -m a..b",
        "python3 -m .a",
        "python3 -m \"$MOD\"",
        "python3 -m nb*",
        "python3 -m",
        "python3 -Bm",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

/// The whole subtree of `cwd`, where Python imports the program's modules from.
fn imports_at(cwd: &str) -> NamedPath {
    NamedPath {
        path: cwd.into(),
        cwd: cwd.into(),
        scope: Scope::Below,
        script: None,
    }
}

#[test]
fn python_reading_its_program_from_a_file_on_stdin_imports_from_where_it_runs() {
    // Red team 25 B5: `python3 < ci/chk.py` puts the working directory first on `sys.path`,
    // not ci/: its whole subtree, where the script's imports come from, as a script's own
    // directory is for `python3 ci/chk.py`.
    let top = |file: &str| paths(&[at(file), imports_at(""), at(file)]);
    for value in [
        "python3 < ci/chk.py",
        "python3 <ci/chk.py",
        "python3 0<ci/chk.py",
        "python3 -B < ci/chk.py",
        "python3 -u -X utf8 < ci/chk.py",
        "python3 -i < ci/chk.py",
        "python3 - < ci/chk.py",
        "< ci/chk.py python3",
        "timeout 30 python3 < ci/chk.py",
        "cat notes | python3 < ci/chk.py",
        "python3 < ci/chk.py 2>/dev/null >out.log",
    ] {
        assert_eq!(strict(value), top("ci/chk.py"), "{value}");
    }
    // After a literal `cd`, Python imports from that directory.
    assert_eq!(
        strict("cd tools && python3 < chk.py"),
        paths(&[
            NamedPath {
                cwd: "tools".into(),
                ..at("tools/chk.py")
            },
            imports_at("tools"),
            NamedPath {
                cwd: "tools".into(),
                ..at("tools/chk.py")
            },
        ])
    );
    // `-I`/`-P` keep it off `sys.path`: the file only.
    assert_eq!(
        strict("python3 -I < ci/chk.py"),
        paths(&[at("ci/chk.py"), at("ci/chk.py")])
    );
    // A descriptor naming standard input is that file, with its own directory first on
    // `sys.path` (Python and Node resolve the link), as `python3 ci/chk.py` would be.
    for value in [
        "python3 /dev/stdin < ci/chk.py",
        "python3 /dev/fd/0 < ci/chk.py",
        "python3 /proc/self/fd/0 < ci/chk.py",
    ] {
        assert_eq!(
            strict(value),
            paths(&[script("ci/chk.py", Python), at("ci/chk.py")]),
            "{value}"
        );
    }
    // Another interpreter's script in the tree (the whole tree, where hooks are read).
    assert_eq!(
        strict("node /dev/stdin < lib/x.js"),
        paths(&[script("lib/x.js", Interpreter), at("lib/x.js")])
    );
    // A data file on standard input of a script is named as data, not as a program.
    assert_eq!(
        strict("python3 tools/c.py < data/in.txt"),
        paths(&[script("tools/c.py", Python), at("data/in.txt")])
    );
    // Code from a pipe, the hook's own input or another descriptor is unknown: the whole tree.
    for value in [
        "cat ci/chk.py | python3",
        "cat ci/chk.py | python3 -",
        "python3 <&3",
        "python3 0<&3",
        "python3 3< ci/chk.py",
        "python3 < \"$SCRIPT\"",
        "python3 < ci/*.py",
        "python3 /dev/stdin",
        "cat x | python3 /dev/stdin",
        "python3 /dev/fd/3 3< ci/chk.py",
        "python3 /proc/self/fd/3",
        "sh < tools/x.sh",
        "sh -c python3 < ci/chk.py",
        "{ python3; } < ci/chk.py",
        "python3 <",
        "python3 < ; true",
        "python3 <<< 'import x'",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

/// A wrapper's option whose second character is not ASCII (`nice -é x`) is an option the
/// grammar does not know: the line closes the tree, it does not panic the reader.
#[test]
fn a_multibyte_option_is_unknown_not_a_panic() {
    for value in ["nice -é tools/x.sh", "timeout -ñ5 3 tools/x.sh"] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

/// Red team 47a: `--` ends a wrapper's options, and its own words (a duration, a lock) still
/// come before the command (`timeout -- 5 tools/x.sh` in a hook).
#[test]
fn a_wrapper_s_words_after_double_dash_are_not_the_command() {
    for value in ["timeout -- 5 tools/x.sh", "flock -- /tmp/l tools/x.sh"] {
        let named = strict(value);
        assert!(
            matches!(&named, Named::Paths(paths) if paths.iter().any(|p| p.path == "tools/x.sh")),
            "{value}: {named:?}"
        );
    }
}
