//! How command lines from git's configuration are read: what they name, and when the whole
//! tree (red teams 23g, 23h and 23j).

use super::{Named, NamedPath, Reading, Scope, ScriptRunner, program_paths};

/// A plain place.
fn at(path: &str) -> NamedPath {
    NamedPath {
        path: path.into(),
        scope: Scope::Below,
        script: None,
    }
}

/// A script, whose directory is a place too.
fn script(path: &str, runner: ScriptRunner) -> NamedPath {
    NamedPath {
        path: path.into(),
        scope: Scope::Below,
        script: Some(runner),
    }
}

/// What Python imports from a directory.
fn imports(path: &str) -> NamedPath {
    NamedPath {
        path: path.into(),
        scope: Scope::Imports,
        script: None,
    }
}

fn strict(value: &str) -> Named {
    program_paths(value, Reading::Strict)
}

fn paths(named: &[NamedPath]) -> Named {
    Named::Paths(named.to_vec())
}

use ScriptRunner::{Other, Python, Shebang};

#[test]
fn words_as_the_shell_reads_them() {
    assert_eq!(strict("sh fsm.sh"), paths(&[script("fsm.sh", Other)]));
    assert_eq!(
        strict("'./tools/my conv.sh' --flag"),
        paths(&[script("./tools/my conv.sh", Shebang)])
    );
    assert_eq!(
        strict("!env X=1 tools/e.sh"),
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
        paths(&[script("./x.sh", Shebang), at("/dev/null"), at("in.txt")])
    );
    // In double quotes a backslash stays unless it escapes `$`, `` ` ``, `"` or `\`.
    assert_eq!(
        strict("sh \"conv\\x.sh\""),
        paths(&[script("conv\\x.sh", Other)])
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
        assert_eq!(strict(value), paths(&[script("conv3", Other)]), "{value}");
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
fn option_values_and_assignments_name_what_programs_load() {
    assert_eq!(
        strict("tool --config=c t.cfg"),
        paths(&[at("c"), at("t.cfg")])
    );
    assert_eq!(
        strict("X=./a ./run"),
        paths(&[at("./a"), script("./run", Shebang)])
    );
    assert_eq!(
        strict("sh --rcfile=rc x.sh"),
        paths(&[at("rc"), script("x.sh", Other)])
    );
    assert_eq!(
        strict("NODE_OPTIONS='--require ./h.js' tool"),
        paths(&[at("./h.js")])
    );
    assert_eq!(strict("PYTHONPATH=. tool"), paths(&[at(".")]));
    assert_eq!(strict("make -s -f mk12"), paths(&[at("mk12")]));
    assert_eq!(strict("sed -f clean"), paths(&[at("clean")]));
    assert_eq!(strict("sqlite3 -init conv21"), paths(&[at("conv21")]));
    assert_eq!(
        strict("/usr/bin/ruby -Ilib -rfsm -e 0"),
        paths(&[at("/usr/bin/ruby"), at("lib"), at("fsm")])
    );
    assert_eq!(
        strict("node --require=./hook.js t"),
        paths(&[at("./hook.js"), script("t", Other)])
    );
    assert_eq!(
        strict("java -cp . Fsm"),
        paths(&[at("."), script("Fsm", Other)])
    );
    assert_eq!(strict("perl -Mlib=. -e 1"), paths(&[at("lib"), at(".")]));
}

#[test]
fn a_line_another_shell_runs_is_read_too() {
    for value in [
        "sh -c 'sh fsm.sh'",
        "sh -ce 'sh fsm.sh'",
        "sh -c -- 'sh fsm.sh'",
        "bash -lc \"sh fsm.sh\"",
    ] {
        assert_eq!(strict(value), paths(&[script("fsm.sh", Other)]), "{value}");
    }
    let nest = |levels: usize| {
        let mut line = "sh ./x.sh".to_string();
        for _ in 0..levels {
            let quoted = line.replace('\\', "\\\\").replace('"', "\\\"");
            line = format!("sh -c \"{quoted}\"");
        }
        line
    };
    assert_eq!(strict(&nest(3)), paths(&[script("./x.sh", Other)]));
    assert!(matches!(strict(&nest(8)), Named::WholeTree(_)));
}

#[test]
fn a_literal_cd_moves_where_paths_are_taken_from() {
    assert_eq!(
        strict("cd tools && ./conv.sh"),
        paths(&[script("tools/./conv.sh", Shebang)])
    );
    assert_eq!(
        strict("cd .. && sh tools/conv.sh"),
        paths(&[script("../tools/conv.sh", Other)])
    );
    assert_eq!(
        program_paths("cd tools && sh m.sh", Reading::Literal),
        paths(&[at("tools/m.sh")])
    );
}

#[test]
fn python_imports_from_the_script_s_directory_or_the_top() {
    assert_eq!(
        strict("python3 tools/conv.py"),
        paths(&[script("tools/conv.py", Python)])
    );
    assert_eq!(
        strict("python3 -W ignore -X utf8 tools/c.py"),
        paths(&[script("tools/c.py", Python)])
    );
    assert_eq!(
        strict("nice -n 5 python3 tools/c.py"),
        paths(&[script("tools/c.py", Python)])
    );
    assert_eq!(
        strict("\"/usr/bin/python3\" -m nbstripout"),
        paths(&[
            at("/usr/bin/python3"),
            at("nbstripout"),
            at("nbstripout.py"),
            imports("."),
        ])
    );
    assert_eq!(strict("python3 -c 'import fsm'"), paths(&[imports(".")]));
    // Other interpreters' inline code is the owner's own text.
    assert_eq!(strict("perl -pe 's/\\r//'"), paths(&[]));
    assert_eq!(
        strict("node tools/x.js"),
        paths(&[script("tools/x.js", Other)])
    );
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
        "sh ~rt23u/x.sh",
        "cd $DIR && ./x.sh",
        "env -C tools ./x.sh",
        "env --chdir=tools ./x.sh",
        "env -S 'sh fsm.sh'",
        "sh -c \"eval ./x.sh\"",
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
