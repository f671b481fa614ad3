//! The public MCP surface for ChatGPT: exactly six tools over Streamable HTTP (token-guarded,
//! stateless, JSON responses) or stdio. The only module that knows MCP; everything else is in
//! `service`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use common::schema::{Contract, schema_for};
use common::tools::{CapabilityProfile, LogicalTool, SubagentPolicy};
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
use crate::service::SkillContext;
use crate::service::{DEFAULT_START_WAIT, Gateway, ReplyCall, StartRequest, request_hash};
use crate::view::{SessionView, output_schema};

/// Input of `native_session_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The user's request: the session's first prompt.
    pub prompt: String,
    /// Absolute path of the directory to work in (the user's project).
    pub working_directory: String,
    /// New unique string per intended session; resending the same key and input replays the
    /// first answer instead of starting a second session.
    pub idempotency_key: String,
    /// What the session may do, fixed for its life (see the tool description); default
    /// `read_only`.
    #[serde(default)]
    pub capability_profile: Option<CapabilityProfile>,
    /// `none` (default). `deepseek_explicit` is not available in this build.
    #[serde(default)]
    pub subagent_policy: Option<SubagentPolicy>,
    /// Short human-readable name for the session.
    #[serde(default)]
    pub session_label: Option<String>,
    /// Skills to freeze into the session (at most 8); not available in this build: omit.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub skill_contexts: Option<Vec<SkillContext>>,
    /// Seconds to wait for the first pending_turn (0-50, default 30).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `native_session_continue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// The user's next request, sent into the same Claude Code conversation.
    pub prompt: String,
    /// New unique string per prompt; resending the same key and input replays the answer.
    pub idempotency_key: String,
    /// Seconds to wait for the next pending_turn (0-50, default 30).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

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

/// Input of `native_session_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// Seconds to wait for a change (0-50, default 0: answer at once).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `native_session_recover`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The recovery_token from native_session_start's answer.
    pub recovery_token: String,
    /// New unique string per recovery attempt; resending it replays the answer without rotating
    /// the lease again.
    pub recovery_id: String,
    /// Seconds to wait for a change after recovering (0-50, default 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `native_session_stop`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopArgs {
    /// The session's id (`ns_…`).
    pub native_session_id: String,
    /// The current lease_id from the last SessionView.
    pub lease_id: String,
    /// New unique string per stop request; resending it replays the answer.
    pub request_id: String,
    /// Why, for the record (default "requested by ChatGPT").
    #[serde(default)]
    pub reason: Option<String>,
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
    } else {
        "direct_write and worktree_write only."
    }
}

/// The advertised schema of `tool_calls`: one alternative per logical tool this build executes,
/// each its name as a constant and its argument schema (the very types the executor parses),
/// so a call can be written from the schema alone.
fn tool_calls_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let alternatives: Vec<Value> = LogicalTool::ALL
        .into_iter()
        .filter(|tool| tool.implemented())
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

/// One advertised tool.
struct ToolSpec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: Value,
    /// read-only, destructive, idempotent, open-world.
    hints: [bool; 4],
}

/// The six tools as advertised.
fn tool_table() -> Vec<ToolSpec> {
    fn input<T: JsonSchema>() -> Value {
        let mut value = schema_for::<T>(Contract::Input);
        if let Some(map) = value.as_object_mut() {
            map.remove("description");
        }
        value
    }
    vec![
        ToolSpec {
            name: "native_session_start",
            title: "Start a native session",
            description: "Start a new Claude Code session on the owner's computer in which you are \
                the only model: each of its turns comes back to you as pending_turn, answered with \
                native_session_reply_and_wait. Use once per task; for a follow-up in an idle \
                session use native_session_continue, to regain one use native_session_recover. \
                Waits up to wait_seconds (default 30) for the first turn. Profiles: read_only \
                (default) offers Read, FindFiles, SearchText and RunCommand (sandboxed: files \
                read-only, no network); direct_write adds Edit, Write, NotebookEdit in \
                working_directory; worktree_write the same in a new Git worktree of it. Keep \
                lease_id (every later call) and recovery_token (shown only here).",
            input: input::<StartArgs>(),
            hints: [false, false, true, false],
        },
        ToolSpec {
            name: "native_session_continue",
            title: "Continue a native session",
            description: "Send the user's next prompt into an idle session (status idle, no \
                pending_turn): same Claude Code conversation, profile and directory. Use instead \
                of start for follow-ups; while a pending_turn exists use reply_and_wait. Restarts \
                a runner that exited. Waits up to wait_seconds (default 30) for the first turn.",
            input: input::<ContinueArgs>(),
            hints: [false, false, true, false],
        },
        ToolSpec {
            name: "native_session_reply_and_wait",
            title: "Answer the pending turn",
            description: "Answer the session's pending_turn: text, plus tool_calls the runner \
                makes on the owner's computer (each {name, arguments}; names from \
                pending_turn.allowed_tools, arguments as in this schema). Their results, with \
                receipts, come back as the next pending_turn (kind tool_results). A reply \
                without tool_calls ends the turn (status idle). Edits and writes change files; \
                RunCommand is sandboxed. Waits up to ~45 s; if the answer has status running \
                and no pending_turn, wait with native_session_status.",
            input: input::<ReplyArgs>(),
            hints: [false, true, true, false],
        },
        ToolSpec {
            name: "native_session_status",
            title: "Session status",
            description: "Read a session's SessionView without changing anything. Use it to wait \
                when another call answered with status running and no pending_turn: with \
                wait_seconds (up to 50) it returns as soon as the session changes.",
            input: input::<StatusArgs>(),
            hints: [true, false, true, false],
        },
        ToolSpec {
            name: "native_session_recover",
            title: "Recover a session",
            description: "Regain a session with its recovery_token: when you lost its lease_id \
                (lease_invalid), or when recovery_required is true. Re-verifies the session's \
                runtime and issues a new lease_id (the old one stops working); then continue or \
                reply as the SessionView says. Not for new tasks (start) or follow-ups \
                (continue).",
            input: input::<RecoverArgs>(),
            hints: [false, false, true, false],
        },
        ToolSpec {
            name: "native_session_stop",
            title: "Stop a session",
            description: "End a session for good: stops its runner (an unfinished turn is \
                abandoned); status becomes stopped and terminal says how. The SessionView stays \
                readable with status. Use when the task is done or must be abandoned.",
            input: input::<StopArgs>(),
            hints: [false, true, true, false],
        },
    ]
}

/// The tool list exactly as advertised.
pub fn tools() -> Vec<Tool> {
    let output_schema = Arc::new(match output_schema() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    });
    tool_table()
        .into_iter()
        .map(|spec| {
            let [read_only, destructive, idempotent, open_world] = spec.hints;
            let input = match spec.input {
                Value::Object(map) => map,
                _ => JsonObject::new(),
            };
            Tool::new(spec.name, spec.description, Arc::new(input))
                .with_title(spec.title)
                .with_raw_output_schema(output_schema.clone())
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(read_only)
                        .destructive(destructive)
                        .idempotent(idempotent)
                        .open_world(open_world),
                )
        })
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
            "wait_seconds must be between 0 and 50 (ChatGPT abandons a call after about 60 s), \
             got {seconds}; wait again with native_session_status"
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
        let Some(_in_flight) = self.gateway.drain.enter() else {
            let err = ToolError::new(
                crate::error::ErrorCode::Busy,
                "the gateway is restarting; nothing was done. Call the same tool again in a few \
                 seconds",
            );
            return Ok(CallToolResult::structured_error(err.to_json()).into());
        };
        if !tool_table().iter().any(|spec| spec.name == name) {
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
                    ToolError::new(
                        crate::error::ErrorCode::Internal,
                        format!(
                            "the answer could not be encoded ({err}); call native_session_status"
                        ),
                    )
                    .to_json(),
                ),
            },
            Err(err) => CallToolResult::structured_error(err.to_json()),
        };
        Ok(result.into())
    }
}

#[derive(Clone)]
struct AccessToken(Arc<str>);

/// The token of an `Authorization` header with the `Bearer` scheme (case-insensitive, RFC 9110).
fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// 401 as RFC 6750 words it: `WWW-Authenticate: Bearer` (with `error="invalid_token"` when a
/// wrong token was presented) and a short JSON body. OAuth will add `resource_metadata` here.
fn unauthorized(presented: bool) -> Response {
    let challenge = if presented {
        "Bearer error=\"invalid_token\""
    } else {
        "Bearer"
    };
    let body = serde_json::json!({
        "error": "invalid_token",
        "error_description": "a valid access token is required: send Authorization: Bearer \
                              <token>, or use the capability URL",
    });
    (
        StatusCode::UNAUTHORIZED,
        [(http::header::WWW_AUTHENTICATE, challenge)],
        axum::Json(body),
    )
        .into_response()
}

/// `Authorization: Bearer <token>` on `/mcp` (or `/mcp/`), or the capability URL `/mcp/<token>`
/// (or `/mcp/<token>/`); else 401. Compared in constant time.
async fn require_access_token(
    State(token): State<AccessToken>,
    mut req: Request,
    next: Next,
) -> Response {
    let matches =
        |presented: &str| common::hash::constant_time_eq(presented.as_bytes(), token.0.as_bytes());
    let in_path = req
        .uri()
        .path()
        .strip_prefix("/mcp/")
        .map(|rest| rest.strip_suffix('/').unwrap_or(rest))
        .filter(|rest| !rest.is_empty());
    let (presented, ok) = match in_path {
        Some(presented) => (true, matches(presented)),
        None => match bearer_token(req.headers()) {
            Some(presented) => (true, matches(presented)),
            None => (false, false),
        },
    };
    if !ok {
        return unauthorized(presented);
    }
    // Keep the token out of anything downstream that might log the path.
    *req.uri_mut() = Uri::from_static("/mcp");
    next.run(req).await
}

/// Limits of one HTTP request the MCP layer enforces itself.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Longest a client may take to send a request body once its head arrived.
    pub read_timeout: std::time::Duration,
    /// Largest request body.
    pub max_bytes: usize,
}

/// A JSON-RPC error response with HTTP `status` (`Connection: close` when the body may be left
/// unread).
fn json_rpc_error(status: StatusCode, id: Value, code: i64, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    let mut response = (status, axum::Json(body)).into_response();
    if status != StatusCode::BAD_REQUEST {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// Read each POST body within a time bound, and answer a body that is not a JSON-RPC message the
/// JSON-RPC way (400 with -32700 Parse error, or -32600 Invalid Request) where rmcp would say 415.
/// Host, Accept and Content-Type checks stay rmcp's: its answer is kept unless it refused the
/// body itself.
async fn json_rpc_body(State(limits): State<BodyLimits>, req: Request, next: Next) -> Response {
    if req.method() != http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(
        limits.read_timeout,
        axum::body::to_bytes(body, limits.max_bytes),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return json_rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                -32600,
                "request body too large or unreadable",
            );
        }
        Err(_) => {
            return json_rpc_error(
                StatusCode::REQUEST_TIMEOUT,
                Value::Null,
                -32600,
                "request body not received in time",
            );
        }
    };
    let json_content = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
        });
    let response = next
        .run(Request::from_parts(
            parts,
            axum::body::Body::from(bytes.clone()),
        ))
        .await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE || !json_content {
        return response;
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Err(_) => json_rpc_error(StatusCode::BAD_REQUEST, Value::Null, -32700, "Parse error"),
        Ok(value) => {
            let id = value
                .get("id")
                .filter(|id| id.is_string() || id.is_number())
                .cloned()
                .unwrap_or(Value::Null);
            json_rpc_error(
                StatusCode::BAD_REQUEST,
                id,
                -32600,
                "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
            )
        }
    }
}

/// The HTTP app: `/mcp` and `/mcp/{token}`, each also with a trailing slash.
pub fn http_app(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Router {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(gateway.config.allowed_hosts.iter().cloned());
    let limits = BodyLimits {
        read_timeout: gateway.config.http.body_read_timeout,
        max_bytes: MAX_REQUEST_BODY_BYTES,
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(hosts)
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
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
        .route_service("/mcp/", service.clone())
        .route_service("/mcp/{token}", service.clone())
        .route_service("/mcp/{token}/", service)
        .route_layer(middleware::from_fn_with_state(limits, json_rpc_body))
        .route_layer(middleware::from_fn_with_state(token, require_access_token))
}

/// Largest request body: a reply's 768 KiB budget, JSON-escaped, fits with room to spare.
const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

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
            let view = &value["outputSchema"]["anyOf"][0];
            assert!(view["required"].as_array().unwrap().len() > 10);
            assert_eq!(value["outputSchema"]["type"], "object");
        }
    }

    /// Standard JSON Schema only, everywhere in the listing: no boolean sub-schemas (strict
    /// clients reject the list), no custom `format` (the Inspector warns on each).
    #[test]
    fn every_schema_in_the_listing_is_clean() {
        for tool in tools() {
            let value = serde_json::to_value(&tool).unwrap();
            for which in ["inputSchema", "outputSchema"] {
                let found = common::schema::hygiene_violations(&value[which]);
                assert!(found.is_empty(), "{} {which}: {found:#?}", tool.name);
            }
        }
    }

    /// Every property of every input schema, the logical tools' arguments included, says what
    /// it is (a constant says it by itself).
    #[test]
    fn every_input_parameter_is_described() {
        fn walk(schema: &Value, at: &str, missing: &mut Vec<String>, total: &mut usize) {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    let here = format!("{at}.{name}");
                    *total += 1;
                    let described = prop
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| d.len() >= 8);
                    // A constant says what it is; a tool call's `arguments` are described by
                    // the call's alternative (checked as an item below).
                    if !described && prop.get("const").is_none() && name != "arguments" {
                        missing.push(here.clone());
                    }
                    walk(prop, &here, missing, total);
                }
            }
            for key in ["items", "anyOf", "oneOf"] {
                match schema.get(key) {
                    Some(Value::Array(items)) => {
                        for (i, item) in items.iter().enumerate() {
                            if item.get("properties").is_some() && item.get("description").is_none()
                            {
                                missing.push(format!("{at}[{i}]"));
                            }
                            walk(item, &format!("{at}[{i}]"), missing, total);
                        }
                    }
                    Some(item @ Value::Object(_)) => walk(item, &format!("{at}[]"), missing, total),
                    _ => {}
                }
            }
        }
        let (mut missing, mut total) = (Vec::new(), 0);
        for tool in tools() {
            let value = serde_json::to_value(&tool).unwrap();
            walk(&value["inputSchema"], &tool.name, &mut missing, &mut total);
        }
        assert!(
            total > 60,
            "only {total} parameters found: the walk is broken"
        );
        assert!(missing.is_empty(), "undescribed: {missing:#?}");
    }

    /// The listing goes into every ChatGPT conversation: keep it within budget. It was 36.7 KB
    /// with four untyped fields, 16 undescribed parameters and no logical tool schemas; with
    /// those, 49.6 KB before the outputSchema was compacted, 44.5 KB after.
    #[test]
    fn the_listing_stays_compact() {
        let listing = serde_json::json!({"tools": tools()});
        let bytes = serde_json::to_vec(&listing).unwrap().len();
        assert!(bytes <= LISTING_BUDGET_BYTES, "tools/list is {bytes} bytes");
    }
    const LISTING_BUDGET_BYTES: usize = 45_000;

    /// The descriptions as ChatGPT reads them, one per line: any change is deliberate.
    #[test]
    fn tool_descriptions_snapshot() {
        fn params(schema: &Value, at: &str, out: &mut String) {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    let mark = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    let text = prop["description"]
                        .as_str()
                        .map(str::to_string)
                        .or_else(|| prop.get("const").map(|c| format!("= {c}")))
                        .unwrap_or_default();
                    out.push_str(&format!("  {at}{name}{mark}: {text}\n"));
                    if name == "tool_calls" {
                        for alt in prop["items"]["anyOf"].as_array().into_iter().flatten() {
                            let tool = alt["properties"]["name"]["const"].as_str().unwrap_or("?");
                            out.push_str(&format!(
                                "    [{tool}] {}\n",
                                alt["description"].as_str().unwrap_or("")
                            ));
                            params(&alt["properties"]["arguments"], "      ", out);
                        }
                    }
                }
            }
        }
        let mut out = String::new();
        for tool in tools() {
            let value = serde_json::to_value(&tool).unwrap();
            out.push_str(&format!(
                "{} ({})\n  {}\n",
                tool.name,
                value["title"].as_str().unwrap_or(""),
                tool.description.as_deref().unwrap_or("")
            ));
            params(&value["inputSchema"], "", &mut out);
            out.push('\n');
        }
        insta::assert_snapshot!(out);
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_needs_a_token() {
        let with = |v: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::AUTHORIZATION, v.parse().unwrap());
            bearer_token(&headers).map(str::to_string)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("BEARER  abc ").as_deref(), Some("abc"));
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bearer "), None);
        assert_eq!(with("Bearerabc"), None);
    }
}
