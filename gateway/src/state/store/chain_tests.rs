//! Tests of the ledger chain against an attacker who can write the database file (issue 27's
//! outside attack): with the gateway stopped and while it runs, hashes stripped, the newest rows
//! deleted, sequence numbers skipped and rows appended by someone without the server key are
//! refused with `LedgerBroken` naming the row; a crash between a commit and its head write is
//! not mistaken for tampering.

use super::*;
use common::ledger_chain::{HeadFile, Verifier};
use serde_json::json;

fn open_with(n: u32) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..n {
        append(&store, i).unwrap();
    }
    (dir, store)
}

fn append(store: &Store, i: u32) -> Result<(), StoreError> {
    store.write(|tx| tx.append_event(Some("ns_a"), "k", &json!({"i": i})))
}

/// A connection as the attacker opens it: the append-only triggers dropped.
fn attacker(dir: &Path) -> Connection {
    let db = Connection::open(dir.join(DATABASE_FILE)).unwrap();
    db.execute_batch(
        "DROP TRIGGER IF EXISTS events_no_update; DROP TRIGGER IF EXISTS events_no_delete;",
    )
    .unwrap();
    db
}

fn broken(err: StoreError) -> String {
    match err {
        StoreError::LedgerBroken(why) => why,
        other => panic!("expected LedgerBroken, got {other}"),
    }
}

fn count(dir: &Path) -> i64 {
    Connection::open(dir.join(DATABASE_FILE))
        .unwrap()
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap()
}

/// What `gatewayctl verify` reads, checked by the same verifier: the first problem.
fn first_problem(dir: &Path) -> Option<String> {
    let db = Connection::open(dir.join(DATABASE_FILE)).unwrap();
    let key = std::fs::read_to_string(dir.join("auth/server-key")).unwrap();
    let mut v = Verifier::new(common::ledger_chain::Head::read(dir), Some(key.trim()));
    common::ledger_chain::db::check(&db, &mut v).unwrap();
    v.finish().problems.first().map(chain::describe)
}

/// B1: every hash stripped and a row edited. Stopped: the next open refuses, naming the first
/// row; running: the next write refuses, and every one after it.
#[test]
fn stripped_hashes_are_refused_stopped_and_running() {
    let (dir, store) = open_with(3);
    drop(store);
    let db = attacker(dir.path());
    db.execute_batch(
        "UPDATE events SET hash = NULL; UPDATE events SET data = '{\"i\":9}' WHERE seq = 2;",
    )
    .unwrap();
    let why = broken(Store::open(dir.path()).err().unwrap());
    assert_eq!(
        why,
        "events 1: no hash, but the signed chain begins at seq 1 (hash removed)"
    );
    assert_eq!(first_problem(dir.path()).unwrap(), why);
    // Nothing was appended or re-anchored.
    assert_eq!(count(dir.path()), 3);

    let (dir, store) = open_with(3);
    attacker(dir.path())
        .execute("UPDATE events SET hash = NULL", [])
        .unwrap();
    let why = broken(append(&store, 4).unwrap_err());
    assert!(
        why.contains("newest ledger row is seq 3 without a hash"),
        "{why}"
    );
    // Latched: even once the attacker's change is out of the way, nothing more is written.
    let why = broken(append(&store, 5).unwrap_err());
    assert!(why.contains("seq 3"), "{why}");
    drop(store);
    assert_eq!(count(dir.path()), 3);
    assert!(
        first_problem(dir.path())
            .unwrap()
            .starts_with("events 1: no hash")
    );
}

/// B2: the newest rows deleted and `sqlite_sequence` set back to match.
#[test]
fn deleted_newest_rows_are_refused_stopped_and_running() {
    let (dir, store) = open_with(4);
    let db = attacker(dir.path());
    db.execute_batch(
        "DELETE FROM events WHERE seq >= 3; UPDATE sqlite_sequence SET seq = 2 WHERE name = 'events';",
    )
    .unwrap();
    let why = broken(append(&store, 5).unwrap_err());
    assert!(
        why.contains("the newest ledger row is seq 2, but this gateway last appended seq 4"),
        "{why}"
    );
    drop(store);
    // The head the stopping gateway left names seq 4: verify and the next open name it.
    let expected = "ledger_head 4: the row the head names is gone (newest rows dropped)";
    assert_eq!(first_problem(dir.path()).unwrap(), expected);
    assert_eq!(broken(Store::open(dir.path()).err().unwrap()), expected);

    let (dir, store) = open_with(4);
    drop(store);
    attacker(dir.path())
        .execute_batch(
            "DELETE FROM events WHERE seq = 4; UPDATE sqlite_sequence SET seq = 3 WHERE name = 'events';",
        )
        .unwrap();
    assert_eq!(
        broken(Store::open(dir.path()).err().unwrap()),
        "ledger_head 4: the row the head names is gone (newest rows dropped)"
    );
}

/// A seq handed out and its row gone (AUTOINCREMENT's counter ahead of the newest row), a gap
/// in the middle, and a row appended by someone without the server key.
#[test]
fn gaps_and_rows_appended_by_someone_else_are_refused() {
    let (dir, store) = open_with(2);
    attacker(dir.path())
        .execute(
            "UPDATE sqlite_sequence SET seq = 9 WHERE name = 'events'",
            [],
        )
        .unwrap();
    let why = broken(append(&store, 3).unwrap_err());
    assert!(why.contains("sequence is at 9"), "{why}");
    drop(store);
    assert_eq!(
        broken(Store::open(dir.path()).err().unwrap()),
        "events 9: seq 9 was handed out but the newest row is 2 (newest rows deleted)"
    );

    // A row chained by the public rule but not signed, appended while the gateway is stopped
    // and while it runs.
    for running in [false, true] {
        let (dir, store) = open_with(2);
        let store = if running {
            Some(store)
        } else {
            drop(store);
            None
        };
        let db = attacker(dir.path());
        let prev: String = db
            .query_row("SELECT hash FROM events WHERE seq = 2", [], |r| r.get(0))
            .unwrap();
        let data = r#"{"action_id":"act_forged","status":"ok"}"#;
        let hash =
            common::ledger_chain::link_hash(&prev, 3, Some("ns_a"), 7, "action_committed", data);
        db.execute(
            "INSERT INTO events (seq, session_id, at_ms, kind, data, hash) VALUES (3, 'ns_a', 7, 'action_committed', ?1, ?2)",
            params![data, hash],
        )
        .unwrap();
        if let Some(store) = &store {
            let why = broken(append(store, 3).unwrap_err());
            assert!(why.contains("newest ledger row is seq 3"), "{why}");
        }
        drop(store);
        let expected = "events 3: newer than the signed head (seq 2) and not signed with the \
                        server key (appended by someone else)";
        assert_eq!(first_problem(dir.path()).unwrap(), expected);
        assert_eq!(broken(Store::open(dir.path()).err().unwrap()), expected);
    }
}

/// A crash after a commit and before its head write (the head file as it was before it): the
/// newer rows carry their signatures, so the next open accepts them, anchors them, and the
/// ledger verifies.
#[test]
fn a_crash_between_commit_and_head_write_is_not_tampering() {
    let (dir, store) = open_with(2);
    store.flush_head();
    let head = dir.path().join(common::ledger_chain::HEAD_FILE);
    let before = std::fs::read(&head).unwrap();
    for i in 2..5 {
        append(&store, i).unwrap();
    }
    drop(store);
    std::fs::write(&head, before).unwrap();
    assert_eq!(first_problem(dir.path()), None);
    let store = Store::open(dir.path()).unwrap();
    append(&store, 5).unwrap();
    drop(store);
    let text = std::fs::read_to_string(&head).unwrap();
    let head = common::ledger_chain::Head::parse(&text).unwrap();
    assert_eq!((head.start_seq, head.seq), (Some(1), 6));
    assert_eq!(first_problem(dir.path()), None);
    assert!(matches!(
        common::ledger_chain::Head::read(dir.path()),
        HeadFile::Present(_)
    ));
}

/// A state dir as the previous build left it (schema v4: chained rows without signatures, a
/// head without the chain start): it opens without a false alarm, records its baseline (seq 4),
/// gets a v3 head naming where its chain begins, and goes on.
#[test]
fn a_state_dir_from_the_previous_build_opens_and_goes_on() {
    let (dir, store) = open_with(3);
    drop(store);
    let db = attacker(dir.path());
    db.execute_batch(
        "DROP INDEX idempotency_by_scope; ALTER TABLE events DROP COLUMN mac;
         ALTER TABLE idempotency DROP COLUMN mac; PRAGMA user_version = 4;",
    )
    .unwrap();
    let hash: String = db
        .query_row("SELECT hash FROM events WHERE seq = 3", [], |r| r.get(0))
        .unwrap();
    drop(db);
    let key = std::fs::read_to_string(dir.path().join("auth/server-key")).unwrap();
    let old = common::ledger_chain::Head::sign(key.trim(), 3, &hash);
    let head = dir.path().join(common::ledger_chain::HEAD_FILE);
    std::fs::write(&head, old.to_text()).unwrap();
    let store = Store::open(dir.path()).unwrap();
    append(&store, 3).unwrap();
    drop(store);
    let head = common::ledger_chain::Head::parse(&std::fs::read_to_string(&head).unwrap());
    let head = head.unwrap();
    assert_eq!(
        (head.start_seq, head.seq, head.pre_count),
        (Some(1), 5, Some(0))
    );
    assert_eq!(first_problem(dir.path()), None);
}

/// The refusal of the next open after `tamper` ran on a stopped gateway's database (the
/// append-only triggers dropped, foreign keys off as in any new connection).
fn open_after(dir: &Path, tamper: &str) -> String {
    attacker(dir).execute_batch(tamper).unwrap();
    broken(Store::open(dir).err().unwrap())
}

/// rt27 B1: an unhashed row at seq 0 is not "from before the chain" (and switches nothing
/// off); the refusal is latched outside the database.
#[test]
fn a_row_below_the_chain_is_refused_and_latched() {
    let (dir, store) = open_with(2);
    drop(store);
    let why = open_after(
        dir.path(),
        "INSERT INTO events (seq, session_id, at_ms, kind, data) VALUES (0, NULL, 1, 'migrated', '{}')",
    );
    let expected = "events 0: no hash and a seq below 1 (inserted, not from before the chain)";
    assert_eq!(why, expected);
    // The attacker removes the row again: the latch keeps the gateway closed.
    let why = open_after(dir.path(), "DELETE FROM events WHERE seq = 0");
    assert_eq!(
        why,
        format!("found broken before (ledger-broken): {expected}")
    );
}

/// rt27 B2: the head deleted and every hash and signature removed: refused, never re-anchored.
#[test]
fn a_deleted_head_with_stripped_hashes_is_refused() {
    let (dir, store) = open_with(2);
    drop(store);
    std::fs::remove_file(dir.path().join(common::ledger_chain::HEAD_FILE)).unwrap();
    let why = open_after(dir.path(), "UPDATE events SET hash = NULL, mac = NULL");
    assert_eq!(
        why,
        "ledger_head -: the signed head is missing but the ledger has rows (head deleted, \
         hashes removed)"
    );
    assert!(!dir.path().join(common::ledger_chain::HEAD_FILE).exists());
    assert_eq!(first_problem(dir.path()).unwrap(), why);
}

/// rt27 B4: a `prepared` write no chained event approved is refused at open, before the
/// gateway could settle it and sign a receipt for it.
#[test]
fn an_action_without_a_chained_approval_is_refused_at_open() {
    let (dir, store) = open_with(2);
    drop(store);
    let why = open_after(
        dir.path(),
        "PRAGMA foreign_keys = OFF; INSERT INTO actions (action_id, session_id, turn_id, call_index, name, arguments, \
         state, outcome, updated_at_ms, prepared) VALUES ('act_forged', 'ns_a', 'turn_x', 0, \
         'Write', '{\"file_path\":\"/p/f\",\"content\":\"x\"}', 'prepared', NULL, 1, \
         '{\"path\":\"/p/f\"}')",
    );
    assert_eq!(
        why,
        "actions act_forged: no chained record of this row (inserted outside the gateway)"
    );
}

/// rt27 B5: a session row's working directory widened to the parent of the source directory
/// is refused at open, so no runner starts there.
#[test]
fn a_widened_working_directory_is_refused_at_open() {
    let (dir, store) = open_with(0);
    let session = json!({
        "profile": "direct_write", "source_directory": "/p/sub", "working_directory": "/p/sub",
        "workspace": {"kind": "direct", "root": "/p/sub"}, "skill_snapshot": []
    });
    store
        .write(|tx| {
            tx.0.execute(
                "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data) \
                 VALUES ('ns_a', 'stopped', 1, 1, 1, ?1)",
                [session.to_string()],
            )?;
            let started = json!({"profile": "direct_write", "working_directory": "/p/sub"});
            tx.append_event(Some("ns_a"), "session_started", &started)?;
            // What `put_session` records of the row.
            let row = common::ledger_chain::db::covered_row(tx.0, Table::Sessions, "ns_a", "ns_a")?;
            let record = row.and_then(|row| RowRecord::changed(None, &row));
            let data = RowRecord::event_data(&Vec::from_iter(record));
            tx.append_event(Some("ns_a"), common::ledger_chain::ROWS_RECORDED, &data)
        })
        .unwrap();
    drop(store);
    assert_eq!(first_problem(dir.path()), None);
    Store::open(dir.path()).unwrap();
    let why = open_after(
        dir.path(),
        "UPDATE sessions SET data = json_remove(json_set(data, '$.working_directory', '/p', \
         '$.workspace.root', '/p'), '$.workspace_identity')",
    );
    assert_eq!(
        why,
        "sessions ns_a: column `working_directory` differs from its chained record (seq 2): edited"
    );
}
