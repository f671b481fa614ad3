//! Acceptance (issue 22): a session verifies like a developer. End to end with the real runner,
//! in `read_only`, `direct_write` and `worktree_write` sessions, each project's own build and
//! tests run twice in one session — a Rust crate without Cargo.lock (`cargo test --offline`, by
//! name on the owner's PATH), a Python project with its own venv (`.venv/bin/python -m
//! unittest`: pytest is not installed on this host and cannot be fetched offline, so the venv's
//! test uses unittest and checks it runs inside its venv), a Makefile project that builds into
//! `build/` (`make test`), a Node project whose test writes under `node_modules` (`npm test`) —
//! the second run incremental, and every file, mode and `.git` byte of the real tree identical
//! afterwards.

use super::*;
use serde_json::Value;

/// Path, mode and bytes (a symlink's target) of everything under `root`, `.git` included.
fn tree(root: &Path) -> Tree {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let bytes = if meta.file_type().is_symlink() {
                std::fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                Vec::new()
            } else {
                std::fs::read(&path).unwrap()
            };
            let name = path.strip_prefix(root).unwrap().display().to_string();
            out.push((name, meta.permissions().mode(), bytes));
        }
    }
    out.sort();
    out
}

type Tree = Vec<(String, u32, Vec<u8>)>;

/// Names added, removed or changed (bytes or mode) between two trees; empty when identical.
fn changes(before: &Tree, after: &Tree) -> Vec<String> {
    let old: std::collections::BTreeMap<_, _> =
        before.iter().map(|(n, m, b)| (n, (m, b))).collect();
    let new: std::collections::BTreeMap<_, _> = after.iter().map(|(n, m, b)| (n, (m, b))).collect();
    let mut out = Vec::new();
    for (name, entry) in &new {
        match old.get(name) {
            None => out.push(format!("added {name}")),
            Some(was) if was != entry => out.push(format!("changed {name}")),
            Some(_) => {}
        }
    }
    out.extend(
        old.keys()
            .filter(|n| !new.contains_key(*n))
            .map(|n| format!("removed {n}")),
    );
    out
}

fn sh(dir: &Path, argv: &[&str]) {
    let status = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(status.success(), "{argv:?} failed");
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Four projects in one committed Git repository (a worktree session needs a clean one).
fn projects() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("rust/Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &root.join("rust/src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n\n#[test]\nfn adds() { assert_eq!(add(2, 2), 4); }\n",
    );
    std::fs::create_dir_all(root.join("py")).unwrap();
    sh(
        root,
        &["python3", "-m", "venv", "--without-pip", "py/.venv"],
    );
    write(
        &root.join("py/test_venv.py"),
        "import sys, unittest\n\nclass Venv(unittest.TestCase):\n    def test_runs_in_its_venv(self):\n        self.assertNotEqual(sys.prefix, sys.base_prefix)\n        self.assertTrue(sys.prefix.endswith('.venv'), sys.prefix)\n\nif __name__ == '__main__':\n    unittest.main()\n",
    );
    write(
        &root.join("mk/Makefile"),
        "test: build/hello\n\t./build/hello\n\nbuild/hello: hello.c\n\tmkdir -p build\n\tcc -o build/hello hello.c\n",
    );
    write(
        &root.join("mk/hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"hello from make\"); return 0; }\n",
    );
    write(
        &root.join("node/package.json"),
        "{\"name\": \"demo\", \"version\": \"1.0.0\", \"private\": true, \"scripts\": {\"test\": \"node test.js\"}}\n",
    );
    write(
        &root.join("node/node_modules/dep/index.js"),
        "module.exports = 1;\n",
    );
    write(
        &root.join("node/test.js"),
        "const fs = require('fs');\nfs.mkdirSync('node_modules/.cache', {recursive: true});\nconst f = 'node_modules/.cache/runs';\nconst n = (fs.existsSync(f) ? Number(fs.readFileSync(f, 'utf8')) : 0) + 1;\nfs.writeFileSync(f, String(n));\nconsole.log('node runs: ' + n + ', dep ' + require('dep'));\n",
    );
    sh(root, &["git", "init", "-q", "-b", "main"]);
    sh(root, &["git", "add", "-A", "-f"]);
    sh(
        root,
        &[
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "projects",
        ],
    );
    dir
}

fn calls() -> Value {
    json!([
        {"name": "RunCommand", "arguments": {"argv": ["cargo", "test", "--offline"], "cwd": "rust"}},
        {"name": "RunCommand", "arguments": {"argv": [".venv/bin/python", "-m", "unittest", "-v"], "cwd": "py"}},
        {"name": "RunCommand", "arguments": {"argv": ["make", "test"], "cwd": "mk"}},
        {"name": "RunCommand", "arguments": {"argv": ["npm", "test"], "cwd": "node"}},
        // Git reads the checkout (its index included) and must change nothing real.
        {"name": "RunCommand", "arguments": {"argv": ["git", "status", "--porcelain"]}},
    ])
}

/// Reply with the five commands; their results once the runner asks again.
async fn round(chat: &ScriptedChatGpt, sid: &str, lease: &str, view: &Value, key: &str) -> Value {
    let r = chat
        .reply(
            sid,
            lease,
            &turn_id(view),
            key,
            Some("Verifying."),
            Some(calls()),
        )
        .await
        .unwrap();
    let v = tool_ok(&r).clone();
    if v["pending_turn"]["kind"] == "tool_results" {
        return v;
    }
    chat.wait_until(sid, lease, Duration::from_secs(240), |v| {
        v["pending_turn"]["kind"] == "tool_results"
    })
    .await
    .unwrap()
}

fn outputs(v: &Value) -> Vec<String> {
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 5, "{v}");
    results
        .iter()
        .map(|r| {
            let output = r["output"].as_str().unwrap_or_default().to_string();
            assert_eq!(r["status"], "ok", "{output}");
            assert_eq!(r["receipt"]["exit_code"], 0, "{output}");
            assert!(output.contains("writes: copy-on-write layer"), "{output}");
            output
        })
        .collect()
}

async fn verify_twice(profile: &str) {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = projects();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let pristine = tree(&real);
    let v = chat
        .start_with(
            "Build and test the projects",
            &real,
            &format!("proj-{profile}-start"),
            json!({"capability_profile": profile, "wait_seconds": 50}),
        )
        .await
        .unwrap();
    let v = view(&v);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    let sid = session_id(&v);
    let lease = lease_id(&v);
    // A worktree session's start adds its worktree's admin dir and branch to `.git` (and
    // nothing else); from here on, the tree must not change at all.
    let before = tree(&real);
    let started: Vec<String> = changes(&pristine, &before)
        .into_iter()
        .filter(|c| {
            let allowed = [
                "added .git/worktrees",
                "added .git/refs/heads/ngw",
                "added .git/logs",
            ];
            !allowed.iter().any(|a| c.starts_with(a))
        })
        .collect();
    assert_eq!(
        started,
        Vec::<String>::new(),
        "the start changed the source"
    );
    let worktree = v["workspace"]["worktree_path"].as_str().map(PathBuf::from);
    let v = round(&chat, &sid, &lease, &v, &format!("proj-{profile}-1")).await;
    let first = outputs(&v);
    assert!(first[0].contains("Compiling demo"), "{}", first[0]);
    assert!(first[0].contains("test adds ... ok"), "{}", first[0]);
    assert!(first[1].contains("test_runs_in_its_venv"), "{}", first[1]);
    assert!(first[1].contains("OK"), "{}", first[1]);
    assert!(first[2].contains("cc -o build/hello"), "{}", first[2]);
    assert!(first[2].contains("hello from make"), "{}", first[2]);
    assert!(first[3].contains("node runs: 1, dep 1"), "{}", first[3]);
    // The builds' outputs are untracked files in the layer, not in the real tree.
    assert!(first[4].contains("?? rust/Cargo.lock"), "{}", first[4]);
    assert_eq!(
        changes(&before, &tree(&real)),
        Vec::<String>::new(),
        "first round"
    );
    // The writes are in the session's layer (the broker's runtime dir in the protected command
    // area, named by the session).
    let short: String = sid.trim_start_matches("ns_").chars().take(12).collect();
    let layer = sandbox::protected::command_runtime_area(gw.state_dir())
        .join(short)
        .join("layer");
    assert!(layer.is_dir(), "no layer at {}", layer.display());
    // The same commands again: incremental, on what the first round wrote.
    let second = outputs(&round(&chat, &sid, &lease, &v, &format!("proj-{profile}-2")).await);
    assert!(!second[0].contains("Compiling demo"), "{}", second[0]);
    assert!(second[0].contains("test adds ... ok"), "{}", second[0]);
    assert!(second[1].contains("OK"), "{}", second[1]);
    assert!(!second[2].contains("cc -o"), "{}", second[2]);
    assert!(second[2].contains("hello from make"), "{}", second[2]);
    assert!(second[3].contains("node runs: 2, dep 1"), "{}", second[3]);
    chat.stop(&sid, &lease, &format!("proj-{profile}-stop"), None)
        .await
        .unwrap();
    // The session's layer is discarded at stop.
    let deadline = Instant::now() + Duration::from_secs(10);
    while layer.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!layer.exists(), "{} kept after stop", layer.display());
    // Every file, mode and .git byte of the real tree as it was.
    assert_eq!(
        changes(&before, &tree(&real)),
        Vec::<String>::new(),
        "after the session"
    );
    assert_eq!(worktree.is_some(), profile == "worktree_write", "{v}");
    if let Some(worktree) = worktree {
        // The managed worktree is real files too: commands wrote none of them.
        for built in [
            "rust/Cargo.lock",
            "rust/target",
            "mk/build",
            "node/node_modules/.cache",
        ] {
            assert!(!worktree.join(built).exists(), "{built} in the worktree");
        }
        assert!(worktree.join("rust/Cargo.toml").is_file());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_build_and_test_twice_in_a_read_only_session() {
    verify_twice("read_only").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_build_and_test_twice_in_a_direct_write_session() {
    verify_twice("direct_write").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_build_and_test_twice_in_a_worktree_write_session() {
    verify_twice("worktree_write").await;
}
