//! What each mode of the `gateway` binary does once `main` has parsed its arguments: `serve`
//! (logging, configuration, the instance registry, background work, signals, the transport), the
//! hidden `broker` a session runs in, and the hidden `sandbox-exec` command helper.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::filter::Targets;

use crate::oauth::{AuthMode, AuthSettings};

/// `gateway serve`'s options, as parsed.
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub stdio: bool,
    pub allowed_hosts: Vec<String>,
    pub json_logs: bool,
    pub auth: AuthMode,
    pub public_base: Option<String>,
}

/// `gateway serve`: until SIGTERM or SIGINT. Exit 2 for a configuration it refuses.
pub async fn serve(options: ServeOptions) -> anyhow::Result<ExitCode> {
    init_tracing(options.json_logs);
    // Before anything probes the host or starts a broker (they inherit the layout).
    crate::limits::prepare_command_memory();
    let settings = AuthSettings::new(options.auth, options.public_base.as_deref());
    let config = settings
        .and_then(|settings| Ok((crate::Config::from_env(options.allowed_hosts)?, settings)));
    let (config, auth) = match config {
        Ok(config) => config,
        Err(err) => {
            eprintln!("gateway: {err:#}");
            return Ok(ExitCode::from(2));
        }
    };
    // Other gateways on this host protect this one's state dir once it is listed; listed
    // nowhere, its token and keys would be open to their sessions: it does not start.
    if let Err(err) = sandbox::protected::instances::register(&config.state_dir) {
        eprintln!(
            "gateway: the state dir could not be listed in this account's registry of gateways \
             ({err}), so other gateways on this host would not protect it; give the account a \
             writable home (see /etc/passwd) or remove what blocks the registry"
        );
        return Ok(ExitCode::from(2));
    }
    let command_limits = config.command_limits;
    crate::limits::prepare_all_commands_memory(&command_limits);
    let instance_lock = config.instance_lock.clone();
    let gateway = crate::open(config)?;
    let shutdown = CancellationToken::new();
    crate::start_background(gateway.clone(), shutdown.clone()).await;
    let stopping = instance_lock.clone();
    let lost = watch_instance_lock(instance_lock, shutdown.clone());
    // SIGTERM (launchd, systemd) and SIGINT stop the server gracefully; brokers and runners keep
    // running for the next start to re-adopt.
    let signal = shutdown.clone();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        if let Some(lock) = &stopping {
            lock.mark_stopping();
        }
        signal.cancel();
    });
    let served = if options.stdio {
        crate::serve_stdio(gateway, shutdown).await
    } else {
        crate::serve_http(gateway, options.listen, &auth, shutdown).await
    };
    crate::limits::release_all_commands_memory(&command_limits);
    served?;
    if let Some(why) = lost.get() {
        eprintln!("gateway: {why}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// How often the instance lock is checked ([`crate::instance_lock::InstanceLock::check`]).
const LOCK_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Check the instance lock every second; when it no longer guards the state dir (moved or
/// replaced), stop serving like SIGTERM (brokers keep running) and keep why for the exit.
fn watch_instance_lock(
    lock: Option<std::sync::Arc<crate::instance_lock::InstanceLock>>,
    shutdown: CancellationToken,
) -> std::sync::Arc<std::sync::OnceLock<String>> {
    let lost = std::sync::Arc::new(std::sync::OnceLock::new());
    let Some(lock) = lock else { return lost };
    let noted = lost.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(LOCK_CHECK_INTERVAL);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = shutdown.cancelled() => return,
            }
            let check = lock.clone();
            let Ok(Err(err)) = tokio::task::spawn_blocking(move || check.check()).await else {
                continue;
            };
            if let crate::instance_lock::InstanceLockError::Io { .. } = err {
                // The directory's lock still holds; only the holder's name could not be put back.
                tracing::warn!("instance lock file: {err}");
                continue;
            }
            tracing::error!("{err}");
            let _ = noted.set(err.to_string());
            shutdown.cancel();
            return;
        }
    });
    lost
}

/// Mark every descriptor above 2 this process inherited close-on-exec, first thing in `serve`
/// and `broker` (red team 23i B3: a launcher's connected Unix socket, passed as fd 7, reached
/// every broker and the confined runner, whose seccomp refuses `socket(AF_UNIX)`, and it wrote
/// through it). The gateway is given no descriptor on purpose (no socket activation), so none
/// is kept. Commands already close everything above 2 in the helper (`close_range`).
pub fn close_inherited_fds_on_exec() {
    #[cfg(target_os = "linux")]
    {
        // rustix has no close_range, and the fallback below works on descriptor numbers nobody
        // owns (any API for those is unsafe): libc here.
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors.
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        } == 0;
        if done {
            return;
        }
    }
    // Older kernels and macOS: the descriptors the process has (the listing's own is among them,
    // closed right after), else every number below the limit.
    let listed: Option<Vec<i32>> = std::fs::read_dir("/dev/fd").ok().map(|entries| {
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect()
    });
    let all = || {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(65_536)
            .min(65_536);
        (3..i32::try_from(limit).unwrap_or(65_536)).collect::<Vec<i32>>()
    };
    for fd in listed.unwrap_or_else(all).into_iter().filter(|fd| *fd > 2) {
        // SAFETY: F_GETFD/F_SETFD only read and set the descriptor's close-on-exec flag; an
        // unused number fails with EBADF and nothing happens.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Runs `serve` to its end on `runtime`. `main` calls this plain function instead of awaiting
/// `serve` itself: an async fn's body is compiled into the crate that polls it, and the binary,
/// which starts only when this library is done, compiled the whole server alone at the end of
/// the build (BUILD_RESULTS.md).
pub fn block_on_serve(
    runtime: &tokio::runtime::Runtime,
    options: ServeOptions,
) -> anyhow::Result<ExitCode> {
    runtime.block_on(serve(options))
}

/// `gateway broker --spec`: one session's broker, on `runtime` (compiled in the broker crate, as
/// [`block_on_serve`] is here). `isolation`: the network namespace `main` entered while still
/// single-threaded (`None`: not tried).
pub fn broker(
    runtime: &tokio::runtime::Runtime,
    spec: PathBuf,
    isolation: Option<broker::confine::NetworkIsolation>,
) -> anyhow::Result<ExitCode> {
    init_tracing(false);
    let isolation =
        isolation.unwrap_or_else(|| broker::confine::NetworkIsolation::Host("not entered".into()));
    if let broker::confine::NetworkIsolation::Host(why) = &isolation {
        tracing::warn!("broker stays in the host network namespace: {why}");
    }
    broker::block_on_run(runtime, spec, isolation).context("broker")?;
    Ok(ExitCode::SUCCESS)
}

/// Colours only for a person at a terminal: a log file (a service's, a broker's) or a pipe gets
/// plain text, and so does anyone who sets `NO_COLOR`.
fn log_colours(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// What is logged: `RUST_LOG` as `level` and `target=level` directives (`info,rmcp=warn`, the
/// default when it is unset, empty or not such directives). Not tracing's `EnvFilter`: its span
/// and regex filters cost a regex engine in every build for a knob nobody uses here.
fn log_filter(rust_log: Option<&str>) -> Targets {
    rust_log
        .filter(|directives| !directives.trim().is_empty())
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| {
            Targets::new()
                .with_default(tracing::Level::INFO)
                .with_target("rmcp", tracing::Level::WARN)
        })
}

fn init_tracing(json: bool) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    let ansi = log_colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    );
    let builder = tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if json {
        builder.json().finish().with(filter).init();
    } else {
        builder.finish().with(filter).init();
    }
}

/// The `sandbox-exec` helper; returns only if confinement failed or to pass the command's status on.
pub fn sandbox_exec() -> ExitCode {
    #[cfg(target_os = "linux")]
    let code = sandbox::linux::helper_main();
    #[cfg(not(target_os = "linux"))]
    let code = {
        eprintln!("gateway sandbox-exec: only used on Linux");
        sandbox::spec::EXIT_SANDBOX_FAILED
    };
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::{log_colours, log_filter};

    #[test]
    fn rust_log_directives_choose_what_is_logged() {
        let default = log_filter(None);
        assert!(default.would_enable("gateway::session", &Level::INFO));
        assert!(!default.would_enable("gateway::session", &Level::DEBUG));
        assert!(default.would_enable("rmcp::service", &Level::WARN));
        assert!(!default.would_enable("rmcp::service", &Level::INFO));
        for unusable in [Some(""), Some("  "), Some("gateway=loud")] {
            let filter = log_filter(unusable);
            assert!(filter.would_enable("gateway", &Level::INFO), "{unusable:?}");
            assert!(!filter.would_enable("rmcp", &Level::INFO), "{unusable:?}");
        }
        let debug = log_filter(Some("debug,rmcp=warn,broker=trace"));
        assert!(debug.would_enable("gateway::mcp", &Level::DEBUG));
        assert!(!debug.would_enable("rmcp", &Level::INFO));
        assert!(debug.would_enable("broker::bridge", &Level::TRACE));
        let only = log_filter(Some("gateway=debug"));
        assert!(only.would_enable("gateway", &Level::DEBUG));
        assert!(!only.would_enable("rmcp", &Level::ERROR));
    }

    #[test]
    fn colours_only_at_a_terminal_without_no_color() {
        assert!(log_colours(true, None));
        assert!(log_colours(true, Some("".into())));
        assert!(!log_colours(true, Some("1".into())));
        assert!(!log_colours(false, None));
    }
}
