//! Nothing public contains a PID, a socket or state path, the runner token, the broker secret, the
//! server key or the gateway's access token — checked over every raw answer of a full session.

use serde_json::json;
use tests::McpClient;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_or_internal_detail_in_any_public_answer() {
    // The state dir sits alone in its parent, so a listing of the parent is about it alone.
    let parent = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .state_dir(parent.path().join("state"))
        .spawn()
        .await
        .unwrap();
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let client = McpClient::connect(&gw.url(), gw.token()).await.unwrap();
    let chat = ScriptedChatGpt::new(client);
    let dir = work_dir();
    let mut answers: Vec<String> = Vec::new();

    let v = start_session(&chat, dir.path(), "hello", "leak-start").await;
    answers.push(v.to_string());
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let file = dir.path().join("notes.txt").to_string_lossy().to_string();
    let parent = gw
        .state_dir()
        .parent()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let calls = json!([
        {"name": "Read", "arguments": {"file_path": file}},
        {"name": "FindFiles", "arguments": {"path": parent, "max_depth": 4}},
    ]);
    let r = chat
        .reply(&sid, &lease, &turn_id(&v), "leak-1", None, Some(calls))
        .await
        .unwrap();
    answers.push(r.to_string());
    let v = view(&r);
    // Listing the state dir's parent shows nothing inside the state dir.
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results[1]["status"], "ok", "{}", results[1]);
    assert!(
        !results[1]["output"].as_str().unwrap().contains("/state/"),
        "{}",
        results[1]
    );
    let r = chat
        .reply(&sid, &lease, &turn_id(&v), "leak-2", Some("ok"), None)
        .await
        .unwrap();
    answers.push(r.to_string());
    for r in [
        chat.status(&sid, &lease, 0).await.unwrap(),
        chat.status("ns_nope", &lease, 0).await.unwrap(),
        chat.status(&sid, "lease_bad", 0).await.unwrap(),
        chat.recover(
            &sid,
            v["recovery_token"].as_str().unwrap_or("none"),
            "leak-rec",
            0,
        )
        .await
        .unwrap(),
    ] {
        answers.push(r.to_string());
    }
    let stop = chat.stop(&sid, &lease, "leak-stop", None).await.unwrap();
    answers.push(stop.to_string());
    answers.push(chat.client.list_tools().await.unwrap().to_string());

    // Gather every secret and internal detail the session created.
    let db = state_db(&gw);
    let data: String = db
        .query_row("SELECT data FROM sessions WHERE id = ?1", [&sid], |r| {
            r.get(0)
        })
        .unwrap();
    let record: serde_json::Value = serde_json::from_str(&data).unwrap();
    let broker = &record["broker"];
    let mut forbidden: Vec<String> = vec![
        gw.token().to_string(),
        gw.state_dir().to_string_lossy().to_string(),
        broker["secret"].as_str().unwrap().to_string(),
        broker["socket_path"].as_str().unwrap().to_string(),
        broker["runtime_dir"].as_str().unwrap().to_string(),
        std::fs::read_to_string(gw.state_dir().join("auth/server-key"))
            .unwrap()
            .trim()
            .to_string(),
    ];
    let mcp_config = std::fs::read_to_string(format!(
        "{}/mcp.json",
        broker["runtime_dir"].as_str().unwrap()
    ))
    .unwrap();
    let runner_token = mcp_config
        .split("Bearer ")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    assert!(runner_token.starts_with("rnr_"));
    forbidden.push(runner_token);
    let pid = broker["pid"].as_i64().unwrap();
    let answers = answers.join("\n");
    for secret in &forbidden {
        assert!(
            !answers.contains(secret.as_str()),
            "public output leaks {secret:?}"
        );
    }
    for needle in [
        "brk_",
        "rnr_",
        "key_",
        "ngw_",
        "b.sock",
        "gateway.sqlite3\"",
        "\"pid\"",
    ] {
        assert!(
            !answers.contains(needle),
            "public output contains {needle:?}"
        );
    }
    for pattern in [
        format!(":{pid},"),
        format!(" {pid} "),
        format!("\"{pid}\""),
        format!("pid {pid}"),
    ] {
        assert!(
            !answers.contains(&pattern),
            "public output contains the broker pid ({pattern})"
        );
    }
}
