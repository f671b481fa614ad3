//! The one path from a sub-session to DeepSeek: a model request its broker forwarded over its
//! verified link gets the fixed route's explicit model id and the key, goes to the configured
//! base URL only, and DeepSeek's answer goes back as it came. Every failure (another model
//! family, an HTTP error, a timeout) fails that request with a non-retryable error: nothing
//! retries elsewhere.

use std::time::Instant;

use common::protocol::EgressResponse;
use serde_json::{Value, json};

use super::route::DeepseekRoute;

/// Largest answer passed back (the link's frames are bounded).
const MAX_RESPONSE_BYTES: usize = 6 * 1024 * 1024;

/// What one forwarded request did, for the ledger (never the key, never the bodies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRecord {
    pub requested_model: String,
    /// The DeepSeek model id sent, or none when the request was refused before sending.
    pub sent_model: Option<String>,
    pub status: u16,
    pub duration_ms: u64,
    /// Why it failed, in words.
    pub error: Option<String>,
}

/// The HTTP client of the egress: TLS with the built-in web roots, no proxy from the
/// environment (the route is the configured base URL and nothing else), no redirects. `None`
/// when the TLS backend cannot start: then every request is refused, never sent another way.
pub fn client() -> Option<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .inspect_err(|err| tracing::error!("DeepSeek egress client: {err}"))
        .ok()
}

fn failure(
    requested_model: String,
    sent_model: Option<String>,
    started: Instant,
    message: String,
) -> (EgressResponse, EgressRecord) {
    let body =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
    (
        EgressResponse {
            request_id: 0,
            // 400: Claude Code does not retry it, so the request fails here, once.
            status: 400,
            content_type: "application/json".into(),
            body: body.to_string(),
        },
        EgressRecord {
            requested_model,
            sent_model,
            status: 400,
            duration_ms: elapsed_ms(started),
            error: Some(message),
        },
    )
}

/// A request refused before anything was sent.
pub fn refused(message: &str) -> (EgressResponse, EgressRecord) {
    failure(String::new(), None, Instant::now(), message.to_string())
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Forward one request body on `route`; the answer for the broker and the record for the
/// ledger.
pub async fn forward(
    client: &reqwest::Client,
    route: &DeepseekRoute,
    request_id: u64,
    body: &str,
) -> (EgressResponse, EgressRecord) {
    let started = Instant::now();
    let (mut response, record) = forward_inner(client, route, body, started).await;
    response.request_id = request_id;
    (response, record)
}

async fn forward_inner(
    client: &reqwest::Client,
    route: &DeepseekRoute,
    body: &str,
    started: Instant,
) -> (EgressResponse, EgressRecord) {
    let Ok(mut request) = serde_json::from_str::<Value>(body) else {
        return failure(
            String::new(),
            None,
            started,
            "the model request is not JSON".into(),
        );
    };
    let requested = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(model) = route.model_for(&requested).map(str::to_string) else {
        let message = format!(
            "model {requested:?} is not on this sub-session's DeepSeek route (Sonnet and Opus go \
             to {}, Fable to {}); the request fails and nothing falls back",
            route.flash_model, route.pro_model
        );
        return failure(requested, None, started, message);
    };
    let Some(key) = &route.api_key else {
        let message = "DEEPSEEK_API_KEY is not set in the gateway's environment".to_string();
        return failure(requested, Some(model), started, message);
    };
    request["model"] = Value::String(model.clone());
    let sent = client
        .post(route.messages_url())
        .timeout(route.timeout)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", key.expose())
        .body(request.to_string())
        .send()
        .await;
    let upstream = match sent {
        Ok(upstream) => upstream,
        Err(err) => {
            let why = if err.is_timeout() {
                format!("timed out after {} s", route.timeout.as_secs())
            } else if err.is_connect() {
                "could not connect".to_string()
            } else {
                "the request failed".to_string()
            };
            let message =
                format!("DeepSeek {why}; the request fails and nothing falls back or retries");
            return failure(requested, Some(model), started, message);
        }
    };
    let status = upstream.status();
    let content_type = upstream
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let bytes = match read_bounded(upstream).await {
        Ok(bytes) => bytes,
        Err(why) => {
            let message = format!("DeepSeek's answer {why}; the request fails");
            return failure(requested, Some(model), started, message);
        }
    };
    if !status.is_success() {
        let message = format!(
            "DeepSeek answered HTTP {}; the request fails and nothing falls back or retries",
            status.as_u16()
        );
        return failure(requested, Some(model), started, message);
    }
    let Ok(mut body) = String::from_utf8(bytes) else {
        return failure(
            requested,
            Some(model),
            started,
            "DeepSeek's answer is not UTF-8".into(),
        );
    };
    // A 200 can still carry a failure (an `error` event, a stream cut short): that fails the
    // request here, once, rather than reach the runner, which would retry it.
    if let Err(why) = check_answer(&content_type, &body) {
        let message =
            format!("DeepSeek's answer {why}; the request fails and nothing falls back or retries");
        return failure(requested, Some(model), started, message);
    }
    // The key never travels back, even if the endpoint echoes it.
    let key = key.expose();
    if !key.is_empty() && body.contains(key) {
        body = body.replace(key, "[redacted]");
    }
    (
        EgressResponse {
            request_id: 0,
            status: status.as_u16(),
            content_type,
            body,
        },
        EgressRecord {
            requested_model: requested,
            sent_model: Some(model),
            status: status.as_u16(),
            duration_ms: elapsed_ms(started),
            error: None,
        },
    )
}

/// Whether a 2xx answer is a whole message: JSON of type `message`, or an event stream that
/// reaches `message_stop` without an `error` event.
pub fn check_answer(content_type: &str, body: &str) -> Result<(), String> {
    if content_type
        .to_ascii_lowercase()
        .starts_with("text/event-stream")
    {
        let mut stopped = false;
        for line in body.lines() {
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let kind = serde_json::from_str::<Value>(data.trim())
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string));
            match kind.as_deref() {
                Some("error") => return Err("carried an error event".into()),
                Some("message_stop") => stopped = true,
                _ => {}
            }
        }
        return if stopped {
            Ok(())
        } else {
            Err("broke off before its end (no message_stop)".into())
        };
    }
    match serde_json::from_str::<Value>(body) {
        Ok(message) if message.get("type").and_then(Value::as_str) == Some("message") => Ok(()),
        Ok(_) => Err("is not a message".into()),
        Err(_) => Err("is not JSON".into()),
    }
}

async fn read_bounded(mut upstream: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    loop {
        match upstream.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(format!("is larger than {MAX_RESPONSE_BYTES} bytes"));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(bytes),
            Err(err) if err.is_timeout() => return Err("timed out".into()),
            Err(_) => return Err("broke off".into()),
        }
    }
}
