//! Test support shared by the integration suites: a gateway process fixture, a minimal MCP client
//! (our own, independent of rmcp), a scripted ChatGPT on top of it, paths to pinned tools, and
//! the processes a gateway leaves behind (`processes`).
//!
//! Everything here is used from `gateway/tests/it/` as a dev-dependency:
//!
//! ```ignore
//! let gw = GatewayProcess::builder(env!("CARGO_BIN_EXE_gateway")).spawn().await?;
//! let gpt = ScriptedChatGpt::connect(&gw.url(), gw.token()).await?;
//! let view = tool_ok(&gpt.start("hi", "/tmp", "k1").await?).clone();
//! ```

mod chatgpt;
pub mod deepseek;
pub mod executables;
mod gateway;
mod mcp;
mod paths;
pub mod processes;

pub use chatgpt::{ScriptedChatGpt, lease_id, session_id};
pub use gateway::{ExitOutcome, GatewayBuilder, GatewayProcess, LISTEN_TIMEOUT, StartTiming};
pub use mcp::{
    DEFAULT_PROTOCOL_VERSION, McpClient, McpClientBuilder, SseEvent, parse_mcp_body,
    parse_sse_events, rpc_error_code, tool_err_code, tool_ok,
};
pub use paths::{claude_bin, fixtures_dir, workspace_root};
pub use reqwest::StatusCode;
