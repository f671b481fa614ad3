//! The ledger chain on a state dir from a real session (real runner, a tool call with its
//! receipt): `gatewayctl verify` passes beside the running gateway, then on a copy an attacker
//! edits an event, an event's receipt and an action's receipt, and verify names each.

use common::ledger_chain::{HEAD_FILE, Table};
use serde_json::json;

use crate::support::*;

/// A copy of the live state dir: head first, then the database (`VACUUM INTO` from a read-only
/// connection), so the head never names a row the copy lacks.
fn copy_state(gw: &GatewayProcess) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir(copy.path().join("auth")).unwrap();
    std::fs::copy(
        gw.state_dir().join("auth/server-key"),
        copy.path().join("auth/server-key"),
    )
    .unwrap();
    std::fs::copy(gw.state_dir().join(HEAD_FILE), copy.path().join(HEAD_FILE)).unwrap();
    let target = copy.path().join("gateway.sqlite3");
    state_db(gw)
        .execute("VACUUM INTO ?1", [target.to_string_lossy()])
        .unwrap();
    copy
}

fn attacker(dir: &std::path::Path) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(dir.join("gateway.sqlite3")).unwrap();
    db.execute_batch(
        "DROP TRIGGER IF EXISTS events_no_update; DROP TRIGGER IF EXISTS events_no_delete;",
    )
    .unwrap();
    db
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_session_verifies_and_each_edit_is_named() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let notes = dir.path().join("notes.txt");
    let v = start_session(&chat, dir.path(), "Read notes.txt", "chain-start").await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let calls = json!([{"name": "Read", "arguments": {"file_path": notes.to_string_lossy()}}]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "r1",
            Some("Reading."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["pending_turn"]["kind"], "tool_results", "{v}");
    let action_id = v["pending_turn"]["tool_results"][0]["receipt"]["action_id"]
        .as_str()
        .unwrap()
        .to_string();
    chat.stop(&sid, &lease, "stop-1", Some("done"))
        .await
        .unwrap();

    // Beside the running gateway.
    let live = gatewayctl_json(&gw, &["verify"]);
    assert_eq!(live["ok"], true, "{live}");
    assert!(
        live["report"]["chained_events"].as_u64().unwrap() >= 5,
        "{live}"
    );
    assert_eq!(live["report"]["unchained_events"], 0, "{live}");
    assert_eq!(live["report"]["receipts_checked"], 1, "{live}");

    let check = |dir: &std::path::Path| gatewayctl::verify::check(dir).unwrap();
    let intact = copy_state(&gw);
    assert!(check(intact.path()).ok());

    // An event's data edited.
    let copy = copy_state(&gw);
    let seq: i64 = attacker(copy.path())
        .query_row(
            "SELECT seq FROM events WHERE kind = 'reply_accepted' AND session_id = ?1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    attacker(copy.path())
        .execute(
            "UPDATE events SET data = json_set(data, '$.text_sha256', 'x') WHERE seq = ?1",
            [seq],
        )
        .unwrap();
    let report = check(copy.path());
    assert_eq!(report.problems[0].table, Table::Events);
    assert_eq!(report.problems[0].id, seq.to_string());
    assert!(report.broken_sessions.contains(&sid));

    // The receipt inside the chained event edited.
    let copy = copy_state(&gw);
    let seq: i64 = attacker(copy.path())
        .query_row(
            "SELECT seq FROM events WHERE kind = 'action_committed' AND data LIKE ?1",
            [format!("%{action_id}%")],
            |r| r.get(0),
        )
        .unwrap();
    attacker(copy.path())
        .execute(
            "UPDATE events SET data = json_set(data, '$.receipt.sha256', ?2) WHERE seq = ?1",
            rusqlite::params![seq, "0".repeat(64)],
        )
        .unwrap();
    let report = check(copy.path());
    assert_eq!(
        (
            report.problems[0].table.clone(),
            report.problems[0].id.clone()
        ),
        (Table::Events, seq.to_string())
    );

    // The receipt stored with the action edited.
    let copy = copy_state(&gw);
    attacker(copy.path())
        .execute(
            "UPDATE actions SET outcome = json_set(outcome, '$.receipt.sha256', ?2) WHERE action_id = ?1",
            rusqlite::params![action_id, "0".repeat(64)],
        )
        .unwrap();
    let report = check(copy.path());
    assert_eq!(report.problems[0].table, Table::Actions);
    assert_eq!(report.problems[0].id, action_id);

    // The newest rows dropped.
    let copy = copy_state(&gw);
    let head = std::fs::read_to_string(copy.path().join(HEAD_FILE)).unwrap();
    let head = common::ledger_chain::Head::parse(&head).unwrap();
    attacker(copy.path())
        .execute("DELETE FROM events WHERE seq >= ?1", [head.seq])
        .unwrap();
    assert_eq!(check(copy.path()).problems[0].table, Table::LedgerHead);
}
