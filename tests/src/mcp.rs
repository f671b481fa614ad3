//! A minimal MCP (JSON-RPC over Streamable HTTP) client for tests, written on reqwest so that it
//! shares no code with the server's rmcp: it behaves like ChatGPT's connector (legacy
//! `initialize`, protocol 2025-06-18, stateless, `Accept: application/json, text/event-stream`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

/// The protocol revision ChatGPT sends in `initialize`.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-06-18";

const ACCEPT: &str = "application/json, text/event-stream";

/// Builder for [`McpClient`].
#[derive(Debug, Clone)]
pub struct McpClientBuilder {
    url: String,
    token: Option<String>,
    protocol_version: String,
    timeout: Duration,
    headers: Vec<(String, String)>,
    client_name: String,
    http: Option<reqwest::Client>,
}

impl McpClientBuilder {
    /// Sends through this HTTP client (its pool, timeouts and socket options, e.g. a bench's
    /// keep-alive HTTP/1.1 client shared by many clients) instead of a new one; [`Self::timeout`]
    /// then does not apply.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// Bearer token for `Authorization`; without it no header is sent (capability URL).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The protocolVersion sent in `initialize` (default [`DEFAULT_PROTOCOL_VERSION`]).
    pub fn protocol_version(mut self, v: impl Into<String>) -> Self {
        self.protocol_version = v.into();
        self
    }

    /// Per-request HTTP timeout (default 120 s; the longest tool waits are ~50 s).
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// An extra header sent on every request (e.g. `Host`, `Origin`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `clientInfo.name` sent in `initialize` (default `openai-mcp`, like ChatGPT).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// Builds the client without any handshake (for protocol tests).
    pub fn build(self) -> anyhow::Result<McpClient> {
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .timeout(self.timeout)
                .no_proxy()
                .build()
                .context("building reqwest client")?,
        };
        Ok(McpClient {
            http,
            url: self.url,
            token: self.token,
            protocol_version: self.protocol_version,
            client_name: self.client_name,
            extra_headers: self.headers,
            negotiated: Mutex::new(None),
            session_id: Mutex::new(None),
            init_result: Mutex::new(Value::Null),
            next_id: AtomicI64::new(1),
            output_schemas: Mutex::new(None),
        })
    }

    /// Builds the client and performs `initialize` + `notifications/initialized`.
    pub async fn connect(self) -> anyhow::Result<McpClient> {
        let client = self.build()?;
        client.initialize().await?;
        Ok(client)
    }
}

/// A minimal MCP client over Streamable HTTP.
#[derive(Debug)]
pub struct McpClient {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    protocol_version: String,
    client_name: String,
    extra_headers: Vec<(String, String)>,
    negotiated: Mutex<Option<String>>,
    session_id: Mutex<Option<String>>,
    init_result: Mutex<Value>,
    next_id: AtomicI64,
    /// The advertised `outputSchema` of each tool, compiled on the first result to check.
    output_schemas: Mutex<Option<Arc<OutputSchemas>>>,
}

/// Validators for the `outputSchema` of every tool `tools/list` advertised, by tool name.
struct OutputSchemas(HashMap<String, jsonschema::Validator>);

impl std::fmt::Debug for OutputSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl OutputSchemas {
    /// Compile the `outputSchema` of each tool in a `tools/list` result.
    fn compile(tools: &Value) -> anyhow::Result<Self> {
        let mut by_name = HashMap::new();
        for tool in tools["tools"].as_array().into_iter().flatten() {
            let name = tool["name"]
                .as_str()
                .ok_or_else(|| anyhow!("tools/list: a tool without a name: {tool}"))?;
            let schema = tool
                .get("outputSchema")
                .ok_or_else(|| anyhow!("tools/list: {name} advertises no outputSchema"))?;
            let validator = jsonschema::validator_for(schema)
                .map_err(|e| anyhow!("tools/list: {name}'s outputSchema is not a schema: {e}"))?;
            by_name.insert(name.to_owned(), validator);
        }
        Ok(OutputSchemas(by_name))
    }

    /// Every error of `structured` against `tool`'s advertised schema, as one message.
    fn check(&self, tool: &str, structured: &Value) -> anyhow::Result<()> {
        let validator = self
            .0
            .get(tool)
            .ok_or_else(|| anyhow!("{tool} answered, but tools/list does not advertise it"))?;
        let errors: Vec<String> = validator
            .iter_errors(structured)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            bail!(
                "{tool}: structuredContent does not validate against the advertised \
                 outputSchema (a validating client such as the TypeScript or Python SDK would \
                 reject it): {}\n{}",
                errors.join("; "),
                pretty(structured)
            )
        }
    }
}

impl McpClient {
    /// A builder for `url` (e.g. `http://127.0.0.1:PORT/mcp` or the capability URL `/mcp/<token>`).
    pub fn builder(url: impl Into<String>) -> McpClientBuilder {
        McpClientBuilder {
            url: url.into(),
            token: None,
            protocol_version: DEFAULT_PROTOCOL_VERSION.to_owned(),
            timeout: Duration::from_secs(120),
            headers: Vec::new(),
            client_name: "openai-mcp".to_owned(),
            http: None,
        }
    }

    /// Connects with a bearer token and the default protocol version (initialize + initialized).
    pub async fn connect(url: &str, token: &str) -> anyhow::Result<Self> {
        Self::builder(url).token(token).connect().await
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `result` of `initialize` (Null before the handshake).
    pub fn init_result(&self) -> Value {
        lock(&self.init_result).clone()
    }

    /// The protocol version the server answered in `initialize`, if the handshake happened.
    pub fn negotiated_version(&self) -> Option<String> {
        lock(&self.negotiated).clone()
    }

    /// Sends `initialize` and `notifications/initialized`; returns the initialize `result`.
    pub async fn initialize(&self) -> anyhow::Result<Value> {
        let params = json!({
            "protocolVersion": self.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": self.client_name, "version": "1.0.0"},
        });
        let (status, headers, body) = self
            .post_message(&self.request_body("initialize", params))
            .await?;
        if !status.is_success() {
            bail!("initialize: HTTP {status}: {body}");
        }
        if let Some(sid) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            *lock(&self.session_id) = Some(sid.to_owned());
        }
        let result = into_result(body, "initialize")?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("initialize result has no protocolVersion: {result}"))?
            .to_owned();
        *lock(&self.negotiated) = Some(version);
        *lock(&self.init_result) = result.clone();
        let status = self.notify("notifications/initialized", None).await?;
        if !status.is_success() {
            bail!("notifications/initialized: HTTP {status}");
        }
        Ok(result)
    }

    /// `tools/list`: the JSON-RPC `result` (`{"tools": [...]}`).
    pub async fn list_tools(&self) -> anyhow::Result<Value> {
        let (status, body) = self.raw("tools/list", Some(json!({}))).await?;
        if !status.is_success() {
            bail!("tools/list: HTTP {status}: {body}");
        }
        into_result(body, "tools/list")
    }

    /// `tools/call`: the JSON-RPC `result` (a CallToolResult, maybe `isError`), or the JSON-RPC
    /// `error` object (`{"code": -32602, "message": ...}`) for protocol errors. Non-2xx HTTP is Err.
    ///
    /// Like a validating client (the TypeScript and Python SDKs), every result's
    /// `structuredContent`, error results included, is checked against the `outputSchema` that
    /// `tools/list` advertises for the tool, with a JSON Schema validator: a result that does not
    /// validate is Err, so every test that calls a tool also checks the contract.
    pub async fn call_tool(&self, name: &str, args: Value) -> anyhow::Result<Value> {
        let (status, body) = self
            .raw("tools/call", Some(json!({"name": name, "arguments": args})))
            .await?;
        if !status.is_success() {
            bail!("tools/call {name}: HTTP {status}: {body}");
        }
        if let Some(result) = body.get("result") {
            self.check_output(name, result).await?;
            return Ok(result.clone());
        }
        if let Some(error) = body.get("error") {
            return Ok(error.clone());
        }
        bail!("tools/call {name}: response has neither result nor error: {body}")
    }

    /// Checks a `tools/call` result against the tool's advertised `outputSchema`: a result must
    /// carry `structuredContent` (the gateway advertises an output schema for every tool) and the
    /// text content must be the same JSON.
    async fn check_output(&self, name: &str, result: &Value) -> anyhow::Result<()> {
        let structured = result
            .get("structuredContent")
            .ok_or_else(|| anyhow!("{name}: the result has no structuredContent: {result}"))?;
        let text = result
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("{name}: the result has no text content: {result}"))?;
        let from_text: Value = serde_json::from_str(text)
            .with_context(|| format!("{name}: the text content is not JSON: {text}"))?;
        if &from_text != structured {
            bail!("{name}: the text content and structuredContent differ: {result}");
        }
        self.output_schemas().await?.check(name, structured)
    }

    /// The compiled output schemas, from one `tools/list` the first time they are needed.
    async fn output_schemas(&self) -> anyhow::Result<Arc<OutputSchemas>> {
        if let Some(schemas) = lock(&self.output_schemas).clone() {
            return Ok(schemas);
        }
        let schemas = Arc::new(OutputSchemas::compile(&self.list_tools().await?)?);
        *lock(&self.output_schemas) = Some(schemas.clone());
        Ok(schemas)
    }

    /// `tools/call` that must succeed: the `structuredContent` of the result; an error result
    /// (`isError`), a JSON-RPC error or a non-2xx answer is Err, with the answer in the message.
    pub async fn call_tool_ok(&self, name: &str, args: Value) -> anyhow::Result<Value> {
        let result = self.call_tool(name, args).await?;
        if result["isError"].as_bool().unwrap_or(false) || result.get("code").is_some() {
            bail!("{name} failed: {result}");
        }
        result
            .get("structuredContent")
            .cloned()
            .ok_or_else(|| anyhow!("{name}: the result has no structuredContent: {result}"))
    }

    /// One JSON-RPC request that must get a 2xx answer: the whole JSON-RPC response.
    pub async fn request(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let (status, body) = self.raw(method, Some(params)).await?;
        if !status.is_success() {
            bail!("{method}: HTTP {status}: {body}");
        }
        Ok(body)
    }

    /// Sends one JSON-RPC request; returns the HTTP status and the whole JSON-RPC response
    /// (`{"jsonrpc","id","result"|"error"}`), or the error body as JSON (Null if empty,
    /// `{"_text": ...}` if not JSON) for non-2xx answers.
    pub async fn raw(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let body = self.request_body(method, params.unwrap_or_else(|| json!({})));
        let (status, _, value) = self.post_message(&body).await?;
        Ok((status, value))
    }

    /// Sends a JSON-RPC notification; returns the HTTP status (202 expected).
    pub async fn notify(&self, method: &str, params: Option<Value>) -> anyhow::Result<StatusCode> {
        let mut body = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            body["params"] = p;
        }
        let (status, _, _) = self.post_message(&body).await?;
        Ok(status)
    }

    /// POSTs `body` verbatim to the endpoint. Default headers (Content-Type, Accept, bearer
    /// Authorization, MCP-Protocol-Version and session id once negotiated, builder headers) are
    /// sent unless `headers` names the same header: then `headers` wins, and an empty value drops
    /// it. Returns the status and the raw response text.
    pub async fn raw_http(
        &self,
        body: impl Into<String>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<(StatusCode, String)> {
        let mut map = self.default_headers()?;
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes()).context("header name")?;
            if value.is_empty() {
                map.remove(&name);
            } else {
                map.insert(name, HeaderValue::from_str(value).context("header value")?);
            }
        }
        let resp = self
            .http
            .post(&self.url)
            .headers(map)
            .body(body.into())
            .send()
            .await
            .with_context(|| format!("POST {}", self.url))?;
        let status = resp.status();
        let text = resp.text().await.context("reading response body")?;
        Ok((status, text))
    }

    /// POSTs `body` to any URL with exactly `headers` (nothing added but what reqwest adds).
    pub async fn post_raw(
        url: &str,
        body: impl Into<String>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<(StatusCode, String)> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .no_proxy()
            .build()?;
        let mut req = http.post(url).body(body.into());
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let resp = req.send().await.with_context(|| format!("POST {url}"))?;
        let status = resp.status();
        Ok((status, resp.text().await?))
    }

    fn request_body(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    fn default_headers(&self) -> anyhow::Result<HeaderMap> {
        let mut map = HeaderMap::new();
        map.insert("content-type", HeaderValue::from_static("application/json"));
        map.insert("accept", HeaderValue::from_static(ACCEPT));
        if let Some(token) = &self.token {
            map.insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {token}")).context("token header")?,
            );
        }
        if let Some(v) = lock(&self.negotiated).as_deref() {
            map.insert("mcp-protocol-version", HeaderValue::from_str(v)?);
        }
        if let Some(v) = lock(&self.session_id).as_deref() {
            map.insert("mcp-session-id", HeaderValue::from_str(v)?);
        }
        for (name, value) in &self.extra_headers {
            map.insert(
                HeaderName::from_bytes(name.as_bytes())?,
                HeaderValue::from_str(value)?,
            );
        }
        Ok(map)
    }

    async fn post_message(&self, body: &Value) -> anyhow::Result<(StatusCode, HeaderMap, Value)> {
        let resp = self
            .http
            .post(&self.url)
            .headers(self.default_headers()?)
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("POST {} ({})", self.url, body["method"]))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.text().await.context("reading response body")?;
        let value = if status.is_success() {
            parse_mcp_body(content_type.as_deref(), &text, body.get("id"))
                .with_context(|| format!("parsing answer to {} (HTTP {status})", body["method"]))?
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| {
                if text.is_empty() {
                    Value::Null
                } else {
                    json!({"_text": text})
                }
            })
        };
        Ok((status, headers, value))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn into_result(body: Value, what: &str) -> anyhow::Result<Value> {
    if let Some(r) = body.get("result") {
        return Ok(r.clone());
    }
    bail!("{what}: expected a JSON-RPC result, got {body}")
}

/// One server-sent event: its `event:` name (if any) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
}

/// Splits a `text/event-stream` body into events (comments and `retry:` skipped; events without
/// any `data:` line, such as priming events, kept with empty data).
pub fn parse_sse_events(body: &str) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut event = None;
    let mut id = None;
    let mut data: Vec<String> = Vec::new();
    let mut seen = false;
    let normalized = body.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        if line.is_empty() {
            if seen {
                events.push(SseEvent {
                    event: event.take(),
                    id: id.take(),
                    data: data.join("\n"),
                });
                data.clear();
                seen = false;
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                data.push(value.to_owned());
                seen = true;
            }
            "event" => {
                event = Some(value.to_owned());
                seen = true;
            }
            "id" => {
                id = Some(value.to_owned());
                seen = true;
            }
            _ => {}
        }
    }
    if seen {
        events.push(SseEvent {
            event,
            id,
            data: data.join("\n"),
        });
    }
    events
}

/// Parses an MCP HTTP answer. `application/json` (or no content type): the body as JSON (Null
/// if empty, as for 202). `text/event-stream`: the `data:` of the event carrying the JSON-RPC
/// response (`result` or `error`) whose `id` equals `id` (any response if `id` is None);
/// notifications and requests in the stream are skipped.
pub fn parse_mcp_body(
    content_type: Option<&str>,
    body: &str,
    id: Option<&Value>,
) -> anyhow::Result<Value> {
    let is_sse = content_type
        .map(|ct| {
            ct.trim()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
        .unwrap_or(false);
    if !is_sse {
        if body.trim().is_empty() {
            return Ok(Value::Null);
        }
        return serde_json::from_str(body).with_context(|| format!("not JSON: {body:.400}"));
    }
    for ev in parse_sse_events(body) {
        if ev.data.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
            continue;
        };
        let is_response = v.get("result").is_some() || v.get("error").is_some();
        let id_ok = match id {
            Some(want) => v.get("id") == Some(want) || v.get("id") == Some(&Value::Null),
            None => true,
        };
        if is_response && id_ok {
            return Ok(v);
        }
    }
    bail!("no JSON-RPC response in event stream: {body:.400}")
}

/// Asserts a `tools/call` result succeeded (`isError` absent or false, not a JSON-RPC error)
/// and returns its `structuredContent`.
pub fn tool_ok(result: &Value) -> &Value {
    if result.get("result").is_some() {
        panic!("tool_ok: pass the JSON-RPC `result`, not the whole response: {result}");
    }
    if result.get("code").is_some() && result.get("content").is_none() {
        panic!("tool_ok: expected a tool result, got a JSON-RPC error: {result}");
    }
    if result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        panic!("tool_ok: tool returned an error: {}", pretty(result));
    }
    match result.get("structuredContent") {
        Some(v) if !v.is_null() => v,
        _ => panic!(
            "tool_ok: result has no structuredContent: {}",
            pretty(result)
        ),
    }
}

/// Asserts a `tools/call` result is a tool error (`isError: true`) and returns
/// `structuredContent.error.code`.
pub fn tool_err_code(result: &Value) -> String {
    if !result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        panic!(
            "tool_err_code: expected isError: true, got {}",
            pretty(result)
        );
    }
    match result
        .pointer("/structuredContent/error/code")
        .and_then(Value::as_str)
    {
        Some(code) => {
            let message = result
                .pointer("/structuredContent/error/message")
                .and_then(Value::as_str);
            if message.is_none_or(str::is_empty) {
                panic!("tool_err_code: error without a message: {}", pretty(result));
            }
            code.to_owned()
        }
        None => panic!(
            "tool_err_code: no structuredContent.error.code in {}",
            pretty(result)
        ),
    }
}

/// The JSON-RPC error code of an error object (`{"code", "message"}`) or of a whole response
/// (`{"error": {...}}`); None if it is not an error.
pub fn rpc_error_code(v: &Value) -> Option<i64> {
    v.pointer("/error/code")
        .or_else(|| {
            if v.get("message").is_some() {
                v.get("code")
            } else {
                None
            }
        })
        .and_then(Value::as_i64)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

#[cfg(test)]
mod tests;
