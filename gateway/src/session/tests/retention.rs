//! Retention of an ended session's database content (issue 24 item 3) against the real store:
//! the rows go through the store's write path with a chained `content_pruned` event, the check
//! the gateway runs at open and `gatewayctl verify` runs stays green, edits and re-inserted rows
//! are still named, a live session keeps everything, and the pruned session answers honestly.

use std::time::Duration;

use super::ledger_records::{first_problem, recorded};
use crate::state::SessionStatus;

fn rows(r: &super::ledger_records::Recorded, table: &str, session: &str) -> i64 {
    let db = rusqlite::Connection::open(r.state_dir().join(crate::state::DATABASE_FILE)).unwrap();
    db.query_row(
        &format!("SELECT COUNT(*) FROM {table} WHERE session_id = ?1"),
        [session],
        |row| row.get(0),
    )
    .unwrap()
}

#[tokio::test]
async fn a_pruned_session_keeps_its_summary_and_the_ledger_verifies() {
    let r = recorded().await;
    let live =
        r.h.start_with("k-live", common::tools::CapabilityProfile::ReadOnly)
            .await;
    let live_id = live.native_session_id.clone();
    let live_pid = r.h.pid(&live);
    r.h.runner_asks(live_pid, "live-1").await;
    let stopped = r.h.stop(&r.view, "stop-1").await.unwrap();
    assert_eq!(stopped.status, SessionStatus::Stopped);
    let (live_turns, live_answers) = (
        rows(&r, "turns", &live_id),
        rows(&r, "idempotency", &live_id),
    );
    assert!(live_turns > 0 && rows(&r, "turns", &r.session) > 0);

    // A dry run names the session and removes nothing.
    let dry = crate::prune::prune(&r.h.gateway, Duration::ZERO, true).unwrap();
    let ids: Vec<_> = dry.sessions.iter().map(|s| s.session_id.clone()).collect();
    assert_eq!(ids, vec![r.session.clone()], "{dry:?}");
    assert!(dry.content_bytes > 0 && rows(&r, "actions", &r.session) == 1);

    let done = crate::prune::prune(&r.h.gateway, Duration::ZERO, false).unwrap();
    assert_eq!(done.content_bytes, dry.content_bytes, "{done:?}");
    for table in ["turns", "replies", "actions"] {
        assert_eq!(
            rows(&r, table, &r.session),
            0,
            "{table} of the pruned session"
        );
    }
    // The live session keeps everything.
    assert_eq!(rows(&r, "turns", &live_id), live_turns);
    assert_eq!(rows(&r, "idempotency", &live_id), live_answers);
    r.h.gateway.store.flush_head();
    assert_eq!(
        first_problem(&r.state_dir(), None),
        None,
        "verify after prune"
    );
    // Nothing more to take; a restarted gateway's open check passes.
    let again = crate::prune::prune(&r.h.gateway, Duration::ZERO, false).unwrap();
    assert!(again.sessions.is_empty(), "{again:?}");
    drop(r.h.restarted());

    // Status and a replayed stop answer the session as it is: ended, its content pruned.
    let status = r.h.status(&r.view).await.unwrap();
    assert_eq!(status.status, SessionStatus::Stopped);
    let pruned = status.content_pruned.as_ref().expect("the pruned marker");
    assert!(pruned.message.contains("retention"), "{pruned:?}");
    assert!(status.last_result.is_none() && status.pending_turn.is_none());
    let replay = r.h.stop(&r.view, "stop-1").await.unwrap();
    assert!(
        replay.replay && replay.content_pruned.is_some(),
        "{replay:?}"
    );
    assert_eq!(
        r.h.ledger(&r.session).last().map(String::as_str),
        Some("content_pruned")
    );
}

#[tokio::test]
async fn after_a_prune_edits_and_reinserted_rows_are_still_named() {
    let r = recorded().await;
    let (s, t) = (r.session.clone(), r.turn.clone());
    r.h.stop(&r.view, "stop-1").await.unwrap();
    let db = rusqlite::Connection::open(r.state_dir().join(crate::state::DATABASE_FILE)).unwrap();
    // A copy of the turn row, put back after the prune as an attacker would.
    let turn: (i64, String, String, i64, String) = db
        .query_row(
            "SELECT sequence, fingerprint, status, created_at_ms, data FROM turns WHERE turn_id = ?1",
            [&t],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
        )
        .unwrap();
    crate::prune::prune(&r.h.gateway, Duration::ZERO, false).unwrap();
    r.h.gateway.store.flush_head();
    assert_eq!(first_problem(&r.state_dir(), None), None);
    let reinserted = format!(
        "INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, \
         data) VALUES ('{t}', '{s}', {}, '{}', '{}', {}, '{}')",
        turn.0,
        turn.1,
        turn.2,
        turn.3,
        turn.4.replace('\'', "''")
    );
    let found = r.tampered(&reinserted).unwrap_or_default();
    assert!(
        found.starts_with(&format!("turns {t}: no chained record")),
        "{found}"
    );
    let edited =
        format!("UPDATE sessions SET data = json_set(data, '$.label', 'forged') WHERE id = '{s}'");
    let found = r.tampered(&edited).unwrap_or_default();
    assert!(
        found.starts_with(&format!("sessions {s}: column `label` differs")),
        "{found}"
    );
}

/// A row edited behind the running gateway's back before a prune: the row seals refuse the
/// prune, which removes nothing, so the edited row never becomes the record of what was pruned.
/// (The check of a `content_pruned` event against the rows' chained records stays for ledgers
/// pruned by builds without the seals.)
#[tokio::test]
async fn a_row_edited_before_the_prune_stops_it() {
    let r = recorded().await;
    let a = r.action.clone();
    r.h.stop(&r.view, "stop-1").await.unwrap();
    let db = rusqlite::Connection::open(r.state_dir().join(crate::state::DATABASE_FILE)).unwrap();
    db.execute(
        "UPDATE actions SET arguments = '{\"file_path\":\"/etc/shadow\"}' WHERE action_id = ?1",
        [&a],
    )
    .unwrap();
    let err = crate::prune::prune(&r.h.gateway, Duration::ZERO, false).unwrap_err();
    assert!(format!("{err:#}").contains("actions row "), "{err:#}");
    let left: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM actions WHERE action_id = ?1",
            [&a],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(left, 1, "nothing was pruned");
}
