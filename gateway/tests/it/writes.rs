//! The write tools end to end with the real runner: a non-Git `direct_write` directory and a
//! `worktree_write` repository (Read → Edit → Write nested → NotebookEdit → RunCommand →
//! continue → Read), with true SHA-256 receipts, the ledger's prepared/committed records, and
//! the source repository byte-identical; plus the start-time refusals of the write profiles.

use std::path::{Path, PathBuf};
use std::process::Command;

use common::hash::sha256_hex;
use serde_json::{Value, json};

use crate::support::*;

pub const NOTEBOOK: &str = r##"{
 "cells": [
  {"cell_type": "markdown", "id": "c1", "metadata": {}, "source": ["# Title"]},
  {"cell_type": "code", "execution_count": 3, "id": "c2", "metadata": {"tags": ["keep"]},
   "outputs": [{"name": "stdout", "output_type": "stream", "text": ["42\n"]}], "source": ["print(42)"]}
 ],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

/// Start a session with a write profile and wait for its first pending turn.
pub async fn start_profile(chat: &ScriptedChatGpt, root: &Path, profile: &str, key: &str) -> Value {
    let r = chat
        .start_with(
            "Edit some files",
            root,
            key,
            json!({"capability_profile": profile, "wait_seconds": 50}),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    v
}

pub fn sha_of(path: &Path) -> String {
    sha256_hex(&std::fs::read(path).unwrap())
}

/// Reply with `calls` and return the view with the next pending turn (the calls' results).
pub async fn reply_calls(chat: &ScriptedChatGpt, v: &Value, reply_id: &str, calls: Value) -> Value {
    let r = chat
        .reply(
            &session_id(v),
            &lease_id(v),
            &turn_id(v),
            reply_id,
            None,
            Some(calls),
        )
        .await
        .unwrap();
    let mut next = view(&r);
    if next["pending_turn"].is_null() {
        next = chat
            .wait_until(
                &session_id(v),
                &lease_id(v),
                std::time::Duration::from_secs(60),
                |v| !v["pending_turn"].is_null() || v["status"] != "running",
            )
            .await
            .unwrap();
        next["lease_id"] = v["lease_id"].clone();
    }
    assert_eq!(next["pending_turn"]["kind"], "tool_results", "{next}");
    next
}

/// Reply with text only; the runner's turn ends.
async fn finish_turn(chat: &ScriptedChatGpt, v: &Value, reply_id: &str) {
    let r = chat
        .reply(
            &session_id(v),
            &lease_id(v),
            &turn_id(v),
            reply_id,
            Some("Done."),
            None,
        )
        .await
        .unwrap();
    let done = view(&r);
    let done = if done["status"] == "idle" {
        done
    } else {
        chat.wait_until(
            &session_id(v),
            &lease_id(v),
            std::time::Duration::from_secs(40),
            |v| v["status"] == "idle",
        )
        .await
        .unwrap()
    };
    assert_eq!(done["status"], "idle", "{done}");
}

fn results(v: &Value) -> Vec<Value> {
    v["pending_turn"]["tool_results"]
        .as_array()
        .unwrap()
        .clone()
}

fn output(result: &Value) -> &str {
    result["output"].as_str().unwrap_or("")
}

/// Have the runner Read `path`; the receipt must carry `sha256`.
async fn read_checked(
    chat: &ScriptedChatGpt,
    v: &Value,
    reply_id: &str,
    path: &Path,
    sha256: &str,
) -> Value {
    let calls = json!([{"name": "Read", "arguments": {"file_path": path.to_string_lossy()}}]);
    let v = reply_calls(chat, v, reply_id, calls).await;
    let read = &results(&v)[0];
    assert_eq!(read["status"], "ok", "{read}");
    assert_eq!(read["receipt"]["sha256"], sha256, "{read}");
    v
}

/// The write sequence both profiles share, in `root` (the write root the session sees):
/// Read → Edit (with the Read's hash) + Write nested + NotebookEdit + RunCommand → continue →
/// Read. Returns the hashes ChatGPT saw.
async fn write_sequence(chat: &ScriptedChatGpt, v: Value, root: &Path, key: &str) {
    let notes = root.join("notes.txt");
    let nested = root.join("new/deep/file.txt");
    let notebook = root.join("nb.ipynb");
    let original_sha = sha_of(&notes);
    let notebook_sha = sha_of(&notebook);
    let s = |p: &Path| p.to_string_lossy().to_string();

    // Read: the receipt carries the file's true hash.
    let v = read_checked(chat, &v, &format!("{key}-r1"), &notes, &original_sha).await;

    // Edit with the hash just read, a new nested file, a notebook cell, then a command that sees
    // the edit (commands never write; they read what the write tools wrote).
    let v = reply_calls(
        chat,
        &v,
        &format!("{key}-r2"),
        json!([
            {"name": "Edit", "arguments": {"file_path": s(&notes), "old_string": "needle here",
                "new_string": "pin here", "expected_sha256": original_sha}},
            {"name": "Write", "arguments": {"file_path": s(&nested), "content": "hello\nworld\n"}},
            {"name": "NotebookEdit", "arguments": {"notebook_path": s(&notebook), "cell_id": "c1",
                "edit_mode": "replace", "new_source": "# Title v2"}},
            {"name": "RunCommand", "arguments": {"argv": ["cat", "notes.txt"]}},
        ]),
    )
    .await;
    let r = results(&v);
    assert_eq!(r.len(), 4, "{v}");
    for result in &r {
        assert_eq!(result["status"], "ok", "{result}");
    }
    let edited_sha = sha_of(&notes);
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "alpha\npin here\ngamma\n"
    );
    assert_eq!(
        r[0]["receipt"]["pre_sha256"],
        original_sha.as_str(),
        "{}",
        r[0]
    );
    assert_eq!(
        r[0]["receipt"]["post_sha256"],
        edited_sha.as_str(),
        "{}",
        r[0]
    );
    assert!(output(&r[0]).contains("replaced 1 occurrence"), "{}", r[0]);
    assert_eq!(std::fs::read_to_string(&nested).unwrap(), "hello\nworld\n");
    assert!(r[1]["receipt"]["pre_sha256"].is_null(), "{}", r[1]);
    assert_eq!(
        r[1]["receipt"]["post_sha256"],
        sha256_hex(b"hello\nworld\n").as_str()
    );
    assert_eq!(
        r[2]["receipt"]["pre_sha256"],
        notebook_sha.as_str(),
        "{}",
        r[2]
    );
    assert_eq!(r[2]["receipt"]["post_sha256"], sha_of(&notebook).as_str());
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&notebook).unwrap()).unwrap();
    assert_eq!(nb["cells"][0]["source"], json!(["# Title v2"]), "{nb}");
    // The other cell, its outputs and the notebook metadata are kept.
    assert_eq!(
        nb["cells"][1]["outputs"][0]["text"],
        json!(["42\n"]),
        "{nb}"
    );
    assert_eq!(nb["cells"][1]["metadata"]["tags"], json!(["keep"]));
    assert_eq!(nb["metadata"]["kernelspec"]["name"], "python3");
    assert!(
        output(&r[3]).contains("--- stdout ---\nalpha\npin here\ngamma\n"),
        "{}",
        r[3]
    );

    // A stale hash and a path outside the root are refused with their reasons; nothing changes.
    let v = reply_calls(
        chat,
        &v,
        &format!("{key}-r3"),
        json!([
            {"name": "Edit", "arguments": {"file_path": s(&notes), "old_string": "pin",
                "new_string": "pen", "expected_sha256": original_sha}},
            {"name": "Write", "arguments": {"file_path": "/tmp/ngw-outside-the-root.txt",
                "content": "x"}},
        ]),
    )
    .await;
    let r = results(&v);
    assert_eq!(r[0]["status"], "error", "{}", r[0]);
    assert!(output(&r[0]).contains("sha256_mismatch"), "{}", r[0]);
    assert_eq!(r[1]["status"], "error", "{}", r[1]);
    assert!(output(&r[1]).contains("outside the write root"), "{}", r[1]);
    assert!(!Path::new("/tmp/ngw-outside-the-root.txt").exists());
    assert_eq!(sha_of(&notes), edited_sha);
    finish_turn(chat, &v, &format!("{key}-r4")).await;

    // The next prompt continues the same conversation; a Read sees the committed bytes.
    let r = chat
        .continue_(
            &session_id(&v),
            &lease_id(&v),
            "Read it again",
            &format!("{key}-c1"),
            Some(50),
        )
        .await
        .unwrap();
    let v2 = view(&r);
    assert_eq!(v2["pending_turn"]["kind"], "prompt", "{v2}");
    // Every earlier call was reported in its own turn: nothing is carried over.
    assert!(v2["pending_turn"]["tool_results"].is_null(), "{v2}");
    let v2 = read_checked(chat, &v2, &format!("{key}-r5"), &notes, &edited_sha).await;
    assert!(output(&results(&v2)[0]).contains("pin here"));
    finish_turn(chat, &v2, &format!("{key}-r6")).await;
}

/// The ledger holds `prepared` then `committed` for each of the three writes, with receipts.
fn assert_ledger(gw: &GatewayProcess, sid: &str) {
    assert_eq!(
        count_with(
            gw,
            "SELECT COUNT(*) FROM actions WHERE session_id = ?1 AND state = 'committed' AND prepared IS NOT NULL",
            sid
        ),
        3
    );
    assert_eq!(
        count_with(
            gw,
            "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'write_prepared'",
            sid
        ),
        3
    );
    // The refused Edit (stale hash) and Write (outside) are recorded as not applied.
    assert_eq!(
        count_with(
            gw,
            "SELECT COUNT(*) FROM actions WHERE session_id = ?1 AND state = 'not_applied'",
            sid
        ),
        2
    );
    let prepared_before_committed: i64 = state_db(gw)
        .query_row(
            "SELECT COUNT(*) FROM events p JOIN events c
               ON json_extract(p.data, '$.action_id') = json_extract(c.data, '$.action_id')
             WHERE p.session_id = ?1 AND p.kind = 'write_prepared' AND c.kind = 'action_committed'
               AND p.seq < c.seq",
            [sid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(prepared_before_committed, 3);
}

pub fn write_dir() -> tempfile::TempDir {
    let dir = work_dir();
    std::fs::write(dir.path().join("nb.ipynb"), NOTEBOOK).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn direct_write_end_to_end_with_real_runner() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = write_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let v = start_profile(&chat, &root, "direct_write", "wr-direct").await;
    assert_eq!(
        v["pending_turn"]["allowed_tools"],
        json!([
            "Read",
            "FindFiles",
            "SearchText",
            "RunCommand",
            "Edit",
            "Write",
            "NotebookEdit"
        ])
    );
    assert_eq!(
        v["workspace"],
        json!({"kind": "direct", "root": root.to_string_lossy()})
    );
    assert_eq!(v["working_directory"], root.to_string_lossy().as_ref());
    let sid = session_id(&v);
    let lease = lease_id(&v);
    write_sequence(&chat, v, &root, "wr-direct").await;
    assert_ledger(&gw, &sid);
    // No temp file is left behind anywhere in the tree.
    let leftovers = Command::new("find")
        .arg(&root)
        .args(["-name", ".ng-write-*"])
        .output()
        .unwrap();
    assert!(leftovers.stdout.is_empty(), "{leftovers:?}");
    chat.stop(&sid, &lease, "wr-direct-stop", None)
        .await
        .unwrap();
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A committed repository with the work files.
pub fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = write_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "user.email", "t@example.invalid"]);
    git(&root, &["config", "user.name", "t"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    (dir, root)
}

/// Everything about the source checkout that must stay byte-identical.
fn source_fingerprint(root: &Path) -> Value {
    let mut files = serde_json::Map::new();
    for rel in ["notes.txt", "src/lib.rs", "nb.ipynb"] {
        files.insert(rel.into(), json!(sha_of(&root.join(rel))));
    }
    json!({
        "status": git(root, &["status", "--porcelain=v1", "--untracked-files=all"]),
        "head": git(root, &["rev-parse", "HEAD"]),
        "head_ref": std::fs::read_to_string(root.join(".git/HEAD")).unwrap(),
        "index": sha_of(&root.join(".git/index")),
        "files": files,
        "new_file": root.join("new").exists(),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn worktree_write_end_to_end_leaves_the_source_untouched() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let (_dir, source) = repo();
    let before = source_fingerprint(&source);
    let head = git(&source, &["rev-parse", "HEAD"]).trim().to_string();
    let v = start_profile(&chat, &source, "worktree_write", "wr-tree").await;
    let sid = session_id(&v);
    let lease = lease_id(&v);
    let worktree = PathBuf::from(v["working_directory"].as_str().unwrap());
    let worktrees = std::fs::canonicalize(gw.state_dir())
        .unwrap()
        .join("worktrees");
    assert_eq!(worktree, worktrees.join(&sid), "{v}");
    assert_eq!(v["source_directory"], source.to_string_lossy().as_ref());
    assert_eq!(v["workspace"]["kind"], "worktree");
    assert_eq!(v["workspace"]["root"], source.to_string_lossy().as_ref());
    assert_eq!(v["workspace"]["worktree_path"], v["working_directory"]);
    assert_eq!(v["workspace"]["base_commit"], head.as_str());
    let branch = v["workspace"]["branch"].as_str().unwrap().to_string();
    assert!(branch.starts_with("ngw/"), "{branch}");
    assert_eq!(
        git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        branch
    );

    write_sequence(&chat, v.clone(), &worktree, "wr-tree").await;
    assert_ledger(&gw, &sid);

    // Commands run in the worktree (inside the masked state dir) and see the changes.
    let v = chat
        .continue_(&sid, &lease, "Check git", "wr-tree-c2", Some(50))
        .await
        .unwrap();
    let v = view(&v);
    let v = reply_calls(
        &chat,
        &v,
        "wr-tree-g1",
        json!([
            {"name": "RunCommand", "arguments": {"argv": ["git", "status", "--porcelain"]}},
            {"name": "Read", "arguments": {"file_path": source.join("notes.txt").to_string_lossy()}},
        ]),
    )
    .await;
    let r = results(&v);
    assert_eq!(r[0]["status"], "ok", "{}", r[0]);
    let status = output(&r[0]);
    assert!(status.contains(" M notes.txt"), "{status}");
    assert!(status.contains(" M nb.ipynb"), "{status}");
    assert!(status.contains("?? new/"), "{status}");
    // The source still has the original content.
    assert!(output(&r[1]).contains("needle here"), "{}", r[1]);
    finish_turn(&chat, &v, "wr-tree-g2").await;
    chat.stop(&sid, &lease, "wr-tree-stop", None).await.unwrap();

    // The source checkout is byte-identical; the worktree is kept with its changes.
    assert_eq!(source_fingerprint(&source), before);
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "alpha\npin here\ngamma\n"
    );
    assert!(worktree.join("new/deep/file.txt").is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn write_profiles_refuse_unsuitable_directories_at_start() {
    let home = tempfile::tempdir().unwrap();
    let home_path = std::fs::canonicalize(home.path()).unwrap();
    std::fs::create_dir_all(home_path.join(".ssh")).unwrap();
    let gw = gateway_with(&[("HOME", home_path.to_str().unwrap())]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let start = |dir: PathBuf, profile: &'static str, key: &'static str| {
        let chat = &chat;
        async move {
            chat.start_with(
                "x",
                &dir,
                key,
                json!({"capability_profile": profile, "wait_seconds": 0}),
            )
            .await
            .unwrap()
        }
    };
    let message = |r: &Value| r["structuredContent"]["error"]["message"].to_string();

    // worktree_write needs a repository, its top level, and a clean checkout.
    let plain = write_dir();
    let r = start(plain.path().to_path_buf(), "worktree_write", "wp-1").await;
    assert_eq!(tool_err_code(&r), "invalid_argument", "{r}");
    assert!(message(&r).contains("not inside one"), "{r}");
    let (_repo_dir, source) = repo();
    let r = start(source.join("src"), "worktree_write", "wp-2").await;
    assert_eq!(tool_err_code(&r), "invalid_argument", "{r}");
    assert!(message(&r).contains("top level"), "{r}");
    std::fs::write(source.join("untracked.txt"), "x").unwrap();
    let index_before = sha_of(&source.join(".git/index"));
    let r = start(source.clone(), "worktree_write", "wp-3").await;
    assert_eq!(tool_err_code(&r), "invalid_argument", "{r}");
    assert!(message(&r).contains("uncommitted or untracked"), "{r}");
    // The check itself never rewrote the source's index.
    assert_eq!(sha_of(&source.join(".git/index")), index_before);
    std::fs::remove_file(source.join("untracked.txt")).unwrap();
    // A repository whose own config names a filter driver would run it on checkout.
    git(
        &source,
        &["config", "filter.evil.smudge", "touch /tmp/ngw-pwned"],
    );
    let r = start(source.clone(), "worktree_write", "wp-4").await;
    assert_eq!(tool_err_code(&r), "not_permitted", "{r}");
    assert!(message(&r).contains("filter.evil.smudge"), "{r}");
    git(&source, &["config", "--unset", "filter.evil.smudge"]);

    // direct_write never writes into a credential store or Git internals.
    let r = start(home_path.join(".ssh"), "direct_write", "wp-5").await;
    assert_eq!(tool_err_code(&r), "not_permitted", "{r}");
    let r = start(source.join(".git"), "direct_write", "wp-6").await;
    assert_eq!(tool_err_code(&r), "not_permitted", "{r}");
    assert!(message(&r).contains(".git"), "{r}");
    // Nothing was created for any refused start.
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM sessions"), 0);
    let worktrees = std::fs::read_dir(gw.state_dir().join("worktrees"))
        .unwrap()
        .count();
    assert_eq!(worktrees, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_sessions_cannot_write() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = write_dir();
    let v = start_session(&chat, dir.path(), "x", "ro-w").await;
    let file = dir.path().join("notes.txt").to_string_lossy().to_string();
    let r = chat
        .reply(
            &session_id(&v),
            &lease_id(&v),
            &turn_id(&v),
            "ro-w1",
            None,
            Some(json!([{"name": "Write", "arguments": {"file_path": file, "content": "x"}}])),
        )
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "not_permitted", "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "alpha\nneedle here\ngamma\n"
    );
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM actions"), 0);
    chat.stop(&session_id(&v), &lease_id(&v), "ro-w-stop", None)
        .await
        .unwrap();
}

/// A `direct_write` directory replaced by another at the same path (renamed away, a new one made
/// in its place) is not the session's any more: a write through the live session is refused,
/// naming why, and writes nowhere; recover refuses with `workspace_changed`. Both directories
/// keep exactly their bytes.
#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_working_directory_is_never_written_or_recovered_into() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let parent = work_dir();
    let parent = std::fs::canonicalize(parent.path()).unwrap();
    let root = parent.join("project");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.txt"), "original\n").unwrap();
    let r = chat
        .start_with(
            "Edit some files",
            &root,
            "wr-swap",
            json!({"capability_profile": "direct_write", "wait_seconds": 50}),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    let (sid, token) = (
        session_id(&v),
        v["recovery_token"].as_str().unwrap().to_string(),
    );

    // Swap: the session's directory moves away, another takes its path.
    let moved = parent.join("project.old");
    std::fs::rename(&root, &moved).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.txt"), "someone else's\n").unwrap();

    // A write and a command (which would run in, and write into a layer over, someone else's
    // directory) are refused alike.
    let write = json!([{"name": "Write", "arguments": {
        "file_path": root.join("a.txt").to_string_lossy(), "content": "from the session\n"}},
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c", "cat a.txt; echo x > b.txt"]}},
        {"name": "RunCommand", "arguments": {"argv": ["/bin/echo", "hi"], "cwd": "."}}]);
    let v = reply_calls(&chat, &v, "wr-swap-1", write).await;
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{v}");
    assert_eq!(results[0]["status"], "error", "{v}");
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("not_permitted")
    );
    for (i, result) in results.iter().enumerate() {
        if i > 0 {
            assert_eq!(result["status"], "rejected", "{v}");
        }
        let output = result["output"].as_str().unwrap();
        assert!(output.contains("no longer the directory"), "{output}");
        assert!(!output.contains("someone else's"), "{output}");
    }
    assert!(!root.join("b.txt").exists() && !moved.join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "someone else's\n"
    );
    assert_eq!(
        std::fs::read_to_string(moved.join("a.txt")).unwrap(),
        "original\n"
    );

    let refused = chat.recover(&sid, &token, "wr-swap-rec", 0).await.unwrap();
    assert_eq!(tool_err_code(&refused), "workspace_changed", "{refused}");
    let message = refused["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("is another directory now"), "{message}");
    assert!(message.contains("Start a new session"), "{message}");

    // The directory back in place is the session's again: recover works.
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::rename(&moved, &root).unwrap();
    let v = view(&chat.recover(&sid, &token, "wr-swap-rec2", 0).await.unwrap());
    chat.stop(&sid, v["lease_id"].as_str().unwrap(), "wr-swap-stop", None)
        .await
        .unwrap();
}
