//! `sessions`, `show <id>` and `events <id> [--follow]`.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::db::{Action, Db, Event, Session};
use crate::table::{self, Table, or_dash};
use crate::write_json;
use sandbox::process::{self, Identity};

/// Liveness of a session's broker, by `/proc` identity.
fn runtime(session: &Session) -> Option<(i32, Identity)> {
    let broker = session.broker.as_ref()?;
    Some((
        broker.pid,
        process::identify(broker.pid, broker.start_time, &broker.boot_id),
    ))
}

fn runtime_json(session: &Session) -> Value {
    match runtime(session) {
        Some((pid, identity)) => json!({
            "broker_pid": pid,
            "alive": identity == Identity::Verified,
            "identity": identity,
        }),
        None => Value::Null,
    }
}

fn runtime_text(session: &Session) -> String {
    match runtime(session) {
        Some((pid, Identity::Verified)) => format!("pid {pid} alive"),
        Some((pid, Identity::Unknown)) => format!("pid {pid} ?"),
        Some((pid, _)) => format!("pid {pid} gone"),
        None => "-".to_string(),
    }
}

fn run_text(session: &Session) -> String {
    match &session.current_run {
        Some(run) => format!(
            "g{} {}",
            run.generation.map_or("?".to_string(), |g| g.to_string()),
            or_dash(run.state.as_deref())
        ),
        None => "-".to_string(),
    }
}

fn lease_expired(session: &Session, now_ms: i64) -> Option<bool> {
    session.lease_expires_at_ms.map(|at| at <= now_ms)
}

fn lease_text(session: &Session, now_ms: i64) -> String {
    match session.lease_expires_at_ms {
        Some(at) if at <= now_ms => format!("{} (past)", table::time_s(at)),
        Some(at) => table::time_s(at),
        None => "-".to_string(),
    }
}

fn opt_time(ms: Option<i64>) -> Value {
    ms.map_or(Value::Null, |ms| Value::String(table::time_ms(ms)))
}

/// `sessions`.
pub fn list(state_dir: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let db = Db::open(state_dir)?;
    let sessions = db.sessions()?;
    let now = common::time::now_unix_ms();
    if json {
        let rows: Vec<Value> = sessions
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "label": s.label,
                    "status": s.status,
                    "profile": s.profile,
                    "working_directory": s.working_directory,
                    "revision": s.revision,
                    "current_run": s.current_run,
                    "runtime": runtime_json(s),
                    "lease_expires_at": opt_time(s.lease_expires_at_ms),
                    "lease_expired": lease_expired(s, now),
                    "recovery_required": s.recovery_required,
                    "created_at": table::time_ms(s.created_at_ms),
                    "updated_at": table::time_ms(s.updated_at_ms),
                })
            })
            .collect();
        return write_json(out, &Value::Array(rows));
    }
    if sessions.is_empty() {
        writeln!(out, "no sessions")?;
        return Ok(());
    }
    let mut t = Table::new(&[
        "ID", "LABEL", "STATUS", "PROFILE", "WORKDIR", "REV", "RUN", "RUNTIME", "LEASE", "UPDATED",
    ]);
    for s in &sessions {
        t.row(vec![
            s.id.clone(),
            or_dash(s.label.as_deref()),
            s.status.clone(),
            or_dash(s.profile.as_deref()),
            or_dash(s.working_directory.as_deref()),
            s.revision.to_string(),
            run_text(s),
            runtime_text(s),
            lease_text(s, now),
            table::time_s(s.updated_at_ms),
        ]);
    }
    t.write(out)?;
    Ok(())
}

fn receipt_summary(action: &Action) -> String {
    let Some(outcome) = &action.outcome else {
        return "-".to_string();
    };
    let mut parts = Vec::new();
    if let Some(status) = outcome.get("status").and_then(Value::as_str) {
        parts.push(status.to_string());
    }
    if let Some(code) = outcome.get("error_code").and_then(Value::as_str) {
        parts.push(code.to_string());
    }
    if let Some(receipt) = outcome.get("receipt") {
        if let Some(path) = receipt.get("path").and_then(Value::as_str) {
            parts.push(path.to_string());
        }
        for key in ["sha256", "pre_sha256", "post_sha256"] {
            if let Some(hash) = receipt.get(key).and_then(Value::as_str) {
                parts.push(format!("{key}={}", table::clip(hash, 13)));
            }
        }
        if let Some(code) = receipt.get("exit_code").and_then(Value::as_i64) {
            parts.push(format!("exit={code}"));
        }
        if let Some(ms) = receipt.get("duration_ms").and_then(Value::as_u64) {
            parts.push(format!("{ms}ms"));
        }
    }
    if outcome.get("truncated").and_then(Value::as_bool) == Some(true) {
        parts.push("truncated".to_string());
    }
    parts.join(" ")
}

fn event_json(e: &Event) -> Value {
    json!({
        "seq": e.seq,
        "at": table::time_ms(e.at_ms),
        "kind": e.kind,
        "data": e.data,
    })
}

fn event_line(e: &Event) -> String {
    format!(
        "{:>6}  {}  {:<18}  {}",
        e.seq,
        table::time_s(e.at_ms),
        common::display::one_line(&e.kind),
        common::display::one_line(&table::summary(&e.data, 100))
    )
    .trim_end()
    .to_string()
}

fn event_header() -> String {
    format!("{:>6}  {:<20}  {:<18}  DATA", "SEQ", "TIME", "KIND")
}

/// `show <id>`.
/// What is wrong with the session's part of the ledger, if anything: a bad row of its own, or a
/// bad signed head (which may hide dropped rows of any session).
fn chain_problem(state_dir: &Path, id: &str) -> Option<String> {
    let report = match crate::verify::check(state_dir) {
        Ok(report) => report,
        Err(err) => return Some(format!("cannot be checked: {err:#}")),
    };
    report
        .problems
        .iter()
        .find(|p| {
            p.session_id.as_deref() == Some(id)
                || p.table == common::ledger_chain::Table::LedgerHead
        })
        .map(|p| {
            let table = serde_json::to_value(p.table).unwrap_or_default();
            format!("{} {}: {}", table.as_str().unwrap_or("?"), p.id, p.what)
        })
}

pub fn show(
    state_dir: &Path,
    id: &str,
    last: usize,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = Db::open(state_dir)?;
    let s = db.require_session(id)?;
    let turns = db.turns(id)?;
    let actions = db.actions(id)?;
    let (events, total) = db.last_events(id, last)?;
    let now = common::time::now_unix_ms();
    let broken = chain_problem(state_dir, id);
    if json {
        let mut value = json!({
            "session": {
                "id": s.id,
                "label": s.label,
                "status": s.status,
                "revision": s.revision,
                "profile": s.profile,
                "subagent_policy": s.subagent_policy,
                "source_directory": s.source_directory,
                "working_directory": s.working_directory,
                "workspace": s.workspace,
                "claude_session_id": s.claude_session_id,
                "created_at": table::time_ms(s.created_at_ms),
                "updated_at": table::time_ms(s.updated_at_ms),
                "lease_generation": s.lease_generation,
                "lease_expires_at": opt_time(s.lease_expires_at_ms),
                "lease_expired": lease_expired(&s, now),
                "current_run": s.current_run,
                "pending_turn_id": s.pending_turn_id,
                "last_result": s.last_result,
                "launch_error": s.launch_error,
                "stop_request": s.stop_request,
                "terminal": s.terminal,
                "recovery_required": s.recovery_required,
                "network_boundary": s.network_boundary,
                "skill_snapshot": s.skill_snapshot,
                "broker": s.broker,
                "runtime": runtime_json(&s),
                "data_error": s.data_error,
            },
            "turns": turns.iter().map(|t| json!({
                "sequence": t.sequence,
                "turn_id": t.turn_id,
                "kind": t.kind,
                "status": t.status,
                "reply_id": t.reply_id,
                "created_at": table::time_ms(t.created_at_ms),
            })).collect::<Vec<_>>(),
            "actions": actions.iter().map(|a| json!({
                "action_id": a.action_id,
                "turn_id": a.turn_id,
                "turn_sequence": a.turn_sequence,
                "call_index": a.call_index,
                "name": a.name,
                "arguments": a.arguments,
                "state": a.state,
                "outcome": a.outcome.as_ref().map(|o| json!({
                    "status": o.get("status"),
                    "error_code": o.get("error_code"),
                    "truncated": o.get("truncated"),
                    "output_bytes": o.get("output").and_then(Value::as_str).map(str::len),
                    "receipt": o.get("receipt"),
                })),
                "updated_at": table::time_ms(a.updated_at_ms),
            })).collect::<Vec<_>>(),
            "events": {
                "total": total,
                "last": events.iter().map(event_json).collect::<Vec<_>>(),
            },
        });
        if let Some(problem) = &broken {
            value["session"]["ledger_broken"] = json!(problem);
        }
        if let Some(pruned) = &s.content_pruned {
            value["session"]["content_pruned"] = pruned.clone();
        }
        return write_json(out, &value);
    }

    let mut kv = Table::new(&["FIELD", "VALUE"]);
    let mut field = |k: &str, v: String| kv.row(vec![k.to_string(), v]);
    field("id", s.id.clone());
    if let Some(problem) = &broken {
        field(
            "LEDGER",
            format!("BROKEN: {problem} (see gatewayctl verify)"),
        );
    }
    field("label", or_dash(s.label.as_deref()));
    field("status", format!("{} (revision {})", s.status, s.revision));
    field(
        "profile",
        format!(
            "{}, subagents {}",
            or_dash(s.profile.as_deref()),
            or_dash(s.subagent_policy.as_deref())
        ),
    );
    field("working dir", or_dash(s.working_directory.as_deref()));
    if s.source_directory != s.working_directory {
        field("source dir", or_dash(s.source_directory.as_deref()));
    }
    if let Some(w) = &s.workspace {
        field("workspace", table::summary(w, 100));
    }
    field("claude session", or_dash(s.claude_session_id.as_deref()));
    field("created", table::time_s(s.created_at_ms));
    field("updated", table::time_s(s.updated_at_ms));
    field(
        "lease",
        format!(
            "generation {}, expires {}",
            s.lease_generation
                .map_or("?".to_string(), |g| g.to_string()),
            lease_text(&s, now)
        ),
    );
    field(
        "current run",
        match &s.current_run {
            Some(run) => {
                let mut text = run_text(&s);
                if let Some(at) = &run.started_at {
                    text.push_str(&format!(", started {at}"));
                }
                if let Some(code) = run.exit_code {
                    text.push_str(&format!(", exit {code}"));
                }
                if let Some(sig) = run.signal {
                    text.push_str(&format!(", signal {sig}"));
                }
                text
            }
            None => "-".to_string(),
        },
    );
    field("pending turn", or_dash(s.pending_turn_id.as_deref()));
    field(
        "recovery required",
        match s.recovery_required {
            Some(true) => "yes".to_string(),
            Some(false) => "no".to_string(),
            None => "-".to_string(),
        },
    );
    for (name, value) in [
        ("last result", &s.last_result),
        ("launch error", &s.launch_error),
        ("stop request", &s.stop_request),
        ("terminal", &s.terminal),
        ("content pruned", &s.content_pruned),
        ("network", &s.network_boundary),
    ] {
        if let Some(v) = value {
            field(name, table::summary(v, 100));
        }
    }
    for skill in skill_entries(&s) {
        field("skill", skill);
    }
    match &s.broker {
        Some(b) => {
            field(
                "broker",
                format!("{}, start time {}", runtime_text(&s), b.start_time),
            );
            field("broker socket", b.socket_path.clone());
        }
        None => field("broker", "-".to_string()),
    }
    if let Some(err) = &s.data_error {
        field("data error", err.clone());
    }
    kv.write(out)?;

    writeln!(out)?;
    writeln!(out, "TURNS ({})", turns.len())?;
    if !turns.is_empty() {
        let mut t = Table::new(&["SEQ", "TURN", "KIND", "STATUS", "REPLY", "CREATED"]);
        for turn in &turns {
            t.row(vec![
                turn.sequence.to_string(),
                turn.turn_id.clone(),
                or_dash(turn.kind.as_deref()),
                turn.status.clone(),
                or_dash(turn.reply_id.as_deref()),
                table::time_s(turn.created_at_ms),
            ]);
        }
        t.write(out)?;
    }

    writeln!(out)?;
    writeln!(out, "ACTIONS ({})", actions.len())?;
    if !actions.is_empty() {
        let mut t = Table::new(&["TURN", "#", "ACTION", "NAME", "STATE", "ARGS", "RECEIPT"]);
        for a in &actions {
            t.row(vec![
                a.turn_sequence.map_or("?".to_string(), |s| s.to_string()),
                a.call_index.to_string(),
                a.action_id.clone(),
                a.name.clone(),
                a.state.clone(),
                table::summary(&a.arguments, 60),
                receipt_summary(a),
            ]);
        }
        t.write(out)?;
    }

    writeln!(out)?;
    writeln!(out, "EVENTS (last {} of {total})", events.len())?;
    if !events.is_empty() {
        writeln!(out, "{}", event_header())?;
        for e in &events {
            writeln!(out, "{}", event_line(e))?;
        }
    }
    Ok(())
}

/// `<id> sha256:<hash>` of each frozen skill; ids and hashes only, as the record holds.
fn skill_entries(s: &Session) -> Vec<String> {
    let Some(Value::Array(entries)) = &s.skill_snapshot else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|e| {
            let text = |key: &str| {
                e.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            };
            format!("{} sha256:{}", text("skill_id"), text("content_sha256"))
        })
        .collect()
}

/// How `events` follows the ledger.
pub struct Follow {
    pub enabled: bool,
    /// Stop after this many polls (tests); `None` = until interrupted.
    pub max_polls: Option<u64>,
    pub interval: Duration,
}

/// `events <id> [--follow]`.
pub fn events(
    state_dir: &Path,
    id: &str,
    follow: Follow,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = Db::open(state_dir)?;
    db.require_session(id)?;
    let mut events = db.events_after(id, 0)?;
    if json && !follow.enabled {
        let rows: Vec<Value> = events.iter().map(event_json).collect();
        return write_json(out, &Value::Array(rows));
    }
    if !json {
        writeln!(out, "{}", event_header())?;
    }
    let mut last = 0;
    let mut polls = 0u64;
    loop {
        for e in &events {
            if json {
                serde_json::to_writer(&mut *out, &event_json(e))?;
                writeln!(out)?;
            } else {
                writeln!(out, "{}", event_line(e))?;
            }
            last = last.max(e.seq);
        }
        out.flush()?;
        if !follow.enabled || follow.max_polls.is_some_and(|max| polls >= max) {
            return Ok(());
        }
        std::thread::sleep(follow.interval);
        polls += 1;
        events = db.events_after(id, last)?;
    }
}
