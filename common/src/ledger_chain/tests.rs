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
            }
        })
        .collect()
}

fn check(rows: &[EventRow], head: &HeadFile) -> Report {
    let mut v = Verifier::new();
    for row in rows {
        v.event(row);
    }
    v.finish(head, Some("key"))
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
    assert_eq!(
        (first.table.clone(), first.id.as_str()),
        (Table::Events, "3")
    );

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

#[test]
fn rows_before_the_chain_are_counted_not_failed() {
    let mut rows = chain(3);
    let old = EventRow {
        seq: 0,
        session_id: None,
        at_ms: 1,
        kind: "old".into(),
        data: "{}".into(),
        hash: None,
    };
    rows.insert(0, old.clone());
    let report = check(&rows, &head_of(&rows));
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.unchained_events, 1);
    // A hash removed after the chain began is not "before the chain".
    rows.push(EventRow { seq: 9, ..old });
    assert!(!check(&rows, &head_of(&rows[..4])).ok());
}

#[test]
fn receipts_must_match_the_chained_event() {
    let mut prev = GENESIS.to_string();
    let data = r#"{"action_id":"a1","status":"ok","receipt":{"action_id":"a1","duration_ms":3}}"#;
    let hash = link_hash(&prev, 1, Some("ns_1"), 5, "action_committed", data);
    prev.clone_from(&hash);
    let row = EventRow {
        seq: 1,
        session_id: Some("ns_1".into()),
        at_ms: 5,
        kind: "action_committed".into(),
        data: data.into(),
        hash: Some(hash),
    };
    let run = |outcome: &str| {
        let mut v = Verifier::new();
        v.event(&row);
        v.action("a1", "ns_1", Some(outcome));
        v.finish(&HeadFile::Present(Head::sign("key", 1, &prev)), Some("key"))
    };
    let good = run(r#"{"status":"ok","receipt":{"duration_ms":3,"action_id":"a1"}}"#);
    assert!(good.ok(), "{:?}", good.problems);
    assert_eq!(good.receipts_checked, 1);
    let bad = run(r#"{"status":"ok","receipt":{"action_id":"a1","duration_ms":4}}"#);
    assert_eq!(bad.problems[0].table, Table::Actions);
    assert!(bad.broken_sessions.contains("ns_1"));
}
