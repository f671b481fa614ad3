//! Tests of the ledger chain: canonical bytes, each kind of tampering, rows before the chain,
//! receipts.

use super::*;

fn chain(n: i64) -> Vec<EventRow> {
    let mut prev = GENESIS.to_string();
    (1..=n)
        .map(|seq| {
            let session = Some(format!("ns_{}", seq % 2));
            let data = format!(r#"{{"n":{seq}}}"#);
            let hash = link_hash(&prev, seq, session.as_deref(), 1000 + seq, "k", &data);
            prev = hash.clone();
            EventRow {
                seq,
                session_id: session,
                at_ms: 1000 + seq,
                kind: "k".into(),
                data,
                hash: Some(hash),
                mac: None,
            }
        })
        .collect()
}

fn check(rows: &[EventRow], head: &HeadFile) -> Report {
    let mut v = Verifier::new(head.clone(), Some("key"));
    for row in rows {
        v.event(row);
    }
    v.finish()
}

fn head_of(rows: &[EventRow]) -> HeadFile {
    let last = rows.last().unwrap();
    HeadFile::Present(Head::sign("key", last.seq, last.hash.as_deref().unwrap()))
}

#[test]
fn canonical_bytes_separate_fields_unambiguously() {
    assert_ne!(
        canonical_bytes(1, Some("a"), 2, "bc", "d"),
        canonical_bytes(1, Some("ab"), 2, "c", "d")
    );
    assert_ne!(
        canonical_bytes(1, None, 2, "k", "d"),
        canonical_bytes(1, Some(""), 2, "k", "d")
    );
}

#[test]
fn an_intact_chain_verifies() {
    let rows = chain(5);
    let report = check(&rows, &head_of(&rows));
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.chained_events, 5);
}

#[test]
fn edits_deletions_reorders_and_truncation_are_named() {
    let rows = chain(5);
    let head = head_of(&rows);
    let mut edited = rows.clone();
    edited[2].data = r#"{"n":99}"#.into();
    let first = &check(&edited, &head).problems[0];
    assert_eq!((first.table, first.id.as_str()), (Table::Events, "3"));

    let mut deleted = rows.clone();
    deleted.remove(1);
    assert_eq!(check(&deleted, &head).problems[0].id, "3");

    let mut reordered = rows.clone();
    reordered.swap(1, 2);
    assert_eq!(check(&reordered, &head).problems[0].id, "3");

    let truncated = &rows[..4];
    let problem = &check(truncated, &head).problems[0];
    assert_eq!(problem.table, Table::LedgerHead);
    assert!(problem.what.contains("dropped"), "{problem:?}");

    let forged = HeadFile::Present(Head {
        mac: "00".into(),
        ..Head::sign("key", 4, rows[3].hash.as_deref().unwrap())
    });
    assert!(
        check(truncated, &forged).problems[0]
            .what
            .contains("signature")
    );
    assert!(!check(&rows, &HeadFile::Missing).ok());
}

/// rt27 B1: a row "from before the chain" at seq 0 (AUTOINCREMENT never hands it out) is named;
/// a hash removed after the chain began is not "before the chain" either.
#[test]
fn an_unhashed_row_below_seq_1_is_named() {
    let mut rows = chain(3);
    let old = EventRow {
        seq: 0,
        session_id: None,
        at_ms: 1,
        kind: "migrated".into(),
        data: "{}".into(),
        hash: None,
        mac: None,
    };
    rows.insert(0, old.clone());
    let report = check(&rows, &head_of(&rows));
    let p = &report.problems[0];
    assert_eq!((&p.table, p.id.as_str()), (&Table::Events, "0"));
    assert_eq!(
        p.what,
        "no hash and a seq below 1 (inserted, not from before the chain)"
    );
    rows.push(EventRow { seq: 9, ..old });
    assert!(!check(&rows[1..], &head_of(&rows[1..4])).ok());
}

/// rt27 B2: a ledger with rows and no signed head is broken (head deleted, hashes nulled),
/// unless it was migrated from before the chain just now.
#[test]
fn rows_without_a_head_are_named_unless_just_migrated() {
    let rows: Vec<EventRow> = chain(2)
        .into_iter()
        .map(|r| EventRow { hash: None, ..r })
        .collect();
    let report = check(&rows, &HeadFile::Missing);
    let p = &report.problems[0];
    assert_eq!((&p.table, p.id.as_str()), (&Table::LedgerHead, "-"));
    assert!(
        p.what
            .starts_with("the signed head is missing but the ledger has rows")
    );
    let mut v = Verifier::new(HeadFile::Missing, Some("key"));
    v.head_may_be_missing();
    rows.iter().for_each(|r| v.event(r));
    let report = v.finish();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.unchained_events, 2);
}

/// rt27 B1: a row from before the chain exempts only its own session's rows from the "no
/// chained event" checks, never every row.
#[test]
fn a_pre_chain_row_does_not_switch_off_the_existence_checks() {
    let old = EventRow {
        seq: 1,
        session_id: Some("ns_old".into()),
        at_ms: 1,
        kind: "old".into(),
        data: "{}".into(),
        hash: None,
        mac: None,
    };
    let forged = ActionRow {
        action_id: "a9".into(),
        ..action(COMMITTED)
    };
    let mut v = Verifier::new(HeadFile::Missing, Some("key"));
    v.head_may_be_missing();
    v.event(&old);
    v.action(&forged);
    v.action(&ActionRow {
        session_id: "ns_old".into(),
        ..forged.clone()
    });
    let report = v.finish();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert_eq!((&p.table, p.id.as_str()), (&Table::Actions, "a9"));
    assert_eq!(p.what, "no chained event approved it");
}

/// Chained rows `(kind, data)` of session `ns_1`, from seq 1.
fn rows_of(events: &[(&str, &str)]) -> Vec<EventRow> {
    let mut prev = GENESIS.to_string();
    events
        .iter()
        .zip(1..)
        .map(|((kind, data), seq)| {
            let hash = link_hash(&prev, seq, Some("ns_1"), 5, kind, data);
            prev.clone_from(&hash);
            EventRow {
                seq,
                session_id: Some("ns_1".into()),
                at_ms: 5,
                kind: (*kind).into(),
                data: (*data).into(),
                hash: Some(hash),
                mac: None,
            }
        })
        .collect()
}

const APPROVED: &str = r#"{"turn_id":"t1","reply_id":"r1","text_sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","actions":[{"action_id":"a1","name":"Read","arguments":{"file_path":"/p/a"}}]}"#;
const COMMITTED: &str =
    r#"{"action_id":"a1","status":"ok","receipt":{"action_id":"a1","duration_ms":3}}"#;

fn action(outcome: &str) -> ActionRow {
    ActionRow {
        action_id: "a1".into(),
        session_id: "ns_1".into(),
        turn_id: "t1".into(),
        call_index: 0,
        name: "Read".into(),
        arguments: r#"{"file_path":"/p/a"}"#.into(),
        state: "committed".into(),
        outcome: Some(outcome.into()),
        prepared: None,
    }
}

fn check_tables(action_row: &ActionRow, reply_text: &str) -> Report {
    let rows = rows_of(&[
        ("reply_accepted", APPROVED),
        ("action_committed", COMMITTED),
    ]);
    let mut v = Verifier::new(head_of(&rows), Some("key"));
    rows.iter().for_each(|r| v.event(r));
    v.action(action_row);
    v.reply(&ReplyRow {
        session_id: "ns_1".into(),
        reply_id: "r1".into(),
        turn_id: "t1".into(),
        request_hash: "h".into(),
        data: serde_json::json!({ "text": reply_text, "calls": [
            {"action_id": "a1", "call_index": 0, "name": "Read", "arguments": {"file_path": "/p/a"}}
        ] })
        .to_string(),
    });
    v.finish()
}

#[test]
fn receipts_must_match_the_chained_event() {
    let good = check_tables(
        &action(r#"{"status":"ok","receipt":{"duration_ms":3,"action_id":"a1"}}"#),
        "hello",
    );
    assert!(good.ok(), "{:?}", good.problems);
    assert_eq!((good.receipts_checked, good.rows_cross_checked), (1, 2));
    let bad = check_tables(
        &action(r#"{"status":"ok","receipt":{"action_id":"a1","duration_ms":4}}"#),
        "hello",
    );
    assert_eq!(bad.problems[0].table, Table::Actions);
    assert!(bad.broken_sessions.contains("ns_1"));
}

/// B4: every column an event covers is compared, and the row is named.
#[test]
fn action_and_reply_columns_must_match_their_events() {
    let outcome = r#"{"status":"ok","receipt":{"duration_ms":3,"action_id":"a1"}}"#;
    let what = |row: ActionRow, text: &str| {
        let report = check_tables(&row, text);
        let p = report.problems.first().cloned().unwrap();
        (p.table, p.id, p.what)
    };
    let renamed = ActionRow {
        name: "Write".into(),
        ..action(outcome)
    };
    assert_eq!(
        what(renamed, "hello").2,
        "name differs from the chained approval"
    );
    let moved = ActionRow {
        arguments: r#"{"file_path":"/etc/x"}"#.into(),
        ..action(outcome)
    };
    assert!(what(moved, "hello").2.contains("arguments differ"));
    let state = ActionRow {
        state: "not_applied".into(),
        ..action(outcome)
    };
    assert!(what(state, "hello").2.contains("state `not_applied`"));
    let (table, id, text) = what(action(outcome), "goodbye");
    assert_eq!((table, id.as_str()), (Table::Replies, "r1"));
    assert!(text.contains("text differs"), "{text}");
}

fn signed(mut rows: Vec<EventRow>, key: &str) -> Vec<EventRow> {
    for row in &mut rows {
        row.mac = row.hash.as_deref().map(|h| row_mac(key, row.seq, h));
    }
    rows
}

/// B1: with a v2 head, a row from the chain start on without a hash is broken, even when every
/// hash was removed.
#[test]
fn hashes_removed_after_the_signed_chain_start_are_named() {
    let mut rows = chain(4);
    let head = HeadFile::Present(Head::anchored(
        "key",
        1,
        4,
        rows[3].hash.as_deref().unwrap(),
    ));
    assert!(check(&rows, &head).ok());
    for row in &mut rows {
        row.hash = None;
    }
    let first = &check(&rows, &head).problems[0];
    assert_eq!((first.table, first.id.as_str()), (Table::Events, "1"));
    assert!(first.what.contains("chain begins at seq 1"), "{first:?}");
}

/// Rows after the head are accepted only with the server key's row signature; seq gaps and
/// handed-out seqs past the newest row are named.
#[test]
fn rows_after_the_head_gaps_and_issued_seqs() {
    let rows = signed(chain(5), "key");
    let head = HeadFile::Present(Head::anchored(
        "key",
        1,
        3,
        rows[2].hash.as_deref().unwrap(),
    ));
    let report = check(&rows, &head);
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.rows_after_head, 2);
    let forged = signed(chain(5), "not-the-key");
    let first = &check(&forged, &head).problems[0];
    assert_eq!(first.id, "4");
    assert!(first.what.contains("not signed"), "{first:?}");

    let mut gap = rows.clone();
    gap.remove(3);
    assert!(
        check(&gap, &head).problems[0]
            .what
            .contains("seq gap: rows 4 to 4")
    );

    let mut v = Verifier::new(head.clone(), Some("key"));
    rows.iter().for_each(|r| v.event(r));
    v.issued(Some(7));
    let report = v.finish();
    assert_eq!(report.problems[0].id, "7");
    assert!(report.problems[0].what.contains("newest rows deleted"));
}

/// A reply's calls are compared with the ones `reply_accepted` approved (id, name, arguments,
/// in order), also in a ledger without column records (a v2 head).
#[test]
fn a_reply_whose_calls_differ_from_its_approval_is_named() {
    let rows = rows_of(&[
        ("reply_accepted", APPROVED),
        ("action_committed", COMMITTED),
    ]);
    let mut v = Verifier::new(head_of(&rows), Some("key"));
    rows.iter().for_each(|r| v.event(r));
    v.action(&action(
        r#"{"status":"ok","receipt":{"duration_ms":3,"action_id":"a1"}}"#,
    ));
    v.reply(&ReplyRow {
        session_id: "ns_1".into(),
        reply_id: "r1".into(),
        turn_id: "t1".into(),
        request_hash: "h".into(),
        data: serde_json::json!({ "text": "hello", "calls": [
            {"action_id": "a1", "call_index": 0, "name": "Read", "arguments": {"file_path": "/etc/shadow"}}
        ] })
        .to_string(),
    });
    let report = v.finish();
    let p = report.problems.first().unwrap();
    assert_eq!(
        (p.table, p.id.as_str(), p.what.as_str()),
        (
            Table::Replies,
            "r1",
            "calls differ from the chained `reply_accepted`"
        )
    );
}

/// A row recorded before the mapping covered some of its columns (red team 27b R3): its
/// recorded columns are checked, and the ones no record holds yet are reported for the
/// gateway's open to record (`Report::unrecorded`), not taken as an edit.
#[test]
fn columns_a_record_predates_are_reported_unrecorded() {
    let row = CoveredRow::Session(SessionRow {
        id: "ns_a".into(),
        status: "idle".into(),
        data: r#"{"id":"ns_a","label":"x","last_result":{"text":"t"}}"#.into(),
    });
    let all = row.columns();
    let old: Columns = all
        .iter()
        .filter(|(name, _)| ["status", "label"].contains(&name.as_str()))
        .map(|(n, d)| (n.clone(), d.clone()))
        .collect();
    let record = RowRecord {
        table: Table::Sessions,
        session: String::new(),
        id: "ns_a".into(),
        columns: old,
    };
    let data = RowRecord::event_data(&[record]).to_string();
    let hash = link_hash(GENESIS, 1, Some("ns_a"), 1001, ROWS_RECORDED, &data);
    let event = EventRow {
        seq: 1,
        session_id: Some("ns_a".into()),
        at_ms: 1001,
        kind: ROWS_RECORDED.into(),
        data,
        hash: Some(hash.clone()),
        mac: None,
    };
    let mut v = Verifier::new(HeadFile::Present(Head::sign("key", 1, &hash)), Some("key"));
    v.event(&event);
    v.covered(&row);
    let report = v.finish();
    let unrecorded = &report.unrecorded;
    assert_eq!(unrecorded.len(), 1, "{unrecorded:?}");
    let names: Vec<&str> = unrecorded[0].columns.keys().map(String::as_str).collect();
    assert!(
        names.contains(&"last_result") && names.contains(&"other"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"status") && !names.contains(&"label"),
        "{names:?}"
    );
    assert!(
        !report
            .problems
            .iter()
            .any(|p| p.what.contains("differs from its chained record")),
        "{:?}",
        report.problems
    );
}
