//! The stand-in runner: a fake Claude Code the broker launches as `CLAUDE_BIN`, for benches that
//! need real sessions without the real CLI.
//!
//! A bench executable becomes the stand-in when its arguments contain `--strict-mcp-config` (see
//! [`is_stand_in`]). It then speaks stream-json on stdin/stdout, streams `/v1/messages` from the
//! broker's bridge, and calls tools through the MCP server of `--mcp-config`. Words in its first
//! prompt configure it: `TIMING_FILE=<name>` appends `request_bytes <n>` / `request_sent <ns>` /
//! `first_content <ns>` lines (and `tool_call_sent <ns>` / `tool_call_done <ns>` around each executor call) to that
//! file in its private HOME (it is confined like the real runner; see
//! [`super::runner_home_file`]); `BENCH_PID=<pid>` makes it exit once that process is gone, so a
//! crashed bench leaves no runner behind.

use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use super::{http_client, unix_nanos};

const PREFIX: &str = "mcp__gw__";

struct Runner {
    client: reqwest::Client,
    base_url: String,
    api_key: String,
    mcp_url: String,
    mcp_auth: Option<String>,
    messages: Vec<Value>,
    timing: Option<std::fs::File>,
    next_rpc_id: u64,
}

/// Whether this process was launched as the stand-in runner (by a broker, as `CLAUDE_BIN`).
pub fn is_stand_in(args: &[String]) -> bool {
    args.iter().any(|a| a == "--strict-mcp-config")
}

fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// Play Claude Code until stdin closes.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let config_path = flag_value(args, "--mcp-config").context("no --mcp-config")?;
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(config_path).context("reading the MCP config")?,
    )?;
    let server = &config["mcpServers"]["gw"];
    let mcp_url = server["url"]
        .as_str()
        .context("the MCP config has no gw url")?
        .to_string();
    let mcp_auth = server["headers"]["Authorization"]
        .as_str()
        .map(str::to_string);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut runner = Runner {
        client: http_client()?,
        base_url: std::env::var("ANTHROPIC_BASE_URL").context("no ANTHROPIC_BASE_URL")?,
        api_key: std::env::var("ANTHROPIC_API_KEY").context("no ANTHROPIC_API_KEY")?,
        mcp_url,
        mcp_auth,
        messages: Vec::new(),
        timing: None,
        next_rpc_id: 1,
    };
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if event["type"] != "user" {
            continue;
        }
        let text = match &event["message"]["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if runner.timing.is_none() {
            runner.open_timing(&text)?;
        }
        runner
            .messages
            .push(json!({"role": "user", "content": text}));
        rt.block_on(runner.turn())?;
        writeln!(
            stdout,
            "{}",
            json!({"type": "result", "subtype": "success", "is_error": false})
        )?;
        stdout.flush()?;
    }
    Ok(())
}

impl Runner {
    /// Open the timing file named in the first prompt and watch the bench process, so that a
    /// crashed bench leaves no runner behind.
    fn open_timing(&mut self, prompt: &str) -> anyhow::Result<()> {
        for word in prompt.split_whitespace() {
            if let Some(name) = word.strip_prefix("TIMING_FILE=") {
                // Confined like the real runner, it may write only under its private HOME.
                let home = std::env::var_os("HOME").context("no HOME")?;
                let path = std::path::Path::new(&home).join(name);
                self.timing = Some(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .context("opening the timing file")?,
                );
            } else if let Some(pid) = word.strip_prefix("BENCH_PID=") {
                let pid: i32 = pid.parse()?;
                std::thread::spawn(move || {
                    loop {
                        std::thread::sleep(Duration::from_millis(500));
                        // Not kill(pid, 0): Landlock's signal scope refuses it across domains.
                        let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
                        if gone {
                            std::process::exit(3);
                        }
                    }
                });
            }
        }
        Ok(())
    }

    fn record(&mut self, what: &str, nanos: i128) -> anyhow::Result<()> {
        if let Some(file) = self.timing.as_mut() {
            // One unbuffered line per write: the runner may be killed at any time.
            file.write_all(format!("{what} {nanos}\n").as_bytes())?;
        }
        Ok(())
    }

    /// One runner turn: model requests and tool calls until the model ends its turn.
    async fn turn(&mut self) -> anyhow::Result<()> {
        loop {
            let (content, stop_reason) = self.model_request().await?;
            let calls: Vec<(String, String, Value)> = content
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| {
                    (
                        b["id"].as_str().unwrap_or_default().to_string(),
                        b["name"].as_str().unwrap_or_default().to_string(),
                        b["input"].clone(),
                    )
                })
                .collect();
            self.messages
                .push(json!({"role": "assistant", "content": content}));
            if stop_reason != "tool_use" || calls.is_empty() {
                return Ok(());
            }
            let mut results = Vec::new();
            for (id, name, input) in calls {
                results.push(self.call_tool(&id, &name, input).await?);
            }
            self.messages
                .push(json!({"role": "user", "content": results}));
        }
    }

    /// POST `/v1/messages` (streaming) and rebuild the assistant content from the SSE events.
    async fn model_request(&mut self) -> anyhow::Result<(Vec<Value>, String)> {
        let body = json!({
            "model": "m",
            "max_tokens": 1000,
            "stream": true,
            "messages": self.messages,
            "tools": [{"name": "mcp__gw__Read", "description": "d", "input_schema": {"type": "object"}}],
        });
        let body = body.to_string();
        self.record("request_bytes", body.len() as i128)?;
        let request = self
            .client
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", &self.api_key)
            .header("anthropic-version", "2023-06-01")
            .header("content-type", "application/json")
            .body(body);
        self.record("request_sent", unix_nanos())?;
        let response = request.send().await?;
        if !response.status().is_success() {
            bail!(
                "/v1/messages: HTTP {}: {}",
                response.status(),
                response.text().await.unwrap_or_default()
            );
        }
        let mut stream = response.bytes_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut blocks: Vec<Value> = Vec::new();
        let mut partial_json: Vec<String> = Vec::new();
        let mut stop_reason = String::new();
        let mut content_seen = false;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            let arrived = unix_nanos();
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buffer) {
                let raw: Vec<u8> = buffer.drain(..end.1).take(end.0).collect();
                let Some(data) = event_data(&raw) else {
                    continue;
                };
                let kind = data["type"].as_str().unwrap_or_default().to_string();
                if !content_seen && kind != "message_start" && kind != "ping" {
                    content_seen = true;
                    self.record("first_content", arrived)?;
                }
                match kind.as_str() {
                    "content_block_start" => {
                        blocks.push(data["content_block"].clone());
                        partial_json.push(String::new());
                    }
                    "content_block_delta" => {
                        let index = data["index"].as_u64().unwrap_or(0) as usize;
                        let delta = &data["delta"];
                        if let (Some(block), Some(json_text)) =
                            (blocks.get_mut(index), partial_json.get_mut(index))
                        {
                            match delta["type"].as_str() {
                                Some("text_delta") => {
                                    let text = format!(
                                        "{}{}",
                                        block["text"].as_str().unwrap_or_default(),
                                        delta["text"].as_str().unwrap_or_default()
                                    );
                                    block["text"] = Value::String(text);
                                }
                                Some("input_json_delta") => {
                                    json_text.push_str(delta["partial_json"].as_str().unwrap_or(""))
                                }
                                _ => {}
                            }
                        }
                    }
                    "content_block_stop" => {
                        let index = data["index"].as_u64().unwrap_or(0) as usize;
                        if let (Some(block), Some(json_text)) =
                            (blocks.get_mut(index), partial_json.get(index))
                            && block["type"] == "tool_use"
                        {
                            block["input"] = if json_text.is_empty() {
                                json!({})
                            } else {
                                serde_json::from_str(json_text)?
                            };
                        }
                    }
                    "message_delta" => {
                        stop_reason = data["delta"]["stop_reason"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                    }
                    "error" => bail!("model error event: {data}"),
                    _ => {}
                }
            }
        }
        Ok((blocks, stop_reason))
    }

    /// `tools/call` on the executor MCP; returns the `tool_result` block.
    async fn call_tool(&mut self, id: &str, name: &str, input: Value) -> anyhow::Result<Value> {
        let rpc_id = self.next_rpc_id;
        self.next_rpc_id += 1;
        let body = json!({
            "jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
            "params": {
                "name": name.strip_prefix(PREFIX).unwrap_or(name),
                "arguments": input,
                "_meta": {"claudecode/toolUseId": id},
            },
        });
        let mut request = self
            .client
            .post(&self.mcp_url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(auth) = &self.mcp_auth {
            request = request.header("authorization", auth);
        }
        self.record("tool_call_sent", unix_nanos())?;
        let response = request.send().await?;
        let status = response.status();
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let text = response.text().await?;
        if !status.is_success() {
            bail!("tools/call: HTTP {status}: {text}");
        }
        let message: Value = if is_sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v.get("id").is_some())
                .context("no JSON-RPC answer in the SSE body")?
        } else {
            serde_json::from_str(&text)?
        };
        self.record("tool_call_done", unix_nanos())?;
        let result = &message["result"];
        if result.is_null() {
            bail!("tools/call failed: {message}");
        }
        Ok(json!({
            "type": "tool_result",
            "tool_use_id": id,
            "content": result["content"],
            "is_error": result["isError"].as_bool().unwrap_or(false),
        }))
    }
}

/// End of the first complete SSE event in `buffer`: (event length, length with separator).
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The JSON of an event's `data:` lines.
fn event_data(raw: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(raw).ok()?;
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data.join("\n")).ok()
}
