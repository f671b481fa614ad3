//! The `gateway` binary: `serve` (HTTP or stdio) and the hidden `broker` mode it re-executes itself
//! in for each session.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
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
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
    },
    /// Run one session's broker (started by the gateway).
    #[command(hide = true)]
    Broker {
        #[arg(long)]
        spec: PathBuf,
    },
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
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
            } => {
                init_tracing(log_format == "json");
                let config = match gateway::Config::from_env(allowed_hosts) {
                    Ok(config) => config,
                    Err(err) => {
                        eprintln!("gateway: {err:#}");
                        return Ok(std::process::ExitCode::from(2));
                    }
                };
                let gateway = gateway::open(config)?;
                if stdio {
                    gateway::serve_stdio(gateway).await?;
                } else {
                    let shutdown = CancellationToken::new();
                    let signal = shutdown.clone();
                    tokio::spawn(async move {
                        let _ = tokio::signal::ctrl_c().await;
                        signal.cancel();
                    });
                    gateway::serve_http(gateway, listen, shutdown).await?;
                }
                Ok(std::process::ExitCode::SUCCESS)
            }
            Command::Broker { spec } => {
                init_tracing(false);
                broker::run(spec).await.context("broker")?;
                Ok(std::process::ExitCode::SUCCESS)
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("gateway: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
