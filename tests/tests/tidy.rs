//! The tidy test: the workspace's source habits, checked on every `.rs` file. Each file opens with
//! a `//!` line saying what it owns, no file is over 1,000 lines, no module is loaded through
//! `#[path]`, inline `mod tests {}` stay within about a screen (longer tests live in
//! `<module>/tests.rs`), and every `unsafe` block, impl or fn says why it is sound (`// SAFETY:`,
//! or a `# Safety` doc section for an `unsafe fn`) right above.
//! The checker is tested on small bad inputs too, so it can fail.

use std::fmt;
use std::path::{Path, PathBuf};

/// Longest a source file may be.
const MAX_LINES: usize = 1_000;
/// Longest an inline `mod tests { … }` may be (about a screen); longer tests go in
/// `<module>/tests.rs`.
const MAX_INLINE_TEST_LINES: usize = 80;
/// How many lines above an `unsafe` its `// SAFETY:` comment may be (a multi-line statement
/// puts the `unsafe` on a later line than the comment).
const SAFETY_LOOKBACK: usize = 3;
/// Directories never walked: build output, installed tools, npm packages, and hidden dirs
/// (`.git`, `.tools`, `.venv`) are skipped by their leading dot.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules"];

/// One broken habit in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finding {
    NoModuleDoc,
    TooLong { lines: usize },
    PathAttribute { line: usize },
    LongInlineTests { line: usize, lines: usize },
    UndocumentedUnsafe { line: usize },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::NoModuleDoc => {
                write!(f, "does not open with a `//!` line saying what it owns")
            }
            Finding::TooLong { lines } => {
                write!(
                    f,
                    "has {lines} lines (at most {MAX_LINES}): split it by topic"
                )
            }
            Finding::PathAttribute { line } => write!(
                f,
                "line {line}: `#[path]` attribute (put tests in `<module>/tests.rs`, declared \
                 `#[cfg(test)] mod tests;`)"
            ),
            Finding::LongInlineTests { line, lines } => write!(
                f,
                "line {line}: inline `mod tests {{}}` of {lines} lines (at most \
                 {MAX_INLINE_TEST_LINES}): move it to `<module>/tests.rs`"
            ),
            Finding::UndocumentedUnsafe { line } => write!(
                f,
                "line {line}: `unsafe` without a `// SAFETY:` comment (or a `# Safety` doc for an \
                 `unsafe fn`) in the {SAFETY_LOOKBACK} lines above"
            ),
        }
    }
}

/// Every habit checked on one file's text.
fn check_source(text: &str) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let code = code_only(text);
    let mut findings = Vec::new();
    if !lines.first().is_some_and(|first| first.starts_with("//!")) {
        findings.push(Finding::NoModuleDoc);
    }
    if lines.len() > MAX_LINES {
        findings.push(Finding::TooLong { lines: lines.len() });
    }
    for (index, code_line) in code.iter().enumerate() {
        if has_path_attribute(code_line) {
            findings.push(Finding::PathAttribute { line: index + 1 });
        }
        if code_line.trim() == "mod tests {" {
            let lines = block_lines(&code[index..]);
            if lines > MAX_INLINE_TEST_LINES {
                findings.push(Finding::LongInlineTests {
                    line: index + 1,
                    lines,
                });
            }
        }
        if let Some(kind) = unsafe_kind(code_line)
            && !safety_documented(&lines, index, kind)
        {
            findings.push(Finding::UndocumentedUnsafe { line: index + 1 });
        }
    }
    findings
}

/// The text line by line with comments removed and string and char literals emptied, so words
/// in prose or in test inputs are never taken for code.
fn code_only(text: &str) -> Vec<String> {
    #[derive(Clone, Copy)]
    enum State {
        Code,
        BlockComment(usize),
        Str,
        RawStr(usize),
    }
    let mut state = State::Code;
    let mut out = Vec::new();
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut kept = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match state {
                State::BlockComment(depth) => {
                    if c == '*' && next == Some('/') {
                        state = if depth == 1 {
                            State::Code
                        } else {
                            State::BlockComment(depth - 1)
                        };
                        i += 2;
                    } else if c == '/' && next == Some('*') {
                        state = State::BlockComment(depth + 1);
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                State::Str => {
                    if c == '\\' {
                        i += 2;
                    } else {
                        if c == '"' {
                            kept.push('"');
                            state = State::Code;
                        }
                        i += 1;
                    }
                }
                State::RawStr(hashes) => {
                    let closes =
                        c == '"' && (1..=hashes).all(|k| chars.get(i + k).copied() == Some('#'));
                    if closes {
                        kept.push('"');
                        state = State::Code;
                        i += 1 + hashes;
                    } else {
                        i += 1;
                    }
                }
                State::Code => {
                    if c == '/' && next == Some('/') {
                        break;
                    } else if c == '/' && next == Some('*') {
                        state = State::BlockComment(1);
                        i += 2;
                    } else if c == '"' {
                        kept.push('"');
                        state = State::Str;
                        i += 1;
                    } else if c == 'r'
                        && starts_a_token(&chars[..i])
                        && raw_string_hashes(&chars[i + 1..]).is_some()
                    {
                        let hashes = raw_string_hashes(&chars[i + 1..]).unwrap_or(0);
                        kept.push('"');
                        state = State::RawStr(hashes);
                        i += 2 + hashes;
                    } else if c == '\'' {
                        // A char literal ('x', '\n', '\''), or a lifetime ('a), kept as is.
                        if next == Some('\\') {
                            let end = (i + 2..chars.len()).find(|&k| chars[k] == '\'');
                            i = end.map_or(chars.len(), |k| k + 1);
                            kept.push_str("' '");
                        } else if chars.get(i + 2) == Some(&'\'') {
                            i += 3;
                            kept.push_str("' '");
                        } else {
                            kept.push(c);
                            i += 1;
                        }
                    } else {
                        kept.push(c);
                        i += 1;
                    }
                }
            }
        }
        out.push(kept);
    }
    out
}

/// Whether an `r` after `before` starts a raw-string prefix (`r"`, `br"`), not an identifier.
fn starts_a_token(before: &[char]) -> bool {
    let word = |c: &char| c.is_alphanumeric() || *c == '_';
    match before {
        [.., p, 'b'] => !word(p),
        [.., p] => !word(p),
        [] => true,
    }
}

/// How many lines the block opened on the first line spans, through its closing brace (all of
/// them when it never closes).
fn block_lines(code: &[String]) -> usize {
    let mut depth = 0i64;
    for (index, line) in code.iter().enumerate() {
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
        }
        if depth <= 0 {
            return index + 1;
        }
    }
    code.len()
}

/// `Some(n)` when `rest` (what follows an `r`) opens a raw string with `n` hashes: `#…#"`.
fn raw_string_hashes(rest: &[char]) -> Option<usize> {
    let hashes = rest.iter().take_while(|c| **c == '#').count();
    (rest.get(hashes) == Some(&'"')).then_some(hashes)
}

/// Whether a code line carries a `#[path …]` attribute (alone or after other attributes).
fn has_path_attribute(code_line: &str) -> bool {
    code_line.split("#[").skip(1).any(|attr| {
        let attr = attr.trim_start();
        attr.strip_prefix("path")
            .is_some_and(|rest| rest.trim_start().starts_with(['=', ']']))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnsafeKind {
    Block,
    Impl,
    Fn,
}

/// The kind of the first `unsafe` block, impl or fn on a code line.
fn unsafe_kind(code_line: &str) -> Option<UnsafeKind> {
    let mut rest = code_line;
    while let Some(at) = rest.find("unsafe") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + "unsafe".len()..].trim_start();
        let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if word_start {
            if after.starts_with('{') {
                return Some(UnsafeKind::Block);
            }
            if after.starts_with("impl") {
                return Some(UnsafeKind::Impl);
            }
            if after.starts_with("fn") || after.starts_with("extern \"C\" fn") {
                return Some(UnsafeKind::Fn);
            }
        }
        rest = &rest[at + "unsafe".len()..];
    }
    None
}

/// A `// SAFETY:` comment in the lines just above the `unsafe` (or on its line); for an
/// `unsafe fn`, a `# Safety` section in the doc comment above it also counts.
fn safety_documented(lines: &[&str], index: usize, kind: UnsafeKind) -> bool {
    let from = index.saturating_sub(SAFETY_LOOKBACK);
    if lines[from..=index].iter().any(|l| l.contains("// SAFETY:")) {
        return true;
    }
    kind == UnsafeKind::Fn
        && lines[..index]
            .iter()
            .rev()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["))
            .any(|l| l.trim_start_matches('/').trim() == "# Safety")
}

/// Every `.rs` file below `dir`, skipping build output, tools and hidden dirs.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                rust_files(&entry.path(), out)?;
            }
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(entry.path());
        }
    }
    Ok(())
}

#[test]
fn every_rust_file_keeps_the_workspace_habits() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or_else(|| std::io::Error::other("the tests crate has no parent directory"))?;
    let mut files = Vec::new();
    rust_files(root, &mut files)?;
    files.sort();
    // Guards against walking the wrong directory and passing on nothing.
    assert!(
        files.iter().any(|f| f.ends_with("tests/tests/tidy.rs")) && files.len() > 50,
        "the walk from {} found only {} files",
        root.display(),
        files.len()
    );
    let mut report = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        for finding in check_source(&text) {
            let shown = file.strip_prefix(root).unwrap_or(file);
            report.push(format!("{}: {finding}", shown.display()));
        }
    }
    assert!(
        report.is_empty(),
        "{} habit(s) broken:\n{}",
        report.len(),
        report.join("\n")
    );
    Ok(())
}

#[test]
fn a_tidy_file_passes() {
    let good = "//! Owns the frobnicator.\n\
                #[cfg(test)]\n\
                mod tests;\n\
                fn pid() -> i32 {\n\
                \x20   // SAFETY: getpid cannot fail and touches no memory.\n\
                \x20   unsafe { libc::getpid() }\n\
                }\n\
                /// Frobs.\n\
                ///\n\
                /// # Safety\n\
                ///\n\
                /// `p` must be valid.\n\
                pub unsafe fn frob(p: *const u8) {}\n\
                // SAFETY: Frob holds no thread-bound state.\n\
                unsafe impl Send for Frob {}\n";
    assert_eq!(check_source(good), Vec::new());
}

#[test]
fn a_missing_module_doc_is_found() {
    assert_eq!(check_source("use std::fs;\n"), vec![Finding::NoModuleDoc]);
    // A plain comment or an outer doc comment is not a module doc.
    assert_eq!(check_source("// Owns x.\n"), vec![Finding::NoModuleDoc]);
    assert_eq!(check_source("/// Owns x.\n"), vec![Finding::NoModuleDoc]);
    assert_eq!(check_source(""), vec![Finding::NoModuleDoc]);
}

#[test]
fn a_file_over_the_line_limit_is_found() {
    let at_limit = format!("//! Long.\n{}", "x();\n".repeat(MAX_LINES - 1));
    assert_eq!(check_source(&at_limit), Vec::new());
    let over = format!("//! Long.\n{}", "x();\n".repeat(MAX_LINES));
    assert_eq!(
        check_source(&over),
        vec![Finding::TooLong {
            lines: MAX_LINES + 1
        }]
    );
}

#[test]
fn path_attributes_are_found_in_every_spelling() {
    for (text, line) in [
        (
            "//! M.\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;\n",
            3,
        ),
        ("//! M.\n#[cfg(test)] #[path=\"x.rs\"] mod tests;\n", 2),
        ("//! M.\n    #[ path = \"walk.rs\" ]\n    mod walk;\n", 2),
    ] {
        assert_eq!(
            check_source(text),
            vec![Finding::PathAttribute { line }],
            "{text}"
        );
    }
    // Named in prose or in a string, it is not an attribute.
    let prose = "//! Loaded without `#[path = \"x\"]`.\n// #[path = \"x\"]\nconst S: &str = \"#[path = \\\"x\\\"]\";\n";
    assert_eq!(check_source(prose), Vec::new());
}

#[test]
fn long_inline_test_modules_are_found() {
    // `mod tests {`, `body` lines, `}`.
    let module = |body: usize| {
        format!(
            "//! M.\nfn f() {{}}\n#[cfg(test)]\nmod tests {{\n{}}}\n",
            "    #[test] fn t() { let s = \"}\"; let c = '}'; }\n".repeat(body)
        )
    };
    assert_eq!(check_source(&module(MAX_INLINE_TEST_LINES - 2)), Vec::new());
    assert_eq!(
        check_source(&module(MAX_INLINE_TEST_LINES - 1)),
        vec![Finding::LongInlineTests {
            line: 4,
            lines: MAX_INLINE_TEST_LINES + 1
        }]
    );
    // Declared `mod tests;` with the tests in their own file: nothing to measure.
    assert_eq!(
        check_source("//! M.\n#[cfg(test)]\nmod tests;\n"),
        Vec::new()
    );
}

#[test]
fn undocumented_unsafe_is_found() {
    let cases = [
        // No comment at all.
        ("//! M.\nfn f() {\n    unsafe { g() }\n}\n", 3),
        // The old spelling: the workspace writes `// SAFETY:`.
        (
            "//! M.\nfn f() {\n    // Safety: g is sound.\n    unsafe { g() }\n}\n",
            4,
        ),
        // Too far above.
        (
            "//! M.\n// SAFETY: far away.\nfn f() {\n    a();\n    b();\n    c();\n    unsafe { g() }\n}\n",
            7,
        ),
        // Inside an expression.
        ("//! M.\nlet x = 1 + unsafe{ g() };\n", 2),
        ("//! M.\nunsafe impl Send for X {}\n", 2),
        ("//! M.\npub unsafe fn f() {}\n", 2),
        // A `# Safety` doc section covers only an unsafe fn, not a block.
        ("//! M.\n/// # Safety\nfn f() { unsafe { g() } }\n", 3),
        // A doc section separated from the fn by code does not count.
        ("//! M.\n/// # Safety\nfn a() {}\nunsafe fn f() {}\n", 4),
    ];
    for (text, line) in cases {
        assert_eq!(
            check_source(text),
            vec![Finding::UndocumentedUnsafe { line }],
            "{text}"
        );
    }
    // The word in prose, strings, raw strings, identifiers and block comments is not code.
    let not_code = "//! Avoids unsafe { } code.\n\
                    /// Never unsafe fn.\n\
                    const A: &str = \"unsafe { x }\";\n\
                    const B: &str = r#\"unsafe impl \"quoted\" X\"#;\n\
                    const C: &[u8] = br\"unsafe { \";\n\
                    let c = '\"'; let unsafe_count = 0; not_unsafe { };\n\
                    /* unsafe {\n   } */\n";
    assert_eq!(check_source(not_code), Vec::new());
    // A SAFETY comment two lines up covers a statement split over lines.
    let split = "//! M.\n// SAFETY: g is sound.\nlet ret =\n    unsafe { g() };\n";
    assert_eq!(check_source(split), Vec::new());
}

#[test]
fn findings_name_the_problem() {
    let text = Finding::UndocumentedUnsafe { line: 7 }.to_string();
    assert!(
        text.starts_with("line 7: `unsafe` without a `// SAFETY:`"),
        "{text}"
    );
    let text = Finding::PathAttribute { line: 2 }.to_string();
    assert!(text.contains("`<module>/tests.rs`"), "{text}");
}
