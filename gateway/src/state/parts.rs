//! The durable parts of a session record that the SessionView also shows (workspace, launch
//! error, stop request, terminal, network boundary, skill snapshot, conversation restart, pruned
//! content), as stored: their serde shapes are the bytes in the database and in the ledger's
//! events and column digests. The public types are `crate::view`'s, built from these in one
//! place (`session::view`), so changing what ChatGPT reads never changes what is stored, and
//! the other way round (`records/stored_by_main.jsonl` pins the bytes).

use serde::{Deserialize, Serialize};

/// Where the session works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    pub kind: WorkspaceKind,
    /// The user's directory.
    pub root: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
}

/// The kind of a session's workspace, from its capability profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceKind {
    ReadOnly,
    Direct,
    Worktree,
}

impl Workspace {
    /// A session working in its directory itself (`read_only`, `direct_write`).
    pub fn in_place(kind: WorkspaceKind, root: String) -> Self {
        Workspace {
            kind,
            root,
            worktree_path: None,
            branch: None,
            base_commit: None,
        }
    }
}

/// Why the session's runtime could not be started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchError {
    pub code: LaunchErrorCode,
    pub message: String,
    pub at: String,
}

/// Stable codes of a [`LaunchError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchErrorCode {
    /// No executable Claude Code binary.
    RunnerNotFound,
    /// The broker started but Claude Code did not.
    RunnerLaunchFailed,
    BrokerSpawnFailed,
    BrokerUnreachable,
    /// The session ended while its runtime was starting.
    SessionTerminal,
    Internal,
}

impl LaunchError {
    /// A launch error observed now.
    pub fn now(code: LaunchErrorCode, message: impl Into<String>) -> Self {
        LaunchError {
            code,
            message: message.into(),
            at: common::time::now_rfc3339(),
        }
    }
}

/// Who asked the session to stop, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    pub reason: String,
    pub at: String,
}

impl StopRequest {
    /// A stop requested now.
    pub fn now(reason: impl Into<String>) -> Self {
        StopRequest {
            reason: reason.into(),
            at: common::time::now_rfc3339(),
        }
    }
}

/// How and when a session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminal {
    pub reason: TerminalReason,
    /// What happened, when more than the reason (`message` in records of older builds).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "message")]
    pub detail: Option<String>,
    /// The runner's exit code, when it was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the runner, when it was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The write action that ended the session (write_indeterminate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// The file of that write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub at: String,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalReason {
    /// Its runtime could not be started (see launch_error).
    LaunchError,
    /// It was stopped (see stop_request).
    Stopped,
    /// Its lease ran out.
    LeaseExpired,
    /// A write ended in an unknown state; nothing more is written.
    WriteIndeterminate,
}

impl Terminal {
    fn at(reason: TerminalReason, at: String) -> Self {
        Terminal {
            reason,
            detail: None,
            exit_code: None,
            signal: None,
            action_id: None,
            path: None,
            at,
        }
    }

    /// The runtime could not be started.
    pub fn launch_error() -> Self {
        Self::at(TerminalReason::LaunchError, common::time::now_rfc3339())
    }

    /// The session stopped at `at`; `detail` says how when the runner's own exit was not seen.
    pub fn stopped(
        detail: Option<&str>,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at: String,
    ) -> Self {
        Terminal {
            detail: detail.map(str::to_string),
            exit_code,
            signal,
            ..Self::at(TerminalReason::Stopped, at)
        }
    }

    /// The lease ran out at `at`.
    pub fn lease_expired(at: String) -> Self {
        Self::at(TerminalReason::LeaseExpired, at)
    }

    /// A write's file matches neither its old nor its new content.
    pub fn write_indeterminate(action_id: String, path: Option<String>) -> Self {
        Terminal {
            detail: Some(
                "a write's file matches neither its old nor its new content; nothing more is \
                 written in this session. Inspect the file, then start a new session."
                    .into(),
            ),
            action_id: Some(action_id),
            path,
            ..Self::at(
                TerminalReason::WriteIndeterminate,
                common::time::now_rfc3339(),
            )
        }
    }
}

/// What confines the runner and its commands on this host, as found at the session's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkBoundary {
    pub runner: String,
    pub runner_writes: String,
    pub commands: String,
    pub enforced_by: String,
    pub commands_enforced_by: String,
    pub degraded: bool,
}

/// A skill frozen into the session at start: its id and the hash of its body (the body is in
/// the session's snapshot dir, never in the database or the ledger).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillSnapshotEntry {
    pub skill_id: String,
    pub content_sha256: String,
}

/// A runner generation that started a new Claude Code conversation instead of resuming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRestart {
    pub generation: u32,
    pub at: String,
    pub message: String,
}

/// Retention removed an ended session's content (`crate::prune`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentPruned {
    pub at: String,
    pub message: String,
}
