//! The ledger's hash chain: the canonical bytes of an event row, how each row's hash links to the
//! previous one, the signed head kept outside the database, and the read-only check of all three
//! (`gatewayctl verify`, `gatewayctl show`). The gateway appends with [`link_hash`]; nothing here
//! touches SQLite, so the writer and the checker share one definition.
//!
//! Canonical bytes of an `events` row: the domain tag `ngw-ledger-v1`, then the fields `events`,
//! `seq` (decimal), `session_id` (`-` when the row has none, else `=` and the id), `at_ms`
//! (decimal), `kind` and `data` (the stored JSON text, byte for byte), each written as its
//! length as 8 bytes big-endian followed by its bytes. A row's hash is
//! `SHA-256(previous hash (32 raw bytes) ‖ canonical bytes)`; the first chained row's previous
//! hash is 32 zero bytes ([`GENESIS`]). Rows from before the chain existed (a database migrated
//! to schema version 4) have no hash; they may only precede the first chained row.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The previous hash of the first chained row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Name of the signed head file inside the state dir.
pub const HEAD_FILE: &str = "ledger-head";

/// Kinds whose `data` carries an action's receipt (`receipt`), keyed by `action_id`.
pub const RECEIPT_KINDS: [&str; 4] = [
    "action_committed",
    "write_not_applied",
    "write_indeterminate",
    "write_resolved_after_crash",
];

/// One `events` row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub seq: i64,
    pub session_id: Option<String>,
    pub at_ms: i64,
    pub kind: String,
    /// The stored JSON text.
    pub data: String,
    /// The stored hash (hex); `None` for rows written before the chain.
    pub hash: Option<String>,
}

fn put_field(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The canonical bytes of an event row (see the module doc).
pub fn canonical_bytes(
    seq: i64,
    session_id: Option<&str>,
    at_ms: i64,
    kind: &str,
    data: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + kind.len() + data.len());
    put_field(&mut out, b"ngw-ledger-v1");
    put_field(&mut out, b"events");
    put_field(&mut out, seq.to_string().as_bytes());
    match session_id {
        None => put_field(&mut out, b"-"),
        Some(id) => put_field(&mut out, format!("={id}").as_bytes()),
    }
    put_field(&mut out, at_ms.to_string().as_bytes());
    put_field(&mut out, kind.as_bytes());
    put_field(&mut out, data.as_bytes());
    out
}

/// The hash of a row whose predecessor's hash is `prev` (hex). A `prev` that is not 64 hex
/// digits is hashed as its text, so a corrupted predecessor still yields a (mismatching) hash.
pub fn link_hash(
    prev: &str,
    seq: i64,
    session_id: Option<&str>,
    at_ms: i64,
    kind: &str,
    data: &str,
) -> String {
    let mut hasher = Sha256::new();
    match hex::decode(prev) {
        Ok(raw) if raw.len() == 32 => hasher.update(&raw),
        _ => hasher.update(prev.as_bytes()),
    }
    hasher.update(canonical_bytes(seq, session_id, at_ms, kind, data));
    hex::encode(hasher.finalize())
}

/// The newest chained row, signed with the server key: kept outside the database so that
/// dropping the newest rows (or rewriting the whole chain) is detected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: i64,
    pub hash: String,
    pub mac: String,
}

fn head_message(seq: i64, hash: &str) -> String {
    format!("ledger-head:v1:{seq}:{hash}")
}

impl Head {
    /// The head for row `seq` with hash `hash`, signed with `key`.
    pub fn sign(key: &str, seq: i64, hash: &str) -> Head {
        Head {
            seq,
            hash: hash.to_string(),
            mac: crate::hash::hmac_hex(key, &head_message(seq, hash)),
        }
    }

    /// Whether the signature is the server key's.
    pub fn verify(&self, key: &str) -> bool {
        crate::hash::verify_hmac_hex(key, &head_message(self.seq, &self.hash), &self.mac)
    }

    /// The file's text: one JSON line.
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parse the file's text.
    pub fn parse(text: &str) -> Result<Head, serde_json::Error> {
        serde_json::from_str(text.trim())
    }
}

/// Where a problem is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    Events,
    Actions,
    LedgerHead,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub table: Table,
    /// `seq` of the event, `action_id` of the action, or the head's seq.
    pub id: String,
    pub session_id: Option<String>,
    pub what: String,
}

/// The head as read from the state dir.
#[derive(Debug, Clone)]
pub enum HeadFile {
    Missing,
    Unreadable(String),
    Present(Head),
}

/// What the check found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub events: u64,
    /// Rows from before the chain (schema version < 4): not covered.
    pub unchained_events: u64,
    pub chained_events: u64,
    /// Actions whose receipt matched a chained event.
    pub receipts_checked: u64,
    /// Actions settled before the chain: not covered.
    pub receipts_unchained: u64,
    /// Chained rows after the signed head: the gateway stopped between its commit and the head
    /// write. Not an error; they are not anchored.
    pub rows_after_head: u64,
    pub head_seq: Option<i64>,
    /// Every problem, in order; the first one is the one to report.
    pub problems: Vec<Problem>,
    /// Sessions with at least one problem.
    pub broken_sessions: BTreeSet<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the rows in `seq` order, then the receipts and the head.
pub struct Verifier {
    report: Report,
    /// Hash of the previous row (chained or not: `None` before any chained row).
    prev: Option<String>,
    last_seq: Option<i64>,
    /// The stored hash of each chained row by seq (to check the head).
    hashes: HashMap<i64, String>,
    last_chained_seq: Option<i64>,
    /// Receipt of the last chained and of the last unchained event per action.
    chained_receipts: HashMap<String, Value>,
    unchained_receipts: HashMap<String, Value>,
}

impl Default for Verifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier {
    pub fn new() -> Verifier {
        Verifier {
            report: Report::default(),
            prev: None,
            last_seq: None,
            hashes: HashMap::new(),
            last_chained_seq: None,
            chained_receipts: HashMap::new(),
            unchained_receipts: HashMap::new(),
        }
    }

    fn problem(&mut self, table: Table, id: String, session_id: Option<&str>, what: String) {
        if let Some(session) = session_id {
            self.report.broken_sessions.insert(session.to_string());
        }
        self.report.problems.push(Problem {
            table,
            id,
            session_id: session_id.map(str::to_string),
            what,
        });
    }

    /// The next row, in ascending `seq` order.
    pub fn event(&mut self, row: &EventRow) {
        self.report.events += 1;
        let session = row.session_id.as_deref();
        let id = row.seq.to_string();
        if let Some(last) = self.last_seq
            && row.seq <= last
        {
            self.problem(
                Table::Events,
                id.clone(),
                session,
                format!("seq {} does not follow {last}", row.seq),
            );
        }
        self.last_seq = Some(row.seq);
        let receipt = RECEIPT_KINDS
            .contains(&row.kind.as_str())
            .then(|| serde_json::from_str::<Value>(&row.data).ok())
            .flatten()
            .and_then(|data| {
                let action = data.get("action_id")?.as_str()?.to_string();
                Some((action, data.get("receipt").cloned().unwrap_or(Value::Null)))
            });
        let Some(stored) = row.hash.as_deref() else {
            self.report.unchained_events += 1;
            if self.prev.is_some() {
                self.problem(
                    Table::Events,
                    id,
                    session,
                    "no hash after the chain began (hash removed)".into(),
                );
            }
            if let Some((action, receipt)) = receipt {
                self.unchained_receipts.insert(action, receipt);
            }
            return;
        };
        self.report.chained_events += 1;
        let prev = self.prev.as_deref().unwrap_or(GENESIS);
        let expected = link_hash(prev, row.seq, session, row.at_ms, &row.kind, &row.data);
        if expected != stored {
            let what = if self.prev.is_none() {
                "hash does not match its contents (first chained row)".to_string()
            } else {
                "hash does not match its contents and the previous row's hash \
                 (edited, or a row before it was deleted or moved)"
                    .to_string()
            };
            self.problem(Table::Events, id, session, what);
        }
        self.prev = Some(stored.to_string());
        self.hashes.insert(row.seq, stored.to_string());
        self.last_chained_seq = Some(row.seq);
        if let Some((action, receipt)) = receipt {
            self.chained_receipts.insert(action, receipt);
        }
    }

    /// One action's stored outcome (JSON text), after all events.
    pub fn action(&mut self, action_id: &str, session_id: &str, outcome: Option<&str>) {
        let Some(outcome) = outcome else { return };
        let receipt = serde_json::from_str::<Value>(outcome)
            .ok()
            .and_then(|o| o.get("receipt").cloned());
        let Some(receipt) = receipt else {
            self.problem(
                Table::Actions,
                action_id.into(),
                Some(session_id),
                "outcome has no readable receipt".into(),
            );
            return;
        };
        match self.chained_receipts.get(action_id) {
            Some(recorded) if *recorded == receipt => self.report.receipts_checked += 1,
            Some(_) => self.problem(
                Table::Actions,
                action_id.into(),
                Some(session_id),
                "receipt differs from the one in the chained ledger".into(),
            ),
            // Recorded before the chain, or (an event without a receipt, or none) settled by a
            // gateway older than the chain: not covered.
            None if self.unchained_receipts.contains_key(action_id)
                || self.report.unchained_events > 0 =>
            {
                self.report.receipts_unchained += 1;
            }
            None => self.problem(
                Table::Actions,
                action_id.into(),
                Some(session_id),
                "receipt has no ledger event".into(),
            ),
        }
    }

    /// Check the head against the chain and finish.
    pub fn finish(mut self, head: &HeadFile, key: Option<&str>) -> Report {
        let last = self.last_chained_seq;
        match (head, last) {
            (HeadFile::Missing, None) => {}
            (HeadFile::Missing, Some(seq)) => self.problem(
                Table::LedgerHead,
                seq.to_string(),
                None,
                "the signed head is missing but the chain has rows".into(),
            ),
            (HeadFile::Unreadable(why), _) => {
                self.problem(Table::LedgerHead, "-".into(), None, why.clone())
            }
            (HeadFile::Present(head), _) => {
                self.report.head_seq = Some(head.seq);
                let id = head.seq.to_string();
                match key {
                    None => self.problem(
                        Table::LedgerHead,
                        id,
                        None,
                        "no server key to check the head's signature".into(),
                    ),
                    Some(key) if !head.verify(key) => self.problem(
                        Table::LedgerHead,
                        id,
                        None,
                        "signature is not the server key's".into(),
                    ),
                    Some(_) => match self.hashes.get(&head.seq) {
                        None => self.problem(
                            Table::LedgerHead,
                            id,
                            None,
                            "the row the head names is gone (newest rows dropped)".into(),
                        ),
                        Some(stored) if *stored != head.hash => self.problem(
                            Table::LedgerHead,
                            id,
                            None,
                            "the row the head names has another hash (chain rewritten)".into(),
                        ),
                        Some(_) => {
                            self.report.rows_after_head =
                                self.hashes.keys().filter(|seq| **seq > head.seq).count() as u64;
                        }
                    },
                }
            }
        }
        self.report
    }
}

#[cfg(test)]
mod tests;
