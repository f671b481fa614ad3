//! Unit tests of the paths tool configuration files spell out.

use super::*;

fn paths(text: &str) -> Vec<Named> {
    paths_named(text, Path::new("/h"), &|name| match name {
        "PROJ" => vec!["/p1".into(), "/p2".into()],
        _ => Vec::new(),
    })
}

fn path(p: &str) -> Named {
    Named::Path(PathBuf::from(p))
}

#[test]
fn every_spelling_of_a_path_in_a_tool_s_config_is_taken() {
    let cases = [
        (
            "Host *\n  ProxyCommand /p/tools/proxy.sh %h %p\n",
            vec![path("/p/tools/proxy.sh")],
        ),
        ("Include ~/p/ssh.conf", vec![path("/h/p/ssh.conf")]),
        ("IdentityFile %d/p/key", vec![path("/h/p/key")]),
        (
            "source $HOME/p/x.vim\nso ${HOME}/p/y.vim",
            vec![path("/h/p/x.vim"), path("/h/p/y.vim")],
        ),
        ("dofile('/p/init2.lua')", vec![path("/p/init2.lua")]),
        ("node-options=\"--require=/p/r.js\"", vec![path("/p/r.js")]),
        (
            "run-shell '/p/t.sh'; source-file \"/p/t.conf\"",
            vec![path("/p/t.sh"), path("/p/t.conf")],
        ),
        ("let x = system('/p/a.sh')|call F()", vec![path("/p/a.sh")]),
        ("nnoremap x :!/p/b.sh<CR>", vec![path("/p/b.sh")]),
        // Patterns and expansions are matchers, not code to run.
        ("Include /p/ssh/*.conf", vec![]),
        ("ProxyCommand /p/%h.sh", vec![]),
        ("ControlPath /tmp/cm-%r@%h", vec![]),
        ("autocmd BufWritePost /p/src/*.py !black %", vec![]),
        ("set path+=/p/src/**", vec![]),
        ("x = $HOME/a/${X}y$Z", vec![]),
        ("x /p/$D/y.sh", vec![]),
    ];
    for (text, want) in cases {
        assert_eq!(paths(text), want, "{text}");
    }
}

#[test]
fn ssh_s_relative_includes_are_taken_from_its_directory() {
    let got = ssh_includes(
        "Host x\n  Include ../p/ssh.conf \"../p/two.conf\"\ninclude=config.d/*\n\
         Include /abs ~/p/ssh.d/*.conf /q/*\n",
        Path::new("/h"),
    );
    assert_eq!(
        got,
        vec![
            path("/h/.ssh/../p/ssh.conf"),
            path("/h/.ssh/../p/two.conf"),
            Named::Dir(PathBuf::from("/h/.ssh/config.d")),
            Named::Dir(PathBuf::from("/h/p/ssh.d")),
            Named::Dir(PathBuf::from("/q")),
        ]
    );
}

#[test]
fn words_that_are_no_absolute_path_are_not_taken() {
    for text in [
        "set number\nsyntax on",
        "source relative.vim",
        "a/b/c",
        "x~/y",
        "Host example.com",
        "ratio 1/2",
    ] {
        assert_eq!(paths(text), vec![], "{text}");
    }
    // A URL's path names a file nowhere near a tree.
    assert_eq!(
        paths("registry=https://registry.npmjs.org/"),
        vec![path("/registry.npmjs.org/")]
    );
}

/// Red team 46a: a variable the owner's start-up files give an absolute value starts a path
/// (`ProxyCommand $PROJ/x`, vim's `source ${PROJ}/x.vim`), under each value; one set nowhere
/// read, a pattern after it, and a bare `$PROJ` name nothing.
#[test]
fn known_variables_start_paths() {
    assert_eq!(
        paths("ProxyCommand $PROJ/tools/proxy.sh %h\nsource ${PROJ}/x.vim\n"),
        [
            path("/p1/tools/proxy.sh"),
            path("/p2/tools/proxy.sh"),
            path("/p1/x.vim"),
            path("/p2/x.vim"),
        ]
    );
    assert_eq!(
        paths("run-shell $UNSET/x.sh\nsource $PROJ/*.vim\ncd $PROJ\n$PROJx/y"),
        Vec::<Named>::new()
    );
}
