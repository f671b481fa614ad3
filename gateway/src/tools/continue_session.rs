//! `native_session_continue`: the user's next prompt into an idle session — the same Claude Code
//! conversation, restarted in a new runner generation if the runner is gone.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{DEFAULT_START_WAIT, check_key, check_prompt, wait_seconds};
use crate::error::{ErrorCode, ToolError};
use crate::session::{
    Gateway, Leased, Request, Scope, Settle, ToolResult, WaitFor, ensure_not_terminal,
};
use crate::state::SessionStatus;
use crate::view::SessionView;

pub(super) const DESCRIPTION: &str = "Send the user's next prompt into an idle session (status \
    idle, no pending_turn): same Claude Code conversation, profile and directory. Use instead of \
    start for follow-ups; while a pending_turn exists use reply_and_wait. Restarts a runner that \
    exited. Waits up to wait_seconds (default 30) for the first turn.";

/// Input of `native_session_continue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// The user's next request, sent into the same Claude Code conversation.
    pub prompt: String,
    /// New unique string per prompt; resending the same key and input replays the answer.
    pub idempotency_key: String,
    /// Seconds to wait for the next pending_turn (0-50, default 30).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

pub(super) async fn handle(
    gateway: &Arc<Gateway>,
    mut args: ContinueArgs,
    request_hash: &str,
) -> ToolResult<SessionView> {
    check_key("idempotency_key", &args.idempotency_key)?;
    let prompt = std::mem::take(&mut args.prompt);
    let wait = wait_seconds(args.wait_seconds, DEFAULT_START_WAIT)?;
    let session_id = args.native_session_id.as_str();
    let call = Leased {
        session_id,
        lease_id: &args.lease_id,
        request: Request::new(
            Scope::Continue,
            session_id,
            &args.idempotency_key,
            request_hash,
        ),
    };
    gateway
        .leased(call, |session, request| async move {
            check_prompt(&prompt)?;
            ensure_not_terminal(&session)?;
            gateway
                .state_budget
                .check("the prompt was not sent; the session stays idle")?;
            if session.status != SessionStatus::Idle {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    format!(
                        "the session is {} — continue is possible only when it is idle; answer \
                         the pending turn with native_session_reply_and_wait or wait with \
                         native_session_status",
                        session.status.as_str()
                    ),
                ));
            }
            gateway.ensure_runner(session_id).await?;
            let prompt_id = format!("prompt_{}", uuid::Uuid::new_v4().simple());
            gateway.state_budget.charge_text(&prompt);
            gateway.release_prompt(session_id, prompt_id, prompt, Some(&request))?;
            Ok(Settle {
                wait: WaitFor::NextTurn,
                timeout: Duration::from_secs(wait),
            })
        })
        .await
}
