//! Shared by the process-level benches (`mod support;`): the gateway as
//! a child process and a scripted ChatGPT (the `tests` crate's fixture and MCP client, driven from
//! synchronous bench code), the stand-in runner, percentiles and the machine description for
//! results files.
// Each bench uses a subset of these helpers.
#![allow(dead_code)]

pub mod stand_in;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde_json::Value;
pub use tests::McpClient;

/// The `main` of a bench that may be launched as the stand-in runner: play the runner when the
/// broker started this executable as `CLAUDE_BIN`, else run the bench `run`.
pub fn bench_main(
    name: &str,
    run: impl FnOnce(&[String]) -> anyhow::Result<()>,
) -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = if stand_in::is_stand_in(&args) {
        stand_in::run(&args)
    } else {
        run(&args)
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Wall-clock nanoseconds since the epoch: comparable across the processes of one machine.
pub fn unix_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// Where the stand-in wrote `state_dir/<name>`: in its private HOME, under the session's runtime
/// dir (`<state_dir>/run/<session>/home/<name>`), since the confined runner may write nowhere else.
pub fn runner_home_file(state_dir_and_name: &Path) -> anyhow::Result<PathBuf> {
    let state_dir = state_dir_and_name
        .parent()
        .context("the path has no state dir")?;
    let name = state_dir_and_name
        .file_name()
        .context("the path has no file name")?;
    std::fs::read_dir(state_dir.join("run"))
        .context("reading the runtime dirs")?
        .flatten()
        .map(|entry| entry.path().join("home").join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("no runner wrote {}", name.to_string_lossy()))
}

/// The `<kind> <nanoseconds>` lines of a stand-in timing file, in order.
pub fn timing_lines(path: &Path) -> anyhow::Result<Vec<(String, i128)>> {
    let text = std::fs::read_to_string(path).context("reading the timing file")?;
    let mut out = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        if let (Some(kind), Some(value)) = (parts.next(), parts.next()) {
            out.push((kind.to_string(), value.parse()?));
        }
    }
    Ok(out)
}

/// The HTTP client both sides use: plain HTTP/1.1, no proxy, pooled keep-alive connections.
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(120))
        .build()
        .context("building the HTTP client")
}

/// The gateway child (`serve --listen 127.0.0.1:0`, this bench executable as `CLAUDE_BIN`): the
/// tests' fixture ([`tests::GatewayProcess`]) driven from a bench's synchronous code. When dropped
/// it is stopped (SIGINT, then SIGKILL) and every process whose command line names its state dir
/// is killed; [`GatewayProcess::sigkill`] kills the gateway alone and leaves its brokers.
pub struct GatewayProcess {
    inner: tests::GatewayProcess,
    runtime: tokio::runtime::Handle,
    /// The MCP endpoint from the `listening` line.
    pub url: String,
    /// Just before the spawn.
    pub spawned_at: Instant,
    /// When the `listening` line was read.
    pub listening_at: Instant,
    /// Clean up on drop (cleared by [`GatewayProcess::sigkill`]).
    armed: bool,
}

impl GatewayProcess {
    /// Start a gateway on `state_dir` and wait (up to 60 s) for its `listening` line. Its stderr
    /// is appended to `log`. `live_sessions` is the most sessions the bench holds at once: the
    /// gateway's live-session cap is set to it, so the host's default (from its memory) never
    /// refuses a start the bench needs.
    pub fn start(
        runtime: &tokio::runtime::Runtime,
        state_dir: &Path,
        token: &str,
        log: &Path,
        rust_log: &str,
        live_sessions: usize,
    ) -> anyhow::Result<GatewayProcess> {
        let stand_in = std::env::current_exe().context("locating the bench executable")?;
        // `BENCH_GATEWAY_BIN`: another build of the gateway (e.g. the baseline of an A/B run),
        // driven by this same harness.
        let exe = std::env::var_os("BENCH_GATEWAY_BIN")
            .map_or_else(|| env!("CARGO_BIN_EXE_gateway").into(), PathBuf::from);
        let inner = runtime.block_on(
            tests::GatewayProcess::builder(exe)
                .state_dir(state_dir)
                .token(token)
                .env("CLAUDE_BIN", &stand_in)
                .env("RUST_LOG", rust_log)
                .env(
                    "CLAUDE_TOOLS_MAX_LIVE_SESSIONS",
                    live_sessions.max(1).to_string(),
                )
                .stderr_path(log)
                .spawn(),
        )?;
        let timing = inner
            .start_timing()
            .context("the gateway fixture recorded no start")?;
        Ok(GatewayProcess {
            url: inner.url(),
            spawned_at: timing.spawned_at,
            listening_at: timing.listening_at,
            inner,
            runtime: runtime.handle().clone(),
            armed: true,
        })
    }

    pub fn pid(&self) -> u32 {
        self.inner.pid().unwrap_or(0)
    }

    /// SIGKILL the gateway only (its brokers run in their own sessions and survive) and reap it.
    pub fn sigkill(mut self) {
        self.armed = false;
        self.runtime.block_on(self.inner.kill());
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let inner = &mut self.inner;
        self.runtime.block_on(async {
            if inner.signal(rustix::process::Signal::INT).is_err()
                || inner.wait_exit(Duration::from_secs(5)).await.is_err()
            {
                inner.kill().await;
            }
        });
        kill_leftovers(self.inner.state_dir());
    }
}

pub use tests::processes::processes_naming;

/// Brokers outlive their gateway by design, and runners live in their own process group.
/// After a normal stop there are none; after a failure, end those this run started: the
/// processes whose command line names this run's private state dir.
pub fn kill_leftovers(state_dir: &Path) -> usize {
    let leftovers = tests::processes::kill_session_processes(state_dir);
    if leftovers > 0 {
        eprintln!("bench: ended {leftovers} leftover processes");
    }
    leftovers
}

/// A scripted ChatGPT: stateless MCP JSON-RPC over HTTP on the shared client, like the bench's
/// runner side (the tests' [`tests::McpClient`], no `initialize`).
pub fn chat(client: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<McpClient> {
    McpClient::builder(url)
        .token(token)
        .http_client(client.clone())
        .header("mcp-protocol-version", tests::DEFAULT_PROTOCOL_VERSION)
        .build()
}

pub fn text_of(view: &Value, key: &str) -> anyhow::Result<String> {
    view[key]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("the SessionView has no {key}: {view}"))
}

pub fn pending_turn_id(view: &Value) -> anyhow::Result<String> {
    view["pending_turn"]["turn_id"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("no pending turn: {view}"))
}

/// The value of a sorted sample at quantile `q` (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Sort `samples` and return (p50, max).
pub fn p50_max(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        quantile(samples, 0.5),
        samples.last().copied().unwrap_or(f64::NAN),
    )
}

pub fn ns_to_ms(ns: i128) -> f64 {
    ns as f64 / 1e6
}

/// CPUs, CPU model and kernel, for results files.
pub fn machine() -> String {
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

/// Now, as `YYYY-MM-DD HH:MM UTC`.
pub fn today() -> String {
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

/// VmRSS of `pid` in MiB.
pub fn rss_mib(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// VmRSS in MiB of each broker of `state_dir` (`broker` and the state dir in its command line).
pub fn broker_rss_mib(state_dir: &std::path::Path) -> Vec<f64> {
    processes_naming(&state_dir.display().to_string())
        .into_iter()
        .filter(|(_, args)| args.get(1).map(String::as_str) == Some("broker"))
        .filter_map(|(pid, _)| rss_mib(pid))
        .collect()
}
