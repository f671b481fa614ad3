//! Logical tools (what ChatGPT may call and Claude Code sees as `mcp__gw__<Name>`), capability
//! profiles, subagent policies, tool argument types and the result shapes of executed actions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest `output` of one tool result, and of each command stream.
pub const MAX_TOOL_OUTPUT_BYTES: usize = 64 * 1024;

/// What a session may do; fixed at start.
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
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CapabilityProfile {
    ReadOnly,
    DirectWrite,
    WorktreeWrite,
}

impl CapabilityProfile {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Whether the session may delegate to sub-sessions; fixed at start.
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
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SubagentPolicy {
    None,
    DeepseekExplicit,
}

impl SubagentPolicy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A tool ChatGPT may ask the runner to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogicalTool {
    Read,
    FindFiles,
    SearchText,
    RunCommand,
    Edit,
    Write,
    NotebookEdit,
    #[serde(rename = "deepseek_subagent_start")]
    DeepseekSubagentStart,
    #[serde(rename = "deepseek_subagent_get")]
    DeepseekSubagentGet,
    #[serde(rename = "deepseek_subagent_stop")]
    DeepseekSubagentStop,
}

/// Prefix Claude Code puts before our MCP tools (server name `gw`).
pub const RUNNER_TOOL_PREFIX: &str = "mcp__gw__";

impl LogicalTool {
    pub const ALL: [LogicalTool; 10] = [
        Self::Read,
        Self::FindFiles,
        Self::SearchText,
        Self::RunCommand,
        Self::Edit,
        Self::Write,
        Self::NotebookEdit,
        Self::DeepseekSubagentStart,
        Self::DeepseekSubagentGet,
        Self::DeepseekSubagentStop,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "Read",
            Self::FindFiles => "FindFiles",
            Self::SearchText => "SearchText",
            Self::RunCommand => "RunCommand",
            Self::Edit => "Edit",
            Self::Write => "Write",
            Self::NotebookEdit => "NotebookEdit",
            Self::DeepseekSubagentStart => "deepseek_subagent_start",
            Self::DeepseekSubagentGet => "deepseek_subagent_get",
            Self::DeepseekSubagentStop => "deepseek_subagent_stop",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// Whether a session with this profile and policy may call the tool at all.
    pub fn permitted(self, profile: CapabilityProfile, policy: SubagentPolicy) -> bool {
        match self {
            Self::Read | Self::FindFiles | Self::SearchText | Self::RunCommand => true,
            Self::Edit | Self::Write | Self::NotebookEdit => profile != CapabilityProfile::ReadOnly,
            Self::DeepseekSubagentStart
            | Self::DeepseekSubagentGet
            | Self::DeepseekSubagentStop => {
                profile == CapabilityProfile::WorktreeWrite
                    && policy == SubagentPolicy::DeepseekExplicit
            }
        }
    }

    /// The DeepSeek sub-session controls: carried out by the gateway when it accepts the reply
    /// (their outcome travels with the approval), never by the broker's executor. Their
    /// arguments parse to [`ParsedArgs::Gateway`], the others' to [`ParsedArgs::Executor`].
    pub fn executed_by_gateway(self) -> bool {
        matches!(
            self,
            Self::DeepseekSubagentStart | Self::DeepseekSubagentGet | Self::DeepseekSubagentStop
        )
    }

    /// Whether the tool changes files (its action goes through the durable write protocol).
    pub fn writes(self) -> bool {
        matches!(self, Self::Edit | Self::Write | Self::NotebookEdit)
    }

    /// The tools a session offers, in a fixed order.
    pub fn offered(profile: CapabilityProfile, policy: SubagentPolicy) -> Vec<LogicalTool> {
        Self::ALL
            .into_iter()
            .filter(|tool| tool.permitted(profile, policy))
            .collect()
    }

    pub fn runner_name(self) -> String {
        format!("{RUNNER_TOOL_PREFIX}{}", self.name())
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::Read => {
                "Read a UTF-8 text file by absolute path, anywhere on the computer except protected \
                 places (credential stores, the gateway's state, .git), which are refused. Optional \
                 1-based line offset and line limit. Output is at most 64 KiB; the receipt carries \
                 the SHA-256 of the bytes read."
            }
            Self::FindFiles => {
                "List files under an absolute directory (default: the working directory), sorted, \
                 without following symlinks; optional literal name filter, depth and result bounds. \
                 One entry per line; a path holding control characters, invalid UTF-8, `\\` or a \
                 leading `\"` is shown quoted, with escapes (`\\n`, `\\xNN`...)."
            }
            Self::SearchText => {
                "Search file contents for a literal UTF-8 string (no regex, no glob) under an absolute \
                 directory; results are `path:line: text`, sorted, bounded to 64 KiB. Paths are \
                 quoted and escaped as in FindFiles."
            }
            Self::RunCommand => {
                "Run an exact argv (no shell) in an OS sandbox to build, test or inspect: no \
                 network, no signals outside the command, protected places hidden. The executable \
                 is an absolute path, a name on the owner's PATH, or a relative path inside the \
                 working directory, run as given. Writes (builds, caches) land in the session's \
                 private copy-on-write layer, kept across its commands and discarded at stop; \
                 real files change only through Edit, Write and NotebookEdit (network_boundary \
                 says when a host gives a read-only view instead). `cwd` defaults to the working \
                 directory; timeout 120 s by default, at most 600 s. stdout and stderr share one \
                 64 KiB result (each gets half of what the other does not use; `truncated` says \
                 when cut). The receipt has the exit code."
            }
            Self::Edit => {
                "Replace an exact string in a UTF-8 file inside the working directory. \
                 `old_string` must occur exactly once unless `replace_all`; otherwise the error \
                 says how many times it occurs. `expected_sha256` (from a Read receipt) refuses \
                 the edit if the file changed since. Durable compare-and-swap write; the receipt \
                 has the SHA-256 before and after."
            }
            Self::Write => {
                "Create or overwrite a whole file inside the working directory (missing parent \
                 directories inside it are created). `expected_sha256` refuses the write if the \
                 file's current SHA-256 differs. Durable compare-and-swap write; the receipt has \
                 the SHA-256 before (absent for a new file) and after."
            }
            Self::NotebookEdit => {
                "Edit one cell of an nbformat 4 notebook inside the working directory, addressed \
                 by cell `id`: replace its source, insert a new cell after it (first when no \
                 `cell_id`), or delete it. Other cells, metadata and outputs are kept; nothing is \
                 executed. Durable compare-and-swap write with a SHA-256 receipt."
            }
            Self::DeepseekSubagentStart => {
                "Delegate one task to a DeepSeek sub-session: a second, confined Claude Code in this \
                 session's worktree whose model is DeepSeek, with our audited tools (writes only in \
                 the worktree). `tier` picks the model: sonnet (default) or opus -> DeepSeek Flash, \
                 fable -> DeepSeek Pro; no fallback. Must be the only call in its reply. While it \
                 runs, Edit, Write, NotebookEdit, RunCommand and another start are refused (busy); \
                 read tools, get and stop stay allowed. Returns its subsession_id; poll with \
                 deepseek_subagent_get, end it early with deepseek_subagent_stop (stopping the \
                 session stops it too)."
            }
            Self::DeepseekSubagentGet => {
                "Status of a DeepSeek sub-session of this session: starting, running, succeeded, \
                 failed, stopped or lost; times, its final text (bounded), every action it took \
                 with receipts, and the error if any."
            }
            Self::DeepseekSubagentStop => {
                "Stop a DeepSeek sub-session of this session (its process group); returns its \
                 final status once the stop is recorded."
            }
        }
    }

    /// JSON Schema of the tool's arguments.
    pub fn input_schema(self) -> Value {
        use crate::schema::{Contract, schema_for};
        match self {
            Self::Read => schema_for::<ReadArgs>(Contract::Input),
            Self::FindFiles => schema_for::<FindFilesArgs>(Contract::Input),
            Self::SearchText => schema_for::<SearchTextArgs>(Contract::Input),
            Self::RunCommand => schema_for::<RunCommandArgs>(Contract::Input),
            Self::Edit => schema_for::<EditArgs>(Contract::Input),
            Self::Write => schema_for::<WriteArgs>(Contract::Input),
            Self::NotebookEdit => schema_for::<NotebookEditArgs>(Contract::Input),
            Self::DeepseekSubagentStart => schema_for::<DeepseekStartArgs>(Contract::Input),
            Self::DeepseekSubagentGet | Self::DeepseekSubagentStop => {
                schema_for::<SubsessionArgs>(Contract::Input)
            }
        }
    }

    /// Parse and validate arguments for this tool, typed by who carries the call out; the error
    /// says what is wrong.
    pub fn parse_args(self, arguments: &Value) -> Result<ParsedArgs, ArgsError> {
        fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, ArgsError> {
            Ok(serde_json::from_value(v.clone())?)
        }
        if !arguments.is_object() {
            return Err(ArgsError::NotAnObject);
        }
        let executor = |args: ToolArgs| -> Result<ParsedArgs, ArgsError> {
            args.validate()?;
            Ok(ParsedArgs::Executor(args))
        };
        let gateway = |args: GatewayToolArgs| -> Result<ParsedArgs, ArgsError> {
            args.validate()?;
            Ok(ParsedArgs::Gateway(args))
        };
        match self {
            Self::Read => executor(ToolArgs::Read(parse(arguments)?)),
            Self::FindFiles => executor(ToolArgs::FindFiles(parse(arguments)?)),
            Self::SearchText => executor(ToolArgs::SearchText(parse(arguments)?)),
            Self::RunCommand => executor(ToolArgs::RunCommand(parse(arguments)?)),
            Self::Edit => executor(ToolArgs::Edit(parse(arguments)?)),
            Self::Write => executor(ToolArgs::Write(parse(arguments)?)),
            Self::NotebookEdit => executor(ToolArgs::NotebookEdit(parse(arguments)?)),
            Self::DeepseekSubagentStart => {
                gateway(GatewayToolArgs::SubsessionStart(parse(arguments)?))
            }
            Self::DeepseekSubagentGet => gateway(GatewayToolArgs::SubsessionGet(parse(arguments)?)),
            Self::DeepseekSubagentStop => {
                gateway(GatewayToolArgs::SubsessionStop(parse(arguments)?))
            }
        }
    }
}

/// A logical tool call's parsed, validated arguments, by who carries the call out.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedArgs {
    /// Run by the broker's executor once the runner calls it.
    Executor(ToolArgs),
    /// Carried out by the gateway when it accepts the reply; the broker only hands the runner
    /// the outcome that travels with the approval.
    Gateway(GatewayToolArgs),
}

/// Why a logical tool's arguments were refused; the text says what to send instead.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("arguments must be a JSON object")]
    NotAnObject,
    /// They do not fit the tool's schema (serde says where).
    #[error("{0}")]
    Schema(#[from] serde_json::Error),
    #[error("{field} must be an absolute path, got {got:?}")]
    NotAbsolute { field: &'static str, got: String },
    #[error("expected_sha256 must be 64 hex digits (a SHA-256), got {0:?}")]
    NotSha256(String),
    #[error("{field} is larger than {MAX_WRITE_ARGUMENT_BYTES} bytes; split the change")]
    TooLarge { field: &'static str },
    #[error("argv must have between 1 and {MAX_ARGV_ITEMS} items, got {0}")]
    ArgvCount(usize),
    #[error("argv[{0}] contains a NUL byte")]
    ArgvNul(usize),
    #[error("argv[{0}] is longer than {MAX_ARG_BYTES} bytes")]
    ArgvItemTooLong(usize),
    #[error("timeout_seconds must be between 1 and {MAX_COMMAND_TIMEOUT_SECONDS}")]
    Timeout,
    /// A rule of one field or between fields, in words.
    #[error("{0}")]
    Rule(&'static str),
}

/// Arguments of `Read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Absolute path of the file.
    pub file_path: String,
    /// First line to return, 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Number of lines to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// Arguments of `FindFiles`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFilesArgs {
    /// Absolute directory to list; default the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Literal substring the file name must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_contains: Option<String>,
    /// Deepest level to descend (1 = the directory's own entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub max_depth: Option<u32>,
    /// Most entries to return (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_results: Option<u32>,
}

/// Arguments of `SearchText`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchTextArgs {
    /// Literal UTF-8 text to find (no regex, no glob).
    pub query: String,
    /// Absolute directory or file to search; default the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Match case exactly (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sensitive: Option<bool>,
    /// Most matches to return (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_results: Option<u32>,
}

/// Most argv items of one `RunCommand`.
pub const MAX_ARGV_ITEMS: usize = 4096;
/// Most bytes of one argv item (Linux `MAX_ARG_STRLEN`).
pub const MAX_ARG_BYTES: usize = 128 * 1024;
/// Default wall-clock bound of one `RunCommand`, seconds.
pub const DEFAULT_COMMAND_TIMEOUT_SECONDS: u32 = 120;
/// Largest wall-clock bound of one `RunCommand`, seconds.
pub const MAX_COMMAND_TIMEOUT_SECONDS: u32 = 600;

/// Arguments of `RunCommand`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandArgs {
    /// The exact argv, no shell; `argv[0]`: absolute path, name on the owner's PATH, or relative
    /// path inside the working directory, run as given (a venv keeps its venv). Writes land in
    /// the session's copy-on-write layer, kept across its commands; real files stay unchanged.
    #[schemars(length(min = 1, max = 4096))]
    pub argv: Vec<String>,
    /// Directory to run in: absolute inside the working directory, or relative to it. Default:
    /// the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Wall-clock bound in seconds (default 120, at most 600); the whole process group is killed
    /// when it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<u32>,
    /// Discard what earlier commands wrote (builds, caches): run on a clean layer, also when it
    /// is over its budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh_layer: bool,
}

impl RunCommandArgs {
    /// The effective wall-clock bound.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            self.timeout_seconds
                .unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECONDS),
        ))
    }
}

/// Arguments of `Edit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// Absolute path of the file, inside the working directory.
    pub file_path: String,
    /// The exact text to replace (whitespace included); must occur exactly once unless
    /// `replace_all`.
    pub old_string: String,
    /// The replacement text.
    pub new_string: String,
    /// Replace every occurrence (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_all: Option<bool>,
    /// Refuse the edit unless the file's current SHA-256 is this (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_sha256: Option<String>,
}

/// Arguments of `Write`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// Absolute path of the file, inside the working directory.
    pub file_path: String,
    /// The whole new content (UTF-8).
    pub content: String,
    /// Refuse the write unless the file's current SHA-256 is this (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_sha256: Option<String>,
}

/// What `NotebookEdit` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotebookEditMode {
    Replace,
    Insert,
    Delete,
}

/// Kind of a notebook cell.
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
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CellType {
    Code,
    Markdown,
    Raw,
}

impl CellType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Arguments of `NotebookEdit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookEditArgs {
    /// Absolute path of the `.ipynb` file, inside the working directory.
    pub notebook_path: String,
    /// The cell to replace or delete, or to insert after (omit to insert at the top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_id: Option<String>,
    /// `replace`, `insert` or `delete`.
    pub edit_mode: NotebookEditMode,
    /// The cell's new source (replace, insert).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_source: Option<String>,
    /// Kind of an inserted cell (default code), or a replaced cell's new kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_type: Option<CellType>,
    /// Refuse the edit unless the file's current SHA-256 is this (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_sha256: Option<String>,
}

/// Largest `content`/`new_string`/`new_source` a write accepts, bytes (the reply budget bounds it
/// anyway).
pub const MAX_WRITE_ARGUMENT_BYTES: usize = 768 * 1024;

/// Parsed, validated arguments of a call the broker's executor runs (the gateway's own tools are
/// [`GatewayToolArgs`]: the executor has no arm for what it never runs).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArgs {
    Read(ReadArgs),
    FindFiles(FindFilesArgs),
    SearchText(SearchTextArgs),
    RunCommand(RunCommandArgs),
    Edit(EditArgs),
    Write(WriteArgs),
    NotebookEdit(NotebookEditArgs),
}

/// Parsed, validated arguments of a call the gateway carries out itself: the DeepSeek
/// sub-session controls.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayToolArgs {
    /// `deepseek_subagent_start`.
    SubsessionStart(DeepseekStartArgs),
    /// `deepseek_subagent_get`.
    SubsessionGet(SubsessionArgs),
    /// `deepseek_subagent_stop`.
    SubsessionStop(SubsessionArgs),
}

impl GatewayToolArgs {
    fn validate(&self) -> Result<(), ArgsError> {
        match self {
            Self::SubsessionStart(a) => {
                if a.task.trim().is_empty() {
                    return Err(ArgsError::Rule("task must not be empty"));
                }
                if a.task.len() > MAX_DEEPSEEK_TASK_BYTES {
                    return Err(ArgsError::Rule(
                        "task is larger than 32768 bytes; give the sub-session a shorter, \
                         self-contained task (it can read the worktree itself)",
                    ));
                }
            }
            Self::SubsessionGet(a) | Self::SubsessionStop(a) => {
                if a.subsession_id.is_empty() || a.subsession_id.len() > 64 {
                    return Err(ArgsError::Rule(
                        "subsession_id must be the id deepseek_subagent_start returned",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Longest task a DeepSeek sub-session is given.
pub const MAX_DEEPSEEK_TASK_BYTES: usize = 32 * 1024;

/// Arguments of `deepseek_subagent_start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeepseekStartArgs {
    /// The one task for the sub-session, self-contained (it sees the worktree, not this
    /// conversation). 1 to 32768 bytes.
    pub task: String,
    /// The Claude tier the sub-session's Claude Code runs as, which picks the DeepSeek model on
    /// the fixed route: `sonnet` (default) or `opus` -> the Flash model, `fable` -> the Pro
    /// model (for harder tasks). Nothing else is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<ClaudeTier>,
}

/// The Claude tier a DeepSeek sub-session's runner runs as.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ClaudeTier {
    #[default]
    Sonnet,
    Opus,
    Fable,
}

impl ClaudeTier {
    /// The name given to the runner's `--model` (Claude Code's alias of the tier).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Arguments of `deepseek_subagent_get` and `deepseek_subagent_stop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubsessionArgs {
    /// The `subsession_id` `deepseek_subagent_start` returned (`ds_…`).
    pub subsession_id: String,
}

impl ToolArgs {
    fn validate(&self) -> Result<(), ArgsError> {
        fn absolute(field: &'static str, path: &str) -> Result<(), ArgsError> {
            if path.starts_with('/') {
                Ok(())
            } else {
                Err(ArgsError::NotAbsolute {
                    field,
                    got: path.to_string(),
                })
            }
        }
        fn sha256_arg(value: Option<&str>) -> Result<(), ArgsError> {
            match value {
                Some(v) if v.len() != 64 || !v.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    Err(ArgsError::NotSha256(v.to_string()))
                }
                _ => Ok(()),
            }
        }
        fn bounded(field: &'static str, value: &str) -> Result<(), ArgsError> {
            if value.len() > MAX_WRITE_ARGUMENT_BYTES {
                return Err(ArgsError::TooLarge { field });
            }
            Ok(())
        }
        match self {
            Self::Read(a) => {
                absolute("file_path", &a.file_path)?;
                if a.offset == Some(0) || a.limit == Some(0) {
                    return Err(ArgsError::Rule(
                        "offset and limit are 1-based and must be at least 1",
                    ));
                }
            }
            Self::FindFiles(a) => {
                if let Some(p) = &a.path {
                    absolute("path", p)?;
                }
                if matches!(a.max_depth, Some(d) if d == 0 || d > 64) {
                    return Err(ArgsError::Rule("max_depth must be between 1 and 64"));
                }
                if matches!(a.max_results, Some(n) if n == 0 || n > 100_000) {
                    return Err(ArgsError::Rule("max_results must be between 1 and 100000"));
                }
            }
            Self::SearchText(a) => {
                if a.query.is_empty() {
                    return Err(ArgsError::Rule("query must not be empty"));
                }
                if let Some(p) = &a.path {
                    absolute("path", p)?;
                }
                if matches!(a.max_results, Some(n) if n == 0 || n > 100_000) {
                    return Err(ArgsError::Rule("max_results must be between 1 and 100000"));
                }
            }
            Self::Edit(a) => {
                absolute("file_path", &a.file_path)?;
                sha256_arg(a.expected_sha256.as_deref())?;
                if a.old_string.is_empty() {
                    return Err(ArgsError::Rule(
                        "old_string must not be empty (use Write to create or replace a whole file)",
                    ));
                }
                if a.old_string == a.new_string {
                    return Err(ArgsError::Rule(
                        "old_string and new_string are identical; nothing to change",
                    ));
                }
                bounded("new_string", &a.new_string)?;
            }
            Self::Write(a) => {
                absolute("file_path", &a.file_path)?;
                sha256_arg(a.expected_sha256.as_deref())?;
                bounded("content", &a.content)?;
            }
            Self::NotebookEdit(a) => {
                absolute("notebook_path", &a.notebook_path)?;
                sha256_arg(a.expected_sha256.as_deref())?;
                match a.edit_mode {
                    NotebookEditMode::Replace if a.cell_id.is_none() || a.new_source.is_none() => {
                        return Err(ArgsError::Rule(
                            "edit_mode replace needs cell_id and new_source",
                        ));
                    }
                    NotebookEditMode::Insert if a.new_source.is_none() => {
                        return Err(ArgsError::Rule("edit_mode insert needs new_source"));
                    }
                    NotebookEditMode::Delete if a.cell_id.is_none() => {
                        return Err(ArgsError::Rule("edit_mode delete needs cell_id"));
                    }
                    _ => {}
                }
                if let Some(source) = &a.new_source {
                    bounded("new_source", source)?;
                }
            }
            Self::RunCommand(a) => {
                if a.argv.is_empty() || a.argv.len() > MAX_ARGV_ITEMS {
                    return Err(ArgsError::ArgvCount(a.argv.len()));
                }
                if a.argv[0].is_empty() {
                    return Err(ArgsError::Rule(
                        "argv[0] (the executable) must not be empty",
                    ));
                }
                for (i, arg) in a.argv.iter().enumerate() {
                    if arg.contains('\0') {
                        return Err(ArgsError::ArgvNul(i));
                    }
                    if arg.len() > MAX_ARG_BYTES {
                        return Err(ArgsError::ArgvItemTooLong(i));
                    }
                }
                if let Some(cwd) = &a.cwd {
                    if cwd.is_empty() {
                        return Err(ArgsError::Rule(
                            "cwd must not be empty (omit it for the working directory)",
                        ));
                    }
                    if cwd.contains('\0') {
                        return Err(ArgsError::Rule("cwd contains a NUL byte"));
                    }
                }
                if matches!(a.timeout_seconds, Some(t) if t == 0 || t > MAX_COMMAND_TIMEOUT_SECONDS)
                {
                    return Err(ArgsError::Timeout);
                }
            }
        }
        Ok(())
    }
}

/// Outcome class of one tool call, as ChatGPT sees it in `tool_results`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Rejected,
    NotExecuted,
}

/// Proof of what an action did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Receipt {
    pub action_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// SHA-256 of the bytes a Read returned (the whole file it read from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
}

/// What the executor produced for one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionOutcome {
    pub status: ToolStatus,
    /// At most [`MAX_TOOL_OUTPUT_BYTES`].
    pub output: String,
    pub truncated: bool,
    /// Stable machine code when `status` is not `ok` (e.g. `not_permitted`, `not_found`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<crate::outcome::OutcomeCode>,
    pub receipt: Receipt,
}

/// Cut `text` to at most `max` bytes on a character boundary; returns whether it was cut.
pub fn clip_utf8(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

#[cfg(test)]
mod tests;
