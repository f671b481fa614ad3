//! `brokers`: for each non-terminal session with a broker record, whether the recorded process is
//! the one running (boot id, pid, start time), its uptime and memory, and its runner child.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::BrokersArgs;
use crate::db::Db;
use crate::procfs;
use crate::table::{self, Table};
use crate::{handshake, write_json};
use sandbox::process::{self, Identity};

/// `brokers [--handshake]`.
pub fn run(
    state_dir: &Path,
    args: &BrokersArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = Db::open(state_dir)?;
    let sessions = db.sessions()?;
    let mut rows = Vec::new();
    let mut t = Table::new(&[
        "SESSION",
        "STATUS",
        "BROKER",
        "VERIFIED",
        "UPTIME",
        "RSS",
        "RUNNER",
        "RUNNER RSS",
        "HANDSHAKE",
    ]);
    for s in sessions.iter().filter(|s| !s.is_terminal()) {
        let Some(b) = &s.broker else { continue };
        let identity = process::identify(b.pid, b.start_time, &b.boot_id);
        let alive = identity == Identity::Verified;
        let uptime = alive
            .then(|| procfs::process_uptime_seconds(b.start_time))
            .flatten();
        let rss = alive.then(|| procfs::rss_kib(b.pid)).flatten();
        let runners: Vec<Value> = if alive {
            procfs::children(b.pid)
                .into_iter()
                .map(|(pid, st)| json!({"pid": pid, "comm": st.comm, "rss_kib": procfs::rss_kib(pid)}))
                .collect()
        } else {
            Vec::new()
        };
        let handshake = if !args.handshake {
            None
        } else if !alive {
            Some(json!({"ok": false, "detail": "skipped: process identity not verified"}))
        } else {
            Some(match handshake::verify(&s.id, b) {
                Ok(p) => json!({
                    "ok": true,
                    "detail": format!("proof ok, protocol {}, build {}", p.protocol_version, p.build),
                }),
                Err(err) => json!({"ok": false, "detail": format!("{err:#}")}),
            })
        };

        let first_runner = runners.first();
        t.row(vec![
            s.id.clone(),
            s.status.clone(),
            format!("pid {}", b.pid),
            procfs::describe(identity).to_string(),
            uptime.map_or("-".to_string(), table::duration),
            rss.map_or("-".to_string(), table::kib),
            match (first_runner, runners.len()) {
                (None, _) => {
                    if alive {
                        "none".to_string()
                    } else {
                        "-".to_string()
                    }
                }
                (Some(r), 1) => format!("pid {}", r["pid"]),
                (Some(r), n) => format!("pid {} (+{} more)", r["pid"], n - 1),
            },
            first_runner
                .and_then(|r| r["rss_kib"].as_u64())
                .map_or("-".to_string(), table::kib),
            match &handshake {
                None => "-".to_string(),
                Some(h) if h["ok"] == true => "ok".to_string(),
                Some(h) => format!("FAILED: {}", h["detail"].as_str().unwrap_or("")),
            },
        ]);
        rows.push(json!({
            "session_id": s.id,
            "status": s.status,
            "broker": {
                "pid": b.pid,
                "start_time": b.start_time,
                "boot_id": b.boot_id,
                "socket_path": b.socket_path,
                "runtime_dir": b.runtime_dir,
            },
            "verified": alive,
            "identity": identity,
            "uptime_seconds": uptime,
            "rss_kib": rss,
            "runner_alive": !runners.is_empty(),
            "runners": runners,
            "handshake": handshake,
        }));
    }
    if json {
        return write_json(out, &Value::Array(rows));
    }
    if t.is_empty() {
        writeln!(out, "no brokers of active sessions")?;
        return Ok(());
    }
    t.write(out)?;
    if !args.handshake {
        writeln!(out)?;
        writeln!(
            out,
            "verified = same boot id, pid and start time (/proc); no socket was touched"
        )?;
    }
    Ok(())
}
