//! Tests of the shell-word reader: words as the shell joins them, commands as it splits them.

use super::*;

fn text(s: &str, quoted: bool) -> Piece {
    Piece::Text {
        text: s.to_string(),
        quoted,
    }
}

/// Each command's words as literal text, `None` for a word holding an expansion.
fn literals(text: &str, dialect: Dialect) -> Vec<Vec<Option<String>>> {
    commands(text, dialect)
        .iter()
        .map(|words| words.iter().map(Word::literal).collect())
        .collect()
}

fn lit(words: &[&str]) -> Vec<Option<String>> {
    words.iter().map(|w| Some(w.to_string())).collect()
}

/// Red team 36 B1: a word the shell builds from several quoted and escaped pieces is one word,
/// its text what the shell makes of it.
#[test]
fn quote_joined_words_are_the_words_the_shell_makes() {
    let got = literals(
        "export PERL5OPT='-Mlib='\"/h\"'/lib'\nexport A=pl\"i\"b B=pl\\ib C=''\\''k'\\''='\\''v'\\'''\n\
         wat\"ch\"_file 'a b'\"c\"\\ d\nX=$'\\x2dMl\\151b=/q\\n'\n",
        Dialect::Posix,
    );
    assert_eq!(
        got,
        [
            lit(&["export", "PERL5OPT=-Mlib=/h/lib"]),
            lit(&["export", "A=plib", "B=plib", "C='k'='v'"]),
            lit(&["watch_file", "a bc d"]),
            lit(&["X=-Mlib=/q\n"]),
        ]
    );
}

#[test]
fn expansions_are_pieces_of_their_word() {
    let got = commands(
        "export P=\"$HOME\"/a${B}:${C:-/d}$(pwd)`pwd`$1${#x}$((1+2))'$q' # $not\n",
        Dialect::Posix,
    );
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0][1].pieces,
        [
            text("P=", false),
            text("", true),
            Piece::Var("HOME".into()),
            text("/a", false),
            Piece::Var("B".into()),
            text(":", false),
            Piece::VarOr {
                name: "C".into(),
                op: ":-".into(),
                word: "/d".into()
            },
            Piece::Command("pwd".into()),
            Piece::Command("pwd".into()),
            Piece::Other("$1".into()),
            Piece::Other("${#x}".into()),
            Piece::Other("$((1+2))".into()),
            text("$q", true),
        ]
    );
    // `$(…)` keeps its quotes and nested parentheses.
    let got = commands("X=$(expand_path \"a)b\" (c))/d", Dialect::Posix);
    assert_eq!(
        got[0][0].pieces[1],
        Piece::Command("expand_path \"a)b\" (c)".into())
    );
}

#[test]
fn commands_split_at_operators_and_lose_keywords_redirections_and_comments() {
    let got = literals(
        "if [ -d x ]; then export A=1; fi\n[ -f y ] && export B=2 || true\n\
         ( export C=3 )\nexport D=4 >/dev/null 2>&1\nexport E=5 \\\n F=6\n# export G=7\n\
         echo a#b\n",
        Dialect::Posix,
    );
    assert_eq!(
        got,
        [
            lit(&["[", "-d", "x", "]"]),
            lit(&["export", "A=1"]),
            lit(&["fi"]),
            lit(&["[", "-f", "y", "]"]),
            lit(&["export", "B=2"]),
            lit(&["true"]),
            lit(&["export", "C=3"]),
            lit(&["export", "D=4"]),
            lit(&["export", "E=5", "F=6"]),
            lit(&["echo", "a#b"]),
        ]
    );
}

/// fish: `\'` inside single quotes, `(…)` a command substitution, `$x[1]` an index, `and`/`or`
/// chain commands.
#[test]
fn fish_quotes_substitutions_and_chains() {
    let got = commands(
        "set -gx A 'it\\'s' (pwd)/x $v[1]\ntest -d x; and set -x B b\n",
        Dialect::Fish,
    );
    assert_eq!(got.len(), 3);
    assert_eq!(got[0][3].literal().as_deref(), Some("it's"));
    assert_eq!(
        got[0][4].pieces,
        [Piece::Command("pwd".into()), text("/x", false)]
    );
    assert_eq!(got[0][5].pieces, [Piece::Other("$v[1]".into())]);
    assert_eq!(
        got[2].iter().map(Word::literal).collect::<Vec<_>>(),
        lit(&["set", "-x", "B", "b"])
    );
}

#[test]
fn patterns_and_tildes_are_told_only_when_unquoted() {
    for (word, pattern) in [
        ("src/*.nix", true),
        ("a?b", true),
        ("{a,b}", true),
        ("~/x", true),
        ("'*'", false),
        ("\"~/x\"", false),
        ("\\*", false),
        ("a~b", false),
        ("plain", false),
    ] {
        let got = commands(word, Dialect::Posix);
        assert_eq!(got[0][0].is_pattern_or_tilde(), pattern, "{word}");
    }
}

#[test]
fn a_braced_parameter_with_an_operator_keeps_its_word() {
    assert_eq!(
        braced("PERL5LIB:+:${PERL5LIB}"),
        Piece::VarOr {
            name: "PERL5LIB".into(),
            op: ":+".into(),
            word: ":${PERL5LIB}".into()
        }
    );
    assert_eq!(
        braced("x%.py"),
        Piece::VarOr {
            name: "x".into(),
            op: "%".into(),
            word: ".py".into()
        }
    );
    assert_eq!(braced("x/a/b"), Piece::Other("${x/a/b}".into()));
    assert_eq!(braced("#x"), Piece::Other("${#x}".into()));
    assert_eq!(braced("1"), Piece::Other("${1}".into()));
    assert_eq!(
        word("a b$X", Dialect::Posix).pieces,
        [text("a b", false), Piece::Var("X".into())]
    );
}

/// Brace expansion as the shells do it (red team 40's open shape: fish's `{$HOME}/lib`), array
/// assignments as one word with their elements.
#[test]
fn braces_expand_and_arrays_are_read_as_elements() {
    let expanded = |text: &str, dialect: Dialect| -> Vec<String> {
        let words = commands(text, dialect);
        brace_expand(&words[0][0], dialect)
            .iter()
            .map(|w| {
                w.pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Text { text, .. } => text.clone(),
                        Piece::Var(name) => format!("<{name}>"),
                        other => format!("[{other:?}]"),
                    })
                    .collect()
            })
            .collect()
    };
    assert_eq!(
        expanded("/x/{a,b}/lib", Dialect::Posix),
        ["/x/a/lib", "/x/b/lib"]
    );
    assert_eq!(
        expanded("{p,q{1,2}}z", Dialect::Posix),
        ["pz", "q1z", "q2z"]
    );
    // No comma, quoted braces or comma: the word as written.
    assert_eq!(expanded("{a}", Dialect::Posix), ["{a}"]);
    assert_eq!(expanded("'{a,b}'", Dialect::Posix), ["{a,b}"]);
    assert_eq!(expanded("{a\\,b}", Dialect::Posix), ["{a,b}"]);
    // bash keeps `{$HOME}`; fish expands it.
    assert_eq!(expanded("{$HOME}/lib", Dialect::Posix), ["{<HOME>}/lib"]);
    assert_eq!(expanded("{$HOME}/lib", Dialect::Fish), ["<HOME>/lib"]);
    assert_eq!(
        expanded("{$HOME,/opt}/lib", Dialect::Fish),
        ["<HOME>/lib", "/opt/lib"]
    );
    // A sequence is not read; a flood of words is not either.
    let seq = expanded("/o/{1..3}", Dialect::Posix);
    assert!(seq.len() == 1 && seq[0].starts_with("[Other"), "{seq:?}");
    let flood = expanded("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}", Dialect::Posix);
    assert!(
        flood.len() == 1 && flood[0].starts_with("[Other"),
        "{flood:?}"
    );

    let words = commands(
        "PROMPT_COMMAND=('. ./a' \"b $X\")\npath+=(~/bin\n $path) # c\n",
        Dialect::Posix,
    );
    assert_eq!(words.len(), 2, "{words:?}");
    let Piece::Array(elements) = &words[0][0].pieces[1] else {
        panic!("{words:?}");
    };
    assert_eq!(elements[0].literal().as_deref(), Some(". ./a"));
    assert_eq!(elements.len(), 2);
    let Piece::Array(elements) = &words[1][0].pieces[1] else {
        panic!("{words:?}");
    };
    assert_eq!(elements.len(), 2, "{elements:?}");
    // `(` elsewhere still ends a command (a subshell).
    assert_eq!(literals("(cd x)", Dialect::Posix), [lit(&["cd", "x"])]);
}
