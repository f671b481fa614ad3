//! Crashes at every step of the durable write protocol, with the real runner: the broker aborts
//! after each of its seven steps, the gateway after persisting `prepared` and after persisting
//! `committed`. Each test checks the file, the receipt and the ledger afterwards: a prepared
//! write is resolved from the real file (new content: committed; old: not applied, never
//! retried; anything else: the session stops with `recovery_required`), and nothing is doubled.
//!
//! Failpoints exist only in builds with the `failpoints` feature (`scripts/test` enables it);
//! without it these tests fail at once instead of passing vacuously.

use std::path::Path;
use std::time::Duration;

use common::hash::sha256_hex;
use serde_json::{Value, json};

use crate::support::*;
use crate::writes::{sha_of, start_profile, write_dir};

const ORIGINAL: &str = "alpha\nneedle here\ngamma\n";
const EDITED: &str = "alpha\npin here\ngamma\n";

fn require_failpoints() {
    #[cfg(not(feature = "failpoints"))]
    panic!("crash tests need the gateway built with `--features failpoints` (scripts/test does)");
}

async fn armed_gateway(point: &str) -> GatewayProcess {
    require_failpoints();
    gateway_with(&[("NATIVE_GATEWAY_FAILPOINT", &format!("{point}:abort"))]).await
}

fn edit_call(root: &Path) -> Value {
    json!([{"name": "Edit", "arguments": {
        "file_path": root.join("notes.txt").to_string_lossy(),
        "old_string": "needle here", "new_string": "pin here"}}])
}

/// The single action's state, its outcome and its recorded intent.
fn action_row(gw: &GatewayProcess) -> (String, Option<Value>, Option<Value>) {
    state_db(gw)
        .query_row("SELECT state, outcome, prepared FROM actions", [], |r| {
            let parse = |s: Option<String>| s.map(|s| serde_json::from_str::<Value>(&s).unwrap());
            Ok((r.get(0)?, parse(r.get(1)?), parse(r.get(2)?)))
        })
        .unwrap()
}

async fn wait_for_state(gw: &GatewayProcess, want: &str) -> (String, Option<Value>, Option<Value>) {
    let end = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let row = action_row(gw);
        if row.0 == want || std::time::Instant::now() > end {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn temp_files(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".ng-write-"))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Crashed before `prepared` was recorded: the action never ran, nothing to resolve.
    NotPrepared,
    NotApplied,
    Committed,
}

/// A `direct_write` session on a fresh directory, with its first reply asking for the Edit of
/// `notes.txt`: the directory (kept while it lives), its canonical path, the session id and lease.
async fn session_with_an_edit(
    chat: &ScriptedChatGpt,
    key: &str,
) -> (tempfile::TempDir, std::path::PathBuf, String, String) {
    let dir = write_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let v = start_profile(chat, &root, "direct_write", key).await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            &format!("{key}-r1"),
            None,
            Some(edit_call(&root)),
        )
        .await
        .unwrap();
    tool_ok(&r);
    (dir, root, sid, lease)
}

/// The broker aborts at `point` during an Edit; the gateway sees it gone and resolves.
async fn broker_crash(point: &str, expect: Expect) {
    let gw = armed_gateway(point).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let pre = sha256_hex(ORIGINAL.as_bytes());
    let (_dir, root, sid, lease) = session_with_an_edit(&chat, &format!("bc-{point}")).await;
    let notes = root.join("notes.txt");
    // The broker (and with it the runner) is gone: reported, not hidden.
    let v = chat
        .wait_until(&sid, &lease, Duration::from_secs(60), |v| {
            v["recovery_required"] == true && v["current_run"]["state"] != "alive"
        })
        .await
        .unwrap();
    assert!(v["pending_turn"].is_null(), "{point}: {v}");

    let want = match expect {
        Expect::NotPrepared => "approved",
        Expect::NotApplied => "not_applied",
        Expect::Committed => "committed",
    };
    let (state, outcome, prepared) = wait_for_state(&gw, want).await;
    assert_eq!(state, want, "{point}: {outcome:?}");
    let resolved = events(&gw, "write_resolved_after_crash");
    match expect {
        Expect::NotPrepared => {
            assert!(prepared.is_none(), "{point}");
            assert!(outcome.is_none(), "{point}");
            assert_eq!(std::fs::read_to_string(&notes).unwrap(), ORIGINAL);
            assert_eq!(resolved, 0);
        }
        Expect::NotApplied => {
            let (outcome, prepared) = (outcome.unwrap(), prepared.unwrap());
            assert_eq!(
                std::fs::read_to_string(&notes).unwrap(),
                ORIGINAL,
                "{point}"
            );
            assert_eq!(prepared["pre_sha256"], pre.as_str());
            assert_eq!(outcome["error_code"], "not_applied", "{point}: {outcome}");
            assert_eq!(outcome["receipt"]["pre_sha256"], pre.as_str());
            assert!(outcome["receipt"]["post_sha256"].is_null());
            assert_eq!(resolved, 1);
        }
        Expect::Committed => {
            let (outcome, prepared) = (outcome.unwrap(), prepared.unwrap());
            assert_eq!(std::fs::read_to_string(&notes).unwrap(), EDITED, "{point}");
            let post = sha256_hex(EDITED.as_bytes());
            assert_eq!(prepared["post_sha256"], post.as_str());
            assert_eq!(outcome["status"], "ok", "{point}: {outcome}");
            assert_eq!(outcome["receipt"]["pre_sha256"], pre.as_str());
            assert_eq!(outcome["receipt"]["post_sha256"], post.as_str());
            assert_eq!(resolved, 1);
        }
    }
    // The crashed write's temp file (if one was made) is gone.
    assert!(
        temp_files(&root).is_empty(),
        "{point}: {:?}",
        temp_files(&root)
    );
    assert_eq!(
        count(
            &gw,
            "SELECT COUNT(*) FROM events WHERE kind = 'write_prepared'"
        ),
        i64::from(expect != Expect::NotPrepared),
        "{point}"
    );

    if point == "after_prepared" {
        // The session goes on in a new runner generation; the write is never retried.
        let r = chat
            .continue_(&sid, &lease, "Go on", "bc-c1", Some(50))
            .await
            .unwrap();
        let v = view(&r);
        assert_eq!(v["pending_turn"]["kind"], "prompt", "{v}");
        assert_eq!(v["current_run"]["generation"], 2, "{v}");
        // ChatGPT learns how the interrupted write ended, from the ledger.
        let reported = &v["pending_turn"]["tool_results"][0];
        assert_eq!(reported["name"], "Edit", "{v}");
        assert_eq!(reported["status"], "error", "{v}");
        assert!(
            reported["output"]
                .as_str()
                .unwrap()
                .starts_with("not_applied:"),
            "{v}"
        );
        assert_eq!(reported["receipt"]["pre_sha256"], pre.as_str(), "{v}");
        let r = chat
            .reply(
                &sid,
                &lease,
                &turn_id(&v),
                "bc-r2",
                Some("Stopping here."),
                None,
            )
            .await
            .unwrap();
        tool_ok(&r);
        chat.wait_until(&sid, &lease, Duration::from_secs(40), |v| {
            v["status"] == "idle"
        })
        .await
        .unwrap();
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), ORIGINAL);
        assert_eq!(count(&gw, "SELECT COUNT(*) FROM actions"), 1);
        assert_eq!(action_row(&gw).0, "not_applied");
    }
    let _ = chat.stop(&sid, &lease, "bc-stop", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_crash_before_and_right_after_prepare() {
    broker_crash("after_read", Expect::NotPrepared).await;
    broker_crash("after_prepared", Expect::NotApplied).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_crash_around_the_temp_file_and_the_check() {
    broker_crash("after_temp_written", Expect::NotApplied).await;
    broker_crash("after_temp_fsync", Expect::NotApplied).await;
    broker_crash("after_cas", Expect::NotApplied).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_crash_after_the_rename() {
    broker_crash("after_rename", Expect::Committed).await;
    broker_crash("after_dir_fsync", Expect::Committed).await;
}

/// The gateway aborts right after persisting a record, before the broker has its ack.
async fn gateway_crash(point: &str) -> (GatewayProcess, ScriptedChatGpt, tempfile::TempDir, Value) {
    let mut gw = armed_gateway(point).await;
    let chat = chatgpt(&gw).await;
    let dir = write_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let v = start_profile(&chat, &root, "direct_write", &format!("gc-{point}")).await;
    let (url, token) = (gw.url(), gw.token().to_string());
    let (sid, lease, turn) = (session_id(&v), lease_id(&v), turn_id(&v));
    let calls = edit_call(&root);
    // The call in flight dies with the gateway.
    let inflight = tokio::spawn(async move {
        let chat = ScriptedChatGpt::connect(&url, &token).await.unwrap();
        chat.reply(&sid, &lease, &turn, "gc-r1", None, Some(calls))
            .await
    });
    let status = gw.wait_exit(Duration::from_secs(60)).await.unwrap();
    assert!(
        !status.success(),
        "{point}: the gateway should have aborted"
    );
    let _ = inflight.await;
    (gw, chat, dir, v)
}

/// Events of one kind in the ledger.
fn events(gw: &GatewayProcess, kind: &str) -> i64 {
    count_with(gw, "SELECT COUNT(*) FROM events WHERE kind = ?1", kind)
}

/// Start the gateway again (without re-arming anything that matters: the duplicate records it
/// receives are not applied again) and wait for the Edit's result to reach ChatGPT.
async fn restart_and_wait_for_the_result(
    gw: &mut GatewayProcess,
    v: &Value,
    notes: &Path,
) -> (ScriptedChatGpt, Value) {
    gw.start().await.unwrap();
    let chat = chatgpt(gw).await;
    let v = chat
        .wait_until(&session_id(v), &lease_id(v), Duration::from_secs(60), |v| {
            v["pending_turn"]["kind"] == "tool_results"
        })
        .await
        .unwrap();
    let result = v["pending_turn"]["tool_results"][0].clone();
    assert_eq!(result["status"], "ok", "{v}");
    assert_eq!(std::fs::read_to_string(notes).unwrap(), EDITED);
    assert_eq!(
        result["receipt"]["pre_sha256"],
        sha256_hex(ORIGINAL.as_bytes()).as_str()
    );
    assert_eq!(result["receipt"]["post_sha256"], sha_of(notes).as_str());
    assert_eq!(action_row(gw).0, "committed");
    assert_eq!(events(gw, "write_prepared"), 1);
    assert_eq!(events(gw, "action_committed"), 1);
    (chat, v)
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_crash_after_persisting_prepared_finishes_the_write_once() {
    let (mut gw, _, dir, v) = gateway_crash("gateway_after_prepared_persisted").await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let notes = std::fs::canonicalize(dir.path()).unwrap().join("notes.txt");
    // Recorded, not yet written: the broker waits for the acknowledgement.
    let (state, _, prepared) = action_row(&gw);
    assert_eq!(state, "prepared");
    assert_eq!(
        prepared.unwrap()["pre_sha256"],
        sha256_hex(ORIGINAL.as_bytes()).as_str()
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), ORIGINAL);

    // Restarted, the gateway re-adopts the broker, which re-sends the intent and goes on.
    let (chat, _) = restart_and_wait_for_the_result(&mut gw, &v, &notes).await;
    let _ = chat
        .stop(&session_id(&v), &lease_id(&v), "gc-stop", None)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_crash_after_persisting_committed_delivers_the_result_once() {
    let (mut gw, _, dir, v) = gateway_crash("gateway_after_finished_persisted").await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let notes = std::fs::canonicalize(dir.path()).unwrap().join("notes.txt");
    assert_eq!(action_row(&gw).0, "committed");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), EDITED);

    // The broker re-sends the outcome; it is acknowledged, not applied twice.
    let (chat, _) = restart_and_wait_for_the_result(&mut gw, &v, &notes).await;
    let _ = chat
        .stop(&session_id(&v), &lease_id(&v), "gc-stop", None)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_prepared_write_stops_the_session_for_recovery() {
    let (mut gw, _, dir, v) = gateway_crash("gateway_after_prepared_persisted").await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let notes = std::fs::canonicalize(dir.path()).unwrap().join("notes.txt");
    // The broker dies too, and someone else changes the file meanwhile.
    kill_session_processes(gw.state_dir());
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(&notes, "tampered\n").unwrap();

    gw.start().await.unwrap();
    let chat = chatgpt(&gw).await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let v = chat
        .wait_until(&sid, &lease, Duration::from_secs(30), |v| {
            v["status"] == "failed"
        })
        .await
        .unwrap();
    assert_eq!(v["recovery_required"], true, "{v}");
    assert_eq!(v["terminal"]["reason"], "write_indeterminate", "{v}");
    assert_eq!(
        v["terminal"]["path"],
        notes.to_string_lossy().as_ref(),
        "{v}"
    );
    let (state, outcome, _) = action_row(&gw);
    assert_eq!(state, "indeterminate");
    assert_eq!(outcome.unwrap()["error_code"], "indeterminate");
    // Nothing was written again, and the session takes no more work.
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "tampered\n");
    let r = chat
        .continue_(&sid, &lease, "go on", "gc-c1", Some(0))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "session_terminal", "{r}");
}

/// A broker that hangs right after `prepared` (SIGSTOP: alive, its link open, deaf to SIGTERM)
/// cannot keep a stop waiting or a write in limbo: after the grace the gateway kills it (its
/// runner dies with it), the session is stopped, and the prepared write is settled from the
/// file — not applied, nothing left behind.
#[tokio::test(flavor = "multi_thread")]
async fn a_hung_broker_is_killed_on_stop_and_its_prepared_write_settled() {
    require_failpoints();
    let gw = gateway_with(&[("NATIVE_GATEWAY_FAILPOINT", "after_prepared:stop")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let pre = sha256_hex(ORIGINAL.as_bytes());
    let (_dir, root, sid, lease) = session_with_an_edit(&chat, "hung-broker").await;
    let notes = root.join("notes.txt");
    assert!(!session_processes(gw.state_dir()).is_empty());
    let (state, _, prepared) = wait_for_state(&gw, "prepared").await;
    assert_eq!(state, "prepared");
    assert_eq!(prepared.unwrap()["pre_sha256"], pre.as_str());

    let asked = std::time::Instant::now();
    let _ = chat.stop(&sid, &lease, "hb-stop", None).await.unwrap();
    let v = chat
        .wait_until(&sid, &lease, Duration::from_secs(40), |v| {
            v["status"] == "stopped"
        })
        .await
        .unwrap();
    assert_eq!(v["status"], "stopped", "{v}");
    assert_eq!(
        v["terminal"]["detail"], "the broker did not stop in time and was killed, with its runner",
        "{v}"
    );
    // The broker had its grace (12 s after the stop request, then SIGTERM), and was then killed.
    assert!(
        asked.elapsed() >= Duration::from_secs(12),
        "{:?}",
        asked.elapsed()
    );
    let kinds: Vec<String> = state_db(&gw)
        .prepare("SELECT kind FROM events ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(events(&gw, "broker_killed"), 1, "{kinds:?}");
    let (state, outcome, _) = wait_for_state(&gw, "not_applied").await;
    assert_eq!(state, "not_applied", "{outcome:?}");
    assert_eq!(events(&gw, "write_resolved_after_crash"), 1);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), ORIGINAL);
    assert!(temp_files(&root).is_empty(), "{:?}", temp_files(&root));
    // Neither the broker nor its runner is left.
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !session_processes(gw.state_dir()).is_empty() && std::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(session_processes(gw.state_dir()), Vec::<i32>::new());
}
