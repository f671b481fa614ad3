//! Unit tests of the executor: Read, FindFiles and SearchText against real temp dirs (symlinks,
//! hard links, FIFOs, `.git`, protected dirs, binary files), each asserting the exact error code.

use super::*;
use common::tools::{FindFilesArgs, ReadArgs, SearchTextArgs};
use std::time::{Duration, Instant};

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    exec: Executor,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let state = root.join("state");
    let work = root.join("work");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY needle").unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("gateway.db"), "needle").unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![]);
    Fixture {
        _tmp: tmp,
        exec: Executor::new(policy, work),
        root,
        home,
        state,
    }
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn read(exec: &Executor, path: &Path, offset: Option<u64>, limit: Option<u64>) -> ActionOutcome {
    exec.execute(
        "a1",
        &ToolArgs::Read(ReadArgs {
            file_path: path.display().to_string(),
            offset,
            limit,
        }),
    )
}

fn find(exec: &Executor, path: &Path, name_contains: Option<&str>) -> ActionOutcome {
    exec.execute(
        "a2",
        &ToolArgs::FindFiles(FindFilesArgs {
            path: Some(path.display().to_string()),
            name_contains: name_contains.map(str::to_string),
            max_depth: None,
            max_results: None,
        }),
    )
}

fn search(
    exec: &Executor,
    path: &Path,
    query: &str,
    case_sensitive: Option<bool>,
) -> ActionOutcome {
    exec.execute(
        "a3",
        &ToolArgs::SearchText(SearchTextArgs {
            query: query.to_string(),
            path: Some(path.display().to_string()),
            case_sensitive,
            max_results: None,
        }),
    )
}

fn assert_error(outcome: &ActionOutcome, code: &str) {
    assert_eq!(outcome.status, ToolStatus::Error, "{outcome:?}");
    assert_eq!(outcome.error_code.as_deref(), Some(code), "{outcome:?}");
    assert!(!outcome.output.is_empty());
}

// ---------- Read ----------

#[test]
fn read_numbers_lines_and_hashes_whole_file() {
    let f = fixture();
    let path = f.root.join("work/a.txt");
    write(&path, "one\ntwo\nthree\n");
    let out = read(&f.exec, &path, None, None);
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    assert_eq!(out.output, "     1\tone\n     2\ttwo\n     3\tthree");
    assert!(!out.truncated);
    assert_eq!(out.receipt.action_id, "a1");
    assert_eq!(out.receipt.path.as_deref(), Some(path.to_str().unwrap()));
    assert_eq!(
        out.receipt.sha256.as_deref(),
        Some(common::hash::sha256_hex(b"one\ntwo\nthree\n").as_str())
    );
    assert_eq!(out.error_code, None);
}

#[test]
fn read_offset_and_limit() {
    let f = fixture();
    let path = f.root.join("work/lines.txt");
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    write(&path, &text);
    let out = read(&f.exec, &path, Some(3), Some(2));
    assert_eq!(out.status, ToolStatus::Ok);
    assert_eq!(
        out.output,
        "     3\tline 3\n     4\tline 4\n[truncated: showing lines 3-4 of 10]"
    );
    assert!(out.truncated);
    // Up to the end: not truncated.
    let out = read(&f.exec, &path, Some(9), None);
    assert_eq!(out.output, "     9\tline 9\n    10\tline 10");
    assert!(!out.truncated);
    // Past the end.
    let out = read(&f.exec, &path, Some(11), None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.output.contains("past the end"), "{}", out.output);
    // The hash is of the whole file, whatever slice is shown.
    assert_eq!(
        out.receipt.sha256.as_deref(),
        Some(common::hash::sha256_hex(text.as_bytes()).as_str())
    );
    // No trailing newline on the last line; empty file.
    let (s, t) = read::format_lines_for_test("a\nb", None, None);
    assert_eq!((s.as_str(), t), ("     1\ta\n     2\tb", false));
    let (s, t) = read::format_lines_for_test("", None, None);
    assert_eq!((s.as_str(), t), ("[empty file]", false));
}

#[test]
fn read_truncates_at_64_kib() {
    let f = fixture();
    let path = f.root.join("work/big.txt");
    let line = "x".repeat(99);
    let text: String = (0..2000).map(|_| format!("{line}\n")).collect(); // ~200 KB
    write(&path, &text);
    let out = read(&f.exec, &path, None, None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.truncated);
    assert!(out.output.len() <= MAX_TOOL_OUTPUT_BYTES);
    let last = out.output.lines().last().unwrap();
    assert!(last.starts_with("[truncated: showing lines 1-"), "{last}");
    assert!(last.ends_with(" of 2000]"), "{last}");

    // One line longer than the limit: its beginning is shown.
    let path = f.root.join("work/long-line.txt");
    write(&path, "y".repeat(200_000));
    let out = read(&f.exec, &path, None, None);
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.truncated);
    assert!(out.output.len() <= MAX_TOOL_OUTPUT_BYTES);
    assert!(
        out.output.contains("longer than the output limit"),
        "{}",
        &out.output[out.output.len() - 200..]
    );
}

#[test]
fn read_refuses_invalid_utf8_and_binary() {
    let f = fixture();
    let bad = f.root.join("work/latin1.txt");
    write(&bad, b"caf\xe9\n");
    let out = read(&f.exec, &bad, None, None);
    assert_error(&out, "not_utf8");
    assert!(out.output.contains("not valid UTF-8"), "{}", out.output);
    let bin = f.root.join("work/bin.dat");
    write(&bin, b"abc\0def");
    let out = read(&f.exec, &bin, None, None);
    assert_error(&out, "not_utf8");
    assert!(out.output.contains("binary"), "{}", out.output);
}

#[test]
fn read_refuses_symlink_in_middle_naming_component() {
    let f = fixture();
    let real = f.root.join("work/real");
    write(&real.join("f.txt"), "x");
    let link = f.root.join("work/link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = read(&f.exec, &link.join("f.txt"), None, None);
    assert_error(&out, "not_permitted");
    assert!(
        out.output
            .contains(&format!("`{}` is a symbolic link", link.display())),
        "{}",
        out.output
    );
    assert_eq!(out.receipt.action_id, "a1");
}

#[test]
fn read_refuses_dotdot_and_relative() {
    let f = fixture();
    let path = f.root.join("work/a.txt");
    write(&path, "x");
    let out = read(&f.exec, &f.root.join("work/sub/../a.txt"), None, None);
    assert_error(&out, "invalid_argument");
    let out = read(&f.exec, Path::new("work/a.txt"), None, None);
    assert_error(&out, "invalid_argument");
}

#[test]
fn read_refuses_git_any_case() {
    let f = fixture();
    for name in [".git", ".GIT", ".Git"] {
        let path = f.root.join("work/repo").join(name).join("config");
        write(&path, "[core]");
        let out = read(&f.exec, &path, None, None);
        assert_error(&out, "not_permitted");
        assert!(out.output.contains(".git"), "{}", out.output);
    }
}

#[test]
fn read_refuses_protected_home_and_state_dir() {
    let f = fixture();
    let out = read(&f.exec, &f.home.join(".ssh/id_ed25519"), None, None);
    assert_error(&out, "not_permitted");
    assert!(!out.output.contains("PRIVATE"));
    let out = read(&f.exec, &f.state.join("gateway.db"), None, None);
    assert_error(&out, "not_permitted");
}

#[test]
fn read_refuses_hard_link() {
    let f = fixture();
    let a = f.root.join("work/a.txt");
    write(&a, "x");
    std::fs::hard_link(&a, f.root.join("work/b.txt")).unwrap();
    let out = read(&f.exec, &a, None, None);
    assert_error(&out, "not_permitted");
    assert!(out.output.contains("hard link"), "{}", out.output);
}

#[test]
fn read_refuses_fifo_quickly() {
    let f = fixture();
    let fifo = f.root.join("work/pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let start = Instant::now();
    let out = read(&f.exec, &fifo, None, None);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_error(&out, "not_a_file");
}

#[test]
fn read_refuses_directory_and_missing() {
    let f = fixture();
    let out = read(&f.exec, &f.root.join("work"), None, None);
    assert_error(&out, "not_a_file");
    let out = read(&f.exec, &f.root.join("work/nope.txt"), None, None);
    assert_error(&out, "not_found");
}

// ---------- FindFiles ----------

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
    assert_error(&find(&f.exec, &f.state, None), "not_permitted");
    assert_error(&find(&f.exec, &f.root.join("missing"), None), "not_found");
    let file = f.root.join("work/file.txt");
    write(&file, "x");
    assert_error(&find(&f.exec, &file, None), "not_a_directory");

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

// ---------- SearchText ----------

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
    assert_error(&search(&f.exec, &f.state, "needle", None), "not_permitted");
    assert_error(
        &search(&f.exec, &f.home.join(".ssh/id_ed25519"), "KEY", None),
        "not_permitted",
    );
    assert_error(&search(&f.exec, &w.join("nope"), "x", None), "not_found");
    assert_error(&search(&f.exec, &w, "a\nb", None), "invalid_argument");
    assert_error(
        &search(&f.exec, &f.root.join("work/../work"), "x", None),
        "invalid_argument",
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

// ---------- Adversarial cases (issue 3) ----------

fn find_with(
    exec: &Executor,
    path: &Path,
    max_depth: Option<u32>,
    max_results: Option<u32>,
) -> ActionOutcome {
    exec.execute(
        "a2",
        &ToolArgs::FindFiles(FindFilesArgs {
            path: Some(path.display().to_string()),
            name_contains: None,
            max_depth,
            max_results,
        }),
    )
}

fn search_max(exec: &Executor, path: &Path, query: &str, max_results: u32) -> ActionOutcome {
    exec.execute(
        "a3",
        &ToolArgs::SearchText(SearchTextArgs {
            query: query.to_string(),
            path: Some(path.display().to_string()),
            case_sensitive: None,
            max_results: Some(max_results),
        }),
    )
}

#[test]
fn every_protected_home_entry_refused_and_never_searched() {
    let f = fixture();
    let entries = [
        ".ssh/config",
        ".aws/credentials",
        ".gnupg/private-keys-v1.d/k.key",
        ".config/gcloud/credentials.db",
        ".kube/config",
        ".docker/config.json",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        "Library/Keychains/login.keychain-db",
    ];
    for rel in entries {
        let path = f.home.join(rel);
        write(&path, "SECRET needle\n");
        let out = read(&f.exec, &path, None, None);
        assert_error(&out, "not_permitted");
        assert!(
            out.output.contains("protected location"),
            "{rel}: {}",
            out.output
        );
        assert!(!out.output.contains("SECRET"));
        assert_error(&search(&f.exec, &path, "needle", None), "not_permitted");
    }
    // Searching and listing the whole fake home and the temp root: nothing protected appears.
    for root in [&f.home, &f.root] {
        let out = search(&f.exec, root, "needle", None);
        assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
        assert!(!out.output.contains("SECRET"), "{}", out.output);
        let out = find_with(&f.exec, root, Some(64), None);
        assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
        for rel in entries {
            let leaf = Path::new(rel).file_name().unwrap().to_str().unwrap();
            assert!(!out.output.contains(leaf), "{leaf} listed: {}", out.output);
        }
    }
}

#[test]
fn read_refuses_dot_git_file_and_search_skips_it() {
    let f = fixture();
    let wt = f.root.join("work/wt");
    write(&wt.join(".git"), "gitdir: /x/.git/worktrees/wt\nneedle\n");
    write(&wt.join("main.rs"), "needle\n");
    let out = read(&f.exec, &wt.join(".git"), None, None);
    assert_error(&out, "not_permitted");
    assert!(out.output.contains("`.git`"), "{}", out.output);
    let out = search(&f.exec, &wt, "needle", None);
    assert!(
        out.output.starts_with("1 matching line in 1 file"),
        "{}",
        out.output
    );
    let out = find(&f.exec, &wt, None);
    assert_eq!(out.output, format!("{}/main.rs", wt.display()));
}

#[test]
fn state_dir_reached_through_other_paths_refused() {
    let f = fixture();
    let w = f.root.join("work");
    // Hard link to a file inside the state dir.
    std::fs::hard_link(f.state.join("gateway.db"), w.join("alias.db")).unwrap();
    let out = read(&f.exec, &w.join("alias.db"), None, None);
    assert_error(&out, "not_permitted");
    assert!(out.output.contains("2 hard links"), "{}", out.output);
    // Symlink to the state dir.
    std::os::unix::fs::symlink(&f.state, w.join("state-link")).unwrap();
    let out = read(&f.exec, &w.join("state-link/gateway.db"), None, None);
    assert_error(&out, "not_permitted");
    assert!(out.output.contains("is a symbolic link"), "{}", out.output);
    assert_error(&find(&f.exec, &w.join("state-link"), None), "not_permitted");
    assert_error(
        &search(&f.exec, &w.join("state-link"), "needle", None),
        "not_permitted",
    );
    // Searching the directory holding both aliases finds nothing of the state dir.
    let out = search(&f.exec, &w, "needle", None);
    assert!(out.output.starts_with("No matches"), "{}", out.output);
    assert!(
        out.output.contains("1 symlinked, 1 hard-linked"),
        "{}",
        out.output
    );
}

#[cfg(target_os = "linux")]
#[test]
fn proc_magic_links_refused() {
    let f = fixture();
    let pid = std::process::id();
    let db = f.state.join("gateway.db");
    let db_rel = db.strip_prefix("/").unwrap().display().to_string();
    let plain = f.root.join("work/plain.txt");
    write(&plain, "x");
    let held = std::fs::File::open(&plain).unwrap();
    use std::os::fd::AsRawFd;
    let n = held.as_raw_fd();
    for path in [
        format!("/proc/self/root/{db_rel}"),
        format!("/proc/{pid}/root/{db_rel}"),
        format!("/proc/{pid}/cwd/{db_rel}"),
        "/proc/self/cwd/Cargo.toml".to_string(),
        format!("/proc/self/fd/{n}"),
        format!("/proc/{pid}/fd/{n}"),
        "/proc/self/exe".to_string(),
        format!("/proc/{pid}/exe"),
        format!("/dev/fd/{n}"),
        "/dev/stdin".to_string(),
    ] {
        let out = read(&f.exec, Path::new(&path), None, None);
        assert_error(&out, "not_permitted");
        // A process's own directory in /proc is refused whole, before its links are reached.
        assert!(
            out.output.contains("symbolic link")
                || (path.starts_with("/proc/") && out.output.contains("protected")),
            "{path}: {}",
            out.output
        );
    }
    for path in [
        format!("/proc/{pid}/root"),
        "/proc/self/root".to_string(),
        format!("/proc/{pid}/cwd"),
    ] {
        assert_error(&find(&f.exec, Path::new(&path), None), "not_permitted");
        assert_error(
            &search(&f.exec, Path::new(&path), "needle", None),
            "not_permitted",
        );
    }
    let out = read(
        &f.exec,
        Path::new(&format!("/proc/{pid}/environ")),
        None,
        None,
    );
    assert_error(&out, "not_permitted");
    // Our own /proc entry is refused whole: its links, maps and status name internal paths.
    assert_error(
        &find_with(
            &f.exec,
            Path::new(&format!("/proc/{pid}")),
            Some(1),
            Some(10_000),
        ),
        "not_permitted",
    );
    drop(held);
}

#[test]
fn read_huge_sparse_file_fails_fast() {
    let f = fixture();
    let path = f.root.join("work/huge.txt");
    write(&path, "");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(300 * 1024 * 1024)
        .unwrap();
    let start = Instant::now();
    let out = read(&f.exec, &path, None, None);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_error(&out, "file_too_large");
    assert!(out.output.contains("314572800 bytes"), "{}", out.output);
    assert!(out.output.contains("256 MiB"), "{}", out.output);
}

#[test]
fn fifo_in_tree_never_hangs_searches() {
    let f = fixture();
    let w = f.root.join("work");
    write(&w.join("a.txt"), "needle\n");
    nix::unistd::mkfifo(
        &w.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let start = Instant::now();
    let out = search(&f.exec, &w, "needle", None);
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    assert!(out.output.starts_with("1 matching line"), "{}", out.output);
    let out = find(&f.exec, &w, None);
    assert!(
        out.output.contains(&format!("{}/pipe (fifo)", w.display())),
        "{}",
        out.output
    );
    assert_error(
        &search(&f.exec, &w.join("pipe"), "needle", None),
        "not_a_file",
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[cfg(target_os = "linux")]
#[test]
fn device_refused_with_kind() {
    let f = fixture();
    let out = read(&f.exec, Path::new("/dev/null"), None, None);
    assert_error(&out, "not_a_file");
    assert!(out.output.contains("character device"), "{}", out.output);
}

#[test]
fn invalid_utf8_file_names_listed_and_searched() {
    use std::os::unix::ffi::OsStrExt;
    let f = fixture();
    let w = f.root.join("work");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    write(&w.join(name), "needle\n");
    // Shown escaped (never lossily: two different invalid names must not look alike).
    let out = find(&f.exec, &w, None);
    assert_eq!(out.output, format!("\"{}/caf\\xe9.txt\"", w.display()));
    let out = search(&f.exec, &w, "needle", None);
    assert!(
        out.output.contains("caf\\xe9.txt\":1: needle"),
        "{}",
        out.output
    );
    // Invalid UTF-8 content: clear error from Read, lossy lines from SearchText.
    write(&w.join("latin1.txt"), b"needle caf\xe9\n");
    assert_error(
        &read(&f.exec, &w.join("latin1.txt"), None, None),
        "not_utf8",
    );
    let out = search(&f.exec, &w.join("latin1.txt"), "needle", None);
    assert!(
        out.output.contains(":1: needle caf\u{fffd}"),
        "{}",
        out.output
    );
}

#[test]
fn names_with_newlines_cannot_forge_listing_lines() {
    // Issue 11, finding 9: a directory named `evil\n` holding `etc/x` would print as the two
    // lines `<w>/evil` and `/etc/x`; escaped it is one quoted line, in FindFiles and SearchText.
    let f = fixture();
    let w = f.root.join("work");
    write(&w.join("evil\n/etc/x"), "needle\n");
    write(&w.join("tab\there"), "needle\n");
    write(&w.join("plain.txt"), "needle\n");
    let out = find(&f.exec, &w, None);
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(
        lines,
        [
            format!("\"{}/evil\\n/etc/x\"", w.display()),
            format!("{}/plain.txt", w.display()),
            format!("\"{}/tab\\there\"", w.display()),
        ],
        "{}",
        out.output
    );
    let out = search(&f.exec, &w, "needle", None);
    assert!(
        !out.output.lines().any(|l| l.starts_with("/etc/x")),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains(&format!("\"{}/evil\\n/etc/x\":1: needle", w.display())),
        "{}",
        out.output
    );
}

#[test]
fn huge_tree_time_budget_truncates_with_reason() {
    let f = fixture();
    let w = f.root.join("work/tree");
    for d in 0..40 {
        for i in 0..100 {
            write(&w.join(format!("d{d:02}/f{i:03}.txt")), "needle\n");
        }
    }
    let exec = f.exec.clone().with_time_budget(Duration::from_millis(2));
    let start = Instant::now();
    let out = search_max(&exec, &w, "needle", 100_000);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.truncated);
    assert!(
        out.output.contains("[truncated: time budget reached after"),
        "{}",
        &out.output[out.output.len().saturating_sub(300)..]
    );
    let start = Instant::now();
    let out = find_with(&exec, &w, Some(64), Some(100_000));
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(out.truncated);
    assert!(
        out.output.contains("time budget reached"),
        "{}",
        &out.output[out.output.len().saturating_sub(300)..]
    );
    // With the normal budget the same tree is complete.
    let out = search_max(&f.exec, &w, "needle", 100_000);
    assert!(
        out.output.starts_with("4000 matching lines in 4000 files"),
        "{}",
        &out.output[..100]
    );
    assert!(out.truncated, "64 KiB output limit"); // 4000 lines do not fit
}

#[test]
fn parallel_search_is_deterministic_and_sorted() {
    let f = fixture();
    let w = f.root.join("work/many");
    for d in 0..20 {
        for i in 0..30 {
            let text: String = (0..(i % 4)).map(|k| format!("hit {k}\n")).collect();
            write(&w.join(format!("d{d:02}/f{i:02}.txt")), text);
        }
    }
    let first = search_max(&f.exec, &w, "hit", 50);
    assert!(first.truncated);
    assert!(
        first.output.contains("max_results 50 reached"),
        "{}",
        first.output
    );
    for _ in 0..20 {
        assert_eq!(search_max(&f.exec, &w, "hit", 50).output, first.output);
    }
    // The 50 shown are the first 50 in path order.
    let full = search_max(&f.exec, &w, "hit", 100_000);
    assert!(!full.truncated);
    let full_lines: Vec<&str> = full.output.lines().skip(1).collect();
    let shown: Vec<&str> = first.output.lines().skip(1).take(50).collect();
    assert_eq!(shown, &full_lines[..50]);
    let mut sorted = full_lines.clone();
    sorted.sort_by_key(|l| {
        let (path, rest) = l.split_once(':').unwrap();
        (
            path.to_string(),
            rest.split_once(':').unwrap().0.parse::<u64>().unwrap(),
        )
    });
    assert_eq!(sorted, full_lines);
}

#[test]
fn find_files_depth_and_truncation_consistent() {
    let f = fixture();
    let w = f.root.join("work/deep");
    write(&w.join("a/b/c/d.txt"), "x");
    write(&w.join("top.txt"), "x");
    let out = find_with(&f.exec, &w, Some(1), None);
    assert_eq!(out.output, format!("{}/top.txt", w.display()));
    let out = find_with(&f.exec, &w, Some(4), None);
    assert_eq!(
        out.output,
        format!("{0}/a/b/c/d.txt\n{0}/top.txt", w.display())
    );
    assert!(!out.truncated);
}

/// Exchange two names atomically (Linux `renameat2(RENAME_EXCHANGE)`).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        a,
        nix::fcntl::AT_FDCWD,
        b,
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
    .unwrap();
}

/// RACE: a thread flips `work/comp` between a real directory and a symlink to the protected
/// `~/.ssh` (holding a file of the same name) thousands of times; Read, SearchText and FindFiles
/// must never return the protected content or names.
#[cfg(target_os = "linux")]
#[test]
fn race_symlink_swapped_in_never_leaks_protected() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fixture();
    let ssh = f.home.join(".ssh");
    write(&ssh.join("f.txt"), "SECRET needle\n");
    write(&ssh.join("secret-name.txt"), "SECRET needle\n");
    let w = f.root.join("work");
    write(&w.join("comp/f.txt"), "public needle\n");
    std::os::unix::fs::symlink(&ssh, w.join("other")).unwrap();
    let target = w.join("comp/f.txt");
    let stop = AtomicBool::new(false);
    let (mut ok, mut refused) = (0u32, 0u32);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                exchange(&w.join("comp"), &w.join("other"));
            }
        });
        for i in 0..5_000 {
            let out = read(&f.exec, &target, None, None);
            assert!(!out.output.contains("SECRET"), "Read leaked: {out:?}");
            match out.status {
                ToolStatus::Ok => {
                    assert_eq!(out.output, "     1\tpublic needle");
                    ok += 1;
                }
                _ => {
                    let code = out.error_code.as_deref();
                    assert!(
                        matches!(code, Some("not_permitted" | "not_a_directory")),
                        "{out:?}"
                    );
                    refused += 1;
                }
            }
            if i % 10 == 0 {
                let out = search(&f.exec, &w, "needle", None);
                assert!(
                    !out.output.contains("SECRET"),
                    "SearchText leaked: {}",
                    out.output
                );
                let out = find(&f.exec, &w, None);
                assert!(
                    !out.output.contains("secret-name"),
                    "FindFiles leaked: {}",
                    out.output
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        ok > 0 && refused > 0,
        "race not exercised: ok {ok}, refused {refused}"
    );
}

/// Once the 64 KiB listing is full, files are counted without the hard-link check (they are
/// never shown): a hard link before the limit is skipped, one after it is counted and said so.
#[test]
fn find_files_counts_files_after_the_output_limit_without_checking_them() {
    let f = fixture();
    let w = f.root.join("work/big");
    // 3000 names of ~60 bytes: the 64 KiB limit is reached after about a third.
    for i in 0..3000 {
        write(&w.join(format!("{}-{i:04}.txt", "x".repeat(40))), "x");
    }
    std::fs::hard_link(
        w.join(format!("{}-0000.txt", "x".repeat(40))),
        w.join("a-first-hard.txt"),
    )
    .unwrap();
    std::fs::hard_link(
        w.join(format!("{}-0001.txt", "x".repeat(40))),
        w.join("z-last-hard.txt"),
    )
    .unwrap();
    let out = find_with(&f.exec, &w, Some(8), Some(100_000));
    assert!(out.truncated);
    let shown = out.output.lines().filter(|l| l.ends_with(".txt")).count();
    assert!(shown > 500 && shown < 3000, "{shown}");
    assert!(
        !out.output.contains("hard.txt"),
        "a hard link is never shown"
    );
    // 3002 files. Before the limit, the first hard link and the two files it and the last one
    // share an inode with are skipped; the last hard link, after it, is counted: 2999 (2998
    // if it had been checked). The entry that did not fit was checked, not shown.
    let unchecked = 2999 - shown - 1;
    let note = format!(
        "[truncated: output limit (64 KiB) reached; showing {shown} of 2999 entries found, \
         {unchecked} of them files counted after the limit without the hard-link check]"
    );
    assert!(
        out.output.contains(&note),
        "{}",
        &out.output[out.output.len() - 400..]
    );
    assert!(
        out.output.ends_with("[skipped files: 3 hard-linked]"),
        "{}",
        &out.output[out.output.len() - 400..]
    );
}
