//! The gateway's connection to this broker: a Unix socket (0600) that accepts one verified gateway
//! at a time. Handshake first (version range, HMAC proofs of the broker secret bound to the session
//! and runner generation of this broker's spec), then unacknowledged events are sent in order and
//! releases from the gateway are applied.

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
            let own_uid = rustix::process::getuid().as_raw();
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
    // What this broker was started for, from its spec: the gateway checks it is the session and
    // generation it attaches the link to, and both proofs bind it.
    let binding = common::hash::BrokerBinding {
        session_id: &state.spec.session_id,
        generation: state.spec.generation,
    };
    let reply = BrokerToGateway::Hello(BrokerHello {
        protocol_version: version,
        build: env!("CARGO_PKG_VERSION").to_string(),
        session_id: state.spec.session_id.clone(),
        generation: state.spec.generation,
        proof: common::hash::broker_proof(&state.spec.secret, binding, &hello.nonce),
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
    let expected = common::hash::gateway_proof(&state.spec.secret, binding, &challenge);
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
    // Egress requests this link carries are failed to the runner if the link ends first.
    let carried = EgressCarried {
        link: state.new_egress_link(),
        state: state.clone(),
    };
    loop {
        for (seq, event) in state.events_after(sent_upto) {
            framed
                .send(encode(&BrokerToGateway::Event { seq, event })?)
                .await?;
            sent_upto = seq;
        }
        for (request_id, body) in state.take_queued_egress(carried.link) {
            framed
                .send(encode(&BrokerToGateway::EgressRequest {
                    request_id,
                    body,
                })?)
                .await?;
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

/// Fails the egress requests a link carried when it ends (answered ones are already gone).
struct EgressCarried {
    link: u64,
    state: Arc<BrokerState>,
}

impl Drop for EgressCarried {
    fn drop(&mut self) {
        self.state.fail_egress_of(self.link);
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
        GatewayToBroker::Verdict { seq, verdict } => {
            state.record_verdict(seq, verdict);
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
        GatewayToBroker::EgressResponse(response) => {
            state.answer_egress(response);
            None
        }
        GatewayToBroker::Unknown => Some(BrokerToGateway::Unsupported {
            message_type: "unknown".into(),
        }),
    }
}

#[cfg(test)]
mod tests;
