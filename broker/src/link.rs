//! The gateway's connection to this broker: a Unix socket (0600) that accepts one verified gateway
//! at a time. Handshake first (version range, HMAC proof of the broker secret), then unacknowledged
//! events are sent in order and releases from the gateway are applied.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use common::codec::{decode, encode, frame_codec};
use common::protocol::{
    BrokerHello, BrokerToGateway, GatewayToBroker, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN,
};
use futures::{SinkExt, StreamExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use crate::state::BrokerState;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bind the socket and accept gateway connections until shutdown.
pub async fn serve(state: Arc<BrokerState>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let path = std::path::PathBuf::from(&state.spec.socket_path);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).context("binding broker socket")?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .context("restricting broker socket")?;
    // The verified link in charge; a newer connection replaces it only once it has proven itself.
    let current: Arc<std::sync::Mutex<Option<CancellationToken>>> = Arc::default();
    Ok(tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = state.shutdown.cancelled() => break,
            };
            let Ok((stream, _)) = accepted else { continue };
            let own_uid = nix::unistd::getuid().as_raw();
            match stream.peer_cred() {
                Ok(cred) if cred.uid() == own_uid => {}
                _ => {
                    tracing::warn!("refused a socket peer with another uid");
                    continue;
                }
            }
            let (state, current) = (state.clone(), current.clone());
            tokio::spawn(async move {
                if let Err(err) = connection(state, stream, current).await {
                    tracing::info!("gateway connection ended: {err:#}");
                }
            });
        }
    }))
}

async fn connection(
    state: Arc<BrokerState>,
    stream: UnixStream,
    current: Arc<std::sync::Mutex<Option<CancellationToken>>>,
) -> anyhow::Result<()> {
    let mut framed = Framed::new(stream, frame_codec());
    let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.next())
        .await
        .context("handshake timed out")?
        .context("gateway closed before hello")??;
    let GatewayToBroker::Hello(hello) = decode::<GatewayToBroker>(&first)? else {
        bail!("first frame was not a hello");
    };
    let version = PROTOCOL_VERSION.min(hello.protocol_max);
    let challenge = common::hash::new_secret("challenge");
    let refused = (version < hello.protocol_min || version < PROTOCOL_VERSION_MIN).then(|| {
        format!(
            "no common protocol version: gateway speaks {}..={}, broker {}..={}",
            hello.protocol_min, hello.protocol_max, PROTOCOL_VERSION_MIN, PROTOCOL_VERSION
        )
    });
    let reply = BrokerToGateway::Hello(BrokerHello {
        protocol_version: version,
        build: env!("CARGO_PKG_VERSION").to_string(),
        session_id: state.spec.session_id.clone(),
        proof: common::hash::broker_proof(&state.spec.secret, &hello.nonce),
        challenge: challenge.clone(),
        refused: refused.clone(),
    });
    framed.send(encode(&reply)?).await?;
    if let Some(reason) = refused {
        bail!(reason);
    }
    // The gateway proves it holds the secret too; anything else from any other local process is
    // never trusted with a reply or a stop.
    let second = tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.next())
        .await
        .context("gateway proof timed out")?
        .context("peer closed before its proof")??;
    let GatewayToBroker::Proof { proof } = decode::<GatewayToBroker>(&second)? else {
        bail!("second frame was not the gateway's proof");
    };
    let expected = common::hash::gateway_proof(&state.spec.secret, &challenge);
    if !common::hash::constant_time_eq(expected.as_bytes(), proof.as_bytes()) {
        bail!("peer failed the gateway proof");
    }
    // Verified: this link replaces the previous one.
    state.set_link_version(version);
    let mine = CancellationToken::new();
    if let Some(previous) = crate::state::lock(&current).replace(mine.clone()) {
        previous.cancel();
    }

    // Everything not yet acknowledged goes again, in order.
    let mut sent_upto = state.acked_upto();
    loop {
        for (seq, event) in state.events_after(sent_upto) {
            framed
                .send(encode(&BrokerToGateway::Event { seq, event })?)
                .await?;
            sent_upto = seq;
        }
        tokio::select! {
            () = state.outbox_changed.notified() => {}
            frame = framed.next() => {
                let Some(frame) = frame else { bail!("gateway closed the connection") };
                let message: GatewayToBroker = decode(&frame?)?;
                if let Some(answer) = apply(&state, message).await {
                    framed.send(encode(&answer)?).await?;
                }
            }
            () = state.shutdown.cancelled() => return Ok(()),
            () = mine.cancelled() => bail!("replaced by a newer verified gateway connection"),
        }
    }
}

/// Apply one message from the gateway; returns a direct answer when one is due.
async fn apply(state: &Arc<BrokerState>, message: GatewayToBroker) -> Option<BrokerToGateway> {
    match message {
        GatewayToBroker::Hello(_) | GatewayToBroker::Proof { .. } => {
            Some(BrokerToGateway::Unsupported {
                message_type: "handshake frame after the handshake".into(),
            })
        }
        GatewayToBroker::Ack { seq } => {
            state.ack(seq);
            None
        }
        GatewayToBroker::Reply(reply) => {
            state.release_reply(reply);
            None
        }
        GatewayToBroker::Prompt(prompt) => {
            let state = state.clone();
            tokio::spawn(async move { crate::runner::send_prompt(&state, prompt).await });
            None
        }
        GatewayToBroker::Stop { reason } => {
            let state = state.clone();
            tokio::spawn(async move { crate::runner::stop(&state, &reason).await });
            None
        }
        GatewayToBroker::Unknown => Some(BrokerToGateway::Unsupported {
            message_type: "unknown".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::protocol::GatewayHello;

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
        let BrokerToGateway::Hello(hello) =
            decode(&gateway.next().await.unwrap().unwrap()).unwrap()
        else {
            panic!("no hello");
        };
        let proof = common::hash::gateway_proof(&state.spec.secret, &hello.challenge);
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
        let seq =
            state.push_event(common::protocol::BrokerEvent::BrokerExiting { reason: "x".into() });
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
            common::hash::broker_proof(&state.spec.secret, "nonce-1")
        );
        assert!(!newer.challenge.is_empty());

        let incompatible = hello(&state, PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 3).await;
        let reason = incompatible.refused.expect("refused");
        assert!(reason.contains("no common protocol version"), "{reason}");
        state.shutdown.cancel();
    }
}
