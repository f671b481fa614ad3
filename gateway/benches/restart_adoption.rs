//! Restart re-adoption benchmark (issue 6): how long a gateway restart takes until every live
//! session's broker is re-adopted and answering, and the resident memory of the gateway and of each
//! broker at idle.
//!
//! For each size N (default 1, 10, 50) a gateway starts N sessions with the stand-in runner
//! (`support/stand_in.rs`; this executable re-executed by the broker as `CLAUDE_BIN`), then is
//! killed with SIGKILL and restarted on the same state dir `--repeats` times (default 5), twice:
//! once with every session waiting on its first turn (`pending`), once after each first turn was
//! answered with a text-only reply (`idle`). Each restart measures, from the spawn of the new
//! gateway:
//! - (a) its `listening` line: `start_background` re-adopts the brokers before the HTTP listener
//!   starts, so this already includes adoption;
//! - (b) every session's `native_session_status` (with its lease) answering
//!   `runtime_attached: true`.
//!
//! The baseline, measured in the same run, is the same restart with zero sessions (SIGKILL and
//! restart of a gateway whose state dir holds no session). Memory (VmRSS) is read after the last
//! restart of each phase and a short settle: the gateway, and each broker (found by its command
//! line: `broker` and the state dir); the stand-in runners, the brokers' children, are excluded
//! from the targets and shown for context.
//!
//! Run: `cargo bench -p gateway --bench restart_adoption [-- --repeats N --sizes 1,10,50
//! --no-save --keep]`. Writes `gateway/benches/RESTART_RESULTS.md` unless `--no-save`; `--keep`
//! keeps the temp dir with the gateway logs (`s<N>.log`, one line per re-adopted broker). Timing and memory
//! never fail the bench; the table says PASS/FAIL against the targets (≤ 1 s for 50 sessions,
//! ≤ 30 MiB gateway RSS idle, ≤ 15 MiB per broker).

mod support;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use support::{
    GatewayProcess, McpClient, http_client, kill_leftovers, machine, p50_max, pending_turn_id,
    processes_naming, stand_in, text_of, today,
};

const DEFAULT_SIZES: [usize; 3] = [1, 10, 50];
const DEFAULT_REPEATS: usize = 5;
/// Sessions started at once while setting up (each spawns a broker and a runner).
const START_CONCURRENCY: usize = 8;
/// Wait after adoption before reading memory, so start-up transients are over.
const SETTLE: Duration = Duration::from_secs(1);
/// The gateway's log level (the service default).
const RUST_LOG: &str = "info,rmcp=warn";
const TARGET_RESTART_MS: f64 = 1000.0;
const TARGET_RESTART_SESSIONS: usize = 50;
const TARGET_GATEWAY_MIB: f64 = 30.0;
const TARGET_BROKER_MIB: f64 = 15.0;
/// Hand-written notes in RESTART_RESULTS.md start at this heading and are kept on rewrite.
const NOTES_HEADING: &str = "## Notes";

fn main() -> ExitCode {
    support::bench_main("restart_adoption", run)
}

struct Options {
    sizes: Vec<usize>,
    repeats: usize,
    save: bool,
    /// Keep the temp dir (gateway and broker logs, state) for inspection.
    keep: bool,
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        sizes: DEFAULT_SIZES.to_vec(),
        repeats: DEFAULT_REPEATS,
        save: true,
        keep: false,
    };
    let mut iter = args.iter().skip(1);
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--no-save" => options.save = false,
            "--keep" => options.keep = true,
            "--repeats" => {
                options.repeats = iter
                    .next()
                    .context("--repeats needs a number")?
                    .parse()
                    .context("--repeats needs a number")?;
            }
            "--sizes" => {
                options.sizes = iter
                    .next()
                    .context("--sizes needs a list")?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .context("--sizes needs numbers, e.g. 1,10,50")?;
            }
            // `cargo bench` passes `--bench`; a name filter may follow too.
            _ => {}
        }
    }
    if options.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    Ok(options)
}

/// One live session, as ChatGPT holds it.
#[derive(Clone)]
struct Session {
    id: String,
    lease: String,
    turn: String,
}

/// Resident memory of one phase, MiB.
struct Memory {
    gateway: f64,
    brokers: Vec<f64>,
    runners: Vec<f64>,
}

/// The restarts of one phase.
struct Phase {
    label: String,
    sessions: usize,
    /// Spawn → `listening`, ms.
    listening: Vec<f64>,
    /// Spawn → every session answers `runtime_attached: true` (zero sessions: the first MCP answer).
    attached: Vec<f64>,
    memory: Memory,
}

/// What the run keeps around: one HTTP client, the token, the temp root.
struct Bench {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    token: String,
    root: PathBuf,
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let options = options(args)?;
    let temp = tempfile::Builder::new().prefix("gwrst").tempdir()?;
    let bench = Bench {
        runtime: tokio::runtime::Runtime::new()?,
        client: http_client()?,
        token: format!("bench-{}", uuid::Uuid::new_v4().simple()),
        root: temp.path().to_path_buf(),
    };
    let work_dir = bench.root.join("work");
    std::fs::create_dir_all(&work_dir)?;
    println!(
        "restart_adoption: sizes {:?}, {} restarts each (pending and idle), stand-in runner",
        options.sizes, options.repeats
    );

    let mut phases = Vec::new();
    let (cold, baseline) = bench.baseline(options.repeats)?;
    phases.push(baseline);
    let mut setup = Vec::new();
    for &n in &options.sizes {
        let (started_ms, first_memory, pending, idle) =
            bench.size(n, options.repeats, &work_dir)?;
        setup.push((n, started_ms, first_memory));
        phases.push(pending);
        phases.push(idle);
    }
    // Nothing of this run may outlive it.
    std::thread::sleep(Duration::from_millis(300));
    let leftovers = kill_leftovers(&bench.root);
    if leftovers > 0 {
        eprintln!("restart_adoption: note: {leftovers} processes were still running at the end");
    }

    let report = report(&phases, cold, &setup, options.repeats);
    println!("\n{report}");
    let machine = machine();
    println!("machine: {machine}");
    if options.save {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("benches")
            .join("RESTART_RESULTS.md");
        let notes = std::fs::read_to_string(&path)
            .ok()
            .and_then(|old| old.find(NOTES_HEADING).map(|at| old[at..].to_string()))
            .unwrap_or_default();
        let doc = format!(
            "# Restart re-adoption and idle memory\n\n\
             Produced by `cargo bench -p gateway --bench restart_adoption` (release build, stand-in \
             runner, state dir on the local disk); the tables are rewritten on each run, the notes \
             below them are kept.\n\n\
             - date: {}\n- machine: {machine}\n- uname -r: {}\n- nproc: {}\n- restarts per row: {}\n\n\
             Each row: N sessions started, the gateway killed with SIGKILL and restarted on the same \
             state dir. (a) = spawn → the `listening` line (brokers are re-adopted before the \
             listener starts, so (a) includes adoption). (b) = spawn → every session's \
             `native_session_status` answers `runtime_attached: true` (zero sessions: the first MCP \
             answer, `tools/list`). `pending` = every session waits on its first turn; `idle` = \
             each first turn was answered with a text-only reply. Baseline = the same restart with \
             zero sessions, measured in the same run; ratios are p50 / baseline p50.\n\n{report}\n{notes}",
            today(),
            kernel(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            options.repeats,
        );
        let doc = doc.trim_end().to_string() + "\n";
        std::fs::write(&path, doc).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if options.keep {
        println!("kept {}", temp.keep().display());
    }
    Ok(())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl Bench {
    fn log(&self, name: &str) -> PathBuf {
        self.root.join(format!("{name}.log"))
    }

    fn chat(&self, gateway: &GatewayProcess) -> anyhow::Result<McpClient> {
        support::chat(&self.client, &gateway.url, &self.token)
    }

    /// Zero sessions: the first start on an empty state dir (cold, creates the database and
    /// keys), then `repeats` SIGKILL + restarts.
    fn baseline(&self, repeats: usize) -> anyhow::Result<(f64, Phase)> {
        let state_dir = self.root.join("s0");
        let log = self.log("s0");
        let mut gateway =
            GatewayProcess::start(&self.runtime, &state_dir, &self.token, &log, RUST_LOG, 1)?;
        let cold = ms(gateway.listening_at - gateway.spawned_at);
        let mut listening = Vec::new();
        let mut attached = Vec::new();
        for _ in 0..repeats {
            gateway.sigkill();
            gateway =
                GatewayProcess::start(&self.runtime, &state_dir, &self.token, &log, RUST_LOG, 1)?;
            let chat = self.chat(&gateway)?;
            self.runtime
                .block_on(chat.request("tools/list", json!({})))?;
            listening.push(ms(gateway.listening_at - gateway.spawned_at));
            attached.push(ms(Instant::now() - gateway.spawned_at));
        }
        std::thread::sleep(SETTLE);
        let memory = memory(&gateway, &state_dir);
        drop(gateway);
        Ok((
            cold,
            Phase {
                label: "baseline: 0 sessions".into(),
                sessions: 0,
                listening,
                attached,
                memory,
            },
        ))
    }

    /// N sessions: start them, restart `repeats` times with every first turn pending, answer the
    /// turns, restart `repeats` times idle, stop them. Returns the time to start the N sessions
    /// (ms), the first gateway's memory, and the two phases.
    fn size(
        &self,
        n: usize,
        repeats: usize,
        work_dir: &Path,
    ) -> anyhow::Result<(f64, Memory, Phase, Phase)> {
        let name = format!("s{n}");
        let state_dir = self.root.join(&name);
        let log = self.log(&name);
        let mut gateway = Some(GatewayProcess::start(
            &self.runtime,
            &state_dir,
            &self.token,
            &log,
            RUST_LOG,
            n,
        )?);
        let result = (|| {
            let chat = self.chat(gateway.as_ref().context("no gateway running")?)?;
            let started = Instant::now();
            let sessions = self.runtime.block_on(start_sessions(&chat, n, work_dir))?;
            let started_ms = ms(started.elapsed());
            println!(
                "  N={n}: {n} {} started in {started_ms:.0} ms, each waiting on its first turn",
                plural(n)
            );
            std::thread::sleep(SETTLE);
            let first_memory = memory(gateway.as_ref().context("no gateway running")?, &state_dir);

            let pending = self.restarts(
                &mut gateway,
                &state_dir,
                &log,
                &sessions,
                repeats,
                "waiting_for_gpt",
            )?;
            let chat = self.chat(gateway.as_ref().context("no gateway running")?)?;
            self.runtime.block_on(answer_all(&chat, &sessions))?;
            let idle = self.restarts(&mut gateway, &state_dir, &log, &sessions, repeats, "idle")?;
            let chat = self.chat(gateway.as_ref().context("no gateway running")?)?;
            self.runtime.block_on(stop_all(&chat, &sessions))?;
            // Stopped sessions' brokers and runners exit on their own; give them the time.
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end
                && !processes_naming(&state_dir.display().to_string()).is_empty()
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            anyhow::Ok((
                started_ms,
                first_memory,
                Phase {
                    label: format!("{n} {}, pending", plural(n)),
                    sessions: n,
                    ..pending
                },
                Phase {
                    label: format!("{n} {}, idle", plural(n)),
                    sessions: n,
                    ..idle
                },
            ))
        })();
        if result.is_err() {
            print_log_tail(&log);
        }
        // Stops the gateway and ends whatever still names this state dir (also when a restart
        // failed and no gateway is running).
        drop(gateway);
        kill_leftovers(&state_dir);
        result
    }

    /// SIGKILL + restart `repeats` times; each time wait until every session is attached with
    /// `status`. Memory is read after the last restart.
    fn restarts(
        &self,
        gateway: &mut Option<GatewayProcess>,
        state_dir: &Path,
        log: &Path,
        sessions: &[Session],
        repeats: usize,
        status: &str,
    ) -> anyhow::Result<Phase> {
        let mut listening = Vec::new();
        let mut attached = Vec::new();
        for _ in 0..repeats {
            // The old gateway dies first (SIGKILL, its brokers survive), then the new one starts.
            if let Some(old) = gateway.take() {
                old.sigkill();
            }
            let started = gateway.insert(GatewayProcess::start(
                &self.runtime,
                state_dir,
                &self.token,
                log,
                RUST_LOG,
                sessions.len(),
            )?);
            let chat = self.chat(started)?;
            let done = self
                .runtime
                .block_on(all_attached(&chat, sessions, status))?;
            listening.push(ms(started.listening_at - started.spawned_at));
            attached.push(ms(done - started.spawned_at));
        }
        std::thread::sleep(SETTLE);
        let gateway = gateway.as_ref().context("no gateway running")?;
        Ok(Phase {
            label: String::new(),
            sessions: sessions.len(),
            listening,
            attached,
            memory: memory(gateway, state_dir),
        })
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "session" } else { "sessions" }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_log_tail(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    eprintln!("--- gateway log (last lines) ---");
    for line in tail.iter().rev() {
        eprintln!("{line}");
    }
}

/// Start `n` sessions, a few at a time; each returns once its first turn is pending.
async fn start_sessions(
    chat: &McpClient,
    n: usize,
    work_dir: &Path,
) -> anyhow::Result<Vec<Session>> {
    let prompt = format!("say hello BENCH_PID={}", std::process::id());
    let results: Vec<anyhow::Result<Session>> = futures::stream::iter(0..n)
        .map(|i| {
            let prompt = prompt.clone();
            async move {
                let view = chat
                    .call_tool_ok(
                        "native_session_start",
                        json!({
                            "prompt": prompt,
                            "working_directory": work_dir.display().to_string(),
                            "idempotency_key": format!("start-{i}"),
                            "wait_seconds": 50,
                        }),
                    )
                    .await?;
                Ok(Session {
                    id: text_of(&view, "native_session_id")?,
                    lease: text_of(&view, "lease_id")?,
                    turn: pending_turn_id(&view)?,
                })
            }
        })
        .buffered(START_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Answer each session's first turn with text only, then wait until each is idle.
async fn answer_all(chat: &McpClient, sessions: &[Session]) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(sessions)
        .map(|s| async move {
            chat.call_tool_ok(
                "native_session_reply_and_wait",
                json!({
                    "native_session_id": s.id, "lease_id": s.lease, "turn_id": s.turn,
                    "reply_id": "r-hello", "text": "hello",
                }),
            )
            .await?;
            let end = Instant::now() + Duration::from_secs(30);
            loop {
                let view = chat
                    .call_tool_ok(
                        "native_session_status",
                        json!({"native_session_id": s.id, "lease_id": s.lease, "wait_seconds": 5}),
                    )
                    .await?;
                if view["status"] == "idle" {
                    return Ok(());
                }
                if Instant::now() > end {
                    bail!("session {} did not become idle: {view}", s.id);
                }
            }
        })
        .buffer_unordered(START_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Poll every session's status at once until each answers `runtime_attached: true` with the
/// expected status; the instant the last one did.
async fn all_attached(
    chat: &McpClient,
    sessions: &[Session],
    status: &str,
) -> anyhow::Result<Instant> {
    let chat = Arc::new(chat);
    let polls = sessions.iter().map(|s| {
        let chat = chat.clone();
        async move {
            let end = Instant::now() + Duration::from_secs(60);
            loop {
                let view = chat
                    .call_tool_ok(
                        "native_session_status",
                        json!({"native_session_id": s.id, "lease_id": s.lease, "wait_seconds": 0}),
                    )
                    .await?;
                if view["runtime_attached"] == true {
                    if view["status"] != status {
                        bail!("session {}: attached, but {view}", s.id);
                    }
                    return anyhow::Ok(Instant::now());
                }
                if Instant::now() > end {
                    bail!("session {} was not re-adopted: {view}", s.id);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    let mut last = Instant::now();
    for done in futures::future::join_all(polls).await {
        let done = done?;
        if done > last {
            last = done;
        }
    }
    if sessions.is_empty() {
        chat.request("tools/list", json!({})).await?;
        last = Instant::now();
    }
    Ok(last)
}

/// Stop every session.
async fn stop_all(chat: &McpClient, sessions: &[Session]) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<Value>> = futures::stream::iter(sessions)
        .map(|s| {
            chat.call_tool_ok(
                "native_session_stop",
                json!({
                    "native_session_id": s.id, "lease_id": s.lease,
                    "request_id": "bench-stop", "reason": "benchmark finished",
                }),
            )
        })
        .buffer_unordered(START_CONCURRENCY)
        .collect()
        .await;
    for result in results {
        result?;
    }
    Ok(())
}

/// The gateway's RSS, and those of the brokers (`broker` and the state dir in their command line)
/// and the runners (stand-ins naming the state dir) of this state dir.
fn memory(gateway: &GatewayProcess, state_dir: &Path) -> Memory {
    let mut brokers = Vec::new();
    let mut runners = Vec::new();
    for (pid, args) in processes_naming(&state_dir.display().to_string()) {
        if args.get(1).map(String::as_str) == Some("broker") {
            brokers.extend(support::rss_mib(pid));
        } else if stand_in::is_stand_in(&args) {
            runners.extend(support::rss_mib(pid));
        }
    }
    Memory {
        gateway: support::rss_mib(gateway.pid() as i32).unwrap_or(f64::NAN),
        brokers,
        runners,
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

fn report(
    phases: &[Phase],
    cold_ms: f64,
    setup: &[(usize, f64, Memory)],
    repeats: usize,
) -> String {
    let base = &phases[0];
    let base_a = p50_max(&mut base.listening.clone()).0;
    let base_b = p50_max(&mut base.attached.clone()).0;
    let mut out = String::new();
    out.push_str("### Restart time\n\n");
    out.push_str(
        "| sessions, state | n | (a) listening p50 / max (ms) | (a) ÷ base | (b) all attached p50 / max (ms) | (b) ÷ base | (b) − base, per session (ms) | target | verdict |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---|---|\n");
    for phase in phases {
        let (a50, amax) = p50_max(&mut phase.listening.clone());
        let (b50, bmax) = p50_max(&mut phase.attached.clone());
        let per_session = if phase.sessions == 0 {
            "—".to_string()
        } else {
            format!("{:.2}", (b50 - base_b) / phase.sessions as f64)
        };
        let (target, verdict) = if phase.sessions == 0 {
            ("baseline".to_string(), "—")
        } else if phase.sessions == TARGET_RESTART_SESSIONS {
            (
                format!("(b) ≤ {TARGET_RESTART_MS:.0} ms"),
                verdict(bmax <= TARGET_RESTART_MS),
            )
        } else {
            ("(context)".to_string(), "—")
        };
        out.push_str(&format!(
            "| {} | {} | {a50:.1} / {amax:.1} | {:.2}× | {b50:.1} / {bmax:.1} | {:.2}× | {per_session} | {target} | {verdict} |\n",
            phase.label,
            phase.listening.len(),
            a50 / base_a,
            b50 / base_b,
        ));
    }
    out.push_str(&format!(
        "\nContext: the first (cold) start on an empty state dir reached `listening` in {cold_ms:.1} ms. \
         Verdict on the max of {repeats} restarts.\n"
    ));
    for (n, started_ms, _) in setup {
        out.push_str(&format!(
            "Starting {n} {} (first turn pending, {START_CONCURRENCY} at a time) took {started_ms:.0} ms.\n",
            plural(*n)
        ));
    }

    out.push_str("\n### Resident memory (VmRSS) at idle, after the restarts\n\n");
    out.push_str(
        "| sessions, state | gateway (MiB) | gateway ÷ base | brokers | broker p50 / max (MiB) | runners (context) p50 (MiB) | target | verdict |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---|---|\n");
    let base_rss = base.memory.gateway;
    let mut memory_row = |label: &str, m: &Memory| {
        let (b50, bmax) = p50_max(&mut m.brokers.clone());
        let (r50, _) = p50_max(&mut m.runners.clone());
        let gateway_ok = m.gateway <= TARGET_GATEWAY_MIB;
        let broker_ok = m.brokers.is_empty() || bmax <= TARGET_BROKER_MIB;
        let broker_text = if m.brokers.is_empty() {
            "—".to_string()
        } else {
            format!("{b50:.1} / {bmax:.1}")
        };
        let runner_text = if m.runners.is_empty() {
            "—".to_string()
        } else {
            format!("{r50:.1}")
        };
        out.push_str(&format!(
            "| {label} | {:.1} | {:.2}× | {} | {broker_text} | {runner_text} | gateway ≤ {TARGET_GATEWAY_MIB:.0}, broker ≤ {TARGET_BROKER_MIB:.0} | {} |\n",
            m.gateway,
            m.gateway / base_rss,
            m.brokers.len(),
            verdict(gateway_ok && broker_ok),
        ));
    };
    for phase in phases {
        memory_row(
            &format!("{} (restarted gateway)", phase.label),
            &phase.memory,
        );
    }
    for (n, _, m) in setup {
        memory_row(
            &format!(
                "{n} {}, pending (the gateway that started them)",
                plural(*n)
            ),
            m,
        );
    }
    out
}
