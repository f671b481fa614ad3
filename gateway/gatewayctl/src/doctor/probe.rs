//! Running a program to probe the host: with a timeout, its stdout and stderr read on their own
//! threads, and the first non-empty line of what it said.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run a command with a timeout; its exit success and stdout/stderr text.
pub(super) fn run_with_timeout(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(bool, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run: {e}"))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(64 * 1024).read_to_string(&mut text);
            }
            let _ = tx.send(text);
        });
        rx
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(25)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {}s", timeout.as_secs()));
            }
            Err(e) => return Err(format!("waiting: {e}")),
        }
    };
    let grace = Duration::from_secs(2);
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    Ok((status.success(), out, err))
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_out() {
        let r = run_with_timeout(
            Command::new("/bin/sh").args(["-c", "sleep 5"]),
            Duration::from_millis(200),
        );
        assert!(r.unwrap_err().contains("timed out"));
        let (ok, out, _) = run_with_timeout(
            Command::new("/bin/sh").args(["-c", "echo 1.2.3"]),
            Duration::from_secs(15),
        )
        .unwrap();
        assert!(ok);
        assert_eq!(out.trim(), "1.2.3");
    }
}
