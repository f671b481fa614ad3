//! How command lines from git's configuration are read: what they name, and when the whole
//! tree (red teams 23g and 23h).

use super::{Named, NamedPath, Reading, Scope, program_paths};

fn below(paths: &[&str]) -> Named {
    Named::Paths(
        paths
            .iter()
            .map(|path| NamedPath {
                path: path.to_string(),
                scope: Scope::Below,
            })
            .collect(),
    )
}

fn strict(value: &str) -> Named {
    program_paths(value, Reading::Strict)
}

#[test]
fn words_as_the_shell_reads_them() {
    assert_eq!(strict("sh fsm.sh"), below(&["fsm.sh"]));
    assert_eq!(
        strict("'./tools/my conv.sh' --flag"),
        below(&["./tools/my conv.sh"])
    );
    assert_eq!(strict("!env X=1 tools/e.sh"), below(&["tools/e.sh"]));
    // Arguments without a `/` or `.` are subcommands, not files (`gh auth git-credential`).
    assert_eq!(strict("git-lfs filter-process"), below(&[]));
    assert_eq!(
        strict("!/usr/bin/gh auth git-credential"),
        below(&["/usr/bin/gh"])
    );
    assert_eq!(strict("less -FRX"), below(&[]));
    // A command's bare name is looked up on PATH, not in the tree.
    assert_eq!(strict("a.sh; b.sh && ./c.sh"), below(&["./c.sh"]));
    assert_eq!(strict("f() { ./x.sh; }; f"), below(&["./x.sh"]));
    assert_eq!(
        strict("./x.sh 2>/dev/null <in.txt"),
        below(&["./x.sh", "/dev/null", "in.txt"])
    );
    // In double quotes a backslash stays unless it escapes `$`, `` ` ``, `"` or `\`.
    assert_eq!(strict("sh \"conv\\x.sh\""), below(&["conv\\x.sh"]));
    assert_eq!(strict("sh ~/bin/x.sh"), below(&["~/bin/x.sh"]));
    assert_eq!(strict("tool -fconv.awk"), below(&["conv.awk"]));
}

#[test]
fn git_s_own_arguments_are_no_file_names() {
    assert_eq!(strict("!aws codecommit credential-helper $@"), below(&[]));
    assert_eq!(
        strict("!f() { ./x.sh \"$1\" ${2}; }; f"),
        below(&["./x.sh"])
    );
}

#[test]
fn assignments_and_option_values_name_their_value() {
    assert_eq!(strict("tool --config=c t.cfg"), below(&["c", "t.cfg"]));
    assert_eq!(strict("X=./a ./run"), below(&["./a", "./run"]));
    assert_eq!(strict("sh --rcfile=rc x.sh"), below(&["rc", "x.sh"]));
    assert_eq!(
        strict("NODE_OPTIONS='--require ./h.js' tool"),
        below(&["./h.js"])
    );
    assert_eq!(strict("A=1 B=./b tool ./x"), below(&["./b", "./x"]));
    assert_eq!(strict("PYTHONPATH=. tool"), below(&["."]));
}

#[test]
fn a_line_another_shell_runs_is_read_too() {
    for value in [
        "sh -c 'sh fsm.sh'",
        "sh -ce 'sh fsm.sh'",
        "sh -c -- 'sh fsm.sh'",
        "bash -lc \"sh fsm.sh\"",
    ] {
        assert_eq!(strict(value), below(&["fsm.sh"]), "{value}");
    }
    let nest = |levels: usize| {
        let mut line = "./x.sh".to_string();
        for _ in 0..levels {
            let quoted = line.replace('\\', "\\\\").replace('"', "\\\"");
            line = format!("sh -c \"{quoted}\"");
        }
        line
    };
    assert_eq!(strict(&nest(3)), below(&["./x.sh"]));
    assert!(matches!(strict(&nest(8)), Named::WholeTree(_)));
}

#[test]
fn a_script_an_interpreter_runs_brings_its_directory() {
    assert_eq!(
        strict("python3 tools/conv.py"),
        Named::Paths(vec![
            NamedPath {
                path: "tools/conv.py".into(),
                scope: Scope::Below
            },
            NamedPath {
                path: "tools".into(),
                scope: Scope::Imports
            },
        ])
    );
    assert_eq!(strict("node tools/x.js"), below(&["tools/x.js", "tools"]));
    // `python -m`: the module at the top, and what it imports from the top.
    assert_eq!(
        strict("\"/usr/bin/python3\" -m nbstripout"),
        Named::Paths(vec![
            NamedPath {
                path: "/usr/bin/python3".into(),
                scope: Scope::Below
            },
            NamedPath {
                path: "nbstripout".into(),
                scope: Scope::Below
            },
            NamedPath {
                path: "nbstripout.py".into(),
                scope: Scope::Below
            },
            NamedPath {
                path: ".".into(),
                scope: Scope::Imports
            },
        ])
    );
}

#[test]
fn what_the_shell_computes_or_an_interpreter_loads_is_the_whole_tree() {
    for value in [
        "cd tools && ./conv.sh",
        "$HOME/p/tools/conv.sh",
        "`pwd`/x.sh",
        "sh scripts/*.sh",
        "sh ./x?.sh",
        "bash -c 'sh {conv,x}.sh'",
        "sh ~rt23u/x.sh",
        "python3 -c 'import fsm'",
        "python3.12 -cimport\\ fsm",
        "/usr/bin/ruby -Ilib -rfsm -e 0",
        "node -e \"require('./x')\"",
        "node --require=./hook.js t",
        "perl -Mlib=. -MFsm -e 1",
        "java -cp . Fsm",
        "awk -f conv.awk",
        "env -C tools ./x.sh",
        "env --chdir=tools ./x.sh",
        "env -S 'sh fsm.sh'",
        "sh -c 'sh -c \"python3 -c 1\"'",
        "sh -c \"source ./x.sh\"",
        ". ./x.sh",
        "exec ./x.sh",
        "echo 'sh fsm.sh' | sh -s",
        "cat fsm.txt | sh",
        "ls | grep fsm | xargs -r sh",
        "find . -name 'fsm.s?' -exec sh {} +",
        "sh fsm.sh \\\n x",
    ] {
        assert!(
            matches!(strict(value), Named::WholeTree(_)),
            "{value}: {:?}",
            strict(value)
        );
    }
}

#[test]
fn a_command_the_owner_runs_by_name_names_what_it_spells_out() {
    for (value, named) in [
        (
            "!f() { git fetch origin pull/$1/head:pr-$1; }; f",
            below(&[]),
        ),
        ("!cd \"${GIT_PREFIX:-.}\" && ./x.sh", below(&["./x.sh"])),
        ("!git add . && git commit", below(&[])),
        ("difftool -y -x 'sh tools/d.sh'", below(&["tools/d.sh"])),
    ] {
        assert_eq!(program_paths(value, Reading::Literal), named, "{value}");
    }
}
