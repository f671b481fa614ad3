//! Native Gateway daemon: the public MCP endpoint for ChatGPT, the durable state (single writer),
//! leases, idempotency and the ledger, and the supervision of one broker per session.
//!
//! Layout:
//! - `mcp`: the six public tools (the only MCP-aware module).
//! - `service`: session logic behind the tools, and broker events into state.
//! - `view`: the SessionView and its schema.
//! - `brokers`: spawning, verifying and linking brokers.
//! - `boundary`: the runner confinement brokers must establish, and `network_boundary`.
//! - `state`: the SQLite store.
//! - `config`, `error`, `validate`: configuration, public errors, start-input checks.
//! - `worktree`: managed Git worktrees of `worktree_write` sessions.
//! - `write_recovery`: resolving writes a dead broker left `prepared`.

pub mod boundary;
pub mod brokers;
pub mod config;
pub mod error;
pub mod limits;
pub mod mcp;
pub mod service;
pub mod state;
pub mod validate;
pub mod view;
pub mod worktree;
pub mod write_recovery;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::serve::ListenerExt;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use service::Gateway;

/// Open the state and build the gateway core.
pub fn open(config: Config) -> anyhow::Result<Arc<Gateway>> {
    let store = state::Store::open(&config.state_dir).context("opening state database")?;
    let key = config::load_or_create_server_key(&config.state_dir)?;
    Ok(Gateway::new(store, config, key))
}

/// How often leases are checked for expiry.
const LEASE_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Re-adopt the brokers of live sessions, then keep enforcing leases in the background.
pub async fn start_background(gateway: Arc<Gateway>, shutdown: CancellationToken) {
    gateway.adopt_all().await;
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(LEASE_SWEEP_INTERVAL);
        loop {
            tokio::select! {
                _ = ticks.tick() => gateway.enforce_leases(),
                () = shutdown.cancelled() => return,
            }
        }
    });
}

/// Serve MCP over HTTP on `listen` until `shutdown`; prints the listening line on stdout.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    listen: SocketAddr,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let app = mcp::http_app(gateway, shutdown.child_token());
    println!("listening http://{addr}/mcp");
    // Small SSE events must not wait for delayed ACKs (Nagle): set TCP_NODELAY on each connection.
    axum::serve(
        listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        app,
    )
    .with_graceful_shutdown(async move { shutdown.cancelled().await })
    .await
    .context("serving HTTP")
}

/// Serve MCP over stdio until the peer closes.
pub async fn serve_stdio(gateway: Arc<Gateway>) -> anyhow::Result<()> {
    let running = mcp::GatewayMcp::new(gateway)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting stdio MCP")?;
    running.waiting().await.context("serving stdio MCP")?;
    Ok(())
}
