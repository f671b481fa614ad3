//! `native_session_recover`: regain a session with its recovery token — re-verify its runtime
//! (a broker that fails is reported lost, never faked) and rotate its lease.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{check_key, wait_seconds};
use crate::error::ToolError;
use crate::session::{Gateway, Request, Scope, ToolResult, WaitFor, within_budget};
use crate::view::SessionView;

pub(super) const DESCRIPTION: &str = "Regain a session with its recovery_token: when you lost its \
    lease_id (lease_invalid), or when recovery_required is true. Re-verifies the session's \
    runtime and issues a new lease_id (the old one stops working); then continue or reply as the \
    SessionView says. If the runner is gone the answer says so (current_run.state lost or \
    exited, recovery_required) and continue starts a new runner in the same conversation. It \
    fails with recovery_denied for a wrong token (nothing changes; use the token from start's \
    answer) and workspace_changed when the session's directory was replaced since it started \
    (start a new session). Not for new tasks (start) or follow-ups (continue).";

/// Input of `native_session_recover`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The recovery_token from native_session_start's answer.
    pub recovery_token: String,
    /// New unique string per recovery attempt; resending it replays the answer without rotating
    /// the lease again.
    pub recovery_id: String,
    /// Seconds to wait for a change after recovering (0-50, default 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

pub(super) async fn handle(
    gateway: &Arc<Gateway>,
    args: RecoverArgs,
    request_hash: &str,
) -> ToolResult<SessionView> {
    check_key("recovery_id", &args.recovery_id)?;
    let started = tokio::time::Instant::now();
    let wait = wait_seconds(args.wait_seconds, 0)?;
    let session_id = args.native_session_id.as_str();
    let request = Request::new(Scope::Recover, session_id, &args.recovery_id, request_hash);
    // Only a session that exists gets an in-memory entry; the token is checked before anything.
    gateway.check_recovery_token(session_id, &args.recovery_token)?;
    let live = gateway.live(session_id);
    let op = live.op_lock.lock().await;
    let session = gateway.load(session_id)?;
    if let Some(view) = gateway.replayed(&request)? {
        return Ok(view);
    }
    // Past the budget a recover still works (it must, on a full disk), but each stores a lease row
    // and events: paced, never refused for a replay (red team 29 B1, red team 31 N1).
    gateway.pace_past_budget("recover", session_id, session.status.is_terminal())?;
    // Recovered into a directory that is not the session's own, the session would read, run
    // and write somewhere else; a terminal session only reports its final state.
    if !session.status.is_terminal() {
        Gateway::check_workspace(&session)?;
    }
    gateway.reattach_if_detached(session_id).await;
    let attached = live.attached();
    let generation = session.lease_generation + 1;
    let session = gateway.store.write(|tx| {
        let mut session = gateway.session(tx, session_id)?;
        gateway.claim(tx, &request, session_id, generation)?;
        tx.revoke_leases(session_id)?;
        let expires = gateway.grant_lease(tx, session_id, generation)?;
        let event = session.lease_rotated(generation, expires, attached);
        gateway.commit(tx, &mut session, &event)?;
        Ok::<_, ToolError>(session)
    })?;
    gateway
        .state_budget
        .charge(crate::state_budget::RECOVER_COST_BYTES);
    gateway.notify(&session);
    drop(op);
    let session = if wait > 0 {
        gateway
            .wait_until(
                session_id,
                within_budget(started, Duration::from_secs(wait)),
                WaitFor::ChangeAfter(session.revision),
            )
            .await?
    } else {
        session
    };
    let view = gateway.view(&session, Some(gateway.lease_id(session_id, generation)))?;
    gateway.remember(&request, &view, generation);
    Ok(view)
}
