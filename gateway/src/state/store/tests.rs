//! Tests of the store: file modes, migrations, the append-only ledger and its chain and head.

use super::*;
use serde_json::json;

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, store)
}

#[test]
fn database_file_is_private_and_schema_current() {
    let (dir, store) = open();
    let mode = std::fs::metadata(dir.path().join(DATABASE_FILE))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let version: i64 = store
        .read::<_, StoreError>(|tx| Ok(tx.0.query_row("PRAGMA user_version", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION);
    drop(store);
    // Reopening an up-to-date database is a no-op migration.
    Store::open(dir.path()).unwrap();
}

#[test]
fn newer_schema_is_refused() {
    let (dir, store) = open();
    store
        .write::<_, StoreError>(|tx| Ok(tx.0.pragma_update(None, "user_version", 99)?))
        .unwrap();
    drop(store);
    let err = Store::open(dir.path()).err().unwrap().to_string();
    assert!(err.contains("newer than this build"), "{err}");
}

#[test]
fn ledger_is_append_only() {
    let (_dir, store) = open();
    store
        .write::<_, StoreError>(|tx| tx.append_event(None, "test", &json!({"a": 1})))
        .unwrap();
    let err = store
        .write::<_, StoreError>(|tx| Ok(tx.0.execute("DELETE FROM events", [])?))
        .unwrap_err()
        .to_string();
    assert!(err.contains("append-only"), "{err}");
    let err = store
        .write::<_, StoreError>(|tx| Ok(tx.0.execute("UPDATE events SET kind = 'x'", [])?))
        .unwrap_err()
        .to_string();
    assert!(err.contains("append-only"), "{err}");
}

#[test]
fn events_are_chained_and_the_head_is_signed_after_commit() {
    use common::ledger_chain::{Head, HeadFile, Verifier};
    let (dir, store) = open();
    for i in 0..3 {
        store
            .write::<_, StoreError>(|tx| {
                tx.append_event(Some("ns_a"), "one", &json!({"i": i}))?;
                tx.append_event(None, "two", &json!({"i": i}))
            })
            .unwrap();
    }
    let rows = event_rows(&store);
    assert_eq!(rows.len(), 6);
    let text = std::fs::read_to_string(dir.path().join("ledger-head")).unwrap();
    let head = Head::parse(&text).unwrap();
    assert_eq!(head.seq, 6);
    let mode = std::fs::metadata(dir.path().join("ledger-head"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let key = std::fs::read_to_string(dir.path().join("auth/server-key")).unwrap();
    let mut verifier = Verifier::new();
    rows.iter().for_each(|row| verifier.event(row));
    let report = verifier.finish(&HeadFile::Present(head), Some(key.trim()));
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.chained_events, 6);
}

/// A version-3 database with events migrates to 4: its rows stay unchained, the chain starts with
/// the first event written after the migration, and the whole ledger verifies.
#[test]
fn a_database_from_before_the_chain_migrates_and_chains_new_rows() {
    use common::ledger_chain::{Head, HeadFile, Verifier};
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Connection::open(dir.path().join(DATABASE_FILE)).unwrap();
        for sql in [
            common::state_schema::V1,
            common::state_schema::V2,
            common::state_schema::V3,
        ] {
            db.execute_batch(sql).unwrap();
        }
        db.pragma_update(None, "user_version", 3).unwrap();
        db.execute(
            "INSERT INTO events (session_id, at_ms, kind, data) VALUES ('ns_a', 1, 'old', '{}')",
            [],
        )
        .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    store
        .write::<_, StoreError>(|tx| tx.append_event(Some("ns_a"), "new", &json!({})))
        .unwrap();
    let rows = event_rows(&store);
    assert_eq!((rows[0].hash.is_none(), rows[1].seq), (true, 2));
    let head = Head::parse(&std::fs::read_to_string(dir.path().join("ledger-head")).unwrap());
    let key = std::fs::read_to_string(dir.path().join("auth/server-key")).unwrap();
    let mut verifier = Verifier::new();
    rows.iter().for_each(|row| verifier.event(row));
    let report = verifier.finish(&HeadFile::Present(head.unwrap()), Some(key.trim()));
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!((report.unchained_events, report.chained_events), (1, 1));
}

#[test]
fn failed_transaction_leaves_nothing() {
    let (_dir, store) = open();
    let res = store.write::<(), StoreError>(|tx| {
        tx.append_event(None, "half", &json!({}))?;
        Err(StoreError::Schema("boom".into()))
    });
    assert!(res.is_err());
    let n: i64 = store
        .read::<_, StoreError>(|tx| {
            Ok(tx
                .0
                .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))?)
        })
        .unwrap();
    assert_eq!(n, 0);
}

/// The cost of the chain per event: `cargo test -p gateway --lib -- --ignored chain_cost
/// --nocapture`. Prints the time of a one-event transaction (SQLite's full sync included) and of
/// the signed head's write alone.
#[test]
#[ignore = "a measurement, not a check"]
fn chain_cost() {
    let (_dir, store) = open();
    let n = 300u32;
    let start = std::time::Instant::now();
    for i in 0..n {
        store
            .write::<_, StoreError>(|tx| tx.append_event(Some("ns_a"), "k", &json!({"i": i})))
            .unwrap();
    }
    let per_tx = start.elapsed() / n;
    let start = std::time::Instant::now();
    for i in 0..n {
        store
            .write_head(i64::from(i), common::ledger_chain::GENESIS)
            .unwrap();
    }
    let per_head = start.elapsed() / n;
    let start = std::time::Instant::now();
    for i in 0..n {
        let _ = common::ledger_chain::link_hash(
            common::ledger_chain::GENESIS,
            i64::from(i),
            Some("ns_a"),
            1,
            "k",
            r#"{"i":1}"#,
        );
    }
    let per_hash = start.elapsed() / n;
    println!("one-event transaction {per_tx:?}, head write {per_head:?}, link hash {per_hash:?}");
}

/// Every ledger row, oldest first, as the chain verifier reads them.
fn event_rows(store: &Store) -> Vec<common::ledger_chain::EventRow> {
    store
        .read::<_, StoreError>(|tx| {
            let mut stmt = tx.0.prepare(
                "SELECT seq, session_id, at_ms, kind, data, hash FROM events ORDER BY seq",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(common::ledger_chain::EventRow {
                    seq: r.get(0)?,
                    session_id: r.get(1)?,
                    at_ms: r.get(2)?,
                    kind: r.get(3)?,
                    data: r.get(4)?,
                    hash: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .unwrap()
}
