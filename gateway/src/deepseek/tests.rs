//! The route (families, base URLs) and the egress against a local upstream: checked answers
//! passed on, streaming or not; every failure one non-retryable error; the key sent upstream
//! and nowhere else; answers bounded before they are framed.

use std::time::Duration;

use super::egress::forward;
use super::route::{DeepseekRoute, Tier, check_base_url};

#[test]
fn families_map_to_fixed_tiers_and_nothing_else_is_routed() {
    for (model, tier) in [
        ("claude-sonnet-4-5-20250929", Some(Tier::Flash)),
        ("sonnet", Some(Tier::Flash)),
        ("claude-opus-4-1", Some(Tier::Flash)),
        ("Claude-Fable-1", Some(Tier::Pro)),
        ("claude-haiku-4-5", None),
        ("gpt-5", None),
        ("deepseek-flash", None),
        ("", None),
    ] {
        assert_eq!(DeepseekRoute::tier(model), tier, "{model}");
    }
    let route = DeepseekRoute::for_tests("https://api.deepseek.com/anthropic", None);
    assert_eq!(route.model_for("opus"), Some("deepseek-flash"));
    assert_eq!(route.model_for("fable"), Some("deepseek-v4-pro"));
    assert_eq!(route.model_for("haiku"), None);
    assert_eq!(
        route.messages_url(),
        "https://api.deepseek.com/anthropic/v1/messages"
    );
}

#[test]
fn base_urls_are_tls_or_literal_loopback() {
    for ok in [
        "https://api.deepseek.com/anthropic",
        "http://127.0.0.1:8080/anthropic",
        "http://[::1]:9/x",
    ] {
        assert!(check_base_url(ok).is_ok(), "{ok}");
    }
    for (bad, why) in [
        ("http://api.deepseek.com/anthropic", "plain http"),
        ("http://localhost:8080", "plain http"),
        ("http://10.0.0.1/", "plain http"),
        ("ftp://127.0.0.1/", "scheme"),
        ("https://user:pw@api.deepseek.com/", "credentials"),
        ("https://api.deepseek.com/?key=1", "query"),
        ("not a url", "not a URL"),
    ] {
        let err = check_base_url(bad).unwrap_err().to_string();
        assert!(err.contains(why), "{bad}: {err}");
    }
}

#[test]
fn the_key_never_shows_in_debug_output() {
    let route = DeepseekRoute::for_tests("https://api.deepseek.com/anthropic", Some("sk-secret-1"));
    let shown = format!("{route:?}");
    assert!(!shown.contains("sk-secret-1"), "{shown}");
    assert!(shown.contains("redacted"));
}

/// An upstream that answers with `status`, `content_type` and `body` after `delay`, and records
/// the key and model it got.
async fn upstream(
    status: u16,
    content_type: &'static str,
    body: &'static str,
    delay: Duration,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
) {
    use axum::routing::post;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/anthropic/v1/messages",
        post(move |headers: axum::http::HeaderMap, body_in: String| {
            let record = record.clone();
            async move {
                let key = headers
                    .get("x-api-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let model = serde_json::from_str::<serde_json::Value>(&body_in).unwrap()["model"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                record.lock().unwrap().push((key, model));
                tokio::time::sleep(delay).await;
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    [("content-type", content_type)],
                    body,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/anthropic"), seen)
}

const SSE: &str = concat!(
    "event: message_start\ndata: {\"message\":{\"content\":[],\"id\":\"m\",\"model\":\"deepseek-flash\",",
    "\"role\":\"assistant\",\"type\":\"message\",\"usage\":{}},\"type\":\"message_start\"}\n\n",
    "event: content_block_start\ndata: {\"content_block\":{\"text\":\"\",\"type\":\"text\"},\"index\":0,\"type\":\"content_block_start\"}\n\n",
    "event: content_block_delta\ndata: {\"delta\":{\"text\":\"hi\",\"type\":\"text_delta\"},\"index\":0,\"type\":\"content_block_delta\"}\n\n",
    "event: content_block_stop\ndata: {\"index\":0,\"type\":\"content_block_stop\"}\n\n",
    "event: message_delta\ndata: {\"delta\":{\"stop_reason\":\"end_turn\"},\"type\":\"message_delta\"}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
);
const JSON: &str = r#"{"content":[{"text":"hi","type":"text"}],"id":"m","model":"deepseek-flash","role":"assistant","stop_reason":"end_turn","type":"message","usage":{}}"#;
/// A key as long as real ones.
const KEY: &str = "sk-up-0123456789abcdef0123456789";

#[tokio::test]
async fn answers_pass_through_as_they_came_with_the_explicit_model_and_key() {
    let client = super::egress::client().unwrap();
    for (content_type, body, stream) in [
        ("text/event-stream", SSE, true),
        ("application/json", JSON, false),
    ] {
        let (base, seen) = upstream(200, content_type, body, Duration::ZERO).await;
        let route = DeepseekRoute::for_tests(&base, Some(KEY));
        let request =
            serde_json::json!({"model": "claude-sonnet-4-5", "stream": stream, "messages": []});
        let (response, record) = forward(&client, &route, 7, &request.to_string()).await;
        assert_eq!(response.request_id, 7);
        assert_eq!(response.status, 200);
        assert_eq!(response.content_type, content_type);
        assert_eq!(response.body, body);
        assert_eq!(record.sent_model.as_deref(), Some("deepseek-flash"));
        assert_eq!(record.error, None);
        assert_eq!(
            seen.lock().unwrap().clone(),
            vec![(KEY.to_string(), "deepseek-flash".to_string())]
        );
    }
}

#[tokio::test]
async fn every_failure_is_one_non_retryable_error_and_nothing_else_is_asked() {
    let client = super::egress::client().unwrap();
    let request = serde_json::json!({"model": "sonnet", "messages": []}).to_string();
    // An HTTP error from DeepSeek.
    let (base, seen) = upstream(529, "application/json", "{}", Duration::ZERO).await;
    let route = DeepseekRoute::for_tests(&base, Some(KEY));
    let (response, record) = forward(&client, &route, 1, &request).await;
    assert_eq!(response.status, 400);
    assert!(
        response.body.contains("DeepSeek answered HTTP 529"),
        "{}",
        response.body
    );
    assert!(response.body.contains("invalid_request_error"));
    assert_eq!(record.status, 400);
    assert_eq!(seen.lock().unwrap().len(), 1, "asked once");
    // A timeout.
    let (base, _) = upstream(200, "application/json", JSON, Duration::from_secs(5)).await;
    let mut route = DeepseekRoute::for_tests(&base, Some(KEY));
    route.timeout = Duration::from_millis(300);
    let (response, _) = forward(&client, &route, 2, &request).await;
    assert_eq!(response.status, 400);
    assert!(response.body.contains("timed out"), "{}", response.body);
    // Another family, and no key: refused before anything is sent.
    let (base, seen) = upstream(200, "application/json", JSON, Duration::ZERO).await;
    let route = DeepseekRoute::for_tests(&base, Some(KEY));
    let haiku = serde_json::json!({"model": "claude-haiku-4-5", "messages": []}).to_string();
    let (response, record) = forward(&client, &route, 3, &haiku).await;
    assert_eq!(response.status, 400);
    assert!(
        response
            .body
            .contains("not on this sub-session's DeepSeek route")
    );
    assert_eq!(record.sent_model, None);
    let keyless = DeepseekRoute::for_tests(&base, None);
    let (response, _) = forward(&client, &keyless, 4, &request).await;
    assert!(response.body.contains("DEEPSEEK_API_KEY is not set"));
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the upstream"
    );
    // Nothing listening: a connect error.
    let route = DeepseekRoute::for_tests("http://127.0.0.1:9/anthropic", Some(KEY));
    let (response, _) = forward(&client, &route, 5, &request).await;
    assert!(
        response.body.contains("could not connect"),
        "{}",
        response.body
    );
}

fn write_action(
    path: &std::path::Path,
    pre: Option<&str>,
    post: &str,
    state: crate::state::ActionState,
) -> crate::state::ActionRecord {
    crate::state::ActionRecord {
        action_id: format!("act_{post}"),
        session_id: "ds_x".into(),
        turn_id: "ds_x".into(),
        call_index: 1,
        name: "Write".into(),
        arguments: serde_json::json!({}),
        state,
        outcome: Some(common::tools::ActionOutcome {
            status: common::tools::ToolStatus::Ok,
            output: String::new(),
            truncated: false,
            error_code: None,
            receipt: common::tools::Receipt {
                action_id: "a".into(),
                path: Some(path.display().to_string()),
                pre_sha256: pre.map(str::to_string),
                post_sha256: Some(post.to_string()),
                ..Default::default()
            },
        }),
        prepared: None,
    }
}

#[test]
fn results_are_verified_against_each_paths_last_write_receipt() {
    use crate::state::ActionState::{Committed, NotApplied, Prepared};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, "second").unwrap();
    let first = common::hash::sha256_hex(b"first");
    let second = common::hash::sha256_hex(b"second");
    // The later write supersedes the earlier one; a write that changed nothing is not checked.
    let actions = vec![
        write_action(&file, None, &first, Committed),
        write_action(&file, Some(&first), &second, Committed),
        write_action(&file, Some(&second), &first, NotApplied),
    ];
    assert_eq!(super::lifecycle::verify_receipts(&actions), Ok(()));
    // Changed by someone else between two of its writes: the chain breaks, naming the path.
    let other = common::hash::sha256_hex(b"other");
    let broken = vec![
        write_action(&file, None, &first, Committed),
        write_action(&file, Some(&other), &second, Committed),
    ];
    let err = super::lifecycle::verify_receipts(&broken).unwrap_err();
    assert!(
        err.contains("changed between the sub-session's writes") && err.contains(&first),
        "{err}"
    );
    // Changed behind its back: the path is named, with both hashes.
    std::fs::write(&file, "third").unwrap();
    let err = super::lifecycle::verify_receipts(&actions).unwrap_err();
    assert!(
        err.contains(&file.display().to_string()) && err.contains(&second),
        "{err}"
    );
    // Gone, or replaced by a symlink to the right bytes: refused, not followed.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, "second").unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let err = super::lifecycle::verify_receipts(&actions).unwrap_err();
    assert!(err.contains("missing or unreadable"), "{err}");
    // A write that never finished fails it too.
    let err =
        super::lifecycle::verify_receipts(&[write_action(&elsewhere, None, &second, Prepared)])
            .unwrap_err();
    assert!(err.contains("did not finish"), "{err}");
}

#[tokio::test]
async fn an_endpoint_that_echoes_the_key_fails_the_request_and_passes_nothing_on() {
    let echo: &'static str = Box::leak(
        JSON.replace("\"hi\"", &format!("\"your key is \\u0073{}\"", &KEY[1..]))
            .into_boxed_str(),
    );
    let (base, _) = upstream(200, "application/json", echo, Duration::ZERO).await;
    let route = DeepseekRoute::for_tests(&base, Some(KEY));
    let request = serde_json::json!({"model": "sonnet", "messages": []}).to_string();
    let (response, record) = forward(&super::egress::client().unwrap(), &route, 1, &request).await;
    assert_eq!(response.status, 400);
    assert!(!response.body.contains(&KEY[1..]), "{}", response.body);
    assert!(
        response.body.contains("contained the API key"),
        "{}",
        response.body
    );
    assert!(record.error.is_some_and(|e| !e.contains(&KEY[1..])));
}

/// Issue 23/6: an answer is bounded before it is framed for the link: too many bytes read, or
/// a frame past the bound once JSON escaping has grown it, fails clearly as `answer too large`.
#[tokio::test]
async fn an_answer_too_large_for_the_link_fails_clearly() {
    let client = super::egress::client().unwrap();
    let request = serde_json::json!({"model": "sonnet", "messages": []}).to_string();
    // 5 MiB of quotes: under the read bound, but each is escaped twice on the way to the link.
    let quotes = "\\\"".repeat(5 * 1024 * 1024 / 2);
    let big: &'static str = Box::leak(
        JSON.replace("\"hi\"", &format!("\"{quotes}\""))
            .into_boxed_str(),
    );
    let (base, _) = upstream(200, "application/json", big, Duration::ZERO).await;
    let route = DeepseekRoute::for_tests(&base, Some(KEY));
    let (response, record) = forward(&client, &route, 1, &request).await;
    assert_eq!(response.status, 400);
    let error = record.error.unwrap_or_default();
    assert!(error.starts_with("answer too large"), "{error}");
    assert!(
        super::egress::framed_len(&response) < common::codec::MAX_FRAME_BYTES,
        "the failure itself fits"
    );
    // More than the read bound.
    let huge: &'static str = Box::leak("x".repeat(7 * 1024 * 1024).into_boxed_str());
    let (base, _) = upstream(200, "application/json", huge, Duration::ZERO).await;
    let route = DeepseekRoute::for_tests(&base, Some(KEY));
    let (_, record) = forward(&client, &route, 2, &request).await;
    let error = record.error.unwrap_or_default();
    assert!(error.contains("(answer too large)"), "{error}");
}

/// Issue 23/6: a request whose future is dropped (the sub-session stopped: the gateway cancels
/// it) closes its upstream connection at once; the upstream sees its handler cut off.
#[tokio::test]
async fn dropping_a_request_closes_the_upstream_connection_at_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct CutOff(Arc<AtomicUsize>, bool);
    impl Drop for CutOff {
        fn drop(&mut self) {
            if !self.1 {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let (arrived, cut) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let app = axum::Router::new().route(
        "/anthropic/v1/messages",
        axum::routing::post({
            let (arrived, cut) = (arrived.clone(), cut.clone());
            move || {
                let (arrived, cut) = (arrived.clone(), cut.clone());
                async move {
                    let mut guard = CutOff(cut, false);
                    arrived.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    guard.1 = true;
                    JSON
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let route = DeepseekRoute::for_tests(&format!("http://{addr}/anthropic"), Some(KEY));
    let request = serde_json::json!({"model": "sonnet", "messages": []}).to_string();
    let client = super::egress::client().unwrap();
    let out = tokio::spawn(async move { forward(&client, &route, 1, &request).await });
    while arrived.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out.abort();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while cut.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream still holds the request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
