//! The SessionView: the one answer shape of every successful tool call, with its JSON Schema
//! (advertised as each tool's `outputSchema`).

use common::tools::{CapabilityProfile, Receipt, SubagentPolicy, ToolStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest reply (text plus tool calls) ChatGPT may send for one turn.
pub const REPLY_BUDGET_BYTES: u64 = 786_432;

/// State of a session as ChatGPT sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionView {
    pub native_session_id: String,
    pub session_label: Option<String>,
    /// `starting`, `waiting_for_gpt`, `running`, `idle`, `stopping`, `stopped`, `failed`, `expired`.
    pub status: String,
    /// Increases on every state change of the session.
    pub revision: u64,
    /// True when this answer replays an earlier identical request.
    pub replay: bool,
    /// Always `chatgpt-main`.
    pub route: String,
    /// Always `none`.
    pub fallback: String,
    pub lease_id: Option<String>,
    pub lease_expires_at: Option<String>,
    /// Only in the answer to `native_session_start` and its replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_token: Option<String>,
    pub capability_profile: CapabilityProfile,
    pub subagent_policy: SubagentPolicy,
    pub source_directory: String,
    pub working_directory: String,
    pub workspace: Workspace,
    pub claude_session_id: String,
    pub current_run: Option<CurrentRunView>,
    pub runtime_attached: bool,
    pub recovery_required: bool,
    pub pending_turn: Option<PendingTurn>,
    pub last_result: Option<LastResultView>,
    pub launch_error: Option<Value>,
    pub stop_request: Option<Value>,
    pub terminal: Option<Value>,
    pub network_boundary: Value,
    pub skill_snapshot: Vec<Value>,
    /// `disabled` unless the session uses `deepseek_explicit`.
    pub deepseek_route: String,
    pub deepseek_subsessions: Vec<Value>,
    pub active_deepseek_subsession_id: Option<String>,
}

/// Where the session works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workspace {
    /// `read_only`, `direct` or `worktree`.
    pub kind: String,
    pub root: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
}

/// The runner generation attached to the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CurrentRunView {
    pub generation: u32,
    /// `alive`, `exited` or `lost`.
    pub state: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// The turn ChatGPT must answer now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingTurn {
    pub turn_id: String,
    pub sequence: u64,
    /// `prompt` or `tool_results`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_results: Option<Vec<ToolResultView>>,
    pub allowed_tools: Vec<String>,
    pub reply_budget_bytes: u64,
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

/// The `outputSchema` advertised for every tool.
pub fn session_view_schema() -> Value {
    let mut value = serde_json::to_value(schemars::schema_for!(SessionView)).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("$schema");
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::tools::Receipt;

    /// The SessionView is what ChatGPT reads after every call.
    #[test]
    fn session_view_snapshot() {
        let view = SessionView {
            native_session_id: "ns_0123".into(),
            session_label: Some("demo".into()),
            status: "waiting_for_gpt".into(),
            revision: 7,
            replay: false,
            route: "chatgpt-main".into(),
            fallback: "none".into(),
            lease_id: Some("lease_abc".into()),
            lease_expires_at: Some("2026-11-29T19:00:00Z".into()),
            recovery_token: None,
            capability_profile: CapabilityProfile::ReadOnly,
            subagent_policy: SubagentPolicy::None,
            source_directory: "/home/me/project".into(),
            working_directory: "/home/me/project".into(),
            workspace: Workspace {
                kind: "read_only".into(),
                root: "/home/me/project".into(),
                worktree_path: None,
                branch: None,
                base_commit: None,
            },
            claude_session_id: "6f1c0c1e-8d7e-4a53-9d44-0f2f4c1b2a10".into(),
            current_run: Some(CurrentRunView {
                generation: 1,
                state: "alive".into(),
                started_at: "2026-11-29T18:30:00Z".into(),
                exit_code: None,
            }),
            runtime_attached: true,
            recovery_required: false,
            pending_turn: Some(PendingTurn {
                turn_id: "turn_2".into(),
                sequence: 2,
                kind: "tool_results".into(),
                prompt: None,
                tool_results: Some(vec![ToolResultView {
                    call_index: 0,
                    name: "Read".into(),
                    status: ToolStatus::Ok,
                    output: "     1\thello".into(),
                    truncated: false,
                    receipt: Some(Receipt {
                        action_id: "act_1".into(),
                        path: Some("/home/me/project/a.txt".into()),
                        sha256: Some(
                            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
                                .into(),
                        ),
                        duration_ms: 1,
                        ..Receipt::default()
                    }),
                }]),
                allowed_tools: vec!["Read".into(), "FindFiles".into(), "SearchText".into()],
                reply_budget_bytes: REPLY_BUDGET_BYTES,
            }),
            last_result: None,
            launch_error: None,
            stop_request: None,
            terminal: None,
            network_boundary: serde_json::json!({"runner": "unconfined", "degraded": true}),
            skill_snapshot: Vec::new(),
            deepseek_route: "disabled".into(),
            deepseek_subsessions: Vec::new(),
            active_deepseek_subsession_id: None,
        };
        insta::assert_json_snapshot!(view);
    }
}
