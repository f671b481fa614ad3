//! The MCP surface as a client sees it: the handshake revisions, exactly six tools with complete
//! metadata, auth by bearer header or capability URL, the Host check, unknown methods and tools.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::{McpClient, rpc_error_code};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn handshake_tools_and_protocol_errors() {
    let gw = gateway().await;
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let client = McpClient::builder(gw.url())
            .token(gw.token())
            .protocol_version(version)
            .connect()
            .await
            .unwrap();
        assert_eq!(client.negotiated_version().as_deref(), Some(version));
        assert!(client.init_result()["capabilities"]["tools"].is_object());
    }

    let client = McpClient::connect(&gw.url(), gw.token()).await.unwrap();
    let tools = client.list_tools().await.unwrap();
    let tools = tools["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "native_session_start",
            "native_session_continue",
            "native_session_reply_and_wait",
            "native_session_status",
            "native_session_recover",
            "native_session_stop"
        ]
    );
    for tool in tools {
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(
                tool["annotations"][hint].is_boolean(),
                "{} lacks {hint}",
                tool["name"]
            );
        }
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(
            tool["inputSchema"]["additionalProperties"], false,
            "{}",
            tool["name"]
        );
        // A SessionView, or the error shape of an isError result.
        let output = &tool["outputSchema"];
        assert_eq!(output["type"], "object");
        assert!(output["anyOf"][0]["properties"]["pending_turn"].is_object());
        assert_eq!(output["anyOf"][1]["required"], json!(["error"]));
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
    }

    // Unknown tool → protocol error; unknown and unadvertised methods → -32601.
    let r = client
        .call_tool("native_session_delete", json!({}))
        .await
        .unwrap();
    assert_eq!(rpc_error_code(&r), Some(-32602), "{r}");
    for method in [
        "foo/bar",
        "resources/list",
        "prompts/list",
        "completion/complete",
    ] {
        let (_, body) = client.raw(method, Some(json!({}))).await.unwrap();
        assert_eq!(rpc_error_code(&body), Some(-32601), "{method}: {body}");
    }
    // server/discover is answered at once (a result or an error, never a hang).
    let t = Instant::now();
    let (status, body) = client
        .raw("server/discover", Some(json!({})))
        .await
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        body.get("result").is_some() || body.get("error").is_some(),
        "{status}: {body}"
    );
}

fn init_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_and_host_checks() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS", "tunnel.example.com")]).await;
    let body = init_body();
    let json_headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let post = |url: String, extra: Vec<(&'static str, String)>| {
        let body = body.clone();
        async move {
            let mut headers: Vec<(&str, String)> = json_headers
                .iter()
                .map(|(k, v)| (*k, v.to_string()))
                .collect();
            headers.extend(extra);
            let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            McpClient::post_raw(&url, &body, &refs).await.unwrap()
        }
    };
    let bearer = format!("Bearer {}", gw.token());

    // Missing or wrong token: 401 with a short JSON body that says nothing about the token.
    let refusal = |text: &str| {
        let body: Value = serde_json::from_str(text).unwrap();
        assert_eq!(body["error"], "invalid_token", "{body}");
        assert!(!text.contains(gw.token()));
    };
    let (status, text) = post(gw.url(), vec![]).await;
    assert_eq!(status.as_u16(), 401);
    refusal(&text);
    let (status, text) = post(gw.url(), vec![("authorization", "Bearer wrong".into())]).await;
    assert_eq!(status.as_u16(), 401);
    refusal(&text);
    let (status, _) = post(format!("{}/mcp/wrong-token", gw.base_url()), vec![]).await;
    assert_eq!(status.as_u16(), 401);
    // Right token by header or capability URL.
    let (status, text) = post(gw.url(), vec![("authorization", bearer.clone())]).await;
    assert_eq!(status.as_u16(), 200, "{text}");
    let (status, text) = post(gw.capability_url(), vec![]).await;
    assert_eq!(status.as_u16(), 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");

    // Host: loopback and configured hosts pass; anything else is refused (DNS rebinding).
    let (status, _) = post(
        gw.url(),
        vec![
            ("authorization", bearer.clone()),
            ("host", "tunnel.example.com".into()),
        ],
    )
    .await;
    assert_eq!(status.as_u16(), 200);
    let (status, _) = post(
        gw.url(),
        vec![
            ("authorization", bearer.clone()),
            ("host", "evil.example.net".into()),
        ],
    )
    .await;
    assert_eq!(status.as_u16(), 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_serves_the_same_tools() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let state = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(GATEWAY)
        .args(["serve", "--stdio"])
        .env("CLAUDE_TOOLS_STATE_DIR", state.path().join("state"))
        .env("CLAUDE_BIN", tests::claude_bin())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "native_session_start", "arguments": {"prompt": "p", "working_directory": "relative", "idempotency_key": "k"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}),
    ];
    for message in messages {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 4 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("stdio answer in time")
            .unwrap()
            .expect("stdout open");
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_i64() {
            answers.insert(id, v);
        }
    }
    assert_eq!(answers[&1]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(answers[&2]["result"]["tools"].as_array().unwrap().len(), 6);
    assert_eq!(answers[&3]["result"]["isError"], true);
    assert_eq!(
        answers[&3]["result"]["structuredContent"]["error"]["code"],
        "invalid_argument"
    );
    assert_eq!(answers[&4]["error"]["code"], -32602);
}

/// SIGTERM to `gateway serve --stdio`: it answers what it was asked, then exits 0.
#[tokio::test(flavor = "multi_thread")]
async fn stdio_stops_gracefully_on_sigterm() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let state = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(GATEWAY)
        .args(["serve", "--stdio"])
        .env("CLAUDE_TOOLS_STATE_DIR", state.path().join("state"))
        .env("CLAUDE_BIN", tests::claude_bin())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id"], 1);
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the gateway exits after SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(12));
    drop(stdin);
}
