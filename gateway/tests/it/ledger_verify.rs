//! The ledger chain on a state dir from a real session (real runner, a tool call with its
//! receipt): `gatewayctl verify` passes beside the running gateway, then on a copy an attacker
//! edits an event, an event's receipt, an action's receipt, arguments, a reply's text, a
//! session's and a turn's fields, and verify names each. The outside attack's B1 and B2 against
//! the real gateway: hashes stripped while it is stopped (it refuses to start), the newest rows
//! deleted while it runs (it refuses every change, `ledger_broken`); and a gateway killed
//! between a commit and its head write starts again without a false alarm.

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

/// A writer connection as the attacker opens it (live file or copy): the append-only triggers
/// dropped first.
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
        (report.problems[0].table, report.problems[0].id.clone()),
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

    // The rows the events cover (B4), each edited on a copy.
    let db = state_db(&gw);
    let reply_id: String = db
        .query_row(
            "SELECT reply_id FROM replies WHERE session_id = ?1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    let first_turn: String = db
        .query_row(
            "SELECT turn_id FROM turns WHERE session_id = ?1 AND sequence = 1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    let edits = [
        (
            "UPDATE actions SET arguments = json_set(arguments, '$.file_path', '/etc/hostname') WHERE session_id = ?1",
            Table::Actions,
            action_id.as_str(),
            "column `arguments` differs",
        ),
        (
            "UPDATE replies SET data = json_set(data, '$.text', 'Delete everything.') WHERE session_id = ?1",
            Table::Replies,
            reply_id.as_str(),
            "column `text` differs",
        ),
        (
            "UPDATE sessions SET data = json_set(data, '$.source_directory', '/etc') WHERE id = ?1",
            Table::Sessions,
            sid.as_str(),
            "column `source_directory` differs",
        ),
        (
            "UPDATE turns SET sequence = 100 WHERE session_id = ?1 AND sequence = 1",
            Table::Turns,
            first_turn.as_str(),
            "column `sequence` differs",
        ),
    ];
    for (sql, table, id, what) in edits {
        let copy = copy_state(&gw);
        attacker(copy.path()).execute(sql, [&sid]).unwrap();
        let report = check(copy.path());
        let p = &report.problems[0];
        assert_eq!((&p.table, p.id.as_str()), (&table, id), "{sql}: {p:?}");
        assert!(p.what.contains(what), "{p:?}");
        assert!(report.broken_sessions.contains(&sid));
    }

    // The newest rows dropped.
    let copy = copy_state(&gw);
    let head = std::fs::read_to_string(copy.path().join(HEAD_FILE)).unwrap();
    let head = common::ledger_chain::Head::parse(&head).unwrap();
    attacker(copy.path())
        .execute("DELETE FROM events WHERE seq >= ?1", [head.seq])
        .unwrap();
    assert_eq!(check(copy.path()).problems[0].table, Table::LedgerHead);
}

/// B2 while the gateway runs: the newest rows deleted (and AUTOINCREMENT's counter set back).
/// Its next change is refused with `ledger_broken`, and every one after it; verify names the
/// signed head. B1 while it is stopped: every hash stripped and a row edited; it refuses to
/// start, naming the row, and verify names the same row.
#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_refuses_a_ledger_changed_behind_its_back() {
    let mut gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Say hello", "tamper-1").await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let newest: i64 = state_db(&gw)
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    let db = attacker(gw.state_dir());
    db.execute("DELETE FROM events WHERE seq = ?1", [newest])
        .unwrap();
    db.execute(
        "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'events'",
        [newest - 1],
    )
    .unwrap();
    let before = count(&gw, "SELECT COUNT(*) FROM events");
    for key in ["tamper-stop", "tamper-stop-again"] {
        let r = chat.stop(&sid, &lease, key, Some("done")).await.unwrap();
        assert_eq!(tool_err_code(&r), "ledger_broken", "{r}");
        let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
        assert!(message.contains("gatewayctl verify"), "{message}");
    }
    let r = chat.start("again", dir.path(), "tamper-2").await.unwrap();
    assert_eq!(tool_err_code(&r), "ledger_broken", "{r}");
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM events"), before);
    let report = gatewayctl::verify::check(gw.state_dir()).unwrap();
    let first = &report.problems[0];
    assert_eq!(
        (&first.table, first.id.as_str()),
        (&Table::LedgerHead, newest.to_string().as_str()),
        "{first:?}"
    );
    assert!(
        gw.stderr_log()
            .contains("the ledger was changed outside the gateway")
    );

    // Stopped: a state dir whose hashes are all stripped.
    gw.kill().await;
    kill_session_processes(gw.state_dir());
    let db = attacker(gw.state_dir());
    db.execute_batch("UPDATE events SET hash = NULL; UPDATE events SET data = '{}' WHERE seq = 2;")
        .unwrap();
    let start: i64 = db
        .query_row("SELECT MIN(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    let outcome = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .state_dir(gw.state_dir())
        .run_to_exit(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(outcome.code(), Some(1), "{outcome:?}");
    let named = format!("events {start}: no hash, but the signed chain begins at seq {start}");
    assert!(outcome.stderr.contains(&named), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("gatewayctl verify"),
        "{}",
        outcome.stderr
    );
    let report = gatewayctl::verify::check(gw.state_dir()).unwrap();
    assert_eq!(report.problems[0].id, start.to_string());
}

fn require_failpoints() {
    #[cfg(not(feature = "failpoints"))]
    panic!("this crash test needs the gateway built with `--features failpoints`");
}

/// A gateway killed after the commit of a session's first events and before the signed head
/// names them (failpoint `gateway_before_ledger_head`): the next gateway on the state dir
/// starts, verify passes, and sessions go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_between_commit_and_head_write_is_not_a_false_alarm() {
    require_failpoints();
    let mut gw = gateway_with(&[(
        "NATIVE_GATEWAY_FAILPOINT",
        "gateway_before_ledger_head:abort",
    )])
    .await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    // The gateway aborts once the session's start is committed: the call gets no answer.
    let _ = chat.start("Say hello", dir.path(), "crash-1").await;
    // The call ends when the connection drops; the aborting process (and its instance lock) may
    // outlive that by a moment.
    gw.wait_exit(std::time::Duration::from_secs(30))
        .await
        .expect("the gateway aborted at the failpoint");
    let head = common::ledger_chain::Head::read(gw.state_dir());
    let common::ledger_chain::HeadFile::Present(head) = head else {
        panic!("no head: {head:?}");
    };
    let newest: i64 = state_db(&gw)
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(
        newest > head.seq,
        "nothing after the head: {newest} {head:?}"
    );
    let report = gatewayctl::verify::check(gw.state_dir()).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.rows_after_head, (newest - head.seq) as u64);

    let again = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .state_dir(gw.state_dir())
        .spawn()
        .await
        .expect("the gateway starts after the crash");
    let chat = chatgpt(&again).await;
    let v = start_session(&chat, dir.path(), "Say hello", "crash-2").await;
    chat.stop(&session_id(&v), &lease_id(&v), "crash-stop", None)
        .await
        .unwrap();
    let live = gatewayctl_json(&again, &["verify"]);
    assert_eq!(live["ok"], true, "{live}");
    drop(again);
    drop(gw);
}

/// Red team 27b R2 against the real gateway: a database writer plants a lease row for a lease of
/// their own, stored as the plain SHA-256 the gateway used to store. The stop it would allow is
/// refused (`lease_invalid`), the session goes on under its real lease, and nothing was recorded.
#[tokio::test(flavor = "multi_thread")]
async fn a_lease_planted_by_a_database_writer_is_refused() {
    let mut gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Say hello", "plant-1").await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let state_dir = gw.state_dir().to_path_buf();
    let plant = |planted: &str| {
        attacker(&state_dir)
            .execute(
                "INSERT INTO leases (lease_hash, session_id, generation, expires_at_ms)
                 VALUES (?1, ?2, 1, 9000000000000)",
                rusqlite::params![common::hash::sha256_hex(planted.as_bytes()), sid],
            )
            .unwrap();
    };
    // Planted while the gateway is stopped: the lease is refused by its key, the real one works.
    gw.kill().await;
    let planted = "lease_0123456789abcdef0123456789abcdef01234567";
    plant(planted);
    gw.start().await.unwrap();
    let chat = chatgpt(&gw).await;
    let stops = "SELECT COUNT(*) FROM events WHERE kind = 'stop_requested'";
    let r = chat
        .stop(&sid, planted, "plant-stop", Some("mine"))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "lease_invalid", "{r}");
    assert_eq!(count(&gw, stops), 0);
    let r = chat.status(&sid, &lease, 0).await.unwrap();
    assert_eq!(view(&r)["native_session_id"], sid.as_str(), "{r}");
    let report = gatewayctl_json(&gw, &["verify"]);
    assert_eq!(report["ok"], true, "{report}");
    // Planted while it runs: the row seals refuse the next call outright, even with the real
    // lease, and every call after it (red team 27c B2).
    plant("lease_planted_while_it_runs");
    for key in ["real-stop", "real-stop-again"] {
        let r = chat.stop(&sid, &lease, key, Some("done")).await.unwrap();
        assert_eq!(tool_err_code(&r), "ledger_broken", "{r}");
    }
    assert_eq!(count(&gw, stops), 0);
    assert!(
        gw.stderr_log().contains("leases row "),
        "{}",
        gw.stderr_log()
    );
}
