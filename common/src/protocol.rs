//! The gateway↔broker wire protocol: one message enum per direction, each variant documented with
//! who sends it and what answer it gets.
//!
//! The gateway connects to the broker's Unix socket. The first frame each way is a hello carrying
//! the protocol version; the broker proves it holds the per-broker secret by answering the
//! gateway's nonce with an HMAC, so the secret never crosses the socket. After that the broker
//! reports what happens as numbered events, which the gateway acknowledges once they are durable;
//! the gateway releases replies, prompts and stop requests. Frames are self-describing JSON
//! (`type` tag, unknown fields ignored, unknown variants decoded as `Unknown`), so a newer gateway
//! can talk to an older broker that survived an upgrade.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::ActionOutcome;

/// Version this build speaks. 3: the gateway answers `WritePrepared` and `DelegatedCall` with a
/// [`GatewayToBroker::Verdict`] before acknowledging them. 4: both handshake proofs bind the
/// session id and runner generation the broker was started for (`hash::BrokerBinding`), and the
/// broker's hello names its generation.
pub const PROTOCOL_VERSION: u32 = 4;
/// First version whose gateway records write intents (`WritePrepared`) and delegated calls and
/// answers each with a verdict; a broker linked at an older version refuses writes and delegated
/// calls (an acknowledgement alone never approves anything).
pub const VERDICTS_SINCE_VERSION: u32 = 3;
/// Oldest peer version this build still understands: 4, since an older proof does not say which
/// session the broker serves, and a broker that cannot prove that is never attached to a session
/// (an older broker that survived an upgrade is refused with "no common protocol version").
pub const PROTOCOL_VERSION_MIN: u32 = 4;

/// Messages the gateway sends to a broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GatewayToBroker {
    /// First frame. The broker answers with [`BrokerToGateway::Hello`] or closes the socket.
    Hello(GatewayHello),
    /// The gateway persisted broker event `seq`; the broker may drop it from its outbox and release
    /// whatever waited on it. No answer.
    Ack { seq: u64 },
    /// The gateway's decision on event `seq` (a `WritePrepared` or a `DelegatedCall`), sent just
    /// before its `Ack`: only `Approved` lets the broker write or run the call; an event
    /// acknowledged without a verdict is refused. No answer.
    Verdict { seq: u64, verdict: Verdict },
    /// ChatGPT's reply to a turn, already persisted with its approved actions. The broker answers
    /// with a `ReplyDelivered` event once the runner has it.
    Reply(ReplyRelease),
    /// A user prompt (start or continue), already persisted. The broker writes it to the runner's
    /// input and answers with a `PromptDelivered` event.
    Prompt(PromptRelease),
    /// Second frame: the gateway's answer to the broker's `challenge`
    /// (`hash::gateway_proof`). Until it verifies, the broker sends no event and accepts no
    /// release, and an existing verified link stays in place. No answer.
    Proof { proof: String },
    /// Stop the runner (group SIGTERM, grace, SIGKILL) and exit. The broker answers with a
    /// `RunnerExited` event, then a `BrokerExiting` event.
    Stop { reason: String },
    /// A DeepSeek sub-session's broker only: the answer to its [`BrokerToGateway::EgressRequest`]
    /// `request_id` — the upstream's status, content type and body, passed to the runner as is.
    EgressResponse(EgressResponse),
    /// A message type this build does not know (sent by a newer gateway). Answered with
    /// [`BrokerToGateway::Unsupported`].
    #[serde(other)]
    Unknown,
}

/// The gateway's answer to an event that asks for permission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Verdict {
    /// Recorded and allowed: the broker may go on.
    Approved,
    /// Not allowed (the sub-session ended, the action is not approved, …): nothing runs and
    /// nothing is written; `reason` is for the runner.
    Refused { reason: String },
}

/// Messages a broker sends to the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BrokerToGateway {
    /// Answer to [`GatewayToBroker::Hello`].
    Hello(BrokerHello),
    /// Something happened; the gateway persists it and answers [`GatewayToBroker::Ack`]. Events
    /// not yet acknowledged are sent again, in order, after a reconnect.
    Event { seq: u64, event: BrokerEvent },
    /// The broker did not understand a message of this type.
    Unsupported { message_type: String },
    /// A DeepSeek sub-session's broker only: one model request of its runner, for the gateway to
    /// send to DeepSeek on the fixed route (the broker has no network and no key). Not an event:
    /// nothing durable, answered with [`GatewayToBroker::EgressResponse`]; a request whose link
    /// drops is failed to the runner, which may retry it.
    EgressRequest { request_id: u64, body: String },
    /// A message type this build does not know (sent by a newer broker).
    #[serde(other)]
    Unknown,
}

/// Handshake from the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayHello {
    pub protocol_min: u32,
    pub protocol_max: u32,
    pub build: String,
    /// Random challenge; the broker answers with HMAC-SHA256(broker secret, nonce).
    pub nonce: String,
}

/// Handshake from the broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerHello {
    /// The version chosen from the gateway's range.
    pub protocol_version: u32,
    pub build: String,
    /// The session the broker was started for (bound into `proof`).
    pub session_id: String,
    /// The runner generation the broker was started for (bound into `proof`).
    #[serde(default)]
    pub generation: u32,
    /// `hash::broker_proof` of the gateway's nonce.
    pub proof: String,
    /// Random challenge the gateway must answer with a `Proof` frame.
    #[serde(default)]
    pub challenge: String,
    /// The broker could not agree on a version; it closes after this frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Why a broker's hello was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloRejected {
    /// The broker refused (no common protocol version); it closes after its hello.
    #[error("broker refused the handshake: {0}")]
    Refused(String),
    /// The broker says it serves another session or runner generation than the one it was
    /// recorded for: its record is not this session's (changed outside the gateway).
    #[error(
        "the broker serves another session or runner generation than the one it is recorded for"
    )]
    OtherSession,
    /// The proof is not the HMAC of our nonce under the recorded secret.
    #[error("broker failed the secret proof")]
    BadProof,
}

impl BrokerHello {
    /// Check a broker's answer to our `nonce`: not refused, serving the session and generation
    /// `expected`, and proving it holds `secret` for exactly them. Used by the gateway and by
    /// `gatewayctl brokers --handshake` (through `broker::client`), so both judge alike.
    pub fn verify(
        &self,
        secret: &str,
        expected: crate::hash::BrokerBinding<'_>,
        nonce: &str,
    ) -> Result<(), HelloRejected> {
        if let Some(reason) = &self.refused {
            return Err(HelloRejected::Refused(reason.clone()));
        }
        if self.session_id != expected.session_id || self.generation != expected.generation {
            return Err(HelloRejected::OtherSession);
        }
        let expected = crate::hash::broker_proof(secret, expected, nonce);
        if !crate::hash::constant_time_eq(expected.as_bytes(), self.proof.as_bytes()) {
            return Err(HelloRejected::BadProof);
        }
        Ok(())
    }
}

/// A persisted reply released to the runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyRelease {
    pub turn_id: String,
    /// Fingerprint of the runner request this reply answers.
    pub fingerprint: String,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub calls: Vec<ApprovedCall>,
}

/// One tool call ChatGPT approved; the runner may run it exactly once with exactly these arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovedCall {
    pub action_id: String,
    pub call_index: u32,
    /// Logical tool name (`Read`, ...).
    pub name: String,
    pub arguments: Value,
    /// A call the gateway itself carried out when it accepted the reply (the DeepSeek
    /// sub-session controls): the broker answers the runner with this outcome and runs nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ActionOutcome>,
}

/// The gateway's answer to one egress request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressResponse {
    pub request_id: u64,
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// A persisted user prompt released to the runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRelease {
    pub prompt_id: String,
    pub text: String,
}

/// The intent of one durable write, recorded by the gateway before anything is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedWrite {
    pub action_id: String,
    /// The target as the caller gave it (absolute, inside the write root).
    pub path: String,
    /// SHA-256 of the current bytes; `None`: the file does not exist (a create).
    pub pre_sha256: Option<String>,
    pub post_sha256: String,
    /// The temp file's name in the target's directory.
    pub temp_name: String,
    /// `(dev, ino)` of the target when it was read.
    pub pre_identity: Option<(u64, u64)>,
}

/// How a write that reached `prepared` ended.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum WriteEnd {
    /// The file holds the new content, durably.
    Committed,
    /// Nothing was written (a refusal, a conflict, an error before the rename).
    NotApplied,
    /// The rename may have happened but is not known durable; the session needs recovery.
    Indeterminate,
}

impl WriteEnd {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a broker reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BrokerEvent {
    /// The runner process started.
    RunnerStarted {
        generation: u32,
        started_at_ms: i64,
        /// The runner continues the recorded conversation (`--resume`). False for a first
        /// generation, and for a later one whose transcript was never written (the earlier
        /// runner died before it saved anything).
        #[serde(default)]
        resumed: bool,
    },
    /// The runner could not be started; the broker exits after this is acknowledged.
    RunnerLaunchFailed { message: String },
    /// The runner asked for a model turn. A retry of the same request carries the same fingerprint.
    TurnRequested(TurnRequest),
    /// The runner received the released reply.
    ReplyDelivered { turn_id: String },
    /// The prompt was written to the runner's input.
    PromptDelivered { prompt_id: String },
    /// A write is about to happen: the gateway persists the intent and answers with a verdict
    /// and the acknowledgement; the broker creates the temp file only on `Approved`.
    WritePrepared(PreparedWrite),
    /// An approved action ran; the broker hands the result to the runner only after the ack.
    ActionFinished {
        action_id: String,
        outcome: ActionOutcome,
        /// For a write that reached `prepared`: how it ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        write: Option<WriteEnd>,
    },
    /// The runner called a tool without a matching approved action; it was refused.
    UnapprovedCall {
        tool_use_id: String,
        name: String,
        reason: String,
    },
    /// The runner made a side request (title, summary, ...), answered locally by the broker.
    SideRequest {
        purpose: String,
        fingerprint: String,
    },
    /// The runner finished its turn (its `result` event).
    RunnerTurnEnded {
        subtype: String,
        is_error: bool,
        /// The runner's final text (a DeepSeek sub-session's broker only: there it is the
        /// sub-session's result; ChatGPT's own text is already recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// A DeepSeek sub-session's runner called a tool: the delegation is its approval. The gateway
    /// records the action (approved, in the sub-session) and answers with a verdict before the
    /// acknowledgement; only on `Approved` does the broker run it, as any approved action.
    DelegatedCall {
        action_id: String,
        tool_use_id: String,
        name: String,
        arguments: Value,
    },
    /// The runner process exited.
    RunnerExited {
        exit_code: Option<i32>,
        signal: Option<i32>,
        at_ms: i64,
    },
    /// The broker is shutting down.
    BrokerExiting { reason: String },
    /// An event kind this build does not know.
    #[serde(other)]
    Unknown,
}

/// A model request of the runner's main loop, reduced to what ChatGPT must answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    pub fingerprint: String,
    pub content: TurnContent,
}

/// The new user content since the last assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TurnContent {
    /// A user prompt.
    Prompt { text: String },
    /// Results of the previous reply's tool calls, by `tool_use` id, with the runner's own text
    /// for each (the gateway prefers its ledger's record of the action).
    ToolResults { results: Vec<RunnerToolResult> },
}

/// One `tool_result` block as the runner sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerToolResult {
    pub tool_use_id: String,
    pub is_error: bool,
    pub text: String,
}

/// A directory's identity on this host: device and inode, as `stat` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirIdentity {
    pub dev: u64,
    pub ino: u64,
}

impl DirIdentity {
    /// The identity of the directory at `path`, without following a final symlink; None when it
    /// is missing or not a directory.
    pub fn of(path: &std::path::Path) -> Option<DirIdentity> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        meta.is_dir().then(|| DirIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// Everything a broker needs to run one session, written by the gateway as a 0600 file in the
/// session's 0700 runtime dir and read once by the broker at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokerSpec {
    pub session_id: String,
    pub claude_session_id: String,
    pub generation: u32,
    /// Start the runner with `--resume` instead of `--session-id`.
    pub resume: bool,
    pub profile: crate::tools::CapabilityProfile,
    pub subagent_policy: crate::tools::SubagentPolicy,
    pub working_directory: String,
    /// The working directory's identity recorded at the session's start: the broker writes only
    /// if the directory it opens is that one (older gateways: none, not checked).
    #[serde(default)]
    pub working_directory_identity: Option<DirIdentity>,
    pub runtime_dir: String,
    pub socket_path: String,
    pub secret: String,
    pub runner_token: String,
    pub claude_bin: String,
    pub system_prompt: String,
    /// The owner's home directory, for the protected path set.
    pub owner_home: String,
    pub state_dir: String,
    #[serde(default)]
    pub extra_protected: Vec<String>,
    /// The managed worktrees' directory: readable although it lies in the state dir.
    #[serde(default)]
    pub worktree_dir: Option<String>,
    /// What the broker must establish around the runner before starting it; it refuses to start
    /// the runner when it cannot (the gateway reports exactly this in `network_boundary`).
    #[serde(default)]
    pub runner_confinement: RunnerConfinement,
    /// SHA-256 of the gateway executable the gateway pinned at start (the broker runs from it and
    /// executes the sandbox helper from it; an unsealed image must hash to this).
    #[serde(default)]
    pub helper_sha256: Option<String>,
    /// Where the gateway executable is installed: writes refuse it (the broker itself runs from
    /// the pinned copy, whose path says nothing about the install).
    #[serde(default)]
    pub gateway_install_path: Option<String>,
    /// Per-command limits the gateway chose (from the host or the owner's environment).
    #[serde(default)]
    pub command_limits: CommandLimits,
    /// Auto-run classes the owner allowed sessions to write (`CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES`,
    /// class names): none when absent, so an older gateway's broker refuses them all.
    #[serde(default)]
    pub autorun_allowed: Vec<String>,
    /// The owner's strict-hooks mode (`CLAUDE_TOOLS_STRICT_HOOKS=1`): writes refuse the
    /// definitions of the checks git hooks run. Off when absent.
    #[serde(default)]
    pub strict_hooks: bool,
    /// The PATH commands search (the owner's, filtered by the gateway at start); `None`: the
    /// fixed system PATH.
    #[serde(default)]
    pub command_path: Option<String>,
    /// A `worktree_write` session's source directory: what its worktree holds reaches it at a
    /// merge, so the auto-run places found there are the worktree's too, at the same relative
    /// paths (whatever the repository's layout: bare, separate git dir, linked worktrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_target: Option<String>,
    /// Set for a DeepSeek sub-session's broker: its runner's model requests go to the gateway's
    /// egress, not to ChatGPT, and its tool calls are approved by the delegation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<DelegationSpec>,
}

/// What makes a broker a DeepSeek sub-session's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationSpec {
    /// The delegating session: its managed worktree is this runner's working directory.
    pub parent_session_id: String,
    /// The Claude Code model the runner is started with (`--model`); its family picks the
    /// DeepSeek tier on the gateway's fixed route.
    pub runner_model: String,
}

/// Per-command resource limits (`None`: the built-in default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandLimits {
    /// Memory a command may allocate, MiB: each process (`RLIMIT_DATA`), and all of them with the
    /// scratch quota (a memory cgroup, where the host allows one).
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Size of the command's scratch file system, MiB (all its files together).
    #[serde(default)]
    pub scratch_mb: Option<u64>,
    /// Budget of the session's copy-on-write layer, MiB (every command's writes together).
    #[serde(default)]
    pub layer_mb: Option<u64>,
    /// Memory all the gateway's commands may use together, MiB (their memory cgroups' common
    /// parent, where the host allows memory cgroups; `None`: no common bound, an older gateway).
    #[serde(default)]
    pub all_commands_memory_mb: Option<u64>,
    /// Names that parent: the same for every broker of one gateway (its state dir), across
    /// restarts.
    #[serde(default)]
    pub memory_group: Option<u64>,
}

/// The runner's confinement the gateway asks for (what this host supports). The broker establishes
/// all of it or does not start the runner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerConfinement {
    /// The broker in its own network namespace with only loopback up (Linux).
    pub network_namespace: bool,
    /// Landlock ABI to enforce on the runner: writes only to its private dirs; from ABI 4 TCP
    /// connect only to the broker's port and no bind.
    pub landlock_abi: Option<i32>,
    /// A seccomp filter (no ptrace, io_uring, namespaces, mounts, exotic socket families), with
    /// all capabilities dropped and `no_new_privs`.
    pub seccomp: bool,
    /// macOS: run the runner under `/usr/bin/sandbox-exec` with the generated runner profile
    /// (writes only in its private dirs, one outbound rule to the broker's loopback port).
    #[serde(default)]
    pub seatbelt: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_message_types_decode_as_unknown() {
        let msg: GatewayToBroker =
            serde_json::from_str(r#"{"type":"teleport","where":"mars"}"#).unwrap();
        assert_eq!(msg, GatewayToBroker::Unknown);
        let msg: BrokerToGateway = serde_json::from_str(
            r#"{"type":"event","seq":3,"event":{"kind":"future_thing","x":1}}"#,
        )
        .unwrap();
        assert_eq!(
            msg,
            BrokerToGateway::Event {
                seq: 3,
                event: BrokerEvent::Unknown
            }
        );
    }

    #[test]
    fn frames_are_stable_json() {
        let frames = vec![
            serde_json::to_value(GatewayToBroker::Hello(GatewayHello {
                protocol_min: 1,
                protocol_max: 1,
                build: "b".into(),
                nonce: "n".into(),
            }))
            .unwrap(),
            serde_json::to_value(GatewayToBroker::Reply(ReplyRelease {
                turn_id: "turn_1".into(),
                fingerprint: "f".into(),
                text: "hi".into(),
                calls: vec![ApprovedCall {
                    action_id: "act_1".into(),
                    call_index: 0,
                    name: "Read".into(),
                    arguments: serde_json::json!({"file_path": "/x"}),
                    outcome: None,
                }],
            }))
            .unwrap(),
            serde_json::to_value(BrokerToGateway::Event {
                seq: 1,
                event: BrokerEvent::TurnRequested(TurnRequest {
                    fingerprint: "f".into(),
                    content: TurnContent::Prompt { text: "p".into() },
                }),
            })
            .unwrap(),
        ];
        insta::assert_json_snapshot!(frames);
    }
}
