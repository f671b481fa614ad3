//! Every stable error code, triggered the way ChatGPT would meet it, with its message: each
//! message says what to do next. Snapshotted: a changed message is a deliberate change.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const LEASE_TTL_SECONDS: u64 = 10;

/// `code: message` of a tool error, with the ids of this run replaced by placeholders.
fn line(result: &Value, ids: &[(&str, &str)]) -> String {
    let code = tool_err_code(result);
    let mut message = result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    for (id, placeholder) in ids {
        message = message.replace(id, placeholder);
    }
    // The text content says the same as the structured error, for clients that read only text.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"], "{result}");
    format!("{code}: {message}")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_error_code_says_what_to_do_next() {
    let ttl = LEASE_TTL_SECONDS.to_string();
    let gw = gateway_with(&[("CLAUDE_TOOLS_LEASE_TTL_SECONDS", ttl.as_str())]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let mut lines = Vec::new();

    let r = chat.start("hello", "relative/dir", "em-bad").await.unwrap();
    lines.push(line(&r, &[]));
    let r = chat.status("ns_nope", "lease_nope", 0).await.unwrap();
    lines.push(line(&r, &[]));

    let v = start_session(&chat, dir.path(), "hello", "em-1").await;
    let (sid, lease, turn) = (session_id(&v), lease_id(&v), turn_id(&v));
    let ids = [(sid.as_str(), "<session>"), (turn.as_str(), "<turn>")];
    let r = chat
        .start_with(
            "another prompt",
            dir.path(),
            "em-1",
            json!({"wait_seconds": 50}),
        )
        .await
        .unwrap();
    lines.push(line(&r, &ids));
    let r = chat.status(&sid, "lease_wrong", 0).await.unwrap();
    lines.push(line(&r, &ids));
    let r = chat
        .recover(&sid, "wrong-token", "em-rec", 0)
        .await
        .unwrap();
    lines.push(line(&r, &ids));
    let r = chat
        .continue_(&sid, &lease, "more", "em-c1", Some(0))
        .await
        .unwrap();
    lines.push(line(&r, &ids));
    let r = chat
        .reply(&sid, &lease, "turn_nope", "em-r1", Some("hi"), None)
        .await
        .unwrap();
    lines.push(line(&r, &ids));
    let edit = json!([{"name": "Edit", "arguments": {
        "file_path": dir.path().join("notes.txt"), "old_string": "alpha", "new_string": "beta"}}]);
    let r = chat
        .reply(&sid, &lease, &turn, "em-r2", None, Some(edit))
        .await
        .unwrap();
    let dir_text = dir.path().to_string_lossy().to_string();
    let mut with_dir = ids.to_vec();
    with_dir.push((dir_text.as_str(), "<dir>"));
    lines.push(line(&r, &with_dir));
    let huge = "x".repeat(800 * 1024);
    let r = chat
        .reply(&sid, &lease, &turn, "em-r3", Some(&huge), None)
        .await
        .unwrap();
    lines.push(line(&r, &ids));
    let bad_read = json!([{"name": "Read", "arguments": {"file_path": "notes.txt"}}]);
    let r = chat
        .reply(&sid, &lease, &turn, "em-r4", None, Some(bad_read))
        .await
        .unwrap();
    lines.push(line(&r, &ids));

    // A session whose directory was replaced at the same path is not recovered into.
    let parent = work_dir();
    let swapped = std::fs::canonicalize(parent.path())
        .unwrap()
        .join("swapped");
    std::fs::create_dir(&swapped).unwrap();
    let v2 = start_session(&chat, &swapped, "hello", "em-2").await;
    let sid2 = session_id(&v2);
    std::fs::rename(&swapped, swapped.with_extension("old")).unwrap();
    std::fs::create_dir(&swapped).unwrap();
    let r = chat
        .recover(&sid2, v2["recovery_token"].as_str().unwrap(), "em-rec2", 0)
        .await
        .unwrap();
    let swapped_text = swapped.to_string_lossy().to_string();
    lines.push(line(
        &r,
        &[
            (sid2.as_str(), "<session 2>"),
            (swapped_text.as_str(), "<dir 2>"),
        ],
    ));
    chat.stop(&sid2, &lease_id(&v2), "em-stop2", None)
        .await
        .unwrap();

    chat.stop(&sid, &lease, "em-stop", None).await.unwrap();
    let r = chat
        .continue_(&sid, &lease, "more", "em-c2", Some(0))
        .await
        .unwrap();
    lines.push(line(&r, &ids));

    // No call for longer than the lease lives.
    tokio::time::sleep(Duration::from_secs(LEASE_TTL_SECONDS + 2)).await;
    let r = chat.status(&sid, &lease, 0).await.unwrap();
    lines.push(line(&r, &ids));

    // `storage_full`: a gateway whose state dir is past its budget (issue 24) refuses a start.
    let full = tempfile::tempdir().unwrap();
    std::fs::write(full.path().join("ballast"), vec![7u8; 65 << 20]).unwrap();
    let small = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("CLAUDE_TOOLS_STATE_MAX_MB", "64")
        .state_dir(full.path())
        .spawn()
        .await
        .unwrap();
    let small_chat = chatgpt(&small).await;
    let r = small_chat
        .start("hello", dir.path(), "em-full")
        .await
        .unwrap();
    let used = r["structuredContent"]["error"]["message"]
        .as_str()
        .and_then(|m| m.split(" holds ").nth(1))
        .and_then(|m| m.split(' ').next())
        .unwrap_or_default()
        .to_string();
    lines.push(line(
        &r,
        &[(&format!("holds {used} MiB"), "holds <used> MiB")],
    ));
    drop(small_chat);
    drop(small);

    // `internal` cannot be provoked from outside without breaking the state store: its
    // message, as the store failure maps to it.
    let internal = gateway::error::ToolError::from(gateway::state::StoreError::Schema(
        "/private/state/path".into(),
    ));
    assert!(!internal.message.contains("/private"));
    lines.push(format!("{}: {}", internal.code.as_str(), internal.message));
    // `ledger_broken` is provoked end to end in `ledger_verify`; its message, without the row.
    let broken = gateway::error::ToolError::from(gateway::state::StoreError::LedgerBroken(
        "events 7: hash does not match".into(),
    ));
    assert!(!broken.message.contains("events 7"));
    lines.push(format!("{}: {}", broken.code.as_str(), broken.message));

    let codes: std::collections::BTreeSet<&str> =
        lines.iter().filter_map(|l| l.split(':').next()).collect();
    for code in [
        "invalid_argument",
        "idempotency_conflict",
        "lease_invalid",
        "lease_expired",
        "not_found",
        "turn_mismatch",
        "not_permitted",
        "reply_too_large",
        "session_terminal",
        "recovery_denied",
        "busy",
        "workspace_changed",
        "storage_full",
        "ledger_broken",
        "internal",
    ] {
        assert!(codes.contains(code), "{code} not triggered: {lines:#?}");
    }
    insta::assert_snapshot!(lines.join("\n"));
}
