//! `gatewayctl verify` and the broken-chain mark of `show` on fixture state dirs: a database
//! migrated from before the chain, then chained rows as the gateway appends them, then each kind
//! of tampering an attacker with write access to the database could do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use common::ledger_chain::{GENESIS, HEAD_FILE, Head, link_hash};
use gatewayctl::Command;
use rusqlite::params;
use serde_json::json;
use support::*;

const KEY: &str = "key_0123456789abcdef0123456789abcdef";
const ACT: &str = "act_77a0c5d8e9f04b1c8d2e3f4a5b6c7d8e";

/// The fixture (schema v1, unchained rows) migrated to v4, then five chained events of ACTIVE,
/// one of them the receipt of an action whose row holds the same receipt, and the signed head.
fn chained() -> Fixture {
    let fx = Fixture::new();
    let db = fx.writer();
    for sql in [
        common::state_schema::V2,
        common::state_schema::V3,
        common::state_schema::V4,
    ] {
        db.execute_batch(sql).unwrap();
    }
    db.pragma_update(None, "user_version", 4).unwrap();
    let receipt = json!({"action_id": ACT, "path": "/home/owner/project/a.txt",
                         "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
                         "duration_ms": 2});
    db.execute(
        "INSERT INTO actions (action_id, session_id, turn_id, call_index, name, arguments, state, outcome, updated_at_ms)
         VALUES (?1, ?2, 'turn_98334896db574baf877bdc5e238e421e', 0, 'Read', '{}', 'committed', ?3, ?4)",
        params![ACT, ACTIVE, json!({"status": "ok", "output": "x", "truncated": false, "receipt": receipt}).to_string(), T0],
    )
    .unwrap();
    let mut prev = GENESIS.to_string();
    let mut seq: i64 = db
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    let rows = [
        (
            "reply_delivered",
            json!({"turn_id": "turn_98334896db574baf877bdc5e238e421e"}),
        ),
        (
            "action_committed",
            json!({"action_id": ACT, "status": "ok", "receipt": receipt}),
        ),
        ("turn_pending", json!({"sequence": 3, "turn_id": "turn_3"})),
        ("reply_delivered", json!({"turn_id": "turn_3"})),
        (
            "runner_turn_ended",
            json!({"subtype": "success", "is_error": false}),
        ),
    ];
    for (i, (kind, data)) in rows.iter().enumerate() {
        seq += 1;
        let at = T0 + 20_000 + i as i64;
        let data = data.to_string();
        let hash = link_hash(&prev, seq, Some(ACTIVE), at, kind, &data);
        db.execute(
            "INSERT INTO events (seq, session_id, at_ms, kind, data, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![seq, ACTIVE, at, kind, data, hash],
        )
        .unwrap();
        prev = hash;
    }
    std::fs::write(
        fx.state.join(HEAD_FILE),
        Head::sign(KEY, seq, &prev).to_text(),
    )
    .unwrap();
    fx
}

/// A writer as an attacker opens it: the append-only triggers dropped first.
fn attacker(fx: &Fixture) -> rusqlite::Connection {
    let db = fx.writer();
    db.execute_batch("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;")
        .unwrap();
    db
}

fn last_seq(fx: &Fixture) -> i64 {
    fx.writer()
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap()
}

/// `verify --json`: fails, and its first problem as (table, id, what).
fn first_problem(fx: &Fixture) -> (String, String, String) {
    let (out, result) = fx.run(true, Command::Verify);
    assert!(result.is_err(), "verify passed: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    let p = &v["first_problem"];
    (
        p["table"].as_str().unwrap().to_string(),
        p["id"].as_str().unwrap().to_string(),
        p["what"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_database_from_before_the_chain_verifies_with_nothing_covered() {
    let fx = Fixture::new();
    insta::assert_snapshot!(fx.ok(false, Command::Verify));
}

#[test]
fn an_intact_chain_verifies() {
    let fx = chained();
    insta::assert_snapshot!(fx.ok(false, Command::Verify));
    let v = fx.json(Command::Verify);
    assert_eq!(v["ok"], true);
    assert_eq!(v["report"]["chained_events"], 5);
    assert_eq!(v["report"]["receipts_checked"], 1);
}

#[test]
fn an_edited_event_is_named() {
    let fx = chained();
    let seq = last_seq(&fx) - 2;
    attacker(&fx)
        .execute(
            "UPDATE events SET data = '{\"sequence\":3,\"turn_id\":\"turn_x\"}' WHERE seq = ?1",
            [seq],
        )
        .unwrap();
    let (table, id, what) = first_problem(&fx);
    assert_eq!((table.as_str(), id), ("events", seq.to_string()));
    assert!(what.contains("does not match"), "{what}");
    let (out, _) = fx.run(false, Command::Verify);
    insta::assert_snapshot!(out);
}

#[test]
fn a_deleted_event_is_named_by_its_successor() {
    let fx = chained();
    let seq = last_seq(&fx) - 2;
    attacker(&fx)
        .execute("DELETE FROM events WHERE seq = ?1", [seq])
        .unwrap();
    let (table, id, _) = first_problem(&fx);
    assert_eq!((table.as_str(), id), ("events", (seq + 1).to_string()));
}

#[test]
fn reordered_events_are_named() {
    let fx = chained();
    let seq = last_seq(&fx) - 1;
    let db = attacker(&fx);
    // Swap the two rows' contents, each keeping its hash.
    db.execute_batch(&format!(
        "UPDATE events SET seq = -1 WHERE seq = {seq};
         UPDATE events SET seq = {seq} WHERE seq = {};
         UPDATE events SET seq = {} WHERE seq = -1;",
        seq - 1,
        seq - 1
    ))
    .unwrap();
    let (table, id, _) = first_problem(&fx);
    assert_eq!((table.as_str(), id), ("events", (seq - 1).to_string()));
}

#[test]
fn dropping_the_newest_events_is_detected_by_the_signed_head() {
    let fx = chained();
    let seq = last_seq(&fx);
    attacker(&fx)
        .execute("DELETE FROM events WHERE seq >= ?1", [seq - 1])
        .unwrap();
    let (table, id, what) = first_problem(&fx);
    assert_eq!((table.as_str(), id), ("ledger_head", seq.to_string()));
    assert!(what.contains("dropped"), "{what}");
}

#[test]
fn a_rewritten_chain_does_not_match_the_signed_head() {
    let fx = chained();
    let db = attacker(&fx);
    db.execute(
        "UPDATE events SET data = '{\"subtype\":\"error\",\"is_error\":true}' WHERE seq = ?1",
        [last_seq(&fx)],
    )
    .unwrap();
    // Recompute every hash, as someone who knows the scheme but not the server key would.
    let mut prev = GENESIS.to_string();
    let rows: Vec<(i64, Option<String>, i64, String, String)> = db
        .prepare("SELECT seq, session_id, at_ms, kind, data FROM events WHERE hash IS NOT NULL ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (seq, session, at, kind, data) in rows {
        prev = link_hash(&prev, seq, session.as_deref(), at, &kind, &data);
        db.execute(
            "UPDATE events SET hash = ?2 WHERE seq = ?1",
            params![seq, prev],
        )
        .unwrap();
    }
    let (table, _, what) = first_problem(&fx);
    assert_eq!(table, "ledger_head");
    assert!(what.contains("another hash"), "{what}");
    // A head re-signed without the server key is refused too.
    let forged = Head::sign("not-the-key", last_seq(&fx), &prev);
    std::fs::write(fx.state.join(HEAD_FILE), forged.to_text()).unwrap();
    assert!(first_problem(&fx).2.contains("signature"));
}

#[test]
fn an_edited_receipt_is_named() {
    let fx = chained();
    attacker(&fx)
        .execute(
            "UPDATE actions SET outcome = json_set(outcome, '$.receipt.sha256', ?2) WHERE action_id = ?1",
            params![ACT, "00".repeat(32)],
        )
        .unwrap();
    let (table, id, what) = first_problem(&fx);
    assert_eq!((table.as_str(), id.as_str()), ("actions", ACT));
    assert!(what.contains("receipt differs"), "{what}");
}

#[test]
fn show_marks_a_session_whose_chain_is_broken() {
    let fx = chained();
    let show = |id: &str| Command::Show {
        id: id.to_string(),
        events: 1,
    };
    assert!(!fx.ok(false, show(ACTIVE)).contains("BROKEN"));
    let seq = last_seq(&fx) - 2;
    attacker(&fx)
        .execute("DELETE FROM events WHERE seq = ?1", [seq - 1])
        .unwrap();
    let text = fx.ok(false, show(ACTIVE));
    assert!(text.contains("LEDGER") && text.contains("BROKEN"), "{text}");
    assert!(fx.json(show(ACTIVE))["session"]["ledger_broken"].is_string());
    assert!(!fx.ok(false, show(IDLE)).contains("BROKEN"));
    assert!(
        fx.json(show(IDLE))["session"]
            .get("ledger_broken")
            .is_none()
    );
}

/// Hostile values in a tampered row (escape sequences, a bidi override, a newline followed by a
/// forged verdict) reach neither the terminal raw nor a line of their own.
#[test]
fn hostile_row_values_are_shown_escaped_on_one_line() {
    let fx = chained();
    let seq = last_seq(&fx) - 1;
    attacker(&fx)
        .execute(
            "UPDATE events SET session_id = ?1 WHERE seq = ?2",
            params![
                "ns_\u{1b}[2J\u{1b}]0;pwned\u{7}\nledger: OK\r\u{202e}\u{9b}",
                seq
            ],
        )
        .unwrap();
    for json in [false, true] {
        let (out, result) = fx.run(json, Command::Verify);
        assert!(result.is_err(), "{out}");
        for raw in ['\u{1b}', '\u{7}', '\r', '\u{202e}', '\u{9b}', '\u{7f}'] {
            assert!(!out.contains(raw), "{raw:?} reached the output: {out:?}");
        }
        assert!(
            !out.lines().any(|l| l.trim() == "ledger: OK"),
            "a forged line: {out}"
        );
    }
}
