//! Copies of covered facts in the session and turn rows (red team 27b R3): every field the
//! SessionView or `gatewayctl show` shows is covered by the chained records, so an edit of one
//! is named by the check the gateway's open and `gatewayctl verify` run; and the facts a session
//! starts with are the gateway's own, whatever a row edited while it runs says.

use rusqlite::Connection;
use serde_json::json;

use super::harness::{Harness, code};
use super::ledger_records::recorded;
use crate::error::ErrorCode;
use crate::state::DATABASE_FILE;
use crate::tools::PublicTool;

#[tokio::test]
async fn edits_of_shown_session_and_turn_fields_are_named() {
    let r = recorded().await;
    let (s, t) = (&r.session, &r.turn);
    let set = |path: &str, value: &str| {
        format!(
            "UPDATE sessions SET data = json_set(data, '{path}', json('{value}')) WHERE id = '{s}'"
        )
    };
    let cases = [
        (
            set(
                "$.last_result",
                r#"{"turn_id":"t","text":"forged","at":"x"}"#,
            ),
            "last_result",
        ),
        (
            set("$.stop_request", r#"{"reason":"forged","at":"x"}"#),
            "stop_request",
        ),
        (set("$.terminal", r#"{"reason":"forged"}"#), "terminal"),
        (
            set("$.network_boundary", r#"{"network":"open"}"#),
            "network_boundary",
        ),
        (
            set("$.pending_turn_id", r#""turn_forged""#),
            "pending_turn_id",
        ),
        (
            set("$.claude_session_id", r#""forged""#),
            "claude_session_id",
        ),
        (set("$.recovery_required", "true"), "recovery_required"),
        (set("$.current_run", "null"), "current_run"),
        (set("$.launch_error", r#"{"code":"x"}"#), "launch_error"),
        // The status copy the record is loaded from, beside the covered `status` column.
        (set("$.status", r#""stopped""#), "other"),
        // A field nobody named: covered by default.
        (set("$.invented", "1"), "other"),
    ];
    for (sql, column) in cases {
        let found = r.tampered(&sql).unwrap_or_default();
        let named = format!("sessions {s}: column `{column}` differs");
        assert!(found.starts_with(&named), "{sql}: {found}");
    }
    let turn = |path: &str, value: &str| {
        format!(
            "UPDATE turns SET data = json_set(data, '{path}', json('{value}')) WHERE turn_id = '{t}'"
        )
    };
    for (sql, column) in [
        (turn("$.notice", r#""forged""#), "notice"),
        (turn("$.sequence", "99"), "other"),
    ] {
        let found = r.tampered(&sql).unwrap_or_default();
        let named = format!("turns {t}: column `{column}` differs");
        assert!(found.starts_with(&named), "{sql}: {found}");
    }
    // What the gateway itself moves every call is not recorded, and not shown as a fact.
    assert_eq!(r.tampered(&set("$.lease_expires_at_ms", "1")), None);
    // Committed, the gateway's next open refuses, naming the same column.
    let db = Connection::open(r.state_dir().join(DATABASE_FILE)).unwrap();
    db.execute_batch(&set(
        "$.last_result",
        r#"{"turn_id":"t","text":"forged","at":"x"}"#,
    ))
    .unwrap();
    match crate::state::Store::open(&r.state_dir()) {
        Err(crate::state::StoreError::LedgerBroken(why)) => assert!(
            why.starts_with(&format!("sessions {s}: column `last_result` differs")),
            "{why}"
        ),
        other => panic!("expected LedgerBroken, got {:?}", other.err()),
    }
}

/// A session row edited or added behind the running gateway's back (red team 27c B2) is
/// refused at the next call, before anything built on it is served, and every call after it.
#[tokio::test]
async fn a_session_edited_or_added_while_the_gateway_runs_is_refused_not_served() {
    for tamper in [
        "UPDATE sessions SET data = json_set(data, '$.profile', 'direct_write') WHERE id = ?1",
        "UPDATE sessions SET data = json_set(data, '$.last_result', \
         json('{\"turn_id\":\"t\",\"text\":\"forged\",\"at\":\"x\"}')) WHERE id = ?1",
        "INSERT INTO sessions SELECT 'ns_forged', status, revision, created_at_ms, \
         updated_at_ms, json_set(data, '$.id', 'ns_forged') FROM sessions WHERE id = ?1",
    ] {
        let h = Harness::new();
        let view = h.start().await;
        let pid = h.pid(&view);
        h.runner_asks(pid, "f1").await;
        let id = view.native_session_id.clone();
        let db = Connection::open(h.gateway.config.state_dir.join(DATABASE_FILE)).unwrap();
        db.execute(tamper, [&id]).unwrap();
        assert_eq!(
            code(h.status(&view).await),
            ErrorCode::LedgerBroken,
            "{tamper}"
        );
        let forged = h
            .call(
                PublicTool::Status,
                json!({"native_session_id": "ns_forged", "lease_id": view.lease_id}),
            )
            .await;
        assert_eq!(code(forged), ErrorCode::LedgerBroken, "{tamper}");
    }
}
