//! The SessionView (the answer shape of every successful tool call), the typed parts it is made
//! of, and the `outputSchema` advertising it beside the error result shape (`crate::error`). The
//! public schema only: the stored records have types of their own (`crate::state`), and
//! `session::view` builds these from them.

use common::schema::{Contract, schema_for};
use common::tools::{CapabilityProfile, Receipt, SubagentPolicy, ToolStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorResult;
use crate::state::{RunState, SessionStatus};

/// Largest reply (text plus tool calls) ChatGPT may send for one turn.
pub const REPLY_BUDGET_BYTES: u64 = 786_432;

/// State of a session as ChatGPT sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionView {
    pub native_session_id: String,
    pub session_label: Option<String>,
    pub status: SessionStatus,
    /// Grows on every change.
    pub revision: u64,
    /// This answer replays an earlier identical request.
    pub replay: bool,
    #[schemars(extend("const" = "chatgpt-main"))]
    pub route: String,
    #[schemars(extend("const" = "none"))]
    pub fallback: String,
    /// Pass it to every later call.
    pub lease_id: Option<String>,
    pub lease_expires_at: Option<String>,
    /// Only in start's answer; keep it for native_session_recover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_token: Option<String>,
    pub capability_profile: CapabilityProfile,
    pub subagent_policy: SubagentPolicy,
    pub source_directory: String,
    /// Where commands run and writes land.
    pub working_directory: String,
    pub workspace: Workspace,
    pub claude_session_id: String,
    pub current_run: Option<CurrentRunView>,
    /// The gateway is connected to the session's runtime now.
    pub runtime_attached: bool,
    /// Call native_session_recover before anything else (unless terminal is set).
    pub recovery_required: bool,
    /// The turn to answer now with native_session_reply_and_wait.
    pub pending_turn: Option<PendingTurn>,
    pub last_result: Option<LastResultView>,
    pub launch_error: Option<LaunchError>,
    pub stop_request: Option<StopRequest>,
    /// Why the session ended.
    pub terminal: Option<Terminal>,
    pub network_boundary: NetworkBoundary,
    pub skill_snapshot: Vec<SkillSnapshotEntry>,
    /// `"disabled"`, or for a `deepseek_explicit` session the fixed route in words (which Claude
    /// tier goes to which DeepSeek model, the endpoint, no fallback).
    pub deepseek_route: String,
    pub deepseek_subsessions: Vec<DeepseekSubsession>,
    pub active_deepseek_subsession_id: Option<String>,
    /// Set when a new runner generation could not resume the conversation (no transcript was
    /// saved) and started a new one: the runner remembers nothing from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_restarted: Option<ConversationRestart>,
    /// Set when retention removed the ended session's content (turns, replies, tool outcomes,
    /// its last result's text): what is left is its summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_pruned: Option<ContentPruned>,
}

/// Retention removed an ended session's content (`gatewayctl prune`, `CLAUDE_TOOLS_RETENTION_DAYS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContentPruned {
    pub at: String,
    pub message: String,
}

/// What a pruned session's view says of it.
pub const CONTENT_PRUNED_NOTICE: &str = "This ended session's content (prompts, turns, replies, \
     tool arguments and outcomes, its last result's text) was removed by the owner's retention; \
     its status, terminal reason and ledger summary remain. Start a new session to go on.";

/// A runner generation that started a new Claude Code conversation instead of resuming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConversationRestart {
    pub generation: u32,
    pub at: String,
    pub message: String,
}

/// What the restarted conversation means for ChatGPT (the SessionView and the next turn).
pub const CONVERSATION_RESTART_NOTICE: &str = "The runner's earlier conversation could not be resumed (it had saved no transcript), so this \
     turn starts a new Claude Code conversation: the runner remembers nothing said before it. \
     Files written and actions taken before are unchanged (see the ledger). Restate what it needs \
     to know in your reply.";

/// Where the session works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workspace {
    pub kind: WorkspaceKind,
    /// The user's directory.
    pub root: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
}

/// The kind of a session's workspace, from its capability profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceKind {
    ReadOnly,
    Direct,
    Worktree,
}

/// The runner generation attached to the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CurrentRunView {
    pub generation: u32,
    pub state: RunState,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// The turn ChatGPT must answer now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingTurn {
    pub turn_id: String,
    pub sequence: u64,
    pub kind: TurnKind,
    /// The user's prompt (kind prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Results of your previous tool_calls, by call_index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_results: Option<Vec<ToolResultView>>,
    /// Skills frozen at start (kind prompt): follow their instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skill_contexts: Vec<SkillContextView>,
    /// Logical tools you may call; their arguments are in reply_and_wait's tool_calls schema.
    pub allowed_tools: Vec<String>,
    /// Most bytes of text plus tool_calls in your reply.
    pub reply_budget_bytes: u64,
    /// Read before answering: something changed that the turn itself does not show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// What a pending turn asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    // A user prompt (`prompt` is set).
    Prompt,
    // The results of your previous tool_calls (`tool_results` is set).
    ToolResults,
}

/// The result of one tool call of the previous reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResultView {
    pub call_index: u32,
    pub name: String,
    pub status: ToolStatus,
    /// At most 64 KiB.
    pub output: String,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
}

/// The last completed turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LastResultView {
    pub turn_id: String,
    pub text: String,
    pub at: String,
}

/// Why the session's runtime could not be started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LaunchError {
    pub code: LaunchErrorCode,
    pub message: String,
    pub at: String,
}

/// Stable codes of a [`LaunchError`] (`runner_not_found`: no executable Claude Code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaunchErrorCode {
    // No executable Claude Code binary.
    RunnerNotFound,
    // The broker started but Claude Code did not.
    RunnerLaunchFailed,
    BrokerSpawnFailed,
    BrokerUnreachable,
    // The session ended while its runtime was starting.
    SessionTerminal,
    Internal,
}

/// Who asked the session to stop, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StopRequest {
    pub reason: String,
    pub at: String,
}

/// How and when a session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Terminal {
    pub reason: TerminalReason,
    /// What happened, when more than the reason.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "message")]
    pub detail: Option<String>,
    /// The runner's exit code, when it was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the runner, when it was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The write action that ended the session (write_indeterminate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// The file of that write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub at: String,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TerminalReason {
    // Its runtime could not be started (see launch_error).
    LaunchError,
    // It was stopped (see stop_request).
    Stopped,
    // Its lease ran out.
    LeaseExpired,
    // A write ended in an unknown state; nothing more is written.
    WriteIndeterminate,
}

/// What confines the runner and its commands on this host; degraded states say so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkBoundary {
    /// The runner's network.
    pub runner: String,
    /// Where the runner may write.
    pub runner_writes: String,
    /// RunCommand's network.
    pub commands: String,
    /// The runner's confinement layers.
    pub enforced_by: String,
    /// RunCommand's confinement layers.
    pub commands_enforced_by: String,
    /// Some confinement is missing on this host.
    pub degraded: bool,
}

/// A skill frozen into the session at start: never its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillSnapshotEntry {
    pub skill_id: String,
    pub content_sha256: String,
}

/// A skill frozen at start, with its instructions (only in `kind: prompt` pending turns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillContextView {
    pub skill_id: String,
    pub content_sha256: String,
    pub instructions: String,
}

/// A DeepSeek sub-session of the session, summarised (`deepseek_subagent_get` has the rest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeepseekSubsession {
    pub subsession_id: String,
    pub status: crate::state::SubsessionStatus,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Actions it took (its tool calls, each in the ledger with its receipt).
    pub action_count: usize,
    /// Of which writes that changed a file.
    pub write_count: usize,
}

/// The `outputSchema` advertised for every tool: a SessionView, or an [`ErrorResult`] when the
/// result has `isError: true`. Strict clients (the TypeScript SDK) validate `structuredContent`
/// of error results too, so the error shape must be part of it.
///
/// Every tool repeats it, so it carries no field descriptions: what a model must know of the
/// SessionView (keep lease_id and recovery_token, answer pending_turn, recover when
/// recovery_required) is said once, in the tool descriptions.
pub fn output_schema() -> Value {
    let mut view = schema_for::<SessionView>(Contract::Output);
    let mut error = schema_for::<ErrorResult>(Contract::Output);
    strip_output_noise(&mut view);
    strip_output_noise(&mut error);
    serde_json::json!({
        "type": "object",
        "description": "The SessionView; when isError, {error: {code, message}}.",
        "anyOf": [view, error],
    })
}

/// Undo `admit_null` for a field that is omitted rather than null.
fn refuse_null(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

/// Drop descriptions and `minimum: 0` (a sender's bound says nothing to a reader) from an
/// output schema.
fn strip_output_noise(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    map.remove("description");
    if map.get("minimum") == Some(&Value::from(0)) {
        map.remove("minimum");
    }
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for (key, value) in props.iter_mut() {
            strip_output_noise(value);
            // A field that is not required is left out when empty, never sent as null.
            if !required.contains(key) {
                refuse_null(value);
            }
        }
    }
    if let Some(items) = map.get_mut("items") {
        strip_output_noise(items);
    }
    if let Some(Value::Array(alts)) = map.get_mut("anyOf") {
        for alt in alts {
            strip_output_noise(alt);
        }
    }
}

#[cfg(test)]
mod tests;
