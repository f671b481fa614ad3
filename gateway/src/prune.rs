//! Retention of ended sessions' bulky files (issue 24): the runtime dir of a stopped, failed or
//! expired session — its runner's HOME with the Claude Code transcript, the broker's socket dir
//! — is removed once untouched for the retention age. The database rows (session, turns, ledger)
//! are kept: the ledger summary stays readable. Runs in the gateway (the state dir's single
//! writer): automatically every hour (`CLAUDE_TOOLS_RETENTION_DAYS`, default 14) and for
//! `gatewayctl prune` over the admin socket. A live session's files are never touched (nor a
//! dir whose short name a live session shares); removal never follows a symlink.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::session::Gateway;

/// What a prune removed (or would remove, in a dry run).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PruneReport {
    /// (session id, bytes) of each ended session whose files went.
    pub sessions: Vec<(String, u64)>,
    pub bytes: u64,
    pub dry_run: bool,
}

/// The runtime dir of a session (as the broker host names it).
fn runtime_dir(state_dir: &Path, session_id: &str) -> PathBuf {
    let short: String = crate::state::id_suffix(session_id)
        .chars()
        .take(12)
        .collect();
    state_dir.join("run").join(short)
}

/// Remove the runtime dirs of ended sessions untouched for `older_than`.
pub fn prune(
    gateway: &Gateway,
    older_than: Duration,
    dry_run: bool,
) -> anyhow::Result<PruneReport> {
    let sessions = gateway.store.read(|tx| tx.sessions())?;
    let state_dir = &gateway.config.state_dir;
    let live: Vec<PathBuf> = sessions
        .iter()
        .filter(|s| !s.status.is_terminal())
        .map(|s| runtime_dir(state_dir, &s.id))
        .collect();
    let cutoff = SystemTime::now()
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut report = PruneReport {
        dry_run,
        ..PruneReport::default()
    };
    for session in sessions.iter().filter(|s| s.status.is_terminal()) {
        let dir = runtime_dir(state_dir, &session.id);
        if live.contains(&dir) {
            continue;
        }
        // A real directory only (never a symlink), untouched since the cutoff.
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() || meta.modified().map_or(true, |m| m > cutoff) {
            continue;
        }
        let bytes = sandbox::allocated_bytes(&dir);
        // `remove_dir_all` removes symlinks inside as links, never what they point to.
        if !dry_run && let Err(err) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(session = %session.id, "prune: removing the runtime dir: {err}");
            continue;
        }
        tracing::info!(session = %session.id, bytes, dry_run, "prune: an ended session's files");
        report.bytes += bytes;
        report.sessions.push((session.id.clone(), bytes));
    }
    if !dry_run && !report.sessions.is_empty() {
        gateway.state_budget.refresh_now();
    }
    Ok(report)
}
