//! A verified link to one broker: connect to its socket, check the peer (uid, pid, recorded start
//! time and boot), prove both sides hold the broker's secret, then carry frames — messages out,
//! [`LinkEvent`]s in — until either side closes. Persisting events is not this module's job.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use common::codec::{decode, encode, frame_codec};
use common::protocol::{
    BrokerToGateway, GatewayHello, GatewayToBroker, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN,
};
use futures::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use super::process::{boot_id, process_start_time};
use super::{Link, LinkEvent};
use crate::state::BrokerRecord;

/// Connect to the recorded broker, verify it, and start carrying its frames.
pub async fn connect(record: &BrokerRecord, timeout: Duration) -> anyhow::Result<Link> {
    let framed = connect_verified(record, timeout).await?;
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
            let Ok(bytes) = encode(&message) else {
                continue;
            };
            if sink.send(bytes).await.is_err() {
                break;
            }
        }
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
        outgoing,
        incoming,
        close,
    })
}

async fn connect_verified(
    record: &BrokerRecord,
    timeout: Duration,
) -> anyhow::Result<Framed<UnixStream, tokio_util::codec::LengthDelimitedCodec>> {
    // Identity first: never talk to a process that merely reuses the recorded PID.
    if process_start_time(record.pid) != Some(record.start_time) || boot_id() != record.boot_id {
        bail!("broker process identity (boot, pid, start time) does not match the record");
    }
    let path = PathBuf::from(&record.socket_path);
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = loop {
        match UnixStream::connect(&path).await {
            Ok(stream) => break stream,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => return Err(err).context("connecting to broker socket"),
        }
    };
    let cred = stream
        .peer_cred()
        .context("reading socket peer credentials")?;
    if cred.uid() != nix::unistd::getuid().as_raw() {
        bail!("broker socket peer runs as another user");
    }
    if cred.pid() != Some(record.pid) {
        bail!("broker socket peer is not the recorded broker process");
    }
    if boot_id() != record.boot_id
        || process_start_time(record.pid).unwrap_or(0) != record.start_time
    {
        bail!("broker process identity (boot, start time) does not match the record");
    }
    let mut framed = Framed::new(stream, frame_codec());
    let nonce = common::hash::new_secret("nonce");
    framed
        .send(encode(&GatewayToBroker::Hello(GatewayHello {
            protocol_min: PROTOCOL_VERSION_MIN,
            protocol_max: PROTOCOL_VERSION,
            build: env!("CARGO_PKG_VERSION").to_string(),
            nonce: nonce.clone(),
        }))?)
        .await?;
    let frame = tokio::time::timeout(timeout.max(Duration::from_secs(5)), framed.next())
        .await
        .context("broker handshake timed out")?
        .context("broker closed during handshake")??;
    let BrokerToGateway::Hello(hello) = decode::<BrokerToGateway>(&frame)? else {
        bail!("broker did not answer with a hello");
    };
    hello
        .verify(&record.secret, &nonce)
        .map_err(anyhow::Error::msg)?;
    framed
        .send(encode(&GatewayToBroker::Proof {
            proof: common::hash::gateway_proof(&record.secret, &hello.challenge),
        })?)
        .await?;
    Ok(framed)
}
