//! The ledger's events as one typed enum: each variant is one `kind` of the append-only `events`
//! table, its fields the row's `data`. Nothing secret goes in (no lease ids, tokens or broker
//! secrets); prompt and reply texts are recorded by hash and size, never as bodies (rows written
//! before this rule keep a released prompt's text), so retention can remove a session's content
//! while its ledger stays whole.

use common::tools::{Receipt, ToolStatus};
use serde::Serialize;
use serde_json::Value;

use super::LaunchError;
use super::{ActionState, StoreError, Tx};

/// One approved action, as the reply that approved it is recorded: its arguments by the SHA-256
/// of their canonical JSON and that JSON's size, never the arguments themselves (a Write's
/// content would stay in the append-only ledger forever). Events before this build held
/// `arguments`; the check reads both.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovedAction {
    pub action_id: String,
    pub name: String,
    pub arguments_sha256: String,
    pub arguments_bytes: u64,
}

impl ApprovedAction {
    /// The record of an action `name` with `arguments`.
    pub fn new(action_id: &str, name: &str, arguments: &Value) -> ApprovedAction {
        let (arguments_sha256, arguments_bytes) = arguments_digest(arguments);
        ApprovedAction {
            action_id: action_id.to_string(),
            name: name.to_string(),
            arguments_sha256,
            arguments_bytes,
        }
    }
}

/// SHA-256 of the canonical JSON of tool arguments, and that JSON's size.
pub fn arguments_digest(arguments: &Value) -> (String, u64) {
    (
        common::hash::canonical_sha256(arguments),
        common::hash::canonical_json(arguments).len() as u64,
    )
}

/// Every event the gateway records, by kind.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LedgerEvent {
    // ---- session lifecycle
    SessionStarted {
        profile: common::tools::CapabilityProfile,
        working_directory: String,
        prompt_id: String,
        prompt_sha256: String,
        /// Skills frozen at start: ids and hashes, never bodies.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        skills: Vec<super::SkillSnapshotEntry>,
    },
    /// The runtime of a new session could not be started.
    LaunchFailed(LaunchError),
    /// A new runner generation could not be started.
    GenerationLaunchFailed(LaunchError),
    RunnerGenerationStarted {
        generation: u32,
    },
    BrokerSpawned {},
    BrokerAdopted {},
    /// A prompt persisted for release: its hash and size (events before this build held its
    /// `text` instead; those rows keep it, the chain forbids changing them).
    PromptReleased {
        prompt_id: String,
        text_sha256: String,
        bytes: u64,
    },
    ReplyAccepted {
        turn_id: String,
        reply_id: String,
        text_sha256: String,
        actions: Vec<ApprovedAction>,
    },
    StopRequested {
        reason: String,
    },
    LeaseRotated {
        generation: u32,
        runtime_attached: bool,
    },
    LeaseExpired {},
    RuntimeLost {
        reason: String,
    },
    RuntimeReattached {},
    RuntimeDetached {},
    BrokerKilled {
        after_seconds: u64,
    },
    BrokerDidNotExit {},
    StopEnforced {
        detail: String,
    },
    WriteResolvedAfterCrash {
        action_id: String,
        path: String,
        resolution: ActionState,
        pre_sha256: Option<String>,
        post_sha256: String,
        /// The receipt stored with the action (chained here like every other receipt).
        #[serde(skip_serializing_if = "Option::is_none")]
        receipt: Option<Receipt>,
    },

    /// Retention removed an ended session's content (`crate::prune`): the rows, each with its
    /// covered columns' digests as they were (`common::ledger_chain::CONTENT_PRUNED`), the bytes
    /// of content, and how many idempotency keys were deleted or answers compacted.
    ContentPruned {
        rows: Vec<common::ledger_chain::RowRecord>,
        bytes: u64,
        idempotency_answers: u64,
    },

    // ---- what brokers report
    RunnerStarted {
        generation: u32,
        resumed: bool,
    },
    TurnPending {
        turn_id: String,
        sequence: u64,
    },
    TurnRequestRetried {
        turn_id: String,
    },
    TurnRequestIgnored {
        reason: String,
    },
    ReplyDelivered {
        turn_id: String,
    },
    PromptDelivered {
        prompt_id: String,
    },
    WritePrepared {
        action_id: String,
        path: String,
        pre_sha256: Option<String>,
        post_sha256: String,
    },
    /// A write's intent the gateway refused (no approved action of the session, or the
    /// sub-session ended): the broker was told no and writes nothing.
    WritePrepareRefused {
        action_id: String,
        path: String,
        reason: String,
    },
    ActionCommitted(ActionEnd),
    WriteNotApplied(ActionEnd),
    WriteIndeterminate(ActionEnd),
    UnapprovedCall {
        tool_use_id: String,
        name: String,
        reason: String,
    },
    SideRequestAnsweredLocally {
        purpose: String,
        fingerprint: String,
    },
    RunnerTurnEnded {
        subtype: String,
        is_error: bool,
    },
    RunnerExited {
        exit_code: Option<i32>,
        signal: Option<i32>,
    },
    BrokerExiting {
        reason: String,
    },
    UnknownBrokerEvent {},

    // ---- DeepSeek sub-sessions
    /// In the delegating session: the delegation is persisted (before the sub-session starts).
    SubsessionDelegated {
        subsession_id: String,
        action_id: String,
        task_sha256: String,
        route: String,
        /// The Claude tier its runner runs as (older records: the default, Sonnet).
        #[serde(default)]
        tier: common::tools::ClaudeTier,
        /// The DeepSeek model that tier maps to on the route.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deepseek_model: Option<String>,
    },
    /// In the delegating session: the sub-session's runtime started, or could not.
    SubsessionLaunched {
        subsession_id: String,
    },
    /// In both: how the sub-session ended.
    SubsessionEnded {
        subsession_id: String,
        status: crate::state::SubsessionStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// In the sub-session: its runner called a tool; the delegation approved it.
    DelegatedCallApproved {
        action_id: String,
        tool_use_id: String,
        name: String,
        /// By hash and size, as [`ApprovedAction`] (older rows: `arguments`).
        arguments_sha256: String,
        arguments_bytes: u64,
    },
    /// In the sub-session: a model request is about to leave for DeepSeek (recorded first, so
    /// one a stopped gateway never saw answered stays in the ledger); `resent`: the runner sent
    /// it again after such a stop.
    DeepseekRequestSent {
        request_sha256: String,
        resent: bool,
    },
    /// In the sub-session: one model request through the egress, answered or refused (never the
    /// key or bodies).
    DeepseekRequest {
        request_sha256: String,
        requested_model: String,
        sent_model: Option<String>,
        status: u16,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// How an action ended, with its receipt.
#[derive(Debug, Clone, Serialize)]
pub struct ActionEnd {
    pub action_id: String,
    pub status: ToolStatus,
    pub receipt: Receipt,
}

impl LedgerEvent {
    /// Whether the event changes what ChatGPT sees (then it bumps the session's revision and
    /// wakes waiters) or is recorded in the ledger only.
    pub fn changes_view(&self) -> bool {
        !matches!(
            self,
            Self::ReplyDelivered { .. }
                | Self::PromptDelivered { .. }
                | Self::ActionCommitted(_)
                | Self::WritePrepared { .. }
                | Self::WritePrepareRefused { .. }
                | Self::WriteNotApplied(_)
                | Self::UnapprovedCall { .. }
                | Self::SideRequestAnsweredLocally { .. }
                | Self::BrokerExiting { .. }
                | Self::TurnRequestRetried { .. }
                | Self::TurnRequestIgnored { .. }
                | Self::UnknownBrokerEvent {}
                | Self::DeepseekRequest { .. }
                | Self::DeepseekRequestSent { .. }
        )
    }

    /// The row's `kind` and `data`.
    pub fn to_row(&self) -> Result<(String, Value), StoreError> {
        let mut value = serde_json::to_value(self)?;
        let kind = value
            .as_object_mut()
            .and_then(|map| map.remove("kind"))
            .and_then(|kind| kind.as_str().map(str::to_string))
            .unwrap_or_default();
        Ok((kind, value))
    }
}

impl Tx<'_> {
    /// Append one typed event to the ledger.
    pub fn record(&self, session_id: &str, event: &LedgerEvent) -> Result<(), StoreError> {
        let (kind, data) = event.to_row()?;
        self.append_event(Some(session_id), &kind, &data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows keep the kinds and data shapes the ledger had before it was typed (gatewayctl and
    /// older state directories read them).
    #[test]
    fn rows_keep_their_kind_and_shape() {
        let (kind, data) = LedgerEvent::RunnerExited {
            exit_code: None,
            signal: Some(9),
        }
        .to_row()
        .unwrap();
        assert_eq!(kind, "runner_exited");
        assert_eq!(data, serde_json::json!({"exit_code": null, "signal": 9}));
        let (kind, data) = LedgerEvent::BrokerAdopted {}.to_row().unwrap();
        assert_eq!(
            (kind.as_str(), data),
            ("broker_adopted", serde_json::json!({}))
        );
        let error = LaunchError {
            code: crate::state::LaunchErrorCode::RunnerNotFound,
            message: "m".into(),
            at: "t".into(),
        };
        let (kind, data) = LedgerEvent::LaunchFailed(error).to_row().unwrap();
        assert_eq!(kind, "launch_failed");
        assert_eq!(
            data,
            serde_json::json!({"code": "runner_not_found", "message": "m", "at": "t"})
        );
        let (kind, _) = LedgerEvent::SideRequestAnsweredLocally {
            purpose: "p".into(),
            fingerprint: "f".into(),
        }
        .to_row()
        .unwrap();
        assert_eq!(kind, "side_request_answered_locally");
    }

    #[test]
    fn delivery_reports_do_not_change_the_view_but_turns_do() {
        assert!(
            !LedgerEvent::ReplyDelivered {
                turn_id: "t".into()
            }
            .changes_view()
        );
        assert!(
            LedgerEvent::TurnPending {
                turn_id: "t".into(),
                sequence: 1
            }
            .changes_view()
        );
        assert!(
            LedgerEvent::WriteIndeterminate(ActionEnd {
                action_id: "a".into(),
                status: ToolStatus::Error,
                receipt: Receipt::default(),
            })
            .changes_view()
        );
    }
}
