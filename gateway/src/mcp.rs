//! The public MCP surface for ChatGPT: exactly six tools over Streamable HTTP (token-guarded,
//! stateless, JSON responses) or stdio. The only module that knows MCP; everything else is in
//! `service`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use common::tools::{CapabilityProfile, SubagentPolicy};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::service::{DEFAULT_START_WAIT, Gateway, ReplyCall, StartRequest, request_hash};
use crate::view::{SessionView, session_view_schema};

/// Input of `native_session_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The first user prompt for the session.
    pub prompt: String,
    /// Absolute path of the directory the session works in.
    pub working_directory: String,
    /// Unique per intended session; a retry with the same key and input replays the answer.
    pub idempotency_key: String,
    /// `read_only` (default), `direct_write` or `worktree_write`.
    #[serde(default)]
    pub capability_profile: Option<CapabilityProfile>,
    /// `none` (default) or `deepseek_explicit`.
    #[serde(default)]
    pub subagent_policy: Option<SubagentPolicy>,
    #[serde(default)]
    pub session_label: Option<String>,
    /// At most 8 `{skill_id}` items.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub skill_contexts: Option<Vec<Value>>,
    /// Seconds to wait for the first pending turn (0..=50, default 30).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `native_session_continue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueArgs {
    pub native_session_id: String,
    pub lease_id: String,
    /// The next user prompt, sent into the same Claude Code conversation.
    pub prompt: String,
    pub idempotency_key: String,
    /// Seconds to wait for the next pending turn (0..=50, default 30).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// One tool call of a reply.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallArg {
    /// Logical tool name, e.g. `Read`, `FindFiles`, `SearchText`.
    pub name: String,
    /// The tool's arguments.
    pub arguments: JsonObject,
}

/// Input of `native_session_reply_and_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyArgs {
    pub native_session_id: String,
    pub lease_id: String,
    /// The pending turn being answered.
    pub turn_id: String,
    /// Unique per reply; resending the same reply with the same id replays the answer.
    pub reply_id: String,
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls for the runner to make; none ends the runner's turn.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallArg>>,
}

/// Input of `native_session_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    pub native_session_id: String,
    pub lease_id: String,
    /// Seconds to wait for a change (0..=50, default 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `native_session_recover`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverArgs {
    pub native_session_id: String,
    /// The token from the start answer.
    pub recovery_token: String,
    /// Unique per recovery attempt; resending replays the answer without rotating again.
    pub recovery_id: String,
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `native_session_stop`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopArgs {
    pub native_session_id: String,
    pub lease_id: String,
    /// Unique per stop request.
    pub request_id: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The six tools: name, title, description, input schema, annotations
/// (read-only, destructive, idempotent, open-world).
fn tool_table() -> Vec<(&'static str, &'static str, &'static str, Value, [bool; 4])> {
    fn schema<T: JsonSchema>() -> Value {
        let mut value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
        if let Some(map) = value.as_object_mut() {
            map.remove("$schema");
            map.remove("title");
        }
        value
    }
    vec![
        (
            "native_session_start",
            "Start a native session",
            "Start a Claude Code session on this computer whose every model turn you (ChatGPT) answer. \
             Returns the SessionView; answer its pending_turn with native_session_reply_and_wait. \
             Keep lease_id and recovery_token.",
            schema::<StartArgs>(),
            [false, false, true, false],
        ),
        (
            "native_session_continue",
            "Continue a native session",
            "Send the next user prompt into an idle session's conversation and wait for its first turn.",
            schema::<ContinueArgs>(),
            [false, false, true, false],
        ),
        (
            "native_session_reply_and_wait",
            "Answer the pending turn",
            "Answer the pending turn with text and optional tool_calls (Read, FindFiles, SearchText, ...). \
             Approved calls run on this computer with receipts; waits up to ~45 s for the next turn.",
            schema::<ReplyArgs>(),
            [false, true, true, false],
        ),
        (
            "native_session_status",
            "Session status",
            "Read a session's current state; with wait_seconds, return as soon as it changes.",
            schema::<StatusArgs>(),
            [true, false, true, false],
        ),
        (
            "native_session_recover",
            "Recover a session",
            "Regain a session with its recovery token: verifies the runtime and rotates the lease.",
            schema::<RecoverArgs>(),
            [false, false, true, false],
        ),
        (
            "native_session_stop",
            "Stop a session",
            "Stop the session's runner and end the session; its state stays inspectable.",
            schema::<StopArgs>(),
            [false, true, true, false],
        ),
    ]
}

/// The tool list exactly as advertised.
pub fn tools() -> Vec<Tool> {
    let output_schema = Arc::new(match session_view_schema() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    });
    tool_table()
        .into_iter()
        .map(
            |(
                name,
                title,
                description,
                input,
                [read_only, destructive, idempotent, open_world],
            )| {
                let input = match input {
                    Value::Object(map) => map,
                    _ => JsonObject::new(),
                };
                Tool::new(name, description, Arc::new(input))
                    .with_title(title)
                    .with_raw_output_schema(output_schema.clone())
                    .with_annotations(
                        ToolAnnotations::new()
                            .read_only(read_only)
                            .destructive(destructive)
                            .idempotent(idempotent)
                            .open_world(open_world),
                    )
            },
        )
        .collect()
}

/// The MCP handler; cheap to clone per connection.
#[derive(Clone)]
pub struct GatewayMcp {
    gateway: Arc<Gateway>,
}

impl GatewayMcp {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        GatewayMcp { gateway }
    }
}

fn parse<T: DeserializeOwned>(arguments: &Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments.clone()).map_err(|e| {
        ToolError::invalid(format!(
            "invalid arguments: {e}; see the tool's input schema"
        ))
    })
}

fn wait_seconds(value: Option<u64>, default: u64) -> Result<u64, ToolError> {
    let seconds = value.unwrap_or(default);
    if seconds > 50 {
        return Err(ToolError::invalid(format!(
            "wait_seconds must be between 0 and 50, got {seconds}"
        )));
    }
    Ok(seconds)
}

impl GatewayMcp {
    async fn dispatch(&self, name: &str, arguments: Value) -> Result<SessionView, ToolError> {
        let gateway = &self.gateway;
        let hash = request_hash(&arguments, &["wait_seconds", "lease_id"]);
        match name {
            "native_session_start" => {
                let args: StartArgs = parse(&arguments)?;
                gateway
                    .start(StartRequest {
                        wait_seconds: wait_seconds(args.wait_seconds, DEFAULT_START_WAIT)?,
                        prompt: args.prompt,
                        working_directory: args.working_directory,
                        idempotency_key: args.idempotency_key,
                        capability_profile: args
                            .capability_profile
                            .unwrap_or(CapabilityProfile::ReadOnly),
                        subagent_policy: args.subagent_policy.unwrap_or(SubagentPolicy::None),
                        session_label: args.session_label,
                        skill_contexts: args.skill_contexts.unwrap_or_default(),
                        request_hash: hash,
                    })
                    .await
            }
            "native_session_continue" => {
                let args: ContinueArgs = parse(&arguments)?;
                let wait = wait_seconds(args.wait_seconds, DEFAULT_START_WAIT)?;
                gateway
                    .continue_session(
                        &args.native_session_id,
                        &args.lease_id,
                        args.prompt,
                        &args.idempotency_key,
                        wait,
                        &hash,
                    )
                    .await
            }
            "native_session_reply_and_wait" => {
                let args: ReplyArgs = parse(&arguments)?;
                let calls = args
                    .tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| ReplyCall {
                        name: c.name,
                        arguments: Value::Object(c.arguments),
                    })
                    .collect();
                gateway
                    .reply(
                        &args.native_session_id,
                        &args.lease_id,
                        &args.turn_id,
                        &args.reply_id,
                        args.text.unwrap_or_default(),
                        calls,
                        &hash,
                    )
                    .await
            }
            "native_session_status" => {
                let args: StatusArgs = parse(&arguments)?;
                let wait = wait_seconds(args.wait_seconds, 0)?;
                gateway
                    .status(&args.native_session_id, &args.lease_id, wait)
                    .await
            }
            "native_session_recover" => {
                let args: RecoverArgs = parse(&arguments)?;
                let wait = wait_seconds(args.wait_seconds, 0)?;
                let hash = request_hash(&arguments, &["wait_seconds", "recovery_token"]);
                gateway
                    .recover(
                        &args.native_session_id,
                        &args.recovery_token,
                        &args.recovery_id,
                        wait,
                        &hash,
                    )
                    .await
            }
            "native_session_stop" => {
                let args: StopArgs = parse(&arguments)?;
                gateway
                    .stop(
                        &args.native_session_id,
                        &args.lease_id,
                        &args.request_id,
                        args.reason,
                        &hash,
                    )
                    .await
            }
            other => Err(ToolError::invalid(format!("unknown tool {other}"))),
        }
    }
}

impl ServerHandler for GatewayMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "native-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Native Gateway: you are the only model of a Claude Code session on the owner's \
                 computer. Start a session, answer each pending_turn with reply_and_wait, and use \
                 status to wait.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if !tool_table().iter().any(|(n, ..)| *n == name) {
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.dispatch(&name, arguments).await {
            Ok(view) => match serde_json::to_value(&view) {
                Ok(value) => CallToolResult::structured(value),
                Err(err) => CallToolResult::structured_error(
                    ToolError::new(crate::error::ErrorCode::Internal, err.to_string()).to_json(),
                ),
            },
            Err(err) => CallToolResult::structured_error(err.to_json()),
        };
        Ok(result.into())
    }
}

#[derive(Clone)]
struct AccessToken(Arc<str>);

/// `Authorization: Bearer <token>` on `/mcp`, or the capability URL `/mcp/<token>`; else 401 and
/// nothing else. Compared in constant time.
async fn require_access_token(
    State(token): State<AccessToken>,
    mut req: Request,
    next: Next,
) -> Response {
    let matches =
        |presented: &str| common::hash::constant_time_eq(presented.as_bytes(), token.0.as_bytes());
    let ok = match req.uri().path().strip_prefix("/mcp/") {
        Some(presented) => {
            let ok = matches(presented);
            if ok {
                // Keep the token out of anything downstream that might log the path.
                *req.uri_mut() = Uri::from_static("/mcp");
            }
            ok
        }
        None => req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| matches(t.trim())),
    };
    if !ok {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    next.run(req).await
}

/// The HTTP app: `/mcp` and `/mcp/{token}`.
pub fn http_app(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Router {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(gateway.config.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(hosts)
        .with_cancellation_token(shutdown);
    let token = AccessToken(gateway.config.access_token.as_str().into());
    let handler = GatewayMcp::new(gateway);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service.clone())
        .route_service("/mcp/{token}", service)
        .route_layer(middleware::from_fn_with_state(token, require_access_token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tool list is what ChatGPT caches: any change to it must be deliberate.
    #[test]
    fn tool_list_snapshot() {
        let tools = serde_json::to_value(tools()).unwrap();
        insta::assert_json_snapshot!(tools);
    }

    #[test]
    fn every_tool_has_all_four_annotations_and_closed_input() {
        for tool in tools() {
            let value = serde_json::to_value(&tool).unwrap();
            for hint in [
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
            ] {
                assert!(
                    value["annotations"][hint].is_boolean(),
                    "{} lacks {hint}",
                    tool.name
                );
            }
            assert_eq!(value["inputSchema"]["additionalProperties"], false);
            assert!(value["outputSchema"]["required"].as_array().unwrap().len() > 10);
        }
    }
}
