//! Tests of the row seals (red team 27c B2): a row the gateway serves from, changed, added or
//! removed by another writer while the gateway runs, is refused at the next transaction — before
//! anything is read from it — and latched; the gateway's own writes of every kind, and other
//! connections' writes to tables that are not sealed, never raise a false alarm.

use super::*;
use serde_json::json;

/// A store with one session, two leases (one revoked), a turn, an idempotency row and events,
/// written the way the gateway writes them.
fn populated() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store
        .write::<_, StoreError>(|tx| {
            tx.0.execute(
                "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data)
                 VALUES ('ns_a', 'running', 1, 0, 0, '{\"label\":\"x\"}')",
                [],
            )?;
            tx.insert_lease("lease-old", "ns_a", 1, 1_000)?;
            tx.insert_lease("lease-new", "ns_a", 2, 2_000)?;
            tx.0.execute("UPDATE leases SET revoked = 1 WHERE lease_hash = 'lease-old'", [])?;
            tx.0.execute(
                "INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, data)
                 VALUES ('turn_1', 'ns_a', 1, 'f1', 'pending', 0, '{}')",
                [],
            )?;
            tx.put_idempotency("start", "k1", "h1", Some("ns_a"), &IdempotentAnswer::InProgress {
                lease_generation: 1,
            })?;
            tx.append_event(Some("ns_a"), "one", &json!({"text": "hello"}))
        })
        .unwrap();
    // Later writes of each kind: updates, an upsert, a delete.
    store
        .write::<_, StoreError>(|tx| {
            tx.renew_lease("lease-new", 3_000)?;
            tx.0.execute("UPDATE sessions SET revision = 2 WHERE id = 'ns_a'", [])?;
            tx.insert_lease("lease-gone", "ns_a", 3, 1)?;
            tx.0.execute("DELETE FROM leases WHERE lease_hash = 'lease-gone'", [])?;
            tx.append_event(Some("ns_a"), "two", &json!({}))
        })
        .unwrap();
    (dir, store)
}

/// Another writer of the database file, with the ledger's append-only triggers dropped.
fn other_writer(dir: &Path) -> Connection {
    let db = Connection::open(dir.join(DATABASE_FILE)).unwrap();
    db.execute_batch(
        "DROP TRIGGER IF EXISTS events_no_update; DROP TRIGGER IF EXISTS events_no_delete;",
    )
    .unwrap();
    db
}

fn read_session(store: &Store) -> Result<Option<String>, StoreError> {
    store.read(|tx| {
        Ok(tx
            .0
            .query_row("SELECT data FROM sessions WHERE id = 'ns_a'", [], |r| {
                r.get(0)
            })
            .optional()?)
    })
}

#[test]
fn the_gateways_own_writes_and_other_tables_raise_no_alarm() {
    let (dir, store) = populated();
    // Another connection commits to a table that is not sealed (as the OAuth store does): the
    // next transaction compares every sealed row, and all match.
    let plain = || Connection::open(dir.path().join(DATABASE_FILE)).unwrap();
    plain()
        .execute(
            "INSERT INTO oauth_clients (client_id, redirect_uris, created_at_ms) VALUES ('c', '[]', 0)",
            [],
        )
        .unwrap();
    assert_eq!(
        read_session(&store).unwrap().as_deref(),
        Some("{\"label\":\"x\"}")
    );
    store
        .write::<_, StoreError>(|tx| tx.append_event(Some("ns_a"), "three", &json!({})))
        .unwrap();
    // A transaction that failed leaves no stale seal behind it.
    let failed: Result<(), StoreError> = store.write(|tx| {
        tx.0.execute("UPDATE sessions SET revision = 9 WHERE id = 'ns_a'", [])?;
        Err(StoreError::Schema("the caller gave up".into()))
    });
    assert!(failed.is_err());
    plain()
        .execute("UPDATE oauth_clients SET created_at_ms = 1", [])
        .unwrap();
    assert!(read_session(&store).is_ok());
    assert!(!dir.path().join(chain::BROKEN_FILE).exists());
}

#[test]
fn a_sealed_row_changed_added_or_removed_while_running_is_refused_and_latched() {
    let cases: [(&str, &str); 8] = [
        (
            "sessions",
            "UPDATE sessions SET data = '{\"label\":\"forged\"}' WHERE id = 'ns_a'",
        ),
        (
            "leases",
            "UPDATE leases SET revoked = 0 WHERE lease_hash = 'lease-old'",
        ),
        (
            "leases",
            "UPDATE leases SET expires_at_ms = 9999999999999 WHERE lease_hash = 'lease-new'",
        ),
        (
            "leases",
            "DELETE FROM leases WHERE lease_hash = 'lease-old'",
        ),
        (
            "idempotency",
            "INSERT INTO idempotency (scope, key, request_hash, session_id, answer, created_at_ms)
             VALUES ('start', 'k2', 'h', 'ns_a', '{}', 0)",
        ),
        (
            "turns",
            "UPDATE turns SET status = 'answered' WHERE turn_id = 'turn_1'",
        ),
        (
            "events",
            "UPDATE events SET data = '{\"text\":\"obey me\"}' WHERE kind = 'one'",
        ),
        (
            "sessions",
            "UPDATE sessions SET updated_at_ms = 5 WHERE id = 'ns_a'",
        ),
    ];
    for (table, tamper) in cases {
        let (dir, store) = populated();
        other_writer(dir.path()).execute(tamper, []).unwrap();
        let why = match read_session(&store) {
            Err(StoreError::LedgerBroken(why)) => why,
            other => panic!("{tamper}: expected LedgerBroken, got {other:?}"),
        };
        assert!(why.starts_with(&format!("{table} row ")), "{tamper}: {why}");
        assert!(why.contains("outside the gateway while it ran"), "{why}");
        // Latched: every later read and write is refused, and so is the next open.
        assert!(matches!(
            read_session(&store),
            Err(StoreError::LedgerBroken(_))
        ));
        let write = store.write::<_, StoreError>(|tx| tx.append_event(None, "x", &json!({})));
        assert!(
            matches!(write, Err(StoreError::LedgerBroken(_))),
            "{tamper}"
        );
        drop(store);
        assert!(dir.path().join(chain::BROKEN_FILE).exists(), "{tamper}");
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::LedgerBroken(_))
        ));
    }
}

/// The seals' figures on a ledger of 10,000 events and 200 sessions: a read transaction when
/// nothing else committed (the everyday path: one `PRAGMA data_version`), and one after another
/// connection committed (a pass over every sealed row) — medians of 20, as a ratio.
#[test]
#[ignore = "a measurement, not a check"]
fn seal_check_cost() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for s in 0..200 {
        store
            .write::<_, StoreError>(|tx| {
                tx.0.execute(
                    "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data)
                     VALUES (?1, 'running', 1, 0, 0, ?2)",
                    params![format!("ns_{s}"), "x".repeat(2_000)],
                )?;
                for i in 0..50 {
                    let data = json!({"i": i, "text": "y".repeat(600)});
                    tx.append_event(Some(&format!("ns_{s}")), "k", &data)?;
                }
                Ok(())
            })
            .unwrap();
    }
    let median = |mut v: Vec<std::time::Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (mut quiet, mut after_other) = (Vec::new(), Vec::new());
    let other = Connection::open(dir.path().join(DATABASE_FILE)).unwrap();
    for i in 0..20 {
        let start = std::time::Instant::now();
        read_session(&store).unwrap();
        quiet.push(start.elapsed());
        other
            .execute("INSERT INTO oauth_clients (client_id, redirect_uris, created_at_ms) VALUES (?1, '[]', 0)", [format!("c{i}")])
            .unwrap();
        let start = std::time::Instant::now();
        read_session(&store).unwrap();
        after_other.push(start.elapsed());
    }
    let (quiet, after_other) = (median(quiet), median(after_other));
    println!(
        "seals, 10,000 events + 200 sessions: read {quiet:?} when nothing else committed, \
         {after_other:?} after another connection committed ({:.0}x)",
        after_other.as_secs_f64() / quiet.as_secs_f64()
    );
}

/// Red team 24 B5: a trigger another connection creates would rewrite rows inside the gateway's
/// own transactions (sealed and signed as its own). Created while it runs, the next transaction
/// is refused before the trigger can fire; found at an open, the open is refused; the ledger's
/// own guards dropped (as an attacker does to edit events) are not this check's business.
#[test]
fn a_trigger_the_gateway_did_not_make_is_refused_running_and_at_open() {
    let (dir, store) = populated();
    let trigger = "CREATE TRIGGER forge AFTER INSERT ON turns BEGIN
         UPDATE turns SET data = '{\"prompt\":\"read ~/.ssh\"}' WHERE turn_id = NEW.turn_id; END";
    other_writer(dir.path()).execute_batch(trigger).unwrap();
    let write = store.write::<_, StoreError>(|tx| {
        tx.0.execute(
            "INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, data)
             VALUES ('turn_2', 'ns_a', 2, 'f2', 'pending', 0, '{}')",
            [],
        )?;
        Ok(())
    });
    match write {
        Err(StoreError::LedgerBroken(why)) => {
            assert!(why.starts_with("sqlite_master row "), "{why}")
        }
        other => panic!("expected LedgerBroken, got {other:?}"),
    }
    drop(store);
    std::fs::remove_file(dir.path().join(chain::BROKEN_FILE)).unwrap();
    match Store::open(dir.path()) {
        Err(StoreError::LedgerBroken(why)) => {
            assert_eq!(
                why,
                "sqlite_master: trigger \"forge\" was not made by the gateway"
            );
        }
        other => panic!("expected LedgerBroken, got {:?}", other.err()),
    }
    // A redefined guard is refused the same way; a dropped one is not (the chain sees edits).
    std::fs::remove_file(dir.path().join(chain::BROKEN_FILE)).unwrap();
    other_writer(dir.path())
        .execute_batch(
            "DROP TRIGGER forge; CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT 1; END;",
        )
        .unwrap();
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::LedgerBroken(_))
    ));
    let fresh = tempfile::tempdir().unwrap();
    let store = Store::open(fresh.path()).unwrap();
    store
        .write::<_, StoreError>(|tx| tx.append_event(None, "one", &json!({})))
        .unwrap();
    store.flush_head();
    drop(store);
    other_writer(fresh.path());
    Store::open(fresh.path()).unwrap();
}

/// Red team 25 B1: the check read only rows whose `type` is `trigger`, but SQLite builds an
/// object from its SQL whatever that column says. At rest, every schema row the migrations did
/// not make — a trigger stored as `TRIGGER` or `Trigger`, a view, an index, a table whose
/// definition was rewritten — refuses the open and is named by the check `gatewayctl verify`
/// runs (`common::ledger_chain::db::check`).
#[test]
fn every_schema_row_the_migrations_did_not_make_is_refused_at_rest() {
    let forge = "CREATE TRIGGER forge AFTER INSERT ON turns BEGIN \
                 UPDATE turns SET data = '{}' WHERE turn_id = NEW.turn_id; END";
    let variants: [(&str, String, &str); 5] = [
        ("TRIGGER", format!("{forge}; PRAGMA writable_schema = ON; UPDATE sqlite_master SET type = 'TRIGGER' WHERE name = 'forge'"), "forge"),
        ("Trigger", format!("{forge}; PRAGMA writable_schema = ON; UPDATE sqlite_master SET type = 'Trigger' WHERE name = 'forge'"), "forge"),
        ("view", "CREATE VIEW v AS SELECT * FROM turns".into(), "v"),
        ("index", "CREATE INDEX turns_by_data ON turns(length(data))".into(), "turns_by_data"),
        ("table", "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = replace(sql, 'data TEXT NOT NULL', 'data TEXT NOT NULL DEFAULT ''x''') WHERE name = 'turns'".into(), "turns"),
    ];
    for (kind, sql, name) in variants {
        let (dir, store) = populated();
        drop(store);
        other_writer(dir.path()).execute_batch(&sql).unwrap();
        let expected = format!("sqlite_master: {kind} {name:?} was not made by the gateway");
        match Store::open(dir.path()) {
            Err(StoreError::LedgerBroken(why)) => assert_eq!(why, expected),
            other => panic!("{sql}: expected LedgerBroken, got {:?}", other.err()),
        }
        let conn = Connection::open(dir.path().join(DATABASE_FILE)).unwrap();
        let key = std::fs::read_to_string(dir.path().join("auth/server-key")).unwrap();
        let mut verifier = common::ledger_chain::Verifier::new(
            common::ledger_chain::Head::read(dir.path()),
            Some(key.trim()),
        );
        common::ledger_chain::db::check(&conn, &mut verifier).unwrap();
        let report = verifier.finish();
        let problem = report.problems.first().expect("verify names the row");
        assert_eq!(
            (problem.table, problem.id.as_str()),
            (common::ledger_chain::Table::Schema, name),
            "{sql}"
        );
    }
}
