//! The opt-in live check of a broker (`brokers --handshake`): `broker::client::probe_broker` —
//! the gateway's own checks (identity, socket peer, HMAC proof of a fresh nonce under the
//! recorded secret) — without the gateway's proof, so the broker keeps its verified gateway link;
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

/// Prove the broker at `record.socket_path` is the recorded one and holds its secret.
pub fn verify(record: &BrokerInfo) -> anyhow::Result<Proven> {
    if record.secret.is_empty() {
        bail!("no broker secret recorded");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let hello = runtime.block_on(broker::client::probe_broker(
        Path::new(&record.socket_path),
        record.pid,
        record.start_time,
        &record.boot_id,
        &record.secret,
        TIMEOUT,
        &format!("gatewayctl {}", env!("CARGO_PKG_VERSION")),
    ))?;
    Ok(Proven {
        protocol_version: hello.protocol_version,
        build: hello.build,
    })
}
