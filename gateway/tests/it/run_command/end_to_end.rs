//! One RunCommand session end to end with the real Claude Code runner.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn run_command_end_to_end_with_real_runner() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Run two commands", "rc-e2e-start").await;
    let sid = session_id(&v);
    let lease = lease_id(&v);
    assert_eq!(
        v["pending_turn"]["allowed_tools"],
        json!(["Read", "FindFiles", "SearchText", "RunCommand"])
    );
    let calls = json!([
        {"name": "RunCommand", "arguments": {"argv": ["/bin/echo", "hi"]}},
        {"name": "RunCommand", "arguments": {"argv": ["git", "status"]}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "rc-e2e-reply-1",
            Some("Running them."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    assert_eq!(v["pending_turn"]["kind"], "tool_results", "{v}");
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert_eq!(results[0]["name"], "RunCommand");
    assert_eq!(results[0]["status"], "ok", "{v}");
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("--- stdout ---\nhi\n"),
        "{v}"
    );
    assert_eq!(results[0]["receipt"]["exit_code"], 0, "{v}");
    assert!(results[0]["receipt"]["duration_ms"].is_u64());
    // The work dir is not a repository: git says so, and its exit code is in the receipt.
    assert_eq!(results[1]["receipt"]["exit_code"], 128, "{v}");
    assert!(
        results[1]["output"]
            .as_str()
            .unwrap()
            .contains("not a git repository"),
        "{v}"
    );
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "rc-e2e-reply-2",
            Some("Done."),
            None,
        )
        .await
        .unwrap();
    assert_eq!(view(&r)["status"], "idle", "{r}");
    chat.stop(&sid, &lease, "rc-e2e-stop", None).await.unwrap();
}
