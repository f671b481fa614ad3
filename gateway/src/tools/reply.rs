//! `native_session_reply_and_wait`: ChatGPT's answer to the pending turn. Every tool call is
//! checked against the session's profile and its tool's argument schema, then the reply and its
//! approved actions are persisted before the broker may release them to the runner.

use std::sync::Arc;

use common::hash::canonical_json;
use common::protocol::{ApprovedCall, GatewayToBroker, ReplyRelease};
use common::time::now_unix_ms;
use common::tools::{CapabilityProfile, LogicalTool, SubagentPolicy};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::check_key;
use crate::error::{ErrorCode, ToolError};
use crate::session::{
    Gateway, Leased, Request, Scope, Settle, ToolResult, WaitFor, ensure_not_terminal,
};
use crate::state::{ActionRecord, ReplyRecord, SessionRecord, TurnStatus};
use crate::view::{REPLY_BUDGET_BYTES, SessionView};

pub(super) const DESCRIPTION: &str = "Answer the session's pending_turn: text, plus tool_calls the \
    runner makes on the owner's computer (each {name, arguments}; names from \
    pending_turn.allowed_tools, arguments as in this schema). Their results, with receipts, come \
    back as the next pending_turn (kind tool_results). A reply without tool_calls ends the turn \
    (status idle). Edits and writes change files; RunCommand is sandboxed. Waits up to ~45 s; if \
    the answer has status running and no pending_turn, wait with native_session_status.";

/// Most tool calls in one reply.
const MAX_CALLS_PER_REPLY: usize = 64;

/// One tool call of a reply. Its advertised schema is [`tool_calls_schema`]: one alternative per
/// logical tool; this type only carries the call to the service, which checks name and
/// arguments and answers with a specific error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallArg {
    pub name: String,
    pub arguments: JsonObject,
}

/// Input of `native_session_reply_and_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// pending_turn.turn_id of the turn you answer.
    pub turn_id: String,
    /// New unique string per reply; resending the same reply with it replays the answer.
    pub reply_id: String,
    /// Your message for this turn (the final answer when there are no tool_calls).
    #[serde(default)]
    pub text: Option<String>,
    /// Calls for the runner to make now, in order; omit to end the turn.
    #[serde(default)]
    #[schemars(schema_with = "tool_calls_schema")]
    pub tool_calls: Option<Vec<ToolCallArg>>,
}

/// Which profiles offer a logical tool, in the words of its `tool_calls` alternative.
fn offered_in(tool: LogicalTool) -> &'static str {
    let everywhere = [
        CapabilityProfile::ReadOnly,
        CapabilityProfile::DirectWrite,
        CapabilityProfile::WorktreeWrite,
    ]
    .into_iter()
    .all(|profile| tool.permitted(profile, SubagentPolicy::None));
    if everywhere {
        "All profiles."
    } else if tool.permitted(CapabilityProfile::DirectWrite, SubagentPolicy::None) {
        "direct_write and worktree_write only."
    } else {
        "worktree_write sessions started with subagent_policy deepseek_explicit only."
    }
}

/// The advertised schema of `tool_calls`: one alternative per logical tool this build executes,
/// each its name as a constant and its argument schema (the very types the executor parses),
/// so a call can be written from the schema alone.
fn tool_calls_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let alternatives: Vec<Value> = LogicalTool::ALL
        .into_iter()
        .map(|tool| {
            let mut arguments = tool.input_schema();
            // The alternative's description says it all.
            if let Some(map) = arguments.as_object_mut() {
                map.remove("description");
            }
            serde_json::json!({
                "type": "object",
                "description": format!("{} {}", tool.description(), offered_in(tool)),
                "properties": {
                    "name": {"const": tool.name()},
                    "arguments": arguments,
                },
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let schema = serde_json::json!({
        "type": "array",
        "description": "Calls for the runner to make now, in order; omit to end the turn. Only \
                        names in pending_turn.allowed_tools. Paths are absolute.",
        "items": {"anyOf": alternatives},
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}

/// One tool call in a reply, as ChatGPT sent it.
pub struct ReplyCall {
    pub name: String,
    pub arguments: Value,
}

pub(super) async fn handle(
    gateway: &Arc<Gateway>,
    mut args: ReplyArgs,
    request_hash: &str,
) -> ToolResult<SessionView> {
    check_key("reply_id", &args.reply_id)?;
    let text = args.text.take().unwrap_or_default();
    let calls: Vec<ReplyCall> = args
        .tool_calls
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(|c| ReplyCall {
            name: c.name,
            arguments: Value::Object(c.arguments),
        })
        .collect();
    let session_id = args.native_session_id.as_str();
    let call = Leased {
        session_id,
        lease_id: &args.lease_id,
        request: Request::new(Scope::Reply, session_id, &args.reply_id, request_hash),
    };
    let turn_id = args.turn_id.as_str();
    gateway
        .leased(call, |session, request| async move {
            ensure_not_terminal(&session)?;
            check_size(&text, &calls)?;
            // Past the budget a turn can still end: a short answer without tool calls. Tool
            // calls grow the state dir by their outputs (red team 25 B7), a long text by itself.
            if !calls.is_empty() || text.len() > crate::state_budget::LARGE_REPLY_BYTES {
                gateway.state_budget.check(&format!(
                    "the reply was not delivered (past the budget only an answer without tool \
                     calls of at most {} KiB is, so the turn can end)",
                    crate::state_budget::LARGE_REPLY_BYTES / 1024
                ))?;
            }
            check_turn(&session, turn_id)?;
            let approved = approve(&session, &calls)?;
            // The calls' arguments are stored too (a Write's content: red team 27 B4).
            gateway.state_budget.charge_text(&text);
            for call in &calls {
                gateway
                    .state_budget
                    .charge_text(&call.arguments.to_string());
            }
            let mut release = accept(gateway, &request, session_id, turn_id, text, approved)?;
            // The DeepSeek controls are carried out here, their outcomes released with the rest.
            gateway
                .carry_out_gateway_calls(session_id, &mut release)
                .await?;
            gateway
                .live(session_id)
                .send(GatewayToBroker::Reply(release));
            Ok(Settle {
                wait: WaitFor::NextTurn,
                timeout: gateway.config.reply_wait,
            })
        })
        .await
}

/// Text plus tool calls within the reply budget.
fn check_size(text: &str, calls: &[ReplyCall]) -> ToolResult<()> {
    let size = text.len()
        + calls
            .iter()
            .map(|c| c.name.len() + canonical_json(&c.arguments).len())
            .sum::<usize>();
    if size as u64 > REPLY_BUDGET_BYTES {
        return Err(ToolError::new(
            ErrorCode::ReplyTooLarge,
            format!(
                "the reply is {size} bytes; text plus tool calls must stay within \
                 {REPLY_BUDGET_BYTES} bytes — split the work over several turns"
            ),
        ));
    }
    Ok(())
}

/// `turn_id` must be the session's pending turn.
fn check_turn(session: &SessionRecord, turn_id: &str) -> ToolResult<()> {
    if session.pending_turn_id.as_deref() == Some(turn_id) {
        return Ok(());
    }
    let message = match &session.pending_turn_id {
        Some(pending) => format!("turn {turn_id:?} is not the pending turn; answer {pending:?}"),
        None => format!(
            "turn {turn_id:?} is not pending: the session has no turn waiting for a reply \
             (status {}); call native_session_status, or native_session_continue when idle",
            session.status.as_str()
        ),
    };
    Err(ToolError::new(ErrorCode::TurnMismatch, message))
}

/// Approve every call or none: each must name a tool the session's profile offers, with
/// arguments its schema accepts.
pub(crate) fn approve(
    session: &SessionRecord,
    calls: &[ReplyCall],
) -> ToolResult<Vec<ApprovedCall>> {
    if calls.len() > MAX_CALLS_PER_REPLY {
        return Err(ToolError::invalid(format!(
            "at most {MAX_CALLS_PER_REPLY} tool calls per reply; send the rest in the next turn"
        )));
    }
    let offered = LogicalTool::offered(session.profile, session.subagent_policy);
    let mut approved = Vec::with_capacity(calls.len());
    for (index, call) in calls.iter().enumerate() {
        let tool = LogicalTool::from_name(&call.name).filter(|t| offered.contains(t));
        let Some(tool) = tool else {
            let names: Vec<&str> = offered.iter().map(|t| t.name()).collect();
            let why = match LogicalTool::from_name(&call.name) {
                Some(t) if t.permitted(session.profile, session.subagent_policy) => {
                    "is not available in this build".to_string()
                }
                Some(_) => format!("is not permitted in a {} session", session.profile.as_str()),
                None => "is not a known tool".to_string(),
            };
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!(
                    "tool_calls[{index}]: {:?} {why}; this session may call {}. Nothing was \
                     approved.",
                    call.name,
                    names.join(", ")
                ),
            ));
        };
        if let Err(message) = tool.parse_args(&call.arguments) {
            return Err(ToolError::invalid(format!(
                "tool_calls[{index}] ({}): {message}. Nothing was approved.",
                call.name
            )));
        }
        approved.push(ApprovedCall {
            action_id: format!("act_{}", uuid::Uuid::new_v4().simple()),
            call_index: index as u32,
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome: None,
        });
    }
    Ok(approved)
}

/// Persist the reply and its approved actions (claiming the request) and answer the turn; the
/// release for the broker.
fn accept(
    gateway: &Gateway,
    request: &Request<'_>,
    session_id: &str,
    turn_id: &str,
    text: String,
    approved: Vec<ApprovedCall>,
) -> ToolResult<ReplyRelease> {
    let (session, release) = gateway.store.write(|tx| {
        let mut session = gateway.session(tx, session_id)?;
        // The runner may have gone since the checks: check again where it counts.
        session.ensure_reply_to(turn_id)?;
        // Barrier, write lock and ownership of sub-sessions, where no other reply can interleave.
        crate::deepseek::check_reply(tx, &session, &approved, gateway.config.max_live_sessions)?;
        gateway.claim(tx, request, session_id, session.lease_generation)?;
        let mut turn = tx.turn(turn_id)?.ok_or_else(|| {
            ToolError::new(
                ErrorCode::TurnMismatch,
                "the turn is no longer pending; call native_session_status",
            )
        })?;
        turn.status = TurnStatus::Answered;
        turn.reply_id = Some(request.key.to_string());
        tx.put_turn(&turn)?;
        tx.insert_reply(&ReplyRecord {
            session_id: session_id.to_string(),
            reply_id: request.key.to_string(),
            turn_id: turn_id.to_string(),
            request_hash: request.hash.to_string(),
            text: text.clone(),
            calls: approved.clone(),
            created_at_ms: now_unix_ms(),
        })?;
        for call in &approved {
            tx.put_action(&ActionRecord::approved(call, session_id, turn_id))?;
        }
        crate::deepseek::persist_delegation(gateway, tx, &mut session, &approved)?;
        let event = session.reply_accepted(turn_id, request.key, &text, &approved)?;
        gateway.commit(tx, &mut session, &event)?;
        let release = ReplyRelease {
            turn_id: turn_id.to_string(),
            fingerprint: turn.fingerprint.clone(),
            text,
            calls: approved,
        };
        Ok::<_, ToolError>((session, release))
    })?;
    gateway.notify(&session);
    Ok(release)
}
