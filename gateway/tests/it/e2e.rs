//! One read_only session from start to stop with the real Claude Code runner: prompt turn, tool
//! calls with receipts, text reply, idle, continue in the same conversation, status waits, stop.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn read_only_session_end_to_end_with_real_runner() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let notes = dir.path().join("notes.txt");

    // start → pending prompt turn
    let v = start_session(&chat, dir.path(), "Look at notes.txt for me", "e2e-start").await;
    let sid = session_id(&v);
    let lease = lease_id(&v);
    assert_eq!(v["route"], "chatgpt-main");
    assert_eq!(v["fallback"], "none");
    assert_eq!(v["capability_profile"], "read_only");
    assert_eq!(v["workspace"]["kind"], "read_only");
    assert_eq!(v["current_run"]["state"], "alive");
    assert_eq!(v["current_run"]["generation"], 1);
    assert_eq!(v["runtime_attached"], true);
    assert!(v["recovery_token"].as_str().is_some_and(|t| t.len() > 20));
    let claude_session_id = v["claude_session_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&claude_session_id).is_ok());
    assert_eq!(v["pending_turn"]["kind"], "prompt");
    assert_eq!(v["pending_turn"]["prompt"], "Look at notes.txt for me");
    assert_eq!(
        v["pending_turn"]["allowed_tools"],
        json!(["Read", "FindFiles", "SearchText", "RunCommand"])
    );
    assert_eq!(v["pending_turn"]["reply_budget_bytes"], 786432);

    // reply with three tool calls → pending tool_results turn with outputs and receipts
    let root = dir.path().to_string_lossy().to_string();
    let calls = json!([
        {"name": "Read", "arguments": {"file_path": notes.to_string_lossy()}},
        {"name": "FindFiles", "arguments": {"path": root}},
        {"name": "SearchText", "arguments": {"query": "needle", "path": root}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "reply-1",
            Some("Reading."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    assert_eq!(v["pending_turn"]["kind"], "tool_results");
    assert_eq!(v["pending_turn"]["sequence"], 2);
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{v}");
    for (i, name) in ["Read", "FindFiles", "SearchText"].iter().enumerate() {
        assert_eq!(results[i]["call_index"], i);
        assert_eq!(results[i]["name"], *name);
        assert_eq!(results[i]["status"], "ok", "{}", results[i]);
        assert_eq!(results[i]["truncated"], false);
        assert!(
            results[i]["receipt"]["action_id"]
                .as_str()
                .unwrap()
                .starts_with("act_")
        );
    }
    let file_sha = common::hash::sha256_hex(&std::fs::read(&notes).unwrap());
    assert_eq!(results[0]["receipt"]["sha256"], file_sha.as_str());
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("needle here")
    );
    let listing = results[1]["output"].as_str().unwrap();
    let notes_at = listing.find("notes.txt").expect("notes.txt listed");
    let lib_at = listing.find("src/lib.rs").expect("src/lib.rs listed");
    assert!(notes_at < lib_at, "listing not sorted: {listing}");
    let matches = results[2]["output"].as_str().unwrap();
    assert!(matches.contains("notes.txt:2: needle here"), "{matches}");
    assert!(
        matches.contains("src/lib.rs:1: fn needle() {}"),
        "{matches}"
    );

    // text-only reply → idle with last_result
    let tool_turn = turn_id(&v);
    let r = chat
        .reply(
            &sid,
            &lease,
            &tool_turn,
            "reply-2",
            Some("The needle is on line 2."),
            None,
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "idle", "{v}");
    assert!(v["pending_turn"].is_null());
    assert_eq!(v["last_result"]["turn_id"], tool_turn.as_str());
    assert_eq!(v["last_result"]["text"], "The needle is on line 2.");

    // status with wait_seconds on an unchanging session waits, then returns the same revision
    let revision = v["revision"].as_u64().unwrap();
    let t = Instant::now();
    let s = view(&chat.status(&sid, &lease, 2).await.unwrap());
    assert!(
        t.elapsed() >= Duration::from_millis(1900),
        "status did not wait"
    );
    assert_eq!(s["revision"].as_u64().unwrap(), revision);

    // A long status wait returns as soon as the session changes: here, when continue is accepted.
    let (url, token, s2, l2) = (gw.url(), gw.token().to_string(), sid.clone(), lease.clone());
    let waiter = tokio::spawn(async move {
        let chat = ScriptedChatGpt::connect(&url, &token).await.unwrap();
        let t = Instant::now();
        let result = chat.status(&s2, &l2, 50).await.unwrap();
        (t.elapsed(), result)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = chat
        .continue_(
            &sid,
            &lease,
            "Now summarise it in one word",
            "e2e-continue",
            Some(0),
        )
        .await
        .unwrap();
    assert!(view(&r)["revision"].as_u64().unwrap() > revision);
    let (waited, result) = waiter.await.unwrap();
    assert!(
        waited < Duration::from_secs(20),
        "status waited {waited:?} past the change"
    );
    assert!(view(&result)["revision"].as_u64().unwrap() > revision);
    let v = chat
        .wait_until(&sid, &lease, Duration::from_secs(60), |v| {
            v["status"] == "waiting_for_gpt"
        })
        .await
        .unwrap();
    assert_eq!(v["pending_turn"]["kind"], "prompt");
    assert_eq!(v["pending_turn"]["prompt"], "Now summarise it in one word");
    assert_eq!(v["pending_turn"]["sequence"], 3);
    assert_eq!(v["claude_session_id"], claude_session_id.as_str());
    assert_eq!(v["current_run"]["generation"], 1);

    let r = chat
        .reply(&sid, &lease, &turn_id(&v), "reply-3", Some("Needle."), None)
        .await
        .unwrap();
    assert_eq!(view(&r)["status"], "idle");

    // stop → stopped, with the exit code observed from the runner
    let r = chat
        .stop(&sid, &lease, "stop-1", Some("done"))
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "stopped", "{v}");
    assert_eq!(v["stop_request"]["reason"], "done");
    assert_eq!(v["terminal"]["reason"], "stopped");
    let exit_code = v["terminal"]["exit_code"]
        .as_i64()
        .expect("exit code recorded");
    assert_eq!(v["current_run"]["state"], "exited");
    assert_eq!(v["current_run"]["exit_code"].as_i64(), Some(exit_code));
    assert_eq!(exit_code, 143, "Claude Code exits 143 on SIGTERM");

    // Same Claude Code conversation: the runner's transcript (complete once it exited) holds
    // both prompts and our replies.
    let transcript =
        find_file(gw.state_dir(), &format!("{claude_session_id}.jsonl")).expect("transcript");
    let text = std::fs::read_to_string(transcript).unwrap();
    assert!(text.contains("Look at notes.txt for me"));
    assert!(text.contains("The needle is on line 2."));
    assert!(text.contains("Needle."));
    assert!(text.contains("Now summarise it in one word"));

    // a stopped session refuses more work
    let r = chat
        .continue_(&sid, &lease, "more", "e2e-continue-2", Some(0))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "session_terminal");

    // the ledger recorded every action with its receipt, and the runner made no unapproved call
    let committed = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'action_committed'",
        &sid,
    );
    assert_eq!(committed, 3);
    let unapproved = count(
        &gw,
        "SELECT COUNT(*) FROM events WHERE kind = 'unapproved_call'",
    );
    assert_eq!(unapproved, 0);
}

fn find_file(root: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if entry.file_name().to_string_lossy() == name {
            return Some(path);
        }
    }
    None
}
