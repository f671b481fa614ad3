//! The gateway's end of a broker's socket handshake, the one copy the gateway (attaching) and
//! gatewayctl (probing) share: the recorded process identity (boot, pid, start time) is checked,
//! the socket is connected, its peer must be our uid and the recorded pid, the identity is checked
//! again (the pid could have been reused meanwhile), then a hello with a fresh nonce must come
//! back naming the session and runner generation the broker is recorded for, with the HMAC proof
//! of the recorded secret bound to them (so a broker record moved to another session never
//! attaches). Attaching also proves the gateway to the broker; probing never does, so a probe
//! cannot displace the gateway's verified link.

use std::path::Path;
use std::time::Duration;

use common::codec::{CodecError, decode, encode, frame_codec};
use common::hash::BrokerBinding;
use common::protocol::{
    BrokerHello, BrokerToGateway, GatewayHello, GatewayToBroker, HelloRejected, PROTOCOL_VERSION,
    PROTOCOL_VERSION_MIN,
};
use futures::{SinkExt, StreamExt};
use sandbox::process::Identity;
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A verified link to a broker: length-delimited frames of JSON (`common::codec`).
pub type BrokerLink = Framed<UnixStream, LengthDelimitedCodec>;

/// The least time a broker gets to answer the hello, however short the connect window.
const MIN_HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a socket that is not there yet (a broker still starting) is tried again.
const CONNECT_RETRY: Duration = Duration::from_millis(20);

/// Why a broker link was not made. None of these names a path, pid or secret.
#[derive(Debug, thiserror::Error)]
pub enum BrokerLinkError {
    /// The recorded process is not the one running (before connecting, or after the peer check).
    #[error("broker process identity (boot, pid, start time) does not match the record")]
    IdentityMismatch(Identity),
    /// The socket could not be connected within the connect window.
    #[error("connecting to the broker socket: {0}")]
    Connect(std::io::Error),
    /// The socket's peer credentials could not be read.
    #[error("reading the broker socket's peer credentials: {0}")]
    PeerCredentials(std::io::Error),
    #[error("the broker socket's peer runs as another user")]
    PeerUid,
    #[error("the broker socket's peer is not the recorded broker process")]
    PeerPid,
    #[error("the broker handshake timed out")]
    Timeout,
    #[error("the broker closed the connection during the handshake")]
    Closed,
    #[error("the broker did not answer with a hello")]
    NotHello,
    #[error(transparent)]
    Verify(#[from] HelloRejected),
    #[error("broker link: {0}")]
    Io(#[from] std::io::Error),
    #[error("broker link: {0}")]
    Codec(#[from] CodecError),
}

/// The broker a link is made to, as recorded: its socket, its process (pid, start time, boot),
/// its secret, and the session and runner generation it must prove it was started for.
/// Not `Debug`: it holds the secret.
#[derive(Clone, Copy)]
pub struct RecordedBroker<'a> {
    pub socket_path: &'a Path,
    pub pid: i32,
    pub start_time: u64,
    pub boot_id: &'a str,
    pub secret: &'a str,
    pub binding: BrokerBinding<'a>,
}

impl RecordedBroker<'_> {
    fn check_identity(&self) -> Result<(), BrokerLinkError> {
        match sandbox::process::identify(self.pid, self.start_time, self.boot_id) {
            Identity::Verified => Ok(()),
            other => Err(BrokerLinkError::IdentityMismatch(other)),
        }
    }
}

/// Connect to the `recorded` broker, verify it holds its secret for its session and generation,
/// and prove the gateway holds it too. The socket is tried again until `connect_timeout` passes
/// (a broker just spawned may not have opened it yet); the hello gets at least 5 s. `build` is
/// the version text sent in the hello. Also the protocol version the broker chose.
pub async fn connect_broker(
    recorded: &RecordedBroker<'_>,
    connect_timeout: Duration,
    build: &str,
) -> Result<(BrokerLink, u32), BrokerLinkError> {
    let (mut link, hello) = open_and_hello(
        recorded,
        connect_timeout,
        connect_timeout.max(MIN_HELLO_TIMEOUT),
        build,
    )
    .await?;
    link.send(encode(&GatewayToBroker::Proof {
        proof: common::hash::gateway_proof(recorded.secret, recorded.binding, &hello.challenge),
    })?)
    .await?;
    Ok((link, hello.protocol_version))
}

/// Check the `recorded` broker the same way, but send no proof of our own and close at once: the
/// broker keeps its verified gateway link, and answers with the version and build it runs. One
/// connection attempt; the whole probe takes at most `timeout`.
pub async fn probe_broker(
    recorded: &RecordedBroker<'_>,
    timeout: Duration,
    build: &str,
) -> Result<BrokerHello, BrokerLinkError> {
    let probe = open_and_hello(recorded, Duration::ZERO, timeout, build);
    let (link, hello) = tokio::time::timeout(timeout, probe)
        .await
        .map_err(|_| BrokerLinkError::Timeout)??;
    drop(link);
    Ok(hello)
}

/// Everything up to and including the verified hello.
async fn open_and_hello(
    expected: &RecordedBroker<'_>,
    connect_timeout: Duration,
    hello_timeout: Duration,
    build: &str,
) -> Result<(BrokerLink, BrokerHello), BrokerLinkError> {
    // Identity first: never talk to a process that merely reuses the recorded pid.
    expected.check_identity()?;
    let stream = connect(expected.socket_path, connect_timeout).await?;
    let cred = stream
        .peer_cred()
        .map_err(BrokerLinkError::PeerCredentials)?;
    if cred.uid() != rustix::process::getuid().as_raw() {
        return Err(BrokerLinkError::PeerUid);
    }
    if cred.pid() != Some(expected.pid) {
        return Err(BrokerLinkError::PeerPid);
    }
    // The peer is the recorded pid now; that pid must still be the recorded process.
    expected.check_identity()?;
    let mut link = Framed::new(stream, frame_codec());
    let nonce = common::hash::new_secret("nonce");
    link.send(encode(&GatewayToBroker::Hello(GatewayHello {
        protocol_min: PROTOCOL_VERSION_MIN,
        protocol_max: PROTOCOL_VERSION,
        build: build.to_string(),
        nonce: nonce.clone(),
    }))?)
    .await?;
    let frame = tokio::time::timeout(hello_timeout, link.next())
        .await
        .map_err(|_| BrokerLinkError::Timeout)?
        .ok_or(BrokerLinkError::Closed)??;
    let BrokerToGateway::Hello(hello) = decode::<BrokerToGateway>(&frame)? else {
        return Err(BrokerLinkError::NotHello);
    };
    hello.verify(expected.secret, expected.binding, &nonce)?;
    Ok((link, hello))
}

/// Connect, trying again until `within` passes.
async fn connect(socket_path: &Path, within: Duration) -> Result<UnixStream, BrokerLinkError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match UnixStream::connect(socket_path).await {
            Ok(stream) => return Ok(stream),
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(CONNECT_RETRY).await;
            }
            Err(err) => return Err(BrokerLinkError::Connect(err)),
        }
    }
}

#[cfg(test)]
mod tests;
