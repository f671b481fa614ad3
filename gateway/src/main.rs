//! The `gateway` binary: `serve` (HTTP or stdio), the hidden `broker` mode it re-executes itself
//! in for each session, and the hidden `sandbox-exec` helper the broker runs each command through.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gateway::oauth::AuthMode;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "gateway",
    version,
    about = "Native Gateway: ChatGPT-driven Claude Code sessions on this computer"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the MCP endpoint.
    Serve {
        /// Address to listen on.
        #[arg(
            long,
            env = "CLAUDE_TOOLS_GATEWAY_LISTEN",
            default_value = "127.0.0.1:8787"
        )]
        listen: SocketAddr,
        /// Serve the same tools over stdin/stdout instead of HTTP.
        #[arg(long)]
        stdio: bool,
        /// Extra Host header value to accept (e.g. a tunnel's public host); repeatable.
        #[arg(
            long = "allowed-host",
            env = "CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS",
            value_delimiter = ','
        )]
        allowed_hosts: Vec<String>,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
        /// Which credentials /mcp accepts: `token` (the static token, header or capability URL),
        /// `oauth` (OAuth access tokens only), or `both`.
        #[arg(long, env = "CLAUDE_TOOLS_GATEWAY_AUTH", value_enum, default_value_t = AuthMode::Both)]
        auth: AuthMode,
        /// Public HTTPS origin of the tunnel, e.g. https://gw.example.net: the base of the OAuth
        /// URLs (issuer, resource). Default: the loopback address the gateway listens on.
        #[arg(long, env = "CLAUDE_TOOLS_GATEWAY_PUBLIC_BASE", value_name = "URL")]
        public_base: Option<String>,
    },
    /// Run one session's broker (started by the gateway).
    #[command(hide = true)]
    Broker {
        #[arg(long)]
        spec: PathBuf,
    },
    /// Confine and execute one command (started by the broker; the spec arrives on stdin).
    #[command(hide = true)]
    SandboxExec,
}

/// How the gateway logs on stderr.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Colours only for a person at a terminal: a log file (a service's, a broker's) or a pipe gets
/// plain text, and so does anyone who sets `NO_COLOR`.
fn log_colours(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn init_tracing(json: bool) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let ansi = log_colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// The `sandbox-exec` helper; returns only if confinement failed or to pass the command's status on.
fn sandbox_exec() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    let code = sandbox::linux::helper_main();
    #[cfg(not(target_os = "linux"))]
    let code = {
        eprintln!("gateway sandbox-exec: only used on Linux");
        sandbox::spec::EXIT_SANDBOX_FAILED
    };
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

fn main() -> std::process::ExitCode {
    // The helper, once per command: exactly `<exe> sandbox-exec`, without building the CLI.
    let mut args = std::env::args_os();
    if args.len() == 2 && args.nth(1).is_some_and(|a| a == "sandbox-exec") {
        return sandbox_exec();
    }
    let cli = Cli::parse();
    if let Command::SandboxExec = cli.command {
        // Before any runtime: the helper must be single-threaded to enter namespaces.
        return sandbox_exec();
    }
    // The broker enters its loopback-only network namespace while still single-threaded (a user
    // namespace requires it); whether the runner may start without it is decided at launch.
    let isolation = match cli.command {
        Command::Broker { .. } => Some(broker::confine::enter_network_namespace()),
        _ => None,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("gateway: starting the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result: anyhow::Result<std::process::ExitCode> = runtime.block_on(async {
        match cli.command {
            Command::Serve {
                listen,
                stdio,
                allowed_hosts,
                log_format,
                auth,
                public_base,
            } => {
                init_tracing(log_format == LogFormat::Json);
                // Before anything probes the host or starts a broker (they inherit the layout).
                gateway::limits::prepare_command_memory();
                let settings = gateway::oauth::AuthSettings::new(auth, public_base.as_deref());
                let config = settings
                    .and_then(|settings| Ok((gateway::Config::from_env(allowed_hosts)?, settings)));
                let (config, auth) = match config {
                    Ok(config) => config,
                    Err(err) => {
                        eprintln!("gateway: {err:#}");
                        return Ok(std::process::ExitCode::from(2));
                    }
                };
                // Other gateways on this host protect this one's state dir once it is listed.
                if let Err(err) =
                    sandbox::protected::instances::register(&config.owner_home, &config.state_dir)
                        .map(|_| ())
                {
                    tracing::warn!(
                        "listing the state dir in {}: {err}; other gateways on this host will \
                         not protect it",
                        sandbox::protected::instances::REGISTRY
                    );
                }
                let command_limits = config.command_limits;
                gateway::limits::prepare_all_commands_memory(&command_limits);
                let gateway = gateway::open(config)?;
                let shutdown = CancellationToken::new();
                gateway::start_background(gateway.clone(), shutdown.clone()).await;
                // SIGTERM (launchd, systemd) and SIGINT stop the server gracefully; brokers and
                // runners keep running for the next start to re-adopt.
                let signal = shutdown.clone();
                let mut terminate =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .context("installing the SIGTERM handler")?;
                tokio::spawn(async move {
                    tokio::select! {
                        _ = terminate.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                    signal.cancel();
                });
                let served = if stdio {
                    gateway::serve_stdio(gateway, shutdown).await
                } else {
                    gateway::serve_http(gateway, listen, &auth, shutdown).await
                };
                gateway::limits::release_all_commands_memory(&command_limits);
                served?;
                Ok(std::process::ExitCode::SUCCESS)
            }
            Command::SandboxExec => Ok(sandbox_exec()),
            Command::Broker { spec } => {
                init_tracing(false);
                let isolation = isolation.unwrap_or_else(|| {
                    broker::confine::NetworkIsolation::Host("not entered".into())
                });
                if let broker::confine::NetworkIsolation::Host(why) = &isolation {
                    tracing::warn!("broker stays in the host network namespace: {why}");
                }
                broker::run(spec, isolation).await.context("broker")?;
                Ok(std::process::ExitCode::SUCCESS)
            }
        }
    });
    // A blocking read of stdin (the stdio transport) never ends by itself: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("gateway: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_colours;

    #[test]
    fn colours_only_at_a_terminal_without_no_color() {
        assert!(log_colours(true, None));
        assert!(log_colours(true, Some("".into())));
        assert!(!log_colours(true, Some("1".into())));
        assert!(!log_colours(false, None));
    }
}
