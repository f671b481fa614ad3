//! gatewayctl: the owner's read-only view of the gateway's sessions, brokers and host setup, and
//! `try`, a first session through the running gateway's public MCP tools.
//!
//! It opens the state database with `SQLITE_OPEN_READ_ONLY` and never writes to the state dir.
//! It shows PIDs and paths (it is the owner's tool, not the public API) but never a secret: broker
//! secrets and lease hashes are not printed. Brokers are verified by their `/proc` identity; the
//! live handshake (`brokers --handshake`) is opt-in: it proves the broker holds its secret, and
//! since it never proves itself in return, the broker keeps its link to the running gateway.
//! What only the database's writer may do (`oauth approve`, `oauth revoke`, `prune`) it asks the
//! running gateway for, over the gateway's owner-only admin socket.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

mod autorun;
mod brokers;
mod check;
mod connector;
pub mod db;
pub mod display;
mod doctor;
mod handshake;
pub mod oauth;
pub mod plist;
pub mod procfs;
mod prune;
mod service_file;
mod sessions;
mod skill_hash;
pub mod table;
pub mod try_session;
pub mod unit;
pub mod verify;

/// Command line of `gatewayctl`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "gatewayctl",
    version,
    about = "Inspect a Native Gateway state dir (read-only): sessions, brokers, events, host checks"
)]
pub struct Cli {
    /// State directory. Default: $CLAUDE_TOOLS_STATE_DIR (must be absolute), else ./state.
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// List sessions: status, profile, working dir, current run, broker liveness, lease.
    #[command(visible_alias = "list")]
    Sessions,
    /// One session in detail: fields, turns, actions with receipts, last events.
    Show {
        /// Session id (`ns_…`).
        id: String,
        /// How many of the most recent ledger events to show.
        #[arg(long, default_value_t = 10, value_name = "N")]
        events: usize,
    },
    /// Brokers of non-terminal sessions: identity check, uptime, memory, runner.
    Brokers(BrokersArgs),
    /// A session's event ledger in order.
    Events {
        /// Session id (`ns_…`).
        id: String,
        /// Keep polling for new events every 500 ms until interrupted (JSON: one object a line).
        #[arg(long)]
        follow: bool,
        /// Stop following after this many polls (for tests).
        #[arg(long, hide = true)]
        max_polls: Option<u64>,
        /// Poll interval in milliseconds.
        #[arg(long, hide = true, default_value_t = 500)]
        poll_ms: u64,
    },
    /// Print the capability URL for a ChatGPT connector. The URL contains the access token.
    ConnectorUrl(ConnectorArgs),
    /// Check the Claude Code binary, state dir modes, sandbox support and service files.
    Doctor(DoctorArgs),
    /// Run one read_only session on DIR through the running gateway, with a scripted ChatGPT
    /// (FindFiles, Read, a final answer) and the real Claude Code, and print each turn.
    #[command(verbatim_doc_comment)]
    Try(TryArgs),
    /// OAuth clients and grants of the ChatGPT connector; approve a client, revoke access.
    #[command(subcommand, name = "oauth")]
    OAuth(OAuthCommand),
    /// Check the ledger's hash chain, the signed head, and the actions, replies, sessions and
    /// turns rows against the events that recorded them (read-only); names the first bad row
    /// and exits non-zero if anything is wrong.
    ///
    /// Catches, by someone who can write the database but lacks the server key
    /// (<state>/auth/server-key): an edited, deleted, reordered or inserted event, removed
    /// hashes, the newest rows dropped, a rewritten chain, an edited receipt, action, reply
    /// text, session or turn. Does not catch: a rollback of the database AND the head file
    /// together to an older copy (nothing outside the state dir remembers how far the ledger
    /// got), edits by someone holding the server key, rows from before the chain (schema v4),
    /// and, after a gateway crash, the loss of the few rows it committed but had not yet
    /// anchored in the head. If it fails: keep the state dir as evidence, and restore it from a
    /// backup or start the gateway on a new state dir; the gateway refuses to append to it.
    #[command(verbatim_doc_comment)]
    Verify,
    /// Remove ended sessions' files (runner HOME, transcript) and database content (turns,
    /// replies, tool arguments and outcomes) untouched for an age, through the running gateway,
    /// and shrink the database; each session's summary and ledger stay (`verify` stays green).
    /// Default age: CLAUDE_TOOLS_RETENTION_DAYS (14 days).
    #[command(verbatim_doc_comment)]
    Prune(PruneArgs),
    /// Print the pin of a SKILL.md for CLAUDE_TOOLS_NATIVE_SKILL_ALLOWLIST_JSON: the SHA-256 of
    /// the file with a UTF-8 BOM removed and CRLF and CR turned into LF.
    #[command(verbatim_doc_comment)]
    SkillHash {
        /// The SKILL.md to pin.
        path: PathBuf,
    },
}

/// The `oauth` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum OAuthCommand {
    /// Registered OAuth clients: name, where their answers go, active grants.
    Clients,
    /// Grants the owner approved: client, when, last refresh, revoked or active.
    Grants,
    /// Revoke a grant (`grant_…`), or a client (`client_…`) with all its grants, in the running
    /// gateway; their tokens stop working at the next request.
    Revoke {
        /// A grant id or a client id.
        id: String,
    },
    /// Ask the running gateway for a one-time approval code for the consent page with this page
    /// code (shown on the page): it approves only that page, once, within 10 minutes; five
    /// wrong codes typed on the page void it. Without a page code: the pages opened lately.
    Approve {
        /// The page code the consent page shows, like abcd-2345.
        page: Option<String>,
    },
}

/// Options of `prune`.
#[derive(Debug, Clone, Args)]
pub struct PruneArgs {
    /// Only sessions untouched for this long: 14d, 12h, 30m, 45s.
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<String>,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Options of `brokers`.
#[derive(Debug, Clone, Args)]
pub struct BrokersArgs {
    /// Also prove each broker holds its secret with a live handshake over its socket.
    /// The probe never proves itself to the broker, so the running gateway keeps its link.
    #[arg(long, verbatim_doc_comment)]
    pub handshake: bool,
}

/// Options of `connector-url`.
#[derive(Debug, Clone, Args)]
pub struct ConnectorArgs {
    /// Public HTTPS base of the tunnel, e.g. https://gw.example.net (http only for loopback).
    #[arg(long, value_name = "URL")]
    pub public_base: String,
    /// The access token; default: <state>/auth/access-token.
    #[arg(
        long,
        env = "CLAUDE_TOOLS_GATEWAY_TOKEN",
        hide_env_values = true,
        hide = true
    )]
    pub token: Option<String>,
}

/// Options of `try`.
#[derive(Debug, Clone, Args)]
pub struct TryArgs {
    /// Directory to look at (read-only). Default: the current directory.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The gateway's MCP endpoint (a capability URL `…/mcp/<token>` needs no token). Default:
    /// where the state dir's running gateway says it listens; the access token is sent to no
    /// other address.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The access token; default: <state>/auth/access-token.
    #[arg(
        long,
        env = "CLAUDE_TOOLS_GATEWAY_TOKEN",
        hide_env_values = true,
        hide = true
    )]
    pub token: Option<String>,
}

/// Options of `doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Service file to check (repeatable). Default: the installed launchd/systemd locations.
    #[arg(long, value_name = "PATH")]
    pub service_file: Vec<PathBuf>,
    /// Claude Code binary, as the gateway finds it: $CLAUDE_BIN, else
    /// $HOME/.npm-global/bin/claude (and the one scripts/run installs under .tools/).
    #[arg(long, env = "CLAUDE_BIN", value_name = "PATH", verbatim_doc_comment)]
    pub claude_bin: Option<PathBuf>,
    /// The checkout whose `.tools/claude-code` scripts/run installed (default: the checkout
    /// gatewayctl was built in, found from its own path, else the current directory).
    #[arg(long, hide = true, value_name = "DIR")]
    pub checkout: Option<PathBuf>,
    /// Home directory (for defaults).
    #[arg(long, env = "HOME", hide = true)]
    pub home: Option<PathBuf>,
    /// Whether the gateway gets its token from the environment (then no token file is needed).
    #[arg(
        long,
        env = "CLAUDE_TOOLS_GATEWAY_TOKEN",
        hide_env_values = true,
        hide = true
    )]
    pub token: Option<String>,
    /// Skip the host sandbox probes (for tests).
    #[arg(long, hide = true)]
    pub skip_host_probes: bool,
}

/// A command ran and reported, but its verdict is a failure (e.g. `doctor` found a FAIL). The
/// report is already written; `main` exits non-zero without repeating it.
#[derive(Debug)]
pub struct Reported(pub String);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reported {}

/// Run one command, writing its report to `out`.
pub fn run(cli: Cli, out: &mut impl Write) -> anyhow::Result<()> {
    // Every byte printed from here on passes the display sanitiser.
    let out = &mut display::SafeWriter::new(out, cli.json);
    let state_dir = resolve_state_dir(
        cli.state_dir.as_deref(),
        std::env::var_os("CLAUDE_TOOLS_STATE_DIR").map(PathBuf::from),
    )?;
    let json = cli.json;
    match cli.command {
        Command::Sessions => sessions::list(&state_dir, json, out),
        Command::Show { id, events } => sessions::show(&state_dir, &id, events, json, out),
        Command::Brokers(args) => brokers::run(&state_dir, &args, json, out),
        Command::Events {
            id,
            follow,
            max_polls,
            poll_ms,
        } => sessions::events(
            &state_dir,
            &id,
            sessions::Follow {
                enabled: follow,
                max_polls,
                interval: std::time::Duration::from_millis(poll_ms),
            },
            json,
            out,
        ),
        Command::ConnectorUrl(args) => connector::run(&state_dir, &args, json, out),
        Command::Doctor(args) => doctor::run(&state_dir, &args, json, out),
        Command::Try(args) => try_session::run(&state_dir, &args, json, out),
        Command::Verify => verify::run(&state_dir, json, out),
        Command::SkillHash { path } => skill_hash::run(&path, json, out),
        Command::OAuth(command) => oauth::run(&state_dir, &command, json, out),
        Command::Prune(args) => prune::run(&state_dir, &args, json, out),
    }
}

/// The state dir: the flag (made absolute), else `$CLAUDE_TOOLS_STATE_DIR` (must be absolute, as
/// the gateway insists), else `./state`.
pub fn resolve_state_dir(flag: Option<&Path>, env: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let cwd = || std::env::current_dir().context("reading the current directory");
    match (flag, env) {
        (Some(dir), _) if dir.is_absolute() => Ok(dir.to_path_buf()),
        (Some(dir), _) => Ok(cwd()?.join(dir)),
        (None, Some(dir)) if dir.as_os_str().is_empty() => Ok(cwd()?.join("state")),
        (None, Some(dir)) if dir.is_absolute() => Ok(dir),
        (None, Some(dir)) => bail!(
            "CLAUDE_TOOLS_STATE_DIR must be an absolute path, got {}",
            dir.display()
        ),
        (None, None) => Ok(cwd()?.join("state")),
    }
}

/// Write a value as pretty JSON and a newline.
fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
