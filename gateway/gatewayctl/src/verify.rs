//! `gatewayctl verify`: checks the ledger's hash chain, the signed head, the rows from before the
//! chain, and the covered tables against the chained events and records, both ways
//! (`common::ledger_chain`, the same check the gateway runs at open), read-only. It names the
//! first bad row and fails when anything is wrong.

use std::io::Write;
use std::path::Path;

use common::ledger_chain::{Head, Report, Verifier};
use serde_json::json;

use crate::db::Db;
use crate::{Reported, write_json};

/// Check the state dir's ledger. Safe beside a running gateway: the head is read first (the
/// gateway writes it only after its commit, so it never names a row this read cannot see, and
/// rows after it carry the server key's signature), and the rows are read in one read
/// transaction (one consistent snapshot of every table).
pub fn check(state_dir: &Path) -> anyhow::Result<Report> {
    let head = Head::read(state_dir);
    let key = std::fs::read_to_string(state_dir.join("auth").join("server-key")).ok();
    let db = Db::open(state_dir)?;
    let mut verifier = Verifier::new(head, key.as_deref().map(str::trim));
    // Only a database no gateway with the chain has opened yet may have rows and no head.
    if db.schema_version()? < 4 {
        verifier.head_may_be_missing();
    }
    db.snapshot(|db| Ok(common::ledger_chain::db::check(db.conn(), &mut verifier)?))?;
    Ok(verifier.finish())
}

/// What the gateway latched in `<state>/ledger-broken` when it found the ledger broken (one
/// line, bounded): it refuses every change, and every start, until the owner removes the file.
/// The rows may still pass the chain check (a second writer's signed rows, or a database put
/// back), so verify reports the latch too: the two never disagree on "OK".
pub fn latched(state_dir: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(state_dir.join(common::ledger_chain::BROKEN_FILE)).ok()?;
    let mut text = String::new();
    let _ = file.take(4096).read_to_string(&mut text);
    let why = common::display::one_line(text.trim()).into_owned();
    Some(if why.is_empty() {
        "no reason recorded".into()
    } else {
        why
    })
}

/// `gatewayctl verify`.
pub fn run(state_dir: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let report = check(state_dir)?;
    let latch = latched(state_dir);
    if json {
        let value = json!({
            "ok": report.ok() && latch.is_none(),
            "first_problem": report.problems.first(),
            "latched_broken": latch,
            "report": report,
        });
        write_json(out, &value)?;
    } else {
        write_text(&report, latch.as_deref(), out)?;
    }
    if !report.ok() {
        Err(Reported(format!(
            "verify: the ledger fails its check ({} problem(s))",
            report.problems.len()
        ))
        .into())
    } else if latch.is_some() {
        Err(Reported(format!(
            "verify: the gateway found the ledger broken ({}); it refuses changes and starts \
             until that file is removed",
            common::ledger_chain::BROKEN_FILE
        ))
        .into())
    } else {
        Ok(())
    }
}

fn write_text(r: &Report, latch: Option<&str>, out: &mut impl Write) -> anyhow::Result<()> {
    let ok = r.ok() && latch.is_none();
    writeln!(out, "ledger: {}", if ok { "OK" } else { "BROKEN" })?;
    if let Some(why) = latch {
        writeln!(
            out,
            "  found broken    by the gateway ({}): {why}",
            common::ledger_chain::BROKEN_FILE
        )?;
        if r.ok() {
            writeln!(
                out,
                "  chain           the rows and signatures check out now: another writer (a \
                 second gateway on this state dir, a database put back) changed the ledger \
                 behind the gateway's back; investigate, then remove {} (or restore a backup)",
                common::ledger_chain::BROKEN_FILE
            )?;
        }
    }
    if let Some(p) = r.problems.first() {
        let table = serde_json::to_value(p.table)?;
        // Ids and descriptions come from the rows themselves: each on one line (the output
        // writer escapes control and bidi characters; newlines are escaped here so a value
        // cannot forge a line such as "ledger: OK").
        use common::display::one_line;
        let session = p
            .session_id
            .as_deref()
            .map_or(String::new(), |s| format!(" (session {})", one_line(s)));
        writeln!(
            out,
            "  first bad row   {} {}{session}: {}",
            table.as_str().unwrap_or("?"),
            one_line(&p.id.to_string()),
            one_line(&p.what)
        )?;
        let sessions: Vec<String> = r
            .broken_sessions
            .iter()
            .map(|s| one_line(s).into_owned())
            .collect();
        writeln!(
            out,
            "  problems        {}; sessions affected: {}",
            r.problems.len(),
            if sessions.is_empty() {
                "-".to_string()
            } else {
                sessions.join(", ")
            }
        )?;
    }
    writeln!(
        out,
        "  events          {} ({} chained, {} from before the chain)",
        r.events, r.chained_events, r.unchained_events
    )?;
    writeln!(
        out,
        "  receipts        {} checked, {} from before the chain",
        r.receipts_checked, r.receipts_unchained
    )?;
    writeln!(
        out,
        "  other tables    {} row(s) of actions, replies, sessions, turns match their events, \
         {} their chained records",
        r.rows_cross_checked, r.rows_recorded
    )?;
    if r.unchained_events > 0 {
        writeln!(
            out,
            "  before chain    {} row(s), {}",
            r.pre_chain.0,
            if r.pre_chain_committed {
                "committed to by the signed head"
            } else {
                "not yet committed to (the next gateway start commits them)"
            }
        )?;
    }
    match r.head_seq {
        Some(seq) => writeln!(
            out,
            "  signed head     seq {seq}{}, {} newer signed row(s) not yet anchored",
            r.chain_start
                .map_or(String::new(), |s| format!(", chain from seq {s}")),
            r.rows_after_head
        )?,
        None => writeln!(out, "  signed head     none")?,
    }
    Ok(())
}
