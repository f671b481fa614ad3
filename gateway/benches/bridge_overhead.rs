//! Bridge overhead benchmark: what the gateway + broker add to a model turn, beside a bare loopback
//! HTTP round trip measured in the same run.
//!
//! Two figures per turn, with a stand-in runner instead of Claude Code:
//! - A: the runner's model request is sent → the pending turn is visible through MCP
//!   (`reply_and_wait` returns it);
//! - B: `reply_and_wait` is sent → the first SSE content event reaches the runner.
//!
//! Run: `cargo bench -p gateway --bench bridge_overhead [-- --turns N --save]`. `--save` writes
//! the table to `gateway/benches/RESULTS.md`. Timing never fails the bench.
//!
//! The stand-in runner is this executable re-executed by the broker as `CLAUDE_BIN`: when its
//! arguments contain `--strict-mcp-config` it plays Claude Code (stream-json on stdin/stdout,
//! streaming `/v1/messages`, tools through the MCP server of `--mcp-config`) and appends
//! `request_sent <ns>` / `first_content <ns>` lines to the file named by its first prompt
//! (`TIMING_FILE=<path> BENCH_PID=<pid>`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde_json::{Value, json};

const DEFAULT_TURNS: usize = 200;
const WARMUP_TURNS: usize = 10;
const BASELINE_ROUND_TRIPS: usize = 1000;
const STATUS_ROUND_TRIPS: usize = 200;
/// The context session: each turn answered after this long, like a real (slow) ChatGPT.
const THINK_TIME: Duration = Duration::from_millis(60);
const THINK_TURNS: usize = 100;
const FSYNC_PROBES: usize = 200;
/// Hand-written notes in RESULTS.md start at this heading and survive `--save`.
const NOTES_HEADING: &str = "## Notes";
/// Targets, in milliseconds above the baseline.
const TARGET_P50_MS: f64 = 2.0;
const TARGET_P99_MS: f64 = 10.0;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = if args.iter().any(|a| a == "--strict-mcp-config") {
        stand_in::run(&args)
    } else {
        bench::run(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bridge_overhead: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Wall-clock nanoseconds since the epoch: comparable across the processes of one machine.
fn unix_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The HTTP client both sides use: plain HTTP/1.1, no proxy, pooled keep-alive connections.
fn http_client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(120))
        .build()
        .context("building the HTTP client")
}

/// The fake Claude Code the broker launches.
mod stand_in {
    use super::*;

    use futures::StreamExt;

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

    fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    }

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
                if let Some(path) = word.strip_prefix("TIMING_FILE=") {
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
                            let gone =
                                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                                    .is_err();
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
            let request = self
                .client
                .post(format!("{}/v1/messages", self.base_url))
                .header("x-api-key", &self.api_key)
                .header("anthropic-version", "2023-06-01")
                .header("content-type", "application/json")
                .body(body.to_string());
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
                                    Some("input_json_delta") => json_text
                                        .push_str(delta["partial_json"].as_str().unwrap_or("")),
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
}

/// The benchmark: the gateway as a child process, ChatGPT as a script.
mod bench {
    use super::*;

    struct Options {
        turns: usize,
        save: bool,
        /// Write the per-turn samples (turn, A ms, B ms) of the main session here, as CSV.
        dump: Option<PathBuf>,
    }

    fn options(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options {
            turns: DEFAULT_TURNS,
            save: false,
            dump: None,
        };
        let mut iter = args.iter().skip(1);
        while let Some(arg) = iter.next() {
            match arg.as_str() {
                "--save" => options.save = true,
                "--dump" => options.dump = Some(iter.next().context("--dump needs a path")?.into()),
                "--turns" => {
                    options.turns = iter
                        .next()
                        .context("--turns needs a number")?
                        .parse()
                        .context("--turns needs a number")?;
                }
                // `cargo bench` passes `--bench`; a name filter may follow too.
                _ => {}
            }
        }
        Ok(options)
    }

    /// The gateway child; killed with everything it started when dropped.
    struct GatewayProcess {
        child: Child,
        state_dir: PathBuf,
    }

    impl Drop for GatewayProcess {
        fn drop(&mut self) {
            let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
            kill_leftovers(&self.state_dir);
        }
    }

    /// Brokers outlive their gateway by design, and runners live in their own process group.
    /// After a normal stop there are none; after a failure, end those this run started: the
    /// processes whose command line names this run's private state dir.
    fn kill_leftovers(state_dir: &Path) {
        let needle = state_dir.display().to_string();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                eprintln!("bridge_overhead: ending leftover process {pid}");
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }

    fn start_gateway(
        state_dir: &Path,
        token: &str,
        log: &Path,
    ) -> anyhow::Result<(GatewayProcess, String)> {
        let stand_in = std::env::current_exe().context("locating the bench executable")?;
        let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("CLAUDE_TOOLS_STATE_DIR", state_dir)
            .env("CLAUDE_TOOLS_GATEWAY_TOKEN", token)
            .env("CLAUDE_BIN", &stand_in)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).context("creating the gateway log")?)
            .spawn()
            .context("starting the gateway")?;
        let mut process = GatewayProcess {
            child,
            state_dir: state_dir.to_path_buf(),
        };
        let stdout = process.child.stdout.take().context("no gateway stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = tx.send(reader.read_line(&mut line).map(|_| line));
            // Keep draining so the gateway never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .context("the gateway did not report its address")??;
        let url = line
            .trim()
            .strip_prefix("listening ")
            .with_context(|| format!("unexpected gateway output {line:?}"))?
            .to_string();
        Ok((process, url))
    }

    /// A scripted ChatGPT: stateless MCP JSON-RPC over HTTP.
    struct Chat {
        client: reqwest::Client,
        url: String,
        token: String,
        next_id: std::sync::atomic::AtomicU64,
    }

    impl Chat {
        async fn call(&self, tool: &str, arguments: Value) -> anyhow::Result<Value> {
            let id = self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let body = json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            });
            let response = self
                .client
                .post(&self.url)
                .bearer_auth(&self.token)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-06-18")
                .body(body.to_string())
                .send()
                .await?;
            let status = response.status();
            let text = response.text().await?;
            if !status.is_success() {
                bail!("{tool}: HTTP {status}: {text}");
            }
            let message: Value = serde_json::from_str(&text)
                .with_context(|| format!("{tool}: answer is not JSON: {text}"))?;
            let result = &message["result"];
            if result["isError"].as_bool().unwrap_or(false) || result.is_null() {
                bail!("{tool} failed: {message}");
            }
            Ok(result["structuredContent"].clone())
        }
    }

    fn text_of(view: &Value, key: &str) -> anyhow::Result<String> {
        view[key]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("the SessionView has no {key}: {view}"))
    }

    fn pending_turn_id(view: &Value) -> anyhow::Result<String> {
        view["pending_turn"]["turn_id"]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no pending turn: {view}"))
    }

    /// Milliseconds of a sorted sample at quantile `q` (nearest rank).
    fn quantile(sorted: &[f64], q: f64) -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    struct Stat {
        name: String,
        n: usize,
        p50: f64,
        p99: f64,
    }

    fn stat(name: impl Into<String>, mut millis: Vec<f64>) -> Stat {
        millis.sort_by(f64::total_cmp);
        Stat {
            name: name.into(),
            n: millis.len(),
            p50: quantile(&millis, 0.50),
            p99: quantile(&millis, 0.99),
        }
    }

    fn ns_to_ms(ns: i128) -> f64 {
        ns as f64 / 1e6
    }

    /// Bare loopback HTTP: an in-process axum server answering a small JSON.
    async fn baseline(client: &reqwest::Client) -> anyhow::Result<Vec<f64>> {
        let app = axum::Router::new().route(
            "/echo",
            axum::routing::post(|body: String| async move {
                axum::Json(json!({"ok": true, "len": body.len()}))
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/echo", listener.local_addr()?);
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
        let mut samples = Vec::with_capacity(BASELINE_ROUND_TRIPS);
        for i in 0..BASELINE_ROUND_TRIPS + 50 {
            let start = Instant::now();
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await?;
            let text = response.text().await?;
            let elapsed = start.elapsed();
            if !text.contains("\"ok\"") {
                bail!("baseline server answered {text:?}");
            }
            if i >= 50 {
                samples.push(elapsed.as_secs_f64() * 1e3);
            }
        }
        server.abort();
        Ok(samples)
    }

    /// A small append + `fdatasync` on the state dir's file system: the floor of one durable
    /// SQLite commit (WAL, `synchronous=FULL`).
    fn fsync_floor(dir: &Path) -> anyhow::Result<Vec<f64>> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("fsync-probe"))?;
        let page = [7u8; 4096];
        let mut samples = Vec::with_capacity(FSYNC_PROBES);
        for _ in 0..FSYNC_PROBES {
            let start = Instant::now();
            file.write_all(&page)?;
            file.sync_data()?;
            samples.push(start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(samples)
    }

    struct Measured {
        a_ms: Vec<f64>,
        b_ms: Vec<f64>,
        cycle_ms: Vec<f64>,
        tool_ms: Vec<f64>,
        status_ms: Vec<f64>,
    }

    /// Timing lines of the stand-in: (request_sent, first_content) per model request, in order.
    fn read_timing(path: &Path) -> anyhow::Result<(Vec<i128>, Vec<i128>)> {
        let text = std::fs::read_to_string(path).context("reading the timing file")?;
        let (mut sent, mut first) = (Vec::new(), Vec::new());
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(kind), Some(value)) = (parts.next(), parts.next()) else {
                continue;
            };
            let value: i128 = value.parse()?;
            match kind {
                "request_sent" => sent.push(value),
                "first_content" => first.push(value),
                _ => {}
            }
        }
        Ok((sent, first))
    }

    /// One session of `turns` measured tool turns, each answered `think` after it became visible.
    async fn session(
        chat: &Chat,
        work_dir: &Path,
        timing_path: &Path,
        key: &str,
        turns: usize,
        think: Duration,
    ) -> anyhow::Result<Measured> {
        let prompt = format!(
            "TIMING_FILE={} BENCH_PID={}",
            timing_path.display(),
            std::process::id()
        );
        let view = chat
            .call(
                "native_session_start",
                json!({
                    "prompt": prompt,
                    "working_directory": work_dir.display().to_string(),
                    "idempotency_key": key,
                    "wait_seconds": 50,
                }),
            )
            .await?;
        let session_id = text_of(&view, "native_session_id")?;
        let lease_id = text_of(&view, "lease_id")?;
        let result = drive(
            chat,
            Turns {
                session_id: &session_id,
                lease_id: &lease_id,
                first_view: &view,
                work_dir,
                timing_path,
                turns,
                think,
            },
        )
        .await;
        let stop = chat
            .call(
                "native_session_stop",
                json!({
                    "native_session_id": session_id, "lease_id": lease_id,
                    "request_id": format!("{key}-stop"), "reason": "benchmark finished",
                }),
            )
            .await;
        let measured = result?;
        stop?;
        Ok(measured)
    }

    struct Turns<'a> {
        session_id: &'a str,
        lease_id: &'a str,
        first_view: &'a Value,
        work_dir: &'a Path,
        timing_path: &'a Path,
        turns: usize,
        think: Duration,
    }

    async fn drive(chat: &Chat, run: Turns<'_>) -> anyhow::Result<Measured> {
        let Turns {
            session_id,
            lease_id,
            first_view,
            work_dir,
            timing_path,
            turns,
            think,
        } = run;
        let total = WARMUP_TURNS + turns;
        let file = work_dir.join("hello.txt");
        let mut turn_id = pending_turn_id(first_view)?;
        let mut t_reply = Vec::with_capacity(total);
        let mut t_visible = Vec::with_capacity(total);
        let mut cycle_ms = Vec::with_capacity(turns);
        for i in 0..total {
            if !think.is_zero() {
                tokio::time::sleep(think).await;
            }
            let sent = unix_nanos();
            let view = chat
                .call(
                    "native_session_reply_and_wait",
                    json!({
                        "native_session_id": session_id, "lease_id": lease_id,
                        "turn_id": turn_id, "reply_id": format!("r{i}"), "text": "",
                        "tool_calls": [{"name": "Read", "arguments": {"file_path": file.display().to_string()}}],
                    }),
                )
                .await?;
            let visible = unix_nanos();
            if view["pending_turn"]["kind"] != "tool_results" {
                bail!("turn {i}: expected a tool_results turn, got {view}");
            }
            if i == 0 && view["pending_turn"]["tool_results"][0]["status"] != "ok" {
                eprintln!(
                    "bridge_overhead: note: the Read call did not succeed: {}",
                    view["pending_turn"]["tool_results"]
                );
            }
            turn_id = pending_turn_id(&view)?;
            t_reply.push(sent);
            t_visible.push(visible);
            if i >= WARMUP_TURNS {
                cycle_ms.push(ns_to_ms(visible - sent));
            }
        }

        // Context: a trivial MCP call through the gateway.
        let mut status_ms = Vec::with_capacity(STATUS_ROUND_TRIPS);
        for _ in 0..STATUS_ROUND_TRIPS {
            let start = Instant::now();
            chat.call(
                "native_session_status",
                json!({"native_session_id": session_id, "lease_id": lease_id, "wait_seconds": 0}),
            )
            .await?;
            status_ms.push(start.elapsed().as_secs_f64() * 1e3);
        }

        // End the runner's turn with a text-only reply, so it is idle when stopped.
        chat.call(
            "native_session_reply_and_wait",
            json!({
                "native_session_id": session_id, "lease_id": lease_id,
                "turn_id": turn_id, "reply_id": "r-final", "text": "done",
            }),
        )
        .await?;

        let (sent, first) = read_timing(timing_path)?;
        // Request k is answered by reply k (k = 0 is the prompt's request); reply i's tool
        // results come back as request i + 1.
        if sent.len() < total + 1 || first.len() < total {
            bail!(
                "the timing file has {} requests and {} first-content marks; expected {} and {total}",
                sent.len(),
                first.len(),
                total + 1
            );
        }
        let mut a_ms = Vec::with_capacity(turns);
        let mut b_ms = Vec::with_capacity(turns);
        let mut tool_ms = Vec::with_capacity(turns);
        for i in WARMUP_TURNS..total {
            b_ms.push(ns_to_ms(first[i] - t_reply[i]));
            a_ms.push(ns_to_ms(t_visible[i] - sent[i + 1]));
            tool_ms.push(ns_to_ms(sent[i + 1] - first[i]));
        }
        Ok(Measured {
            a_ms,
            b_ms,
            cycle_ms,
            tool_ms,
            status_ms,
        })
    }

    fn machine() -> String {
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        format!("{cpus} CPUs (nproc), {model}, Linux {kernel}")
    }

    fn today() -> String {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        time::OffsetDateTime::from_unix_timestamp(secs)
            .map(|t| {
                format!(
                    "{:04}-{:02}-{:02} {:02}:{:02} UTC",
                    t.year(),
                    u8::from(t.month()),
                    t.day(),
                    t.hour(),
                    t.minute()
                )
            })
            .unwrap_or_else(|_| "unknown date".into())
    }

    fn table(base: &Stat, measured: &[Stat], context: &[Stat]) -> String {
        let mut out = String::new();
        out.push_str(
            "| metric | n | p50 (ms) | p99 (ms) | p50 − base p50 (ms) | p99 − base p99 (ms) | target (above base) | verdict |\n",
        );
        out.push_str("|---|---:|---:|---:|---:|---:|---|---|\n");
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | — | — | baseline | — |\n",
            base.name, base.n, base.p50, base.p99
        ));
        for s in measured {
            let d50 = s.p50 - base.p50;
            let d99 = s.p99 - base.p99;
            let pass = d50 <= TARGET_P50_MS && d99 <= TARGET_P99_MS;
            out.push_str(&format!(
                "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | p50 ≤ {TARGET_P50_MS} ms, p99 ≤ {TARGET_P99_MS} ms | {} |\n",
                s.name,
                s.n,
                s.p50,
                s.p99,
                d50,
                d99,
                if pass { "PASS" } else { "FAIL" }
            ));
        }
        for s in context {
            out.push_str(&format!(
                "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | (context) | — |\n",
                s.name,
                s.n,
                s.p50,
                s.p99,
                s.p50 - base.p50,
                s.p99 - base.p99
            ));
        }
        out
    }

    pub fn run(args: &[String]) -> anyhow::Result<()> {
        let options = options(args)?;
        let runtime = tokio::runtime::Runtime::new()?;
        let root = tempfile::Builder::new().prefix("gwbench").tempdir()?;
        let state_dir = root.path().join("state");
        let work_dir = root.path().join("work");
        std::fs::create_dir_all(&work_dir)?;
        std::fs::write(
            work_dir.join("hello.txt"),
            "hello from the bridge benchmark\n",
        )?;
        let log_path = root.path().join("gateway.log");
        let token = format!("bench-{}", uuid::Uuid::new_v4().simple());

        let (gateway, url) = start_gateway(&state_dir, &token, &log_path)?;
        let chat = Chat {
            client: http_client()?,
            url,
            token,
            next_id: std::sync::atomic::AtomicU64::new(1),
        };
        let think_turns = options.turns.min(THINK_TURNS);
        println!(
            "bridge_overhead: {} turns (+{WARMUP_TURNS} warm-up) answered at once, then {think_turns} \
             answered after {} ms, with a stand-in runner",
            options.turns,
            THINK_TIME.as_millis()
        );
        let sessions = runtime.block_on(async {
            let immediate = session(
                &chat,
                &work_dir,
                &root.path().join("timing.log"),
                "bench",
                options.turns,
                Duration::ZERO,
            )
            .await?;
            let thinking = session(
                &chat,
                &work_dir,
                &root.path().join("timing-think.log"),
                "bench-think",
                think_turns,
                THINK_TIME,
            )
            .await?;
            anyhow::Ok((immediate, thinking))
        });
        let (measured, thinking) = match sessions {
            Ok(m) => m,
            Err(err) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                eprintln!("--- gateway log (last lines) ---");
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
                drop(gateway);
                return Err(err);
            }
        };
        let base_client = http_client()?;
        let base = runtime.block_on(baseline(&base_client))?;
        drop(gateway);
        let fsync = fsync_floor(root.path())?;
        if let Some(path) = &options.dump {
            let mut csv = String::from("turn,a_ms,b_ms\n");
            for (i, (a, b)) in measured.a_ms.iter().zip(&measured.b_ms).enumerate() {
                csv.push_str(&format!("{},{a:.4},{b:.4}\n", i + WARMUP_TURNS));
            }
            std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
        }

        let base = stat("bare loopback HTTP round trip", base);
        // The runner resends the whole conversation each request: show how A grows with it.
        let window = (measured.a_ms.len() / 4).max(1);
        let a_early = stat(
            format!("A, first {window} measured turns"),
            measured.a_ms.iter().take(window).copied().collect(),
        );
        let a_late = stat(
            format!("A, last {window} turns (longest history)"),
            measured.a_ms.iter().rev().take(window).copied().collect(),
        );
        let rows = [
            stat(
                "A: runner request sent → pending turn visible via MCP",
                measured.a_ms,
            ),
            stat(
                "B: reply_and_wait sent → first SSE content at runner",
                measured.b_ms,
            ),
        ];
        let context = [
            a_early,
            a_late,
            stat(
                format!("A, reply after {} ms think time", THINK_TIME.as_millis()),
                thinking.a_ms,
            ),
            stat(
                format!("B, reply after {} ms think time", THINK_TIME.as_millis()),
                thinking.b_ms,
            ),
            stat(
                "MCP round trip (native_session_status, wait 0)",
                measured.status_ms,
            ),
            stat(
                "runner: first SSE content → next request (Read incl. durable ack)",
                measured.tool_ms,
            ),
            stat(
                "full cycle: reply_and_wait round trip (one Read)",
                measured.cycle_ms,
            ),
            stat("4 KiB append + fdatasync on the state dir's disk", fsync),
        ];
        let table = table(&base, &rows, &context);
        println!("\n{table}");
        let machine = machine();
        println!("machine: {machine}");
        if options.save {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("benches")
                .join("RESULTS.md");
            let notes = match std::fs::read_to_string(&path) {
                Ok(old) => old
                    .find(NOTES_HEADING)
                    .map(|at| old[at..].to_string())
                    .unwrap_or_default(),
                Err(_) => String::new(),
            };
            let doc = format!(
                "# Bridge overhead\n\n\
                 Produced by `cargo bench -p gateway --bench bridge_overhead -- --save` \
                 (release build, stand-in runner, state dir on the local disk); the table is \
                 rewritten on each `--save`, the notes below it are kept.\n\n\
                 - date: {}\n- machine: {machine}\n- turns: {} measured after {WARMUP_TURNS} \
                 warm-up (plus {think_turns} with think time); baseline: {BASELINE_ROUND_TRIPS} \
                 round trips\n\n\
                 A = the runner's model request is sent → the pending turn is visible through MCP \
                 (`reply_and_wait` returns it). B = `reply_and_wait` is sent → the first SSE content \
                 event (after `message_start`/`ping`) reaches the runner. Each turn is one `Read` \
                 call. The baseline is a bare loopback HTTP POST round trip measured in the same run \
                 with the same client settings. Target: p50 ≤ {TARGET_P50_MS} ms and p99 ≤ \
                 {TARGET_P99_MS} ms above the baseline (p50 − baseline p50, p99 − baseline p99). \
                 The \"think time\" rows answer each turn {} ms after it became visible, as a \
                 real ChatGPT always does.\n\n{table}\n{notes}",
                today(),
                options.turns,
                THINK_TIME.as_millis(),
            );
            let doc = doc.trim_end().to_string() + "\n";
            std::fs::write(&path, doc).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
        }
        Ok(())
    }
}
