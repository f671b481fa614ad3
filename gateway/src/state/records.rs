//! Rows of the state database as Rust values. Each is stored as JSON in a `data` column beside the
//! few columns queries need, so fields can be added without a migration (`#[serde(default)]`).
//! Their types are the state's own (`parts`), not the SessionView's: see `session::view`.

use common::protocol::RunnerToolResult;
use common::tools::{ActionOutcome, CapabilityProfile, SubagentPolicy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::parts::{
    ContentPruned, ConversationRestart, LaunchError, NetworkBoundary, SkillSnapshotEntry,
    StopRequest, Terminal, Workspace,
};

/// Lifecycle of a session, as shown in the SessionView.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SessionStatus {
    Starting,
    WaitingForGpt,
    Running,
    Idle,
    Stopping,
    Stopped,
    Failed,
    Expired,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// No further work can happen in this session.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Stopped | Self::Failed | Self::Expired)
    }
}

/// Where a session's runner generation stands, as far as this gateway knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    // Its broker reported it running and the link to that broker is (or was last) up.
    Alive,
    // Its broker reported its exit.
    Exited,
    // The gateway lost sight of it (link or broker gone); a re-attach may find it alive.
    Lost,
}

/// The runner generation currently or last attached to a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentRun {
    pub generation: u32,
    pub state: RunState,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// The last completed turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastResult {
    pub turn_id: String,
    pub text: String,
    pub at: String,
}

/// Private facts about a session's broker. Never public.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRecord {
    pub pid: i32,
    /// Process start time as the kernel reports it, to tell a reused PID apart.
    pub start_time: u64,
    pub boot_id: String,
    pub socket_path: String,
    pub runtime_dir: String,
    pub secret: String,
    /// The runner generation the broker was started for (its secret and its handshake are bound
    /// to it and to the session id); 0 in records of gateways before session-bound brokers.
    #[serde(default)]
    pub generation: u32,
    /// Next broker event sequence number the gateway expects.
    pub next_event_seq: u64,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub label: Option<String>,
    pub status: SessionStatus,
    pub revision: u64,
    pub profile: CapabilityProfile,
    pub subagent_policy: SubagentPolicy,
    pub source_directory: String,
    pub working_directory: String,
    pub workspace: Workspace,
    pub claude_session_id: String,
    pub created_at_ms: i64,
    pub lease_generation: u32,
    pub lease_expires_at_ms: i64,
    pub current_run: Option<CurrentRun>,
    pub pending_turn_id: Option<String>,
    pub last_result: Option<LastResult>,
    pub launch_error: Option<LaunchError>,
    pub stop_request: Option<StopRequest>,
    pub terminal: Option<Terminal>,
    pub recovery_required: bool,
    pub network_boundary: NetworkBoundary,
    pub skill_snapshot: Vec<SkillSnapshotEntry>,
    pub broker: Option<BrokerRecord>,
    /// Sequence number of the last turn created.
    pub turn_sequence: u64,
    /// The most recent turn created; a tool-results turn reports the actions of this one.
    #[serde(default)]
    pub last_reply_turn_id: Option<String>,
    /// A text-only reply released to the runner; it becomes `last_result` when the runner ends its
    /// turn.
    #[serde(default)]
    pub closing_reply: Option<LastResult>,
    /// A prompt persisted and released but not yet confirmed delivered; sent again after the
    /// broker link is re-established.
    #[serde(default)]
    pub undelivered_prompt: Option<common::protocol::PromptRelease>,
    /// The turn whose persisted reply is not yet confirmed delivered to the runner.
    #[serde(default)]
    pub undelivered_reply_turn: Option<String>,
    /// A delegating session: its DeepSeek sub-sessions, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsessions: Vec<String>,
    /// The runner generation that had to start a new conversation because the earlier one
    /// could not be resumed (no transcript), and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_restart: Option<ConversationRestart>,
    /// That restart is not yet told in a pending turn: the next turn created carries the notice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restart_notice_pending: bool,
    /// The identity of the directories the session works in, recorded at start: a directory
    /// replaced at the same path is never recovered into or written (older records: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_identity: Option<WorkspaceIdentity>,
    /// A DeepSeek sub-session (a record of its own, with its own broker, actions and ledger):
    /// what it was delegated, and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Delegation>,
    /// Retention removed the ended session's content (`crate::prune`): what remains is the
    /// summary (older records: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_pruned: Option<ContentPruned>,
}

/// Which directories a session works in, by identity (device, inode), not by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceIdentity {
    /// The working directory (the write root, the managed worktree for `worktree_write`).
    pub working_directory: common::protocol::DirIdentity,
    /// A managed worktree's Git directory (`<source>/.git/worktrees/<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dir: Option<common::protocol::DirIdentity>,
}

impl WorkspaceIdentity {
    /// The identity of `working_directory` now (and of its Git directory when `worktree`); None
    /// when the directory is missing.
    pub fn measure(working_directory: &std::path::Path, worktree: bool) -> Option<Self> {
        Some(WorkspaceIdentity {
            working_directory: common::protocol::DirIdentity::of(working_directory)?,
            git_dir: if worktree {
                worktree_git_dir(working_directory)
                    .and_then(|dir| common::protocol::DirIdentity::of(&dir))
            } else {
                None
            },
        })
    }
}

/// The Git directory a linked worktree's `.git` file points at (`gitdir: <path>`).
fn worktree_git_dir(worktree: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(worktree.join(".git"))
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    let path = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(std::path::PathBuf::from(path))
}

/// Where a DeepSeek sub-session stands, as `deepseek_subagent_get` shows it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SubsessionStatus {
    Starting,
    Running,
    Succeeded,
    Failed,
    Stopped,
    Lost,
}

impl SubsessionStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How a sub-session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsessionEnd {
    pub status: SubsessionStatus,
    pub at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A sub-session's delegation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegation {
    pub parent_session_id: String,
    /// The parent's `deepseek_subagent_start` action (its arguments hold the task).
    pub start_action_id: String,
    pub task_sha256: String,
    /// The Claude model its runner requests; the route maps its family.
    pub runner_model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<SubsessionEnd>,
    /// SHA-256 of the model requests sent to DeepSeek and not yet answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<String>,
}

impl SessionRecord {
    /// A sub-session's status: how it ended, else where its runtime is.
    pub fn subsession_status(&self) -> SubsessionStatus {
        if let Some(end) = self.delegation.as_ref().and_then(|d| d.end.as_ref()) {
            return end.status;
        }
        match self.status {
            SessionStatus::Starting => SubsessionStatus::Starting,
            // Stopped, its end not recorded yet.
            SessionStatus::Stopping | SessionStatus::Stopped if self.stop_request.is_some() => {
                SubsessionStatus::Stopped
            }
            // Ended without an outcome recorded: its runtime went away.
            status if status.is_terminal() => SubsessionStatus::Lost,
            _ => SubsessionStatus::Running,
        }
    }

    /// A sub-session that has not ended.
    pub fn subsession_active(&self) -> bool {
        matches!(
            self.subsession_status(),
            SubsessionStatus::Starting | SubsessionStatus::Running
        )
    }
}

/// Where a turn stands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum TurnStatus {
    Pending,
    Answered,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a turn asks ChatGPT to answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TurnBody {
    Prompt {
        text: String,
        /// An earlier turn whose approved calls never had their results reported (the runner or
        /// its broker stopped meanwhile): this turn shows them, as the ledger recorded them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interrupted_turn_id: Option<String>,
    },
    ToolResults {
        /// The turn whose reply asked for these calls.
        previous_turn_id: String,
        runner_results: Vec<RunnerToolResult>,
    },
}

/// One model turn of the runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub turn_id: String,
    pub session_id: String,
    pub sequence: u64,
    pub fingerprint: String,
    pub status: TurnStatus,
    pub created_at_ms: i64,
    pub body: TurnBody,
    #[serde(default)]
    pub reply_id: Option<String>,
    /// Something ChatGPT must know before answering this turn (the conversation restarted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// A reply ChatGPT gave to a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyRecord {
    pub session_id: String,
    pub reply_id: String,
    pub turn_id: String,
    pub request_hash: String,
    pub text: String,
    pub calls: Vec<common::protocol::ApprovedCall>,
    pub created_at_ms: i64,
}

/// Where an action stands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ActionState {
    /// ChatGPT approved it; the runner may call it once.
    Approved,
    /// A write's intent is recorded (`prepared`); it has not been reported finished.
    Prepared,
    /// The executor ran it and the outcome is recorded (for a write: the new content is on
    /// disk, durably).
    Committed,
    /// A write that did not change the file (refused, conflicting, failed, or prepared and
    /// found unchanged after a crash). Never retried on its own.
    NotApplied,
    /// A prepared write whose file matches neither its old nor its new content: the session
    /// stops with `recovery_required` and nothing is written again.
    Indeterminate,
}

impl ActionState {
    pub const ALL: [ActionState; 5] = [
        Self::Approved,
        Self::Prepared,
        Self::Committed,
        Self::NotApplied,
        Self::Indeterminate,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn from_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }
}

/// One approved action and, once it ran, its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    pub action_id: String,
    pub session_id: String,
    pub turn_id: String,
    pub call_index: u32,
    pub name: String,
    pub arguments: Value,
    pub state: ActionState,
    pub outcome: Option<ActionOutcome>,
    /// A write's recorded intent, once it reached `prepared`.
    pub prepared: Option<common::protocol::PreparedWrite>,
}

impl ActionRecord {
    /// An action approved (by ChatGPT's reply, or by a delegation) and not yet run.
    pub fn approved(
        call: &common::protocol::ApprovedCall,
        session_id: &str,
        turn_id: &str,
    ) -> ActionRecord {
        ActionRecord {
            action_id: call.action_id.clone(),
            session_id: session_id.to_string(),
            turn_id: turn_id.to_string(),
            call_index: call.call_index,
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            state: ActionState::Approved,
            outcome: None,
            prepared: None,
        }
    }
}

/// What an idempotency key answers. Stored as JSON in the `idempotency` table: `{"in_progress":
/// true, "lease_generation": g}` while the claimed request is carried out, then the SessionView it
/// answered (without lease id, recovery token or skill bodies, which are derived again on replay)
/// with `lease_generation` beside its fields; `{"pruned": true, "lease_generation": g}` once
/// retention removed it; `{"dropped": true, "lease_generation": g}` once newer answers of the
/// same session and operation pushed it out (a session keeps its last
/// [`crate::session::ANSWERS_KEPT`] of each, red team 29 B1). Rows written before `lease_generation` was stored read as generation 1.
///
/// The one stored value that is the public schema by design: a replay must answer the bytes the
/// request was answered with, so `Done` holds the SessionView itself: a change to the view
/// changes what later answers store, and must leave the answers stored before it readable.
#[derive(Debug, Clone, PartialEq)]
pub enum IdempotentAnswer {
    /// Claimed in the transaction that carries the request out; its answer is not recorded yet.
    InProgress { lease_generation: u32 },
    /// The answer the request gave, under the lease generation it was given with.
    Done {
        lease_generation: u32,
        view: Box<crate::view::SessionView>,
    },
    /// Retention removed the recorded answer of an ended session (`{"pruned": true, …}`): a
    /// replay answers the session as it is now (its summary, `content_pruned`), never a rebuilt
    /// copy of what was removed.
    Pruned { lease_generation: u32 },
    /// Pushed out by newer answers of the same session and operation, or by `gatewayctl prune`
    /// on a live session (`{"dropped": true, …}`): a replay is refused (`idempotency_conflict`,
    /// saying so), since the session as it is now is no answer to an old recover or stop.
    Dropped { lease_generation: u32 },
}

impl IdempotentAnswer {
    const GENERATION: &'static str = "lease_generation";

    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        Ok(match self {
            IdempotentAnswer::InProgress { lease_generation } => {
                serde_json::json!({"in_progress": true, Self::GENERATION: lease_generation})
            }
            IdempotentAnswer::Pruned { lease_generation } => {
                serde_json::json!({"pruned": true, Self::GENERATION: lease_generation})
            }
            IdempotentAnswer::Dropped { lease_generation } => {
                serde_json::json!({"dropped": true, Self::GENERATION: lease_generation})
            }
            IdempotentAnswer::Done {
                lease_generation,
                view,
            } => {
                let mut value = serde_json::to_value(view)?;
                if let Some(map) = value.as_object_mut() {
                    map.insert(Self::GENERATION.into(), (*lease_generation).into());
                }
                value
            }
        })
    }

    pub fn from_json(mut value: Value) -> Result<Self, serde_json::Error> {
        let lease_generation = value
            .get(Self::GENERATION)
            .and_then(Value::as_u64)
            .and_then(|g| u32::try_from(g).ok())
            .unwrap_or(1);
        if value.get("in_progress").is_some() {
            return Ok(IdempotentAnswer::InProgress { lease_generation });
        }
        if value.get("pruned").is_some() {
            return Ok(IdempotentAnswer::Pruned { lease_generation });
        }
        if value.get("dropped").is_some() {
            return Ok(IdempotentAnswer::Dropped { lease_generation });
        }
        if let Some(map) = value.as_object_mut() {
            map.remove(Self::GENERATION);
        }
        Ok(IdempotentAnswer::Done {
            lease_generation,
            view: Box::new(serde_json::from_value(value)?),
        })
    }
}

/// A session id without its `ns_` prefix: the part names of its private files and branches use.
pub fn id_suffix(session_id: &str) -> &str {
    session_id.strip_prefix("ns_").unwrap_or(session_id)
}

#[cfg(test)]
mod tests;
