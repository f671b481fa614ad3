//! The seam between the session core and sub-sessions — session records of their own that another
//! session delegated one task to, run by a runner whose model is not ChatGPT: the points where
//! the core hands over to them. The core keeps their records, events, verdicts, delegated calls
//! and ledger like any session's; a sub-session kind (DeepSeek's, in `deepseek/`) implements
//! [`Subsessions`] and is registered where the [`Gateway`] is built (`crate::open`), so nothing
//! in `session/` names it.

use std::sync::Arc;

use common::protocol::EgressResponse;
use common::tools::ActionOutcome;
use futures::future::BoxFuture;
use serde_json::Value;

use super::Gateway;
use crate::state::{ActionRecord, SessionRecord, StoreError, Tx};

/// What the session core asks of the sub-sessions it hosts, each at one fixed point.
pub trait Subsessions: Send + Sync + 'static {
    /// The system prompt of a sub-session's runner (its task comes as its first prompt; the
    /// session's skills are ChatGPT's, not its).
    fn system_prompt(&self) -> &str;

    /// A sub-session runner's tool call, before its delegation approves it: `Err` refuses it
    /// (it is never run, nor recorded with its arguments) and the sub-session fails.
    fn screen_call(
        &self,
        gateway: &Gateway,
        name: &str,
        arguments: &Value,
    ) -> Result<(), ScreenedOut>;

    /// An action's outcome before it is recorded: may replace what a session that delegates,
    /// or a sub-session, must not carry on to the database and ChatGPT.
    fn screen_outcome(
        &self,
        gateway: &Gateway,
        session: &SessionRecord,
        outcome: &mut ActionOutcome,
    );

    /// A sub-session's write just committed: the error to fail the sub-session with, if what
    /// the file now holds must not stay unnoticed.
    fn screen_write(&self, gateway: &Gateway, action: &ActionRecord) -> Option<String>;

    /// The sub-session's runner ended its turn (`result`): its task is done, or failed.
    fn turn_ended(
        &self,
        gateway: &Arc<Gateway>,
        child_id: &str,
        result: Option<String>,
        is_error: bool,
    );

    /// Fail the running sub-session now with `error` (from [`Self::screen_call`] or
    /// [`Self::screen_write`]) and stop its runtime.
    fn fail(&self, gateway: &Arc<Gateway>, child_id: &str, error: String);

    /// The sub-session's runtime is gone and no stop was asked for: it is never run again.
    fn runtime_lost(&self, gateway: &Gateway, child_id: &str, why: &str);

    /// One model request of a sub-session's runner (the broker's `EgressRequest`), answered on
    /// the kind's route; any other broker's request is refused.
    fn model_request<'a>(
        &'a self,
        gateway: &'a Gateway,
        session_id: &'a str,
        request_id: u64,
        body: &'a str,
    ) -> BoxFuture<'a, EgressResponse>;

    /// Stop every running sub-session of `parent_id`, each seen gone (before the session
    /// itself stops).
    fn stop_all<'a>(
        &'a self,
        gateway: &'a Arc<Gateway>,
        parent_id: &'a str,
        reason: &'a str,
    ) -> BoxFuture<'a, ()>;

    /// At gateway start, before re-adoption: settle delegations the previous gateway left half
    /// done.
    fn settle_at_start(&self, gateway: &Gateway);

    /// The session's sub-sessions as its SessionView lists them.
    fn summaries(
        &self,
        tx: &Tx<'_>,
        parent: &SessionRecord,
    ) -> Result<Vec<crate::view::DeepseekSubsession>, StoreError>;
}

/// Why a sub-session's kind refused one of its runner's calls ([`Subsessions::screen_call`]).
pub struct ScreenedOut {
    /// For the ledger (the `unapproved_call` event's reason).
    pub reason: String,
    /// The error the sub-session fails with (never naming what it guards).
    pub error: String,
}
