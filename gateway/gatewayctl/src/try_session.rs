//! `try [DIR]`: a newcomer's first session. A scripted ChatGPT drives one read_only session on a
//! directory through the local gateway (MCP over Streamable HTTP, as ChatGPT's connector speaks it)
//! and the real Claude Code runner: FindFiles, then a Read of a small text file it found, then a
//! final answer; each turn is printed as it happens — what ChatGPT sent, what ran, the receipts —
//! and the session is stopped at the end.
//!
//! It talks to the gateway only through its public MCP tools, like ChatGPT does; it reads the
//! state dir only for the access token (`connector-url` does the same), which it sends only to
//! the address the state dir's running gateway names over its owner-only admin socket (red team
//! 39 F7: another account listening on the default port while the gateway was down or elsewhere
//! got the owner's token).

use common::display::one_line;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{TryArgs, write_json};

mod client;

use client::{CallError, McpClient};

/// The prompt the scripted ChatGPT starts the session with.
pub const PROMPT: &str = "Look around this directory: list its files, read one small text file, \
                          and tell me what it is.";
/// A long-polling call waits at most 50 s on the server.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Turns after which the script gives up (it needs three).
const MAX_TURNS: usize = 6;
/// Lines of a tool's output shown per result.
const SHOWN_LINES: usize = 8;
/// How deep the listing goes: the directory's files and its subdirectories' (a deeper walk of a
/// checkout lists `node_modules` and build output first, in path order).
const LISTING_DEPTH: u32 = 2;
/// Files larger than this are not picked for the Read.
const SMALL_FILE_BYTES: u64 = 64 * 1024;

/// What the scripted ChatGPT sent in one reply.
#[derive(Debug, Clone, Serialize)]
pub struct Sent {
    pub text: String,
    pub tool_calls: Vec<Value>,
}

/// One model turn of the runner and ChatGPT's answer to it.
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    /// The pending turn as the gateway showed it.
    pub pending: Value,
    pub sent: Sent,
}

/// Everything `try` saw, for `--json` and for the printed form.
#[derive(Debug, Clone, Serialize)]
pub struct Transcript {
    pub url: String,
    pub directory: String,
    pub started: Value,
    pub turns: Vec<Turn>,
    /// The view once the runner's turn ended (`idle`) or the session ended on its own.
    pub settled: Value,
    /// The view after the stop, when the script stopped the session.
    pub stopped: Option<Value>,
}

/// `try`.
pub fn run(
    state_dir: &Path,
    args: &TryArgs,
    json_output: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let directory = directory(args.dir.as_deref())?;
    let given = args.url.as_deref().map(|url| url.trim_end_matches('/'));
    let token = token(state_dir, args.token.as_deref(), given.unwrap_or(""))?;
    // A capability URL the owner gave carries its own token, to where they said; a bearer token
    // goes only to this state dir's gateway.
    let url = match given {
        Some(url) if is_capability_url(url) => url.to_string(),
        given => gateway_url(state_dir, given)?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let transcript = runtime.block_on(async {
        let client = connect(&url, token.as_deref()).await?;
        let mut printer = Printer {
            out: &mut *out,
            live: !json_output,
        };
        let mut session = None;
        let result = drive(
            &client,
            &shown_url(&url),
            &directory,
            &mut printer,
            &mut session,
        )
        .await;
        if let (Err(_), Some(session)) = (&result, session) {
            // Do not leave a runner behind for its lease's lifetime: best effort, the error that
            // ended the script is what gets reported.
            let mut args = session;
            args["request_id"] = json!(format!("try-abort-{}", uuid::Uuid::new_v4()));
            args["reason"] = json!("gatewayctl try failed");
            let _ = call(&client, "native_session_stop", args).await;
        }
        result
    })?;
    if json_output {
        write_json(out, &serde_json::to_value(&transcript)?)?;
    }
    let settled_ok = transcript.settled["status"] == "idle";
    if !settled_ok {
        return Err(crate::Reported(format!(
            "try: the session ended {} instead of idle",
            transcript.settled["status"]
        ))
        .into());
    }
    Ok(())
}

fn directory(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let canonical = std::fs::canonicalize(&dir)
        .with_context(|| format!("{}: no such directory", dir.display()))?;
    if !canonical.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    Ok(canonical)
}

/// The token from `--token`/`CLAUDE_TOOLS_GATEWAY_TOKEN`, else `<state>/auth/access-token`; none
/// is needed when the URL is already a capability URL (`…/mcp/<token>`).
fn token(state_dir: &Path, given: Option<&str>, url: &str) -> anyhow::Result<Option<String>> {
    // The URL carries its own: no other token goes with it (red team 40: an environment token
    // went to a capability-shaped URL nobody checked).
    if is_capability_url(url) {
        return Ok(None);
    }
    if let Some(token) = given.filter(|t| !t.is_empty()) {
        return Ok(Some(token.to_string()));
    }
    let path = state_dir.join("auth").join("access-token");
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_string())),
        Ok(_) => bail!("{} is empty", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "no access token: {} does not exist. Start the gateway with scripts/run (it creates \
             the token on first start), or give its state dir (--state-dir) or \
             CLAUDE_TOOLS_GATEWAY_TOKEN",
            path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("reading the access token {}", path.display())),
    }
}

/// The MCP endpoint of the state dir's running gateway, as it names its listening address over
/// its admin socket; a `--url` must be that endpoint.
fn gateway_url(state_dir: &Path, given: Option<&str>) -> anyhow::Result<String> {
    let status = crate::oauth::gateway_status(state_dir).map_err(|err| match err {
        crate::oauth::AdminError::NotRunning(_) => anyhow::anyhow!(
            "no gateway is running with the state dir {} (it has no admin socket), and the access \
             token is sent only to that gateway. Start it with scripts/run (in another terminal), \
             wait for its `listening` line, then run gatewayctl try again; or give the state dir \
             of the gateway you started (--state-dir), or its capability URL (--url …/mcp/<token>)",
            common::display::one_line(&state_dir.display().to_string())
        ),
        other => anyhow::Error::new(other),
    })?;
    let Some(listen) = status.listen else {
        bail!(
            "the gateway of this state dir does not say where it listens (an older gateway): \
             restart it with this version, or give its capability URL (--url …/mcp/<token>)"
        );
    };
    let own = format!("http://{listen}/mcp");
    match given {
        None => Ok(own),
        Some(url) if same_endpoint(url, &listen) => Ok(url.to_string()),
        Some(url) => bail!(
            "{} is not where the gateway of this state dir listens ({own}), and the access token \
             is sent only there. Run gatewayctl try without --url, or with --url {own}",
            common::display::one_line(url)
        ),
    }
}

/// Whether `url` is `http://<listen>/mcp`, the address exactly as the gateway names it (not
/// `localhost`, which may resolve to `::1`, where another account may listen: red team 40).
fn same_endpoint(url: &str, listen: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    rest.split_once('/') == Some((listen, "mcp"))
}

/// The URL as printed: a capability URL's token is replaced by `<token>`.
fn shown_url(url: &str) -> String {
    match url.rsplit_once("/mcp/") {
        Some((base, _)) if is_capability_url(url) => format!("{base}/mcp/<token>"),
        _ => url.to_string(),
    }
}

fn is_capability_url(url: &str) -> bool {
    url.rsplit_once("/mcp/")
        .is_some_and(|(_, tail)| !tail.is_empty() && !tail.contains('/'))
}

async fn connect(url: &str, token: Option<&str>) -> anyhow::Result<McpClient> {
    match tokio::time::timeout(CALL_TIMEOUT, McpClient::connect(url, token)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(err)) => Err(connect_error(url, &err)),
        Err(_) => bail!("the gateway at {url} did not answer within {CALL_TIMEOUT:?}"),
    }
}

/// A failed connection in words a newcomer can act on.
fn connect_error(url: &str, error: &CallError) -> anyhow::Error {
    match error {
        CallError::Unauthorized => anyhow::anyhow!(
            "the gateway at {url} refused the access token. Use the token of the gateway that is \
             running: CLAUDE_TOOLS_GATEWAY_TOKEN, or --state-dir pointing at its state dir \
             (scripts/run uses ./state in the repository)"
        ),
        CallError::Unreachable(_) => anyhow::anyhow!(
            "no gateway is answering at {url}. Start it with scripts/run (in another terminal), \
             wait for its `listening` line, then run gatewayctl try again; or pass --url"
        ),
        CallError::Refused(detail) => {
            anyhow::anyhow!("connecting to the gateway at {url}: {detail}")
        }
    }
}

/// Prints the session as it goes (unless the answer is JSON at the end).
struct Printer<'a, W: Write> {
    out: &'a mut W,
    live: bool,
}

impl<W: Write> Printer<'_, W> {
    fn print(&mut self, text: &str) -> anyhow::Result<()> {
        if self.live {
            self.out.write_all(text.as_bytes())?;
            self.out.flush()?;
        }
        Ok(())
    }
}

async fn call(client: &McpClient, tool: &str, args: Value) -> anyhow::Result<Value> {
    let Value::Object(arguments) = args else {
        bail!("arguments of {tool} must be an object");
    };
    let mut result = tokio::time::timeout(CALL_TIMEOUT, client.call_tool(tool, arguments))
        .await
        .with_context(|| format!("{tool}: no answer within {CALL_TIMEOUT:?}"))?
        .with_context(|| format!("calling {tool}"))?;
    let structured = result
        .get_mut("structuredContent")
        .map_or(Value::Null, Value::take);
    if result["isError"] == true {
        let code = one_line(structured["error"]["code"].as_str().unwrap_or("unknown"));
        let message = one_line(structured["error"]["message"].as_str().unwrap_or(""));
        bail!("{tool} was refused: {code}: {message}");
    }
    if !structured.is_object() {
        bail!("{tool} answered without a SessionView");
    }
    Ok(structured)
}

fn is_terminal(view: &Value) -> bool {
    matches!(
        view["status"].as_str(),
        Some("stopped" | "failed" | "expired")
    )
}

/// Waits (status long-poll) until the session has a pending turn, is idle, or ended.
async fn settle(client: &McpClient, mut view: Value) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while !matches!(view["status"].as_str(), Some("waiting_for_gpt" | "idle"))
        && !is_terminal(&view)
    {
        if tokio::time::Instant::now() >= deadline {
            bail!("the session stayed {} for 5 minutes", view["status"]);
        }
        view = call(
            client,
            "native_session_status",
            json!({
                "native_session_id": view["native_session_id"],
                "lease_id": view["lease_id"],
                "wait_seconds": 10,
            }),
        )
        .await?;
    }
    Ok(view)
}

async fn drive<W: Write>(
    client: &McpClient,
    url: &str,
    directory: &Path,
    printer: &mut Printer<'_, W>,
    session_out: &mut Option<Value>,
) -> anyhow::Result<Transcript> {
    let dir = directory.to_string_lossy().to_string();
    printer.print(&render_header(url, &dir))?;
    let started = call(
        client,
        "native_session_start",
        json!({
            "prompt": PROMPT,
            "working_directory": dir,
            "capability_profile": "read_only",
            "session_label": "gatewayctl try",
            "idempotency_key": format!("try-{}", uuid::Uuid::new_v4()),
            "wait_seconds": 50,
        }),
    )
    .await?;
    printer.print(&render_started(&started))?;
    let session = json!({
        "native_session_id": started["native_session_id"],
        "lease_id": started["lease_id"],
    });
    *session_out = Some(session.clone());
    let mut script = Script::default();
    let mut turns = Vec::new();
    let mut view = settle(client, started.clone()).await?;
    while view["status"] == "waiting_for_gpt" {
        if turns.len() >= MAX_TURNS {
            bail!("the runner asked for more than {MAX_TURNS} turns");
        }
        let pending = view["pending_turn"].clone();
        let sent = script.answer(&pending, directory);
        printer.print(&render_turn(turns.len() + 1, &pending, &sent))?;
        let mut args = session.clone();
        args["turn_id"] = pending["turn_id"].clone();
        args["reply_id"] = json!(format!("try-reply-{}", turns.len() + 1));
        args["text"] = json!(sent.text);
        if !sent.tool_calls.is_empty() {
            args["tool_calls"] = json!(sent.tool_calls);
        }
        turns.push(Turn { pending, sent });
        let answer = call(client, "native_session_reply_and_wait", args).await?;
        view = settle(client, answer).await?;
    }
    printer.print(&render_settled(&view))?;
    let stopped = if is_terminal(&view) {
        None
    } else {
        let mut args = session.clone();
        args["request_id"] = json!(format!("try-stop-{}", uuid::Uuid::new_v4()));
        args["reason"] = json!("gatewayctl try is done");
        let stopped = call(client, "native_session_stop", args).await?;
        printer.print(&render_stopped(&stopped))?;
        Some(stopped)
    };
    Ok(Transcript {
        url: url.to_string(),
        directory: dir,
        started,
        turns,
        settled: view,
        stopped,
    })
}

/// The scripted ChatGPT: FindFiles, then Read of a small text file from the listing, then a final
/// answer built from what it saw.
#[derive(Debug, Default)]
struct Script {
    files_found: Option<usize>,
    read: Option<(String, Option<String>, usize)>,
}

impl Script {
    fn answer(&mut self, pending: &Value, directory: &Path) -> Sent {
        let results = pending["tool_results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for result in &results {
            match result["name"].as_str() {
                Some("FindFiles") => {
                    self.files_found = Some(listed_count(result));
                    if let Some(file) = pick_small_text_file(&listed_files(result)) {
                        return Sent {
                            text: format!("Reading {}.", file_name(&file)),
                            tool_calls: vec![json!({
                                "name": "Read",
                                "arguments": {"file_path": file, "limit": 40},
                            })],
                        };
                    }
                }
                Some("Read") => {
                    let file = result["receipt"]["path"].as_str().unwrap_or("").to_string();
                    let sha = result["receipt"]["sha256"].as_str().map(str::to_string);
                    let lines = result["output"].as_str().map_or(0, numbered_lines);
                    self.read = Some((file, sha, lines));
                }
                _ => {}
            }
        }
        if pending["kind"] == "prompt" {
            return Sent {
                text: "Let me list the files first.".into(),
                tool_calls: vec![json!({
                    "name": "FindFiles",
                    "arguments": {
                        "path": directory.to_string_lossy(),
                        "max_depth": LISTING_DEPTH,
                        "max_results": 200,
                    },
                })],
            };
        }
        Sent {
            text: self.final_answer(directory),
            tool_calls: Vec::new(),
        }
    }

    fn final_answer(&self, directory: &Path) -> String {
        let dir = directory.display();
        let found = match self.files_found {
            Some(n) => format!("FindFiles listed {n} file(s) in {dir}"),
            None => format!("I could not list {dir}"),
        };
        match &self.read {
            Some((file, sha, lines)) => format!(
                "{found}. I read {} ({lines} line(s) shown, sha256 {}).",
                file_name(file),
                sha.as_deref().unwrap_or("unknown")
            ),
            None => format!("{found}; none of them looked like a small text file to read."),
        }
    }
}

/// How many of the file's lines a Read result shows: its numbered lines (`     3\t…`), not the
/// notes it adds (`[truncated: showing lines 1-40 of 120]`, `[empty file]`).
fn numbered_lines(output: &str) -> usize {
    output
        .lines()
        .filter(|line| {
            line.split_once('\t').is_some_and(|(number, _)| {
                let number = number.trim_start();
                !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .count()
}

/// An exit code as a person reads it: a shell and the runner report a process killed by signal N
/// as 128 + N, so 143 is "killed by SIGTERM (128 + 15)".
fn explain_exit_code(code: i64) -> String {
    let Some(signal) = code.checked_sub(128).filter(|n| (1..=64).contains(n)) else {
        return code.to_string();
    };
    let name = i32::try_from(signal)
        .ok()
        // nix, not rustix: rustix has no conventional signal names (its Debug says `Signal::ABORT`).
        .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
        .map_or_else(|| format!("signal {signal}"), |s| s.as_str().to_string());
    format!("{code}: killed by {name} (128 + {signal})")
}

/// How many files a FindFiles result lists: plain paths and escaped ones (a name with control
/// or bidi characters is shown quoted, `"/…"`), not its notes nor symlinks.
fn listed_count(result: &Value) -> usize {
    result["output"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter(|l| (l.starts_with('/') || l.starts_with("\"/")) && !l.ends_with(" -> (symlink)"))
        .count()
}

/// The plain file paths in a FindFiles result, the ones `try` may read (its notes in brackets,
/// escaped names and symlinks left out).
fn listed_files(result: &Value) -> Vec<String> {
    result["output"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter(|l| l.starts_with('/') && !l.ends_with(" -> (symlink)"))
        .map(str::to_string)
        .collect()
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A README first, then other text-like names, then anything; small, non-empty files only.
fn pick_small_text_file(files: &[String]) -> Option<String> {
    const TEXT: &[&str] = &[
        "md", "txt", "toml", "json", "yaml", "yml", "rs", "py", "js", "ts", "sh", "cfg", "ini",
    ];
    let rank = |path: &str| {
        let name = file_name(path).to_ascii_lowercase();
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_string());
        if name.starts_with("readme") {
            0
        } else if ext.as_deref().is_some_and(|e| TEXT.contains(&e)) {
            1
        } else {
            2
        }
    };
    let mut candidates: Vec<&String> = files
        .iter()
        .filter(|f| {
            std::fs::symlink_metadata(f.as_str())
                .is_ok_and(|m| m.is_file() && m.len() > 0 && m.len() <= SMALL_FILE_BYTES)
        })
        .collect();
    candidates.sort_by_key(|f| (rank(f), f.matches('/').count()));
    candidates.first().map(|f| (*f).clone())
}

// ---- printing ----

/// A string field of the endpoint's answer, as one line: `try --url` may talk to an endpoint
/// that is not the owner's gateway, and a line feed in a field printed whole lines of its own
/// (red team 43 B5: a forged "runner confinement" line). Multi-line output is printed through
/// `indent_lines`, each line behind its own prefix.
fn field(value: &Value) -> std::borrow::Cow<'_, str> {
    one_line(value.as_str().unwrap_or("?"))
}

fn render_header(url: &str, dir: &str) -> String {
    format!(
        "gatewayctl try: one read_only session, ChatGPT played by a script\n  \
         gateway    {url}\n  directory  {dir}\n\n"
    )
}

fn render_started(view: &Value) -> String {
    let boundary = &view["network_boundary"];
    format!(
        "session {} started ({}; runner: Claude Code, generation {}; status {})\n  \
         runner confinement: network {}, writes {} ({})\n  \
         commands: {}{}\n\n",
        field(&view["native_session_id"]),
        field(&view["capability_profile"]),
        view["current_run"]["generation"],
        field(&view["status"]),
        field(&boundary["runner"]),
        field(&boundary["runner_writes"]),
        field(&boundary["enforced_by"]),
        field(&boundary["commands_enforced_by"]),
        // Which part is degraded is what the session's own view says (red team 45 F2: the
        // runner was called degraded where its commands were).
        if boundary["degraded"] == true {
            " (the session's confinement is degraded on this host: see its network_boundary)"
        } else {
            ""
        },
    )
}

/// The names in `allowed_tools`, whether entries are names or objects with a `name`.
fn allowed_names(pending: &Value) -> Vec<String> {
    pending["allowed_tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().or_else(|| t["name"].as_str()))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn indent_lines(text: &str, prefix: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut shown: String = lines
        .iter()
        .take(SHOWN_LINES)
        .map(|l| format!("{prefix}{}\n", crate::table::clip(l, 100)))
        .collect();
    if lines.len() > SHOWN_LINES {
        shown.push_str(&format!(
            "{prefix}… {} more line(s)\n",
            lines.len() - SHOWN_LINES
        ));
    }
    shown
}

fn render_turn(number: usize, pending: &Value, sent: &Sent) -> String {
    let kind = field(&pending["kind"]);
    let what = match kind.as_ref() {
        "prompt" => "Claude Code asks ChatGPT, its model, to answer the prompt",
        "tool_results" => "the executor ran ChatGPT's calls; Claude Code asks what next",
        _ => "Claude Code asks ChatGPT",
    };
    let mut s = format!("── turn {number} ({kind}) ──────────────────────────────\n  {what}\n");
    if let Some(prompt) = pending["prompt"].as_str() {
        s.push_str(&format!("  prompt        {prompt:?}\n"));
        s.push_str(&format!(
            "  may call      {}\n",
            allowed_names(pending).join(", ")
        ));
    }
    for result in pending["tool_results"].as_array().into_iter().flatten() {
        let receipt = &result["receipt"];
        s.push_str(&format!(
            "  ran #{} {}: {}{}\n",
            result["call_index"],
            field(&result["name"]),
            field(&result["status"]),
            if result["truncated"] == true {
                " (output truncated)"
            } else {
                ""
            },
        ));
        s.push_str(&format!(
            "    receipt     {} in {} ms\n",
            field(&receipt["action_id"]),
            receipt["duration_ms"]
        ));
        if let Some(path) = receipt["path"].as_str() {
            s.push_str(&format!("    path        {}\n", one_line(path)));
        }
        if let Some(sha) = receipt["sha256"].as_str() {
            s.push_str(&format!("    sha256      {}\n", one_line(sha)));
        }
        if let Some(code) = receipt["exit_code"].as_i64() {
            s.push_str(&format!("    exit code   {}\n", explain_exit_code(code)));
        }
        s.push_str(&indent_lines(
            result["output"].as_str().unwrap_or(""),
            "    │ ",
        ));
    }
    s.push_str(&format!("  ChatGPT sends {:?}\n", sent.text));
    for call in &sent.tool_calls {
        s.push_str(&format!(
            "                + {} {}\n",
            field(&call["name"]),
            call["arguments"]
        ));
    }
    s.push('\n');
    s
}

fn render_settled(view: &Value) -> String {
    let mut s = format!(
        "session {}: {}\n",
        field(&view["native_session_id"]),
        field(&view["status"])
    );
    if let Some(text) = view["last_result"]["text"].as_str() {
        s.push_str(&format!("  final answer  {text:?}\n"));
    }
    if !view["launch_error"].is_null() {
        s.push_str(&format!("  launch error  {}\n", view["launch_error"]));
    }
    if !view["terminal"].is_null() {
        s.push_str(&format!("  terminal      {}\n", view["terminal"]));
    }
    s
}

fn render_stopped(view: &Value) -> String {
    let id = field(&view["native_session_id"]);
    let exit = match view["terminal"]["exit_code"].as_i64() {
        // The stop ends the runner's process group with SIGTERM: the expected end, not a crash.
        Some(143) => format!(
            "exit code {}, as native_session_stop ends it",
            explain_exit_code(143)
        ),
        Some(code) => format!("exit code {}", explain_exit_code(code)),
        None => "no exit code".to_string(),
    };
    format!(
        "stopped: status {}, runner {} ({exit})\n\n\
         The receipts and the ledger stay in the state dir: gatewayctl show {id}\n",
        field(&view["status"]),
        field(&view["current_run"]["state"]),
    )
}

#[cfg(test)]
mod tests;
