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
    // A recover works whatever the budget (it must, on a full disk), but is paced: a live
    // session's stores a lease row and events (red team 29 B1, red team 31/32 N1).
    let ended = session.status.is_terminal();
    if ended
        && gateway
            .store
            .read(|tx| gateway.has_last_request(tx, &request))?
    {
        // The first recover after the end rotated the lease once (cutting off a lease issued
        // while it ran); later ones hand out that same lease again, renewed in place, and store
        // nothing per call: an ended session stores O(1) whatever is called on it.
        let lease_id = gateway.lease_id(session_id, session.lease_generation);
        return gateway.answer_ended(session_id, &request, "recover", (&lease_id, true));
    }
    // Paced per session even when ended: this rotation happens once per ended session (later
    // recovers take the branch above), and on the shared key of ended sessions a holder of
    // other ended sessions' tokens could hold back the rotation that cuts a leaked lease off.
    gateway.pace_recovery("recover", session_id, false)?;
    if !ended {
        // Recovered into a directory that is not the session's own, the session would read,
        // run and write somewhere else.
        Gateway::check_workspace(&session)?;
    }
    gateway.reattach_if_detached(session_id).await;
    let attached = live.attached();
    let generation = session.lease_generation + 1;
    let session = gateway.store.write(|tx| {
        let mut session = gateway.session(tx, session_id)?;
        gateway.claim(tx, &request, session_id, generation)?;
        if session.status.is_terminal() {
            gateway.keep_last_request(tx, &request, session_id, generation)?;
        }
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
