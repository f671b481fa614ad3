//! Bounds under load and races: time budgets on huge trees, deterministic parallel search, depth
//! and truncation, a symlink swapped in mid-walk, and hard links past the output limit.

use super::*;

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
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).unwrap();
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
                    let code = out.error_code;
                    assert!(
                        matches!(
                            code,
                            Some(OutcomeCode::NotPermitted | OutcomeCode::NotADirectory)
                        ),
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
