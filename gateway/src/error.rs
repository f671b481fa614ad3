//! Public tool errors: a stable code and a message that tells the caller what to do, and their
//! result shape. Nothing in a
//! message may name an internal path, a PID, a token or a secret.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Stable error codes of the public contract.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    InvalidArgument,
    IdempotencyConflict,
    LeaseInvalid,
    LeaseExpired,
    NotFound,
    TurnMismatch,
    NotPermitted,
    ReplyTooLarge,
    SessionTerminal,
    RecoveryDenied,
    Busy,
    // The directory the session works in was replaced or moved since it started.
    WorkspaceChanged,
    // The state dir is at its disk budget (CLAUDE_TOOLS_STATE_MAX_MB): new work is refused.
    StorageFull,
    // The ledger was changed outside the gateway (`gatewayctl verify`): it accepts no changes.
    LedgerBroken,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A refused call: what `structuredContent` holds when `isError` is true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorResult {
    pub error: ErrorBody,
}

/// The stable code and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

/// A refusal returned to ChatGPT as a tool error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// The tool error as its result shape, `{error: {code, message}}`.
    pub fn to_result(&self) -> ErrorResult {
        ErrorResult {
            error: ErrorBody {
                code: self.code,
                message: self.message.clone(),
            },
        }
    }

    /// The JSON body of the tool error.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.to_result()).unwrap_or_else(
            |_| serde_json::json!({"error": {"code": self.code.as_str(), "message": self.message}}),
        )
    }
}

impl From<crate::state::StoreError> for ToolError {
    fn from(err: crate::state::StoreError) -> Self {
        if let crate::state::StoreError::LedgerBroken(why) = &err {
            // The row named goes to the log; the caller learns what happened and who acts.
            tracing::error!("ledger integrity: {why}");
            return ToolError::new(
                ErrorCode::LedgerBroken,
                "the gateway's ledger was changed outside the gateway (its state database was \
                 edited); nothing was changed, and the gateway accepts no changes until its \
                 owner runs `gatewayctl verify` and restores the state. Tell the owner",
            );
        }
        // The detail goes to the log, not to the caller: it may name internal paths.
        tracing::error!("state store failure: {err}");
        ToolError::new(
            ErrorCode::Internal,
            "the gateway could not read or write its state; nothing was changed. Retry; if it \
             persists, the owner should check the gateway log",
        )
    }
}

/// Longest `native_session_id` accepted, in bytes (the gateway gives `ns_` + 32 hex digits).
pub const MAX_SESSION_ID_BYTES: usize = 64;

/// How much of a refused value an error echoes, in characters.
const SHOWN_CHARS: usize = 48;

/// A refused value as an error shows it: quoted, at most [`SHOWN_CHARS`] characters of it, then
/// `…` and its full length (a 1 MiB value never comes back whole).
pub(crate) fn shown(value: &str) -> String {
    let count = value.chars().count();
    if count <= SHOWN_CHARS {
        return format!("{value:?}");
    }
    let prefix: String = value.chars().take(SHOWN_CHARS).collect();
    format!("{prefix:?}… ({} bytes)", value.len())
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;
    use strum::VariantArray;

    #[test]
    fn every_error_code_round_trips_and_is_documented() {
        let mut ours = Vec::new();
        for &code in ErrorCode::VARIANTS {
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire, serde_json::Value::from(code.as_str()));
            assert_eq!(serde_json::from_value::<ErrorCode>(wire).unwrap(), code);
            assert_eq!(code.as_str().parse::<ErrorCode>().unwrap(), code);
            ours.push(code.as_str().to_string());
        }
        let note = include_str!("../../docs/design/mcp-surface.md");
        let mut doc = common::outcome::documented_codes(note, "## Tool error codes");
        ours.sort_unstable();
        doc.sort_unstable();
        assert_eq!(
            ours, doc,
            "docs/design/mcp-surface.md (## Tool error codes) lists every code"
        );
    }
}
