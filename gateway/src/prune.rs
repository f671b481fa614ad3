//! Retention of ended sessions (issue 24): what a stopped, failed or expired session leaves
//! behind goes once untouched for the retention age — its runtime dir (the runner's HOME with
//! the Claude Code transcript, the broker's socket dir) and its bulky database content (turns,
//! replies, actions, idempotency answers, the record's result texts: see
//! `state::store::content` for what is bulk and what is the summary). The removal goes through
//! the store's own write path and is recorded in the session's ledger (`content_pruned`, with
//! the removed rows' digests), so the ledger stays verifiable; then the database gives its free
//! pages back to the file system and the state dir's budget is measured again at once. Runs in
//! the gateway (the state dir's single writer): automatically every hour
//! (`CLAUDE_TOOLS_RETENTION_DAYS`, default 14) and for `gatewayctl prune` over the admin socket.
//! A live session's files and content are never touched (nor a dir whose short name a live
//! session shares, nor a sub-session whose delegating session is live); only its recorded
//! idempotent answers older than the age go, except the newest of each operation (red team 29
//! B1: a recover flood's answers were freed by nothing while the session lived). Removal never
//! follows a symlink.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::session::Gateway;
use crate::state::{SessionRecord, StoreError, Tx};

/// What a prune removed (or would remove, in a dry run).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PruneReport {
    /// Each ended session whose files or content went, in id order.
    pub sessions: Vec<PrunedSession>,
    /// Bytes of files removed (allocated blocks).
    pub bytes: u64,
    /// Bytes of ended sessions' database content removed (the rows' text).
    pub content_bytes: u64,
    /// Live sessions' older recorded answers dropped (not counted in a dry run; the admin
    /// answer shows them only in `database_bytes`, the file's shrink).
    pub live_answers: crate::state::DroppedAnswers,
    /// How much smaller the database file and its WAL became (0 in a dry run).
    pub database_bytes: u64,
    pub dry_run: bool,
}

/// One ended session a prune took something from.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PrunedSession {
    pub session_id: String,
    /// Bytes of its runtime dir.
    pub bytes: u64,
    /// Bytes of its database content.
    pub content_bytes: u64,
}

/// The runtime dir of a session (as the broker host names it).
fn runtime_dir(state_dir: &Path, session_id: &str) -> PathBuf {
    let short: String = crate::state::id_suffix(session_id)
        .chars()
        .take(12)
        .collect();
    state_dir.join("run").join(short)
}

/// Remove the runtime dirs and database content of ended sessions untouched for `older_than`.
pub fn prune(
    gateway: &Gateway,
    older_than: Duration,
    dry_run: bool,
) -> anyhow::Result<PruneReport> {
    let sessions = gateway.store.read(|tx| tx.sessions())?;
    let mut pruned: BTreeMap<String, PrunedSession> = BTreeMap::new();
    let files = prune_files(gateway, &sessions, older_than, dry_run);
    for (session_id, bytes) in files {
        pruned.entry(session_id.clone()).or_default().bytes = bytes;
    }
    let database_before = crate::state::database_file_bytes(&gateway.config.state_dir);
    let mut content = prune_content(gateway, &sessions, older_than, dry_run);
    if !dry_run {
        // Counted as content for the file's shrink below (no bytes of text).
        content.extend(
            forget_pruned_keys(gateway, &sessions)
                .into_iter()
                .map(|id| (id, 0)),
        );
    }
    for (session_id, bytes) in &content {
        pruned.entry(session_id.clone()).or_default().content_bytes += *bytes;
    }
    let live_answers = if dry_run {
        crate::state::DroppedAnswers::default()
    } else {
        drop_live_answers(gateway, &sessions, older_than)
    };
    let mut database_bytes = 0;
    if !dry_run && (!content.is_empty() || live_answers.answers > 0) {
        match gateway.store.reclaim_space() {
            Ok(how) => {
                let after = crate::state::database_file_bytes(&gateway.config.state_dir);
                database_bytes = database_before.saturating_sub(after);
                tracing::info!(
                    ?how,
                    database_before,
                    after,
                    "prune: database space reclaimed"
                );
            }
            Err(err) => tracing::warn!("prune: reclaiming the database's free pages: {err}"),
        }
    }
    if !dry_run {
        // The owner's next start is measured against what is left now, not up to
        // `state_budget::REFRESH` later.
        gateway.state_budget.refresh_now();
    }
    let sessions: Vec<PrunedSession> = pruned
        .into_iter()
        .map(|(session_id, entry)| PrunedSession {
            session_id,
            ..entry
        })
        .collect();
    Ok(PruneReport {
        bytes: sessions.iter().map(|s| s.bytes).sum(),
        content_bytes: sessions.iter().map(|s| s.content_bytes).sum(),
        live_answers,
        sessions,
        database_bytes,
        dry_run,
    })
}

/// The runtime dirs of ended sessions untouched for `older_than`: (session id, bytes) of each
/// removed (or, in a dry run, that would be).
fn prune_files(
    gateway: &Gateway,
    sessions: &[SessionRecord],
    older_than: Duration,
    dry_run: bool,
) -> Vec<(String, u64)> {
    let state_dir = &gateway.config.state_dir;
    let live: Vec<PathBuf> = sessions
        .iter()
        .filter(|s| !s.status.is_terminal())
        .map(|s| runtime_dir(state_dir, &s.id))
        .collect();
    let cutoff = SystemTime::now()
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut removed = Vec::new();
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
        removed.push((session.id.clone(), bytes));
    }
    removed
}

/// The recorded answers of live sessions claimed longer than `older_than` ago, except the
/// newest of each operation, each session in its own transaction.
fn drop_live_answers(
    gateway: &Gateway,
    sessions: &[SessionRecord],
    older_than: Duration,
) -> crate::state::DroppedAnswers {
    let cutoff_ms = common::time::now_unix_ms()
        .saturating_sub(i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX));
    let mut total = crate::state::DroppedAnswers::default();
    for session in sessions.iter().filter(|s| !s.status.is_terminal()) {
        match gateway
            .store
            .write(|tx| tx.drop_old_answers(&session.id, cutoff_ms))
        {
            Ok(dropped) => {
                total.answers += dropped.answers;
                total.bytes += dropped.bytes;
            }
            Err(err) => {
                tracing::warn!(session = %session.id, "prune: a live session's old answers: {err}");
            }
        }
    }
    if total.answers > 0 {
        tracing::info!(
            answers = total.answers,
            bytes = total.bytes,
            "prune: live sessions' old answers"
        );
    }
    total
}

/// The database content of ended sessions whose record was untouched for `older_than`, each
/// session in one transaction with its `content_pruned` event: (session id, bytes) of each
/// (or, in a dry run, that would be).
fn prune_content(
    gateway: &Gateway,
    sessions: &[SessionRecord],
    older_than: Duration,
    dry_run: bool,
) -> Vec<(String, u64)> {
    let cutoff_ms = common::time::now_unix_ms()
        .saturating_sub(i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX));
    // A sub-session's end is read by its delegating session while that one runs (and a
    // delegating session reads its sub-sessions'): nothing of either goes while one is live.
    let live: HashSet<&str> = sessions
        .iter()
        .filter(|s| !s.status.is_terminal())
        .map(|s| s.id.as_str())
        .collect();
    let related_live = |s: &SessionRecord| {
        let parent = s.delegation.as_ref().map(|d| d.parent_session_id.as_str());
        parent.is_some_and(|p| live.contains(p))
            || s.subsessions.iter().any(|c| live.contains(c.as_str()))
    };
    let mut removed = Vec::new();
    for session in sessions
        .iter()
        .filter(|s| s.status.is_terminal() && s.content_pruned.is_none() && !related_live(s))
    {
        let id = session.id.as_str();
        let step = |tx: &Tx<'_>| {
            let Some(mut current) = tx.session(id)? else {
                return Ok::<_, StoreError>(None);
            };
            // Checked again inside the transaction: nothing is removed from a live session.
            let fresh = tx
                .session_updated_at_ms(id)?
                .is_none_or(|at| at > cutoff_ms);
            if !current.status.is_terminal() || current.content_pruned.is_some() || fresh {
                return Ok(None);
            }
            let bytes = tx.session_content_bytes(id)?;
            if bytes == 0 || dry_run {
                return Ok((bytes > 0).then_some((bytes, current)));
            }
            let content = tx.remove_session_content(id, current.lease_generation)?;
            let Some(event) = current.prune_content(content.rows, content.bytes, content.answers)
            else {
                return Ok(None);
            };
            gateway.commit(tx, &mut current, &event)?;
            Ok(Some((content.bytes, current)))
        };
        let pruned = if dry_run {
            gateway.store.read(step)
        } else {
            gateway.store.write(step)
        };
        // One session that cannot be pruned (its rows still referenced, the ledger refusing
        // writes) leaves the others to go on; nothing of it was removed (one transaction).
        let pruned = match pruned {
            Ok(pruned) => pruned,
            Err(err) => {
                tracing::warn!(session = %id, "prune: an ended session's content: {err}");
                continue;
            }
        };
        if let Some((bytes, current)) = pruned {
            if !dry_run {
                gateway.notify(&current);
            }
            tracing::info!(session = %id, bytes, dry_run, "prune: an ended session's content");
            removed.push((id.to_string(), bytes));
        }
    }
    removed
}

/// Ended sessions pruned before keys and leases went with their content (red team 31/32 N1:
/// their recovers and stops kept adding both): delete their older keys and superseded lease
/// rows now, each session in one transaction with a `content_pruned` event naming no rows and
/// counting the keys. The sessions anything was deleted from.
fn forget_pruned_keys(gateway: &Gateway, sessions: &[SessionRecord]) -> Vec<String> {
    let mut forgot = Vec::new();
    for session in sessions
        .iter()
        .filter(|s| s.status.is_terminal() && s.content_pruned.is_some())
    {
        let id = session.id.as_str();
        let step = |tx: &Tx<'_>| {
            let Some(current) = tx.session(id)? else {
                return Ok::<_, StoreError>(false);
            };
            let keys = tx.delete_ended_keys(id)?;
            let leases = tx.delete_superseded_leases(id, current.lease_generation)?;
            if keys + leases == 0 {
                return Ok(false);
            }
            let event = crate::state::LedgerEvent::ContentPruned {
                rows: Vec::new(),
                bytes: 0,
                idempotency_answers: keys,
            };
            tx.record(id, &event)?;
            Ok(true)
        };
        match gateway.store.write(step) {
            Ok(true) => {
                tracing::info!(session = %id, "prune: a pruned session's later keys and leases");
                forgot.push(id.to_string());
            }
            Ok(false) => {}
            Err(err) => tracing::warn!(session = %id, "prune: a pruned session's keys: {err}"),
        }
    }
    forgot
}
