//! The public MCP surface for ChatGPT: the six tools of `tools` over Streamable HTTP
//! (guarded by the static token or an OAuth access token, stateless, JSON responses) or stdio.
//! The only module that knows the MCP transport; the tools themselves are in `tools`, the session
//! logic in `session`, the OAuth authorization server in `oauth`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::host_guard::{AllowedHosts, require_allowed_host};
use crate::oauth::{AuthMode, OAuth};
use crate::session::Gateway;
use crate::tools::PublicTool;

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
        Ok(ListToolsResult::with_all_items(crate::tools::listing()))
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
        let Some(tool) = PublicTool::from_name(&name) else {
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            ));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = match tool.call(&self.gateway, arguments).await {
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

/// What the MCP endpoint accepts: the static token (unless `--auth oauth`), OAuth access tokens
/// (unless `--auth token`).
#[derive(Clone)]
struct Credentials {
    /// The static token, when the auth mode accepts it.
    static_token: Option<Arc<str>>,
    oauth: Option<Arc<OAuth>>,
}

/// The token of an `Authorization` header with the `Bearer` scheme (case-insensitive, RFC 9110).
fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// The `WWW-Authenticate` challenge of a 401 (RFC 6750 §3), with `resource_metadata` (RFC 9728
/// §5.1) when OAuth is on so that clients can discover the authorization server.
fn challenge(credentials: &Credentials, presented: bool) -> String {
    let mut params = Vec::new();
    if let Some(oauth) = &credentials.oauth {
        params.push(format!(
            "resource_metadata=\"{}\"",
            oauth.resource_metadata_url()
        ));
        params.push(format!("scope=\"{}\"", crate::oauth::SCOPE));
    }
    if presented {
        params.push("error=\"invalid_token\"".to_string());
    }
    if params.is_empty() {
        "Bearer".to_string()
    } else {
        format!("Bearer {}", params.join(", "))
    }
}

/// 401 as RFC 6750 words it: the challenge (with `error="invalid_token"` when a wrong, expired or
/// revoked token was presented) and a short JSON body.
fn unauthorized(credentials: &Credentials, presented: bool) -> Response {
    let how = match (
        credentials.static_token.is_some(),
        credentials.oauth.is_some(),
    ) {
        (true, true) => {
            "an OAuth access token or the gateway's token (Authorization: Bearer \
                         <token>), or the capability URL"
        }
        (false, _) => "an OAuth access token (Authorization: Bearer <token>)",
        (true, false) => "Authorization: Bearer <token>, or the capability URL",
    };
    let body = serde_json::json!({
        "error": "invalid_token",
        "error_description": format!("a valid access token is required: {how}"),
    });
    let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    if let Ok(value) = http::HeaderValue::from_str(&challenge(credentials, presented)) {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `Authorization: Bearer <token>` on `/mcp` (or `/mcp/`) with the static token or an OAuth access
/// token, or the capability URL `/mcp/<token>` (or `/mcp/<token>/`) with the static token; else
/// 401. The static token is compared in constant time; an OAuth token is looked up by its hash,
/// so a revocation holds from the next request on.
async fn require_access_token(
    State(credentials): State<Credentials>,
    mut req: Request,
    next: Next,
) -> Response {
    let static_matches = |presented: &str| {
        credentials.static_token.as_ref().is_some_and(|token| {
            common::hash::constant_time_eq(presented.as_bytes(), token.as_bytes())
        })
    };
    let in_path = req
        .uri()
        .path()
        .strip_prefix("/mcp/")
        .map(|rest| rest.strip_suffix('/').unwrap_or(rest))
        .filter(|rest| !rest.is_empty());
    let (presented, ok) = match in_path {
        Some(presented) => (true, static_matches(presented)),
        None => match bearer_token(req.headers()) {
            Some(presented) if static_matches(presented) => (true, true),
            Some(presented) => match &credentials.oauth {
                Some(oauth) => match oauth.access_token_valid(presented) {
                    Ok(valid) => (true, valid),
                    Err(err) => {
                        tracing::error!("checking an OAuth access token: {err}");
                        let body = serde_json::json!({
                            "error": "temporarily_unavailable",
                            "error_description": "the gateway could not check the token; retry",
                        });
                        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
                    }
                },
                None => (true, false),
            },
            None => (false, false),
        },
    };
    if !ok {
        return unauthorized(&credentials, presented);
    }
    // Keep the token out of anything downstream that might log the path.
    *req.uri_mut() = Uri::from_static("/mcp");
    // The owner's request: its connection is not evicted for another while it is served — until
    // its body is sent, not when the handler returns (a tool call's answer is an SSE stream
    // that may wait up to its wait_seconds).
    let served = req
        .extensions()
        .get::<crate::http_server::ConnectionHandle>()
        .map(crate::http_server::ConnectionHandle::authenticated);
    let response = next.run(req).await;
    match served {
        None => response,
        Some(served) => response.map(|body| {
            use futures::StreamExt as _;
            axum::body::Body::from_stream(body.into_data_stream().map(move |chunk| {
                let _held = &served;
                chunk
            }))
        }),
    }
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

/// The HTTP app: `/mcp` and `/mcp/{token}`, each also with a trailing slash, and the OAuth
/// endpoints when `oauth` is given, all behind the Host allow-list. `mode` says which
/// credentials `/mcp` accepts.
pub fn http_app(
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
    mode: AuthMode,
    oauth: Option<Arc<OAuth>>,
    public_hosts: &[String],
) -> Router {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(gateway.config.allowed_hosts.iter().cloned());
    hosts.extend(public_hosts.iter().cloned());
    let allowed_hosts = AllowedHosts::new(hosts.iter().map(String::as_str));
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
    let credentials = Credentials {
        static_token: mode
            .static_token()
            .then(|| gateway.config.access_token.as_str().into()),
        oauth: oauth.clone().filter(|_| mode.oauth()),
    };
    let handler = GatewayMcp::new(gateway);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let mcp = Router::new()
        .route_service("/mcp", service.clone())
        .route_service("/mcp/", service.clone())
        .route_service("/mcp/{token}", service.clone())
        .route_service("/mcp/{token}/", service)
        .route_layer(middleware::from_fn_with_state(limits, json_rpc_body))
        .route_layer(middleware::from_fn_with_state(
            credentials,
            require_access_token,
        ));
    let app = match oauth.filter(|_| mode.oauth()) {
        Some(oauth) => mcp.merge(crate::oauth::routes(oauth, limits.read_timeout)),
        None => mcp,
    };
    // Outermost: no route (credentials or not, OAuth, metadata, unknown paths) answers a Host
    // that is not ours. rmcp's own check on /mcp stays as a second line.
    app.layer(middleware::from_fn_with_state(
        allowed_hosts,
        require_allowed_host,
    ))
}

/// Largest request body: a reply's 768 KiB budget, JSON-escaped, fits with room to spare.
const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

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
