//! Idempotency (`idempotency_key`, `reply_id`, `request_id`, `recovery_id`) and leases (issued,
//! renewed, checked, rotated, expired).

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn same_request_replays_and_other_input_conflicts() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();

    let first = start_session(&chat, dir.path(), "hello", "idem-start").await;
    assert_eq!(first["replay"], false);
    let (sid, lease) = (session_id(&first), lease_id(&first));

    // Same key, same input (wait_seconds does not count) → the same answer, marked as a replay.
    let again = view(
        &chat
            .start_with(
                "hello",
                dir.path(),
                "idem-start",
                json!({"wait_seconds": 0}),
            )
            .await
            .unwrap(),
    );
    assert_eq!(again["replay"], true);
    assert_eq!(again["native_session_id"], sid.as_str());
    assert_eq!(again["lease_id"], lease.as_str());
    assert_eq!(again["recovery_token"], first["recovery_token"]);
    assert_eq!(again["pending_turn"], first["pending_turn"]);
    // Same key, other input → conflict; no second session.
    let r = chat
        .start("something else", dir.path(), "idem-start")
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "idempotency_conflict");
    let sessions = count(&gw, "SELECT COUNT(*) FROM sessions");
    assert_eq!(sessions, 1);

    // reply_id: same reply replays without a second delivery; other content conflicts.
    let turn = turn_id(&first);
    let file = dir.path().join("notes.txt").to_string_lossy().to_string();
    let calls = json!([{"name": "Read", "arguments": {"file_path": file}}]);
    let r1 = view(
        &chat
            .reply(&sid, &lease, &turn, "rep-1", Some("a"), Some(calls.clone()))
            .await
            .unwrap(),
    );
    assert_eq!(r1["replay"], false);
    assert_eq!(r1["pending_turn"]["kind"], "tool_results");
    let r2 = view(
        &chat
            .reply(&sid, &lease, &turn, "rep-1", Some("a"), Some(calls.clone()))
            .await
            .unwrap(),
    );
    assert_eq!(r2["replay"], true);
    assert_eq!(r2["pending_turn"], r1["pending_turn"]);
    let r3 = chat
        .reply(&sid, &lease, &turn, "rep-1", Some("b"), Some(calls))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r3), "idempotency_conflict");
    let actions = count(&gw, "SELECT COUNT(*) FROM actions");
    assert_eq!(
        actions, 1,
        "a replayed reply must not approve its calls again"
    );

    // Finish the turn, then continue: idempotency_key replays and conflicts the same way.
    let idle = view(
        &chat
            .reply(&sid, &lease, &turn_id(&r1), "rep-2", Some("done"), None)
            .await
            .unwrap(),
    );
    assert_eq!(idle["status"], "idle");
    let c1 = view(
        &chat
            .continue_(&sid, &lease, "next", "cont-1", Some(50))
            .await
            .unwrap(),
    );
    assert_eq!(c1["pending_turn"]["kind"], "prompt");
    let c2 = view(
        &chat
            .continue_(&sid, &lease, "next", "cont-1", Some(50))
            .await
            .unwrap(),
    );
    assert_eq!(c2["replay"], true);
    assert_eq!(c2["pending_turn"], c1["pending_turn"]);
    let c3 = chat
        .continue_(&sid, &lease, "other", "cont-1", Some(0))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&c3), "idempotency_conflict");
    // A new prompt while a turn is pending is refused, not queued.
    let c4 = chat
        .continue_(&sid, &lease, "other", "cont-2", Some(0))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&c4), "busy");

    // request_id on stop.
    let s1 = view(
        &chat
            .stop(&sid, &lease, "stop-1", Some("bye"))
            .await
            .unwrap(),
    );
    assert_eq!(s1["status"], "stopped");
    let s2 = view(
        &chat
            .stop(&sid, &lease, "stop-1", Some("bye"))
            .await
            .unwrap(),
    );
    assert_eq!(s2["replay"], true);
    assert_eq!(s2["terminal"], s1["terminal"]);
    let s3 = chat
        .stop(&sid, &lease, "stop-1", Some("other reason"))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&s3), "idempotency_conflict");
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_are_checked_renewed_rotated_and_expire() {
    // Long enough that a call slowed by a loaded machine (CI runs the suites in parallel on two
    // cores) does not outlast it; every step below is a fraction or a multiple of it.
    let ttl = 10;
    let gw = gateway_with(&[("CLAUDE_TOOLS_LEASE_TTL_SECONDS", "10")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "hello", "lease-start").await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let token = v["recovery_token"].as_str().unwrap().to_string();

    // A wrong lease, and another session's lease shape, are refused.
    let r = chat.status(&sid, "lease_0000", 0).await.unwrap();
    assert_eq!(tool_err_code(&r), "lease_invalid");

    // Every authenticated call renews the lease: calls every ttl/3 keep it alive past the ttl.
    let first_expiry = v["lease_expires_at"].as_str().unwrap().to_string();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(ttl / 3)).await;
        let s = view(&chat.status(&sid, &lease, 0).await.unwrap());
        assert!(s["lease_expires_at"].as_str().unwrap() > first_expiry.as_str());
    }

    // Left alone for longer than the TTL, the lease expires and the session with it.
    tokio::time::sleep(Duration::from_secs(ttl + 1)).await;
    let r = chat.status(&sid, &lease, 0).await.unwrap();
    assert_eq!(tool_err_code(&r), "lease_expired");
    // The expiry stops the runtime: its broker and runner are gone within the stop's bound (a
    // loaded host may take more than the sweep's second to end them; until then the gateway's
    // link to the exiting broker is, truthfully, still attached).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !session_processes(gw.state_dir()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the expired session's broker and runner still run after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The link's end is read a moment after the broker's exit.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Recovery with a wrong token is denied and changes nothing.
    let r = chat.recover(&sid, "rec_wrong", "rec-1", 0).await.unwrap();
    assert_eq!(tool_err_code(&r), "recovery_denied");
    // The right token rotates the lease: the old one stops working, the same id replays.
    // An expired session stays inspectable: recovery gives a lease to read it, and says plainly
    // that it is over.
    let rec = view(&chat.recover(&sid, &token, "rec-1", 0).await.unwrap());
    let new_lease = lease_id(&rec);
    assert_ne!(new_lease, lease);
    assert_eq!(rec["claude_session_id"], v["claude_session_id"]);
    assert_eq!(rec["status"], "expired");
    assert_eq!(rec["terminal"]["reason"], "lease_expired");
    assert_eq!(rec["runtime_attached"], false);
    let again = view(&chat.recover(&sid, &token, "rec-1", 0).await.unwrap());
    assert_eq!(again["replay"], true);
    assert_eq!(lease_id(&again), new_lease);
    let r = chat.status(&sid, &lease, 0).await.unwrap();
    assert_eq!(tool_err_code(&r), "lease_invalid");
    let s = view(&chat.status(&sid, &new_lease, 0).await.unwrap());
    assert_eq!(s["status"], "expired");
    let r = chat
        .continue_(&sid, &new_lease, "more", "lease-cont", Some(0))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "session_terminal");
    // The lease is stored only as its HMAC under the server key (never plain, never its plain
    // SHA-256, which a database writer could compute for a lease of their own).
    for stored in [
        new_lease.clone(),
        common::hash::sha256_hex(new_lease.as_bytes()),
    ] {
        let found = count_with(
            &gw,
            "SELECT COUNT(*) FROM leases WHERE lease_hash = ?1",
            stored,
        );
        assert_eq!(found, 0);
    }
    let key = std::fs::read_to_string(gw.state_dir().join("auth/server-key")).unwrap();
    let keyed = common::hash::stored_secret_hash(key.trim(), &format!("lease:{sid}"), &new_lease);
    let hashed = count_with(
        &gw,
        "SELECT COUNT(*) FROM leases WHERE lease_hash = ?1 AND revoked = 0",
        keyed.clone(),
    );
    let rows: Vec<(String, i64, i64, i64)> = {
        let db = state_db(&gw);
        let mut stmt = db
            .prepare("SELECT lease_hash, generation, revoked, expires_at_ms FROM leases")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(hashed, 1, "looked for {keyed}; the lease rows: {rows:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_duplicates_create_one_session_and_approve_once() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let dir = work_dir();
    let mut starts = Vec::new();
    for _ in 0..3 {
        let (url, token, path) = (gw.url(), gw.token().to_string(), dir.path().to_path_buf());
        starts.push(tokio::spawn(async move {
            let chat = ScriptedChatGpt::connect(&url, &token).await.unwrap();
            chat.start_with("same", &path, "dup-start", json!({"wait_seconds": 50}))
                .await
                .unwrap()
        }));
    }
    let mut ids = Vec::new();
    for start in starts {
        ids.push(session_id(&view(&start.await.unwrap())));
    }
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    let sessions = count(&gw, "SELECT COUNT(*) FROM sessions");
    assert_eq!(sessions, 1);

    // The same reply sent three times at once is approved once.
    let chat = chatgpt(&gw).await;
    let v = view(
        &chat
            .status(&ids[0], &lease_for(&chat, &dir).await, 0)
            .await
            .unwrap(),
    );
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let v = if v["pending_turn"].is_null() {
        chat.wait_until(&sid, &lease, Duration::from_secs(50), |v| {
            !v["pending_turn"].is_null()
        })
        .await
        .unwrap()
    } else {
        v
    };
    let turn = turn_id(&v);
    let file = dir.path().join("notes.txt").to_string_lossy().to_string();
    let mut replies = Vec::new();
    for _ in 0..3 {
        let (url, token) = (gw.url(), gw.token().to_string());
        let (sid, lease, turn, file) = (sid.clone(), lease.clone(), turn.clone(), file.clone());
        replies.push(tokio::spawn(async move {
            let chat = ScriptedChatGpt::connect(&url, &token).await.unwrap();
            let calls = json!([{"name": "Read", "arguments": {"file_path": file}}]);
            chat.reply(&sid, &lease, &turn, "dup-reply", None, Some(calls))
                .await
                .unwrap()
        }));
    }
    for reply in replies {
        let r = reply.await.unwrap();
        tool_ok(&r);
    }
    let actions = count(&gw, "SELECT COUNT(*) FROM actions");
    assert_eq!(actions, 1);
    let committed = count(
        &gw,
        "SELECT COUNT(*) FROM events WHERE kind = 'action_committed'",
    );
    assert_eq!(committed, 1, "the read ran more than once");
    chat.stop(&sid, &lease, "stop", None).await.unwrap();
}

/// The lease of the session started with key `dup-start` (a replay returns it).
async fn lease_for(chat: &ScriptedChatGpt, dir: &tempfile::TempDir) -> String {
    let replay = view(
        &chat
            .start_with("same", dir.path(), "dup-start", json!({"wait_seconds": 0}))
            .await
            .unwrap(),
    );
    assert_eq!(replay["replay"], true);
    lease_id(&replay)
}
