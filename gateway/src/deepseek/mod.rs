//! DeepSeek explicit sub-sessions (DESIGN §7): one delegated task, run by a second confined
//! Claude Code whose model is DeepSeek, in the delegating session's worktree, never the main
//! model. A sub-session is a session record of its own (`ds_…`, with `delegation` set): its own
//! broker, runner, private HOME and transcript, actions, receipts and ledger, re-adopted after a
//! restart and settled like any session's. Here: the checks of a reply that controls one
//! (barrier, write lock, ownership), its record and the delegation persisted with the reply, and
//! the summaries; `lifecycle`: what the gateway carries out (start, get, stop), delegated calls,
//! its end and the verification against its receipts; `route` and `egress`: the fixed way out;
//! `answer`: what an answer must be before it reaches the runner.

pub mod answer;
pub mod egress;
mod lifecycle;
pub mod route;
#[cfg(test)]
mod tests;

use common::hash::sha256_hex;
use common::protocol::ApprovedCall;
use common::time::{now_unix_ms, rfc3339_ms};
use common::tools::{ClaudeTier, LogicalTool, SubagentPolicy};
use serde_json::Value;

use crate::error::{ErrorCode, ToolError};
use crate::session::{Gateway, ToolResult};
use crate::state::{ActionState, Delegation, SessionRecord, SessionStatus, StoreError, Tx};

/// The sub-session runner's system prompt: its task comes as the user prompt.
pub const SUBSESSION_PROMPT: &str = "You are a DeepSeek sub-session of Native Gateway. ChatGPT \
delegated one task to you; it is the user message. Work only in the current working directory (a \
git worktree) with the mcp__gw__ tools you are given: they are audited, and writes are allowed \
only inside the worktree. When the task is done, or cannot be done, end with a short report of \
what you changed and what is left.";

/// Calls that change files or run commands: refused while a sub-session runs (the write lock).
fn locked_while_delegated(tool: LogicalTool) -> bool {
    tool.writes()
        || matches!(
            tool,
            LogicalTool::RunCommand | LogicalTool::DeepseekSubagentStart
        )
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
pub(crate) fn summaries(
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

/// Put the recorded outcomes of the gateway's calls (start, get, stop) back on a stored reply's
/// calls before it is released again: the broker answers them from these and runs nothing.
pub(crate) fn attach_outcomes(tx: &Tx<'_>, calls: &mut [ApprovedCall]) -> Result<(), StoreError> {
    for call in calls {
        if LogicalTool::from_name(&call.name).is_some_and(LogicalTool::executed_by_gateway) {
            call.outcome = tx.action(&call.action_id)?.and_then(|a| a.outcome);
        }
    }
    Ok(())
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
    let Some(start) = calls
        .iter()
        .find(|c| c.name == LogicalTool::DeepseekSubagentStart.name())
    else {
        return Ok(());
    };
    let task = start
        .arguments
        .get("task")
        .and_then(Value::as_str)
        .unwrap_or("");
    // The arguments were validated when the reply was accepted; absent means the default.
    let tier: ClaudeTier = start
        .arguments
        .get("tier")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default();
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

/// A sub-session runner's tool call, as its broker reported it.
pub(crate) struct DelegatedCall {
    pub action_id: String,
    pub tool_use_id: String,
    pub name: String,
    pub arguments: Value,
}

/// What follows a delegated call's record.
pub(crate) enum CallEnd {
    /// Approved: it runs.
    Runs,
    /// Not a tool of the sub-session: its runner is stopped.
    Stop,
    /// Refused, and the sub-session fails with this error (never naming the key).
    Fail(String),
}
