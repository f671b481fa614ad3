//! Managed Git worktrees of `worktree_write` sessions (DESIGN §5, §6): the source must be the
//! clean top level of a repository; the gateway adds a retained worktree on a new branch under
//! its worktree dir and never touches the source checkout's files, HEAD or index.
//!
//! Git runs with a fixed environment: no system or global config, no optional locks (so
//! `status` never rewrites the source's index), hooks and fsmonitor switched off. A repository
//! whose own config defines filter drivers is refused, because checking out would run them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{ErrorCode, ToolError};

/// What [`create`] made, as recorded in the session's `workspace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    pub base_commit: String,
}

/// A git invocation with the fixed, defanged environment.
fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.untrackedCache=false",
            "-C",
        ])
        .arg(dir)
        .stdin(std::process::Stdio::null());
    cmd
}

/// Run git; stdout on success, a short reason otherwise.
fn run(mut cmd: Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|err| format!("git could not be started: {err}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or("").trim();
        Err(if first.is_empty() {
            format!("git exited with {}", out.status)
        } else {
            first.to_string()
        })
    }
}

fn invalid(message: String) -> ToolError {
    ToolError::invalid(message)
}

/// Check that `source` is the clean top level of a Git repository that is safe to check out.
/// Returns the commit HEAD points at.
pub fn check_source(source: &Path) -> Result<String, ToolError> {
    let shown = source.display();
    let top = run({
        let mut c = git(source);
        c.args(["rev-parse", "--show-toplevel"]);
        c
    })
    .map_err(|_| {
        invalid(format!(
            "worktree_write needs a Git repository: {shown} is not inside one (use direct_write \
             for a plain directory)"
        ))
    })?;
    let top = PathBuf::from(top.trim_end_matches('\n'));
    let canonical = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    if top != canonical {
        return Err(invalid(format!(
            "worktree_write needs the top level of the repository: give {} instead of {shown}",
            top.display()
        )));
    }
    let config = run({
        let mut c = git(source);
        c.args(["config", "--includes", "--name-only", "--list"]);
        c
    })
    .unwrap_or_default();
    if let Some(key) = config.lines().find(|key| {
        let key = key.to_ascii_lowercase();
        key.starts_with("filter.")
            && (key.ends_with(".clean") || key.ends_with(".smudge") || key.ends_with(".process"))
    }) {
        return Err(ToolError::new(
            ErrorCode::NotPermitted,
            format!(
                "the repository's own config defines a filter driver ({key}); creating a \
                 worktree would run it. Remove it or use direct_write"
            ),
        ));
    }
    let head = run({
        let mut c = git(source);
        c.args(["rev-parse", "--verify", "HEAD^{commit}"]);
        c
    })
    .map_err(|_| {
        invalid(format!(
            "{shown} has no commit yet; commit once before using worktree_write"
        ))
    })?;
    let status = run({
        let mut c = git(source);
        c.args(["status", "--porcelain=v1", "--untracked-files=all"]);
        c
    })
    .map_err(|err| invalid(format!("git status failed in {shown}: {err}")))?;
    let dirty = status.lines().filter(|l| !l.is_empty()).count();
    if dirty > 0 {
        return Err(invalid(format!(
            "{shown} has {dirty} uncommitted or untracked change(s); worktree_write needs a \
             clean checkout: commit or stash them first"
        )));
    }
    Ok(head.trim().to_string())
}

/// Add the session's worktree: branch `ngw/<session>` at `base_commit`, checked out at
/// `<worktree_dir>/<session_id>`.
pub fn create(
    source: &Path,
    worktree_dir: &Path,
    session_id: &str,
    base_commit: &str,
) -> Result<Worktree, ToolError> {
    let path = worktree_dir.join(session_id);
    let branch = format!("ngw/{}", session_id.trim_start_matches("ns_"));
    run({
        let mut c = git(source);
        c.args(["worktree", "add", "--quiet", "--no-track", "-b", &branch])
            .arg(&path)
            .arg(base_commit);
        c
    })
    .map_err(|err| {
        ToolError::new(
            ErrorCode::Internal,
            format!("the worktree could not be created: {err}"),
        )
    })?;
    Ok(Worktree {
        path,
        branch,
        base_commit: base_commit.to_string(),
    })
}

/// Undo [`create`] for a session that was never recorded (best effort).
pub fn discard(source: &Path, worktree: &Worktree) {
    let _ = run({
        let mut c = git(source);
        c.args(["worktree", "remove", "--force"])
            .arg(&worktree.path);
        c
    });
    let _ = run({
        let mut c = git(source);
        c.args(["branch", "-D", &worktree.branch]);
        c
    });
}
