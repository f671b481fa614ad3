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
        assert!(tool["outputSchema"]["properties"]["pending_turn"].is_object());
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

    // Missing or wrong token: 401 and nothing else.
    let (status, text) = post(gw.url(), vec![]).await;
    assert_eq!(status.as_u16(), 401);
    assert!(text.is_empty());
    let (status, text) = post(gw.url(), vec![("authorization", "Bearer wrong".into())]).await;
    assert_eq!(status.as_u16(), 401);
    assert!(text.is_empty());
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
