//! `native_session_status`: a session's SessionView, read without changing anything but the
//! lease's renewal; optionally waiting for the next change.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::wait_seconds;
use crate::session::{Gateway, ToolResult, WaitFor};
use crate::view::SessionView;

pub(super) const DESCRIPTION: &str = "Read a session's SessionView without changing anything. \
    Use it to wait when another call answered with status running and no pending_turn: with \
    wait_seconds (up to 50) it returns as soon as the session changes.";

/// Input of `native_session_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// Seconds to wait for a change (0-50, default 0: answer at once).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

pub(super) async fn handle(gateway: &Arc<Gateway>, args: StatusArgs) -> ToolResult<SessionView> {
    let wait = wait_seconds(args.wait_seconds, 0)?;
    let session = gateway.authenticate(&args.native_session_id, &args.lease_id)?;
    let session = if wait > 0 {
        gateway
            .wait_until(
                &session.id,
                Duration::from_secs(wait),
                WaitFor::ChangeAfter(session.revision),
            )
            .await?
    } else {
        session
    };
    gateway.view(&session, Some(args.lease_id))
}
