//! Native Gateway daemon: the public MCP endpoint for ChatGPT, the durable state (single writer),
//! leases, idempotency and the ledger, and the supervision of one broker per session.
//!
//! Layout (ARCHITECTURE.md has the file map):
//! - `mcp`: the MCP transport (HTTP app, auth, stdio); `tools`: the six public tools.
//! - `oauth`: OAuth 2.1 for the connector (the gateway as its own authorization server) and the
//!   owner's admin socket.
//! - `session`: the session core behind the tools, and broker events into state.
//! - `brokers`: the broker seam — processes (spawn, identity, signals) and verified links.
//! - `view`: the SessionView's types and schema; `state`: the SQLite store and its records.
//! - `boundary`: the runner confinement brokers must establish, and `network_boundary`.
//! - `config`, `limits`, `error`: configuration, resource limits, public errors;
//!   `host_guard`: the Host allow-list in front of every HTTP route.
//! - `http_server`: connection limits and graceful stop under the HTTP app; `drain`: the
//!   graceful stop of tool calls.
//! - `worktree`: managed Git worktrees of `worktree_write` sessions.
//! - `instance_lock`: one gateway per state dir; `runtime_area`: the commands' runtime area.
//! - `modes`: what `gateway serve`, `broker` and `sandbox-exec` do once `main` parsed them.

pub mod boundary;
pub mod brokers;
pub mod config;
pub mod deepseek;
pub mod drain;
pub mod error;
pub mod host_guard;
pub mod http_server;
pub mod instance_lock;
pub mod limits;
pub mod mcp;
pub mod modes;
pub mod oauth;
pub mod pace;
pub mod private_files;
pub mod prune;
pub mod runtime_area;
pub mod session;
pub mod skills;
pub mod state;
pub mod state_budget;
pub mod tools;
pub mod view;
pub mod worktree;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use session::Gateway;

/// Open the state and build the gateway core.
pub fn open(config: Config) -> anyhow::Result<Arc<Gateway>> {
    let store = state::Store::open(&config.state_dir).context("opening state database")?;
    let key = config::load_or_create_server_key(&config.state_dir)?;
    let area_made = runtime_area::establish(&config.state_dir);
    let gateway = Gateway::new(
        store,
        config,
        key,
        Arc::new(brokers::process::ProcessHost),
        // The one sub-session kind: DeepSeek's, plugged into the session core's hooks.
        Arc::new(deepseek::Deepseek::new()),
    );
    if !area_made {
        // The watch makes one at its first look, and keeps trying every tick.
        tracing::warn!("the command runtime area will be made again in the background");
    }
    gateway.reaper.watch(&gateway.config.state_dir);
    Ok(gateway)
}

/// How often ended sessions' files are checked against the retention.
const PRUNE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// How often leases are checked for expiry.
const LEASE_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Re-adopt the brokers of live sessions, then keep enforcing leases in the background.
pub async fn start_background(gateway: Arc<Gateway>, shutdown: CancellationToken) {
    gateway.adopt_all().await;
    // Retention: ended sessions' files older than `CLAUDE_TOOLS_RETENTION_DAYS` go, every hour.
    tokio::spawn({
        let (gateway, shutdown) = (gateway.clone(), shutdown.clone());
        async move {
            let mut ticks = tokio::time::interval(PRUNE_INTERVAL);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    () = shutdown.cancelled() => return,
                }
                let gateway = gateway.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let retention = gateway.config.retention;
                    if let Err(err) = prune::prune(&gateway, retention, false) {
                        tracing::warn!("automatic prune: {err:#}");
                    }
                })
                .await;
            }
        }
    });
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

/// Serve MCP over HTTP on `listen` until `shutdown`, then stop gracefully: waits end at once,
/// calls in flight finish (bounded), connections close. Prints the listening line on stdout.
/// Also serves the OAuth endpoints (unless `--auth token`) and the owner's admin socket.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    listen: SocketAddr,
    auth: &oauth::AuthSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let oauth = if auth.mode.oauth() {
        let oauth = oauth::OAuth::open(auth, addr, &gateway.config.state_dir, gateway.clone())?;
        oauth
            .store
            .charge_refreshes_to(gateway.state_budget.clone());
        Some(oauth)
    } else {
        None
    };
    let admin_listener = oauth::admin::bind(&gateway.config.state_dir)?;
    tokio::spawn(oauth::admin::serve(
        admin_listener,
        oauth::admin::Admin {
            mode: auth.mode,
            oauth: oauth.clone(),
            autorun_allowed: gateway.config.autorun_allowed,
            strict_hooks: gateway.config.strict_hooks,
            gateway: gateway.clone(),
            listen: Some(addr),
        },
        oauth::admin::socket_path(&gateway.config.state_dir),
        shutdown.clone(),
    ));
    // rmcp's own token is cancelled only after the calls in flight have answered.
    let mcp_shutdown = CancellationToken::new();
    let app = mcp::http_app(
        gateway.clone(),
        mcp_shutdown.clone(),
        auth.mode,
        oauth.clone(),
        &auth.public_hosts(),
    );
    match &oauth {
        Some(oauth) => tracing::info!(
            auth = auth.mode.as_str(),
            issuer = %oauth.issuer,
            "OAuth is on; approve a client with `gatewayctl oauth approve <page code>` (shown on its consent page)"
        ),
        None => tracing::info!(auth = auth.mode.as_str(), "OAuth is off"),
    }
    println!("listening http://{addr}/mcp");
    let accepting = CancellationToken::new();
    let stop = {
        let gateway = gateway.clone();
        let accepting = accepting.clone();
        async move {
            shutdown.cancelled().await;
            tracing::info!("stopping: no new connections or calls; finishing calls in flight");
            gateway.drain.start();
            accepting.cancel();
        }
    };
    tokio::spawn(stop);
    let limits = gateway.config.http;
    http_server::serve(listener, app, limits, accepting, drain::DRAIN_BOUND)
        .await
        .context("serving HTTP")?;
    if !gateway.drain.settled(drain::DRAIN_BOUND).await {
        tracing::warn!("tool calls still in flight after {:?}", drain::DRAIN_BOUND);
    }
    mcp_shutdown.cancel();
    Ok(())
}

/// Serve MCP over stdio until the peer closes or `shutdown`; then stop like HTTP: waits end at
/// once, calls in flight answer (bounded), and the service ends.
pub async fn serve_stdio(gateway: Arc<Gateway>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = mcp::GatewayMcp::new(gateway.clone())
        .serve(rmcp::transport::stdio())
        .await
        .context("starting stdio MCP")?;
    let cancel = running.cancellation_token();
    let stopping = async {
        shutdown.cancelled().await;
        gateway.drain.start();
        if !gateway.drain.settled(drain::DRAIN_BOUND).await {
            tracing::warn!("tool calls still in flight after {:?}", drain::DRAIN_BOUND);
        }
        // Let the answers of the last calls reach stdout before the service stops.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        cancel.cancel();
    };
    tokio::select! {
        ended = running.waiting() => {
            ended.context("serving stdio MCP")?;
        }
        () = stopping => {}
    }
    Ok(())
}
