//! The cross-check of the mutable tables against the chained events that recorded them: an
//! action's name, arguments (by SHA-256), state, recorded write intent and receipt; a reply's turn and text
//! (by its SHA-256); a session's profile and working directory; a turn's sequence. The events
//! are the record; a row that disagrees with them was edited.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{EventRow, RECEIPT_KINDS, Table, Verifier};

/// One `actions` row as stored (JSON columns as text).
#[derive(Debug, Clone, Default)]
pub struct ActionRow {
    pub action_id: String,
    pub session_id: String,
    pub turn_id: String,
    pub call_index: i64,
    pub name: String,
    pub arguments: String,
    pub state: String,
    pub outcome: Option<String>,
    pub prepared: Option<String>,
}

/// One `replies` row: its keys, its turn and its JSON `data`.
#[derive(Debug, Clone, Default)]
pub struct ReplyRow {
    pub session_id: String,
    pub reply_id: String,
    pub turn_id: String,
    pub request_hash: String,
    pub data: String,
}

/// One `sessions` row: its id, status and JSON `data`.
#[derive(Debug, Clone, Default)]
pub struct SessionRow {
    pub id: String,
    pub status: String,
    pub data: String,
}

/// One `turns` row.
#[derive(Debug, Clone, Default)]
pub struct TurnRow {
    pub turn_id: String,
    pub session_id: String,
    pub sequence: i64,
    pub fingerprint: String,
    pub status: String,
    pub data: String,
}

/// What the chained events recorded, by the row they are about.
#[derive(Default)]
pub(super) struct Expected {
    /// The receipt of the last chained receipt event per action.
    receipts: HashMap<String, Value>,
    /// Actions with a receipt event from before the chain.
    unchained_receipts: HashSet<String>,
    /// Sessions with rows from before the chain: only their rows may lack a chained event.
    unchained_sessions: HashSet<String>,
    /// Approved actions: session, name and the SHA-256 of the arguments' canonical JSON.
    approvals: HashMap<String, (Option<String>, String, Value)>,
    /// The state the last chained event about an action left it in.
    states: HashMap<String, String>,
    /// A write's recorded intent: path, pre and post SHA-256.
    intents: HashMap<String, [Value; 3]>,
    /// Replies by (session, reply id): turn id, the text's SHA-256 and the approved calls.
    replies: HashMap<(String, String), (String, String, Vec<Value>)>,
    /// Sessions: profile, source directory and frozen skills (ids and hashes).
    sessions: HashMap<String, [Value; 3]>,
    /// Turns: session and sequence.
    turns: HashMap<String, (Option<String>, i64)>,
    /// The chained records of the covered rows' columns.
    pub(super) records: super::records::Records,
}

/// The SHA-256 of a call's arguments (canonical JSON): computed from `arguments` where the
/// record holds them (events before hashes, and reply rows), else the recorded
/// `arguments_sha256` (events record arguments by hash and size, never whole).
fn arguments_sha256(call: &Value) -> Value {
    match call.get("arguments") {
        Some(arguments) => Value::String(crate::hash::canonical_sha256(arguments)),
        None => call.get("arguments_sha256").cloned().unwrap_or(Value::Null),
    }
}

/// A call's id, name and arguments' SHA-256 (what `reply_accepted` records of it).
fn call_summary(call: &Value) -> Value {
    let f = |k: &str| call.get(k).cloned().unwrap_or(Value::Null);
    serde_json::json!({"action_id": f("action_id"), "name": f("name"),
                       "arguments_sha256": arguments_sha256(call)})
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key)?.as_str().map(str::to_string)
}

impl Expected {
    /// A row from before the chain: only its receipt is noted (as not covered).
    pub(super) fn unchained(&mut self, row: &EventRow) {
        if let Some(session) = &row.session_id {
            self.unchained_sessions.insert(session.clone());
        }
        if RECEIPT_KINDS.contains(&row.kind.as_str())
            && let Some(action) = serde_json::from_str::<Value>(&row.data)
                .ok()
                .and_then(|d| text(&d, "action_id"))
        {
            self.unchained_receipts.insert(action);
        }
    }

    /// A chained row: what it says about other tables.
    pub(super) fn chained(&mut self, row: &EventRow) {
        let Ok(data) = serde_json::from_str::<Value>(&row.data) else {
            return;
        };
        if row.kind == super::records::ROWS_RECORDED || row.kind == super::records::BASELINE {
            let session = row.session_id.as_deref();
            return self.records.chained(row.seq, session, &row.kind, &data);
        }
        let session = row.session_id.clone();
        let action = text(&data, "action_id");
        if RECEIPT_KINDS.contains(&row.kind.as_str())
            && let Some(action) = &action
        {
            let receipt = data.get("receipt").cloned().unwrap_or(Value::Null);
            self.receipts.insert(action.clone(), receipt);
        }
        match (row.kind.as_str(), action) {
            ("reply_accepted", _) => {
                let actions = data.get("actions").and_then(Value::as_array);
                let calls = actions.cloned().unwrap_or_default();
                for approved in actions.into_iter().flatten() {
                    if let (Some(id), Some(name)) =
                        (text(approved, "action_id"), text(approved, "name"))
                    {
                        let arguments = arguments_sha256(approved);
                        self.approvals
                            .insert(id, (session.clone(), name, arguments));
                    }
                }
                if let (Some(s), Some(reply), Some(turn), Some(sha)) = (
                    session,
                    text(&data, "reply_id"),
                    text(&data, "turn_id"),
                    text(&data, "text_sha256"),
                ) {
                    self.replies.insert((s, reply), (turn, sha, calls));
                }
            }
            ("delegated_call_approved", Some(id)) => {
                if let Some(name) = text(&data, "name") {
                    let arguments = arguments_sha256(&data);
                    self.approvals.insert(id, (session, name, arguments));
                }
            }
            ("write_prepared", Some(id)) => {
                let field = |k: &str| data.get(k).cloned().unwrap_or(Value::Null);
                self.intents.insert(
                    id.clone(),
                    [field("path"), field("pre_sha256"), field("post_sha256")],
                );
                self.states.entry(id).or_insert_with(|| "prepared".into());
            }
            ("action_committed", Some(id)) => {
                self.states.insert(id, "committed".into());
            }
            ("write_not_applied", Some(id)) => {
                self.states.insert(id, "not_applied".into());
            }
            ("write_indeterminate", Some(id)) => {
                self.states.insert(id, "indeterminate".into());
            }
            ("write_resolved_after_crash", Some(id)) => {
                if let Some(state) = text(&data, "resolution") {
                    self.states.insert(id, state);
                }
            }
            ("session_started", _) => {
                if let Some(s) = session {
                    let field = |k: &str| data.get(k).cloned().unwrap_or(Value::Null);
                    // The event names the source directory `working_directory`, and leaves out
                    // an empty skill list.
                    let skills = data.get("skills").cloned().unwrap_or(Value::Array(vec![]));
                    self.sessions
                        .insert(s, [field("profile"), field("working_directory"), skills]);
                }
            }
            ("turn_pending", _) => {
                if let (Some(turn), Some(sequence)) = (
                    text(&data, "turn_id"),
                    data.get("sequence").and_then(Value::as_i64),
                ) {
                    self.turns.insert(turn, (session, sequence));
                }
            }
            _ => {}
        }
    }

    /// A row retention removed (a chained `content_pruned`): nothing said of it before is
    /// expected any more.
    pub(super) fn pruned(&mut self, (table, session, id): &(Table, String, String)) {
        match table {
            Table::Actions => {
                self.approvals.remove(id);
                self.states.remove(id);
                self.intents.remove(id);
                self.receipts.remove(id);
            }
            Table::Replies => {
                self.replies.remove(&(session.clone(), id.clone()));
            }
            Table::Turns => {
                self.turns.remove(id);
            }
            Table::Sessions | Table::Events | Table::LedgerHead | Table::Schema => {}
        }
    }

    /// The rows the chained events say exist: `(table, session, id)` and the event's kind.
    pub(super) fn existing(&self) -> Vec<((Table, String, String), String)> {
        let why = |kind: &str| format!("its chained `{kind}`");
        let mut out = Vec::new();
        for id in self.sessions.keys() {
            out.push((
                (Table::Sessions, id.clone(), id.clone()),
                why("session_started"),
            ));
        }
        for (id, (session, _, _)) in &self.approvals {
            let session = session.clone().unwrap_or_default();
            out.push(((Table::Actions, session, id.clone()), why("approval")));
        }
        for (session, reply) in self.replies.keys() {
            let key = (Table::Replies, session.clone(), reply.clone());
            out.push((key, why("reply_accepted")));
        }
        for (turn, (session, _)) in &self.turns {
            let session = session.clone().unwrap_or_default();
            out.push(((Table::Turns, session, turn.clone()), why("turn_pending")));
        }
        out
    }
}

impl Verifier {
    fn row_problem(&mut self, table: Table, id: &str, session: &str, what: impl Into<String>) {
        self.problem(table, id.to_string(), Some(session), what.into());
    }

    /// One action row, after all events: its approval, state, intent and receipt.
    pub fn action(&mut self, row: &ActionRow) {
        let (id, session) = (row.action_id.as_str(), row.session_id.as_str());
        self.expected.records.saw(Table::Actions, session, id);
        let covered = !self.expected.unchained_sessions.contains(session);
        let arguments = serde_json::from_str::<Value>(&row.arguments)
            .ok()
            .map(|a| Value::String(crate::hash::canonical_sha256(&a)));
        let mut checked = false;
        match self.expected.approvals.get(id).cloned() {
            Some((approved_in, name, approved)) => {
                checked = true;
                if approved_in.as_deref() != Some(session) {
                    return self.row_problem(
                        Table::Actions,
                        id,
                        session,
                        "session differs from the chained approval",
                    );
                }
                if name != row.name {
                    return self.row_problem(
                        Table::Actions,
                        id,
                        session,
                        "name differs from the chained approval",
                    );
                }
                if arguments.as_ref() != Some(&approved) {
                    return self.row_problem(
                        Table::Actions,
                        id,
                        session,
                        "arguments differ from the chained approval",
                    );
                }
            }
            None if covered => {
                return self.row_problem(
                    Table::Actions,
                    id,
                    session,
                    "no chained event approved it",
                );
            }
            None => {}
        }
        if let Some(state) = self.expected.states.get(id).cloned() {
            checked = true;
            if state != row.state {
                return self.row_problem(
                    Table::Actions,
                    id,
                    session,
                    format!(
                        "state `{}` differs from the chained ledger's `{state}`",
                        row.state
                    ),
                );
            }
        }
        if let Some(intent) = self.expected.intents.get(id).cloned() {
            checked = true;
            let stored = row
                .prepared
                .as_deref()
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .map(|p| {
                    ["path", "pre_sha256", "post_sha256"]
                        .map(|k| p.get(k).cloned().unwrap_or(Value::Null))
                });
            if stored.as_ref() != Some(&intent) {
                return self.row_problem(
                    Table::Actions,
                    id,
                    session,
                    "recorded write intent differs from the chained `write_prepared`",
                );
            }
        }
        if checked {
            self.report.rows_cross_checked += 1;
        }
        let Some(outcome) = row.outcome.as_deref() else {
            return;
        };
        let receipt = serde_json::from_str::<Value>(outcome)
            .ok()
            .and_then(|o| o.get("receipt").cloned());
        let Some(receipt) = receipt else {
            return self.row_problem(
                Table::Actions,
                id,
                session,
                "outcome has no readable receipt",
            );
        };
        match self.expected.receipts.get(id) {
            Some(recorded) if *recorded == receipt => self.report.receipts_checked += 1,
            Some(_) => self.row_problem(
                Table::Actions,
                id,
                session,
                "receipt differs from the one in the chained ledger",
            ),
            // Recorded before the chain, or settled by a gateway older than the chain: not
            // covered.
            None if self.expected.unchained_receipts.contains(id) || !covered => {
                self.report.receipts_unchained += 1;
            }
            None => self.row_problem(Table::Actions, id, session, "receipt has no ledger event"),
        }
    }

    /// One reply row: its turn and its text's SHA-256 against `reply_accepted`.
    pub fn reply(&mut self, row: &ReplyRow) {
        let key = (row.session_id.clone(), row.reply_id.clone());
        let (id, session) = (row.reply_id.as_str(), row.session_id.as_str());
        self.expected.records.saw(Table::Replies, session, id);
        let Some((turn, sha, approved)) = self.expected.replies.get(&key).cloned() else {
            if !self.expected.unchained_sessions.contains(session) {
                self.row_problem(
                    Table::Replies,
                    id,
                    session,
                    "no chained `reply_accepted` records it",
                );
            }
            return;
        };
        let data = serde_json::from_str::<Value>(&row.data).unwrap_or(Value::Null);
        let text = data.get("text").and_then(Value::as_str);
        // The calls as approved: id, name and arguments of each, in order.
        let calls: Option<Vec<Value>> = data
            .get("calls")
            .and_then(Value::as_array)
            .map(|calls| calls.iter().map(call_summary).collect());
        let approved: Vec<Value> = approved.iter().map(call_summary).collect();
        if turn != row.turn_id {
            self.row_problem(
                Table::Replies,
                id,
                session,
                "turn differs from the chained `reply_accepted`",
            );
        } else if text.map(|t| crate::hash::sha256_hex(t.as_bytes())) != Some(sha) {
            self.row_problem(
                Table::Replies,
                id,
                session,
                "text differs from the chained `reply_accepted` (its SHA-256)",
            );
        } else if calls.as_ref() != Some(&approved) {
            self.row_problem(
                Table::Replies,
                id,
                session,
                "calls differ from the chained `reply_accepted`",
            );
        } else {
            self.report.rows_cross_checked += 1;
        }
    }

    /// One session row: its profile, source directory, workspace (root and kind), working
    /// directory and skills against `session_started`.
    pub fn session(&mut self, row: &SessionRow) {
        self.expected.records.saw(Table::Sessions, &row.id, &row.id);
        let Some([profile, dir, skills]) = self.expected.sessions.get(&row.id).cloned() else {
            return;
        };
        let data = serde_json::from_str::<Value>(&row.data).unwrap_or(Value::Null);
        let field = |k: &str| data.get(k).cloned().unwrap_or(Value::Null);
        let stored_skills = data
            .get("skill_snapshot")
            .cloned()
            .unwrap_or(Value::Array(vec![]));
        let workspace = field("workspace");
        let part = |k: &str| workspace.get(k).cloned().unwrap_or(Value::Null);
        // The event names the source directory; the workspace and working directory follow
        // from it and the profile (a worktree session works in its own worktree).
        let kind = match profile.as_str() {
            Some("read_only") => "read_only",
            Some("direct_write") => "direct",
            _ => "worktree",
        };
        let working = if kind == "worktree" {
            part("worktree_path")
        } else {
            dir.clone()
        };
        let what = if field("profile") != profile {
            "profile differs from the chained `session_started`"
        } else if field("source_directory") != dir {
            "source directory differs from the chained `session_started`"
        } else if part("root") != dir || part("kind").as_str() != Some(kind) {
            "workspace differs from the chained `session_started` (its root or kind)"
        } else if field("working_directory") != working || working.is_null() {
            "working directory differs from the chained `session_started`"
        } else if stored_skills != skills {
            "skill snapshot differs from the chained `session_started`"
        } else {
            self.report.rows_cross_checked += 1;
            return;
        };
        self.row_problem(Table::Sessions, &row.id.clone(), &row.id, what);
    }

    /// One turn row: its session and sequence against `turn_pending`.
    pub fn turn(&mut self, row: &TurnRow) {
        self.expected
            .records
            .saw(Table::Turns, &row.session_id, &row.turn_id);
        let Some((session, sequence)) = self.expected.turns.get(&row.turn_id).cloned() else {
            return;
        };
        if session.as_deref() != Some(row.session_id.as_str()) || sequence != row.sequence {
            self.row_problem(
                Table::Turns,
                &row.turn_id,
                &row.session_id,
                "session or sequence differs from the chained `turn_pending`",
            );
        } else {
            self.report.rows_cross_checked += 1;
        }
    }
}
