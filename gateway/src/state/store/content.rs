//! Retention's side of the store: what an ended session's content weighs, removing it (turns,
//! replies, actions) with its rows' digests for the ledger's `content_pruned` event, deleting
//! its idempotency keys and superseded leases, and giving the freed pages back to the file system.
//!
//! Bulk and summary, per table: `turns`, `replies` and `actions` rows of a pruned session are bulk
//! (prompt and tool-result bodies, reply texts and calls, tool arguments, outcomes and write
//! intents) and are deleted whole; an `idempotency` row is deleted (a resend then answers the ended
//! session's final state as a new request would), except its start's, which keeps key, request hash
//! and session (a resent start must not start another session) with the answer `{"pruned": true}`,
//! and the one last request kept per operation of an ended session (`ended:` scopes); the
//! `sessions` row is the summary and stays (its texts that only the removed content explained are
//! dropped by `SessionRecord::prune_content`); `events` are append-only and stay (they carry hashes
//! and sizes, not bodies); of `leases` only the current generation's stays.

use common::ledger_chain::{CoveredRow, RowRecord};

use super::{StoreError, Tx};
use crate::state::IdempotentAnswer;

/// What removing a session's content took away.
#[derive(Debug, Default)]
pub struct RemovedContent {
    /// Each removed row's key and covered columns' digests as they were.
    pub rows: Vec<RowRecord>,
    /// Bytes of the removed rows' and answers' text.
    pub bytes: u64,
    /// Idempotency keys deleted, or (a start's) compacted.
    pub answers: u64,
    /// Superseded lease rows deleted.
    pub leases: u64,
}

impl Tx<'_> {
    /// Bytes of text an ended session's content holds (what a prune of it removes; the
    /// database file shrinks by about as much once its pages are reclaimed).
    pub fn session_content_bytes(&self, session_id: &str) -> Result<u64, StoreError> {
        let bytes: i64 = self.row(
            "SELECT
               (SELECT COALESCE(SUM(LENGTH(CAST(data AS BLOB))), 0)
                  FROM turns WHERE session_id = ?1)
             + (SELECT COALESCE(SUM(LENGTH(CAST(data AS BLOB))), 0)
                  FROM replies WHERE session_id = ?1)
             + (SELECT COALESCE(SUM(LENGTH(CAST(arguments AS BLOB))
                    + COALESCE(LENGTH(CAST(outcome AS BLOB)), 0)
                    + COALESCE(LENGTH(CAST(prepared AS BLOB)), 0)), 0)
                  FROM actions WHERE session_id = ?1)
             + (SELECT COALESCE(SUM(LENGTH(CAST(answer AS BLOB))), 0)
                  FROM idempotency WHERE session_id = ?1)",
            [session_id],
            |row| row.get(0),
        )?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    /// When the session's row was last written (ms since the epoch).
    pub fn session_updated_at_ms(&self, session_id: &str) -> Result<Option<i64>, StoreError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .row(
                "SELECT updated_at_ms FROM sessions WHERE id = ?1",
                [session_id],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Remove an ended session's content: its actions, replies and turns (in the order their
    /// foreign keys allow), its idempotency keys (its start's compacted and signed again, the
    /// last request of each operation kept) and its lease rows older than `lease_generation`
    /// (red team 31/32 N1: prune freed answers but kept keys and leases, ~2 KiB of pages each).
    /// The caller records the returned rows in the session's `content_pruned` event in this
    /// transaction.
    pub fn remove_session_content(
        &self,
        session_id: &str,
        lease_generation: u32,
    ) -> Result<RemovedContent, StoreError> {
        let mut removed = RemovedContent {
            bytes: self.session_content_bytes(session_id)?,
            ..RemovedContent::default()
        };
        common::ledger_chain::db::session_content_rows(self.0, session_id, |row: &CoveredRow| {
            removed
                .rows
                .extend(RowRecord::changed(None, row).map(|mut record| {
                    // Named once, by the event's session.
                    record.session.clear();
                    record
                }));
        })?;
        for table in ["actions", "replies", "turns"] {
            self.run(
                &format!("DELETE FROM {table} WHERE session_id = ?1"),
                [session_id],
            )?;
        }
        removed.answers =
            self.delete_ended_keys(session_id)? + self.compact_idempotency(session_id)?;
        removed.leases = self.delete_superseded_leases(session_id, lease_generation)?;
        Ok(removed)
    }

    /// Replace the recorded answers of the session's idempotency keys with `pruned` ones
    /// (signed like any answer): how many.
    fn compact_idempotency(&self, session_id: &str) -> Result<u64, StoreError> {
        let keys: Vec<(String, String)> = {
            let mut stmt = self
                .0
                .prepare_cached("SELECT scope, key FROM idempotency WHERE session_id = ?1")?;
            let rows = stmt.query_map([session_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut compacted = 0;
        for (scope, key) in keys {
            let Some(row) = self.idempotency(&scope, &key)? else {
                continue;
            };
            let lease_generation = match row.answer {
                IdempotentAnswer::Pruned { .. } | IdempotentAnswer::Dropped { .. } => continue,
                IdempotentAnswer::InProgress { lease_generation }
                | IdempotentAnswer::Done {
                    lease_generation, ..
                } => lease_generation,
            };
            if !row.signed {
                // Not the gateway's (planted or edited): left as it is, never signed by a prune.
                continue;
            }
            self.replace_idempotency_answer(
                &scope,
                &key,
                &IdempotentAnswer::Pruned { lease_generation },
            )?;
            compacted += 1;
        }
        Ok(compacted)
    }
}

/// Bytes of the database file and its WAL.
pub fn database_file_bytes(state_dir: &std::path::Path) -> u64 {
    let file = state_dir.join(super::DATABASE_FILE);
    let wal = state_dir.join(format!("{}-wal", super::DATABASE_FILE));
    [file, wal]
        .iter()
        .map(|p| std::fs::symlink_metadata(p).map_or(0, |m| m.len()))
        .sum()
}

/// How the database's free pages were given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimed {
    /// `PRAGMA incremental_vacuum` (the database is in incremental auto-vacuum mode).
    Incremental,
    /// A full `VACUUM`, which also switched the database to incremental auto-vacuum (once, for
    /// databases created before it).
    Vacuum,
}

impl super::Store {
    /// Give the database's free pages back to the file system and empty the WAL: incremental
    /// vacuum, or (once, for a database created before incremental auto-vacuum) a full `VACUUM`
    /// that switches it; then `wal_checkpoint(TRUNCATE)`. Holds the store for its duration
    /// (a full `VACUUM` rewrites the file: about a second per 100 MB).
    pub fn reclaim_space(&self) -> Result<Reclaimed, StoreError> {
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let inner = &mut *guard;
        super::refuse_if_latched(&inner.broken)?;
        // A full VACUUM may renumber rows, after which the seals are taken again: anything
        // another writer changed must be found before that, not sealed as the gateway's.
        self.check_sealed(&mut inner.broken, &mut inner.seals, &inner.conn)?;
        let conn = &inner.conn;
        let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |row| row.get(0))?;
        let how = if mode == 2 {
            // Returns a row per page freed: drain it.
            let mut stmt = conn.prepare("PRAGMA incremental_vacuum")?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            Reclaimed::Incremental
        } else {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
            conn.execute_batch("VACUUM")?;
            inner.seals = super::Seals::start(conn)?;
            Reclaimed::Vacuum
        };
        // A reader (gatewayctl) may keep the WAL from being truncated: then it shrinks at the
        // next checkpoint; not an error.
        let (busy, _, _): (i64, i64, i64) =
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
        if busy != 0 {
            tracing::info!("prune: a reader kept the WAL from being truncated");
        }
        Ok(how)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;

    fn auto_vacuum(store: &Store) -> i64 {
        let guard = store.inner.lock().unwrap();
        guard
            .conn
            .query_row("PRAGMA auto_vacuum", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_new_database_vacuums_incrementally_and_an_older_one_is_switched_once() {
        let fresh = tempfile::tempdir().unwrap();
        let store = Store::open(fresh.path()).unwrap();
        assert_eq!(auto_vacuum(&store), 2, "a new database is incremental");
        assert_eq!(store.reclaim_space().unwrap(), Reclaimed::Incremental);

        let older = tempfile::tempdir().unwrap();
        crate::state::database_before_the_chain(older.path(), "");
        let store = Store::open(older.path()).unwrap();
        assert_eq!(
            auto_vacuum(&store),
            0,
            "created before incremental auto-vacuum"
        );
        // Rows with gaps between them, which a full VACUUM may renumber.
        store
            .write::<_, StoreError>(|tx| {
                for i in 0..6 {
                    let answer = IdempotentAnswer::InProgress {
                        lease_generation: i,
                    };
                    tx.put_idempotency("start", &format!("k{i}"), "h", None, &answer)?;
                }
                tx.0.execute("DELETE FROM idempotency WHERE key IN ('k1', 'k3')", [])?;
                Ok(())
            })
            .unwrap();
        assert_eq!(store.reclaim_space().unwrap(), Reclaimed::Vacuum);
        assert_eq!(auto_vacuum(&store), 2);
        assert_eq!(store.reclaim_space().unwrap(), Reclaimed::Incremental);
        // Sealed again after the rewrite: another connection's commit elsewhere raises no alarm;
        // its edit of a sealed row is still refused.
        let other =
            rusqlite::Connection::open(older.path().join(super::super::DATABASE_FILE)).unwrap();
        let insert = "INSERT INTO oauth_clients (client_id, redirect_uris, created_at_ms) VALUES ('c', '[]', 0)";
        other.execute(insert, []).unwrap();
        let read = |store: &Store| store.read::<_, StoreError>(|tx| tx.idempotency("start", "k5"));
        assert!(read(&store).unwrap().is_some_and(|row| row.signed));
        store.flush_head();
        drop(store);
        // The rewritten file still passes the open's ledger check.
        let store = Store::open(older.path()).unwrap();
        other
            .execute(
                "UPDATE idempotency SET request_hash = 'x' WHERE key = 'k4'",
                [],
            )
            .unwrap();
        assert!(matches!(read(&store), Err(StoreError::LedgerBroken(_))));
    }
}
