//! The model-turn bridge: the runner's Anthropic Messages API. A main-loop request becomes one turn
//! for ChatGPT (a retry of the same request attaches to the same turn); side requests are answered
//! here, locally and visibly, and never reach any model. While ChatGPT thinks, the SSE stream is
//! kept alive with `ping` events.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::protocol::{BrokerEvent, ReplyRelease, RunnerToolResult, TurnContent, TurnRequest};
use common::tools::RUNNER_TOOL_PREFIX;
use futures::stream;
use serde_json::{Value, json};

use crate::state::BrokerState;
use request::Request;

mod request;

/// Interval of `ping` events while a turn waits for ChatGPT.
const PING_INTERVAL: Duration = Duration::from_secs(5);
/// Largest prompt text forwarded to the gateway (prompts are the gateway's own, ≤ 768 KiB).
const MAX_FORWARDED_TEXT: usize = 800 * 1024;
/// Largest runner text kept per tool result: the gateway shows its ledger's outcome, and the
/// runner's own words only for a call that never ran.
const MAX_FORWARDED_RESULT_TEXT: usize = 4 * 1024;

/// How long a sub-session's model request may take through the gateway (its own upstream
/// timeout is shorter).
const EGRESS_TIMEOUT: Duration = Duration::from_secs(660);

/// Largest model request accepted from the runner. Its history grows with every turn (the
/// runner does not compact), so this is far above axum's 2 MiB default.
const MAX_REQUEST_BYTES: usize = 256 * 1024 * 1024;

pub fn router(state: Arc<BrokerState>) -> Router {
    let bridge = Arc::new(Bridge {
        state,
        memo: std::sync::Mutex::new(None),
    });
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(bridge)
}

fn api_error(status: StatusCode, kind: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

fn authorized(state: &BrokerState, headers: &HeaderMap) -> bool {
    let presented = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        });
    presented.is_some_and(|key| {
        common::hash::constant_time_eq(key.as_bytes(), state.spec.runner_token.as_bytes())
    })
}

/// Rough token count (4 bytes a token). Claude Code sizes its context from the usage we report,
/// so it must be plausible, not zero.
fn estimate_tokens(bytes: usize) -> u64 {
    (bytes / 4).max(1) as u64
}

async fn count_tokens(
    State(bridge): State<Arc<Bridge>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if !authorized(&bridge.state, &headers) {
        return api_error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    axum::Json(json!({"input_tokens": estimate_tokens(body.len())})).into_response()
}

/// What kind of request the runner sent.
#[derive(Debug, PartialEq)]
enum RequestKind {
    MainLoop(TurnContent),
    Side(&'static str),
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).map(str::to_string),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn clip(text: String) -> String {
    clip_to(text, MAX_FORWARDED_TEXT)
}

fn clip_to(mut text: String, max: usize) -> String {
    if common::tools::clip_utf8(&mut text, max) {
        text.push_str("\n[truncated by the gateway]");
    }
    text
}

/// Classify a request and reduce a main-loop request to the new user content since the last
/// assistant message. Parses leniently: unknown fields and `role: "system"` entries are ignored.
fn classify(request: &Request, headers: &HeaderMap) -> RequestKind {
    let betas = headers
        .get("anthropic-beta")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let new_user: Vec<&Value> = request
        .tail
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .collect();
    let last_text = new_user
        .last()
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default();

    if last_text.starts_with("[SUGGESTION MODE:") {
        return RequestKind::Side("prompt_suggestion");
    }
    if last_text.starts_with("CRITICAL: Respond with TEXT ONLY") {
        return RequestKind::Side("compact_summary");
    }
    if betas.contains("fallback-credit-") {
        return RequestKind::Side("forked_request");
    }
    let has_gateway_tools = request
        .tool_names
        .iter()
        .any(|n| n.starts_with(RUNNER_TOOL_PREFIX));
    if !has_gateway_tools {
        return RequestKind::Side("no_gateway_tools");
    }

    let mut results = Vec::new();
    let mut texts = Vec::new();
    for message in &new_user {
        match &message["content"] {
            Value::Array(blocks) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("tool_result") => results.push(RunnerToolResult {
                            tool_use_id: block
                                .get("tool_use_id")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            is_error: block
                                .get("is_error")
                                .and_then(Value::as_bool)
                                .unwrap_or(false),
                            text: clip_to(
                                text_of(block.get("content").unwrap_or(&Value::Null)),
                                MAX_FORWARDED_RESULT_TEXT,
                            ),
                        }),
                        Some("text") => {
                            if let Some(t) = block.get("text").and_then(Value::as_str) {
                                texts.push(t.to_string());
                            }
                        }
                        _ => {}
                    }
                }
            }
            other => texts.push(text_of(other)),
        }
    }
    if results.is_empty() {
        RequestKind::MainLoop(TurnContent::Prompt {
            text: clip(texts.join("\n\n")),
        })
    } else {
        RequestKind::MainLoop(TurnContent::ToolResults { results })
    }
}

/// The bridge's state: the broker's, and what the previous request's reading left for the next.
struct Bridge {
    state: Arc<BrokerState>,
    /// Taken while a request is read (a concurrent one reads without it) and put back after.
    memo: std::sync::Mutex<Option<request::Memo>>,
}

impl Bridge {
    /// Read a request body. Its fingerprint is the hash of the conversation it carries, so a
    /// retry of the same request has the same one; `cache_control` markers are left out (the
    /// runner moves them between requests, and they say nothing about the conversation).
    fn read(&self, body: Bytes) -> Result<Request, request::NotJson> {
        let memo = self
            .memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let (request, memo) = request::read(body, memo)?;
        *self
            .memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(memo);
        Ok(request)
    }
}

async fn messages(State(bridge): State<Arc<Bridge>>, headers: HeaderMap, body: Bytes) -> Response {
    let state = bridge.state.clone();
    if !authorized(&state, &headers) {
        return api_error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    let body_len = body.len();
    let Ok(request) = bridge.read(body.clone()) else {
        return api_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "body is not JSON",
        );
    };
    let answer = Answer {
        streaming: request.stream,
        model: request.model.clone().unwrap_or_else(|| "gateway".into()),
        input_tokens: estimate_tokens(body_len),
    };
    let fingerprint = request.fingerprint.clone();

    match classify(&request, &headers) {
        RequestKind::Side(purpose) => {
            state.push_event(BrokerEvent::SideRequest {
                purpose: purpose.to_string(),
                fingerprint: fingerprint.clone(),
            });
            let reply = ReplyRelease {
                turn_id: format!("side_{}", &fingerprint[..16]),
                fingerprint,
                text: side_answer(purpose),
                calls: Vec::new(),
            };
            let (tx, rx) = tokio::sync::watch::channel(Some(reply));
            drop(tx);
            answer.send(state, rx, false).await
        }
        RequestKind::MainLoop(_) if state.spec.delegation.is_some() => {
            forward_to_deepseek(&state, body).await
        }
        RequestKind::MainLoop(content) => {
            let (slot, new) = state.turn_slot(&fingerprint);
            let rx = slot.reply.subscribe();
            if new {
                state.push_event(BrokerEvent::TurnRequested(TurnRequest {
                    fingerprint: fingerprint.clone(),
                    content,
                }));
            }
            answer.send(state, rx, true).await
        }
    }
}

/// A DeepSeek sub-session's model request: through the gateway (which holds the key and the
/// only route out), answered with exactly what DeepSeek answered. A request whose link drops is
/// answered `overloaded` so the runner retries it once the gateway is back.
async fn forward_to_deepseek(state: &BrokerState, body: Bytes) -> Response {
    // Forwarded as text: the runner sends UTF-8. Bounded as the frame that carries it (JSON
    // escaping grows it): one the link cannot carry would end every link that tried.
    let body = String::from_utf8_lossy(&body).into_owned();
    if !common::codec::fits(&common::protocol::BrokerToGateway::EgressRequest {
        request_id: u64::MAX,
        body: body.clone(),
    }) {
        return api_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            "the sub-session's conversation is too large to forward",
        );
    }
    let answer = state.queue_egress(body);
    let response = tokio::select! {
        response = tokio::time::timeout(EGRESS_TIMEOUT, answer) => response.ok().and_then(Result::ok),
        () = state.shutdown.cancelled() => None,
    };
    match response {
        Some(response) => {
            let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut reply = (status, response.body).into_response();
            if let Ok(value) = http::HeaderValue::from_str(&response.content_type) {
                reply
                    .headers_mut()
                    .insert(http::header::CONTENT_TYPE, value);
            }
            reply
        }
        None => api_error(
            StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
            "overloaded_error",
            "the gateway did not answer this model request; retry",
        ),
    }
}

fn side_answer(purpose: &str) -> String {
    match purpose {
        "compact_summary" => "<analysis>Native Gateway does not summarise conversations: ChatGPT holds \
                              the conversation and no other model is used.</analysis>\n<summary>No summary \
                              was produced; compaction is disabled by the gateway.</summary>"
            .to_string(),
        _ => String::new(),
    }
}

/// How to answer one request.
struct Answer {
    streaming: bool,
    model: String,
    input_tokens: u64,
}

type ReplyWatch = tokio::sync::watch::Receiver<Option<ReplyRelease>>;

/// Wait for the reply in `rx`, or until the broker shuts down.
async fn wait_reply(state: &BrokerState, mut rx: ReplyWatch) -> Option<ReplyRelease> {
    if let Some(reply) = rx.borrow().clone() {
        return Some(reply);
    }
    tokio::select! {
        res = rx.wait_for(Option::is_some) => res.ok().and_then(|r| r.clone()),
        () = state.shutdown.cancelled() => None,
    }
}

impl Answer {
    /// Answer with the reply once it is released: JSON, or SSE kept alive with pings. When
    /// `report_delivery` is set, `ReplyDelivered` is reported once the whole answer is handed over.
    async fn send(
        self,
        state: Arc<BrokerState>,
        rx: ReplyWatch,
        report_delivery: bool,
    ) -> Response {
        if !self.streaming {
            let Some(reply) = wait_reply(&state, rx).await else {
                return api_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded_error",
                    "broker is shutting down",
                );
            };
            if report_delivery {
                state.push_event(BrokerEvent::ReplyDelivered {
                    turn_id: reply.turn_id.clone(),
                });
            }
            return axum::Json(self.message_json(&reply)).into_response();
        }
        let (tx, events) = tokio::sync::mpsc::channel::<Event>(16);
        let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        tokio::spawn(async move {
            let start = json!({"type": "message_start", "message": {
                // Claude Code merges assistant messages that share an id: each answer needs its own.
                "id": message_id, "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": 1},
            }});
            if tx.send(sse("message_start", &start)).await.is_err() {
                return;
            }
            let reply = {
                let wait = wait_reply(&state, rx);
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        reply = &mut wait => break reply,
                        () = tokio::time::sleep(PING_INTERVAL) => {
                            if tx.send(sse("ping", &json!({"type": "ping"}))).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            };
            let Some(reply) = reply else {
                let _ = tx
                    .send(sse("error", &json!({"type": "error", "error": {"type": "overloaded_error", "message": "broker is shutting down"}})))
                    .await;
                return;
            };
            for event in self.stream_events(&reply) {
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            if report_delivery {
                state.push_event(BrokerEvent::ReplyDelivered {
                    turn_id: reply.turn_id.clone(),
                });
            }
        });
        let stream = stream::unfold(events, |mut events| async move {
            events
                .recv()
                .await
                .map(|event| (Ok::<_, Infallible>(event), events))
        });
        Sse::new(stream).into_response()
    }

    fn stop_reason(reply: &ReplyRelease) -> &'static str {
        if reply.calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        }
    }

    fn output_tokens(reply: &ReplyRelease) -> u64 {
        let call_bytes: usize = reply
            .calls
            .iter()
            .map(|c| c.arguments.to_string().len())
            .sum();
        estimate_tokens(reply.text.len() + call_bytes)
    }

    /// The assistant content blocks: a text block, then one `tool_use` per approved call.
    fn content_blocks(reply: &ReplyRelease) -> Vec<Value> {
        let mut blocks = Vec::new();
        if !reply.text.is_empty() || reply.calls.is_empty() {
            blocks.push(json!({"type": "text", "text": reply.text}));
        }
        for call in &reply.calls {
            blocks.push(json!({
                "type": "tool_use",
                "id": format!("toolu_{}", call.action_id),
                "name": format!("{RUNNER_TOOL_PREFIX}{}", call.name),
                "input": call.arguments,
            }));
        }
        blocks
    }

    fn message_json(&self, reply: &ReplyRelease) -> Value {
        json!({
            "id": format!("msg_{}", uuid::Uuid::new_v4().simple()), "type": "message", "role": "assistant",
            "model": self.model, "content": Self::content_blocks(reply),
            "stop_reason": Self::stop_reason(reply), "stop_sequence": null,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": Self::output_tokens(reply)},
        })
    }

    fn stream_events(&self, reply: &ReplyRelease) -> Vec<Event> {
        let mut events = Vec::new();
        for (index, block) in Self::content_blocks(reply).into_iter().enumerate() {
            let (start_block, delta) = if block["type"] == "text" {
                (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": block["text"]}),
                )
            } else {
                (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                )
            };
            events.push(sse("content_block_start", &json!({"type": "content_block_start", "index": index, "content_block": start_block})));
            events.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
            events.push(sse(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        events.push(sse(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": Self::stop_reason(reply), "stop_sequence": null},
                "usage": {"output_tokens": Self::output_tokens(reply)},
            }),
        ));
        events.push(sse("message_stop", &json!({"type": "message_stop"})));
        events
    }
}

fn sse(name: &str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
