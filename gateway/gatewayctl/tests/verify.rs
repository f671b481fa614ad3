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

/// The fixture (schema v1, unchained rows) migrated to v4, then six chained events of ACTIVE,
/// one approving an action, one its receipt (the action's row holds the same name, arguments
/// and receipt), and the signed head in its first format (no chain start).
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
    // The reply and the turn the chained events below record (the gateway writes each in the
    // transaction of its event).
    db.execute(
        "INSERT INTO replies (session_id, reply_id, turn_id, request_hash, created_at_ms, data)
         VALUES (?1, 'reply_1', 'turn_98334896db574baf877bdc5e238e421e', 'h1', ?2, ?3)",
        params![
            ACTIVE,
            T0,
            json!({"text": "reading", "calls": [
            {"action_id": ACT, "call_index": 0, "name": "Read", "arguments": {}}]})
            .to_string()
        ],
    )
    .unwrap();
    db.execute(
        "INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, data)
         VALUES ('turn_3', ?1, 3, 'fp_3', 'pending', ?2, '{}')",
        params![ACTIVE, T0],
    )
    .unwrap();
    let mut prev = GENESIS.to_string();
    let mut seq: i64 = db
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    let rows = [
        (
            "reply_accepted",
            json!({"turn_id": "turn_98334896db574baf877bdc5e238e421e", "reply_id": "reply_1",
                   "text_sha256": common::hash::sha256_hex(b"reading"),
                   "actions": [{"action_id": ACT, "name": "Read", "arguments": {}}]}),
        ),
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
    assert_eq!(v["report"]["chained_events"], 6);
    assert_eq!(v["report"]["receipts_checked"], 1);
    assert_eq!(v["report"]["rows_cross_checked"], 3);
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
    let (table, id, what) = first_problem(&fx);
    assert_eq!((table.as_str(), id), ("events", (seq + 1).to_string()));
    assert_eq!(what, format!("seq gap: rows {seq} to {seq} are missing"));
}

/// `chained()` with the head as the gateway writes it now: it names where the chain begins.
fn chained_v2() -> (Fixture, i64) {
    let fx = chained();
    let (start, seq, hash): (i64, i64, String) = fx
        .writer()
        .query_row(
            "SELECT (SELECT MIN(seq) FROM events WHERE hash IS NOT NULL), seq, hash
             FROM events ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let head = Head::anchored(KEY, start, seq, &hash);
    std::fs::write(fx.state.join(HEAD_FILE), head.to_text()).unwrap();
    (fx, start)
}

/// B1 of the outside attack: every hash removed (and a row edited) no longer passes as rows
/// from before the chain.
#[test]
fn hashes_removed_after_the_chain_start_are_named() {
    let (fx, start) = chained_v2();
    assert!(fx.json(Command::Verify)["ok"].as_bool().unwrap());
    attacker(&fx)
        .execute_batch(
            "UPDATE events SET hash = NULL;
             UPDATE events SET data = '{\"subtype\":\"error\",\"is_error\":true}'
             WHERE kind = 'runner_turn_ended';",
        )
        .unwrap();
    let (table, id, what) = first_problem(&fx);
    assert_eq!((table.as_str(), id), ("events", start.to_string()));
    assert_eq!(
        what,
        format!("no hash, but the signed chain begins at seq {start} (hash removed)")
    );
}

/// B2: the newest rows deleted without setting AUTOINCREMENT's counter back: both named.
#[test]
fn newest_rows_deleted_leave_a_handed_out_seq() {
    let (fx, _) = chained_v2();
    let seq = last_seq(&fx);
    attacker(&fx)
        .execute("DELETE FROM events WHERE seq = ?1", [seq])
        .unwrap();
    let v = fx.run(true, Command::Verify).0;
    let v: serde_json::Value = serde_json::from_str(&v).unwrap();
    let problems = v["report"]["problems"].as_array().unwrap();
    assert_eq!(problems[0]["table"], "ledger_head");
    assert_eq!(problems[1]["id"], seq.to_string());
    assert_eq!(
        problems[1]["what"],
        format!(
            "seq {seq} was handed out but the newest row is {} (newest rows deleted)",
            seq - 1
        )
    );
}

/// B4: the action's columns that its chained approval and receipt events cover.
#[test]
fn an_edited_action_name_arguments_or_state_is_named() {
    for (set, what) in [
        ("name = 'Write'", "name differs from the chained approval"),
        (
            "arguments = '{\"file_path\":\"/etc/passwd\"}'",
            "arguments differ from the chained approval",
        ),
        (
            "state = 'not_applied'",
            "state `not_applied` differs from the chained ledger's `committed`",
        ),
    ] {
        let fx = chained();
        fx.writer()
            .execute(
                &format!("UPDATE actions SET {set} WHERE action_id = ?1"),
                [ACT],
            )
            .unwrap();
        let problem = first_problem(&fx);
        assert_eq!(problem, ("actions".into(), ACT.into(), what.into()));
    }
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

/// Red team 23i B1: a second writer's rows pass the chain check, but the gateway latched the
/// ledger broken (`ledger-broken`) and refuses every change: verify says BROKEN with the
/// gateway's reason, never "ledger: OK", and fails.
#[test]
fn a_ledger_the_gateway_latched_broken_does_not_verify_ok() {
    let fx = chained();
    let why = "the newest ledger row is seq 10, but this gateway last appended seq 9 (rows \
               deleted, added or re-hashed)";
    std::fs::write(
        fx.state.join(common::ledger_chain::BROKEN_FILE),
        format!("{why}\n"),
    )
    .unwrap();
    let (text, result) = fx.run(false, Command::Verify);
    assert!(text.starts_with("ledger: BROKEN\n"), "{text}");
    assert!(
        text.contains(&format!(
            "  found broken    by the gateway (ledger-broken): {why}"
        )),
        "{text}"
    );
    assert!(
        text.contains("the rows and signatures check out now"),
        "{text}"
    );
    assert_eq!(
        result.unwrap_err(),
        "verify: the gateway found the ledger broken (ledger-broken); it refuses changes and \
         starts until that file is removed"
    );
    let (json, _) = fx.run(true, Command::Verify);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["latched_broken"], why, "{v}");
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

/// rt27 B2: the head deleted and every hash removed is not a ledger "from before the chain".
#[test]
fn a_deleted_head_with_stripped_hashes_is_named() {
    let fx = chained();
    attacker(&fx)
        .execute("UPDATE events SET hash = NULL", [])
        .unwrap();
    std::fs::remove_file(fx.state.join(HEAD_FILE)).unwrap();
    let (table, id, what) = first_problem(&fx);
    assert_eq!((table.as_str(), id.as_str()), ("ledger_head", "-"));
    assert!(
        what.starts_with("the signed head is missing but the ledger has rows"),
        "{what}"
    );
}
