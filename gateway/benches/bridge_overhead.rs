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
//! The stand-in runner (`support/stand_in.rs`) is this executable re-executed by the broker as
//! `CLAUDE_BIN`: when its arguments contain `--strict-mcp-config` it plays Claude Code (stream-json
//! on stdin/stdout, streaming `/v1/messages`, tools through the MCP server of `--mcp-config`) and
//! appends `request_sent <ns>` / `first_content <ns>` lines to the file named by its first prompt
//! (`TIMING_FILE=<name> BENCH_PID=<pid>`; the file lands in the stand-in's private HOME).

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use support::{
    GatewayProcess, McpClient, chat, http_client, machine, ns_to_ms, pending_turn_id, quantile,
    text_of, today, unix_nanos,
};

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
const TARGET_P50_MS: f64 = 1.0;
const TARGET_P99_MS: f64 = 3.0;
/// Target: A's p50 over the last window of turns at most this many times the first window's.
const TARGET_GROWTH: f64 = 1.25;
/// Turns per row of the table by history length.
const HISTORY_WINDOW: usize = 100;

fn main() -> ExitCode {
    support::bench_main("bridge_overhead", bench::run)
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
        /// Size of the request body each A was measured on.
        request_bytes: Vec<usize>,
        a_ms: Vec<f64>,
        b_ms: Vec<f64>,
        cycle_ms: Vec<f64>,
        tool_ms: Vec<f64>,
        status_ms: Vec<f64>,
    }

    /// Timing lines of the stand-in: (request_sent, first_content, request_bytes) per model
    /// request, in order.
    fn read_timing(path: &Path) -> anyhow::Result<(Vec<i128>, Vec<i128>, Vec<i128>)> {
        let (mut sent, mut first, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
        for (kind, value) in super::support::timing_lines(path)? {
            match kind.as_str() {
                "request_sent" => sent.push(value),
                "first_content" => first.push(value),
                "request_bytes" => bytes.push(value),
                _ => {}
            }
        }
        Ok((sent, first, bytes))
    }

    /// One session of `turns` measured tool turns, each answered `think` after it became visible.
    async fn session(
        chat: &McpClient,
        work_dir: &Path,
        timing_path: &Path,
        key: &str,
        turns: usize,
        think: Duration,
    ) -> anyhow::Result<Measured> {
        // The stand-in is confined like a real runner: it writes the file in its private HOME.
        let name = timing_path
            .file_name()
            .context("the timing path has no file name")?
            .to_string_lossy()
            .to_string();
        let prompt = format!("TIMING_FILE={name} BENCH_PID={}", std::process::id());
        let view = chat
            .call_tool_ok(
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
            .call_tool_ok(
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

    async fn drive(chat: &McpClient, run: Turns<'_>) -> anyhow::Result<Measured> {
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
                .call_tool_ok(
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
            chat.call_tool_ok(
                "native_session_status",
                json!({"native_session_id": session_id, "lease_id": lease_id, "wait_seconds": 0}),
            )
            .await?;
            status_ms.push(start.elapsed().as_secs_f64() * 1e3);
        }

        // End the runner's turn with a text-only reply, so it is idle when stopped.
        chat.call_tool_ok(
            "native_session_reply_and_wait",
            json!({
                "native_session_id": session_id, "lease_id": lease_id,
                "turn_id": turn_id, "reply_id": "r-final", "text": "done",
            }),
        )
        .await?;

        let (sent, first, bytes) = read_timing(&super::support::runner_home_file(timing_path)?)?;
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
        let mut request_bytes = Vec::with_capacity(turns);
        for i in WARMUP_TURNS..total {
            request_bytes.push(bytes.get(i + 1).map_or(0, |&b| b as usize));
            b_ms.push(ns_to_ms(first[i] - t_reply[i]));
            a_ms.push(ns_to_ms(t_visible[i] - sent[i + 1]));
            tool_ms.push(ns_to_ms(sent[i + 1] - first[i]));
        }
        Ok(Measured {
            request_bytes,
            a_ms,
            b_ms,
            cycle_ms,
            tool_ms,
            status_ms,
        })
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

    /// A and B by history length: one row per window of turns, with the request's size.
    fn history_table(base: &Stat, measured: &Measured) -> String {
        let n = measured.a_ms.len();
        let window = if n >= 2 * HISTORY_WINDOW {
            HISTORY_WINDOW
        } else {
            (n / 4).max(1)
        };
        let mut out = String::from(
            "| turns (history) | request KiB (mean) | A p50 − base | A p99 − base | B p50 − base | B p99 − base | verdict |\n\
             |---|---:|---:|---:|---:|---:|---|\n",
        );
        let mut a_p50 = Vec::new();
        for from in (0..n).step_by(window) {
            let to = (from + window).min(n);
            let a = stat("", measured.a_ms[from..to].to_vec());
            let b = stat("", measured.b_ms[from..to].to_vec());
            let kib = measured.request_bytes[from..to].iter().sum::<usize>() as f64
                / (to - from) as f64
                / 1024.0;
            let pass = [a.p50 - base.p50, b.p50 - base.p50]
                .iter()
                .all(|d| *d <= TARGET_P50_MS)
                && [a.p99 - base.p99, b.p99 - base.p99]
                    .iter()
                    .all(|d| *d <= TARGET_P99_MS);
            out.push_str(&format!(
                "| {}–{} | {kib:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {} |\n",
                from + WARMUP_TURNS + 1,
                to + WARMUP_TURNS,
                a.p50 - base.p50,
                a.p99 - base.p99,
                b.p50 - base.p50,
                b.p99 - base.p99,
                if pass { "PASS" } else { "FAIL" }
            ));
            a_p50.push(a.p50);
        }
        if let (Some(first), Some(last)) = (a_p50.first(), a_p50.last()) {
            let growth = last / first;
            out.push_str(&format!(
                "\nA p50, last window / first window: {growth:.2}× (target ≤ {TARGET_GROWTH}×): {}\n",
                if growth <= TARGET_GROWTH { "PASS" } else { "FAIL" }
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

        // Two sessions, one after the other.
        let gateway = GatewayProcess::start(&runtime, &state_dir, &token, &log_path, "warn", 2)?;
        let chat = chat(&http_client()?, &gateway.url, &token)?;
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
                &state_dir.join("timing.log"),
                "bench",
                options.turns,
                Duration::ZERO,
            )
            .await?;
            let thinking = session(
                &chat,
                &work_dir,
                &state_dir.join("timing-think.log"),
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
        let history = history_table(&base, &measured);
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
        let table = format!(
            "{}\nBy history length (ms above the baseline):\n\n{history}",
            table(&base, &rows, &context)
        );
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
