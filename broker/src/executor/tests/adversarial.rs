//! Adversarial trees (issue 3): protected entries, `.git` files, the state dir and `/proc` magic
//! links reached by other paths, sparse files, FIFOs, devices, and hostile file names.

use super::*;

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
        assert_error(&out, OutcomeCode::NotPermitted);
        assert!(
            out.output.contains("protected location"),
            "{rel}: {}",
            out.output
        );
        assert!(!out.output.contains("SECRET"));
        assert_error(
            &search(&f.exec, &path, "needle", None),
            OutcomeCode::NotPermitted,
        );
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
    assert_error(&out, OutcomeCode::NotPermitted);
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
    assert_error(&out, OutcomeCode::NotPermitted);
    assert!(out.output.contains("2 hard links"), "{}", out.output);
    // Symlink to the state dir.
    std::os::unix::fs::symlink(&f.state, w.join("state-link")).unwrap();
    let out = read(&f.exec, &w.join("state-link/gateway.db"), None, None);
    assert_error(&out, OutcomeCode::NotPermitted);
    assert!(out.output.contains("is a symbolic link"), "{}", out.output);
    assert_error(
        &find(&f.exec, &w.join("state-link"), None),
        OutcomeCode::NotPermitted,
    );
    assert_error(
        &search(&f.exec, &w.join("state-link"), "needle", None),
        OutcomeCode::NotPermitted,
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
        assert_error(&out, OutcomeCode::NotPermitted);
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
        assert_error(
            &find(&f.exec, Path::new(&path), None),
            OutcomeCode::NotPermitted,
        );
        assert_error(
            &search(&f.exec, Path::new(&path), "needle", None),
            OutcomeCode::NotPermitted,
        );
    }
    let out = read(
        &f.exec,
        Path::new(&format!("/proc/{pid}/environ")),
        None,
        None,
    );
    assert_error(&out, OutcomeCode::NotPermitted);
    // Our own /proc entry is refused whole: its links, maps and status name internal paths.
    assert_error(
        &find_with(
            &f.exec,
            Path::new(&format!("/proc/{pid}")),
            Some(1),
            Some(10_000),
        ),
        OutcomeCode::NotPermitted,
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
    assert_error(&out, OutcomeCode::FileTooLarge);
    assert!(out.output.contains("314572800 bytes"), "{}", out.output);
    assert!(out.output.contains("256 MiB"), "{}", out.output);
}

#[test]
fn fifo_in_tree_never_hangs_searches() {
    let f = fixture();
    let w = f.root.join("work");
    write(&w.join("a.txt"), "needle\n");
    mkfifo(&w.join("pipe"));
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
        OutcomeCode::NotAFile,
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[cfg(target_os = "linux")]
#[test]
fn device_refused_with_kind() {
    let f = fixture();
    let out = read(&f.exec, Path::new("/dev/null"), None, None);
    assert_error(&out, OutcomeCode::NotAFile);
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
        OutcomeCode::NotUtf8,
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
