//! The one path from a sub-session to DeepSeek: a model request its broker forwarded over its
//! verified link gets the fixed route's explicit model id and the key, goes to the configured
//! base URL only, and DeepSeek's answer goes back once [`super::answer`] has checked it whole and
//! re-emitted it. Every failure (another model family asked or answering, an HTTP error, a
//! timeout, a malformed or oversized answer, the key in it, a refusal) fails that request with
//! a non-retryable error: nothing retries elsewhere.

use std::time::Instant;

use common::protocol::EgressResponse;
use serde_json::{Value, json};

use super::route::DeepseekRoute;

use super::answer::{self, Rejected};

/// Largest answer read from DeepSeek (raw bytes, before it is checked).
const MAX_RESPONSE_BYTES: usize = 6 * 1024 * 1024;
/// Largest answer passed back, as its link frame: well under the link's frame limit
/// (`common::codec::MAX_FRAME_BYTES`), whatever JSON escaping does to it.
pub const MAX_ANSWER_FRAME_BYTES: usize = 8 * 1024 * 1024;

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
    /// A refusal's text (the sub-session's result).
    pub result_text: Option<String>,
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
            result_text: None,
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
    let Ok(body) = String::from_utf8(bytes) else {
        return failure(
            requested,
            Some(model),
            started,
            "DeepSeek's answer is not UTF-8".into(),
        );
    };
    // A 200 can still carry a failure (an `error` event, a stream cut short, a refusal, another
    // model, the key): that fails the request here, once, rather than reach the runner, which
    // would retry it. What passes is re-emitted from what was parsed.
    let expected = answer::Expected {
        streaming: request.get("stream").and_then(Value::as_bool) == Some(true),
        model: &model,
        key: Some(key.expose()),
    };
    let body = match answer::check(&content_type, &body, &expected) {
        Ok(body) => body,
        Err(rejected) => {
            let (message, result_text) = rejected_words(&rejected, &model);
            let (response, mut record) = failure(requested, Some(model), started, message);
            record.result_text = result_text;
            return (response, record);
        }
    };
    let response = EgressResponse {
        request_id: 0,
        status: status.as_u16(),
        content_type,
        body,
    };
    // Bounded before it is framed: an answer the link cannot carry fails clearly, here.
    let framed = framed_len(&response);
    if framed > MAX_ANSWER_FRAME_BYTES {
        let message = format!(
            "answer too large: DeepSeek's answer takes {framed} bytes on the link, more than \
             {MAX_ANSWER_FRAME_BYTES}; the request fails"
        );
        return failure(requested, Some(model), started, message);
    }
    (
        response,
        EgressRecord {
            requested_model: requested,
            sent_model: Some(model),
            status: status.as_u16(),
            duration_ms: elapsed_ms(started),
            error: None,
            result_text: None,
        },
    )
}

/// The size of the frame that carries `response` to the broker.
pub fn framed_len(response: &EgressResponse) -> usize {
    common::codec::encode(&common::protocol::GatewayToBroker::EgressResponse(
        response.clone(),
    ))
    .map_or(usize::MAX, |bytes| bytes.len())
}

/// The error for a rejected answer (never its content, never the key) and, for a refusal,
/// its text as the sub-session's result.
fn rejected_words(rejected: &Rejected, model: &str) -> (String, Option<String>) {
    match rejected {
        Rejected::Malformed(why) => (
            format!("DeepSeek's answer {why}; the request fails and nothing falls back or retries"),
            None,
        ),
        Rejected::Key => (
            "DeepSeek's answer contained the API key; the request fails and nothing of the \
             answer is passed on"
                .into(),
            None,
        ),
        // The endpoint's id is never quoted: it would be a channel to ChatGPT.
        Rejected::Model(_) => (
            format!(
                "DeepSeek answered as another model than {model:?} (this request's tier); the \
                 request fails and nothing falls back"
            ),
            None,
        ),
        Rejected::Refusal(text) => (
            "DeepSeek refused the task (stop_reason \"refusal\"); its text is the \
             sub-session's result_text"
                .into(),
            Some(text.clone()),
        ),
    }
}

async fn read_bounded(mut upstream: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    loop {
        match upstream.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(format!(
                        "is more than {MAX_RESPONSE_BYTES} bytes (answer too large)"
                    ));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(bytes),
            Err(err) if err.is_timeout() => return Err("timed out".into()),
            Err(_) => return Err("broke off".into()),
        }
    }
}
