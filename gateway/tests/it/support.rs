//! Shared setup of the integration tests.

use std::path::Path;

use serde_json::Value;
pub use tests::processes::{Cleanup, kill_session_processes, session_processes};
pub use tests::{GatewayProcess, ScriptedChatGpt, lease_id, session_id, tool_err_code, tool_ok};

pub const GATEWAY: &str = env!("CARGO_BIN_EXE_gateway");

/// The gateway binary pinned the way a gateway pins itself at start (hashed, sealed copy), once
/// per test process: the command sandbox helper of in-process executors.
pub fn pinned_gateway() -> std::sync::Arc<sandbox::pinned_exe::PinnedExe> {
    static PINNED: std::sync::OnceLock<std::sync::Arc<sandbox::pinned_exe::PinnedExe>> =
        std::sync::OnceLock::new();
    PINNED
        .get_or_init(|| {
            std::sync::Arc::new(
                sandbox::pinned_exe::PinnedExe::pin(Path::new(GATEWAY))
                    .expect("pinning the gateway binary"),
            )
        })
        .clone()
}

/// A gateway with the real, pinned Claude Code as its runner.
pub async fn gateway() -> GatewayProcess {
    gateway_with(&[]).await
}

pub async fn gateway_with(env: &[(&str, &str)]) -> GatewayProcess {
    let mut builder = GatewayProcess::builder(GATEWAY).env("CLAUDE_BIN", tests::claude_bin());
    for (k, v) in env {
        builder = builder.env(*k, *v);
    }
    builder.spawn().await.expect("gateway starts")
}

pub async fn chatgpt(gw: &GatewayProcess) -> ScriptedChatGpt {
    ScriptedChatGpt::connect(&gw.url(), gw.token())
        .await
        .expect("MCP connect")
}

/// A work directory with a few files to read and search.
pub fn work_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nneedle here\ngamma\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "fn needle() {}\n").unwrap();
    dir
}

/// The SessionView of a successful call.
pub fn view(result: &Value) -> Value {
    tool_ok(result).clone()
}

/// Start a session and wait for its first pending turn.
pub async fn start_session(chat: &ScriptedChatGpt, dir: &Path, prompt: &str, key: &str) -> Value {
    let result = chat
        .start_with(prompt, dir, key, serde_json::json!({"wait_seconds": 50}))
        .await
        .unwrap();
    let view = view(&result);
    assert_eq!(
        view["status"], "waiting_for_gpt",
        "first turn not pending: {view}"
    );
    view
}

pub fn turn_id(view: &Value) -> String {
    view["pending_turn"]["turn_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no pending turn in {view}"))
        .to_string()
}

/// `SELECT COUNT(*) ...` against the gateway's state database (read-only beside the live gateway).
pub fn count(gw: &GatewayProcess, sql: &str) -> i64 {
    count_with(gw, sql, "")
}

/// `count` with one `?1` parameter (ignored when the query has none).
pub fn count_with(gw: &GatewayProcess, sql: &str, param: impl rusqlite::ToSql) -> i64 {
    let db = state_db(gw);
    if sql.contains("?1") {
        db.query_row(sql, [param], |r| r.get(0)).unwrap()
    } else {
        db.query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

/// The gateway's state database, opened read-only.
pub fn state_db(gw: &GatewayProcess) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        gw.state_dir().join("gateway.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap()
}

/// Run `gatewayctl --json <args>` against the gateway's state dir, in-process; returns its JSON.
pub fn gatewayctl_json(gw: &GatewayProcess, args: &[&str]) -> Value {
    use clap::Parser;
    let state = gw.state_dir().to_string_lossy().to_string();
    let mut argv = vec!["gatewayctl", "--state-dir", state.as_str(), "--json"];
    argv.extend_from_slice(args);
    let mut out = Vec::new();
    gatewayctl::run(gatewayctl::Cli::parse_from(argv), &mut out).unwrap();
    serde_json::from_slice(&out).unwrap_or_else(|e| {
        panic!(
            "gatewayctl output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out)
        )
    })
}

/// Every regular file under `dir` (recursively, symlinks not followed) whose bytes hold `needle`.
pub fn files_holding(dir: &Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if meta.is_file()
            && let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path);
        }
    }
    found
}
