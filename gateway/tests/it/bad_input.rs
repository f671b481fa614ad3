//! Bad input gets a specific error code and leaves state consistent: nothing approved, nothing
//! half-written, the pending turn still pending.

use serde_json::{Value, json};

use crate::support::*;

async fn start_err(chat: &ScriptedChatGpt, args: Value) -> String {
    tool_err_code(&chat.call("native_session_start", args).await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn start_refuses_bad_input_with_specific_codes() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let wd = dir.path().to_string_lossy().to_string();
    let base = |extra: Value| {
        let mut args = json!({"prompt": "p", "working_directory": wd, "idempotency_key": "k"});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };

    assert_eq!(
        start_err(&chat, base(json!({"working_directory": "relative/dir"}))).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(
            &chat,
            base(json!({"working_directory": "/definitely/not/here"}))
        )
        .await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(
            &chat,
            base(json!({"working_directory": format!("{wd}/../x")}))
        )
        .await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, json!({"prompt": "p", "idempotency_key": "k"})).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(
            &chat,
            json!({"working_directory": wd, "idempotency_key": "k"})
        )
        .await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, json!({"prompt": "p", "working_directory": wd})).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, base(json!({"capability_profile": "root_access"}))).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, base(json!({"subagent_policy": "anything"}))).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, base(json!({"wait_seconds": 51}))).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, base(json!({"wait_seconds": -1}))).await,
        "invalid_argument"
    );
    assert_eq!(
        start_err(&chat, base(json!({"model": "gpt-5"}))).await,
        "invalid_argument"
    );
    let many: Vec<Value> = (0..9)
        .map(|i| json!({"skill_id": format!("personal:s{i}")}))
        .collect();
    assert_eq!(
        start_err(&chat, base(json!({"skill_contexts": many}))).await,
        "invalid_argument"
    );
    // The state dir is never a working directory.
    let state = gw.state_dir().to_string_lossy().to_string();
    assert_eq!(
        start_err(&chat, base(json!({"working_directory": state}))).await,
        "not_permitted"
    );
    // DeepSeek sub-sessions write only in a managed worktree: any other profile is bad input.
    for profile in ["read_only", "direct_write"] {
        assert_eq!(
            start_err(
                &chat,
                base(
                    json!({"capability_profile": profile, "subagent_policy": "deepseek_explicit"})
                )
            )
            .await,
            "invalid_argument",
            "{profile}"
        );
    }
    // An unknown profile is bad input.
    assert_eq!(
        start_err(&chat, base(json!({"capability_profile": "root_write"}))).await,
        "invalid_argument"
    );

    // None of these created a session.
    let sessions = count(&gw, "SELECT COUNT(*) FROM sessions");
    assert_eq!(sessions, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn replies_are_checked_before_anything_is_approved() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "hello", "bad-reply").await;
    let (sid, lease, turn) = (session_id(&v), lease_id(&v), turn_id(&v));
    let file = dir.path().join("notes.txt").to_string_lossy().to_string();

    let reply =
        |reply_id: &'static str, turn: String, text: Option<String>, calls: Option<Value>| {
            let (sid, lease) = (sid.clone(), lease.clone());
            let chat = &chat;
            async move {
                chat.reply(&sid, &lease, &turn, reply_id, text.as_deref(), calls)
                    .await
                    .unwrap()
            }
        };

    // not the pending turn
    let r = reply("r1", "turn_nope".into(), Some("x".into()), None).await;
    assert_eq!(tool_err_code(&r), "turn_mismatch");
    // over 768 KiB
    let r = reply("r2", turn.clone(), Some("x".repeat(786_433)), None).await;
    assert_eq!(tool_err_code(&r), "reply_too_large");
    // unknown tool
    let r = reply(
        "r3",
        turn.clone(),
        None,
        Some(json!([{"name": "Bash", "arguments": {"command": "ls"}}])),
    )
    .await;
    assert_eq!(tool_err_code(&r), "not_permitted");
    // write and DeepSeek tools in a read_only session, even after a valid call
    for name in ["Edit", "Write", "NotebookEdit", "deepseek_subagent_start"] {
        let calls = json!([
            {"name": "Read", "arguments": {"file_path": file}},
            {"name": name, "arguments": {"file_path": file, "content": "x"}},
        ]);
        let r = reply("r4", turn.clone(), None, Some(calls)).await;
        assert_eq!(tool_err_code(&r), "not_permitted", "{name}");
    }
    // malformed arguments
    for args in [
        json!({}),
        json!({"file_path": "relative"}),
        json!({"file_path": file, "limit": 0}),
        json!({"file_path": file, "extra": 1}),
    ] {
        let r = reply(
            "r5",
            turn.clone(),
            None,
            Some(json!([{"name": "Read", "arguments": args}])),
        )
        .await;
        assert_eq!(tool_err_code(&r), "invalid_argument", "{args}");
    }
    let r = chat
        .call("native_session_reply_and_wait", json!({"native_session_id": sid, "lease_id": lease, "turn_id": turn, "reply_id": "r6", "tool_calls": [{"name": "Read"}]}))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "invalid_argument");

    // Nothing was approved and the turn is still pending.
    let actions = count(&gw, "SELECT COUNT(*) FROM actions");
    assert_eq!(actions, 0);
    let replies = count(&gw, "SELECT COUNT(*) FROM replies");
    assert_eq!(replies, 0);
    let s = view(&chat.status(&sid, &lease, 0).await.unwrap());
    assert_eq!(s["status"], "waiting_for_gpt");
    assert_eq!(s["pending_turn"]["turn_id"], turn.as_str());

    // A refused reply id is not burnt: the same id with valid content is accepted.
    let r = reply("r4", turn.clone(), Some("fine".into()), None).await;
    assert_eq!(view(&r)["status"], "idle");

    // continue on a missing session, and a session id that does not exist
    let r = chat.status("ns_missing", &lease, 0).await.unwrap();
    assert_eq!(tool_err_code(&r), "not_found");
    let r = chat
        .call(
            "native_session_status",
            json!({"native_session_id": sid, "lease_id": lease, "wait_seconds": 99}),
        )
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "invalid_argument");
    chat.stop(&sid, &lease, "stop", None).await.unwrap();
}

/// Red team 23i: `native_session_id` and `working_directory` are bounded at the boundary, and an
/// error echoes only a short prefix of a refused value (1 MiB in came back as 2 MiB).
#[tokio::test(flavor = "multi_thread")]
async fn huge_ids_and_directories_are_refused_without_being_echoed() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let huge = format!("ns_{}", "a".repeat(1 << 20));
    let message = |r: &Value| {
        r.pointer("/structuredContent/error/message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let r = chat
        .call(
            "native_session_status",
            json!({"native_session_id": huge, "lease_id": "lease"}),
        )
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "invalid_argument", "{}", message(&r));
    let text = message(&r);
    assert!(
        text.starts_with(&format!(
            "native_session_id \"ns_{}\"… ({} bytes) is not one this gateway gives",
            "a".repeat(45),
            huge.len()
        )),
        "{text}"
    );
    assert!(r.to_string().len() < 2000, "{} bytes", r.to_string().len());
    let long_dir = format!("/{}", "d".repeat(1 << 20));
    let r = chat
        .call(
            "native_session_start",
            json!({"prompt": "p", "working_directory": long_dir, "idempotency_key": "k-huge"}),
        )
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "invalid_argument", "{}", message(&r));
    assert!(
        message(&r).starts_with("working_directory is longer than 4096 bytes (\"/ddd"),
        "{}",
        message(&r)
    );
    assert!(r.to_string().len() < 2000, "{} bytes", r.to_string().len());
}
