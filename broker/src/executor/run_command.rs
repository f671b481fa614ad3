//! `RunCommand`: an exact argv, checked by the sandbox crate's policy (executable resolution, deny
//! list), run through the `gateway sandbox-exec` helper (Linux: namespaces, read-only mounts,
//! Landlock, seccomp, rlimits; macOS: a Seatbelt profile) in its own process group, with a private
//! scratch dir that is removed afterwards.
//!
//! Bounds: wall time (default 120 s, at most 600 s; then the whole group gets SIGTERM, a short
//! grace, SIGKILL), stdout and stderr up to 64 KiB each (the rest is drained and counted, not
//! kept), the process count (RLIMIT_NPROC, or a pids cgroup as root), memory per process
//! (RLIMIT_DATA; shared memory refused) and the scratch files together (a tmpfs of the quota's
//! size). The helper is the gateway executable pinned at start, executed by descriptor; a missing
//! or malformed report line is `confinement_unconfirmed`, never "not run". Once the main process has
//! exited its group is killed, and pipes still held open are drained for at most
//! [`DRAIN_AFTER_EXIT`]. Commands never write files for the session: the file system is read-only
//! to them except their scratch dir.

#[cfg(target_os = "linux")]
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::tools::{ActionOutcome, MAX_TOOL_OUTPUT_BYTES, Receipt, RunCommandArgs, ToolStatus};
use sandbox::command::CommandRefusal;
use sandbox::pinned_exe::PinnedExe;
use sandbox::spec::{Enforced, ExecSpec, Limits, REPORT_PREFIX, Report};

use super::Executor;

/// Bytes kept of each stream.
const STREAM_LIMIT: usize = MAX_TOOL_OUTPUT_BYTES;
/// Grace between SIGTERM and SIGKILL on timeout.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long pipes are still read after the main process exited and its group was killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// The outcome code when the helper's report line is missing or malformed: the command may have
/// run, and how it was confined is unknown.
pub const CONFINEMENT_UNCONFIRMED: &str = "confinement_unconfirmed";
/// Longest report line accepted from the helper.
const MAX_REPORT_BYTES: usize = 16 * 1024;
/// Room for the header and section markers within the 64 KiB output.
const HEADER_RESERVE: usize = 1024;

/// Where and how commands are confined. Built by the broker from its spec; see
/// [`Executor::with_command_sandbox`].
#[derive(Debug, Clone)]
pub struct CommandSandbox {
    /// The `gateway` executable (it has the hidden `sandbox-exec` subcommand), pinned when the
    /// gateway started: executed from its descriptor, never from a path. `None`: commands are
    /// refused. (macOS runs `/usr/bin/sandbox-exec` instead.)
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    helper: Option<Arc<PinnedExe>>,
    /// Per-command scratch dirs are created below this (the session's runtime dir).
    scratch_root: PathBuf,
    /// Hidden from commands.
    masked: Vec<PathBuf>,
    /// The owner's home (rustup toolchains are found read-only through it).
    owner_home: PathBuf,
    /// Try namespaces (off only to test the Landlock-only fallback).
    namespaces: bool,
    limits: Limits,
    /// The session's own managed worktree: the one directory bound back over the masks.
    own_worktree: Option<PathBuf>,
}

impl CommandSandbox {
    /// `helper`: the pinned gateway executable; `scratch_root`: e.g. `<runtime_dir>/cmd`; `home`
    /// and `state_dir`: the owner's home and the gateway state dir (masked, with the credential
    /// stores); `extra_masked`: the owner's extra protected paths.
    pub fn new(
        helper: Option<Arc<PinnedExe>>,
        scratch_root: PathBuf,
        home: &Path,
        state_dir: &Path,
        extra_masked: &[PathBuf],
    ) -> Self {
        Self {
            helper,
            scratch_root,
            masked: sandbox::masked_paths(home, state_dir, extra_masked),
            owner_home: home.to_path_buf(),
            namespaces: true,
            limits: Limits::default(),
            own_worktree: None,
        }
    }

    /// The default when the broker configured nothing: no verified helper (commands are
    /// refused), scratch under `<state_dir>/run/cmd`.
    pub(super) fn from_policy(policy: &sandbox::path_policy::PathPolicy) -> Self {
        Self {
            helper: None,
            scratch_root: policy.state_dir().join("run").join("cmd"),
            masked: sandbox::masked_paths(policy.home(), policy.state_dir(), &[]),
            owner_home: policy.home().to_path_buf(),
            namespaces: true,
            limits: Limits::default(),
            own_worktree: None,
        }
    }

    /// Run without namespaces (Landlock + seccomp only), to exercise the fallback.
    pub fn without_namespaces(mut self) -> Self {
        self.namespaces = false;
        self
    }

    /// The session's own managed worktree (a `worktree_write` session): commands see it
    /// although the state dir holding it is masked.
    pub fn with_own_worktree(mut self, worktree: Option<PathBuf>) -> Self {
        self.own_worktree = worktree;
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

impl Executor {
    /// Where this session's command scratch dirs are made.
    pub fn command_scratch_root(&self) -> &Path {
        &self.commands.scratch_root
    }

    /// Configure how `RunCommand` is confined (helper executable, scratch root, masks).
    pub fn with_command_sandbox(mut self, commands: CommandSandbox) -> Self {
        self.commands = commands;
        self
    }
}

/// A refusal before anything ran.
fn rejected(action_id: &str, code: &str, message: String, started: Instant) -> ActionOutcome {
    ActionOutcome {
        status: ToolStatus::Rejected,
        output: message,
        truncated: false,
        error_code: Some(code.to_string()),
        receipt: Receipt {
            action_id: action_id.to_string(),
            duration_ms: millis(started.elapsed()),
            ..Receipt::default()
        },
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Run one `RunCommand` action. Never panics.
pub(super) fn run(
    exec: &Executor,
    action_id: &str,
    args: &RunCommandArgs,
    started: Instant,
) -> ActionOutcome {
    let config = &exec.commands;
    let Ok(wd) = std::fs::canonicalize(exec.working_directory()) else {
        return rejected(
            action_id,
            "not_found",
            "the working directory no longer exists".into(),
            started,
        );
    };
    let cwd = match resolve_cwd(&wd, args.cwd.as_deref()) {
        Ok(cwd) => cwd,
        Err(message) => return rejected(action_id, "invalid_argument", message, started),
    };
    let resolved = match sandbox::command::check(&args.argv, &wd, &cwd) {
        Ok(resolved) => resolved,
        Err(refusal) => {
            return rejected(
                action_id,
                refusal.code(),
                refusal_message(&refusal),
                started,
            );
        }
    };
    let support = sandbox::host_support();
    if !support.can_confine() {
        return rejected(
            action_id,
            "sandbox_unavailable",
            format!(
                "the command was not run: this host cannot confine commands (namespaces: {}, \
                 landlock: {:?}, seccomp: {}, seatbelt: {}); commands are refused rather than \
                 run unconfined",
                support.namespaces, support.landlock_abi, support.seccomp, support.seatbelt
            ),
            started,
        );
    }
    // With namespaces and a quota the helper mounts a fresh tmpfs over the scratch dir and makes
    // HOME and TMPDIR inside it: the on-disk subdirs would only be hidden (and cost mkdirs).
    let subdirs = !(config.namespaces && support.namespaces && config.limits.scratch.is_some());
    let scratch = match Scratch::create(
        &config.scratch_root,
        action_id,
        &wd,
        &config.masked,
        subdirs,
    ) {
        Ok(scratch) => scratch,
        Err(message) => {
            tracing::error!("RunCommand scratch: {message}");
            return rejected(
                action_id,
                "sandbox_unavailable",
                "the command was not run: its private scratch dir could not be created".into(),
                started,
            );
        }
    };
    let spec = ExecSpec {
        program: resolved.program.clone(),
        argv: resolved.argv.clone(),
        cwd: cwd.clone(),
        env: sandbox::env::command_env(&scratch.path, Some(&config.owner_home)),
        scratch: scratch.path.clone(),
        masked: config.masked.clone(),
        // A managed worktree lives in the (masked) state dir; the command must still see it.
        visible: sandbox::visible_under_masks(&config.masked, &wd, config.own_worktree.as_deref()),
        writable: Vec::new(),
        limits: config.limits,
        namespaces: config.namespaces,
    };
    #[cfg(target_os = "linux")]
    if let Err(problem) = helper_path(config) {
        tracing::error!("RunCommand helper: {problem}");
        return rejected(
            action_id,
            "sandbox_unavailable",
            format!("the command was not run: {problem}"),
            started,
        );
    }
    let mut child = match spawn(config, &spec) {
        Ok(child) => child,
        Err(message) => {
            tracing::error!("RunCommand helper: {message}");
            return rejected(
                action_id,
                "sandbox_unavailable",
                "the command was not run: the sandbox helper could not be started".into(),
                started,
            );
        }
    };
    let run = supervise(&mut child, args.timeout(), started);
    if let Some(cgroup) = run.report.as_ref().and_then(|r| r.cgroup.clone()) {
        remove_cgroup(&cgroup);
    }
    drop(scratch);
    finish(action_id, &cwd, run, args.timeout(), started)
}

fn refusal_message(refusal: &CommandRefusal) -> String {
    format!("the command was not run: {refusal}")
}

/// `cwd`: absolute inside the working directory, or relative to it; must be a directory.
fn resolve_cwd(wd: &Path, cwd: Option<&str>) -> Result<PathBuf, String> {
    let Some(given) = cwd else {
        return Ok(wd.to_path_buf());
    };
    let joined = if given.starts_with('/') {
        PathBuf::from(given)
    } else {
        wd.join(given)
    };
    let canonical =
        std::fs::canonicalize(&joined).map_err(|_| format!("cwd {given:?} does not exist"))?;
    if !canonical.starts_with(wd) {
        return Err(format!(
            "cwd {given:?} is outside the session's working directory"
        ));
    }
    if !canonical.is_dir() {
        return Err(format!("cwd {given:?} is not a directory"));
    }
    Ok(canonical)
}

/// The per-command scratch dir; removed on drop.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn create(
        root: &Path,
        action_id: &str,
        wd: &Path,
        masked: &[PathBuf],
        subdirs: bool,
    ) -> Result<Self, String> {
        use std::os::unix::fs::DirBuilderExt;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        // The runtime area is in shared `/tmp`: it and the session's root must be ours, 0700.
        if let Some(area) = root.parent() {
            sandbox::protected::ensure_private_dir(area)?;
        }
        sandbox::protected::ensure_private_dir(root)?;
        let root = std::fs::canonicalize(root).map_err(|e| format!("{}: {e}", root.display()))?;
        // A scratch root inside the working directory is fine only where the command's
        // writes stay invisible to the session: inside a masked (protected) place, e.g. the
        // runtime dir in a state dir that lies in a direct-write checkout.
        if wd.starts_with(&root)
            || (root.starts_with(wd) && !masked.iter().any(|m| root.starts_with(m)))
        {
            return Err("the scratch root overlaps the working directory".into());
        }
        let safe: String = action_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .take(64)
            .collect();
        // No pid in the name: it is the command's HOME, which its output may show.
        let name = format!(
            "{safe}-{}-{}",
            uuid::Uuid::new_v4().simple(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = root.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let scratch = Self { path };
        if !subdirs {
            return Ok(scratch);
        }
        for sub in sandbox::env::SCRATCH_DIRS {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(scratch.path.join(sub))
                .map_err(|e| format!("{sub}: {e}"))?;
        }
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!("removing command scratch {}: {err}", self.path.display());
        }
    }
}

/// The pinned helper's path for `execve`, checked unchanged (see [`PinnedExe::exec_path`]).
#[cfg(target_os = "linux")]
fn helper_path(config: &CommandSandbox) -> Result<PathBuf, String> {
    config
        .helper
        .as_ref()
        .ok_or_else(|| "no verified sandbox helper is configured".to_string())?
        .exec_path()
        .map_err(|e| e.to_string())
}

/// Start the helper in its own process group with a cleared environment and the spec on stdin.
#[cfg(target_os = "linux")]
fn spawn(config: &CommandSandbox, spec: &ExecSpec) -> Result<Child, String> {
    spawn_helper(&helper_path(config)?, spec)
}

#[cfg(target_os = "linux")]
fn spawn_helper(helper: &Path, spec: &ExecSpec) -> Result<Child, String> {
    let json = serde_json::to_vec(spec).map_err(|e| format!("encoding the spec: {e}"))?;
    let mut child = std::process::Command::new(helper)
        .arg("sandbox-exec")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("spawning {}: {e}", helper.display()))?;
    if let Some(mut stdin) = child.stdin.take()
        && let Err(err) = stdin.write_all(&json)
    {
        // The helper died early; supervise() reports the missing report line.
        tracing::warn!("writing the command spec: {err}");
    }
    Ok(child)
}

/// macOS: `/usr/bin/sandbox-exec` with the generated profile; its report is synthesised.
#[cfg(target_os = "macos")]
fn spawn(config: &CommandSandbox, spec: &ExecSpec) -> Result<Child, String> {
    let seatbelt = sandbox::seatbelt::SeatbeltSpec {
        scratch: std::fs::canonicalize(&spec.scratch).map_err(|e| e.to_string())?,
        denied: spec
            .masked
            .iter()
            .flat_map(|p| {
                let mut v = vec![p.clone()];
                if let Ok(c) = std::fs::canonicalize(p) {
                    v.push(c);
                }
                v
            })
            .collect(),
        visible: spec
            .visible
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect(),
    };
    let mut cmd = sandbox::seatbelt::command(
        &seatbelt,
        &config.owner_home,
        &spec.program,
        spec.argv.get(1..).unwrap_or(&[]),
    );
    cmd.env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd.spawn()
        .map_err(|e| format!("spawning sandbox-exec: {e}"))
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn spawn(_config: &CommandSandbox, _spec: &ExecSpec) -> Result<Child, String> {
    Err("no command sandbox on this OS".into())
}

/// What a confined run of [`run_confined`] produced.
#[derive(Debug)]
pub struct ConfinedRun {
    /// The exit code (`None`: killed by a signal, or timed out).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Up to 64 KiB of each stream; `truncated` when either had more.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub truncated: bool,
}

/// Run `spec` through the pinned helper and wait at most `timeout` (the gateway's own confined
/// Git). Err: the helper could not start, refused (nothing ran), or did not confirm its
/// confinement (something may have run: the caller must treat its effects as unknown).
#[cfg(target_os = "linux")]
pub fn run_confined(
    helper: &PinnedExe,
    spec: &ExecSpec,
    timeout: Duration,
) -> Result<ConfinedRun, String> {
    let path = helper.exec_path().map_err(|e| e.to_string())?;
    let mut child = spawn_helper(&path, spec)?;
    let run = supervise(&mut child, timeout, Instant::now());
    if let Some(cgroup) = run.report.as_ref().and_then(|r| r.cgroup.clone()) {
        remove_cgroup(&cgroup);
    }
    match &run.report {
        None => {
            return Err(format!(
                "its confinement could not be confirmed ({}); it may have run",
                run.report_problem
                    .as_deref()
                    .unwrap_or("the sandbox helper did not report")
            ));
        }
        Some(report) => {
            if let Some(problem) = &report.error {
                return Err(format!(
                    "not run: confinement could not be established ({problem})"
                ));
            }
        }
    }
    let (exit_code, timed_out) = match run.ending {
        Ending::Exited(code) => (Some(code), false),
        Ending::TimedOut => (None, true),
        Ending::Signaled(_) | Ending::Unknown => (None, false),
    };
    Ok(ConfinedRun {
        exit_code,
        timed_out,
        truncated: run.stdout.truncated() || run.stderr.truncated(),
        stdout: run.stdout.kept,
        stderr: run.stderr.kept,
    })
}

/// One stream's capture: the first [`STREAM_LIMIT`] bytes and the total seen.
#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    total: u64,
    eof: bool,
}

impl Capture {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = STREAM_LIMIT.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// How the main process ended.
enum Ending {
    Exited(i32),
    Signaled(i32),
    /// Killed by us after the wall-time bound.
    TimedOut,
    /// The helper could not be waited for.
    Unknown,
}

struct RunResult {
    report: Option<Report>,
    /// Bytes of stdout taken as the (attempted) report line.
    report_bytes: usize,
    /// Set when the helper's first stdout line was missing or malformed.
    report_problem: Option<String>,
    stdout: Capture,
    stderr: Capture,
    ending: Ending,
}

fn set_nonblocking(fd: i32) {
    // Safety: fcntl on a pipe fd we own; only the status flags change.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// Exited without reaping (`WNOWAIT`), so the zombie keeps the process group id reserved while
/// we kill the group.
fn exited_unreaped(pid: i32) -> bool {
    // Safety: a zeroed siginfo_t is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // Safety: waitid on our own child with a valid out-pointer; WNOWAIT leaves it waitable.
    let ret = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // Safety: si_pid is valid to read for a child state change reported by waitid.
    ret == 0 && unsafe { info.si_pid() } == pid
}

fn kill_group(pgid: i32, signal: i32) {
    // Safety: signalling a process group we created (the helper's pid is its pgid and, until we
    // reap it, cannot be reused).
    unsafe { libc::kill(-pgid, signal) };
}

/// Read both pipes until the main process exits (or the bound expires), kill the group, drain
/// briefly, reap.
fn supervise(child: &mut Child, timeout: Duration, started: Instant) -> RunResult {
    let pid = child.id() as i32;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    for fd in [
        out.as_ref().map(|o| o.as_raw_fd()),
        err.as_ref().map(|e| e.as_raw_fd()),
    ]
    .into_iter()
    .flatten()
    {
        set_nonblocking(fd);
    }
    let mut stdout = Capture::default();
    let mut stderr = Capture::default();
    let mut report_buf: Vec<u8> = Vec::new();
    let mut report: Option<Report> = None;
    let mut report_problem: Option<String> = None;
    let mut report_done = false;
    let deadline = started + timeout;
    let mut term_sent: Option<Instant> = None;
    let mut exited_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut buf = vec![0u8; 64 * 1024];

    loop {
        let now = Instant::now();
        if exited_at.is_none() && exited_unreaped(pid) {
            kill_group(pid, libc::SIGKILL);
            exited_at = Some(now);
        }
        if exited_at.is_none() {
            if now >= deadline && term_sent.is_none() {
                timed_out = true;
                kill_group(pid, libc::SIGTERM);
                term_sent = Some(now);
            } else if let Some(sent) = term_sent
                && now >= sent + KILL_GRACE
            {
                kill_group(pid, libc::SIGKILL);
            }
        }
        let both_eof = stdout.eof && stderr.eof;
        if let Some(at) = exited_at
            && (both_eof || now >= at + DRAIN_AFTER_EXIT)
        {
            break;
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(2);
        if let (Some(o), false) = (&out, stdout.eof) {
            fds.push(libc::pollfd {
                fd: o.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let (Some(e), false) = (&err, stderr.eof) {
            fds.push(libc::pollfd {
                fd: e.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if fds.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        // Safety: `fds` is a valid array of pollfd of the given length for the call's duration.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 20) };
        for pfd in &fds {
            if pfd.revents == 0 {
                continue;
            }
            let is_out = out.as_ref().is_some_and(|o| o.as_raw_fd() == pfd.fd);
            loop {
                use std::io::Read;
                let read = if is_out {
                    out.as_mut().map(|o| o.read(&mut buf))
                } else {
                    err.as_mut().map(|e| e.read(&mut buf))
                };
                let capture = if is_out { &mut stdout } else { &mut stderr };
                match read {
                    Some(Ok(0)) | None => {
                        capture.eof = true;
                        break;
                    }
                    Some(Ok(n)) => {
                        let mut bytes = &buf[..n];
                        if is_out && !report_done {
                            let newline = bytes.iter().position(|b| *b == b'\n');
                            let take = newline.map_or(bytes.len(), |p| p + 1);
                            report_buf.extend_from_slice(&bytes[..take]);
                            bytes = &bytes[take..];
                            if newline.is_some() || report_buf.len() > MAX_REPORT_BYTES {
                                report_done = true;
                                match parse_report(&report_buf) {
                                    Ok(parsed) => report = Some(parsed),
                                    Err(problem) => report_problem = Some(problem),
                                }
                            }
                        }
                        capture.push(bytes);
                        if n < buf.len() {
                            break;
                        }
                    }
                    Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Some(Err(_)) => {
                        capture.eof = true;
                        break;
                    }
                }
            }
        }
    }
    // Close our ends: a grandchild still holding the pipes gets EPIPE, we stop waiting for it.
    drop(out);
    drop(err);
    kill_group(pid, libc::SIGKILL);
    let ending = match child.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            if timed_out {
                Ending::TimedOut
            } else if let Some(code) = status.code() {
                Ending::Exited(code)
            } else if let Some(sig) = status.signal() {
                Ending::Signaled(sig)
            } else {
                Ending::Unknown
            }
        }
        Err(_) => Ending::Unknown,
    };
    if !report_done {
        if cfg!(target_os = "macos") {
            report = Some(Report {
                error: None,
                enforced: Enforced::default(),
                cgroup: None,
            });
            stdout.push(&report_buf);
        } else {
            report_problem = Some("the sandbox helper ended before reporting".into());
        }
    }
    RunResult {
        report,
        report_bytes: report_buf.len(),
        report_problem,
        stdout,
        stderr,
        ending,
    }
}

fn parse_report(line: &[u8]) -> Result<Report, String> {
    let text = std::str::from_utf8(line).map_err(|_| "report is not UTF-8".to_string())?;
    let json = text
        .strip_prefix(REPORT_PREFIX)
        .ok_or_else(|| "the sandbox helper did not report".to_string())?;
    serde_json::from_str(json.trim_end()).map_err(|e| format!("malformed report: {e}"))
}

/// Remove the pids cgroup once its processes are gone.
fn remove_cgroup(dir: &Path) {
    for _ in 0..100 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    tracing::warn!("could not remove command cgroup {}", dir.display());
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGINT => "SIGINT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGSYS => "SIGSYS",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        _ => "signal",
    }
}

/// Build the outcome: header, then the two sections, within 64 KiB.
fn finish(
    action_id: &str,
    cwd: &Path,
    run: RunResult,
    timeout: Duration,
    started: Instant,
) -> ActionOutcome {
    let duration_ms = millis(started.elapsed());
    let sandbox_text = sandbox_summary(run.report.as_ref());
    let Some(report) = &run.report else {
        let problem = run
            .report_problem
            .clone()
            .unwrap_or_else(|| "the sandbox helper did not report".into());
        return unconfirmed(action_id, cwd, &run, &problem, duration_ms);
    };
    // The (pinned, verified) helper refused before executing anything: truly not run.
    if let Some(problem) = report.error.clone() {
        let mut output = format!(
            "the command was not run: confinement could not be established ({problem}); \
             commands are refused rather than run unconfined\nsandbox: {sandbox_text}"
        );
        let stderr = String::from_utf8_lossy(&run.stderr.kept);
        if !stderr.trim().is_empty() {
            output.push_str("\nhelper stderr: ");
            output.push_str(stderr.trim());
        }
        common::tools::clip_utf8(&mut output, MAX_TOOL_OUTPUT_BYTES);
        return ActionOutcome {
            status: ToolStatus::Rejected,
            output,
            truncated: false,
            error_code: Some("sandbox_unavailable".into()),
            receipt: command_receipt(action_id, cwd, None, duration_ms),
        };
    }
    let (status, error_code, exit_code, ending_text) = match run.ending {
        Ending::Exited(0) => (ToolStatus::Ok, None, Some(0), "exit code: 0".to_string()),
        Ending::Exited(code) => (
            ToolStatus::Error,
            Some("nonzero_exit"),
            Some(code),
            format!("exit code: {code}"),
        ),
        Ending::Signaled(sig) => (
            ToolStatus::Error,
            Some("killed_by_signal"),
            None,
            format!("killed by signal {sig} ({})", signal_name(sig)),
        ),
        Ending::TimedOut => (
            ToolStatus::Error,
            Some("timeout"),
            None,
            format!(
                "timed out after {} s; the process group was killed",
                timeout.as_secs()
            ),
        ),
        Ending::Unknown => (
            ToolStatus::Error,
            Some("io_error"),
            None,
            "exit status unknown".to_string(),
        ),
    };
    let mut header =
        format!("{ending_text}\nduration_ms: {duration_ms}\nsandbox: {sandbox_text}\n");
    header.push_str(&limits_line(&report.enforced));
    if status != ToolStatus::Ok
        && let Some(limit) = report.enforced.memory_limit_mb
        && ran_out_of_memory(&run.stderr.kept)
    {
        header.push_str(&format!(
            "note: the command reported running out of memory; each of its processes may \
             allocate at most {limit} MiB (CLAUDE_TOOLS_COMMAND_MEMORY_MB)\n"
        ));
    }
    let budget = MAX_TOOL_OUTPUT_BYTES.saturating_sub(header.len() + HEADER_RESERVE);
    let (out_len, err_len) = split_budget(run.stdout.kept.len(), run.stderr.kept.len(), budget);
    let mut truncated = false;
    let mut output = header;
    for (name, capture, len) in [
        ("stdout", &run.stdout, out_len),
        ("stderr", &run.stderr, err_len),
    ] {
        // Invalid UTF-8 becomes U+FFFD; the final clip below keeps the whole within 64 KiB.
        let text = String::from_utf8_lossy(&capture.kept[..len]).into_owned();
        let stream_truncated = capture.truncated() || len < capture.kept.len();
        truncated |= stream_truncated;
        output.push_str(&format!("--- {name} ---\n"));
        output.push_str(&text);
        if !text.is_empty() && !text.ends_with('\n') {
            output.push('\n');
        }
        if stream_truncated {
            output.push_str(&format!(
                "[{name} truncated: {} bytes in total, {} shown]\n",
                capture.total,
                text.len()
            ));
        }
    }
    truncated |= common::tools::clip_utf8(&mut output, MAX_TOOL_OUTPUT_BYTES);
    ActionOutcome {
        status,
        output,
        truncated,
        error_code: error_code.map(str::to_string),
        receipt: command_receipt(action_id, cwd, exit_code, duration_ms),
    }
}

/// The receipt of a command that reached the helper: where it ran, how it ended, how long it took.
fn command_receipt(
    action_id: &str,
    cwd: &Path,
    exit_code: Option<i32>,
    duration_ms: u64,
) -> Receipt {
    Receipt {
        action_id: action_id.to_string(),
        path: Some(cwd.display().to_string()),
        exit_code,
        duration_ms,
        ..Receipt::default()
    }
}

/// The helper's report line was missing or malformed: nothing says whether the command ran, nor
/// how it was confined. The receipt says exactly that (never "not run"), and the output is
/// withheld, since it may come from an unconfined process.
fn unconfirmed(
    action_id: &str,
    cwd: &Path,
    run: &RunResult,
    problem: &str,
    duration_ms: u64,
) -> ActionOutcome {
    let (ending, exit_code) = match run.ending {
        Ending::Exited(code) => (format!("exit code {code}"), Some(code)),
        Ending::Signaled(sig) => (
            format!("killed by signal {sig} ({})", signal_name(sig)),
            None,
        ),
        Ending::TimedOut => ("timed out; the process group was killed".to_string(), None),
        Ending::Unknown => ("exit status unknown".to_string(), None),
    };
    let output = format!(
        "the command's confinement could not be confirmed ({problem}): it may have run, possibly \
         unconfined, so treat its effects as unknown. The helper ended with {ending}; its output \
         is withheld ({} bytes on stdout, {} on stderr).\nsandbox: unconfirmed",
        run.stdout.total + run.report_bytes as u64,
        run.stderr.total
    );
    ActionOutcome {
        status: ToolStatus::Error,
        output,
        truncated: false,
        error_code: Some(CONFINEMENT_UNCONFIRMED.into()),
        receipt: command_receipt(action_id, cwd, exit_code, duration_ms),
    }
}

/// Share `budget` between two streams: each gets half, and what one does not use goes to the
/// other.
fn split_budget(out: usize, err: usize, budget: usize) -> (usize, usize) {
    let half = budget / 2;
    if out + err <= budget {
        (out, err)
    } else if out <= half {
        (out, (budget - out).min(err))
    } else if err <= half {
        ((budget - err).min(out), err)
    } else {
        (half, budget - half)
    }
}

/// `limits: memory 512 MiB per process, scratch 256 MiB in total` (what the helper enforced).
fn limits_line(enforced: &Enforced) -> String {
    let memory = enforced.memory_limit_mb.map_or_else(
        || "unbounded".to_string(),
        |mb| format!("{mb} MiB per process"),
    );
    let scratch = enforced.scratch_quota_mb.map_or_else(
        || "per file only".to_string(),
        |mb| format!("{mb} MiB in total"),
    );
    format!("limits: memory {memory}, scratch {scratch}\n")
}

/// What common runtimes print when an allocation fails (Python, C/glibc, Rust, Node, Go, Java).
fn ran_out_of_memory(stderr: &[u8]) -> bool {
    const SIGNS: &[&str] = &[
        "MemoryError",
        "Cannot allocate memory",
        "memory allocation of",
        "out of memory",
        "Out of memory",
        "OutOfMemoryError",
        "JavaScript heap out of memory",
    ];
    let text = String::from_utf8_lossy(stderr);
    SIGNS.iter().any(|sign| text.contains(sign))
}

fn sandbox_summary(report: Option<&Report>) -> String {
    if cfg!(target_os = "macos") {
        return "macos:seatbelt".into();
    }
    report.map_or_else(|| "none".into(), |r| r.enforced.summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_shared() {
        assert_eq!(split_budget(10, 20, 100), (10, 20));
        assert_eq!(split_budget(10, 200, 100), (10, 90));
        assert_eq!(split_budget(200, 10, 100), (90, 10));
        assert_eq!(split_budget(200, 200, 100), (50, 50));
    }

    #[test]
    fn cwd_must_stay_inside_the_working_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let wd = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(wd.join("sub")).unwrap();
        std::fs::write(wd.join("file"), "x").unwrap();
        assert_eq!(resolve_cwd(&wd, None).unwrap(), wd);
        assert_eq!(resolve_cwd(&wd, Some("sub")).unwrap(), wd.join("sub"));
        let abs = wd.join("sub").display().to_string();
        assert_eq!(resolve_cwd(&wd, Some(&abs)).unwrap(), wd.join("sub"));
        assert!(
            resolve_cwd(&wd, Some(".."))
                .unwrap_err()
                .contains("outside")
        );
        assert!(resolve_cwd(&wd, Some("/")).unwrap_err().contains("outside"));
        assert!(
            resolve_cwd(&wd, Some("nope"))
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            resolve_cwd(&wd, Some("file"))
                .unwrap_err()
                .contains("not a directory")
        );
        std::os::unix::fs::symlink("/", wd.join("escape")).unwrap();
        assert!(
            resolve_cwd(&wd, Some("escape"))
                .unwrap_err()
                .contains("outside")
        );
    }

    #[test]
    fn report_lines_are_parsed_strictly() {
        assert!(parse_report(b"hello\n").is_err());
        let line = format!(
            "{REPORT_PREFIX}{}\n",
            serde_json::to_string(&Report {
                error: None,
                enforced: Enforced::default(),
                cgroup: None
            })
            .unwrap()
        );
        assert!(parse_report(line.as_bytes()).unwrap().error.is_none());
    }
}
