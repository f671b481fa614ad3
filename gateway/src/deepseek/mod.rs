//! DeepSeek explicit sub-sessions (DESIGN §7): one delegated task, run by a second confined
//! Claude Code whose model is DeepSeek, in the delegating session's worktree, never the main
//! model. A sub-session is a session record of its own (`ds_…`, with `delegation` set): its own
//! broker, runner, private HOME and transcript, actions, receipts and ledger, re-adopted after a
//! restart and settled like any session's. Here: the checks of a reply that controls one
//! (barrier, write lock, ownership), its record and the delegation persisted with the reply, and
//! the summaries; `lifecycle`: what the gateway carries out (start, get, stop), its end and the
//! verification against its receipts; `route` and `egress`: the fixed way out;
//! `answer`: what an answer must be before it reaches the runner. [`Deepseek`] plugs all this into
//! the session core's hooks (`session::Subsessions`), screening delegated calls on the way.

pub mod answer;
pub mod egress;
mod lifecycle;
pub mod route;
#[cfg(test)]
mod tests;

use common::hash::sha256_hex;
use common::protocol::ApprovedCall;
use common::time::{now_unix_ms, rfc3339_ms};
use common::tools::{ClaudeTier, GatewayToolArgs, LogicalTool, ParsedArgs, SubagentPolicy};
use serde_json::Value;

use crate::error::{ErrorCode, ToolError};
use crate::session::{Gateway, ScreenedOut, Subsessions, ToolResult};
use crate::state::{
    ActionRecord, ActionState, Delegation, SessionRecord, SessionStatus, StoreError, Tx,
};

/// The sub-session runner's system prompt: its task comes as the user prompt.
const SUBSESSION_PROMPT: &str = "You are a DeepSeek sub-session of Native Gateway. ChatGPT \
delegated one task to you; it is the user message. Work only in the current working directory (a \
git worktree) with the mcp__gw__ tools you are given: they are audited, and writes are allowed \
only inside the worktree. When the task is done, or cannot be done, end with a short report of \
what you changed and what is left.";

/// DeepSeek sub-sessions as the session core hosts them: registered where the gateway is built
/// (`crate::open`, the tests' harness).
pub struct Deepseek {
    /// The egress's HTTP client (one connection pool for all sub-sessions); none when it could
    /// not start (then the egress refuses every request).
    egress_client: Option<reqwest::Client>,
}

impl Deepseek {
    pub fn new() -> Deepseek {
        Deepseek {
            egress_client: egress::client(),
        }
    }
}

impl Default for Deepseek {
    fn default() -> Self {
        Self::new()
    }
}

impl Subsessions for Deepseek {
    fn system_prompt(&self) -> &str {
        SUBSESSION_PROMPT
    }

    /// A call whose arguments hold the DeepSeek key (in any form `answer` recognises) is refused.
    fn screen_call(
        &self,
        gateway: &Gateway,
        name: &str,
        arguments: &Value,
    ) -> Result<(), ScreenedOut> {
        let Some(key) = &gateway.config.deepseek.api_key else {
            return Ok(());
        };
        let mut decoded = String::new();
        answer::collect_strings(arguments, &mut decoded);
        if !answer::holds_key(&decoded, key.expose()) {
            return Ok(());
        }
        Err(ScreenedOut {
            reason: "its arguments hold the DeepSeek API key".into(),
            error: format!(
                "a delegated call ({name}) was refused: its arguments hold the DeepSeek API key \
                 (in some form); it did not run"
            ),
        })
    }

    fn screen_outcome(
        &self,
        gateway: &Gateway,
        session: &SessionRecord,
        outcome: &mut common::tools::ActionOutcome,
    ) {
        gateway.withhold_deepseek_key(session, outcome);
    }

    fn screen_write(&self, gateway: &Gateway, action: &ActionRecord) -> Option<String> {
        gateway.key_leak_in_write(action)
    }

    fn turn_ended(
        &self,
        gateway: &std::sync::Arc<Gateway>,
        child_id: &str,
        result: Option<String>,
        is_error: bool,
    ) {
        gateway.on_subsession_turn_ended(child_id, result, is_error);
    }

    fn fail(&self, gateway: &std::sync::Arc<Gateway>, child_id: &str, error: String) {
        gateway.fail_subsession(child_id, error);
    }

    fn runtime_lost(&self, gateway: &Gateway, child_id: &str, why: &str) {
        gateway.on_subsession_lost(child_id, why);
    }

    fn model_request<'a>(
        &'a self,
        gateway: &'a Gateway,
        session_id: &'a str,
        request_id: u64,
        body: &'a str,
    ) -> futures::future::BoxFuture<'a, common::protocol::EgressResponse> {
        Box::pin(gateway.egress(self.egress_client.as_ref(), session_id, request_id, body))
    }

    fn stop_all<'a>(
        &'a self,
        gateway: &'a std::sync::Arc<Gateway>,
        parent_id: &'a str,
        reason: &'a str,
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(gateway.stop_subsessions(parent_id, reason))
    }

    fn settle_at_start(&self, gateway: &Gateway) {
        gateway.settle_unlaunched_subsessions();
    }

    fn summaries(
        &self,
        tx: &Tx<'_>,
        parent: &SessionRecord,
    ) -> Result<Vec<crate::view::DeepseekSubsession>, StoreError> {
        summaries(tx, parent)
    }
}

/// Calls that change files or run commands: refused while a sub-session runs (the write lock).
fn locked_while_delegated(tool: LogicalTool) -> bool {
    tool.writes()
        || matches!(
            tool,
            LogicalTool::RunCommand | LogicalTool::DeepseekSubagentStart
        )
}

/// A call's arguments as the gateway's own tool it is, if it is one (they were validated when its
/// reply was accepted).
fn gateway_args(call: &ApprovedCall) -> Option<GatewayToolArgs> {
    match LogicalTool::from_name(&call.name)?.parse_args(&call.arguments) {
        Ok(ParsedArgs::Gateway(args)) => Some(args),
        _ => None,
    }
}

fn subsession_id_of(call: &ApprovedCall) -> &str {
    call.arguments
        .get("subsession_id")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The session's sub-session that has not ended, if any.
pub(crate) fn active_subsession(
    tx: &Tx<'_>,
    parent: &SessionRecord,
) -> Result<Option<SessionRecord>, StoreError> {
    for id in parent.subsessions.iter().rev() {
        if let Some(child) = tx.session(id)?
            && child.subsession_active()
        {
            return Ok(Some(child));
        }
    }
    Ok(None)
}

/// The rules a reply's approved calls must keep, checked before anything is persisted: a start
/// is the only call of its reply (the barrier); while a sub-session runs, nothing that writes
/// or runs commands and no second start (the write lock); get and stop name a sub-session of
/// this session.
pub(crate) fn check_reply(
    tx: &Tx<'_>,
    parent: &SessionRecord,
    calls: &[ApprovedCall],
    max_live_sessions: usize,
) -> ToolResult<()> {
    let tools: Vec<LogicalTool> = calls
        .iter()
        .filter_map(|c| LogicalTool::from_name(&c.name))
        .collect();
    if tools.contains(&LogicalTool::DeepseekSubagentStart) && calls.len() > 1 {
        return Err(ToolError::invalid(
            "deepseek_subagent_start must be the only call in its reply (it is a barrier: the \
             sub-session starts from the worktree as it is); send it alone. Nothing was approved.",
        ));
    }
    for call in calls {
        let tool = LogicalTool::from_name(&call.name);
        if matches!(
            tool,
            Some(LogicalTool::DeepseekSubagentGet | LogicalTool::DeepseekSubagentStop)
        ) {
            let id = subsession_id_of(call);
            if !parent.subsessions.iter().any(|own| own == id) {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!(
                        "tool_calls[{}]: {id:?} is not a sub-session of this session; use the \
                         subsession_id deepseek_subagent_start returned. Nothing was approved.",
                        call.call_index
                    ),
                ));
            }
        }
    }
    if let Some(active) = active_subsession(tx, parent)?
        && let Some(call) = calls
            .iter()
            .find(|c| LogicalTool::from_name(&c.name).is_some_and(locked_while_delegated))
    {
        return Err(ToolError::new(
            ErrorCode::Busy,
            format!(
                "tool_calls[{}] ({}): the DeepSeek sub-session {} is {} and holds the worktree: \
                 Edit, Write, NotebookEdit, RunCommand and another deepseek_subagent_start wait \
                 until it ends. Read, FindFiles, SearchText and deepseek_subagent_get/_stop stay \
                 allowed. Nothing was approved.",
                call.call_index,
                call.name,
                active.id,
                active.subsession_status().as_str()
            ),
        ));
    }
    // A sub-session is a runner like a session's: it counts against the same limit.
    if tools.contains(&LogicalTool::DeepseekSubagentStart)
        && tx.live_session_count()? >= max_live_sessions
    {
        return Err(ToolError::new(
            ErrorCode::Busy,
            format!(
                "the gateway already runs its limit of {max_live_sessions} live sessions and \
                 sub-sessions (CLAUDE_TOOLS_MAX_LIVE_SESSIONS); stop one first. Nothing was \
                 approved."
            ),
        ));
    }
    Ok(())
}

/// The session's sub-sessions as the SessionView lists them.
fn summaries(
    tx: &Tx<'_>,
    parent: &SessionRecord,
) -> Result<Vec<crate::view::DeepseekSubsession>, StoreError> {
    let mut out = Vec::new();
    for id in &parent.subsessions {
        let Some(child) = tx.session(id)? else {
            continue;
        };
        let actions = tx.actions_for_turn(id)?;
        let end = child.delegation.as_ref().and_then(|d| d.end.as_ref());
        out.push(crate::view::DeepseekSubsession {
            subsession_id: child.id.clone(),
            status: child.subsession_status(),
            started_at: rfc3339_ms(child.created_at_ms),
            ended_at: end.map(|e| rfc3339_ms(e.at_ms)),
            action_count: actions.len(),
            write_count: actions
                .iter()
                .filter(|a| {
                    a.state == ActionState::Committed
                        && LogicalTool::from_name(&a.name).is_some_and(LogicalTool::writes)
                })
                .count(),
        });
    }
    Ok(out)
}

/// The record of a new sub-session of `parent`, delegated by action `start`.
/// Its runner runs as `tier` (the `--model` alias), which the route maps to a DeepSeek model.
fn new_subsession(
    parent: &SessionRecord,
    start: &ApprovedCall,
    task: &str,
    tier: ClaudeTier,
) -> SessionRecord {
    // What is not listed is copied from the session: its profile, directories, workspace (and
    // their identity), network boundary and conversation-restart fields.
    SessionRecord {
        id: format!("ds_{}", uuid::Uuid::new_v4().simple()),
        label: None,
        status: SessionStatus::Starting,
        revision: 0,
        subagent_policy: SubagentPolicy::None,
        claude_session_id: uuid::Uuid::new_v4().to_string(),
        created_at_ms: now_unix_ms(),
        // No lease of its own: it ends with its task, or when its session stops.
        lease_generation: 0,
        lease_expires_at_ms: i64::MAX,
        current_run: None,
        pending_turn_id: None,
        last_result: None,
        launch_error: None,
        stop_request: None,
        terminal: None,
        recovery_required: false,
        skill_snapshot: Vec::new(),
        broker: None,
        turn_sequence: 0,
        last_reply_turn_id: None,
        closing_reply: None,
        undelivered_prompt: None,
        undelivered_reply_turn: None,
        subsessions: Vec::new(),
        delegation: Some(Delegation {
            parent_session_id: parent.id.clone(),
            start_action_id: start.action_id.clone(),
            task_sha256: sha256_hex(task.as_bytes()),
            runner_model: tier.as_str().into(),
            end: None,
            in_flight: Vec::new(),
        }),
        content_pruned: None,
        ..parent.clone()
    }
}

/// The one turn of sub-session `child_id`: its delegated task (its actions belong to it).
pub(crate) fn delegated_turn(child_id: &str, task: &str) -> crate::state::TurnRecord {
    crate::state::TurnRecord {
        turn_id: child_id.to_string(),
        session_id: child_id.to_string(),
        sequence: 0,
        fingerprint: format!("delegation:{child_id}"),
        status: crate::state::TurnStatus::Answered,
        created_at_ms: now_unix_ms(),
        body: crate::state::TurnBody::Prompt {
            text: task.to_string(),
            interrupted_turn_id: None,
        },
        reply_id: None,
        notice: None,
    }
}

/// In the transaction that accepts a reply: persist the delegation of its start call (the
/// sub-session's record, `starting`, and the session's list) before anything is launched.
pub(crate) fn persist_delegation(
    gateway: &Gateway,
    tx: &Tx<'_>,
    parent: &mut SessionRecord,
    calls: &[ApprovedCall],
) -> Result<(), StoreError> {
    let Some((start, args)) = calls.iter().find_map(|call| match gateway_args(call)? {
        GatewayToolArgs::SubsessionStart(args) => Some((call, args)),
        _ => None,
    }) else {
        return Ok(());
    };
    let task = args.task.as_str();
    // Absent means the default.
    let tier: ClaudeTier = args.tier.unwrap_or_default();
    let child = new_subsession(parent, start, task, tier);
    tx.put_session(&child)?;
    // The sub-session's actions belong to one turn of its own: the delegated task (its id is
    // the sub-session's).
    tx.put_turn(&delegated_turn(&child.id, task))?;
    let event = parent.subsession_delegated(
        &child,
        start.action_id.clone(),
        gateway.config.deepseek.describe(),
        tier,
        gateway
            .config
            .deepseek
            .model_for(tier.as_str())
            .map(str::to_string),
    );
    tx.record(&parent.id, &event)
}
