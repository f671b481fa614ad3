//! The MCP server the runner calls its tools through (`mcp__gw__<Name>`), on the bridge's loopback
//! port behind the runner token. A call runs only if it names, through Claude Code's
//! `_meta["claudecode/toolUseId"]`, an action ChatGPT approved, with the same arguments as canonical
//! JSON; each action runs at most once (a repeated call gets the recorded result), and its outcome is
//! durable at the gateway before the runner sees it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use common::outcome::OutcomeCode;
use common::protocol::{BrokerEvent, Verdict};
use common::tools::{ActionOutcome, LogicalTool, ParsedArgs, ToolStatus};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content,
    Implementation, JsonObject, ListToolsResult, MetaObject as Meta, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::executor::write::{JournalError, WriteJournal};
use crate::state::BrokerState;

/// How long a write waits for the gateway to record its intent; after that nothing is written.
const PREPARE_ACK_TIMEOUT: Duration = Duration::from_secs(120);

/// Records a write's intent at the gateway: queue `WritePrepared` and block (on the executor's
/// blocking thread) until the gateway answers; only its `Approved` verdict lets the write go on.
struct GatewayJournal {
    state: Arc<BrokerState>,
    runtime: tokio::runtime::Handle,
}

impl WriteJournal for GatewayJournal {
    fn prepared(&mut self, prepared: &common::protocol::PreparedWrite) -> Result<(), JournalError> {
        let version = self.state.link_version();
        if version < common::protocol::VERDICTS_SINCE_VERSION {
            return Err(JournalError::ProtocolTooOld { version });
        }
        let seq = self
            .state
            .push_event(BrokerEvent::WritePrepared(prepared.clone()));
        match self
            .runtime
            .block_on(self.state.wait_verdict(seq, PREPARE_ACK_TIMEOUT))
        {
            Some(Verdict::Approved) => Ok(()),
            Some(Verdict::Refused { reason }) => Err(JournalError::Refused(reason)),
            None => Err(JournalError::NotAcknowledged),
        }
    }
}

pub fn router(state: Arc<BrokerState>) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(["127.0.0.1", "localhost"])
        .with_cancellation_token(state.shutdown.child_token());
    let handler_state = state.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(ExecutorMcp {
                state: handler_state.clone(),
            })
        },
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(middleware::from_fn_with_state(state, require_runner_token))
}

async fn require_runner_token(
    State(state): State<Arc<BrokerState>>,
    req: Request,
    next: Next,
) -> Response {
    let ok = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| {
            common::hash::constant_time_eq(t.as_bytes(), state.spec.runner_token.as_bytes())
        });
    if !ok {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    next.run(req).await
}

#[derive(Clone)]
struct ExecutorMcp {
    state: Arc<BrokerState>,
}

fn object(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

fn refusal(text: String) -> CallToolResponse {
    CallToolResult::error(vec![Content::text(text)]).into()
}

fn not_recorded() -> McpError {
    McpError::internal_error(
        "the gateway did not record the result in time; it is kept and will be delivered",
        None,
    )
}

fn outcome_response(outcome: &ActionOutcome) -> CallToolResponse {
    let mut text = outcome.output.clone();
    if outcome.truncated && !text.ends_with('\n') {
        text.push('\n');
    }
    let result = if outcome.status == ToolStatus::Ok {
        CallToolResult::success(vec![Content::text(text)])
    } else {
        let code = outcome.error_code.map_or("error", OutcomeCode::as_str);
        CallToolResult::error(vec![Content::text(format!("[{code}] {text}"))])
    };
    result.into()
}

impl ServerHandler for ExecutorMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("native-gateway-executor", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let spec = &self.state.spec;
        let tools = LogicalTool::offered(spec.profile, spec.subagent_policy)
            .into_iter()
            .map(|tool| {
                let mut meta = Meta::new();
                // Results up to 64 KiB must reach the model inline, not spill to a file.
                meta.0
                    .insert("anthropic/maxResultSizeChars".into(), json!(200_000));
                // Reads are repeatable; a command may give another result each time; a write
                // replaces what was there.
                let repeatable = tool != LogicalTool::RunCommand && !tool.writes();
                Tool::new(tool.name(), tool.description(), object(tool.input_schema()))
                    .with_annotations(
                        ToolAnnotations::new()
                            .read_only(repeatable)
                            .destructive(tool.writes())
                            .idempotent(repeatable)
                            .open_world(false),
                    )
                    .with_meta(meta)
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let state = &self.state;
        let name = request.name.to_string();
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let tool_use_id = context
            .meta
            .get("claudecode/toolUseId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let refuse = |reason: String| {
            state.push_event(BrokerEvent::UnapprovedCall {
                tool_use_id: tool_use_id.clone(),
                name: name.clone(),
                reason: reason.clone(),
            });
            Ok(refusal(format!("[unapproved_call] {reason}")))
        };
        if state.spec.delegation.is_some() {
            return self.delegated_call(&tool_use_id, &name, arguments).await;
        }
        let Some(action_id) = tool_use_id.strip_prefix("toolu_") else {
            return refuse("the call carries no tool use id of an approved action".into());
        };
        let Some(slot) = state.action(action_id) else {
            return refuse("no approved action has this tool use id".into());
        };
        if slot.call.name != name {
            return refuse(format!(
                "the approved action is {}, not {name}",
                slot.call.name
            ));
        }
        if common::hash::canonical_json(&slot.call.arguments)
            != common::hash::canonical_json(&arguments)
        {
            return refuse("the arguments differ from the approved ones".into());
        }

        self.run_approved(action_id, &name, &arguments).await
    }
}

impl ExecutorMcp {
    /// A DeepSeek sub-session's call: the delegation approves any tool the sub-session offers,
    /// but only once the gateway has recorded it (an action of the sub-session, by a stable id
    /// per tool use, so a repeat runs nothing twice). Then it runs as any approved action.
    async fn delegated_call(
        &self,
        tool_use_id: &str,
        name: &str,
        arguments: Value,
    ) -> Result<CallToolResponse, McpError> {
        let state = &self.state;
        let offered = LogicalTool::offered(state.spec.profile, state.spec.subagent_policy);
        if tool_use_id.is_empty()
            || !LogicalTool::from_name(name).is_some_and(|t| offered.contains(&t))
        {
            state.push_event(BrokerEvent::UnapprovedCall {
                tool_use_id: tool_use_id.to_string(),
                name: name.to_string(),
                reason: "not a tool of this sub-session, or no tool use id".into(),
            });
            return Ok(refusal(format!(
                "[unapproved_call] {name} is not a tool of this sub-session"
            )));
        }
        let version = state.link_version();
        if version < common::protocol::VERDICTS_SINCE_VERSION {
            return Ok(refusal(format!(
                "[unapproved_call] the gateway speaks protocol {version}, which does not approve \
                 a sub-session's calls"
            )));
        }
        let action_id = delegated_action_id(&state.spec.session_id, tool_use_id);
        if state.action(&action_id).is_none() {
            let event = BrokerEvent::DelegatedCall {
                action_id: action_id.clone(),
                tool_use_id: tool_use_id.to_string(),
                name: name.to_string(),
                arguments: arguments.clone(),
            };
            // An event the link cannot carry would end every link that tried to send it.
            if !common::codec::fits(&common::protocol::BrokerToGateway::Event {
                seq: u64::MAX,
                event: event.clone(),
            }) {
                return Ok(refusal(
                    "[invalid_argument] the call's arguments are too large to record; nothing ran"
                        .into(),
                ));
            }
            let seq = state.push_event(event);
            // Only the gateway's explicit approval runs it: a refusal (the sub-session was
            // stopped meanwhile) runs nothing, and no write of it is ever prepared.
            match state.wait_verdict(seq, state.action_ack_timeout).await {
                Some(Verdict::Approved) => {}
                Some(Verdict::Refused { reason }) => {
                    return Ok(refusal(format!(
                        "[unapproved_call] the gateway refused this call: {reason}"
                    )));
                }
                None => return Err(not_recorded()),
            }
            state.approve_delegated(common::protocol::ApprovedCall {
                action_id: action_id.clone(),
                call_index: 0,
                name: name.to_string(),
                arguments: arguments.clone(),
                outcome: None,
            });
        }
        let Some(slot) = state.action(&action_id) else {
            return Err(not_recorded());
        };
        if slot.call.name != name
            || common::hash::canonical_json(&slot.call.arguments)
                != common::hash::canonical_json(&arguments)
        {
            return Ok(refusal(
                "[unapproved_call] this tool use id was already used for another call".into(),
            ));
        }
        self.run_approved(&action_id, name, &arguments).await
    }

    /// Run an approved action once and report it; a repeat gets the recorded outcome.
    async fn run_approved(
        &self,
        action_id: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, McpError> {
        let state = &self.state;
        // One execution at a time, so a concurrent duplicate waits and then sees the outcome.
        let _guard = state.action_lock.lock().await;
        if let Some((outcome, seq)) = state.action(action_id).and_then(|slot| slot.outcome) {
            // A repeat gets the recorded outcome, but only once the gateway has it too.
            return if state.wait_acked(seq, state.action_ack_timeout).await {
                Ok(outcome_response(&outcome))
            } else {
                Err(not_recorded())
            };
        }
        let executed = match LogicalTool::from_name(name).map(|tool| tool.parse_args(arguments)) {
            Some(Ok(ParsedArgs::Executor(args))) => {
                let mut journal = GatewayJournal {
                    state: state.clone(),
                    runtime: tokio::runtime::Handle::current(),
                };
                let executor_state = state.clone();
                let action = action_id.to_string();
                tokio::task::spawn_blocking(move || {
                    executor_state
                        .executor
                        .execute_with_journal(&action, &args, &mut journal)
                })
                .await
                .map_err(|e| McpError::internal_error(format!("executor task failed: {e}"), None))?
            }
            // The gateway's own tools are answered from the outcome their release carries
            // (`BrokerState::release_reply`): one that came without it runs nothing here.
            Some(Ok(ParsedArgs::Gateway(_))) => not_run(
                action_id,
                ToolStatus::Error,
                OutcomeCode::Internal,
                format!(
                    "{}: the DeepSeek sub-session controls are carried out by the gateway, and \
                     this call came without its outcome",
                    OutcomeCode::Internal
                ),
            ),
            Some(Err(message)) => not_run(
                action_id,
                ToolStatus::Rejected,
                OutcomeCode::InvalidArgument,
                message.to_string(),
            ),
            None => not_run(
                action_id,
                ToolStatus::Rejected,
                OutcomeCode::InvalidArgument,
                format!("{name} is not a tool of this session"),
            ),
        };
        let outcome = executed.outcome;
        let seq = state.push_event(BrokerEvent::ActionFinished {
            action_id: action_id.to_string(),
            outcome: outcome.clone(),
            write: executed.write,
        });
        state.record_outcome(action_id, outcome.clone(), seq);
        if !state.wait_acked(seq, state.action_ack_timeout).await {
            return Err(not_recorded());
        }
        Ok(outcome_response(&outcome))
    }
}

/// The outcome of an approved action that did not run.
fn not_run(
    action_id: &str,
    status: ToolStatus,
    code: OutcomeCode,
    output: String,
) -> crate::executor::Executed {
    crate::executor::Executed {
        outcome: ActionOutcome {
            status,
            output,
            truncated: false,
            error_code: Some(code),
            receipt: common::tools::Receipt {
                action_id: action_id.to_string(),
                ..Default::default()
            },
        },
        write: None,
    }
}

/// The action id of a sub-session's tool use: the same for a repeat of the same call.
fn delegated_action_id(session_id: &str, tool_use_id: &str) -> String {
    let digest = common::hash::sha256_hex(format!("{session_id}\n{tool_use_id}").as_bytes());
    format!("act_{}", &digest[..32])
}

#[cfg(test)]
mod tests;
