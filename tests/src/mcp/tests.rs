//! Unit tests of the test MCP client: SSE parsing (priming, notifications, CRLF, other ids), JSON
//! and empty bodies, the tool-result helpers, and the handshake against a fake server.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn sse_takes_the_response_event_and_skips_priming_and_notifications() {
    let body = "id: 0\ndata:\n\n: keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\nevent: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\n\
data: \"result\":{\"ok\":true}}\n\n";
    let v = parse_mcp_body(Some("text/event-stream"), body, Some(&json!(3))).unwrap();
    assert_eq!(v["result"]["ok"], json!(true));
    let events = parse_sse_events(body);
    assert_eq!(events.len(), 3);
    assert_eq!(events[0].data, "");
    assert_eq!(events[2].id.as_deref(), Some("7"));
}

#[test]
fn sse_handles_crlf_and_missing_trailing_blank_line() {
    let body = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"nope\"}}";
    let v = parse_mcp_body(
        Some("text/event-stream; charset=utf-8"),
        body,
        Some(&json!(1)),
    )
    .unwrap();
    assert_eq!(rpc_error_code(&v), Some(-32601));
}

#[test]
fn sse_ignores_responses_for_other_ids() {
    let body = "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n\n";
    assert!(parse_mcp_body(Some("text/event-stream"), body, Some(&json!(1))).is_err());
    assert!(parse_mcp_body(Some("text/event-stream"), body, None).is_ok());
}

#[test]
fn json_bodies_and_empty_bodies() {
    let v = parse_mcp_body(
        Some("application/json"),
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        None,
    )
    .unwrap();
    assert_eq!(v["id"], json!(1));
    assert_eq!(parse_mcp_body(None, "", None).unwrap(), Value::Null);
    assert!(parse_mcp_body(Some("application/json"), "nope", None).is_err());
}

#[test]
fn tool_result_helpers() {
    let ok = json!({"content": [], "structuredContent": {"status": "idle"}, "isError": false});
    assert_eq!(tool_ok(&ok)["status"], "idle");
    let err = json!({"content": [], "isError": true,
        "structuredContent": {"error": {"code": "not_found", "message": "no such session"}}});
    assert_eq!(tool_err_code(&err), "not_found");
    assert_eq!(
        rpc_error_code(&json!({"code": -32602, "message": "Unknown tool"})),
        Some(-32602)
    );
    assert_eq!(rpc_error_code(&ok), None);
    assert!(std::panic::catch_unwind(|| tool_ok(&err).clone()).is_err());
    assert!(std::panic::catch_unwind(|| tool_err_code(&ok)).is_err());
}

/// A fake server answering each HTTP request with a canned response, recording requests.
async fn fake_server(
    answers: Vec<(u16, &'static str, String)>,
) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let mut seen = Vec::new();
        for (status, ct, body) in answers {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = sock.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(pos) = text.find("\r\n\r\n") {
                    let len = text[..pos]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if buf.len() >= pos + 4 + len {
                        seen.push(text);
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let resp = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(resp.as_bytes()).await.unwrap();
            sock.shutdown().await.ok();
        }
        seen
    });
    (url, handle)
}

#[tokio::test]
async fn connect_sends_handshake_headers_and_parses_sse_answers() {
    let init = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"x\",\"version\":\"1\"}}}".to_owned();
    let tools = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"t\"}]}}\n\n".to_owned();
    let call = "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: nope\"}}".to_owned();
    let (url, server) = fake_server(vec![
        (200, "application/json", init),
        (202, "application/json", String::new()),
        (200, "text/event-stream", tools),
        (200, "application/json", call),
    ])
    .await;
    let client = McpClient::connect(&url, "tok").await.unwrap();
    assert_eq!(client.negotiated_version().as_deref(), Some("2025-06-18"));
    let listed = client.list_tools().await.unwrap();
    assert_eq!(listed["tools"][0]["name"], "t");
    let err = client.call_tool("nope", json!({})).await.unwrap();
    assert_eq!(rpc_error_code(&err), Some(-32602));
    let seen = server.await.unwrap();
    let lower: Vec<String> = seen.iter().map(|s| s.to_ascii_lowercase()).collect();
    assert!(lower[0].contains("authorization: bearer tok"));
    assert!(lower[0].contains("accept: application/json, text/event-stream"));
    assert!(lower[0].contains("\"method\":\"initialize\""));
    assert!(lower[0].contains("\"protocolversion\":\"2025-06-18\""));
    assert!(!lower[0].contains("mcp-protocol-version"));
    assert!(lower[1].contains("notifications/initialized"));
    assert!(lower[2].contains("mcp-protocol-version: 2025-06-18"));
}

#[tokio::test]
async fn raw_http_overrides_and_drops_default_headers() {
    let (url, server) = fake_server(vec![(401, "text/plain", String::new())]).await;
    let client = McpClient::builder(&url).token("tok").build().unwrap();
    let (status, text) = client
        .raw_http("{}", &[("authorization", ""), ("host", "evil.example")])
        .await
        .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(text.is_empty());
    let seen = server.await.unwrap().join("").to_ascii_lowercase();
    assert!(!seen.contains("authorization"));
    assert!(seen.contains("host: evil.example"), "{seen}");
}

/// One JSON-RPC `result` answer with `structured` as a tool result (and its text).
fn tool_result(id: u32, structured: serde_json::Value, is_error: bool) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": structured.to_string()}],
        "structuredContent": structured,
        "isError": is_error,
    }})
    .to_string()
}

/// A `tools/list` answer advertising `status` with an output schema that admits `{status}` or
/// `{error: {code, message}}`.
fn listing(id: u32) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
        "name": "status",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "anyOf": [
            {"type": "object", "required": ["status"], "properties": {"status": {"enum": ["idle", "running"]}}},
            {"type": "object", "required": ["error"], "properties": {"error": {
                "type": "object", "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
        ]},
    }]}})
    .to_string()
}

/// A stateless client on a shared HTTP client: `call_tool_ok` gives the structured content of
/// a success (checked against the advertised outputSchema, fetched once) and refuses an error
/// result or a JSON-RPC error; `request` refuses a non-2xx.
#[tokio::test]
async fn stateless_calls_on_a_shared_http_client() {
    let ok = tool_result(1, json!({"status": "idle"}), false);
    let tool_error = tool_result(3, json!({"error": {"code": "busy", "message": "m"}}), true);
    let rpc_error = "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: nope\"}}".to_owned();
    let (url, server) = fake_server(vec![
        (200, "application/json", ok),
        (200, "application/json", listing(2)),
        (200, "application/json", tool_error),
        (200, "application/json", rpc_error),
        (500, "text/plain", "down".to_owned()),
    ])
    .await;
    let shared = reqwest::Client::builder().no_proxy().build().unwrap();
    let client = McpClient::builder(&url)
        .token("tok")
        .http_client(shared)
        .header("mcp-protocol-version", DEFAULT_PROTOCOL_VERSION)
        .build()
        .unwrap();
    let view = client.call_tool_ok("status", json!({})).await.unwrap();
    assert_eq!(view, json!({"status": "idle"}));
    let err = client.call_tool_ok("status", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("\"busy\""), "{err}");
    let err = client.call_tool_ok("nope", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("-32602"), "{err}");
    let err = client.request("tools/list", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("HTTP 500"), "{err}");
    let seen = server.await.unwrap();
    assert!(
        seen[0]
            .to_ascii_lowercase()
            .contains("mcp-protocol-version: 2025-06-18")
    );
    assert!(seen[1].contains("tools/list"), "{}", seen[1]);
}

/// A result the advertised outputSchema does not admit, or whose text says something else than
/// its structuredContent, is an error of the call, as a validating client would make it.
#[tokio::test]
async fn results_that_break_the_advertised_schema_are_errors() {
    let (url, server) = fake_server(vec![
        (
            200,
            "application/json",
            tool_result(1, json!({"status": "idle"}), false),
        ),
        (200, "application/json", listing(2)),
        (
            200,
            "application/json",
            tool_result(3, json!({"status": "asleep"}), false),
        ),
        (
            200,
            "application/json",
            tool_result(4, json!({"error": {"code": "busy"}}), true),
        ),
        (
            200,
            "application/json",
            json!({"jsonrpc": "2.0", "id": 5, "result": {
                "content": [{"type": "text", "text": "{\"status\":\"running\"}"}],
                "structuredContent": {"status": "idle"}, "isError": false}})
            .to_string(),
        ),
        (
            200,
            "application/json",
            tool_result(6, json!({"status": "idle"}), false),
        ),
    ])
    .await;
    let client = McpClient::builder(&url).token("tok").build().unwrap();
    client.call_tool("status", json!({})).await.unwrap();
    let err = client.call_tool("status", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("does not validate"), "{err}");
    let err = client.call_tool("status", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("does not validate"), "{err}");
    let err = client.call_tool("status", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("differ"), "{err}");
    // A tool the listing does not advertise.
    let err = client.call_tool("stop", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("does not advertise"), "{err}");
    assert_eq!(
        server.await.unwrap().len(),
        6,
        "the listing was fetched once"
    );
}
