//! The six public tools: [`PublicTool`] owns their names, titles, descriptions, annotations and
//! input schemas (what `tools/list` advertises) and dispatches a call to the tool's handler. Each
//! tool's file holds its arguments, its checks and its handler; the checks they share are here.

mod continue_session;
mod recover;
mod reply;
mod start;
mod status;
mod stop;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use common::hash::canonical_sha256;
use common::schema::{Contract, schema_for};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ToolError;
use crate::session::Gateway;
use crate::view::{REPLY_BUDGET_BYTES, SessionView, output_schema};

pub use reply::ReplyCall;
#[cfg(test)]
pub(crate) use reply::approve as approve_calls;
pub use start::{SkillContext, StartRequest};

/// Longest a start or continue waits for the runner's first turn by default.
pub const DEFAULT_START_WAIT: u64 = 30;
/// Longest any call may wait: ChatGPT abandons a tool call after about 60 s.
const MAX_WAIT_SECONDS: u64 = 50;

/// The public tools, in the order they are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicTool {
    Start,
    Continue,
    ReplyAndWait,
    Status,
    Recover,
    Stop,
}

/// MCP tool annotations (all four are always sent).
struct Hints {
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
}

impl PublicTool {
    pub const ALL: [PublicTool; 6] = [
        Self::Start,
        Self::Continue,
        Self::ReplyAndWait,
        Self::Status,
        Self::Recover,
        Self::Stop,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Start => "native_session_start",
            Self::Continue => "native_session_continue",
            Self::ReplyAndWait => "native_session_reply_and_wait",
            Self::Status => "native_session_status",
            Self::Recover => "native_session_recover",
            Self::Stop => "native_session_stop",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    fn title(self) -> &'static str {
        match self {
            Self::Start => "Start a native session",
            Self::Continue => "Continue a native session",
            Self::ReplyAndWait => "Answer the pending turn",
            Self::Status => "Session status",
            Self::Recover => "Recover a session",
            Self::Stop => "Stop a session",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::Start => start::DESCRIPTION,
            Self::Continue => continue_session::DESCRIPTION,
            Self::ReplyAndWait => reply::DESCRIPTION,
            Self::Status => status::DESCRIPTION,
            Self::Recover => recover::DESCRIPTION,
            Self::Stop => stop::DESCRIPTION,
        }
    }

    fn hints(self) -> Hints {
        let (read_only, destructive) = match self {
            Self::Status => (true, false),
            Self::ReplyAndWait | Self::Stop => (false, true),
            Self::Start | Self::Continue | Self::Recover => (false, false),
        };
        Hints {
            read_only,
            destructive,
            // Every tool is idempotent by key (or reads only); none reaches beyond the owner's
            // computer.
            idempotent: true,
            open_world: false,
        }
    }

    fn input_schema(self) -> Value {
        fn input<T: JsonSchema>() -> Value {
            let mut value = schema_for::<T>(Contract::Input);
            if let Some(map) = value.as_object_mut() {
                map.remove("description");
            }
            value
        }
        match self {
            Self::Start => input::<start::StartArgs>(),
            Self::Continue => input::<continue_session::ContinueArgs>(),
            Self::ReplyAndWait => input::<reply::ReplyArgs>(),
            Self::Status => input::<status::StatusArgs>(),
            Self::Recover => input::<recover::RecoverArgs>(),
            Self::Stop => input::<stop::StopArgs>(),
        }
    }

    /// Which argument fields do not change what a request means (its replay identity).
    fn hash_ignores(self) -> &'static [&'static str] {
        match self {
            Self::Recover => &["wait_seconds", "recovery_token"],
            _ => &["wait_seconds", "lease_id"],
        }
    }

    /// Run the tool on `arguments`.
    pub async fn call(
        self,
        gateway: &Arc<Gateway>,
        arguments: Value,
    ) -> Result<SessionView, ToolError> {
        let hash = request_hash(&arguments, self.hash_ignores());
        match self {
            Self::Start => start::handle(gateway, parse(&arguments)?, hash).await,
            Self::Continue => continue_session::handle(gateway, parse(&arguments)?, &hash).await,
            Self::ReplyAndWait => reply::handle(gateway, parse(&arguments)?, &hash).await,
            Self::Status => status::handle(gateway, parse(&arguments)?).await,
            Self::Recover => recover::handle(gateway, parse(&arguments)?, &hash).await,
            Self::Stop => stop::handle(gateway, parse(&arguments)?, &hash).await,
        }
    }
}

/// The tool list exactly as advertised.
pub fn listing() -> Vec<Tool> {
    let output_schema = Arc::new(match output_schema() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    });
    PublicTool::ALL
        .into_iter()
        .map(|tool| {
            let hints = tool.hints();
            let input = match tool.input_schema() {
                Value::Object(map) => map,
                _ => JsonObject::new(),
            };
            Tool::new(tool.name(), tool.description(), Arc::new(input))
                .with_title(tool.title())
                .with_raw_output_schema(output_schema.clone())
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(hints.read_only)
                        .destructive(hints.destructive)
                        .idempotent(hints.idempotent)
                        .open_world(hints.open_world),
                )
        })
        .collect()
}

/// Canonical hash of a request's arguments without the fields that do not change its meaning.
pub fn request_hash(arguments: &Value, ignore: &[&str]) -> String {
    let mut args = arguments.clone();
    if let Some(map) = args.as_object_mut() {
        for key in ignore {
            map.remove(*key);
        }
    }
    canonical_sha256(&args)
}

fn parse<T: DeserializeOwned>(arguments: &Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments.clone()).map_err(|e| {
        ToolError::invalid(format!(
            "invalid arguments: {e}; see the tool's input schema"
        ))
    })
}

/// `wait_seconds`, or `default` when it was left out.
fn wait_seconds(value: Option<u64>, default: u64) -> Result<u64, ToolError> {
    let seconds = value.unwrap_or(default);
    if seconds > MAX_WAIT_SECONDS {
        return Err(ToolError::invalid(format!(
            "wait_seconds must be between 0 and {MAX_WAIT_SECONDS} (ChatGPT abandons a call after \
             about 60 s), got {seconds}; wait again with native_session_status"
        )));
    }
    Ok(seconds)
}

/// A prompt (of start or continue): not blank, within the reply budget.
fn check_prompt(prompt: &str) -> Result<(), ToolError> {
    if prompt.trim().is_empty() {
        return Err(ToolError::invalid(
            "prompt must not be empty; send the user's request as prompt",
        ));
    }
    if prompt.len() as u64 > REPLY_BUDGET_BYTES {
        return Err(ToolError::invalid(
            "prompt is larger than 768 KiB; shorten it",
        ));
    }
    Ok(())
}

/// An idempotency key, reply, request or recovery id: 1 to 200 printable ASCII characters
/// without spaces (a UUID, `reply-3`): it is stored, compared and shown to the owner, so nothing
/// in it may act on a terminal.
fn check_key(field: &str, key: &str) -> Result<(), ToolError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(ToolError::invalid(format!(
            "{field} must be 1 to {MAX_KEY_BYTES} characters; send a new short unique string"
        )));
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ToolError::invalid(format!(
            "{field} may hold only printable ASCII characters without spaces (letters, digits, \
             punctuation such as - _ . :); send a new short unique string such as a UUID"
        )));
    }
    Ok(())
}

pub use crate::error::MAX_SESSION_ID_BYTES;
pub(crate) use crate::error::shown;

/// Longest `working_directory` accepted, in bytes (a path the kernel could open).
pub const MAX_WORKING_DIRECTORY_BYTES: usize = 4096;

/// Longest `session_label`, in characters.
pub const MAX_LABEL_CHARS: usize = 200;

/// A session label: at most 200 characters of plain one-line text
/// ([`common::display::is_plain`]): the owner sees it in `gatewayctl`.
pub(crate) fn check_label(label: &str) -> Result<(), ToolError> {
    if label.chars().count() > MAX_LABEL_CHARS {
        return Err(ToolError::invalid(format!(
            "session_label is longer than {MAX_LABEL_CHARS} characters; give a short name"
        )));
    }
    if !common::display::is_plain(label) {
        return Err(ToolError::invalid(format!(
            "session_label must be plain text on one line: letters, digits, punctuation, \
             symbols, emoji and ordinary spaces (U+0020), at most {} combining marks on a \
             character; no control, bidi, format or invisible characters, no other kind of \
             space, no private-use or unassigned code points. Give a plain short name",
            common::display::MAX_MARKS
        )));
    }
    Ok(())
}

/// Longest idempotency key or request id.
const MAX_KEY_BYTES: usize = 200;
