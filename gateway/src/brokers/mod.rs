//! The seam between session logic and broker processes: [`BrokerHost`] starts, verifies, signals
//! and connects brokers, and a connected broker is a [`Link`] — messages out, [`LinkEvent`]s in.
//! Nothing here knows the session state: the session hands over what a broker is started with
//! ([`SessionSpec`], built in `session::broker_spec`), and `session::supervision` drives links.
//! The real host is [`process::ProcessHost`]; tests substitute an in-process one.

pub mod link;
pub mod ownership;
pub mod process;

use std::time::Duration;

use common::protocol::{BrokerEvent, DelegationSpec, DirIdentity, GatewayToBroker};
use common::tools::{CapabilityProfile, SubagentPolicy};
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use crate::brokers::link::ConnectError;
pub use crate::brokers::ownership::BrokerOwner;
use crate::config::Config;
use crate::state::{BrokerRecord, LaunchError};

/// How long a freshly spawned broker may take to open its socket.
pub const SPAWN_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long re-adopting an existing broker may take (its socket exists or it is gone).
pub const ADOPT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A signal the gateway sends a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerSignal {
    /// Stop: the broker stops its runner's group, reports, and exits.
    Term,
    /// For a broker that did not stop on `Term`; its runner dies with it.
    Kill,
}

/// The session's part of a broker's spec (`common::protocol::BrokerSpec`): what the host needs
/// to know of the session to start its broker, and nothing else of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSpec {
    pub session_id: String,
    /// The Claude Code conversation the runner starts or resumes.
    pub claude_session_id: String,
    pub profile: CapabilityProfile,
    pub subagent_policy: SubagentPolicy,
    /// Where commands run and writes land.
    pub working_directory: String,
    /// That directory's identity recorded at the session's start (older records: none).
    pub working_directory_identity: Option<DirIdentity>,
    /// A `worktree_write` session's source directory (see `BrokerSpec::merge_target`).
    pub merge_target: Option<String>,
    /// Set for a DeepSeek sub-session.
    pub delegation: Option<DelegationSpec>,
}

/// One broker runtime to start: runner generation `generation` of `session`; `resume` continues
/// the recorded Claude Code conversation.
pub struct LaunchSpec<'a> {
    pub config: &'a Config,
    pub session: SessionSpec,
    pub generation: u32,
    /// Where the broker lives and the secret it holds, derived from the session id and
    /// `generation` (`ownership`): the record the host returns must carry exactly these.
    pub owner: &'a BrokerOwner,
    pub resume: bool,
    /// The runner's whole system prompt (ours plus the session's frozen skills), the same text
    /// for every generation.
    pub system_prompt: &'a str,
}

/// What a link reports.
#[derive(Debug)]
pub enum LinkEvent {
    /// A broker event, to persist and then acknowledge with `GatewayToBroker::Ack { seq }`.
    Event { seq: u64, event: Box<BrokerEvent> },
    /// A DeepSeek sub-session's model request (not an event: nothing durable), to answer with
    /// `GatewayToBroker::EgressResponse`.
    Egress { request_id: u64, body: String },
    /// The link closed; `failed`: the gateway could not read what the broker sent.
    Closed { failed: bool },
}

/// A verified connection to a broker.
pub struct Link {
    /// The protocol version the broker chose.
    pub version: u32,
    /// Messages to the broker, in order.
    pub outgoing: mpsc::UnboundedSender<GatewayToBroker>,
    /// What the broker reports, ending with one `Closed`.
    pub incoming: mpsc::UnboundedReceiver<LinkEvent>,
    /// Cancel to close the connection at once (the broker then re-sends everything it has not
    /// had acknowledged on the next link).
    pub close: CancellationToken,
}

/// Starts, finds and controls broker processes.
pub trait BrokerHost: Send + Sync + 'static {
    /// Start a broker for `spec`; the record to persist, or why it could not start.
    fn spawn<'a>(
        &'a self,
        spec: LaunchSpec<'a>,
    ) -> BoxFuture<'a, Result<BrokerRecord, LaunchError>>;

    /// Connect to the recorded broker and verify it (identity, peer credentials, its secret)
    /// and that it serves `owner`'s session and generation. The caller has checked `record`
    /// against `owner` (`BrokerOwner::check`).
    fn connect<'a>(
        &'a self,
        owner: &'a BrokerOwner,
        record: &'a BrokerRecord,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Link, ConnectError>>;

    /// The broker serving `owner`'s derived socket, if one answers there: its process identity
    /// as the socket's peer credentials give it (pid, then its start time and boot). Not yet
    /// verified: `connect` with it proves the broker serves `owner`'s session and generation.
    /// Used to find a session's own broker when its record no longer leads to it.
    fn find<'a>(&'a self, owner: &'a BrokerOwner) -> BoxFuture<'a, Option<BrokerRecord>>;

    /// Whether the recorded broker process still exists (same boot, pid and start time).
    fn is_alive(&self, record: &BrokerRecord) -> bool;

    /// Send `signal` to the recorded broker if, and only if, it is still that process; whether
    /// it was sent.
    fn signal(&self, record: &BrokerRecord, signal: BrokerSignal) -> bool;
}

/// Wait until the recorded broker is gone (or `within` passes); whether it is gone.
pub async fn wait_gone(host: &dyn BrokerHost, record: &BrokerRecord, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if !host.is_alive(record) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
