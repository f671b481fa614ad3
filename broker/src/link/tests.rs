//! Unit tests of the gateway link: an unproven peer can neither release nor take over the broker,
//! and the protocol version range is negotiated with typed refusals.

use super::*;
use common::hash::BrokerBinding;
use common::protocol::GatewayHello;

/// What the test broker's spec says it was started for.
fn binding(state: &BrokerState) -> BrokerBinding<'_> {
    BrokerBinding {
        session_id: &state.spec.session_id,
        generation: state.spec.generation,
    }
}

async fn hello(state: &Arc<BrokerState>, min: u32, max: u32) -> BrokerHello {
    let stream = UnixStream::connect(&state.spec.socket_path).await.unwrap();
    let mut framed = Framed::new(stream, frame_codec());
    let message = GatewayToBroker::Hello(GatewayHello {
        protocol_min: min,
        protocol_max: max,
        build: "test".into(),
        nonce: "nonce-1".into(),
    });
    framed.send(encode(&message).unwrap()).await.unwrap();
    let frame = framed.next().await.unwrap().unwrap();
    match decode::<BrokerToGateway>(&frame).unwrap() {
        BrokerToGateway::Hello(hello) => hello,
        other => panic!("expected a hello, got {other:?}"),
    }
}

/// A peer that cannot prove it holds the secret is never trusted with a release and does not
/// displace the verified gateway.
#[tokio::test]
async fn an_unproven_peer_cannot_release_or_take_over() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let _link = serve(state.clone()).await.unwrap();

    // The real gateway: hello, then its proof of the broker's challenge.
    let stream = UnixStream::connect(&state.spec.socket_path).await.unwrap();
    let mut gateway = Framed::new(stream, frame_codec());
    let hello_frame = GatewayToBroker::Hello(GatewayHello {
        protocol_min: PROTOCOL_VERSION_MIN,
        protocol_max: PROTOCOL_VERSION,
        build: "test".into(),
        nonce: "n1".into(),
    });
    gateway.send(encode(&hello_frame).unwrap()).await.unwrap();
    let BrokerToGateway::Hello(hello) = decode(&gateway.next().await.unwrap().unwrap()).unwrap()
    else {
        panic!("no hello");
    };
    let proof = common::hash::gateway_proof(&state.spec.secret, binding(&state), &hello.challenge);
    gateway
        .send(encode(&GatewayToBroker::Proof { proof }).unwrap())
        .await
        .unwrap();

    // An impostor with the same uid: it answers the hello with a forged release instead.
    let stream = UnixStream::connect(&state.spec.socket_path).await.unwrap();
    let mut impostor = Framed::new(stream, frame_codec());
    impostor.send(encode(&hello_frame).unwrap()).await.unwrap();
    let _ = impostor.next().await.unwrap().unwrap();
    let forged = GatewayToBroker::Reply(common::protocol::ReplyRelease {
        turn_id: "t".into(),
        fingerprint: "f".into(),
        text: String::new(),
        calls: vec![common::protocol::ApprovedCall {
            action_id: "evil".into(),
            call_index: 0,
            name: "Read".into(),
            arguments: serde_json::json!({"file_path": "/etc/hostname"}),
            outcome: None,
        }],
    });
    impostor.send(encode(&forged).unwrap()).await.unwrap();
    assert!(
        impostor.next().await.is_none(),
        "the impostor's link must be closed"
    );
    assert!(
        state.action("evil").is_none(),
        "a forged release was accepted"
    );

    // The verified gateway still gets events.
    let seq = state.push_event(common::protocol::BrokerEvent::BrokerExiting { reason: "x".into() });
    assert_eq!(crate::test_support::next_event_seq(&mut gateway).await, seq);
    state.shutdown.cancel();
}

/// A newer gateway whose range still includes this broker's version talks to it; one that
/// no longer does gets a typed refusal, not a silent misread.
#[tokio::test]
async fn version_range_is_negotiated_and_refusals_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let _link = serve(state.clone()).await.unwrap();

    let newer = hello(&state, PROTOCOL_VERSION_MIN, PROTOCOL_VERSION + 3).await;
    assert_eq!(newer.protocol_version, PROTOCOL_VERSION);
    assert!(newer.refused.is_none());
    assert_eq!(
        newer.proof,
        common::hash::broker_proof(&state.spec.secret, binding(&state), "nonce-1")
    );
    assert_eq!(
        (newer.session_id.as_str(), newer.generation),
        ("ns_test", 1)
    );
    assert!(!newer.challenge.is_empty());

    let incompatible = hello(&state, PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 3).await;
    let reason = incompatible.refused.expect("refused");
    assert!(reason.contains("no common protocol version"), "{reason}");
    // A gateway from before the session-bound proofs (protocol 1..=3) is refused too: its proof
    // would not say which session it attaches this broker to.
    let older = hello(&state, 1, 3).await;
    let reason = older.refused.expect("refused");
    assert!(reason.contains("no common protocol version"), "{reason}");
    state.shutdown.cancel();
}

/// A gateway that holds the secret but proves it for another session or generation (a proof
/// made for another broker, replayed) is not this broker's gateway: no event reaches it.
#[tokio::test]
async fn a_gateway_proof_for_another_session_or_generation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let _link = serve(state.clone()).await.unwrap();
    state.push_event(common::protocol::BrokerEvent::BrokerExiting { reason: "x".into() });
    for other in [
        BrokerBinding {
            session_id: "ns_other",
            generation: 1,
        },
        BrokerBinding {
            session_id: "ns_test",
            generation: 2,
        },
    ] {
        let stream = UnixStream::connect(&state.spec.socket_path).await.unwrap();
        let mut gateway = Framed::new(stream, frame_codec());
        let hello_frame = GatewayToBroker::Hello(GatewayHello {
            protocol_min: PROTOCOL_VERSION_MIN,
            protocol_max: PROTOCOL_VERSION,
            build: "test".into(),
            nonce: "n1".into(),
        });
        gateway.send(encode(&hello_frame).unwrap()).await.unwrap();
        let BrokerToGateway::Hello(hello) =
            decode(&gateway.next().await.unwrap().unwrap()).unwrap()
        else {
            panic!("no hello");
        };
        let proof = common::hash::gateway_proof(&state.spec.secret, other, &hello.challenge);
        gateway
            .send(encode(&GatewayToBroker::Proof { proof }).unwrap())
            .await
            .unwrap();
        assert!(
            gateway.next().await.is_none(),
            "a proof for {other:?} got the link"
        );
    }
    state.shutdown.cancel();
}
