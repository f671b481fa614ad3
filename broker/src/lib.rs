//! Per-session broker: owns the Claude Code runner's process group, the model-turn bridge
//! (Anthropic Messages API on loopback), the executor MCP endpoint, and the socket the gateway
//! connects to. It never writes durable state: every event goes to the gateway, and whatever needs
//! to be durable before the runner sees it waits for the gateway's acknowledgement.
//!
//! Layout:
//! - `state`: what the broker holds in memory (outbox of events, turns, approved actions).
//! - `link`: the gateway connection (handshake, events out, releases in).
//! - `client`: the other end of that handshake, for the gateway and gatewayctl.
//! - `bridge`: `POST /v1/messages` and `count_tokens` for the runner.
//! - `executor_mcp`: the MCP server the runner calls tools through; runs approved actions only.
//! - `executor`: the logical tools themselves.
//! - `runner`: launching, feeding and stopping Claude Code.
//! - `places`: the session's own managed worktree and its commands' scratch root, from the spec.
//! - `confine`: the runner's confinement (the broker's loopback-only network namespace, the
//!   runner's Landlock domain and seccomp filter), established in full or the runner not started.

mod bridge;
pub mod client;
pub mod confine;
pub mod executor;
mod executor_mcp;
mod link;
mod places;
mod runner;
mod state;
#[cfg(test)]
mod test_support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::serve::ListenerExt;
use common::protocol::{BrokerEvent, BrokerSpec};

pub use state::BrokerState;

/// After a termination signal has stopped the runner, how long the broker waits for its last
/// events to be acknowledged before it exits anyway.
const SIGNAL_EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// [`run`] on `runtime`, to its end. The gateway binary calls this plain function rather than
/// awaiting `run`: an async fn's body is compiled into the crate that polls it, so the broker's
/// whole run was compiled into the gateway's binary, last and alone (BUILD_RESULTS.md).
pub fn block_on_run(
    runtime: &tokio::runtime::Runtime,
    spec_path: PathBuf,
    isolation: confine::NetworkIsolation,
) -> anyhow::Result<()> {
    runtime.block_on(run(spec_path, isolation))
}

/// Run a broker from the spec file the gateway wrote; returns when the session is over.
/// `isolation`: what [`confine::enter_network_namespace`] achieved before the runtime started.
pub async fn run(spec_path: PathBuf, isolation: confine::NetworkIsolation) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&spec_path).context("reading broker spec")?;
    // The spec holds secrets; nothing needs it after this read.
    let _ = std::fs::remove_file(&spec_path);
    let spec: BrokerSpec = serde_json::from_str(&text).context("parsing broker spec")?;
    let state = Arc::new(BrokerState::new(spec)?);

    // Serve the bridge and the executor first: Claude Code gives its MCP server only a short
    // connect window, so they must be up before the runner starts.
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .context("binding loopback port")?;
    let port = listener
        .local_addr()
        .context("reading loopback port")?
        .port();
    let app = bridge::router(state.clone()).merge(executor_mcp::router(state.clone()));
    let http_shutdown = state.shutdown.clone();
    let http = tokio::spawn(async move {
        // Small SSE events must not wait for delayed ACKs (Nagle): set TCP_NODELAY on each connection.
        axum::serve(
            listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            app,
        )
        .with_graceful_shutdown(async move { http_shutdown.cancelled().await })
        .await
    });

    // SIGTERM or SIGINT (the gateway enforcing a lease without a link, or the owner) stops the
    // runner's group cleanly before the broker leaves.
    let signal_state = state.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        runner::stop(&signal_state, "the broker received a termination signal").await;
        // Whoever sent the signal (the gateway without a link, or the owner) may never take the
        // runner's exit report: give a link a moment to acknowledge it, then leave rather than
        // wait minutes for an acknowledgement. (The gateway kills a broker still there after 12 s.)
        tokio::select! {
            () = tokio::time::sleep(SIGNAL_EXIT_GRACE) => {}
            () = signal_state.shutdown.cancelled() => {}
        }
        signal_state.shutdown.cancel();
    });

    let launched = runner::launch(&state, port, &isolation).await;
    // Only now accept the gateway: a prompt it releases must find the runner's input open.
    let gateway_link = link::serve(state.clone())
        .await
        .context("serving gateway socket")?;
    if let Err(err) = launched {
        // The detail (it may name private paths) stays in the broker log.
        tracing::error!("runner launch failed: {err:#}");
        let seq = state.push_event(BrokerEvent::RunnerLaunchFailed {
            message: "Claude Code could not be started; the owner can find the reason in the \
                      session's broker log"
                .into(),
        });
        state
            .wait_acked(seq, std::time::Duration::from_secs(300))
            .await;
        state.finish("runner launch failed").await;
    }

    state.shutdown.cancelled().await;
    // No command outlives its broker: the helper prepared for the next one goes (it sits in the
    // session's memory cgroup), then the running ones' groups are killed and their supervisors
    // waited for, to reap them and remove their cgroups.
    let prepared = state.executor.prepared_helper();
    let left = tokio::task::spawn_blocking(move || {
        prepared.close();
        executor::stop_running_commands(std::time::Duration::from_secs(5))
    })
    .await
    .unwrap_or(0);
    if left > 0 {
        tracing::warn!("{left} commands were still being reaped at shutdown");
    }
    // The session's memory cgroup, kept across its commands (a broker killed outright leaves
    // it to the next gateway start's sweep, or to the session's next broker).
    #[cfg(target_os = "linux")]
    if let Some(group) = state.executor.command_limits().group {
        let removed =
            tokio::task::spawn_blocking(move || sandbox::linux::cgroup::remove_session(&group))
                .await
                .unwrap_or(false);
        tracing::debug!(removed, "the session's memory cgroup");
    }
    gateway_link.abort();
    let _ = http.await;
    // The session's dir in the command runtime area, empty once no command runs (never
    // recursive: a command still being reaped keeps its scratch until it is gone).
    // The session's copy-on-write layer, if a command kept it past `finish` (a broker that
    // died without getting here leaves it in the protected runtime area until the session's
    // next broker starts).
    if let Some(layer) = state.executor.command_layer_in_place() {
        layer.discard_if_idle();
    }
    if let Some(scratch_root) = state.executor.command_scratch_root() {
        let _ = std::fs::remove_dir(scratch_root.join(executor::SCRATCH_MOUNT_POINT));
        let _ = std::fs::remove_dir(scratch_root);
    }
    Ok(())
}

/// A mutex's guard, also after a panic elsewhere poisoned it: the broker keeps serving its
/// session rather than failing every later call.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
