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

use crate::state::BrokerState;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bind the socket and accept gateway connections until shutdown.
pub async fn serve(state: Arc<BrokerState>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let path = std::path::PathBuf::from(&state.spec.socket_path);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).context("binding broker socket")?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .context("restricting broker socket")?;
    Ok(tokio::spawn(async move {
        let mut current: Option<tokio::task::JoinHandle<()>> = None;
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
            // A newer verified connection replaces the old one (the gateway restarted).
            if let Some(old) = current.take() {
                old.abort();
            }
            let state = state.clone();
            current = Some(tokio::spawn(async move {
                if let Err(err) = connection(state, stream).await {
                    tracing::info!("gateway connection ended: {err:#}");
                }
            }));
        }
    }))
}

async fn connection(state: Arc<BrokerState>, stream: UnixStream) -> anyhow::Result<()> {
    let mut framed = Framed::new(stream, frame_codec());
    let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, framed.next())
        .await
        .context("handshake timed out")?
        .context("gateway closed before hello")??;
    let GatewayToBroker::Hello(hello) = decode::<GatewayToBroker>(&first)? else {
        bail!("first frame was not a hello");
    };
    let version = PROTOCOL_VERSION.min(hello.protocol_max);
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
        proof: common::hash::hmac_hex(&state.spec.secret, &hello.nonce),
        refused: refused.clone(),
    });
    framed.send(encode(&reply)?).await?;
    if let Some(reason) = refused {
        bail!(reason);
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
        }
    }
}

/// Apply one message from the gateway; returns a direct answer when one is due.
async fn apply(state: &Arc<BrokerState>, message: GatewayToBroker) -> Option<BrokerToGateway> {
    match message {
        GatewayToBroker::Hello(_) => Some(BrokerToGateway::Unsupported {
            message_type: "hello (already connected)".into(),
        }),
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
        assert!(common::hash::verify_hmac_hex(&state.spec.secret, "nonce-1", &newer.proof));

        let incompatible = hello(&state, PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 3).await;
        let reason = incompatible.refused.expect("refused");
        assert!(reason.contains("no common protocol version"), "{reason}");
        state.shutdown.cancel();
    }
}
