//! The cross-check of the covered tables against the chained ledger, both ways, on rows a real
//! session wrote (issue 27): each deleted, invented or edited row is named with its table, id
//! and column by the check the gateway runs at open and `gatewayctl verify` runs
//! (`common::ledger_chain::db::check`); rows from before the chain are committed to by the
//! signed head and the baseline.

use common::ledger_chain::{Head, Verifier};
use common::tools::{ActionOutcome, Receipt, ToolStatus};
use rusqlite::Connection;
use serde_json::json;

use super::harness::{Harness, results_turn};
use crate::state::{DATABASE_FILE, Store, StoreError};

/// What a real session leaves: a session, two turns, a reply approving one Read, its action
/// with an outcome. Returns the state dir and the ids.
pub(super) struct Recorded {
    pub(super) h: Harness,
    pub(super) session: String,
    pub(super) turn: String,
    pub(super) action: String,
    /// The session's view with its lease, as the reply left it.
    pub(super) view: crate::view::SessionView,
}

pub(super) async fn recorded() -> Recorded {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let view = h.status(&view).await.unwrap();
    let turn = view.pending_turn.as_ref().unwrap().turn_id.clone();
    let path = h.project.join("a.txt");
    let calls = json!([{"name": "Read", "arguments": {"file_path": path}}]);
    h.reply(&view, "r1", "reading", calls).await.unwrap();
    let action = h.next_reply(pid).await.calls[0].action_id.clone();
    h.event(pid, 3, super::harness::read_finished(&action, "hello"))
        .await;
    h.event(pid, 4, results_turn("f2")).await;
    h.gateway.store.flush_head();
    Recorded {
        session: view.native_session_id.clone(),
        h,
        turn,
        action,
        view,
    }
}

impl Recorded {
    pub(super) fn state_dir(&self) -> std::path::PathBuf {
        self.h.gateway.config.state_dir.clone()
    }

    /// Apply `sql` as an attacker would, run the check on what it left, and undo it: the
    /// first problem, as the gateway's refusal words it.
    pub(super) fn tampered(&self, sql: &str) -> Option<String> {
        first_problem(&self.state_dir(), Some(sql))
    }
}

/// The check of the state dir (with `sql` applied in a transaction that is rolled back).
pub(super) fn first_problem(dir: &std::path::Path, sql: Option<&str>) -> Option<String> {
    let db = Connection::open(dir.join(DATABASE_FILE)).unwrap();
    let key = std::fs::read_to_string(dir.join("auth/server-key")).unwrap();
    let mut v = Verifier::new(Head::read(dir), Some(key.trim()));
    // An attacker's connection: no foreign keys enforced.
    db.execute_batch("PRAGMA foreign_keys = OFF; BEGIN")
        .unwrap();
    if let Some(sql) = sql {
        db.execute_batch(
            "DROP TRIGGER IF EXISTS events_no_update; DROP TRIGGER IF EXISTS events_no_delete;",
        )
        .unwrap();
        db.execute_batch(sql).unwrap();
    }
    common::ledger_chain::db::check(&db, &mut v).unwrap();
    db.execute_batch("ROLLBACK").unwrap();
    let report = v.finish();
    report.problems.first().map(|p| {
        let table = serde_json::to_value(p.table).unwrap();
        format!("{} {}: {}", table.as_str().unwrap(), p.id, p.what)
    })
}

#[tokio::test]
async fn a_real_session_verifies_and_its_deleted_rows_are_named() {
    let r = recorded().await;
    assert_eq!(first_problem(&r.state_dir(), None), None);
    let (s, t, a) = (&r.session, &r.turn, &r.action);
    let cases = [
        (
            format!("DELETE FROM sessions WHERE id = '{s}'"),
            format!("sessions {s}: row deleted"),
        ),
        (
            format!("DELETE FROM turns WHERE turn_id = '{t}'"),
            format!("turns {t}: row deleted"),
        ),
        (
            "DELETE FROM replies WHERE reply_id = 'r1'".into(),
            "replies r1: row deleted".into(),
        ),
        (
            format!("DELETE FROM actions WHERE action_id = '{a}'"),
            format!("actions {a}: row deleted"),
        ),
    ];
    for (sql, named) in cases {
        let found = r.tampered(&sql).unwrap_or_default();
        assert!(found.starts_with(&named), "{sql}: {found}");
    }
}

#[tokio::test]
async fn invented_rows_of_each_kind_are_named() {
    let r = recorded().await;
    let (s, t, a) = (&r.session, &r.turn, &r.action);
    let cases = [
        (
            format!(
                "INSERT INTO sessions SELECT 'ns_forged', status, revision, created_at_ms, \
                 updated_at_ms, data FROM sessions WHERE id = '{s}'"
            ),
            "sessions ns_forged: no chained record of this row",
        ),
        (
            format!(
                "INSERT INTO turns SELECT 'turn_forged', session_id, 99, 'fp_forged', status, \
                 created_at_ms, data FROM turns WHERE turn_id = '{t}'"
            ),
            "turns turn_forged: no chained record of this row",
        ),
        (
            "INSERT INTO replies SELECT session_id, 'r_forged', turn_id, request_hash, \
             created_at_ms, data FROM replies WHERE reply_id = 'r1'"
                .to_string(),
            "replies r_forged: no chained record of this row",
        ),
        (
            format!(
                "INSERT INTO actions (action_id, session_id, turn_id, call_index, name, \
                 arguments, state, outcome, updated_at_ms, prepared) SELECT 'act_forged', \
                 session_id, turn_id, 1, name, arguments, 'approved', NULL, updated_at_ms, NULL \
                 FROM actions WHERE action_id = '{a}'"
            ),
            "actions act_forged: no chained record of this row",
        ),
    ];
    for (sql, named) in cases {
        let found = r.tampered(&sql).unwrap_or_default();
        assert!(found.starts_with(named), "{sql}: {found}");
    }
}

#[tokio::test]
async fn edited_columns_are_named() {
    let r = recorded().await;
    let (s, t, a) = (&r.session, &r.turn, &r.action);
    let session = |set: &str| format!("UPDATE sessions SET {set} WHERE id = '{s}'");
    let json =
        |path: &str, value: &str| session(&format!("data = json_set(data, '{path}', '{value}')"));
    let cases = [
        (
            format!(
                "UPDATE actions SET outcome = json_set(outcome, '$.output', 'forged') \
                 WHERE action_id = '{a}'"
            ),
            format!("actions {a}: column `outcome` differs"),
        ),
        (
            "UPDATE replies SET data = json_set(data, '$.calls[0].arguments.file_path', \
             '/etc/shadow') WHERE reply_id = 'r1'"
                .into(),
            "replies r1: column `calls` differs".into(),
        ),
        (
            format!(
                "UPDATE turns SET data = json_set(data, '$.body.text', 'forged') \
                 WHERE turn_id = '{t}'"
            ),
            format!("turns {t}: column `body` differs"),
        ),
        (
            session("status = 'idle'"),
            format!("sessions {s}: column `status` differs"),
        ),
        (
            json("$.label", "forged"),
            format!("sessions {s}: column `label` differs"),
        ),
        (
            json("$.subagent_policy", "deepseek"),
            format!("sessions {s}: column `subagent_policy` differs"),
        ),
        (
            json("$.workspace.worktree_path", "/tmp/elsewhere"),
            format!("sessions {s}: column `worktree_path` differs"),
        ),
    ];
    for (sql, named) in cases {
        let found = r.tampered(&sql).unwrap_or_default();
        assert!(found.starts_with(&named), "{sql}: {found}");
    }
    // Committed, the gateway's next open refuses with the same finding.
    let db = Connection::open(r.state_dir().join(DATABASE_FILE)).unwrap();
    db.execute_batch(&session("status = 'idle'")).unwrap();
    match Store::open(&r.state_dir()) {
        Err(StoreError::LedgerBroken(why)) => assert!(
            why.starts_with(&format!("sessions {s}: column `status` differs")),
            "{why}"
        ),
        other => panic!("expected LedgerBroken, got {:?}", other.err()),
    }
}

/// A state dir whose database predates the chain (schema 3) with two events and a session:
/// the first open records the baseline and commits the head to the pre-chain rows; it then
/// verifies, and an edited or deleted pre-chain row is named.
#[test]
fn pre_chain_rows_are_committed_to_by_the_head() {
    let dir = tempfile::tempdir().unwrap();
    crate::state::database_before_the_chain(
        dir.path(),
        "INSERT INTO events (session_id, at_ms, kind, data) VALUES ('ns_a', 1, 'old', '{}');
         INSERT INTO events (session_id, at_ms, kind, data) VALUES ('ns_a', 2, 'old', '{}');
         INSERT INTO sessions VALUES ('ns_a', 'stopped', 3, 1, 2, '{\"label\":\"old\"}');",
    );
    let store = Store::open(dir.path()).unwrap();
    store.flush_head();
    drop(store);
    let head = Head::parse(&std::fs::read_to_string(dir.path().join("ledger-head")).unwrap());
    assert_eq!(head.unwrap().pre_count, Some(2));
    assert_eq!(first_problem(dir.path(), None), None);
    let edited = first_problem(
        dir.path(),
        Some("UPDATE events SET data = '{\"x\":1}' WHERE seq = 1"),
    );
    assert!(
        edited.as_deref().unwrap_or_default().starts_with(
            "events pre-chain: the rows from before the chain differ from the digest the signed head"
        ),
        "{edited:?}"
    );
    let deleted = first_problem(dir.path(), Some("DELETE FROM events WHERE seq = 1"));
    assert!(
        deleted.as_deref().unwrap_or_default().starts_with(
            "events pre-chain: 1 row(s) from before the chain, but the signed head commits to 2"
        ),
        "{deleted:?}"
    );
    let label = first_problem(
        dir.path(),
        Some("UPDATE sessions SET data = '{\"label\":\"new\"}' WHERE id = 'ns_a'"),
    );
    assert!(
        label
            .as_deref()
            .unwrap_or_default()
            .starts_with("sessions ns_a: column `label` differs"),
        "{label:?}"
    );
    // The next open accepts it as it is and appends after it.
    let store = Store::open(dir.path()).unwrap();
    store
        .write::<_, StoreError>(|tx| tx.append_event(Some("ns_a"), "new", &json!({})))
        .unwrap();
    store.flush_head();
    drop(store);
    assert_eq!(first_problem(dir.path(), None), None);
}

/// Open time on a ledger of ~10k events as real turns leave them (a turn, a reply approving two
/// Reads, their outcomes, the session's status moves):
/// `cargo test -p gateway --lib -- --ignored open_cost --nocapture`. With
/// `NGW_OPEN_COST_DIR` set, the state dir is copied there (to time `gatewayctl verify` on it).
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn open_cost() {
    use crate::state::{
        ActionRecord, ActionState, ReplyRecord, SessionStatus, TurnBody, TurnRecord, TurnStatus,
    };
    let r = recorded().await;
    let store = &r.h.gateway.store;
    let s = r.session.clone();
    let mut session = store
        .read::<_, StoreError>(|tx| tx.session(&s))
        .unwrap()
        .unwrap();
    let counter = Connection::open(r.state_dir().join(DATABASE_FILE)).unwrap();
    let events = |_: &Store| -> i64 {
        counter
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
            .unwrap()
    };
    let mut round = 0u64;
    while events(store) < 10_000 {
        round += 1;
        let turn_id = format!("turn_cost_{round}");
        let mut turn = TurnRecord {
            turn_id: turn_id.clone(),
            session_id: s.clone(),
            sequence: 100 + round,
            fingerprint: format!("fp_{round}"),
            status: TurnStatus::Pending,
            created_at_ms: 1,
            body: TurnBody::Prompt {
                text: format!("prompt {round}"),
                interrupted_turn_id: None,
            },
            reply_id: None,
            notice: None,
        };
        store
            .write::<_, StoreError>(|tx| {
                tx.put_turn(&turn)?;
                session.status = SessionStatus::WaitingForGpt;
                tx.put_session(&session)?;
                let data = json!({"turn_id": turn_id, "sequence": turn.sequence});
                tx.append_event(Some(&s), "turn_pending", &data)
            })
            .unwrap();
        let reply_id = format!("reply_cost_{round}");
        let calls: Vec<common::protocol::ApprovedCall> = (0..2)
            .map(|i| {
                serde_json::from_value(json!({"action_id": format!("act_{round}_{i}"),
                    "call_index": i, "name": "Read", "arguments": {"file_path": "/p/a"}}))
                .unwrap()
            })
            .collect();
        store
            .write::<_, StoreError>(|tx| {
                turn.status = TurnStatus::Answered;
                turn.reply_id = Some(reply_id.clone());
                tx.put_turn(&turn)?;
                tx.insert_reply(&ReplyRecord {
                    session_id: s.clone(),
                    reply_id: reply_id.clone(),
                    turn_id: turn_id.clone(),
                    request_hash: "h".into(),
                    text: "read".into(),
                    calls: calls.clone(),
                    created_at_ms: 1,
                })?;
                for call in &calls {
                    tx.put_action(&ActionRecord::approved(call, &s, &turn_id))?;
                }
                session.status = SessionStatus::Running;
                tx.put_session(&session)?;
                let actions: Vec<_> = calls
                    .iter()
                    .map(|c| json!({"action_id": c.action_id, "name": c.name, "arguments": c.arguments}))
                    .collect();
                let sha = common::hash::sha256_hex(b"read");
                let data = json!({"turn_id": turn_id, "reply_id": reply_id,
                                  "text_sha256": sha, "actions": actions});
                tx.append_event(Some(&s), "reply_accepted", &data)?;
                tx.append_event(Some(&s), "reply_delivered", &json!({"turn_id": turn_id}))
            })
            .unwrap();
        store
            .write::<_, StoreError>(|tx| {
                for call in &calls {
                    let receipt = Receipt {
                        action_id: call.action_id.clone(),
                        duration_ms: 1,
                        ..Receipt::default()
                    };
                    let mut action = ActionRecord::approved(call, &s, &turn_id);
                    action.state = ActionState::Committed;
                    action.outcome = Some(ActionOutcome {
                        status: ToolStatus::Ok,
                        output: "x".repeat(200),
                        truncated: false,
                        error_code: None,
                        receipt: receipt.clone(),
                    });
                    tx.put_action(&action)?;
                    let data = json!({"action_id": call.action_id, "status": "ok",
                                      "receipt": receipt});
                    tx.append_event(Some(&s), "action_committed", &data)?;
                }
                session.status = SessionStatus::Idle;
                tx.put_session(&session)?;
                let data = json!({"subtype": "success", "is_error": false});
                tx.append_event(Some(&s), "runner_turn_ended", &data)
            })
            .unwrap();
    }
    store.flush_head();
    let n = events(store);
    let dir = r.state_dir();
    assert_eq!(first_problem(&dir, None), None);
    if let Ok(to) = std::env::var("NGW_OPEN_COST_DIR") {
        let db = Connection::open(dir.join(DATABASE_FILE)).unwrap();
        db.execute("VACUUM INTO ?1", [format!("{to}/{DATABASE_FILE}")])
            .unwrap();
        for file in ["ledger-head", "auth/server-key"] {
            std::fs::create_dir_all(std::path::Path::new(&to).join("auth")).unwrap();
            std::fs::copy(dir.join(file), std::path::Path::new(&to).join(file)).unwrap();
        }
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let opened = Store::open(&dir).unwrap();
        times.push(started.elapsed());
        opened.flush_head();
    }
    times.sort();
    println!(
        "{n} events, {round} rounds: Store::open median {:?}",
        times[2]
    );
}
