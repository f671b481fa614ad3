//! A real `gateway serve` child process for end-to-end tests: fresh state dir, random token,
//! OS-picked port, stderr captured to a file for diagnostics, killed on drop.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// How long `spawn` waits for the `listening http://...` line.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);

/// Builder for [`GatewayProcess`]; see [`GatewayProcess::builder`].
#[derive(Debug)]
pub struct GatewayBuilder {
    bin: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    state_dir: Option<PathBuf>,
    token: Option<String>,
    listen: String,
    listen_timeout: Duration,
    stderr_path: Option<PathBuf>,
}

impl GatewayBuilder {
    /// Appends the gateway's stderr to this file instead of one in the fixture's work dir (a
    /// bench keeps it beside its results).
    pub fn stderr_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.stderr_path = Some(path.into());
        self
    }

    /// An extra environment variable for the gateway.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Removes a variable from the inherited environment (e.g. `CLAUDE_BIN`).
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// An extra argument after `serve --listen 127.0.0.1:0`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Uses this state dir instead of a fresh temporary one (it is not deleted afterwards).
    pub fn state_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(path.into());
        self
    }

    /// Uses this access token instead of a random one.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets no `CLAUDE_TOOLS_GATEWAY_TOKEN`: the gateway creates `<state>/auth/access-token`,
    /// which [`GatewayProcess::token`] then reads.
    pub fn no_token(mut self) -> Self {
        self.token = None;
        self.env_remove.push("CLAUDE_TOOLS_GATEWAY_TOKEN".into());
        self
    }

    /// `--listen` address (default `127.0.0.1:0`).
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen = addr.into();
        self
    }

    /// How long to wait for the listening line (default [`LISTEN_TIMEOUT`]).
    pub fn listen_timeout(mut self, t: Duration) -> Self {
        self.listen_timeout = t;
        self
    }

    /// Spawns the gateway and waits for its `listening http://...` line. On timeout or early
    /// exit the error carries the exit status and the captured stderr.
    pub async fn spawn(self) -> anyhow::Result<GatewayProcess> {
        let work = tempfile::Builder::new()
            .prefix("gw-test-")
            .tempdir()
            .context("creating test temp dir")?;
        let (state, state_path) = match &self.state_dir {
            Some(p) => (None, p.clone()),
            None => {
                let d = tempfile::Builder::new()
                    .prefix("gw-state-")
                    .tempdir()
                    .context("creating state temp dir")?;
                let p = d.path().to_path_buf();
                (Some(d), p)
            }
        };
        let mut gw = GatewayProcess {
            config: self,
            work,
            _state: state,
            state_path,
            child: None,
            pid: None,
            url: String::new(),
            token: String::new(),
            generation: 0,
            started: None,
        };
        gw.start().await?;
        Ok(gw)
    }

    /// Runs the gateway expecting it to exit by itself (e.g. refused configuration); kills it
    /// and fails if it is still running after `timeout`.
    pub async fn run_to_exit(self, timeout: Duration) -> anyhow::Result<ExitOutcome> {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg(&self.listen)
            .args(&self.args);
        for k in &self.env_remove {
            cmd.env_remove(k);
        }
        if let Some(t) = &self.token {
            cmd.env("CLAUDE_TOOLS_GATEWAY_TOKEN", t);
        }
        if let Some(s) = &self.state_dir {
            cmd.env("CLAUDE_TOOLS_STATE_DIR", s);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        let child = cmd.output();
        match tokio::time::timeout(timeout, child).await {
            Ok(out) => {
                let out = out.with_context(|| format!("running {}", self.bin.display()))?;
                Ok(ExitOutcome {
                    status: out.status,
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                })
            }
            Err(_) => bail!("gateway still running after {timeout:?}; expected it to exit"),
        }
    }
}

/// What a gateway run that ended by itself left.
#[derive(Debug, Clone)]
pub struct ExitOutcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ExitOutcome {
    /// The exit code (None if killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// A running `gateway serve` child process. Dropping it SIGKILLs the gateway (brokers, which
/// detach with setsid by design, are not touched).
#[derive(Debug)]
pub struct GatewayProcess {
    config: GatewayBuilder,
    work: TempDir,
    _state: Option<TempDir>,
    state_path: PathBuf,
    child: Option<Child>,
    pid: Option<u32>,
    url: String,
    token: String,
    generation: u32,
    started: Option<StartTiming>,
}

/// When the latest start spawned the process and when it reported its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartTiming {
    /// Just before the spawn.
    pub spawned_at: Instant,
    /// When the `listening` line was read.
    pub listening_at: Instant,
}

impl GatewayProcess {
    /// A builder spawning `bin serve --listen 127.0.0.1:0` with a fresh temporary state dir and
    /// a random access token.
    pub fn builder(bin: impl Into<PathBuf>) -> GatewayBuilder {
        GatewayBuilder {
            bin: bin.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            state_dir: None,
            token: Some(random_token()),
            listen: "127.0.0.1:0".to_owned(),
            listen_timeout: LISTEN_TIMEOUT,
            stderr_path: None,
        }
    }

    /// Spawns with all defaults.
    pub async fn spawn(bin: impl Into<PathBuf>) -> anyhow::Result<Self> {
        Self::builder(bin).spawn().await
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// `http://127.0.0.1:PORT` (no path).
    pub fn base_url(&self) -> String {
        self.url.trim_end_matches("/mcp").to_owned()
    }

    /// The capability URL `http://127.0.0.1:PORT/mcp/<token>`.
    pub fn capability_url(&self) -> String {
        format!("{}/{}", self.url, self.token)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        self.base_url().trim_start_matches("http://").to_owned()
    }

    /// The access token (from the env we set, or read from `<state>/auth/access-token`).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The state dir (`CLAUDE_TOOLS_STATE_DIR`); it outlives restarts of this process.
    pub fn state_dir(&self) -> &Path {
        &self.state_path
    }

    /// A scratch dir private to this fixture (stderr logs live here); handy for test files.
    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// The gateway's pid, while running.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// How many times the process was (re)started, starting at 1.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Everything the gateway wrote to stderr so far (all generations, separated by markers).
    pub fn stderr_log(&self) -> String {
        std::fs::read_to_string(self.stderr_path()).unwrap_or_default()
    }

    /// Everything the gateway wrote to stdout so far.
    pub fn stdout_log(&self) -> String {
        std::fs::read_to_string(self.stdout_path()).unwrap_or_default()
    }

    /// Path of the captured stderr.
    pub fn stderr_path(&self) -> PathBuf {
        self.config
            .stderr_path
            .clone()
            .unwrap_or_else(|| self.work.path().join("gateway.stderr.log"))
    }

    /// When the latest (re)start spawned the gateway and when it was listening.
    pub fn start_timing(&self) -> Option<StartTiming> {
        self.started
    }

    fn stdout_path(&self) -> PathBuf {
        self.work.path().join("gateway.stdout.log")
    }

    /// SIGKILLs the gateway and reaps it; returns its exit status (None if not running).
    pub async fn kill(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        self.pid = None;
        child.start_kill().ok();
        child.wait().await.ok()
    }

    /// Sends `signal` to the gateway (e.g. SIGTERM for a graceful stop) without waiting.
    pub fn signal(&self, signal: rustix::process::Signal) -> anyhow::Result<()> {
        let pid = self.pid.ok_or_else(|| anyhow!("gateway is not running"))?;
        let pid = i32::try_from(pid).context("pid out of range")?;
        let pid = rustix::process::Pid::from_raw(pid).context("no pid")?;
        rustix::process::kill_process(pid, signal).context("kill(2)")?;
        Ok(())
    }

    /// Sends `signal` to the gateway's whole process group, the way launchd stops a job.
    pub fn signal_group(&self, signal: rustix::process::Signal) -> anyhow::Result<()> {
        let pid = self.pid.ok_or_else(|| anyhow!("gateway is not running"))?;
        let pid = i32::try_from(pid).context("pid out of range")?;
        let pid = rustix::process::Pid::from_raw(pid).context("no pid")?;
        rustix::process::kill_process_group(pid, signal).context("killpg(2)")?;
        Ok(())
    }

    /// Waits up to `timeout` for the gateway to exit by itself (after [`Self::signal`]).
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = self
            .child
            .as_mut()
            .ok_or_else(|| anyhow!("gateway is not running"))?;
        let status = tokio::time::timeout(timeout, child.wait())
            .await
            .map_err(|_| {
                anyhow!(
                    "gateway did not exit within {timeout:?}\n{}",
                    self.stderr_tail()
                )
            })??;
        self.child = None;
        self.pid = None;
        Ok(status)
    }

    /// Kills the gateway (if running) and starts it again on the same state dir, token, env and
    /// args; the port changes, so take `url()` again.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill().await;
        self.start().await
    }

    /// Starts the gateway again after [`Self::kill`] (same as `restart` when already dead).
    pub async fn start(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            bail!("gateway already running");
        }
        self.generation += 1;
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path())
            .context("opening stderr log")?;
        let mut stdout_log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stdout_path())
            .context("opening stdout log")?;
        if self.generation > 1 {
            let marker = format!("===== gateway restart #{} =====\n", self.generation);
            (&stderr).write_all(marker.as_bytes()).ok();
            stdout_log.write_all(marker.as_bytes()).ok();
        }

        let c = &self.config;
        let mut cmd = Command::new(&c.bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg(&c.listen)
            .args(&c.args);
        for k in &c.env_remove {
            cmd.env_remove(k);
        }
        cmd.env("CLAUDE_TOOLS_STATE_DIR", &self.state_path);
        if let Some(t) = &c.token {
            cmd.env("CLAUDE_TOOLS_GATEWAY_TOKEN", t);
        }
        for (k, v) in &c.env {
            cmd.env(k, v);
        }
        // Its own process group, as under launchd/systemd: a test can signal the whole group
        // (see `signal_group`) without hitting the test process.
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .process_group(0)
            .kill_on_drop(true);
        let spawned_at = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", c.bin.display()))?;
        self.pid = child.id();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout pipe"))?;
        self.child = Some(child);

        let mut lines = BufReader::new(stdout).lines();
        let timeout = c.listen_timeout;
        let found = tokio::time::timeout(timeout, async {
            while let Some(line) = lines.next_line().await? {
                stdout_log.write_all(format!("{line}\n").as_bytes()).ok();
                if let Some(url) = parse_listening_line(&line) {
                    return Ok::<_, std::io::Error>(Some((url, Instant::now())));
                }
            }
            Ok(None)
        })
        .await;
        let (url, listening_at) = match found {
            Ok(Ok(Some(found))) => found,
            Ok(Ok(None)) | Ok(Err(_)) => {
                let status = match self.child.as_mut() {
                    Some(ch) => tokio::time::timeout(Duration::from_secs(5), ch.wait())
                        .await
                        .ok(),
                    None => None,
                };
                self.kill().await;
                bail!(
                    "gateway closed stdout without a `listening` line (exit: {status:?})\n{}",
                    self.stderr_tail()
                );
            }
            Err(_) => {
                self.kill().await;
                bail!(
                    "gateway printed no `listening http://...` line within {timeout:?}\n{}",
                    self.stderr_tail()
                );
            }
        };
        // Keep draining stdout so the gateway never blocks on a full pipe.
        let mut stdout_log = tokio::fs::File::from_std(stdout_log);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if stdout_log
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        self.url = url;
        self.started = Some(StartTiming {
            spawned_at,
            listening_at,
        });
        self.token = match &self.config.token {
            Some(t) => t.clone(),
            None => {
                let path = self.state_path.join("auth").join("access-token");
                std::fs::read_to_string(&path)
                    .with_context(|| format!("reading generated token {}", path.display()))?
                    .trim()
                    .to_owned()
            }
        };
        Ok(())
    }

    fn stderr_tail(&self) -> String {
        let log = self.stderr_log();
        let tail: String = if log.len() > 20_000 {
            let mut start = log.len() - 20_000;
            while !log.is_char_boundary(start) {
                start += 1;
            }
            log[start..].to_owned()
        } else {
            log
        };
        format!(
            "--- gateway stderr ({}) ---\n{tail}--- end stderr ---",
            self.stderr_path().display()
        )
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            child.start_kill().ok();
            // Reap without blocking the runtime for long; the kernel finishes the kill anyway.
            let _ = child.try_wait();
        }
        // Brokers and runners outlive their gateway by design; those of a state dir this
        // fixture made (and deletes now) can belong to no one else, so they go with it — a
        // test need not remember a `Cleanup` (a state dir the test chose stays the test's).
        if self._state.is_some() {
            crate::processes::kill_session_processes(self.state_dir());
        }
        if std::thread::panicking() {
            eprintln!("{}", self.stderr_tail());
        }
    }
}

/// `listening http://127.0.0.1:PORT/mcp` -> the URL.
fn parse_listening_line(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("listening ")?;
    if rest.starts_with("http://") && !rest.contains(char::is_whitespace) {
        Some(rest.trim_end_matches('/').to_owned())
    } else {
        None
    }
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests;
