//! HTTP as clients and the spec expect it: 401 with `WWW-Authenticate: Bearer` and a JSON body,
//! a case-insensitive bearer scheme, trailing-slash endpoints, JSON-RPC parse errors for
//! malformed bodies; and connections that cannot be held forever: half-sent heads and bodies and
//! idle keep-alive connections are closed within their timeouts, and the connection cap holds;
//! under a flood the owner keeps both a fresh and a kept-alive connection.
//! The log written to a file carries no colour codes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

fn init_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "http-conventions", "version": "1"}}})
    .to_string()
}

async fn post(
    url: &str,
    body: &str,
    auth: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(auth) = auth {
        req = req.header("authorization", auth);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_challenges_schemes_and_trailing_slashes() {
    let gw = gateway().await;
    let body = init_body();
    let token = gw.token().to_string();

    // No token: a challenge naming the OAuth resource metadata (`--auth both`, the default; a
    // bare `Bearer` with `--auth token`, see the oauth tests). Wrong token: invalid_token. Both:
    // a short JSON body.
    let metadata = format!(
        "resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"",
        gw.base_url()
    );
    let (status, headers, text) = post(&gw.url(), &body, None).await;
    assert_eq!(status, 401);
    assert_eq!(
        headers["www-authenticate"],
        format!("Bearer {metadata}").as_str()
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"], "invalid_token");
    assert!(text.len() < 300, "{text}");
    let (status, headers, text) = post(&gw.url(), &body, Some("Bearer wrong")).await;
    assert_eq!(status, 401);
    assert_eq!(
        headers["www-authenticate"],
        format!("Bearer {metadata}, error=\"invalid_token\"").as_str()
    );
    assert!(!text.contains(&token));
    for wrong in ["Basic Zm9vOmJhcg==", "Bearer", "Bearer ", "Token abc"] {
        let (status, _, _) = post(&gw.url(), &body, Some(wrong)).await;
        assert_eq!(status, 401, "{wrong}");
    }
    let wrong_capability = format!("{}/mcp/wrong/", gw.base_url());
    let (status, headers, _) = post(&wrong_capability, &body, None).await;
    assert_eq!(status, 401);
    assert!(headers.contains_key("www-authenticate"));

    // The scheme is case-insensitive; `/mcp/` and `/mcp/<token>/` work like their bare forms.
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} {token}");
        let (status, _, text) = post(&gw.url(), &body, Some(&auth)).await;
        assert_eq!(status, 200, "{scheme}: {text}");
    }
    let (status, _, text) = post(
        &format!("{}/mcp/", gw.base_url()),
        &body,
        Some(&format!("Bearer {token}")),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    for url in [gw.capability_url(), format!("{}/", gw.capability_url())] {
        let (status, _, text) = post(&url, &body, None).await;
        assert_eq!(status, 200, "{url}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    }
}

/// A log file (here the fixture's captured stderr, as a service's log) is plain text: no ANSI
/// colour codes when stderr is not a terminal.
#[tokio::test(flavor = "multi_thread")]
async fn the_log_file_has_no_colour_codes() {
    let gw = gateway().await;
    let (status, _, _) = post(&gw.url(), &init_body(), None).await;
    assert_eq!(status, 401);
    let log = gw.stderr_log();
    assert!(log.contains("INFO"), "the gateway logged nothing:\n{log}");
    assert!(!log.contains('\u{1b}'), "ANSI escapes in the log:\n{log:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_bodies_get_json_rpc_errors() {
    let gw = gateway().await;
    let auth = format!("Bearer {}", gw.token());
    for malformed in [
        "{\"jsonrpc\": \"2.0\", \"id\": 1,",
        "not json",
        "",
        "\u{7f}\u{0}",
    ] {
        let (status, _, text) = post(&gw.url(), malformed, Some(&auth)).await;
        assert_eq!(status, 400, "{malformed:?}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["error"]["code"], -32700, "{v}");
        assert_eq!(v["id"], Value::Null);
    }
    // Well-formed JSON that is no JSON-RPC message: Invalid Request, with its id when it has one.
    for (not_rpc, id) in [
        (json!({"id": 7, "method": 12}), json!(7)),
        (json!({"hello": "world"}), Value::Null),
        (json!([1, 2]), Value::Null),
        (json!("text"), Value::Null),
    ] {
        let (status, _, text) = post(&gw.url(), &not_rpc.to_string(), Some(&auth)).await;
        assert_eq!(status, 400, "{not_rpc}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], -32600, "{v}");
        assert_eq!(v["id"], id, "{v}");
    }
    // A body that is not JSON at all by its media type stays 415, and a bad Host stays 403.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = http
        .post(gw.url())
        .header("authorization", &auth)
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body(init_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 415);
    let resp = http
        .post(gw.url())
        .header("authorization", &auth)
        .header("host", "evil.example.net")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
}

/// A connection that sent a whole request head for `path` (with the bearer `token`, if any) and
/// the first bytes of its body.
async fn half_body(addr: &str, path: &str, token: Option<&str>) -> TcpStream {
    let rest = init_body();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        rest.len()
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&rest.as_bytes()[..10]).await.unwrap();
    s
}

/// A stranger who fills every connection slot and keeps re-opening them as fast as they are
/// closed: silent connections, half-sent heads and half-sent anonymous bodies to `body_path`, in
/// turn, one every `pause_ms`, holding the newest `hold`; bounded by `max` connections and
/// `stop`. Its result is how many connections it opened.
fn slot_flood(
    addr: &str,
    stop: &tokio_util::sync::CancellationToken,
    hold: usize,
    max: usize,
    body_path: &'static str,
    pause_ms: u64,
) -> tokio::task::JoinHandle<usize> {
    let (addr, stop) = (addr.to_string(), stop.clone());
    tokio::spawn(async move {
        let mut held = std::collections::VecDeque::new();
        let mut opened = 0usize;
        while !stop.is_cancelled() && opened < max {
            let s = match opened % 3 {
                0 => TcpStream::connect(&addr).await.unwrap(),
                1 => {
                    let mut s = TcpStream::connect(&addr).await.unwrap();
                    let _ = s
                        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                        .await;
                    s
                }
                _ => half_body(&addr, body_path, None).await,
            };
            opened += 1;
            held.push_back(s);
            if held.len() > hold {
                held.pop_front();
            }
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        }
        opened
    })
}

/// Strangers who fill every connection slot (silent connections, half-sent heads, anonymous
/// half-sent bodies) and keep opening more never keep the owner out: the oldest connection that
/// serves no authenticated request makes way for a new one. Behind a tunnel every client is
/// 127.0.0.1, so nothing per address could tell them apart.
#[tokio::test(flavor = "multi_thread")]
async fn strangers_holding_every_slot_cannot_keep_the_owner_out() {
    const CAP: usize = 16;
    let cap = CAP.to_string();
    let gw = gateway_with(&[
        ("CLAUDE_TOOLS_HTTP_MAX_CONNECTIONS", cap.as_str()),
        ("CLAUDE_TOOLS_HTTP_HEADER_TIMEOUT_SECONDS", "60"),
        ("CLAUDE_TOOLS_HTTP_BODY_TIMEOUT_SECONDS", "60"),
    ])
    .await;
    let addr = gw.addr();
    let auth = format!("Bearer {}", gw.token());
    let stop = tokio_util::sync::CancellationToken::new();
    let attacker = slot_flood(&addr, &stop, 3 * CAP, 5_000, "/oauth/register", 5);
    // Let the flood fill every slot first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let (status, _, _) = post(&gw.url(), &init_body(), Some(&auth)).await;
        statuses.push(status);
    }
    stop.cancel();
    let opened = attacker.await.unwrap();
    assert!(
        opened > 3 * CAP,
        "the attacker opened only {opened} connections"
    );
    assert!(
        statuses.iter().all(|s| *s == 200),
        "the owner got {statuses:?} while {opened} connections were opened against it"
    );
}

/// One request on the owner's persistent connection `s` (keep-alive): its status, or why the
/// connection failed. The whole answer is read (by `Content-Length` or to the last chunk) so the
/// next request can follow on the same connection.
async fn on_kept_connection(s: &mut TcpStream, token: &str) -> Result<u16, String> {
    let body = init_body();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = tokio::time::timeout_at(deadline, s.read(&mut buf))
            .await
            .map_err(|_| "no answer within 5 s".to_string())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("closed after {} bytes", got.len()));
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let head = text[..end].to_ascii_lowercase();
        let status: u16 = head[9..12].parse().map_err(|_| head.clone())?;
        let rest = &got[end + 4..];
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse::<usize>().unwrap());
        let complete = match length {
            Some(length) => rest.len() >= length,
            None => rest.ends_with(b"0\r\n\r\n"),
        };
        if complete {
            return Ok(status);
        }
    }
}

/// RT29 B4: the owner's idle keep-alive connection (a pooling client's) is older than every
/// stranger's, and it is still not the one that makes way: a connection that carried an
/// authenticated request keeps its slot while strangers hold and churn half-open connections.
#[tokio::test(flavor = "multi_thread")]
async fn the_owners_kept_alive_connection_survives_a_flood_of_half_open_ones() {
    const CAP: usize = 16;
    let cap = CAP.to_string();
    let gw = gateway_with(&[
        ("CLAUDE_TOOLS_HTTP_MAX_CONNECTIONS", cap.as_str()),
        ("CLAUDE_TOOLS_HTTP_HEADER_TIMEOUT_SECONDS", "60"),
        ("CLAUDE_TOOLS_HTTP_BODY_TIMEOUT_SECONDS", "60"),
    ])
    .await;
    let addr = gw.addr();
    let mut owner = TcpStream::connect(&addr).await.unwrap();
    assert_eq!(on_kept_connection(&mut owner, gw.token()).await, Ok(200));
    let stop = tokio_util::sync::CancellationToken::new();
    let attacker = slot_flood(&addr, &stop, 3 * CAP, 20_000, "/token", 2);
    let mut outcomes = Vec::new();
    for i in 0..30 {
        // Idle for a while between requests, as a pooled connection is, while the flood runs.
        tokio::time::sleep(Duration::from_millis(if i % 3 == 0 { 600 } else { 150 })).await;
        outcomes.push(on_kept_connection(&mut owner, gw.token()).await);
    }
    stop.cancel();
    let opened = attacker.await.unwrap();
    assert!(
        opened > 10 * CAP,
        "the attacker opened only {opened} connections"
    );
    let through = outcomes.iter().filter(|o| **o == Ok(200)).count();
    assert_eq!(
        through, 30,
        "the owner's kept-alive connection got {through}/30 through while {opened} connections \
         were opened against it: {outcomes:?}"
    );
}

/// Whether the server closes `stream` within `within` (reading and discarding what it sends).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

const HEADER_TIMEOUT_SECONDS: u64 = 2;
const BODY_TIMEOUT_SECONDS: u64 = 2;

#[tokio::test(flavor = "multi_thread")]
async fn slow_and_idle_connections_are_closed_within_their_timeouts() {
    let header = HEADER_TIMEOUT_SECONDS.to_string();
    let body = BODY_TIMEOUT_SECONDS.to_string();
    let gw = gateway_with(&[
        ("CLAUDE_TOOLS_HTTP_HEADER_TIMEOUT_SECONDS", header.as_str()),
        ("CLAUDE_TOOLS_HTTP_BODY_TIMEOUT_SECONDS", body.as_str()),
    ])
    .await;
    let addr = gw.addr();
    let token = gw.token().to_string();
    let started = Instant::now();
    let mut held = Vec::new();
    // Connected and silent.
    for _ in 0..40 {
        held.push(("idle", TcpStream::connect(&addr).await.unwrap()));
    }
    // Half a request head.
    for _ in 0..40 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applic")
            .await
            .unwrap();
        held.push(("half head", s));
    }
    // A whole head, then part of the announced body.
    let rest = init_body();
    for _ in 0..20 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n\r\n",
            rest.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(&rest.as_bytes()[..10]).await.unwrap();
        held.push(("half body", s));
    }
    // A complete request answered, then the keep-alive connection left idle.
    for _ in 0..10 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n\r\n{rest}",
            rest.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&buf[..n])
        );
        held.push(("idle after a request", s));
    }
    let bound = Duration::from_secs(HEADER_TIMEOUT_SECONDS.max(BODY_TIMEOUT_SECONDS) + 3);
    for (kind, mut stream) in held {
        let left = bound.saturating_sub(started.elapsed());
        assert!(
            closed_within(&mut stream, left).await,
            "a {kind} connection was still open {:?} after it was opened",
            started.elapsed()
        );
    }
    // The server still serves.
    let (status, _, _) = post(&gw.url(), &init_body(), Some(&format!("Bearer {token}"))).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_connection_cap_holds_and_frees_its_slots() {
    const CAP: usize = 8;
    let cap = CAP.to_string();
    let gw = gateway_with(&[
        ("CLAUDE_TOOLS_HTTP_MAX_CONNECTIONS", cap.as_str()),
        ("CLAUDE_TOOLS_HTTP_HEADER_TIMEOUT_SECONDS", "60"),
    ])
    .await;
    let addr = gw.addr();
    let auth = format!("Bearer {}", gw.token());
    let mut held = Vec::new();
    // The owner's own requests in flight (a whole head, part of the body): these fill the cap.
    for _ in 0..CAP {
        held.push(half_body(&addr, "/mcp", Some(gw.token())).await);
    }
    // Give the server a moment to take them all in.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Over the cap: a clear 503, many times over, and the held connections stay served.
    for _ in 0..20 {
        let (status, headers, text) = post(&gw.url(), &init_body(), Some(&auth)).await;
        assert_eq!(status, 503, "{text}");
        assert_eq!(headers["retry-after"], "1");
    }
    // A slot freed is a slot usable again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, _, _) = post(&gw.url(), &init_body(), Some(&auth)).await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no slot came free: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Host allow-list guards every route, not only authenticated `/mcp`: a DNS-rebinding page
/// (any Host that is not loopback, an `--allowed-host` or the public base's host) reaches no
/// handler, with or without credentials, and learns nothing from the refusal.
#[tokio::test(flavor = "multi_thread")]
async fn every_route_refuses_a_foreign_host() {
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .arg("--public-base")
        .arg("https://gw.example.net")
        .arg("--allowed-host")
        .arg("other.example:8443")
        .spawn()
        .await
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let bearer = format!("Bearer {}", gw.token());
    let routes: Vec<(reqwest::Method, String, Option<&str>)> = vec![
        (reqwest::Method::POST, "/mcp".into(), None),
        (reqwest::Method::POST, "/mcp".into(), Some(bearer.as_str())),
        (reqwest::Method::POST, format!("/mcp/{}", gw.token()), None),
        (reqwest::Method::GET, "/mcp".into(), None),
        (reqwest::Method::POST, "/oauth/register".into(), None),
        (
            reqwest::Method::GET,
            "/oauth/authorize?client_id=x".into(),
            None,
        ),
        (reqwest::Method::POST, "/oauth/authorize".into(), None),
        (reqwest::Method::POST, "/oauth/token".into(), None),
        (reqwest::Method::OPTIONS, "/oauth/token".into(), None),
        (
            reqwest::Method::GET,
            "/.well-known/oauth-protected-resource".into(),
            None,
        ),
        (
            reqwest::Method::GET,
            "/.well-known/oauth-protected-resource/mcp".into(),
            None,
        ),
        (
            reqwest::Method::GET,
            "/.well-known/oauth-authorization-server".into(),
            None,
        ),
        (reqwest::Method::GET, "/no/such/route".into(), None),
    ];
    let send = |method: reqwest::Method, path: &str, auth: Option<&str>, host: &str| {
        let mut req = http
            .request(method, format!("{}{path}", gw.base_url()))
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init_body());
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        req.send()
    };
    for (method, path, auth) in &routes {
        for foreign in [
            "evil.example",
            "gw.example.net.evil.example",
            "other.example",
            "other.example:443",
            "127.0.0.2",
        ] {
            let resp = send(method.clone(), path, *auth, foreign).await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            assert_eq!(status, 403, "{method} {path} Host {foreign}: {body}");
            assert!(body.contains("Host is not allowed"), "{body}");
            assert!(!body.contains(gw.token()), "{body}");
        }
        for ours in [
            "gw.example.net".to_string(),
            "other.example:8443".to_string(),
            gw.addr(),
            "localhost".to_string(),
        ] {
            let resp = send(method.clone(), path, *auth, &ours).await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            assert!(
                !body.contains("Host is not allowed") && !body.contains("Host header"),
                "{method} {path} Host {ours}: {status} {body}"
            );
        }
    }
    // A Host that is not a host at all is a bad request, not a pass.
    let resp = send(
        reqwest::Method::POST,
        "/mcp",
        Some(&bearer),
        "user@localhost",
    )
    .await
    .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
}
