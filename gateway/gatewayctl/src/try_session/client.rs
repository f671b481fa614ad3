//! The MCP client end of `try`: JSON-RPC over Streamable HTTP on the workspace's reqwest, as
//! ChatGPT's connector speaks it to the gateway (stateless: `initialize`, the `initialized`
//! notification, then `tools/call`; the gateway answers each request with one JSON body).
//!
//! Not rmcp's client: its client features would be compiled into every binary of the workspace
//! (features unify) with a second reqwest, for three kinds of message (BUILD_RESULTS.md).

use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{Map, Value, json};

/// The protocol revision ChatGPT's connector sends in `initialize`.
const PROTOCOL_VERSION: &str = "2025-06-18";
/// The largest answer read (a tool's output is bounded far below this by the gateway).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Why a request got no usable answer.
#[derive(Debug)]
pub enum CallError {
    /// Nothing answered at the URL (connection refused or reset, no such host).
    Unreachable(String),
    /// HTTP 401: the access token was refused.
    Unauthorized,
    /// An answer that is not a JSON-RPC result: an HTTP error, a JSON-RPC error, bad JSON.
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreachable(detail) => write!(f, "no answer: {detail}"),
            Self::Unauthorized => f.write_str("HTTP 401: the access token was refused"),
            Self::Refused(detail) => f.write_str(detail),
        }
    }
}

impl std::error::Error for CallError {}

/// One MCP client of the gateway's endpoint.
#[derive(Debug)]
pub struct McpClient {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    /// The version the gateway answered in `initialize`, sent on every later request.
    protocol_version: String,
    next_id: AtomicU64,
}

impl McpClient {
    /// Connects: `initialize` and `notifications/initialized`.
    pub async fn connect(url: &str, token: Option<&str>) -> Result<Self, CallError> {
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| CallError::Refused(format!("building the HTTP client: {e}")))?;
        let mut client = Self {
            http,
            url: url.to_string(),
            token: token.map(str::to_string),
            protocol_version: PROTOCOL_VERSION.to_string(),
            next_id: AtomicU64::new(1),
        };
        let init = client
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "gatewayctl-try", "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await?;
        let Some(version) = init["protocolVersion"].as_str() else {
            return Err(CallError::Refused(
                "initialize: the answer names no protocolVersion".into(),
            ));
        };
        client.protocol_version = version.to_string();
        client
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(client)
    }

    /// `tools/call`: the CallToolResult (`structuredContent`, `isError`, …).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, CallError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// One JSON-RPC request: its `result`.
    async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut answer = self.post(&body).await?.ok_or_else(|| {
            CallError::Refused(format!(
                "{method}: the gateway accepted it without an answer"
            ))
        })?;
        if answer["id"] != json!(id) {
            return Err(CallError::Refused(format!(
                "{method}: the answer is for another request"
            )));
        }
        if let Some(error) = answer.get("error") {
            return Err(CallError::Refused(format!(
                "{method}: JSON-RPC error {}: {}",
                error["code"],
                error["message"].as_str().unwrap_or("")
            )));
        }
        match answer.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(CallError::Refused(format!(
                "{method}: the answer has no result"
            ))),
        }
    }

    /// POSTs one message; the JSON answer, or None for 202 Accepted (a notification).
    async fn post(&self, body: &Value) -> Result<Option<Value>, CallError> {
        let mut request = self
            .http
            .post(&self.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", &self.protocol_version)
            .json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| CallError::Unreachable(error_chain(&e.without_url())))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            return Err(CallError::Unauthorized);
        }
        if status == StatusCode::ACCEPTED {
            return Ok(None);
        }
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| CallError::Unreachable(error_chain(&e.without_url())))?
        {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(CallError::Refused(format!(
                    "the answer is larger than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let method = body["method"].as_str().unwrap_or("?");
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(CallError::Refused(format!(
                "{method}: HTTP {status}: {}",
                crate::table::clip(text.trim(), 300)
            )));
        }
        if !is_json {
            return Err(CallError::Refused(format!(
                "{method}: the answer is not JSON (HTTP {status})"
            )));
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| CallError::Refused(format!("{method}: the answer is not JSON: {e}")))
    }
}

/// An error with its sources (`error sending request: client error (Connect): tcp connect error:
/// Connection refused`), without the URL (a capability URL holds the token).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
