//! How many recorded idempotent answers a session keeps (red team 29 B1): a recorded answer is
//! a whole SessionView (up to ~1.8 MiB with a long `last_result` and a pending turn's tool
//! results), and recover and stop record one for every new key even past the state budget. So
//! each session keeps the answers of its newest calls of each operation and older ones become a
//! signed `dropped` marker (the row stays: the key is still recognised, and its replay refused
//! with a message saying why); `gatewayctl prune` drops a live session's older answers too.

use rusqlite::params;

use super::{IdempotencyRow, StoreError, Tx};
use crate::state::IdempotentAnswer;

/// A recorded answer's JSON is longer than this; the markers (`in_progress`, `pruned`,
/// `dropped`) are shorter, so the queries below skip them without parsing.
const MARKER_MAX_BYTES: i64 = 128;

/// How many rows past a scope's kept answers [`Tx::drop_answers_beyond`] looks at.
const DROP_WINDOW: i64 = 16;

/// What dropping answers freed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DroppedAnswers {
    pub answers: u64,
    /// Bytes of the answers' JSON.
    pub bytes: u64,
}

impl Tx<'_> {
    /// Drop the recorded answers of `scope` (one operation of one session) older than its newest
    /// `keep`, in claim order. Only the [`DROP_WINDOW`] rows just past them are looked at: every
    /// recorded answer of the scope runs this, so at most one row falls out of the kept ones
    /// each time and the rows further back were dropped already. Looking at all of them had read
    /// every row of the scope, one per call: a session's turn cost grew with its length
    /// (issue 26; `gatewayctl prune` still drops a live session's older answers by age).
    pub fn drop_answers_beyond(
        &self,
        scope: &str,
        keep: usize,
    ) -> Result<DroppedAnswers, StoreError> {
        let keys: Vec<String> = {
            let mut stmt = self.0.prepare_cached(
                "SELECT key FROM idempotency
                 WHERE rowid IN (SELECT rowid FROM idempotency INDEXED BY idempotency_by_scope
                                 WHERE scope = ?1 ORDER BY rowid DESC LIMIT ?4 OFFSET ?2)
                 AND LENGTH(answer) > ?3",
            )?;
            let keep = i64::try_from(keep.max(1)).unwrap_or(i64::MAX);
            let rows = stmt
                .query_map(params![scope, keep, MARKER_MAX_BYTES, DROP_WINDOW], |row| {
                    row.get(0)
                })?;
            rows.collect::<Result<_, _>>()?
        };
        self.drop_answers(keys.iter().map(|key| (scope, key.as_str())))
    }

    /// For a prune of a live session: drop its answers claimed at or before `cutoff_ms`, except
    /// the newest of each operation (a client's retry of its last call still gets its answer).
    /// Its start's answer stays: one per session, and `start` is one scope for all sessions.
    pub fn drop_old_answers(
        &self,
        session_id: &str,
        cutoff_ms: i64,
    ) -> Result<DroppedAnswers, StoreError> {
        let keys: Vec<(String, String)> = {
            let mut stmt = self.0.prepare_cached(
                "SELECT i.scope, i.key FROM idempotency i
                 WHERE i.session_id = ?1 AND LENGTH(i.answer) > ?3 AND i.created_at_ms <= ?2
                 AND i.scope <> 'start'
                 AND i.rowid < (SELECT MAX(n.rowid) FROM idempotency n WHERE n.scope = i.scope)",
            )?;
            let rows = stmt.query_map(params![session_id, cutoff_ms, MARKER_MAX_BYTES], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        self.drop_answers(
            keys.iter()
                .map(|(scope, key)| (scope.as_str(), key.as_str())),
        )
    }

    /// Replace each recorded (signed, `Done`) answer of `keys` by a signed `dropped` marker.
    fn drop_answers<'k>(
        &self,
        keys: impl Iterator<Item = (&'k str, &'k str)>,
    ) -> Result<DroppedAnswers, StoreError> {
        let mut dropped = DroppedAnswers::default();
        for (scope, key) in keys {
            let Some(row) = self.idempotency(scope, key)? else {
                continue;
            };
            // Not the gateway's (planted or edited) rows stay as they are, never signed here.
            let IdempotentAnswer::Done {
                lease_generation, ..
            } = row.answer
            else {
                continue;
            };
            if !row.signed {
                continue;
            }
            let bytes: i64 = self.row(
                "SELECT LENGTH(CAST(answer AS BLOB)) FROM idempotency WHERE scope = ?1 AND key = ?2",
                [scope, key],
                |row| row.get(0),
            )?;
            self.replace_idempotency_answer(
                scope,
                key,
                &IdempotentAnswer::Dropped { lease_generation },
            )?;
            dropped.answers += 1;
            dropped.bytes += u64::try_from(bytes).unwrap_or(0);
        }
        Ok(dropped)
    }
}

/// The one key under which an ended session's last request of an operation is kept
/// (`Tx::put_last_request`): its scope is `ended:<operation scope>`.
pub const LAST_REQUEST_KEY: &str = "last";

impl Tx<'_> {
    /// The last request of an ended session's operation (`scope` is `ended:…`), if any.
    pub fn last_request(&self, scope: &str) -> Result<Option<IdempotencyRow>, StoreError> {
        self.idempotency(scope, LAST_REQUEST_KEY)
    }

    /// Keep `request_hash` as the last request of an ended session's operation, overwriting the
    /// one before (signed like any idempotency row): one row per session and operation, whatever
    /// is called on it (red team 31/32 N1).
    pub fn put_last_request(
        &self,
        scope: &str,
        request_hash: &str,
        session_id: &str,
        answer: &IdempotentAnswer,
    ) -> Result<(), StoreError> {
        self.run(
            "DELETE FROM idempotency WHERE scope = ?1 AND key = ?2",
            [scope, LAST_REQUEST_KEY],
        )?;
        self.put_idempotency(
            scope,
            LAST_REQUEST_KEY,
            request_hash,
            Some(session_id),
            answer,
        )
    }

    /// For a prune of an ended session: delete its idempotency keys (a resend of one then
    /// answers the session's final state as a new request would), except the newest of each
    /// operation (a client's retry of its last call, such as the stop that ended the session,
    /// still replays), its start's (a resent start must never start a second session;
    /// compacted instead) and the one last request kept per operation. How many were deleted.
    pub fn delete_ended_keys(&self, session_id: &str) -> Result<u64, StoreError> {
        let deleted = self.run(
            "DELETE FROM idempotency WHERE session_id = ?1 AND scope <> 'start'
             AND substr(scope, 1, 6) <> 'ended:'
             AND rowid < (SELECT MAX(n.rowid) FROM idempotency n WHERE n.scope = idempotency.scope)",
            [session_id],
        )?;
        Ok(deleted as u64)
    }

    /// For a prune of an ended session: delete its lease rows older than `generation` (revoked
    /// by a recover, never valid again). How many.
    pub fn delete_superseded_leases(
        &self,
        session_id: &str,
        generation: u32,
    ) -> Result<u64, StoreError> {
        let deleted = self.run(
            "DELETE FROM leases WHERE session_id = ?1 AND generation < ?2",
            params![session_id, generation],
        )?;
        Ok(deleted as u64)
    }
}
