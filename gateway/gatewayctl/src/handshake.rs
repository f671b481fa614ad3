//! The opt-in live check of a broker: connect to its socket, check the peer, send a `GatewayHello`
//! with a fresh nonce, verify the HMAC proof with the recorded secret, and close at once without
//! sending anything else. It never sends the gateway's own proof, so the broker keeps its verified
//! gateway link; the probe only costs the broker one short, unverified connection.

use std::time::Duration;

use anyhow::{Context, bail};
use common::codec::{decode, encode, frame_codec};
use common::protocol::{
    BrokerToGateway, GatewayHello, GatewayToBroker, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN,
};
use futures::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio_util::codec::Framed;

use crate::db::BrokerInfo;

const TIMEOUT: Duration = Duration::from_secs(3);

/// What the broker answered.
pub struct Proven {
    pub protocol_version: u32,
    pub build: String,
}

/// Prove the broker at `record.socket_path` is the recorded one and holds its secret.
pub fn verify(record: &BrokerInfo) -> anyhow::Result<Proven> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        tokio::time::timeout(TIMEOUT, handshake(record))
            .await
            .context("broker handshake timed out")?
    })
}

async fn handshake(record: &BrokerInfo) -> anyhow::Result<Proven> {
    if record.secret.is_empty() {
        bail!("no broker secret recorded");
    }
    let stream = UnixStream::connect(&record.socket_path)
        .await
        .context("connecting to the broker socket")?;
    let cred = stream.peer_cred().context("reading peer credentials")?;
    if cred.uid() != nix::unistd::getuid().as_raw() {
        bail!("socket peer runs as another user");
    }
    if cred.pid() != Some(record.pid) {
        bail!("socket peer is not the recorded broker process");
    }
    let mut framed = Framed::new(stream, frame_codec());
    let nonce = common::hash::new_secret("nonce");
    framed
        .send(encode(&GatewayToBroker::Hello(GatewayHello {
            protocol_min: PROTOCOL_VERSION_MIN,
            protocol_max: PROTOCOL_VERSION,
            build: format!("gatewayctl {}", env!("CARGO_PKG_VERSION")),
            nonce: nonce.clone(),
        }))?)
        .await?;
    let frame = framed
        .next()
        .await
        .context("broker closed during the handshake")??;
    // Close before judging the answer: nothing else is ever sent on this link.
    drop(framed);
    let BrokerToGateway::Hello(hello) = decode::<BrokerToGateway>(&frame)? else {
        bail!("broker did not answer with a hello");
    };
    hello
        .verify(&record.secret, &nonce)
        .map_err(anyhow::Error::msg)?;
    Ok(Proven {
        protocol_version: hello.protocol_version,
        build: hello.build,
    })
}
