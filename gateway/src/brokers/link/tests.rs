//! A link whose writer fails (a message over the frame limit) closes and says so: the reader
//! reports `Closed`, the broker sees the socket close, nothing is left half-working.

use std::time::Duration;

use common::codec::{MAX_FRAME_BYTES, decode, encode, frame_codec};
use common::protocol::{BrokerHello, BrokerToGateway, GatewayToBroker, PROTOCOL_VERSION};
use futures::{SinkExt, StreamExt};
use tokio_util::codec::Framed;

use crate::brokers::{BrokerOwner, LinkEvent};
use crate::state::BrokerRecord;

/// A broker end that passes the handshake and then reads frames until the socket closes;
/// resolves to how many frames it read after the handshake.
fn broker(owner: &BrokerOwner) -> tokio::task::JoinHandle<usize> {
    let listener = tokio::net::UnixListener::bind(&owner.socket_path).unwrap();
    let owner = owner.clone();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut link = Framed::new(stream, frame_codec());
        let frame = link.next().await.unwrap().unwrap();
        let GatewayToBroker::Hello(hello) = decode(&frame).unwrap() else {
            panic!("no hello");
        };
        let reply = BrokerToGateway::Hello(BrokerHello {
            protocol_version: PROTOCOL_VERSION,
            build: "test".into(),
            session_id: owner.session_id.clone(),
            generation: owner.generation,
            proof: common::hash::broker_proof(&owner.secret, owner.binding(), &hello.nonce),
            challenge: "challenge".into(),
            refused: None,
        });
        link.send(encode(&reply).unwrap()).await.unwrap();
        let mut frames = 0;
        while let Some(Ok(_)) = link.next().await {
            frames += 1;
        }
        // The proof is the first of them.
        frames - 1
    })
}

#[tokio::test]
async fn a_frame_that_cannot_be_written_closes_the_link_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let owner = BrokerOwner::derive(dir.path(), "key", "ns_0123456789abcdef", 1);
    std::fs::create_dir_all(&owner.runtime_dir).unwrap();
    let served = broker(&owner);
    let pid = std::process::id() as i32;
    let record = BrokerRecord {
        pid,
        start_time: sandbox::process::process_start_time(pid).unwrap(),
        boot_id: sandbox::process::boot_id().unwrap(),
        socket_path: owner.socket_path.display().to_string(),
        runtime_dir: owner.runtime_dir.display().to_string(),
        secret: owner.secret.clone(),
        generation: 1,
        next_event_seq: 1,
    };
    let mut link = super::connect(&owner, &record, Duration::from_secs(2))
        .await
        .unwrap();
    link.outgoing.send(GatewayToBroker::Ack { seq: 1 }).unwrap();
    // Quotes double when escaped: the frame is over the limit.
    let huge = GatewayToBroker::Stop {
        reason: "\"".repeat(MAX_FRAME_BYTES / 2 + 1),
    };
    link.outgoing.send(huge).unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), link.incoming.recv())
        .await
        .expect("the link reports its end at once");
    assert!(
        matches!(closed, Some(LinkEvent::Closed { .. })),
        "{closed:?}"
    );
    assert!(link.close.is_cancelled());
    let read = tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("the broker sees the socket close")
        .unwrap();
    assert_eq!(read, 1, "the ack went, the oversized frame never did");
    // Nothing more is taken: a send now fails instead of vanishing.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(link.outgoing.send(GatewayToBroker::Ack { seq: 2 }).is_err());
}
