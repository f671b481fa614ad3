//! The walk: sorted, bounded and never following links; per-file rules for children; read-ahead
//! yielding the same as a plain walk, stopping when told, dropping file stats, and never following
//! a symlink swapped in mid-walk.

use super::*;

#[test]
fn walk_is_sorted_bounded_and_never_follows() {
    let f = fixture();
    let w = f.root.join("w");
    for rel in [
        "b/z.txt",
        "a/y.txt",
        "a.txt",
        "B.txt",
        ".git/config",
        "c/.Git/HEAD",
        "d/e/f/g.txt",
    ] {
        let p = w.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x").unwrap();
    }
    std::os::unix::fs::symlink(&f.home, w.join("homelink")).unwrap();
    std::os::unix::fs::symlink(&f.state, w.join("statelink")).unwrap();
    let mut seen = Vec::new();
    let stats = f
        .policy
        .walk(&w, WalkOptions::new(64), |e| {
            seen.push((
                e.path.strip_prefix(&w).unwrap().display().to_string(),
                e.kind,
                e.depth,
            ));
            WalkControl::Continue
        })
        .unwrap();
    assert_eq!(stats, WalkStats::default());
    let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "B.txt",
            "a",
            "a/y.txt",
            "a.txt",
            "b",
            "b/z.txt",
            "c",
            "d",
            "d/e",
            "d/e/f",
            "d/e/f/g.txt",
            "homelink",
            "statelink"
        ]
    );
    assert!(
        seen.iter()
            .any(|s| s.0 == "homelink" && s.1 == EntryKind::Symlink)
    );
    // Depth bound: 1 = the root's own entries.
    let mut shallow = Vec::new();
    f.policy
        .walk(&w, WalkOptions::new(1), |e| {
            shallow.push(e.depth);
            WalkControl::Continue
        })
        .unwrap();
    assert!(shallow.iter().all(|d| *d == 1), "{shallow:?}");
    // Walk roots are refused like any other path.
    assert_eq!(
        f.policy
            .walk(&w.join("homelink"), WalkOptions::new(8), |_| {
                WalkControl::Continue
            })
            .unwrap_err()
            .code(),
        OutcomeCode::NotPermitted
    );
    assert_eq!(
        f.policy
            .walk(&f.state, WalkOptions::new(8), |_| WalkControl::Continue)
            .unwrap_err()
            .code(),
        OutcomeCode::NotPermitted
    );
    // Walking the temp root never enters the home's credential dir or the state dir.
    let mut all = Vec::new();
    f.policy
        .walk(&f.root, WalkOptions::new(64), |e| {
            all.push(e.path.to_path_buf());
            WalkControl::Continue
        })
        .unwrap();
    assert!(!all.iter().any(|p| p.starts_with(&f.state)), "{all:?}");
    assert!(
        !all.iter().any(|p| p.starts_with(f.home.join(".ssh"))),
        "{all:?}"
    );
}

#[test]
fn walk_child_file_rules() {
    let f = fixture();
    let w = f.root.join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("one.txt"), "1").unwrap();
    std::fs::write(w.join("two.txt"), "2").unwrap();
    std::fs::hard_link(w.join("two.txt"), f.root.join("two-again.txt")).unwrap();
    std::fs::hard_link(f.state.join("gateway.db"), w.join("db-alias")).unwrap();
    let mut results = Vec::new();
    f.policy
        .walk(&w, WalkOptions::new(8), |e| {
            let opened = f
                .policy
                .open_child_file(e.parent, e.name, e.path)
                .map(|_| ());
            let checked = f.policy.check_child_file(e.parent, e.name, e.path);
            assert_eq!(opened, checked);
            results.push((e.name.to_os_string(), checked.map_err(|r| r.code())));
            WalkControl::Continue
        })
        .unwrap();
    assert_eq!(
        results,
        vec![
            (OsString::from("db-alias"), Err(OutcomeCode::NotPermitted)),
            (OsString::from("one.txt"), Ok(())),
            (OsString::from("two.txt"), Err(OutcomeCode::NotPermitted)),
        ]
    );
}
/// A tree wider and deeper than the read-ahead window, with every kind of entry the walk treats
/// specially.
fn busy_tree(f: &Fixture) -> PathBuf {
    let w = f.root.join("busy");
    for top in 0..12 {
        for sub in 0..9 {
            let dir = w.join(format!("t{top:02}/s{sub}/deep/er"));
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..(top + sub) % 5 {
                std::fs::write(dir.join(format!("f{i}.txt")), "x").unwrap();
            }
            std::fs::write(w.join(format!("t{top:02}/s{sub}/n.rs")), "n").unwrap();
        }
        std::fs::create_dir_all(w.join(format!("t{top:02}/.git/objects"))).unwrap();
        std::fs::write(w.join(format!("t{top:02}/.git/objects/o")), "o").unwrap();
    }
    std::fs::write(w.join("t00/one.txt"), "1").unwrap();
    std::fs::hard_link(w.join("t00/one.txt"), w.join("t01/linked.txt")).unwrap();
    std::fs::hard_link(f.state.join("gateway.db"), w.join("t02/db-alias")).unwrap();
    std::os::unix::fs::symlink(&f.home, w.join("t03/homelink")).unwrap();
    std::os::unix::fs::symlink(w.join("t00"), w.join("t04/dirlink")).unwrap();
    rustix::fs::mkfifoat(rustix::fs::CWD, w.join("t05/fifo"), Mode::RUSR | Mode::WUSR).unwrap();
    w
}

type Seen = Vec<(PathBuf, EntryKind, usize, Result<(), OutcomeCode>)>;

fn walk_all(f: &Fixture, root: &Path, options: WalkOptions) -> (Seen, WalkStats) {
    let mut seen = Vec::new();
    let stats = f
        .policy
        .walk(root, options, |e| {
            let check = if e.kind == EntryKind::File {
                let walked = f.policy.check_walked_file(&e);
                // The `lstat` taken while listing says what a fresh one says.
                assert_eq!(walked, f.policy.check_child_file(e.parent, e.name, e.path));
                walked.map_err(|r| r.code())
            } else {
                Ok(())
            };
            assert_eq!(e.path.file_name(), Some(e.name));
            seen.push((e.path.to_path_buf(), e.kind, e.depth, check));
            WalkControl::Continue
        })
        .unwrap();
    (seen, stats)
}

#[test]
fn read_ahead_walk_yields_the_same_as_a_plain_walk() {
    let f = fixture();
    let w = busy_tree(&f);
    for max_depth in [1, 2, 4, 64] {
        let plain = WalkOptions {
            max_depth,
            stat_files: false,
            threads: 0,
        };
        let (expected, expected_stats) = walk_all(&f, &w, plain);
        let mut sorted = expected.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(sorted, expected, "path order");
        if max_depth == 64 {
            // Directories, `n.rs` files, the `f*.txt` files and the six extras.
            let files: usize = (0..12).flat_map(|t| (0..9).map(move |s| (t + s) % 5)).sum();
            assert_eq!(expected.len(), (12 + 12 * 9 * 3) + 12 * 9 + files + 6);
            assert!(
                !expected
                    .iter()
                    .any(|e| e.0.to_string_lossy().contains(".git"))
            );
            let code = |name: &str| expected.iter().find(|e| e.0.ends_with(name)).unwrap().3;
            assert_eq!(code("t00/one.txt"), Err(OutcomeCode::NotPermitted));
            assert_eq!(code("t01/linked.txt"), Err(OutcomeCode::NotPermitted));
            assert_eq!(code("t02/db-alias"), Err(OutcomeCode::NotPermitted));
            assert_eq!(code("t00/s0/n.rs"), Ok(()));
        }
        for threads in [1, 3, 8] {
            for stat_files in [false, true] {
                let options = WalkOptions {
                    max_depth,
                    stat_files,
                    threads,
                };
                for _ in 0..3 {
                    assert_eq!(
                        walk_all(&f, &w, options),
                        (expected.clone(), expected_stats)
                    );
                }
            }
        }
    }
}

#[test]
fn read_ahead_walk_stops_when_told_and_survives_a_panicking_visitor() {
    let f = fixture();
    let w = busy_tree(&f);
    let options = WalkOptions {
        max_depth: 64,
        stat_files: true,
        threads: 4,
    };
    let (all, _) = walk_all(&f, &w, options);
    for stop_after in [1, 7, 100, all.len() - 1] {
        let mut seen = Vec::new();
        f.policy
            .walk(&w, options, |e| {
                seen.push(e.path.to_path_buf());
                if seen.len() == stop_after {
                    WalkControl::Stop
                } else {
                    WalkControl::Continue
                }
            })
            .unwrap();
        let prefix: Vec<PathBuf> = all[..stop_after].iter().map(|e| e.0.clone()).collect();
        assert_eq!(seen, prefix);
    }
    // A visitor that panics must not leave the walk waiting for its read-ahead threads.
    let (tx, rx) = std::sync::mpsc::channel();
    let policy = f.policy.clone();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut n = 0;
            policy.walk(&w, options, |_| {
                n += 1;
                assert!(n < 50, "visitor gives up");
                WalkControl::Continue
            })
        }));
        tx.send(result.is_err()).unwrap();
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
}

/// `StopFileStats` keeps the walk going with the same entries in the same order; directories
/// listed after it bring no stats for their files (those listed before may keep theirs).
#[test]
fn read_ahead_walk_drops_file_stats_when_told() {
    let f = fixture();
    let w = busy_tree(&f);
    for threads in [0, 4] {
        let options = WalkOptions {
            max_depth: 64,
            stat_files: true,
            threads,
        };
        let (all, _) = walk_all(&f, &w, options);
        let mut seen = Vec::new();
        let mut stats_after = 0;
        let mut files_after = 0;
        f.policy
            .walk(&w, options, |e| {
                seen.push(e.path.to_path_buf());
                if seen.len() > all.len() / 2 && e.kind == EntryKind::File {
                    files_after += 1;
                    stats_after += usize::from(e.stat.is_some());
                }
                if seen.len() == 3 {
                    WalkControl::StopFileStats
                } else {
                    WalkControl::Continue
                }
            })
            .unwrap();
        let paths: Vec<PathBuf> = all.iter().map(|e| e.0.clone()).collect();
        assert_eq!(seen, paths, "threads {threads}");
        assert!(files_after > 0);
        // Read-ahead is bounded (64 listings), so most of the second half was listed after.
        assert!(
            stats_after < files_after,
            "threads {threads}: {stats_after}/{files_after}"
        );
        if threads == 0 {
            assert_eq!(stats_after, 0);
        }
    }
}

/// RACE: a thread flips `w/comp` between a real directory and a symlink to a directory outside;
/// a walk with read-ahead threads never yields anything from behind the symlink.
#[cfg(target_os = "linux")]
#[test]
fn race_read_ahead_walk_never_follows_a_swapped_symlink() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fixture();
    let outside = f.root.join("outside");
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("sub/OUTSIDE-ONLY.txt"), "o").unwrap();
    let w = f.root.join("w");
    for i in 0..20 {
        std::fs::create_dir_all(w.join(format!("a{i:02}/comp/sub"))).unwrap();
        std::fs::write(w.join(format!("a{i:02}/comp/sub/inside.txt")), "i").unwrap();
        std::os::unix::fs::symlink(&outside, w.join(format!("a{i:02}/other"))).unwrap();
    }
    let stop = AtomicBool::new(false);
    let options = WalkOptions {
        max_depth: 64,
        stat_files: true,
        threads: 4,
    };
    let mut inside = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for i in 0..20 {
                    let d = w.join(format!("a{i:02}"));
                    exchange(&d.join("comp"), &d.join("other"));
                }
            }
        });
        for _ in 0..200 {
            f.policy
                .walk(&w, options, |e| {
                    assert!(
                        !e.path.ends_with("OUTSIDE-ONLY.txt"),
                        "followed a symlink: {}",
                        e.path.display()
                    );
                    if e.path.ends_with("inside.txt") {
                        inside += 1;
                    }
                    WalkControl::Continue
                })
                .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(inside > 0, "race not exercised");
}
