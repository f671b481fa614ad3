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
//! to schema version 4) have no hash; they may only precede the first chained row, whose seq the
//! signed head names (`start_seq`). Each row written by schema version 5 also carries
//! `mac = HMAC(server key, "ledger-row:v1:<seq>:<hash>")` ([`row_mac`]): a row newer than the
//! signed head (the head is written after the commit, so a crash can leave it behind) is only
//! accepted with it, so nobody without the key can append rows past the head.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The previous hash of the first chained row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Name of the signed head file inside the state dir.
pub const HEAD_FILE: &str = "ledger-head";

/// Name of the file, in the state dir, where the gateway latches "ledger broken" outside the
/// database: a restart (or a database restored behind its back) does not clear it; the operator
/// removes it after investigating (`gatewayctl verify`).
pub const BROKEN_FILE: &str = "ledger-broken";

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
    /// The stored row signature ([`row_mac`]); `None` before schema version 5.
    pub mac: Option<String>,
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

/// The signature of a chained row (its hash covers its contents and everything before it).
pub fn row_mac(key: &str, seq: i64, hash: &str) -> String {
    crate::hash::hmac_hex(key, &row_message(seq, hash))
}

fn row_message(seq: i64, hash: &str) -> String {
    format!("ledger-row:v1:{seq}:{hash}")
}

/// The signed head, kept outside the database so that dropping the newest rows (or rewriting
/// the whole chain) is detected: the newest anchored row (`seq`, `hash`; [`GENESIS`] and the seq
/// before `start_seq` while no row is chained yet) and, from format v2 on, where the chain
/// begins (`start_seq`: every row from it on must be chained, none before it may be).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: i64,
    pub hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_seq: Option<i64>,
    /// From format v3 on: how many rows precede the chain (`start_seq`), and the digest of them
    /// (`pre_sha256`: [`link_hash`] over them from [`GENESIS`]), so that deleting or editing
    /// one is detected; and every covered row of the other tables must have its chained record
    /// (`records`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_sha256: Option<String>,
    pub mac: String,
}

fn head_message(head: &Head) -> String {
    let (seq, hash) = (head.seq, &head.hash);
    match (head.start_seq, head.pre_count, &head.pre_sha256) {
        (Some(start), Some(count), Some(pre)) => {
            format!("ledger-head:v3:{start}:{seq}:{hash}:{count}:{pre}")
        }
        (None, _, _) => format!("ledger-head:v1:{seq}:{hash}"),
        (Some(start), _, _) => format!("ledger-head:v2:{start}:{seq}:{hash}"),
    }
}

impl Head {
    /// A format-v1 head (no chain start) for row `seq` with hash `hash`, signed with `key`: what
    /// gateways before the chain-start marker wrote; still accepted.
    pub fn sign(key: &str, seq: i64, hash: &str) -> Head {
        Head::signed(key, None, seq, hash, None)
    }

    /// A format-v2 head (chain start `start_seq`, no pre-chain commitment): what gateways
    /// before v3 wrote; still read, and replaced at the next open.
    pub fn anchored(key: &str, start_seq: i64, seq: i64, hash: &str) -> Head {
        Head::signed(key, Some(start_seq), seq, hash, None)
    }

    /// The head the gateway writes (format v3): chain start `start_seq`, newest row `seq` with
    /// `hash`, and the rows before the chain (`pre`: their count and digest).
    pub fn committed(key: &str, start_seq: i64, seq: i64, hash: &str, pre: &(u64, String)) -> Head {
        Head::signed(key, Some(start_seq), seq, hash, Some(pre))
    }

    fn signed(
        key: &str,
        start_seq: Option<i64>,
        seq: i64,
        hash: &str,
        pre: Option<&(u64, String)>,
    ) -> Head {
        let mut head = Head {
            seq,
            hash: hash.to_string(),
            start_seq,
            pre_count: pre.map(|p| p.0),
            pre_sha256: pre.map(|p| p.1.clone()),
            mac: String::new(),
        };
        head.mac = crate::hash::hmac_hex(key, &head_message(&head));
        head
    }

    /// Whether the signature is the server key's.
    pub fn verify(&self, key: &str) -> bool {
        crate::hash::verify_hmac_hex(key, &head_message(self), &self.mac)
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

    /// Read `<state_dir>/ledger-head`.
    pub fn read(state_dir: &std::path::Path) -> HeadFile {
        match std::fs::read_to_string(state_dir.join(HEAD_FILE)) {
            Ok(text) => match Head::parse(&text) {
                Ok(head) => HeadFile::Present(head),
                Err(err) => HeadFile::Unreadable(format!("not a ledger head: {err}")),
            },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => HeadFile::Missing,
            Err(err) => HeadFile::Unreadable(format!("reading it: {}", err.kind())),
        }
    }
}

/// Where a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    Events,
    Actions,
    Replies,
    Sessions,
    Turns,
    LedgerHead,
    /// `sqlite_master`: a schema row the migrations did not make.
    Schema,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub table: Table,
    /// `seq` of the event, `action_id` of the action, `reply_id` of the reply, the session's or
    /// the turn's id, or the head's seq.
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
    /// Rows of `actions`, `replies`, `sessions` and `turns` compared with the chained events that
    /// recorded them (each row counted once).
    pub rows_cross_checked: u64,
    /// Rows of those tables whose covered columns matched their latest chained record.
    pub rows_recorded: u64,
    /// Rows from before the chain and their digest ([`link_hash`] over them from [`GENESIS`]):
    /// what a v3 head and a `ledger_baseline` event commit to.
    pub pre_chain: (u64, String),
    /// Whether a v3 head or a chained baseline commits to them.
    pub pre_chain_committed: bool,
    /// The first chained row and the newest row.
    pub first_chained: Option<i64>,
    pub newest_seq: Option<i64>,
    /// Chained rows after the signed head, each with a valid row signature: the gateway stopped
    /// between its commit and the head write, or the head write is still on its way. Not an
    /// error: they cannot be forged, only dropped.
    pub rows_after_head: u64,
    pub head_seq: Option<i64>,
    /// Where the signed head says the chain begins (format v2 heads).
    pub chain_start: Option<i64>,
    /// The newest chained row: `(seq, hash)`.
    pub tail: Option<(i64, String)>,
    /// Every problem, in order; the first one is the one to report.
    pub problems: Vec<Problem>,
    /// Sessions with at least one problem.
    pub broken_sessions: BTreeSet<String>,
    /// Covered columns of recorded rows that no record holds yet: the mapping gained them after
    /// the row was last recorded. The gateway's open records them (trust on first use, as the
    /// baseline); until then they are not checked.
    #[serde(skip)]
    pub unrecorded: Vec<records::RowRecord>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the rows in `seq` order, then the other tables (`tables`) and the head.
pub struct Verifier {
    report: Report,
    head: HeadFile,
    key: Option<String>,
    /// The head, when its signature is the server key's.
    trusted: Option<Head>,
    /// Hash of the previous chained row (`None` before any chained row).
    prev: Option<String>,
    last_seq: Option<i64>,
    last_chained_seq: Option<i64>,
    /// The stored hash of the row the head names, once seen (`Some(None)`: seen, unchained).
    head_row: Option<Option<String>>,
    /// The highest seq SQLite's AUTOINCREMENT has handed out (`sqlite_sequence`).
    issued: Option<i64>,
    /// What the chained events say about the other tables' rows.
    expected: tables::Expected,
    /// A missing head is allowed: the database was migrated from before the chain just now.
    head_may_be_missing: bool,
}

impl Verifier {
    /// A check against `head`; `key` is the server key (the head's and the rows' signatures).
    pub fn new(head: HeadFile, key: Option<&str>) -> Verifier {
        let trusted = match (&head, key) {
            (HeadFile::Present(h), Some(key)) if h.verify(key) => Some(h.clone()),
            _ => None,
        };
        Verifier {
            report: Report {
                chain_start: trusted.as_ref().and_then(|h| h.start_seq),
                pre_chain: (0, GENESIS.to_string()),
                ..Report::default()
            },
            head,
            key: key.map(str::to_string),
            trusted,
            prev: None,
            last_seq: None,
            last_chained_seq: None,
            head_row: None,
            issued: None,
            expected: tables::Expected::default(),
            head_may_be_missing: false,
        }
    }

    /// The database was just migrated from before the chain (schema version < 4): it has no
    /// signed head yet. Anywhere else a ledger with rows and no head is broken (head deleted).
    pub fn head_may_be_missing(&mut self) {
        self.head_may_be_missing = true;
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

    /// A schema row the migrations did not make (`common::state_schema::foreign_schema`).
    pub fn foreign_schema(&mut self, kind: &str, name: &str) {
        let what = format!("{kind} not made by the gateway's migrations");
        self.problem(Table::Schema, name.to_string(), None, what);
    }

    /// The highest seq AUTOINCREMENT handed out (`sqlite_sequence`), if any.
    pub fn issued(&mut self, seq: Option<i64>) {
        self.issued = seq;
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
        self.report.newest_seq = Some(row.seq);
        let start = self.trusted.as_ref().and_then(|h| h.start_seq);
        if let Some(head) = &self.trusted
            && head.seq == row.seq
        {
            self.head_row = Some(row.hash.clone());
        }
        let Some(stored) = row.hash.as_deref() else {
            self.report.unchained_events += 1;
            if row.seq < 1 {
                // AUTOINCREMENT starts at 1: such a row was inserted by hand.
                self.problem(
                    Table::Events,
                    id,
                    session,
                    "no hash and a seq below 1 (inserted, not from before the chain)".into(),
                );
            } else if let Some(start) = start.filter(|start| row.seq >= *start) {
                self.problem(
                    Table::Events,
                    id,
                    session,
                    format!("no hash, but the signed chain begins at seq {start} (hash removed)"),
                );
            } else if self.prev.is_some() {
                self.problem(
                    Table::Events,
                    id,
                    session,
                    "no hash after the chain began (hash removed)".into(),
                );
            } else {
                self.expected.unchained(row);
                let (count, digest) = &mut self.report.pre_chain;
                *count += 1;
                *digest = link_hash(digest, row.seq, session, row.at_ms, &row.kind, &row.data);
            }
            return;
        };
        self.report.chained_events += 1;
        let first = self.prev.is_none();
        if first {
            self.report.first_chained = Some(row.seq);
        }
        let prev = self.prev.clone().unwrap_or_else(|| GENESIS.to_string());
        let expected = link_hash(&prev, row.seq, session, row.at_ms, &row.kind, &row.data);
        let wrong = match (start, self.last_chained_seq) {
            (Some(start), _) if row.seq < start => Some(format!(
                "a hash before the signed chain start (seq {start})"
            )),
            (Some(start), None) if row.seq != start => Some(format!(
                "the signed chain begins at seq {start}, but its first chained row is {} \
                 (rows deleted, or hashes added or removed)",
                row.seq
            )),
            (_, Some(last)) if row.seq != last + 1 => Some(format!(
                "seq gap: rows {} to {} are missing",
                last + 1,
                row.seq - 1
            )),
            _ if expected == stored => None,
            _ if first => Some("hash does not match its contents (first chained row)".into()),
            _ => Some(
                "hash does not match its contents and the previous row's hash \
                 (edited, or a row before it was deleted or moved)"
                    .into(),
            ),
        };
        if let Some(what) = wrong {
            self.problem(Table::Events, id.clone(), session, what);
        }
        if let Some(head) = self.trusted.as_ref().filter(|h| row.seq > h.seq) {
            let head_seq = head.seq;
            let signed = match (&self.key, &row.mac) {
                (Some(key), Some(mac)) => {
                    crate::hash::verify_hmac_hex(key, &row_message(row.seq, stored), mac)
                }
                _ => false,
            };
            if signed {
                self.report.rows_after_head += 1;
            } else {
                self.problem(
                    Table::Events,
                    id,
                    session,
                    format!(
                        "newer than the signed head (seq {head_seq}) and not signed with the \
                         server key (appended by someone else)"
                    ),
                );
            }
        }
        self.prev = Some(stored.to_string());
        self.last_chained_seq = Some(row.seq);
        self.report.tail = Some((row.seq, stored.to_string()));
        if row.kind == records::CONTENT_PRUNED {
            self.content_pruned(row);
        } else {
            self.expected.chained(row);
        }
    }

    /// Check the other tables' rows (`tables`), the head and AUTOINCREMENT, and finish.
    pub fn finish(mut self) -> Report {
        self.deleted_rows();
        self.pre_chain_commitments();
        let last = self.last_chained_seq;
        let head = std::mem::replace(&mut self.head, HeadFile::Missing);
        match (&head, last) {
            (HeadFile::Missing, None) if self.report.events == 0 || self.head_may_be_missing => {}
            (HeadFile::Missing, None) => self.problem(
                Table::LedgerHead,
                "-".into(),
                None,
                "the signed head is missing but the ledger has rows (head deleted, \
                 hashes removed)"
                    .into(),
            ),
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
                if self.key.is_none() {
                    self.problem(
                        Table::LedgerHead,
                        id,
                        None,
                        "no server key to check the head's signature".into(),
                    );
                } else if self.trusted.is_none() {
                    self.problem(
                        Table::LedgerHead,
                        id,
                        None,
                        "signature is not the server key's".into(),
                    );
                } else if head.hash == GENESIS && head.start_seq.is_some() {
                    // Signed before anything was chained: every chained row is after it.
                } else {
                    match self.head_row.take() {
                        None | Some(None) => self.problem(
                            Table::LedgerHead,
                            id,
                            None,
                            "the row the head names is gone (newest rows dropped)".into(),
                        ),
                        Some(Some(stored)) if stored != head.hash => self.problem(
                            Table::LedgerHead,
                            id,
                            None,
                            "the row the head names has another hash (chain rewritten)".into(),
                        ),
                        Some(Some(_)) => {}
                    }
                }
            }
        }
        if let (Some(issued), Some(last)) = (self.issued, self.last_seq)
            && issued > last
        {
            self.problem(
                Table::Events,
                issued.to_string(),
                None,
                format!(
                    "seq {issued} was handed out but the newest row is {last} (newest rows deleted)"
                ),
            );
        }
        // The chain's own problems first: with the chain or head broken, what the tables'
        // rows disagree with follows from it.
        let table_row = |p: &Problem| !matches!(p.table, Table::Events | Table::LedgerHead);
        self.report.problems.sort_by_key(table_row);
        self.report
    }

    /// The rows before the chain against what the v3 head and the newest chained baseline
    /// commit to.
    fn pre_chain_commitments(&mut self) {
        let (count, digest) = self.report.pre_chain.clone();
        let head = self
            .trusted
            .as_ref()
            .and_then(|h| Some(("the signed head", h.pre_count?, h.pre_sha256.clone()?)));
        let baseline = self.expected.records.baseline.clone();
        let baseline = baseline
            .map(|(seq, c, d)| (format!("the chained `ledger_baseline` (seq {seq})"), c, d));
        let commitments = head
            .map(|(w, c, d)| (w.to_string(), c, d))
            .into_iter()
            .chain(baseline);
        for (by, committed, committed_digest) in commitments {
            self.report.pre_chain_committed = true;
            let what = if committed != count {
                format!(
                    "{count} row(s) from before the chain, but {by} commits to {committed}                      (pre-chain rows deleted or inserted)"
                )
            } else if committed_digest != digest {
                format!(
                    "the rows from before the chain differ from the digest {by} commits to                      (a pre-chain row edited)"
                )
            } else {
                continue;
            };
            self.problem(Table::Events, "pre-chain".into(), None, what);
            return;
        }
    }
}

#[cfg(feature = "sqlite")]
pub mod db;
mod records;
mod tables;
pub use records::{BASELINE, CONTENT_PRUNED, Columns, CoveredRow, ROWS_RECORDED, RowRecord};
pub use tables::{ActionRow, ReplyRow, SessionRow, TurnRow};

#[cfg(test)]
mod tests;
