//! One row mapping: how a row of `sessions`, `turns`, `replies` and `actions` maps to the
//! digests of its covered columns, and the chained records of those digests. The gateway appends
//! a `rows_recorded` event in every write transaction that changed a covered column (only the
//! columns that changed); the first gateway of this format records every existing row in a
//! `ledger_baseline` event, with the commitment to the rows from before the chain. The check
//! then runs both ways: every row must match the latest record of each of its columns (an edit
//! names the column), a recorded row must exist (a deletion names it), and a row nothing
//! recorded was inserted behind the gateway's back. Retention removes rows only with a chained
//! `content_pruned` event naming them and their digests as they were.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ActionRow, ReplyRow, SessionRow, Table, TurnRow, Verifier};

/// Kind of the event recording changed covered columns.
pub const ROWS_RECORDED: &str = "rows_recorded";
/// Kind of the event recording every covered row and the pre-chain commitment, once.
pub const BASELINE: &str = "ledger_baseline";
/// Kind of the event recording the rows retention removed from an ended session (`rows`: each
/// row's key and its column digests as they were). From it on, those rows must be gone: one
/// that reappears was inserted behind the gateway's back; one whose digests differ from its
/// chained record was edited before it was removed.
pub const CONTENT_PRUNED: &str = "content_pruned";

/// Column name → digest (32 hex digits: the first 128 bits of SHA-256).
pub type Columns = BTreeMap<String, String>;

fn digest_text(text: &str) -> String {
    let mut hex = crate::hash::sha256_hex(text.as_bytes());
    hex.truncate(32);
    hex
}

fn digest_value(value: Option<&Value>) -> String {
    let mut hex = crate::hash::canonical_sha256(value.unwrap_or(&Value::Null));
    hex.truncate(32);
    hex
}

fn put(columns: &mut Columns, name: &str, digest: String) {
    columns.insert(name.to_string(), digest);
}

/// Fields of a session's `data` recorded as columns of their own (so a check names them); the
/// rest, but for [`SESSION_STATE`], is the column `other`. Everything the SessionView or
/// `gatewayctl show` shows is covered one way or the other (red team 27b R3): a field added later
/// is covered by default.
pub const SESSION_FIELDS: &[&str] = &[
    "label",
    "profile",
    "subagent_policy",
    "source_directory",
    "working_directory",
    "skill_snapshot",
    "claude_session_id",
    "current_run",
    "recovery_required",
    "pending_turn_id",
    "last_result",
    "launch_error",
    "stop_request",
    "terminal",
    "network_boundary",
    "conversation_restart",
    "delegation",
];
/// Fields of a session's `data` left out of the records: they move with every call or broker
/// event (the lease's expiry, the revision counter, the broker's private runtime record, whose
/// secret must not reach the ledger either). `workspace` is recorded in two columns of its own.
pub const SESSION_STATE: &[&str] = &["revision", "lease_expires_at_ms", "broker", "workspace"];
/// A turn's `data` fields recorded as columns of their own (the rest is `other`).
pub const TURN_FIELDS: &[&str] = &["body", "reply_id", "notice"];
/// A reply's `data` fields recorded as columns of their own (the rest is `other`).
pub const REPLY_FIELDS: &[&str] = &["text", "calls"];

/// Digest of a JSON object without its top-level `named` and `left_out` members.
fn digest_rest(data: &Value, named: &[&str], left_out: &[&str]) -> String {
    let mut rest = data.clone();
    if let Some(object) = rest.as_object_mut() {
        object.retain(|key, _| !named.contains(&key.as_str()) && !left_out.contains(&key.as_str()));
    }
    digest_value(Some(&rest))
}

/// A row of one of the covered tables.
#[derive(Debug, Clone)]
pub enum CoveredRow {
    Action(ActionRow),
    Reply(ReplyRow),
    Session(SessionRow),
    Turn(TurnRow),
}

impl CoveredRow {
    pub fn table(&self) -> Table {
        match self {
            CoveredRow::Action(_) => Table::Actions,
            CoveredRow::Reply(_) => Table::Replies,
            CoveredRow::Session(_) => Table::Sessions,
            CoveredRow::Turn(_) => Table::Turns,
        }
    }

    /// The row's session and its id within the table.
    pub fn key(&self) -> (&str, &str) {
        match self {
            CoveredRow::Action(r) => (&r.session_id, &r.action_id),
            CoveredRow::Reply(r) => (&r.session_id, &r.reply_id),
            CoveredRow::Session(r) => (&r.id, &r.id),
            CoveredRow::Turn(r) => (&r.session_id, &r.turn_id),
        }
    }

    /// The digests of the covered columns (stored text as it is; in JSON `data`, the fields
    /// named, by their canonical JSON).
    pub fn columns(&self) -> Columns {
        let mut c = Columns::new();
        match self {
            // A row's session is part of its key (a row moved to another session is one row
            // deleted and one invented): not a column.
            CoveredRow::Action(r) => {
                put(&mut c, "turn_id", digest_text(&r.turn_id));
                put(&mut c, "call_index", digest_text(&r.call_index.to_string()));
                put(&mut c, "name", digest_text(&r.name));
                put(&mut c, "arguments", digest_text(&r.arguments));
                put(&mut c, "state", digest_text(&r.state));
                let opt = |t: &Option<String>| digest_text(t.as_deref().unwrap_or("\u{0}null"));
                put(&mut c, "outcome", opt(&r.outcome));
                put(&mut c, "prepared", opt(&r.prepared));
            }
            CoveredRow::Reply(r) => {
                let data = serde_json::from_str::<Value>(&r.data).unwrap_or(Value::Null);
                put(&mut c, "turn_id", digest_text(&r.turn_id));
                put(&mut c, "request_hash", digest_text(&r.request_hash));
                for field in REPLY_FIELDS {
                    put(&mut c, field, digest_value(data.get(field)));
                }
                put(&mut c, "other", digest_rest(&data, REPLY_FIELDS, &[]));
            }
            CoveredRow::Session(r) => {
                let data = serde_json::from_str::<Value>(&r.data).unwrap_or(Value::Null);
                put(&mut c, "status", digest_text(&r.status));
                for field in SESSION_FIELDS {
                    put(&mut c, field, digest_value(data.get(field)));
                }
                let mut workspace = data.get("workspace").cloned().unwrap_or(Value::Null);
                let worktree = workspace
                    .as_object_mut()
                    .and_then(|w| w.remove("worktree_path"));
                put(&mut c, "workspace", digest_value(Some(&workspace)));
                put(&mut c, "worktree_path", digest_value(worktree.as_ref()));
                put(
                    &mut c,
                    "other",
                    digest_rest(&data, SESSION_FIELDS, SESSION_STATE),
                );
            }
            CoveredRow::Turn(r) => {
                let data = serde_json::from_str::<Value>(&r.data).unwrap_or(Value::Null);
                put(&mut c, "sequence", digest_text(&r.sequence.to_string()));
                put(&mut c, "fingerprint", digest_text(&r.fingerprint));
                put(&mut c, "status", digest_text(&r.status));
                for field in TURN_FIELDS {
                    put(&mut c, field, digest_value(data.get(field)));
                }
                put(&mut c, "other", digest_rest(&data, TURN_FIELDS, &[]));
            }
        }
        c
    }
}

/// One row's recorded column digests, as a `rows_recorded` or `ledger_baseline` event holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowRecord {
    pub table: Table,
    /// Left out (empty) when it is the event's session.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session: String,
    pub id: String,
    pub columns: Columns,
}

impl RowRecord {
    /// The record of `row` as it is now, given its columns before (`None`: a new row): only
    /// the columns that changed; `None` when nothing covered changed.
    pub fn changed(before: Option<&Columns>, row: &CoveredRow) -> Option<RowRecord> {
        let mut columns = row.columns();
        if let Some(before) = before {
            columns.retain(|name, digest| before.get(name) != Some(digest));
        }
        if columns.is_empty() {
            return None;
        }
        let (session, id) = row.key();
        Some(RowRecord {
            table: row.table(),
            session: session.to_string(),
            id: id.to_string(),
            columns,
        })
    }

    /// The event data recording `rows`.
    pub fn event_data(rows: &[RowRecord]) -> Value {
        serde_json::json!({ "rows": rows })
    }
}

type Key = (Table, String, String);

/// What the chained records say, and which rows were seen.
#[derive(Default)]
pub(super) struct Records {
    /// Latest digest per column, and the seq of the event that recorded the row last.
    latest: BTreeMap<Key, (i64, Columns)>,
    seen: std::collections::BTreeSet<Key>,
    /// The newest chained baseline: `(seq, pre-chain rows, their digest)`.
    pub(super) baseline: Option<(i64, u64, String)>,
}

impl Records {
    /// A row of a covered table was read (the check of deleted rows runs after all of them).
    pub(super) fn saw(&mut self, table: Table, session: &str, id: &str) {
        self.seen
            .insert((table, session.to_string(), id.to_string()));
    }

    /// A chained row of kind `rows_recorded` or `ledger_baseline` (in `session`).
    pub(super) fn chained(&mut self, seq: i64, session: Option<&str>, kind: &str, data: &Value) {
        if kind == BASELINE {
            let count = data.get("pre_count").and_then(Value::as_u64).unwrap_or(0);
            let digest = data
                .get("pre_sha256")
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.baseline = Some((seq, count, digest.to_string()));
        }
        let rows = data.get("rows").and_then(Value::as_array);
        for row in rows.into_iter().flatten() {
            let Ok(mut record) = RowRecord::deserialize(row) else {
                continue;
            };
            if record.session.is_empty() {
                record.session = session.unwrap_or_default().to_string();
            }
            let entry = self
                .latest
                .entry((record.table, record.session, record.id))
                .or_default();
            entry.0 = seq;
            entry.1.extend(record.columns);
        }
    }
}

impl Verifier {
    /// Whether every covered row must have a chained record: the head is of the format that
    /// commits to them (v3), or the chain holds a baseline.
    fn records_required(&self) -> bool {
        self.trusted.as_ref().is_some_and(|h| h.pre_count.is_some())
            || self.expected.records.baseline.is_some()
    }

    /// A chained `content_pruned` event: the rows it names are gone from now on, and were, when
    /// removed, as their latest chained records say.
    pub(super) fn content_pruned(&mut self, row: &super::EventRow) {
        let data = serde_json::from_str::<Value>(&row.data).unwrap_or(Value::Null);
        let session = row.session_id.as_deref().unwrap_or_default();
        let rows = data.get("rows").and_then(Value::as_array);
        for pruned in rows.into_iter().flatten() {
            let Ok(mut record) = RowRecord::deserialize(pruned) else {
                let what = "names a row it cannot describe (not a row record)".to_string();
                self.problem(Table::Events, row.seq.to_string(), Some(session), what);
                continue;
            };
            if record.session.is_empty() {
                record.session = session.to_string();
            }
            let key = (record.table, record.session.clone(), record.id.clone());
            let what = match self.expected.records.latest.remove(&key) {
                Some((seq, recorded)) => recorded
                    .iter()
                    .find(|(name, digest)| record.columns.get(*name).is_some_and(|d| d != *digest))
                    .map(|(name, _)| {
                        format!(
                            "column `{name}` differed from its chained record (seq {seq}) when \
                             it was pruned (seq {}): edited before the prune",
                            row.seq
                        )
                    }),
                None if self.records_required() => Some(format!(
                    "pruned (seq {}) without a chained record of it (inserted outside the \
                     gateway before the prune)",
                    row.seq
                )),
                None => None,
            };
            self.expected.pruned(&key);
            if let Some(what) = what {
                self.problem(key.0, key.2, Some(&key.1), what);
            }
        }
    }

    /// One row of a covered table, after all events: its records, then what the events it
    /// belongs to say (`tables`).
    pub fn covered(&mut self, row: &CoveredRow) {
        self.check_record(row);
        match row {
            CoveredRow::Action(r) => self.action(r),
            CoveredRow::Reply(r) => self.reply(r),
            CoveredRow::Session(r) => self.session(r),
            CoveredRow::Turn(r) => self.turn(r),
        }
    }

    fn check_record(&mut self, row: &CoveredRow) {
        let (session, id) = row.key();
        let key = (row.table(), session.to_string(), id.to_string());
        let what = match self.expected.records.latest.get(&key) {
            Some((seq, recorded)) => {
                let columns = row.columns();
                let edited = recorded
                    .iter()
                    .find(|(name, digest)| columns.get(*name) != Some(*digest));
                match edited {
                    Some((name, _)) => format!(
                        "column `{name}` differs from its chained record (seq {seq}): edited"
                    ),
                    None => {
                        self.report.rows_recorded += 1;
                        let mut missing = columns;
                        missing.retain(|name, _| !recorded.contains_key(name));
                        if !missing.is_empty() {
                            self.report.unrecorded.push(RowRecord {
                                table: key.0,
                                session: key.1,
                                id: key.2,
                                columns: missing,
                            });
                        }
                        return;
                    }
                }
            }
            None if self.records_required() => {
                "no chained record of this row (inserted outside the gateway)".to_string()
            }
            None => return,
        };
        self.problem(key.0, key.2, Some(session), what);
    }

    /// After every row: the rows the chained ledger recorded (or whose events say they exist)
    /// that are gone.
    pub(super) fn deleted_rows(&mut self) {
        let mut gone: Vec<(Key, String)> = Vec::new();
        let seen = &self.expected.records.seen;
        for (key, (seq, _)) in &self.expected.records.latest {
            if !seen.contains(key) {
                gone.push((key.clone(), format!("its chained record (seq {seq})")));
            }
        }
        for (key, why) in self.expected.existing() {
            if !seen.contains(&key) && !gone.iter().any(|(k, _)| *k == key) {
                gone.push((key, why));
            }
        }
        gone.sort();
        for ((table, session, id), why) in gone {
            self.problem(
                table,
                id,
                Some(&session),
                format!("row deleted: {why} says it exists"),
            );
        }
    }
}
