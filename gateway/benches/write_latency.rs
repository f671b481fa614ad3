//! Durable write latency: an `Edit` of a 4 KiB and of a 4 MiB file, (a) in process with both
//! ledger records committed to a real gateway state database, and (b) through the whole path —
//! the runner's `tools/call` on the broker's executor MCP, pre-read and hash, `WritePrepared`
//! persisted by the gateway (SQLite, `synchronous=FULL`) and acknowledged, temp file + fsync,
//! compare-and-swap, rename, directory fsync, `committed` persisted and acknowledged, the result
//! back to the runner — beside a bare write + fsync + rename + directory fsync of the same bytes
//! in the same directory, in the same run. A column gives the least any such protocol adds:
//! reading the file and hashing it once (the `pre_sha256`).
//!
//! The gateway runs as a child process with this executable as a stand-in runner (see
//! `support/stand_in.rs`), which times each executor call. Run:
//! `cargo bench -p gateway --bench write_latency [-- --runs N]` (default 100 per size).
//! Targets: ≤ 3× the bare sequence for 4 KiB, ≤ 1.5× for 4 MiB. Figures are recorded in
//! `gateway/benches/WRITE_RESULTS.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;
use support::{GatewayProcess, chat, http_client, pending_turn_id, quantile, text_of};

const DEFAULT_RUNS: usize = 100;
const WARMUP: usize = 5;

fn main() -> ExitCode {
    support::bench_main("write_latency", run)
}

/// A file of `size` bytes of text lines with one `marker-000000` line in the middle.
fn content(size: usize, marker: usize) -> Vec<u8> {
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    let mut text = String::with_capacity(size + 64);
    while text.len() < size / 2 {
        text.push_str(line);
    }
    text.push_str(&format!("marker-{marker:06}\n"));
    while text.len() < size {
        text.push_str(line);
    }
    text.truncate(size);
    text.into_bytes()
}

/// The bare durable replace: temp file, write, fsync, rename over the target, fsync the dir.
fn bare_write(dir: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let temp = dir.join(".bare.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join("bare.txt"))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// A gateway state database holding one session and turn, to record actions in the way the
/// gateway does.
struct Ledger {
    store: gateway::state::Store,
}

impl Ledger {
    fn open(dir: &Path) -> anyhow::Result<Ledger> {
        std::fs::create_dir_all(dir)?;
        let store = gateway::state::Store::open(dir)?;
        let db = rusqlite::Connection::open(dir.join("gateway.sqlite3"))?;
        db.execute_batch(
            "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data)
               VALUES ('ns_bench', 'running', 1, 0, 0, '{}');
             INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, data)
               VALUES ('turn_bench', 'ns_bench', 1, 'f', 'answered', 0, '{}');",
        )?;
        Ok(Ledger { store })
    }

    /// One Edit with `prepared` committed before the write and `committed` after it.
    fn edit(
        &self,
        executor: &broker::executor::Executor,
        action_id: &str,
        file: &Path,
        old: &str,
        new: &str,
    ) -> anyhow::Result<()> {
        use gateway::state::{ActionRecord, ActionState};
        let arguments =
            json!({"file_path": file.display().to_string(), "old_string": old, "new_string": new});
        let mut action = ActionRecord {
            action_id: action_id.to_string(),
            session_id: "ns_bench".into(),
            turn_id: "turn_bench".into(),
            call_index: 0,
            name: "Edit".into(),
            arguments: arguments.clone(),
            state: ActionState::Approved,
            outcome: None,
            prepared: None,
        };
        self.store
            .write(|tx| tx.put_action(&action))
            .context("recording the approval")?;
        let common::tools::ParsedArgs::Executor(args) = common::tools::LogicalTool::Edit
            .parse_args(&arguments)
            .map_err(anyhow::Error::msg)?
        else {
            anyhow::bail!("Edit is run by the executor");
        };
        let mut journal = |prepared: &broker::executor::write::PreparedWrite| {
            let mut record = action.clone();
            record.state = ActionState::Prepared;
            record.prepared = Some(prepared.clone());
            self.store
                .write(|tx| {
                    tx.put_action(&record)?;
                    tx.append_event(
                        Some("ns_bench"),
                        "write_prepared",
                        &json!({"action_id": record.action_id}),
                    )
                })
                .map_err(|e| e.to_string())
        };
        let done = executor.execute_with_journal(action_id, &args, &mut journal);
        if done.outcome.status != common::tools::ToolStatus::Ok {
            bail!("journaled edit failed: {}", done.outcome.output);
        }
        action.state = ActionState::Committed;
        action.outcome = Some(done.outcome);
        self.store.write(|tx| {
            tx.put_action(&action)?;
            tx.append_event(
                Some("ns_bench"),
                "action_committed",
                &json!({"action_id": action_id}),
            )
        })?;
        Ok(())
    }
}

fn stats(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    (quantile(&ms, 0.50), quantile(&ms, 0.99))
}

/// `(tool_call_sent, tool_call_done)` pairs from the stand-in's timing file, in order.
fn tool_calls(path: &Path) -> anyhow::Result<Vec<f64>> {
    let mut sent = None;
    let mut out = Vec::new();
    for (kind, value) in support::timing_lines(path)? {
        match kind.as_str() {
            "tool_call_sent" => sent = Some(value),
            "tool_call_done" => {
                let start = sent
                    .take()
                    .context("tool_call_done without tool_call_sent")?;
                out.push((value - start) as f64 / 1e6);
            }
            _ => {}
        }
    }
    Ok(out)
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RUNS);
    let tmp = tempfile::tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    let (state, work) = (root.join("state"), root.join("work"));
    std::fs::create_dir_all(&work)?;
    let token = "bench-token-0123456789abcdef";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let gateway = GatewayProcess::start(&rt, &state, token, &root.join("gateway.log"), "warn", 1)?;
    let chat = chat(&http_client()?, &gateway.url, token)?;

    let mut rows = Vec::new();
    let mut memory = Vec::new();
    for (label, size, target) in [("4 KiB", 4096usize, 3.0), ("4 MiB", 4 << 20, 1.5)] {
        let dir = work.join(label.replace(' ', ""));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("edited.txt");
        std::fs::write(&file, content(size, 0))?;
        // The confined stand-in writes its timing file in its private HOME.
        let timing_name = format!("timing-{size}.log");

        // The executor's part alone, in process, with a journal that records nothing: where the
        // time goes besides the gateway's two commits and the hops.
        let executor = broker::executor::Executor::new(
            sandbox::path_policy::PathPolicy::new(root.join("home"), state.clone(), vec![]),
            dir.clone(),
        )
        .with_writes(None);
        let local = dir.join("local.txt");
        std::fs::write(&local, content(size, 0))?;
        // The same executor with both ledger records written the gateway's way (a real state
        // database, WAL, synchronous=FULL), without the runner's HTTP call and the broker link.
        let ledger_dir = root.join(format!("ledger-{size}"));
        let ledger = Ledger::open(&ledger_dir)?;
        let journaled = dir.join("journaled.txt");
        std::fs::write(&journaled, content(size, 0))?;

        let view = rt.block_on(chat.call_tool_ok(
            "native_session_start",
            json!({
                "prompt": format!("TIMING_FILE={timing_name} BENCH_PID={}", std::process::id()),
                "working_directory": dir.display().to_string(),
                "idempotency_key": format!("bench-{size}"),
                "capability_profile": "direct_write",
                "wait_seconds": 50,
            }),
        ))?;
        let session = text_of(&view, "native_session_id")?;
        let lease = text_of(&view, "lease_id")?;
        let mut turn = pending_turn_id(&view)?;

        // The three are interleaved so that each sees the same load on a shared machine.
        let (mut bare, mut in_process) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        // The least any such protocol must add to the bare sequence: read the current bytes and
        // hash them once (`pre_sha256`), into a reused buffer.
        let (mut floor, mut floor_buffer) = (Vec::with_capacity(runs), Vec::new());
        let mut with_ledger = Vec::with_capacity(runs);
        for i in 0..WARMUP + runs {
            let (old, new) = (format!("marker-{i:06}\n"), format!("marker-{:06}\n", i + 1));
            // 1. Bare sequence, same bytes, same directory.
            let bytes = content(size, i + 1);
            let t = Instant::now();
            bare_write(&dir, &bytes)?;
            let bare_ms = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            floor_buffer.clear();
            std::fs::File::open(&local)?.read_to_end(&mut floor_buffer)?;
            std::hint::black_box(common::hash::sha256_hex(&floor_buffer));
            let floor_ms = t.elapsed().as_secs_f64() * 1e3;

            // 2. The executor alone.
            let args = common::tools::ToolArgs::Edit(common::tools::EditArgs {
                file_path: local.display().to_string(),
                old_string: old.clone(),
                new_string: new.clone(),
                replace_all: None,
                expected_sha256: None,
            });
            let mut journal = |_: &broker::executor::write::PreparedWrite| Ok(());
            let t = Instant::now();
            let done = executor.execute_with_journal(&format!("local{i}"), &args, &mut journal);
            let local_ms = t.elapsed().as_secs_f64() * 1e3;
            if done.outcome.status != common::tools::ToolStatus::Ok {
                bail!("in-process edit {i} failed: {}", done.outcome.output);
            }
            // 3. The executor and both ledger records, in process.
            let t = Instant::now();
            ledger.edit(&executor, &format!("act{i}"), &journaled, &old, &new)?;
            let ledger_ms = t.elapsed().as_secs_f64() * 1e3;
            if i >= WARMUP {
                bare.push(bare_ms);
                floor.push(floor_ms);
                in_process.push(local_ms);
                with_ledger.push(ledger_ms);
            }

            // 4. The whole protocol, one Edit per ChatGPT turn (timed by the stand-in runner).
            let view = rt.block_on(chat.call_tool_ok(
                "native_session_reply_and_wait",
                json!({
                    "native_session_id": session, "lease_id": lease, "turn_id": turn,
                    "reply_id": format!("r{i}"),
                    "tool_calls": [{"name": "Edit", "arguments": {
                        "file_path": file.display().to_string(),
                        "old_string": old, "new_string": new,
                    }}],
                }),
            ))?;
            if view["pending_turn"]["tool_results"][0]["status"] != "ok" {
                bail!("edit {i} did not succeed: {view}");
            }
            turn = pending_turn_id(&view)?;
        }
        // The session's broker after all its edits (a spare read buffer of up to 4 MiB + 64 KiB
        // stays; an idle broker's target is 15 MiB).
        let broker_rss = support::broker_rss_mib(&state);
        rt.block_on(chat.call_tool_ok(
            "native_session_stop",
            json!({"native_session_id": session, "lease_id": lease, "request_id": format!("stop-{size}")}),
        ))?;
        if std::fs::read(&file)? != content(size, WARMUP + runs) {
            bail!("the edited file does not hold the last edit");
        }
        let edits = tool_calls(&support::runner_home_file(&state.join(&timing_name))?)?;
        if edits.len() != WARMUP + runs {
            bail!("{} timed calls, expected {}", edits.len(), WARMUP + runs);
        }
        let (bare_p50, bare_p99) = stats(bare);
        let (floor_p50, _) = stats(floor);
        let (edit_p50, edit_p99) = stats(edits[WARMUP..].to_vec());
        let (local_p50, local_p99) = stats(in_process);
        let (ledger_p50, ledger_p99) = stats(with_ledger);
        memory.push(format!(
            "broker VmRSS after the {label} edits: {}",
            broker_rss
                .iter()
                .map(|mib| format!("{mib:.1} MiB"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        rows.push(format!(
            "| {label} | {bare_p50:.2} / {bare_p99:.2} | {floor_p50:.2} (≥ {:.2}×) | {local_p50:.2} / {local_p99:.2} ({:.2}×) | {ledger_p50:.2} / {ledger_p99:.2} (**{:.2}×**) | {edit_p50:.2} / {edit_p99:.2} (**{:.2}×**) | ≤ {target}× |",
            (bare_p50 + floor_p50) / bare_p50,
            local_p50 / bare_p50,
            ledger_p50 / bare_p50,
            edit_p50 / bare_p50
        ));
    }
    drop(gateway);
    println!("write_latency: {runs} edits per size after {WARMUP} warm-up edits (ms, p50 / p99)");
    println!();
    println!(
        "| file | bare write+fsync+rename+dir fsync | read + one SHA-256 (lower bound) | executor alone, no ledger | executor + both ledger records | whole path (runner call, broker link, gateway) | target |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    println!();
    for line in memory {
        println!("{line}");
    }
    Ok(())
}
