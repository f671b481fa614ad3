//! A scripted fake DeepSeek: a local Anthropic-compatible Messages API (`POST /v1/messages`) on
//! loopback that answers each request with the next scripted step, streaming (SSE) or not as the
//! request asks, and records what it was sent (model, key, tools) so tests can check the route.
//! No test reaches the real DeepSeek.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// An assistant message calling one tool (`name` without the `mcp__gw__` prefix).
    ToolUse { name: String, input: Value },
    /// A final assistant text (`end_turn`).
    Text(String),
    /// An HTTP error with an Anthropic-style error body.
    Status(u16),
    /// Wait, then answer with the inner step.
    Delay(Duration, Box<Step>),
    /// A final text with `stop_reason: "refusal"`.
    Refusal(String),
    /// The inner step, answered as another model.
    AsModel(String, Box<Step>),
    /// Exactly these bytes with this content type (`{model}` becomes the requested model).
    Raw { content_type: String, body: String },
}

/// What one request carried.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub model: String,
    pub api_key: Option<String>,
    pub stream: bool,
    pub tool_names: Vec<String>,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    script: VecDeque<Step>,
    seen: Vec<SeenRequest>,
    /// Requests whose connection closed before they were answered.
    cut_off: usize,
}

/// Counts a request as cut off unless it was answered.
struct Answering {
    shared: Arc<Mutex<Shared>>,
    answered: bool,
}

impl Drop for Answering {
    fn drop(&mut self) {
        if !self.answered
            && let Ok(mut shared) = self.shared.lock()
        {
            shared.cut_off += 1;
        }
    }
}

/// The running fake; stops when dropped.
pub struct FakeDeepseek {
    pub addr: std::net::SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeDeepseek {
    /// Serve `script` on a fresh loopback port.
    pub async fn start(script: Vec<Step>) -> anyhow::Result<FakeDeepseek> {
        let shared = Arc::new(Mutex::new(Shared {
            script: script.into(),
            ..Shared::default()
        }));
        let app = Router::new()
            .route("/anthropic/v1/messages", post(messages))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeDeepseek { addr, shared, task })
    }

    /// The base URL to configure (`CLAUDE_TOOLS_DEEPSEEK_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}/anthropic", self.addr)
    }

    /// Add a step at the end of the script.
    pub fn push(&self, step: Step) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.script.push_back(step);
        }
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.shared
            .lock()
            .map(|s| s.seen.clone())
            .unwrap_or_default()
    }

    /// Requests whose connection the gateway closed before they were answered.
    pub fn cut_off(&self) -> usize {
        self.shared.lock().map(|s| s.cut_off).unwrap_or_default()
    }

    /// Steps not yet used.
    pub fn remaining(&self) -> usize {
        self.shared
            .lock()
            .map(|s| s.script.len())
            .unwrap_or_default()
    }
}

impl Drop for FakeDeepseek {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn messages(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let stream = request["stream"].as_bool().unwrap_or(false);
    let model = request["model"].as_str().unwrap_or("").to_string();
    let step = {
        let Ok(mut shared) = shared.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        shared.seen.push(SeenRequest {
            model: model.clone(),
            api_key: headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            stream,
            tool_names: request["tools"]
                .as_array()
                .map(|tools| {
                    tools
                        .iter()
                        .filter_map(|t| t["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            body: request.clone(),
        });
        shared.script.pop_front()
    };
    let mut step = step.unwrap_or(Step::Text("(the script is exhausted)".into()));
    let mut answering = Answering {
        shared: shared.clone(),
        answered: false,
    };
    let mut model = model;
    loop {
        match step {
            Step::Delay(wait, inner) => {
                tokio::time::sleep(wait).await;
                step = *inner;
            }
            Step::AsModel(other, inner) => {
                model = other;
                step = *inner;
            }
            _ => break,
        }
    }
    answering.answered = true;
    let n = shared.lock().map(|s| s.seen.len()).unwrap_or(0);
    let (content, stop_reason) = match step {
        Step::Raw { content_type, body } => {
            let body = body.replace("{model}", &model);
            return ([("content-type", content_type)], body).into_response();
        }
        Step::Refusal(text) => (json!({"type": "text", "text": text}), "refusal"),
        Step::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = json!({"type": "error", "error": {"type": "api_error", "message": "scripted failure"}});
            return (status, axum::Json(body)).into_response();
        }
        Step::ToolUse { name, input } => (
            json!({"type": "tool_use", "id": format!("toolu_fake_{n}"), "name": format!("mcp__gw__{name}"), "input": input}),
            "tool_use",
        ),
        Step::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Step::Delay(..) | Step::AsModel(..) => unreachable!("unwrapped above"),
    };
    let id = format!("msg_fake_{n}");
    if !stream {
        return axum::Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [content], "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }))
        .into_response();
    }
    let (start_block, delta) = if content["type"] == "text" {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": content["text"]}),
        )
    } else {
        (
            json!({"type": "tool_use", "id": content["id"], "name": content["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": content["input"].to_string()}),
        )
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start_block}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let text: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    ([("content-type", "text/event-stream")], text).into_response()
}
