//! A verified link to one broker: connected and verified by `broker::client` (identity, peer uid
//! and pid, both sides proving the broker's secret for the session and generation it serves),
//! then carrying frames — messages out,
//! [`LinkEvent`]s in — until either side closes or a frame cannot be written (then it closes:
//! reported lost, never silently stuck). Persisting events is not this module's job.

use std::time::Duration;

use common::codec::{decode, encode};
use common::protocol::{BrokerToGateway, GatewayToBroker};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use broker::client::BrokerLinkError;
use common::codec::CodecError;
use common::protocol::HelloRejected;
use sandbox::process::Identity;

use super::{BrokerOwner, Link, LinkEvent};
use crate::state::BrokerRecord;

/// What failed when connecting to a recorded broker and verifying it (`BrokerHost::connect`).
/// The words are the handshake's own (`broker::client::BrokerLinkError`), which the log and a
/// disowned session's `runtime_lost` reason quote.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The recorded process is not the one running: gone, its pid reused, another boot (checked
    /// before connecting and again once the socket's peer is known).
    #[error("broker process identity (boot, pid, start time) does not match the record")]
    NotRunning(Identity),
    /// Nothing accepted a connection at the session's socket within the window (missing,
    /// refused).
    #[error("connecting to the broker socket: {0}")]
    SocketUnreachable(std::io::Error),
    #[error("reading the broker socket's peer credentials: {0}")]
    PeerCredentials(std::io::Error),
    #[error("the broker socket's peer runs as another user")]
    PeerOtherUser,
    /// Something else than the recorded broker process listens at the session's socket.
    #[error("the broker socket's peer is not the recorded broker process")]
    PeerNotRecorded,
    #[error("the broker handshake timed out")]
    Timeout,
    #[error("the broker closed the connection during the handshake")]
    ClosedInHandshake,
    #[error("the broker did not answer with a hello")]
    NoHello,
    /// The broker refused the handshake (no common protocol version).
    #[error("broker refused the handshake: {0}")]
    HandshakeRefused(String),
    /// The broker proved another session or runner generation than the record's.
    #[error(
        "the broker serves another session or runner generation than the one it is recorded for"
    )]
    WrongSession,
    /// The broker could not prove the session's secret.
    #[error("broker failed the secret proof")]
    BadProof,
    #[error("broker link: {0}")]
    Io(std::io::Error),
    #[error("broker link: {0}")]
    Codec(CodecError),
}

impl ConnectError {
    /// Whether this proves the record is not the session's broker (as opposed to a broker that
    /// is merely gone or slow, or refuses an old protocol): the socket's peer is not the
    /// recorded process, or the broker behind it proved another session, generation or secret.
    pub fn disowns_record(&self) -> bool {
        match self {
            ConnectError::PeerNotRecorded | ConnectError::WrongSession | ConnectError::BadProof => {
                true
            }
            ConnectError::NotRunning(_)
            | ConnectError::SocketUnreachable(_)
            | ConnectError::PeerCredentials(_)
            | ConnectError::PeerOtherUser
            | ConnectError::Timeout
            | ConnectError::ClosedInHandshake
            | ConnectError::NoHello
            | ConnectError::HandshakeRefused(_)
            | ConnectError::Io(_)
            | ConnectError::Codec(_) => false,
        }
    }
}

impl From<BrokerLinkError> for ConnectError {
    fn from(err: BrokerLinkError) -> Self {
        match err {
            BrokerLinkError::IdentityMismatch(identity) => ConnectError::NotRunning(identity),
            BrokerLinkError::Connect(err) => ConnectError::SocketUnreachable(err),
            BrokerLinkError::PeerCredentials(err) => ConnectError::PeerCredentials(err),
            BrokerLinkError::PeerUid => ConnectError::PeerOtherUser,
            BrokerLinkError::PeerPid => ConnectError::PeerNotRecorded,
            BrokerLinkError::Timeout => ConnectError::Timeout,
            BrokerLinkError::Closed => ConnectError::ClosedInHandshake,
            BrokerLinkError::NotHello => ConnectError::NoHello,
            BrokerLinkError::Verify(HelloRejected::Refused(why)) => {
                ConnectError::HandshakeRefused(why)
            }
            BrokerLinkError::Verify(HelloRejected::OtherSession) => ConnectError::WrongSession,
            BrokerLinkError::Verify(HelloRejected::BadProof) => ConnectError::BadProof,
            BrokerLinkError::Io(err) => ConnectError::Io(err),
            BrokerLinkError::Codec(err) => ConnectError::Codec(err),
        }
    }
}

/// Connect to `owner`'s broker, recorded as `record` (its process identity), verify it, and start
/// carrying its frames. The socket and the secret are `owner`'s, derived, not the record's.
pub async fn connect(
    owner: &BrokerOwner,
    record: &BrokerRecord,
    timeout: Duration,
) -> Result<Link, ConnectError> {
    let recorded = broker::client::RecordedBroker {
        socket_path: &owner.socket_path,
        pid: record.pid,
        start_time: record.start_time,
        boot_id: &record.boot_id,
        secret: &owner.secret,
        binding: owner.binding(),
    };
    let (framed, version) =
        broker::client::connect_broker(&recorded, timeout, env!("CARGO_PKG_VERSION")).await?;
    let (mut sink, mut stream) = framed.split();
    let (outgoing, mut to_broker) = mpsc::unbounded_channel::<GatewayToBroker>();
    let (events, incoming) = mpsc::unbounded_channel::<LinkEvent>();
    let close = CancellationToken::new();
    let writer_close = close.clone();
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                message = to_broker.recv() => message,
                () = writer_close.cancelled() => None,
            };
            let Some(message) = message else { break };
            // A message that cannot be framed (over the frame limit) or sent ends the link: it
            // is then reported lost like any closed link, never left half-working with the
            // message dropped and later acknowledgements going nowhere.
            let sent = match encode(&message) {
                Ok(bytes) => sink.send(bytes).await.map_err(anyhow::Error::from),
                Err(err) => Err(err.into()),
            };
            if let Err(err) = sent {
                tracing::error!("the broker link failed writing a frame: {err:#}");
                break;
            }
        }
        // Both halves go: the reader reports the link closed.
        writer_close.cancel();
    });
    let reader_close = close.clone();
    tokio::spawn(async move {
        let failed = loop {
            let frame = tokio::select! {
                frame = stream.next() => frame,
                () = reader_close.cancelled() => break false,
            };
            let Some(Ok(frame)) = frame else { break false };
            match decode::<BrokerToGateway>(&frame) {
                Ok(BrokerToGateway::Event { seq, event }) => {
                    if events
                        .send(LinkEvent::Event {
                            seq,
                            event: Box::new(event),
                        })
                        .is_err()
                    {
                        break false;
                    }
                }
                Ok(BrokerToGateway::EgressRequest { request_id, body }) => {
                    if events.send(LinkEvent::Egress { request_id, body }).is_err() {
                        break false;
                    }
                }
                Ok(other) => tracing::debug!("broker said {other:?}"),
                Err(err) => {
                    tracing::warn!("undecodable broker frame: {err}");
                    break true;
                }
            }
        };
        // Both halves go: the socket closes, whichever side ended it.
        reader_close.cancel();
        let _ = events.send(LinkEvent::Closed { failed });
    });
    Ok(Link {
        version,
        outgoing,
        incoming,
        close,
    })
}

#[cfg(test)]
mod tests;
