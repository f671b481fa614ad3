//! FindFiles: sorted listings that skip `.git` and protected dirs, list symlinks unfollowed,
//! and stay within the output and time bounds.

use super::*;

#[test]
fn find_files_sorted_skips_git_and_lists_symlinks_unfollowed() {
    let f = fixture();
    let w = f.root.join("work");
    write(&w.join("b.txt"), "b");
    write(&w.join("a/x.rs"), "x");
    write(&w.join("a.txt"), "a");
    write(&w.join(".hidden"), "h");
    write(&w.join(".git/config"), "c");
    write(&w.join("sub/.GIT/HEAD"), "c");
    write(&f.root.join("outside/secret.txt"), "s");
    std::os::unix::fs::symlink(f.root.join("outside"), w.join("zlink")).unwrap();
    std::fs::hard_link(w.join("b.txt"), f.root.join("outside/b-hard.txt")).unwrap();
    let out = f.exec.execute(
        "a2",
        &ToolArgs::FindFiles(FindFilesArgs {
            path: None, // the working directory
            name_contains: None,
            max_depth: None,
            max_results: None,
        }),
    );
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    let d = w.display();
    let expected = [
        format!("{d}/.hidden"),
        format!("{d}/a/x.rs"),
        format!("{d}/a.txt"),
        format!("{d}/zlink -> (symlink)"),
        "[skipped files: 1 hard-linked]".to_string(),
    ];
    assert_eq!(
        out.output.lines().collect::<Vec<_>>(),
        expected,
        "{}",
        out.output
    );
    assert!(!out.truncated);
    assert_eq!(out.receipt.path.as_deref(), Some(w.to_str().unwrap()));

    // name_contains is a literal filter on the file name.
    let out = find(&f.exec, &w, Some(".rs"));
    assert_eq!(out.output, format!("{d}/a/x.rs"));
}

#[test]
fn find_files_skips_protected_and_bounds_results() {
    let f = fixture();
    // Listing the temp root must not reveal the protected home/.ssh or state dir contents.
    let out = find(&f.exec, &f.root, None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(!out.output.contains("id_ed25519"), "{}", out.output);
    assert!(!out.output.contains("gateway.db"), "{}", out.output);
    // Refused roots.
    assert_error(&find(&f.exec, &f.state, None), OutcomeCode::NotPermitted);
    assert_error(
        &find(&f.exec, &f.root.join("missing"), None),
        OutcomeCode::NotFound,
    );
    let file = f.root.join("work/file.txt");
    write(&file, "x");
    assert_error(&find(&f.exec, &file, None), OutcomeCode::NotADirectory);

    // max_results.
    let w = f.root.join("work/many");
    for i in 0..20 {
        write(&w.join(format!("f{i:02}")), "x");
    }
    let out = f.exec.execute(
        "a2",
        &ToolArgs::FindFiles(FindFilesArgs {
            path: Some(w.display().to_string()),
            name_contains: None,
            max_depth: Some(1),
            max_results: Some(5),
        }),
    );
    assert!(out.truncated);
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines.len(), 6, "{}", out.output);
    assert_eq!(lines[0], format!("{}/f00", w.display()));
    assert_eq!(lines[4], format!("{}/f04", w.display()));
    assert!(lines[5].starts_with("[truncated:"), "{}", lines[5]);
}

#[test]
fn find_files_output_bounded_to_64_kib() {
    let f = fixture();
    let w = f.root.join("work/wide");
    let long = "n".repeat(200);
    for i in 0..500 {
        write(&w.join(format!("{long}{i:04}")), "");
    }
    let out = find(&f.exec, &w, None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.truncated);
    assert!(out.output.len() <= MAX_TOOL_OUTPUT_BYTES);
    assert!(out.output.contains("[truncated: output limit"), "tail");
}

#[test]
fn find_files_time_budget() {
    let f = fixture();
    write(&f.root.join("work/a"), "");
    let exec = f.exec.clone().with_time_budget(Duration::ZERO);
    let out = find(&exec, &f.root.join("work"), None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.truncated);
    assert!(out.output.contains("time budget reached"), "{}", out.output);
}
