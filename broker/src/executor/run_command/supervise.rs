//! Supervising one confined command: its pipes read without blocking into bounded captures, the
//! helper's report line parsed from the head of stdout, the wall-time bound enforced on the whole
//! process group (SIGTERM, grace, SIGKILL), the command's end taken from the helper's status pipe
//! (the helper is then reaped and the pids cgroup removed after the answer: [`Unreaped`]) or from
//! reaping the helper.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Child;

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal};
use std::time::{Duration, Instant};

use sandbox::spec::{CommandEnd, Enforced, REPORT_PREFIX, Report};

use super::{DRAIN_AFTER_EXIT, KILL_GRACE, MAX_REPORT_BYTES, STREAM_LIMIT};

/// How long one poll waits before the loop checks the bound and the guard again.
const POLL_TICK: rustix::event::Timespec = rustix::event::Timespec {
    tv_sec: 0,
    tv_nsec: 20_000_000,
};

/// One stream's capture: the first [`STREAM_LIMIT`] bytes and the total seen.
#[derive(Default)]
pub(super) struct Capture {
    pub(super) kept: Vec<u8>,
    pub(super) total: u64,
    pub(super) eof: bool,
}

impl Capture {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = STREAM_LIMIT.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    pub(super) fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// How the main process ended.
pub(super) enum Ending {
    Exited(i32),
    Signaled(i32),
    /// Killed by us after the wall-time bound.
    TimedOut,
    /// The helper could not be waited for.
    Unknown,
}

/// Why the helper's report line cannot be taken as its word: the command may have run, and how
/// it was confined is unknown.
#[derive(Debug, thiserror::Error)]
pub enum ReportProblem {
    #[error("report is not UTF-8")]
    NotUtf8,
    /// The first stdout line is not a report.
    #[error("the sandbox helper did not report")]
    Missing,
    #[error("malformed report: {0}")]
    Malformed(serde_json::Error),
    /// The helper's stdout closed before a whole report line.
    #[error("the sandbox helper ended before reporting")]
    EndedEarly,
}

pub(super) struct RunResult {
    pub(super) report: Option<Report>,
    /// The helper told the command's end before its own exit: it is still to be reaped (its
    /// exit tears the namespaces down) and the command's cgroups to be removed, which the
    /// answer need not wait for.
    pub(super) unreaped: Option<Unreaped>,
    /// Bytes of stdout taken as the (attempted) report line.
    pub(super) report_bytes: usize,
    /// Set when the helper's first stdout line was missing or malformed.
    pub(super) report_problem: Option<ReportProblem>,
    pub(super) stdout: Capture,
    pub(super) stderr: Capture,
    pub(super) ending: Ending,
    /// The guard stopped the command (its layer went over budget).
    pub(super) stopped_by_guard: bool,
    /// Tracked until this result is dropped (after the caller released the cgroups); `None`
    /// when [`RunResult::unreaped`] holds it.
    pub(super) _flight: Option<super::running::Flight>,
}

/// A helper that told its command's end (every process of the command is gone) but is not
/// reaped yet, with the command's process group still tracked (`running`).
pub(super) struct Unreaped {
    child: Child,
    flight: super::running::Flight,
}

impl Unreaped {
    /// Reap the helper (waiting for its namespaces' teardown), then remove the command's cgroups
    /// (a pids cgroup empties only now); the flight ends last, so a shutdown waits for this.
    pub(super) fn finish(mut self, report: Option<&Report>) {
        self.flight.reaping();
        let _ = self.child.wait();
        remove_cgroups(report);
        drop(self.flight);
    }
}

fn set_nonblocking(fd: impl AsFd) {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    if let Ok(flags) = fcntl_getfl(&fd) {
        let _ = fcntl_setfl(&fd, flags | OFlags::NONBLOCK);
    }
}

/// A descriptor that becomes readable when the process `pid` (our unreaped child) exits; `None`
/// before Linux 5.3 (and on macOS), where the loop's short sleeps stand in.
fn pidfd(pid: Pid) -> Option<std::os::fd::OwnedFd> {
    #[cfg(target_os = "linux")]
    return rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Exited without reaping (`WNOWAIT`), so the zombie keeps the process group id reserved while
/// we kill the group.
fn exited_unreaped(pid: Pid) -> bool {
    use rustix::process::{WaitId, WaitIdOptions, waitid};
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    // `None`: no state change yet (waitid left the siginfo's pid zero).
    matches!(waitid(WaitId::Pid(pid), options), Ok(Some(_)))
}

/// Signal the process group we created (the helper's pid is its pgid and, until we reap it,
/// cannot be reused).
fn kill_group(pgid: Pid, signal: Signal) {
    let _ = rustix::process::kill_process_group(pgid, signal);
}

/// Read both pipes until the main process exits (or the bound expires), kill the group, drain
/// briefly, reap. With a `status` pipe, a told end and both pipes at their end finish the run
/// before the helper is reaped ([`RunResult::unreaped`]).
/// `guard` is asked now and then while the command runs; `true` kills the group (the session's
/// layer went over its budget).
pub(super) fn supervise(
    mut child: Child,
    status: Option<OwnedFd>,
    timeout: Duration,
    started: Instant,
    guard: &mut dyn FnMut() -> bool,
) -> RunResult {
    let pid = Pid::from_child(&child);
    let flight = super::running::Flight::start(pid.as_raw_pid());
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    if let Some(out) = &out {
        set_nonblocking(out);
    }
    if let Some(err) = &err {
        set_nonblocking(err);
    }
    if let Some(status) = &status {
        set_nonblocking(status);
    }
    let mut told = Told::default();
    let mut stdout = Capture::default();
    let mut stderr = Capture::default();
    let mut report_buf: Vec<u8> = Vec::new();
    let mut report: Option<Report> = None;
    let mut report_problem: Option<ReportProblem> = None;
    let mut report_done = false;
    let deadline = started + timeout;
    let mut term_sent: Option<Instant> = None;
    let mut exited_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut buf = vec![0u8; 64 * 1024];
    let mut stopped_by_guard = false;
    // Readable once the helper has exited: the wait ends then, not at the next poll tick (its
    // pipes reach EOF just before it is a zombie, which cost a 5 ms sleep per command).
    let exit_fd = pidfd(pid);

    loop {
        let now = Instant::now();
        if exited_at.is_none() && !stopped_by_guard && guard() {
            stopped_by_guard = true;
            kill_group(pid, Signal::KILL);
        }
        if exited_at.is_none() && exited_unreaped(pid) {
            kill_group(pid, Signal::KILL);
            exited_at = Some(now);
        }
        if exited_at.is_none() {
            if now >= deadline && term_sent.is_none() {
                timed_out = true;
                kill_group(pid, Signal::TERM);
                term_sent = Some(now);
            } else if let Some(sent) = term_sent
                && now >= sent + KILL_GRACE
            {
                kill_group(pid, Signal::KILL);
            }
        }
        let both_eof = stdout.eof && stderr.eof;
        // Told, and nothing left to read: no process of the command is left (see
        // `CommandEnd`), so the answer need not wait for the helper's exit.
        if both_eof && told.end.is_some() && !timed_out && !stopped_by_guard {
            break;
        }
        if let Some(at) = exited_at
            && (both_eof || now >= at + DRAIN_AFTER_EXIT)
        {
            break;
        }
        let mut polled: Vec<PollFd<'_>> = Vec::with_capacity(3);
        if let (Some(o), false) = (&out, stdout.eof) {
            polled.push(PollFd::new(o, PollFlags::IN));
        }
        if let (Some(e), false) = (&err, stderr.eof) {
            polled.push(PollFd::new(e, PollFlags::IN));
        }
        if let (Some(fd), None) = (&exit_fd, exited_at) {
            polled.push(PollFd::new(fd, PollFlags::IN));
        }
        if let (Some(fd), false) = (&status, told.eof) {
            polled.push(PollFd::new(fd, PollFlags::IN));
        }
        if polled.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let _ = rustix::event::poll(&mut polled, Some(&POLL_TICK));
        // By raw fd: the pipes are borrowed by `polled`, and read (mutably) below.
        let ready: Vec<(i32, bool)> = polled
            .iter()
            .map(|p| (p.as_fd().as_raw_fd(), !p.revents().is_empty()))
            .collect();
        drop(polled);
        for (fd, revents) in ready {
            let is_exit = exit_fd.as_ref().is_some_and(|e| e.as_raw_fd() == fd);
            if !revents || is_exit {
                continue;
            }
            if let Some(status) = status.as_ref().filter(|s| s.as_raw_fd() == fd) {
                told.read(status);
                continue;
            }
            let is_out = out.as_ref().is_some_and(|o| o.as_raw_fd() == fd);
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
    kill_group(pid, Signal::KILL);
    let told_end = told.end.filter(|_| !timed_out && !stopped_by_guard);
    let (ending, unreaped, flight) = match told_end {
        Some(end) => {
            let ending = match end {
                CommandEnd::Exited(code) => Ending::Exited(code),
                CommandEnd::Signaled(sig) => Ending::Signaled(sig),
            };
            (ending, Some(Unreaped { child, flight }), None)
        }
        None => (reap(&mut child, &flight, timed_out), None, Some(flight)),
    };

    if !report_done {
        if cfg!(target_os = "macos") {
            report = Some(Report {
                error: None,
                enforced: Enforced::default(),
                cgroup: None,
                memory_cgroup: None,
                memory_before: None,
            });
            stdout.push(&report_buf);
        } else {
            report_problem = Some(ReportProblem::EndedEarly);
        }
    }
    RunResult {
        report,
        unreaped,
        report_bytes: report_buf.len(),
        report_problem,
        stdout,
        stderr,
        ending,
        stopped_by_guard,
        _flight: flight,
    }
}

/// Reap the helper; its status is the command's end (the helper passes it on).
fn reap(child: &mut Child, flight: &super::running::Flight, timed_out: bool) -> Ending {
    flight.reaping();
    match child.wait() {
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
    }
}

/// The helper's status pipe as read so far.
#[derive(Default)]
struct Told {
    bytes: Vec<u8>,
    eof: bool,
    /// Set at the pipe's end, if its content was exactly one [`CommandEnd`] line.
    end: Option<CommandEnd>,
}

impl Told {
    fn read(&mut self, fd: &OwnedFd) {
        let mut buf = [0u8; CommandEnd::MAX_LINE + 1];
        loop {
            match rustix::io::read(fd, &mut buf) {
                Ok(0) => {
                    self.eof = true;
                    self.end = CommandEnd::parse(&self.bytes);
                    return;
                }
                Ok(n) if self.bytes.len() + n <= CommandEnd::MAX_LINE => {
                    self.bytes.extend_from_slice(&buf[..n]);
                }
                // Longer than any end: not one; the helper's reaping tells.
                Ok(_) => {
                    self.eof = true;
                    return;
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return,
                Err(_) => {
                    self.eof = true;
                    return;
                }
            }
        }
    }
}

fn parse_report(line: &[u8]) -> Result<Report, ReportProblem> {
    let text = std::str::from_utf8(line).map_err(|_| ReportProblem::NotUtf8)?;
    let json = text
        .strip_prefix(REPORT_PREFIX)
        .ok_or(ReportProblem::Missing)?;
    serde_json::from_str(json.trim_end()).map_err(ReportProblem::Malformed)
}

/// Which memory bound the kernel killed a command at (memory cgroups exist on Linux only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) enum KilledAt {
    /// The command's own (`CLAUDE_TOOLS_COMMAND_MEMORY_MB` plus the scratch quota).
    Command,
    /// All the gateway's commands together (`CLAUDE_TOOLS_COMMANDS_MEMORY_MB`).
    AllCommands,
}

/// After the command: its cgroups removed once their processes are gone (a session's memory
/// cgroup is kept for its next command); whether, and at which bound, the OOM killer ended it.
pub(super) fn release_cgroups(report: Option<&Report>) -> Option<KilledAt> {
    let killed = oom_killed(report);
    remove_cgroups(report);
    killed
}

/// Whether, and at which bound, the OOM killer ended the command (read once its processes are
/// gone; the helper may still be in the cgroup).
pub(super) fn oom_killed(report: Option<&Report>) -> Option<KilledAt> {
    #[cfg(target_os = "linux")]
    if let Some(report) = report {
        use sandbox::linux::cgroup::Bound;
        return sandbox::linux::cgroup::oom_killed(report).map(|bound| match bound {
            Bound::Command => KilledAt::Command,
            Bound::AllCommands => KilledAt::AllCommands,
        });
    }
    let _ = report;
    None
}

/// Whether the command had a memory cgroup of its own, not its session's.
pub(super) fn own_memory_cgroup(report: Option<&Report>) -> bool {
    #[cfg(target_os = "linux")]
    if let Some(report) = report {
        return sandbox::linux::cgroup::own_memory_cgroup(report);
    }
    let _ = report;
    false
}

/// The command's own cgroups removed (not the session's): only once the helper is reaped.
fn remove_cgroups(report: Option<&Report>) {
    #[cfg(target_os = "linux")]
    if let Some(report) = report {
        for dir in sandbox::linux::cgroup::remove_command_cgroups(report) {
            tracing::warn!("could not remove command cgroup {}", dir.display());
        }
    }
    let _ = report;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_are_parsed_strictly() {
        assert!(matches!(
            parse_report(b"hello\n"),
            Err(ReportProblem::Missing)
        ));
        assert!(matches!(
            parse_report(b"\xff\n"),
            Err(ReportProblem::NotUtf8)
        ));
        let malformed = parse_report(format!("{REPORT_PREFIX}{{\n").as_bytes()).unwrap_err();
        assert!(matches!(malformed, ReportProblem::Malformed(_)));
        assert!(malformed.to_string().starts_with("malformed report: "));
        let line = format!(
            "{REPORT_PREFIX}{}\n",
            serde_json::to_string(&Report {
                error: None,
                enforced: Enforced::default(),
                cgroup: None,
                memory_cgroup: None,
                memory_before: None,
            })
            .unwrap()
        );
        assert!(parse_report(line.as_bytes()).unwrap().error.is_none());
    }
}
