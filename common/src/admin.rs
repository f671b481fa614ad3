//! The owner's admin socket protocol (`<state>/run/admin.sock`): what `gatewayctl` asks the running
//! gateway, and what it answers. One JSON line each way; the codec is `encode`/`decode` here, used
//! by both ends. Each request carries the protocol version, so a gatewayctl of another version is
//! told so instead of being misread.

use serde::{Deserialize, Serialize};

/// The version both ends speak. A request of another version is refused with
/// [`AdminErrorCode::VersionMismatch`].
pub const ADMIN_PROTOCOL_VERSION: u32 = 1;

/// Longest request line the gateway reads.
pub const MAX_REQUEST_BYTES: u64 = 4096;

/// gatewayctl → gateway: one request line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminCall {
    pub version: u32,
    pub request: AdminRequest,
}

impl AdminCall {
    /// A request in this build's protocol version.
    pub fn new(request: AdminRequest) -> Self {
        AdminCall {
            version: ADMIN_PROTOCOL_VERSION,
            request,
        }
    }
}

/// What the owner asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum AdminRequest {
    /// Auth mode, issuer and resource of the running gateway, and the auto-run classes it allows.
    Status,
    /// A new one-time approval code for the consent page whose page code is `page` (without
    /// one the gateway refuses, saying to name the page).
    Approve {
        #[serde(default)]
        page: Option<String>,
    },
    /// Revoke a grant, or a client with all its grants.
    Revoke { id: String },
    /// The consent pages opened lately and still open (a short list in the gateway's memory).
    Pages,
    /// Remove ended sessions' files and database content untouched for `older_than_seconds`
    /// (default: the retention).
    Prune {
        #[serde(default)]
        older_than_seconds: Option<u64>,
        #[serde(default)]
        dry_run: bool,
    },
}

/// gateway → gatewayctl: one answer line, a variant per request, or a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case", deny_unknown_fields)]
pub enum AdminAnswer {
    Status(Box<GatewayStatus>),
    ApprovalCode(ApprovalCode),
    Revoked(Revoked),
    Pages(WaitingPages),
    Pruned(Pruned),
    Refused(Refusal),
}

/// The running gateway's auth mode (`token`, `oauth` or `both`), its OAuth issuer and resource
/// when OAuth is on, and the auto-run classes its sessions may write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayStatus {
    pub auth: String,
    pub issuer: Option<String>,
    pub resource: Option<String>,
    pub autorun_allowed: Vec<String>,
    /// Whether writes refuse the definitions of the checks git hooks run
    /// (`CLAUDE_TOOLS_STRICT_HOOKS`).
    #[serde(default)]
    pub strict_hooks: bool,
    /// Where its MCP endpoint listens (`127.0.0.1:8787`): gatewayctl sends the owner's token
    /// to no other address (red team 39 F7).
    #[serde(default)]
    pub listen: Option<String>,
    /// The confinement its sessions get, as its own process probed it (the SessionView's
    /// `network_boundary`): what `doctor` reports, not gatewayctl's own probe (red team 39,
    /// class 9: a gateway under a service's syscall filter has less than gatewayctl has).
    #[serde(default)]
    pub confinement: Option<Confinement>,
}

/// The fields of a `network_boundary` `doctor` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confinement {
    pub runner: String,
    pub runner_writes: String,
    pub enforced_by: String,
    pub commands_enforced_by: String,
    pub degraded: bool,
}

impl Confinement {
    /// The fields of a `network_boundary` object (`sandbox::boundary::network_boundary`).
    pub fn of_boundary(boundary: &serde_json::Value) -> Self {
        let field = |key: &str| boundary[key].as_str().unwrap_or("unknown").to_string();
        Confinement {
            runner: field("runner"),
            runner_writes: field("runner_writes"),
            enforced_by: field("enforced_by"),
            commands_enforced_by: field("commands_enforced_by"),
            degraded: boundary["degraded"] != serde_json::Value::Bool(false),
        }
    }

    /// One line: `runner network … and writes … (…); commands …`.
    pub fn summary(&self) -> String {
        format!(
            "runner network {} and writes {} ({}); commands {}",
            self.runner, self.runner_writes, self.enforced_by, self.commands_enforced_by
        )
    }
}

/// A one-time approval code and the consent page it approves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalCode {
    pub approval_code: String,
    pub expires_in_seconds: u64,
    /// The page code it approves (`abcd-efgh`).
    #[serde(default)]
    pub page_code: String,
    /// That page as the gateway saw it lately: empty when it is not among the pages opened
    /// lately (pushed out by newer ones, or never opened).
    pub waiting: Vec<WaitingPage>,
}

/// The consent page an approval code approves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitingPage {
    pub client_name: String,
    pub redirect_host: String,
}

/// The consent pages waiting for the owner, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitingPages {
    pub pages: Vec<PendingPage>,
}

/// One consent page waiting: its client, where the answer goes, and how long it stays open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingPage {
    /// The page code the owner names to `approve` (`abcd-efgh`).
    #[serde(default)]
    pub page_code: String,
    pub client_id: String,
    pub client_name: String,
    pub redirect_host: String,
    pub expires_in_seconds: u64,
}

/// What a revocation removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revoked {
    pub revoked: RevokedKind,
    pub id: String,
}

/// A grant alone, or a client with all its grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevokedKind {
    Client,
    Grant,
}

/// What a prune removed (or, with `dry_run`, would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pruned {
    pub dry_run: bool,
    pub older_than_seconds: u64,
    /// Bytes of files (ended sessions' runtime dirs).
    pub bytes: u64,
    /// Bytes of database content (ended sessions' turns, replies, actions, answers).
    #[serde(default)]
    pub content_bytes: u64,
    /// How much smaller the database file and its WAL became (0 in a dry run).
    #[serde(default)]
    pub database_bytes: u64,
    pub sessions: Vec<PrunedSession>,
}

/// One ended session whose files or database content a prune removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrunedSession {
    pub session_id: String,
    /// Bytes of its files.
    pub bytes: u64,
    /// Bytes of its database content.
    #[serde(default)]
    pub content_bytes: u64,
}

/// A refused request: a stable code and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    pub error: AdminErrorCode,
    pub message: String,
}

/// Why the gateway refused an admin request.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AdminErrorCode {
    /// Another user, or a confined process (a runner or a command).
    Forbidden,
    /// Not a request of this protocol.
    InvalidRequest,
    /// gatewayctl and the gateway speak different protocol versions.
    VersionMismatch,
    /// OAuth is off on this gateway.
    OauthOff,
    /// No consent page is open to approve.
    NothingWaiting,
    /// No client or grant has that id.
    NotFound,
    /// The gateway failed; its log says why.
    Internal,
}

impl AdminAnswer {
    /// A refusal with its code and message.
    pub fn refused(error: AdminErrorCode, message: impl Into<String>) -> Self {
        AdminAnswer::Refused(Refusal {
            error,
            message: message.into(),
        })
    }
}

/// One line of the protocol (without its newline).
pub fn encode<T: Serialize>(message: &T) -> String {
    // These types hold only strings, numbers and lists: serialising them cannot fail.
    serde_json::to_string(message).unwrap_or_else(|_| String::from("{}"))
}

/// A request line as the gateway reads it: the call, or the refusal to answer.
pub fn decode_call(line: &str) -> Result<AdminRequest, AdminAnswer> {
    #[derive(Deserialize)]
    struct Versioned {
        version: Option<u32>,
    }
    let version = serde_json::from_str::<Versioned>(line)
        .ok()
        .and_then(|v| v.version);
    if version != Some(ADMIN_PROTOCOL_VERSION) {
        return Err(AdminAnswer::refused(
            AdminErrorCode::VersionMismatch,
            format!(
                "this gateway speaks admin protocol version {ADMIN_PROTOCOL_VERSION} and the \
                 request is {}; use the gatewayctl built with this gateway",
                version.map_or_else(|| "unversioned".to_string(), |v| format!("version {v}"))
            ),
        ));
    }
    serde_json::from_str::<AdminCall>(line)
        .map(|call| call.request)
        .map_err(|err| {
            AdminAnswer::refused(
                AdminErrorCode::InvalidRequest,
                format!("not an admin request: {err}"),
            )
        })
}

/// An answer line as gatewayctl reads it.
pub fn decode_answer(line: &str) -> Result<AdminAnswer, serde_json::Error> {
    serde_json::from_str(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_round_trips_and_other_versions_are_refused() {
        let call = AdminCall::new(AdminRequest::Prune {
            older_than_seconds: Some(60),
            dry_run: true,
        });
        let line = encode(&call);
        assert_eq!(decode_call(&line), Ok(call.request));
        let old = r#"{"op":"status"}"#;
        let refused = |line: &str| match decode_call(line) {
            Err(AdminAnswer::Refused(r)) => r.error,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(refused(old), AdminErrorCode::VersionMismatch);
        assert_eq!(
            refused(r#"{"version":2,"request":{"op":"status"}}"#),
            AdminErrorCode::VersionMismatch
        );
        assert_eq!(
            refused(r#"{"version":1,"request":{"op":"drop_tables"}}"#),
            AdminErrorCode::InvalidRequest
        );
        assert_eq!(
            refused(r#"{"version":1,"request":{"op":"status"},"extra":1}"#),
            AdminErrorCode::InvalidRequest
        );
    }

    #[test]
    fn answers_round_trip() {
        for answer in [
            AdminAnswer::refused(AdminErrorCode::OauthOff, "off"),
            AdminAnswer::Revoked(Revoked {
                revoked: RevokedKind::Client,
                id: "client_x".into(),
            }),
            AdminAnswer::Pages(WaitingPages {
                pages: vec![PendingPage {
                    page_code: "abcd-efgh".into(),
                    client_id: "ngc_x".into(),
                    client_name: "ChatGPT".into(),
                    redirect_host: "chatgpt.com".into(),
                    expires_in_seconds: 600,
                }],
            }),
            AdminAnswer::Pruned(Pruned {
                dry_run: false,
                older_than_seconds: 5,
                bytes: 7,
                content_bytes: 9,
                database_bytes: 8,
                sessions: vec![PrunedSession {
                    session_id: "ns_a".into(),
                    bytes: 7,
                    content_bytes: 9,
                }],
            }),
        ] {
            assert_eq!(decode_answer(&encode(&answer)).unwrap(), answer);
        }
        assert_eq!(
            encode(&AdminAnswer::refused(AdminErrorCode::NothingWaiting, "m")),
            r#"{"answer":"refused","error":"nothing_waiting","message":"m"}"#
        );
    }
}
