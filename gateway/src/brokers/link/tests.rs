//! A link whose writer fails (a message over the frame limit) closes and says so: the reader
//! reports `Closed`, the broker sees the socket close, nothing is left half-working. A connect
//! that fails says what failed (`ConnectError`), in the handshake's own words.

use std::time::Duration;

use common::codec::{MAX_FRAME_BYTES, decode, encode, frame_codec};
use common::protocol::{BrokerHello, BrokerToGateway, GatewayToBroker, PROTOCOL_VERSION};
use futures::{SinkExt, StreamExt};
use tokio_util::codec::Framed;

use crate::brokers::{BrokerOwner, ConnectError, LinkEvent};
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

/// A record of this test process as `owner`'s broker (the handshake checks the socket's peer
/// is the recorded process).
fn record_of_this_process(owner: &BrokerOwner) -> BrokerRecord {
    let pid = std::process::id() as i32;
    BrokerRecord {
        pid,
        start_time: sandbox::process::process_start_time(pid).unwrap(),
        boot_id: sandbox::process::boot_id().unwrap(),
        socket_path: owner.socket_path.display().to_string(),
        runtime_dir: owner.runtime_dir.display().to_string(),
        secret: owner.secret.clone(),
        generation: owner.generation,
        next_event_seq: 1,
    }
}

#[tokio::test]
async fn a_frame_that_cannot_be_written_closes_the_link_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let owner = BrokerOwner::derive(dir.path(), "key", "ns_0123456789abcdef", 1);
    std::fs::create_dir_all(&owner.runtime_dir).unwrap();
    let served = broker(&owner);
    let record = record_of_this_process(&owner);
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

/// Generation 2 of the session finds generation 1's broker at the session's socket: refused as
/// another session's (which disowns the record), not as gone.
#[tokio::test]
async fn a_broker_of_another_generation_is_the_wrong_session() {
    let dir = tempfile::tempdir().unwrap();
    let first = BrokerOwner::derive(dir.path(), "key", "ns_0123456789abcdef", 1);
    std::fs::create_dir_all(&first.runtime_dir).unwrap();
    let _served = broker(&first);
    let second = BrokerOwner::derive(dir.path(), "key", "ns_0123456789abcdef", 2);
    let record = record_of_this_process(&second);
    let Err(err) = super::connect(&second, &record, Duration::from_secs(2)).await else {
        panic!("another generation's broker was attached");
    };
    assert!(matches!(err, ConnectError::WrongSession), "{err:?}");
    assert!(err.disowns_record());
}

/// No broker at the session's socket: unreachable once the window passes, and the record kept.
#[tokio::test]
async fn a_missing_socket_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let owner = BrokerOwner::derive(dir.path(), "key", "ns_0123456789abcdef", 1);
    let record = record_of_this_process(&owner);
    let Err(err) = super::connect(&owner, &record, Duration::from_millis(200)).await else {
        panic!("attached to nothing");
    };
    assert!(matches!(err, ConnectError::SocketUnreachable(_)), "{err:?}");
    assert!(!err.disowns_record());
}

/// A record whose process is gone (its start time is another's) is refused before anything is
/// connected.
#[tokio::test]
async fn a_record_of_another_process_is_not_running() {
    let dir = tempfile::tempdir().unwrap();
    let owner = BrokerOwner::derive(dir.path(), "key", "ns_0123456789abcdef", 1);
    let mut record = record_of_this_process(&owner);
    record.start_time += 1;
    let Err(err) = super::connect(&owner, &record, Duration::from_secs(2)).await else {
        panic!("attached to a record of another process");
    };
    assert!(
        matches!(
            err,
            ConnectError::NotRunning(sandbox::process::Identity::PidReused)
        ),
        "{err:?}"
    );
    assert!(!err.disowns_record());
}

/// Typing the error changed no words: each failure of the handshake reads as it did.
#[test]
fn connect_errors_say_what_the_handshake_said() {
    use broker::client::BrokerLinkError;
    use common::protocol::HelloRejected;
    let failures = || {
        vec![
            BrokerLinkError::IdentityMismatch(sandbox::process::Identity::OtherBoot),
            BrokerLinkError::Connect(std::io::ErrorKind::NotFound.into()),
            BrokerLinkError::PeerCredentials(std::io::ErrorKind::Other.into()),
            BrokerLinkError::PeerUid,
            BrokerLinkError::PeerPid,
            BrokerLinkError::Timeout,
            BrokerLinkError::Closed,
            BrokerLinkError::NotHello,
            BrokerLinkError::Verify(HelloRejected::Refused("no common protocol version".into())),
            BrokerLinkError::Verify(HelloRejected::OtherSession),
            BrokerLinkError::Verify(HelloRejected::BadProof),
            BrokerLinkError::Io(std::io::ErrorKind::BrokenPipe.into()),
            BrokerLinkError::Codec(common::codec::CodecError::TooLarge { bytes: 9 }),
        ]
    };
    for (said, typed) in failures().into_iter().zip(failures()) {
        assert_eq!(ConnectError::from(typed).to_string(), said.to_string());
    }
}
