//! The Claude Code runner: launched with a cleared environment and the flags that leave it only our
//! tools, in its own process group, with a private HOME, config and temp dir under the session's
//! runtime dir. Prompts go in as stream-json lines; its `result` events and exit are reported.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use common::protocol::{BrokerEvent, PromptRelease};
use common::tools::LogicalTool;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::state::{BrokerState, RunnerHandle};

/// Grace between SIGTERM and SIGKILL when stopping the runner's group.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Longest a tool call may take before Claude Code gives up on it (above any command bound).
const MCP_TOOL_TIMEOUT_MS: &str = "900000";
/// How long the runner waits for a model answer; ChatGPT may think for a long time.
const API_TIMEOUT_MS: &str = "3600000";

fn private_dir(root: &Path, name: &str) -> anyhow::Result<PathBuf> {
    use sandbox::private_fs::{OpenDir, ensure_private_dir_with};
    let dir = root.join(name);
    ensure_private_dir_with(&dir, OpenDir::Restrict)
        .with_context(|| format!("creating runner {name} dir"))?;
    Ok(dir)
}

/// Start Claude Code against the bridge on `port`, confined as the spec asks (or not at all).
pub async fn launch(
    state: &Arc<BrokerState>,
    port: u16,
    isolation: &crate::confine::NetworkIsolation,
) -> anyhow::Result<()> {
    let spec = &state.spec;
    let runtime = PathBuf::from(&spec.runtime_dir);
    let home = private_dir(&runtime, "home")?;
    let config = private_dir(&home, ".claude")?;
    let tmp = private_dir(&runtime, "tmp")?;

    let mcp_config = serde_json::json!({
        "mcpServers": {"gw": {
            "type": "http",
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "headers": {"Authorization": format!("Bearer {}", spec.runner_token)},
        }}
    });
    let mcp_config_path = runtime.join("mcp.json");
    write_private(&mcp_config_path, mcp_config.to_string().as_bytes())?;
    // The system prompt (with a session's frozen skills: up to 256 KiB of text from the user's
    // skill files) goes by file, not argv: an argument is readable by every local user in
    // /proc/<pid>/cmdline, and Linux caps one argument at 128 KiB.
    let system_prompt_path = runtime.join("system-prompt.md");
    write_private(&system_prompt_path, spec.system_prompt.as_bytes())?;
    // Writes only to its private dirs (HOME holds the config dir); its MCP config and system
    // prompt are the files it reads under the protected state dir.
    let confinement = crate::confine::prepare(
        spec,
        isolation,
        port,
        &[home.as_path(), tmp.as_path()],
        &[mcp_config_path.as_path(), system_prompt_path.as_path()],
    )
    .context("confining the runner")?;

    let allowed: Vec<String> = LogicalTool::offered(spec.profile, spec.subagent_policy)
        .into_iter()
        .map(LogicalTool::runner_name)
        .collect();

    // On macOS the runner starts under `sandbox-exec` with its generated profile.
    let (program, prefix) = confinement.program(Path::new(&spec.claude_bin));
    let mut cmd = Command::new(program);
    cmd.args(prefix);
    cmd.arg("--bare").arg("-p").arg("--verbose").args([
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
    ]);
    // `--resume` needs the transcript; a runner killed before it saved anything left none, and
    // then the same conversation id starts afresh (reported as not resumed).
    let resumed = spec.resume && transcript_exists(&config, &spec.claude_session_id);
    if resumed {
        cmd.args(["--resume", &spec.claude_session_id]);
    } else {
        cmd.args(["--session-id", &spec.claude_session_id]);
    }
    if let Some(delegation) = &spec.delegation {
        cmd.args(["--model", &delegation.runner_model]);
    }
    cmd.args(["--tools", ""])
        .arg("--strict-mcp-config")
        .arg("--mcp-config")
        .arg(&mcp_config_path)
        .arg("--allowedTools")
        .arg(allowed.join(","))
        .args(["--setting-sources", ""])
        .arg("--disable-slash-commands")
        .arg("--system-prompt-file")
        .arg(&system_prompt_path);
    cmd.env_clear()
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", &config)
        .env("TMPDIR", &tmp)
        .env("PATH", "/usr/bin:/bin")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", &spec.runner_token)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        // ChatGPT holds the conversation; the runner must not summarise it on its own.
        .env("DISABLE_AUTO_COMPACT", "1")
        .env("MCP_TOOL_TIMEOUT", MCP_TOOL_TIMEOUT_MS)
        .env("API_TIMEOUT_MS", API_TIMEOUT_MS)
        .env("CLAUDE_STREAM_IDLE_TIMEOUT_MS", API_TIMEOUT_MS)
        .current_dir(&spec.working_directory)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            sandbox::private_fs::open_private_file(
                &runtime.join("runner.stderr.log"),
                std::fs::OpenOptions::new().create(true).append(true),
            )
            .context("opening runner log")?,
        ))
        .kill_on_drop(false);
    // The runner must not outlive its broker: with the broker gone nobody can answer it, and it
    // would retry a dead port. (macOS has no equivalent; there the gateway's next generation
    // stops the old broker first.)
    // SAFETY: prctl and the confinement's raw syscalls are async-signal-safe, allocate nothing and
    // change only this child (its death signal, capabilities, Landlock domain, seccomp filter).
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            confinement.apply_in_child()
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| "starting Claude Code (check CLAUDE_BIN)".to_string())?;
    let pid = child
        .id()
        .context("runner exited before it could be tracked")?;
    let pgid = Pid::from_raw(pid as i32).context("the runner has no pid")?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let (exited_tx, exited_rx) = tokio::sync::watch::channel(false);

    *state.runner_stdin.lock().await = stdin;
    *state.runner.lock().await = Some(RunnerHandle {
        pgid,
        exited: exited_rx,
    });
    state.push_event(BrokerEvent::RunnerStarted {
        resumed,
        generation: spec.generation,
        started_at_ms: common::time::now_unix_ms(),
    });

    if let Some(stdout) = stdout {
        let state = state.clone();
        tokio::spawn(async move { read_stdout(state, stdout).await });
    }
    let state = state.clone();
    tokio::spawn(async move { wait_exit(state, child, exited_tx).await });
    Ok(())
}

/// Whether Claude Code saved a resumable transcript for `session_id` under its config dir
/// (`projects/<cwd-slug>/<session_id>.jsonl` holding at least one user message). A runner killed
/// early can leave a file with metadata only, which `--resume` rejects ("no conversation") and
/// `--session-id` refuses ("already in use"): such a file is set aside (kept, renamed), so the
/// same conversation id can start afresh.
fn transcript_exists(config_dir: &Path, session_id: &str) -> bool {
    let name = format!("{session_id}.jsonl");
    let mut resumable = false;
    for project in std::fs::read_dir(config_dir.join("projects"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = project.path().join(&name);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let has_user_message = text.lines().any(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .is_ok_and(|entry| entry["type"] == "user")
        });
        if has_user_message {
            resumable = true;
        } else {
            let aside =
                path.with_extension(format!("jsonl.unresumable-{}", common::time::now_unix_ms()));
            if let Err(err) = std::fs::rename(&path, &aside) {
                tracing::warn!("setting aside an unresumable transcript: {err}");
            }
        }
    }
    resumable
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    sandbox::private_fs::write_private_file(path, bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Longest final text of a sub-session kept.
const MAX_RESULT_TEXT: usize = 64 * 1024;

/// Report the runner's `result` events: the end of each of its turns.
async fn read_stdout(state: Arc<BrokerState>, stdout: tokio::process::ChildStdout) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if event.get("type").and_then(|t| t.as_str()) == Some("result") {
            // A sub-session's final text is its result; the main runner's is ChatGPT's own
            // words, already recorded, so it is not sent again.
            let result = state.spec.delegation.as_ref().map(|_| {
                let mut text = event
                    .get("result")
                    .and_then(|r| r.as_str())
                    .unwrap_or("")
                    .to_string();
                common::tools::clip_utf8(&mut text, MAX_RESULT_TEXT);
                text
            });
            state.push_event(BrokerEvent::RunnerTurnEnded {
                result,
                subtype: event
                    .get("subtype")
                    .and_then(|s| s.as_str())
                    .unwrap_or("unknown")
                    .to_string(),
                is_error: event
                    .get("is_error")
                    .and_then(|e| e.as_bool())
                    .unwrap_or(false),
            });
        }
    }
}

async fn wait_exit(
    state: Arc<BrokerState>,
    mut child: Child,
    exited: tokio::sync::watch::Sender<bool>,
) {
    use std::os::unix::process::ExitStatusExt;
    let status = child.wait().await;
    let (exit_code, signal) = match status {
        Ok(status) => (status.code(), status.signal()),
        Err(_) => (None, None),
    };
    exited.send_replace(true);
    // The session's copy-on-write layer goes with its runner, before the gateway hears of the
    // exit (a stopped session's broker may be killed soon after); a command still running
    // keeps it until the broker's final sweep; an answered one's overlays go first.
    // A cleanup past its bound may still hold overlays on the layer: the final sweep takes it.
    if state.executor.command_cleanups().settle().await
        && let Some(layer) = state.executor.command_layer_in_place()
    {
        layer.discard_if_idle();
    }
    let seq = state.push_event(BrokerEvent::RunnerExited {
        exit_code,
        signal,
        at_ms: common::time::now_unix_ms(),
    });
    // The broker's work ends with its runner; tell the gateway and leave.
    state.wait_acked(seq, Duration::from_secs(300)).await;
    state.finish("runner exited").await;
}

/// Longest a prompt may take to reach the runner's input before it counts as not delivered.
const PROMPT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Write one user prompt to the runner's input, once: the id is claimed before writing, so a
/// re-sent prompt that arrives during the write is not written again.
pub async fn send_prompt(state: &Arc<BrokerState>, prompt: PromptRelease) {
    let first = crate::state::lock(&state.delivered_prompts).insert(prompt.prompt_id.clone());
    if !first {
        // Already written (or being written): confirm it again, do not repeat it.
        state.push_event(BrokerEvent::PromptDelivered {
            prompt_id: prompt.prompt_id,
        });
        return;
    }
    let line = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": prompt.text},
    })
    .to_string()
        + "\n";
    let write = async {
        let mut stdin = state.runner_stdin.lock().await;
        match stdin.as_mut() {
            Some(stdin) => {
                stdin.write_all(line.as_bytes()).await.is_ok() && stdin.flush().await.is_ok()
            }
            None => false,
        }
    };
    let written = tokio::time::timeout(PROMPT_WRITE_TIMEOUT, write)
        .await
        .unwrap_or(false);
    if written {
        state.push_event(BrokerEvent::PromptDelivered {
            prompt_id: prompt.prompt_id,
        });
    } else {
        crate::state::lock(&state.delivered_prompts).remove(&prompt.prompt_id);
        tracing::warn!("runner input is closed or stuck; prompt not delivered");
    }
}

/// SIGTERM the runner's group, wait for the grace period, then SIGKILL it.
pub async fn stop(state: &Arc<BrokerState>, reason: &str) {
    tracing::info!("stopping runner: {reason}");
    let handle = state.runner.lock().await.take();
    let Some(mut handle) = handle else {
        state.finish("stopped before the runner started").await;
        return;
    };
    // Closing its input lets an idle runner finish cleanly (unless a write holds it).
    if let Ok(mut stdin) = state.runner_stdin.try_lock() {
        stdin.take();
    }
    let _ = kill_process_group(handle.pgid, Signal::TERM);
    let exited = tokio::time::timeout(STOP_GRACE, handle.exited.wait_for(|done| *done)).await;
    if !matches!(exited, Ok(Ok(_))) {
        let _ = kill_process_group(handle.pgid, Signal::KILL);
    }
    // The exit watcher reports `RunnerExited` and finishes the broker. Kill stragglers in the
    // group that outlived the leader.
    let _ = kill_process_group(handle.pgid, Signal::KILL);
}
