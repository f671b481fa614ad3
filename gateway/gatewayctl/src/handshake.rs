//! The opt-in live check of a broker (`brokers --handshake`): `broker::client::probe_broker` —
//! the gateway's own checks (identity, socket peer, HMAC proof of a fresh nonce under the
//! recorded secret, bound to the session and generation it is recorded for) — without the gateway's proof, so the broker keeps its verified gateway link;
//! the probe only costs the broker one short, unverified connection.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::db::BrokerInfo;

const TIMEOUT: Duration = Duration::from_secs(3);

/// What the broker answered.
pub struct Proven {
    pub protocol_version: u32,
    pub build: String,
}

/// Prove the broker at `record.socket_path` is the recorded one, holds its secret and serves
/// session `session_id` (the row the record was read from).
pub fn verify(session_id: &str, record: &BrokerInfo) -> anyhow::Result<Proven> {
    if record.secret.is_empty() {
        bail!("no broker secret recorded");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let recorded = broker::client::RecordedBroker {
        socket_path: Path::new(&record.socket_path),
        pid: record.pid,
        start_time: record.start_time,
        boot_id: &record.boot_id,
        secret: &record.secret,
        binding: common::hash::BrokerBinding {
            session_id,
            generation: record.generation,
        },
    };
    let hello = runtime.block_on(broker::client::probe_broker(
        &recorded,
        TIMEOUT,
        &format!("gatewayctl {}", env!("CARGO_PKG_VERSION")),
    ))?;
    Ok(Proven {
        protocol_version: hello.protocol_version,
        build: hello.build,
    })
}
