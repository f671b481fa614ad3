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

use super::{BrokerOwner, Link, LinkEvent};
use crate::state::BrokerRecord;

/// Connect to `owner`'s broker, recorded as `record` (its process identity), verify it, and start
/// carrying its frames. The socket and the secret are `owner`'s, derived, not the record's.
pub async fn connect(
    owner: &BrokerOwner,
    record: &BrokerRecord,
    timeout: Duration,
) -> anyhow::Result<Link> {
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
