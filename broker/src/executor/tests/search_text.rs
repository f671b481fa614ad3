//! SearchText: literal queries (metacharacters, Unicode case folding), sorted results that skip
//! binary files, `.git`, protected dirs and symlinks, and the bounds and argument errors.

use super::*;

#[test]
fn search_text_literal_metacharacters() {
    let f = fixture();
    let w = f.root.join("work");
    write(&w.join("m.txt"), "xa.b(c\naxb(c\na.b(cy\n");
    let out = search(&f.exec, &w, "a.b(c", None);
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    let p = w.join("m.txt");
    let p = p.display();
    assert_eq!(
        out.output,
        format!(
            "2 matching lines in 1 file for \"a.b(c\" (case-sensitive)\n{p}:1: xa.b(c\n{p}:3: a.b(cy"
        )
    );
    assert!(!out.truncated);
}

#[test]
fn search_text_case_insensitive_sorted_skips_binary_git_protected_symlinks() {
    let f = fixture();
    let w = f.root.join("work");
    write(&w.join("z.txt"), "Needle at one\nnothing\n");
    write(&w.join("a/b.txt"), "no\nno\nNEEDLE here\n");
    write(&w.join("a.txt"), "needle\n");
    write(&w.join("bin.dat"), b"needle\0binary");
    write(&w.join(".git/config"), "needle");
    write(&w.join("sub/.Git/HEAD"), "needle");
    write(&w.join("hard.txt"), "needle");
    std::fs::hard_link(w.join("hard.txt"), f.root.join("hard2.txt")).unwrap();
    write(&f.root.join("outside/o.txt"), "needle");
    std::os::unix::fs::symlink(f.root.join("outside"), w.join("link")).unwrap();
    std::os::unix::fs::symlink(f.root.join("outside/o.txt"), w.join("flink.txt")).unwrap();
    // The protected home inside the searched tree.
    std::os::unix::fs::symlink(&f.home, w.join("homelink")).unwrap();

    let out = search(&f.exec, &w, "needle", Some(false));
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    let d = w.display();
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(
        lines,
        vec![
            "3 matching lines in 3 files for \"needle\" (case-insensitive)".to_string(),
            format!("{d}/a/b.txt:3: NEEDLE here"),
            format!("{d}/a.txt:1: needle"),
            format!("{d}/z.txt:1: Needle at one"),
            "[skipped files: 1 binary, 3 symlinked, 1 hard-linked]".to_string(),
        ],
        "{}",
        out.output
    );

    // Case-sensitive by default.
    let out = search(&f.exec, &w, "NEEDLE", None);
    assert!(
        out.output.starts_with("1 matching line in 1 file"),
        "{}",
        out.output
    );

    // Searching the temp root never reaches the protected home or state dir.
    let out = search(&f.exec, &f.root, "needle", None);
    assert!(!out.output.contains("id_ed25519"), "{}", out.output);
    assert!(!out.output.contains("gateway.db"), "{}", out.output);
}

#[test]
fn search_text_unicode_case_insensitive_and_single_file() {
    let f = fixture();
    let path = f.root.join("work/u.txt");
    write(&path, "ÉCOLE\nécole\nother\n");
    let out = search(&f.exec, &path, "École", Some(false));
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    assert!(
        out.output.starts_with("2 matching lines in 1 file"),
        "{}",
        out.output
    );
    assert!(out.output.contains(&format!("{}:2: école", path.display())));
}

#[test]
fn search_text_bounds_and_errors() {
    let f = fixture();
    let w = f.root.join("work");
    let text: String = (0..50).map(|i| format!("hit {i}\n")).collect();
    write(&w.join("many.txt"), &text);
    let out = f.exec.execute(
        "a3",
        &ToolArgs::SearchText(SearchTextArgs {
            query: "hit".into(),
            path: Some(w.display().to_string()),
            case_sensitive: None,
            max_results: Some(10),
        }),
    );
    assert!(out.truncated);
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines.len(), 12, "{}", out.output);
    assert!(lines[0].starts_with("10 matching lines"), "{}", lines[0]);
    assert!(
        lines[11].contains("max_results 10 reached"),
        "{}",
        lines[11]
    );

    // Long lines are clipped to 300 characters.
    write(
        &w.join("long.txt"),
        format!("{}LONGHIT{}\n", "a".repeat(10), "b".repeat(1000)),
    );
    let out = search(&f.exec, &w.join("long.txt"), "LONGHIT", None);
    let line = out.output.lines().nth(1).unwrap();
    let text = line.split_once(": ").unwrap().1;
    assert_eq!(text.chars().count(), 301, "{line}"); // 300 + the ellipsis

    // Output bounded to 64 KiB.
    let wide: String = (0..2000)
        .map(|i| format!("wide {i} {}\n", "w".repeat(250)))
        .collect();
    write(&w.join("wide/w.txt"), &wide);
    let out = f.exec.execute(
        "a3",
        &ToolArgs::SearchText(SearchTextArgs {
            query: "wide".into(),
            path: Some(w.join("wide").display().to_string()),
            case_sensitive: None,
            max_results: Some(100_000),
        }),
    );
    assert!(out.truncated);
    assert!(out.output.len() <= MAX_TOOL_OUTPUT_BYTES);
    assert!(out.output.contains("[truncated: output limit"));

    // Time budget.
    let exec = f.exec.clone().with_time_budget(Duration::ZERO);
    let out = search(&exec, &w, "hit", None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.truncated);
    assert!(out.output.contains("time budget reached"), "{}", out.output);

    // Errors.
    assert_error(
        &search(&f.exec, &f.state, "needle", None),
        OutcomeCode::NotPermitted,
    );
    assert_error(
        &search(&f.exec, &f.home.join(".ssh/id_ed25519"), "KEY", None),
        OutcomeCode::NotPermitted,
    );
    assert_error(
        &search(&f.exec, &w.join("nope"), "x", None),
        OutcomeCode::NotFound,
    );
    assert_error(
        &search(&f.exec, &w, "a\nb", None),
        OutcomeCode::InvalidArgument,
    );
    assert_error(
        &search(&f.exec, &f.root.join("work/../work"), "x", None),
        OutcomeCode::InvalidArgument,
    );
    let bin = w.join("b.bin");
    write(&bin, b"abc\0");
    // A binary single file is skipped, not an error.
    let out = search(&f.exec, &bin, "abc", None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.output.contains("1 binary"), "{}", out.output);
}

#[test]
fn literal_matcher_modes() {
    use grep_matcher::Matcher;
    let m = matcher::LiteralMatcher::new("a.b", true);
    assert_eq!(
        m.find_at(b"xxa.bxx", 0).unwrap().map(|m| m.start()),
        Some(2)
    );
    assert!(m.find_at(b"aXb", 0).unwrap().is_none());
    let m = matcher::LiteralMatcher::new("AbC", false);
    assert_eq!(m.find_at(b"zzabc", 0).unwrap().map(|m| m.start()), Some(2));
    assert_eq!(m.find_at(b"ab", 0).unwrap(), None);
    assert_eq!(
        m.find_at(b"xABCabc", 2).unwrap().map(|m| m.start()),
        Some(4)
    );
    let m = matcher::LiteralMatcher::new("Ä", false);
    let hit = m.find_at("x\nyä\nz".as_bytes(), 0).unwrap().unwrap();
    assert_eq!((hit.start(), hit.end()), (2, 5));
}
