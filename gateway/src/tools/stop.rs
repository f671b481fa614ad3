//! `native_session_stop`: end a session for good. The stop is recorded first; the broker is
//! asked over its link (or signalled without one), and a broker that does not carry it out in
//! time is stopped by the gateway.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::check_key;
use crate::error::ToolError;
use crate::session::{Gateway, Leased, Request, Scope, Settle, ToolResult, WaitFor};
use crate::view::SessionView;

pub(super) const DESCRIPTION: &str = "End a session for good: stops its runner (an unfinished turn \
    is abandoned) and any running DeepSeek sub-session first; status becomes stopped and \
    terminal says how. The SessionView stays readable with status. Use when the task is done or \
    must be abandoned; to stop only a sub-session, reply with deepseek_subagent_stop.";

/// Longest `stop` waits for the runner to exit.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// Input of `native_session_stop`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// New unique string per stop request; resending it replays the answer.
    pub request_id: String,
    /// Why, for the record (default "requested by ChatGPT").
    #[serde(default)]
    pub reason: Option<String>,
}

/// Longest stop `reason`, in characters: it is stored in the ledger and shown to the owner.
pub const MAX_REASON_CHARS: usize = 500;

/// A stop reason: at most [`MAX_REASON_CHARS`] characters, none of them a control, bidi or
/// invisible format character (issue 24: every free-text input is bounded).
fn check_reason(reason: &str) -> ToolResult<()> {
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(ToolError::invalid(format!(
            "reason is longer than {MAX_REASON_CHARS} characters; say it in a sentence"
        )));
    }
    if !common::display::is_plain(reason) {
        return Err(ToolError::invalid(
            "reason must be plain text on one line (no control, bidi, format or invisible \
             characters, no spaces other than U+0020, no stacked combining marks)",
        ));
    }
    Ok(())
}

pub(super) async fn handle(
    gateway: &Arc<Gateway>,
    mut args: StopArgs,
    request_hash: &str,
) -> ToolResult<SessionView> {
    check_key("request_id", &args.request_id)?;
    if let Some(reason) = &args.reason {
        check_reason(reason)?;
    }
    let reason = args
        .reason
        .take()
        .unwrap_or_else(|| "requested by ChatGPT".to_string());
    let session_id = args.native_session_id.as_str();
    let call = Leased {
        session_id,
        lease_id: &args.lease_id,
        request: Request::new(Scope::Stop, session_id, &args.request_id, request_hash),
    };
    gateway
        .leased(call, |_session, request| async move {
            gateway.pace_recovery("stop", session_id, false)?;
            // Its DeepSeek sub-sessions first, each observed gone before the session stops.
            gateway
                .subsessions()
                .stop_all(gateway, session_id, "its session was stopped")
                .await;
            let attached = gateway.live(session_id).attached();
            let session = gateway.store.write(|tx| {
                let mut session = gateway.session(tx, session_id)?;
                if session.status.is_terminal() {
                    // It ended while its sub-sessions were stopped (a broker's end or the lease
                    // sweep raced this call): its end stands — a stop never turns a failed or
                    // expired session into a stopped one — and, like any stop of an ended
                    // session, only the last request is kept.
                    let generation = session.lease_generation;
                    gateway.keep_last_request(tx, &request, session_id, generation)?;
                    return Ok::<_, ToolError>((session, false));
                }
                gateway.claim(tx, &request, session_id, session.lease_generation)?;
                let event = session.stop_requested(&reason, attached);
                gateway.commit(tx, &mut session, &event)?;
                Ok((session, true))
            })?;
            let (session, stopped_now) = session;
            if !stopped_now {
                return Ok(Settle {
                    wait: WaitFor::Terminal,
                    timeout: Duration::ZERO,
                });
            }
            gateway.notify(&session);
            gateway.send_stop(session_id, session.broker.as_ref(), &reason);
            gateway.enforce_stop(session_id);
            Ok(Settle {
                wait: WaitFor::Terminal,
                timeout: STOP_WAIT,
            })
        })
        .await
}
