//! Read: line numbering, offsets and limits, the 64 KiB bound, and each refusal (binary,
//! symlinked components, `..`, `.git`, protected dirs, hard links, FIFOs, directories).

use super::*;

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
    let (s, t) = crate::executor::read::format_lines_for_test("a\nb", None, None);
    assert_eq!((s.as_str(), t), ("     1\ta\n     2\tb", false));
    let (s, t) = crate::executor::read::format_lines_for_test("", None, None);
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
    assert_error(&out, OutcomeCode::NotUtf8);
    assert!(out.output.contains("not valid UTF-8"), "{}", out.output);
    let bin = f.root.join("work/bin.dat");
    write(&bin, b"abc\0def");
    let out = read(&f.exec, &bin, None, None);
    assert_error(&out, OutcomeCode::NotUtf8);
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
    assert_error(&out, OutcomeCode::NotPermitted);
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
    assert_error(&out, OutcomeCode::InvalidArgument);
    let out = read(&f.exec, Path::new("work/a.txt"), None, None);
    assert_error(&out, OutcomeCode::InvalidArgument);
}

#[test]
fn read_refuses_git_any_case() {
    let f = fixture();
    for name in [".git", ".GIT", ".Git"] {
        let path = f.root.join("work/repo").join(name).join("config");
        write(&path, "[core]");
        let out = read(&f.exec, &path, None, None);
        assert_error(&out, OutcomeCode::NotPermitted);
        assert!(out.output.contains(".git"), "{}", out.output);
    }
}

#[test]
fn read_refuses_protected_home_and_state_dir() {
    let f = fixture();
    let out = read(&f.exec, &f.home.join(".ssh/id_ed25519"), None, None);
    assert_error(&out, OutcomeCode::NotPermitted);
    assert!(!out.output.contains("PRIVATE"));
    let out = read(&f.exec, &f.state.join("gateway.db"), None, None);
    assert_error(&out, OutcomeCode::NotPermitted);
}

#[test]
fn read_refuses_hard_link() {
    let f = fixture();
    let a = f.root.join("work/a.txt");
    write(&a, "x");
    std::fs::hard_link(&a, f.root.join("work/b.txt")).unwrap();
    let out = read(&f.exec, &a, None, None);
    assert_error(&out, OutcomeCode::NotPermitted);
    assert!(out.output.contains("hard link"), "{}", out.output);
}

#[test]
fn read_refuses_fifo_quickly() {
    let f = fixture();
    let fifo = f.root.join("work/pipe");
    mkfifo(&fifo);
    let start = Instant::now();
    let out = read(&f.exec, &fifo, None, None);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_error(&out, OutcomeCode::NotAFile);
}

#[test]
fn read_refuses_directory_and_missing() {
    let f = fixture();
    let out = read(&f.exec, &f.root.join("work"), None, None);
    assert_error(&out, OutcomeCode::NotAFile);
    let out = read(&f.exec, &f.root.join("work/nope.txt"), None, None);
    assert_error(&out, OutcomeCode::NotFound);
}
