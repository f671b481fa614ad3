//! The `gateway` binary: its command line, parsed, and wired to its modes (`gateway::modes`):
//! `serve` (HTTP or stdio), the hidden `broker` mode it re-executes itself in for each session,
//! and the hidden `sandbox-exec` helper the broker runs each command through.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gateway::modes::{self, ServeOptions};
use gateway::oauth::AuthMode;

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

fn main() -> ExitCode {
    // The helper, once per command: exactly `<exe> sandbox-exec`, without building the CLI.
    let mut args = std::env::args_os();
    if args.len() == 2 && args.nth(1).is_some_and(|a| a == "sandbox-exec") {
        return modes::sandbox_exec();
    }
    // Before anything else: no descriptor a launcher leaked reaches a broker or a runner.
    modes::close_inherited_fds_on_exec();
    let cli = Cli::parse();
    if let Command::SandboxExec = cli.command {
        // Before any runtime: the helper must be single-threaded to enter namespaces.
        return modes::sandbox_exec();
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
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Serve {
            listen,
            stdio,
            allowed_hosts,
            log_format,
            auth,
            public_base,
        } => modes::block_on_serve(
            &runtime,
            ServeOptions {
                listen,
                stdio,
                allowed_hosts,
                json_logs: log_format == LogFormat::Json,
                auth,
                public_base,
            },
        ),
        Command::SandboxExec => Ok(modes::sandbox_exec()),
        Command::Broker { spec } => modes::broker(&runtime, spec, isolation),
    };
    // A blocking read of stdin (the stdio transport) never ends by itself: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(err) => {
            // The message may hold owner-chosen text (a state dir's path): escaped like every
            // operator output (red team 39: a path's escape sequences reached the terminal).
            let message = format!("{err:#}");
            eprintln!("gateway: {}", common::display::multi_line(&message));
            ExitCode::FAILURE
        }
    }
}
