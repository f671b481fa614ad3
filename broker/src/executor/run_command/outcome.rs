//! Turning a finished command into its `ActionOutcome`: the header (how it ended, the sandbox and
//! limits the helper enforced), stdout and stderr sharing the 64 KiB budget, and the
//! `confinement_unconfirmed` outcome when the helper's report is missing.

use std::path::Path;
use std::time::{Duration, Instant};

use common::outcome::OutcomeCode;
use common::tools::{ActionOutcome, MAX_TOOL_OUTPUT_BYTES, Receipt, ToolStatus};
use sandbox::spec::{Enforced, Report};

use super::supervise::{Ending, ReportProblem, RunResult};
use super::{HEADER_RESERVE, millis};

fn signal_name(sig: i32) -> &'static str {
    use rustix::process::Signal;
    match Signal::from_named_raw(sig) {
        Some(Signal::KILL) => "SIGKILL",
        Some(Signal::TERM) => "SIGTERM",
        Some(Signal::SEGV) => "SIGSEGV",
        Some(Signal::ABORT) => "SIGABRT",
        Some(Signal::INT) => "SIGINT",
        Some(Signal::PIPE) => "SIGPIPE",
        Some(Signal::SYS) => "SIGSYS",
        Some(Signal::BUS) => "SIGBUS",
        Some(Signal::FPE) => "SIGFPE",
        Some(Signal::ILL) => "SIGILL",
        _ => "signal",
    }
}

/// Build the outcome: header, then the two sections, within 64 KiB.
pub(super) fn finish(
    action_id: &str,
    cwd: &Path,
    run: RunResult,
    timeout: Duration,
    started: Instant,
    notes: &[String],
) -> ActionOutcome {
    let duration_ms = millis(started.elapsed());
    let sandbox_text = sandbox_summary(run.report.as_ref());
    let Some(report) = &run.report else {
        let problem = run
            .report_problem
            .as_ref()
            .unwrap_or(&ReportProblem::Missing)
            .to_string();
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
            error_code: Some(OutcomeCode::SandboxUnavailable),
            receipt: command_receipt(action_id, cwd, None, duration_ms),
        };
    }
    let (status, error_code, exit_code, ending_text) = match run.ending {
        Ending::Exited(0) => (ToolStatus::Ok, None, Some(0), "exit code: 0".to_string()),
        Ending::Exited(code) => (
            ToolStatus::Error,
            Some(OutcomeCode::NonzeroExit),
            Some(code),
            format!("exit code: {code}"),
        ),
        Ending::Signaled(sig) => (
            ToolStatus::Error,
            Some(OutcomeCode::KilledBySignal),
            None,
            format!("killed by signal {sig} ({})", signal_name(sig)),
        ),
        Ending::TimedOut => (
            ToolStatus::Error,
            Some(OutcomeCode::Timeout),
            None,
            format!(
                "timed out after {} s; the process group was killed",
                timeout.as_secs()
            ),
        ),
        Ending::Unknown => (
            ToolStatus::Error,
            Some(OutcomeCode::IoError),
            None,
            "exit status unknown".to_string(),
        ),
    };
    let mut header =
        format!("{ending_text}\nduration_ms: {duration_ms}\nsandbox: {sandbox_text}\n");
    header.push_str(&limits_line(&report.enforced));
    header.push_str(&writes_line(&report.enforced));
    for note in notes {
        header.push_str(&format!("note: {note}\n"));
    }
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
        error_code,
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
        error_code: Some(OutcomeCode::ConfinementUnconfirmed),
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

/// `limits: memory 512 MiB per process and 768 MiB for all its processes together, scratch 256
/// MiB in total` (what the helper enforced).
fn limits_line(enforced: &Enforced) -> String {
    let mut memory = enforced.memory_limit_mb.map_or_else(
        || "unbounded".to_string(),
        |mb| format!("{mb} MiB per process"),
    );
    if let Some(mb) = enforced.memory_cgroup_mb {
        memory.push_str(&format!(" and {mb} MiB for all its processes together"));
    }
    let scratch = enforced.scratch_quota_mb.map_or_else(
        || "per file only".to_string(),
        |mb| format!("{mb} MiB in total"),
    );
    format!("limits: memory {memory}, scratch {scratch}\n")
}

/// Where the command's writes went: the session's layer (kept for its next commands), its
/// writable dir (macOS), or nowhere but the scratch dir.
fn writes_line(enforced: &Enforced) -> String {
    if enforced.layer_roots > 0 {
        "writes: copy-on-write layer of this session (kept for its next commands; real files \
         unchanged)\n"
            .into()
    } else if enforced.session_dir {
        "writes: the project and HOME read-only; build outputs and caches redirected to this \
         session's writable dir (kept for its next commands), TMPDIR (no copy-on-write layer on \
         macOS)\n"
            .into()
    } else {
        "writes: read-only file system, TMPDIR only (no copy-on-write layer)\n".into()
    }
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
}
