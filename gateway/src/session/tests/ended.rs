//! Red team 31/32 N1: an ended session stores O(1) whatever is called on it. Recovers after the
//! first since its end hand out the same lease (renewed in place, no new row or event), stops
//! store no key per request, and replays keep their meaning; a prune deletes its keys and
//! superseded lease rows and the ledger still verifies.

use serde_json::json;

use super::harness::Harness;
use super::ledger_records::{first_problem, recorded};
use crate::error::ErrorCode;
use crate::state::SessionStatus;
use crate::tools::PublicTool;

/// Rows of `table` the session owns (`events` and `leases` by session id).
fn rows(h: &Harness, table: &str, session: &str) -> i64 {
    let path = h.gateway.config.state_dir.join(crate::state::DATABASE_FILE);
    let db = rusqlite::Connection::open(path).unwrap();
    db.query_row(
        &format!("SELECT COUNT(*) FROM {table} WHERE session_id = ?1"),
        [session],
        |row| row.get(0),
    )
    .unwrap()
}

fn counts(h: &Harness, session: &str) -> [i64; 3] {
    ["idempotency", "leases", "events"].map(|t| rows(h, t, session))
}

#[tokio::test]
async fn recovers_and_stops_of_an_ended_session_add_no_rows() {
    let h = Harness::new();
    let view = h.start().await;
    let token = view.recovery_token.clone().unwrap();
    let sid = view.native_session_id.clone();
    let stopped = h.stop(&view, "end").await.unwrap();
    assert_eq!(stopped.status, SessionStatus::Stopped);
    // The first recover after the end rotates the lease once: the running one is cut off.
    let first = h.recover(&view, &token, "r-first").await.unwrap();
    assert_ne!(first.lease_id, view.lease_id);
    let old = h.status(&view).await.expect_err("the running lease");
    assert_eq!(old.code, ErrorCode::LeaseInvalid);
    h.stop(&first, "s-first").await.unwrap();
    let before = counts(&h, &sid);
    for i in 0..50 {
        // The flood measures storage; the pace has its own tests.
        h.gateway.recovery_pace.clear();
        let again = h.recover(&view, &token, &format!("r{i}")).await.unwrap();
        assert_eq!(again.lease_id, first.lease_id, "the same post-end lease");
        assert!(!again.replay);
        let stop = h.stop(&first, &format!("s{i}")).await.unwrap();
        assert!(!stop.replay && stop.status == SessionStatus::Stopped);
    }
    assert_eq!(counts(&h, &sid), before, "idempotency, leases, events");
    h.gateway.recovery_pace.clear();
    // The last key of each replays; the same key with other arguments is a conflict.
    assert!(h.recover(&view, &token, "r49").await.unwrap().replay);
    assert!(h.stop(&first, "s49").await.unwrap().replay);
    let other = h
        .call(
            PublicTool::Stop,
            json!({"native_session_id": sid, "lease_id": first.lease_id, "request_id": "s49",
                   "reason": "another reason"}),
        )
        .await
        .expect_err("other arguments");
    assert_eq!(other.code, ErrorCode::IdempotencyConflict);
    // Keys used before the session ended (and its first recover) replay as before.
    assert!(
        h.stop(&view, "end")
            .await
            .is_err_and(|e| e.code == ErrorCode::LeaseInvalid)
    );
    assert!(h.stop(&first, "end").await.unwrap().replay);
    let replayed = h.recover(&view, &token, "r-first").await.unwrap();
    assert!(replayed.replay && replayed.lease_id == first.lease_id);
    assert_eq!(counts(&h, &sid), before);
}

#[tokio::test]
async fn a_prune_deletes_an_ended_sessions_keys_and_superseded_leases() {
    let r = recorded().await;
    let token = r.h.gateway.recovery_token(&r.session);
    // Recovers while it runs: keys of one operation and superseded lease rows.
    let mut lease = r.view.clone();
    for i in 0..3 {
        lease =
            r.h.recover(&r.view, &token, &format!("live{i}"))
                .await
                .unwrap();
    }
    r.h.stop(&lease, "stop-1").await.unwrap();
    for i in 0..3 {
        lease =
            r.h.recover(&r.view, &token, &format!("r{i}"))
                .await
                .unwrap();
        r.h.stop(&lease, &format!("s{i}")).await.unwrap();
    }
    let before = counts(&r.h, &r.session);
    // start, reply, 4 recovers (3 live, the rotating one), the ending stop, 2 last requests;
    // 5 lease generations.
    assert_eq!(&before[..2], &[9, 5]);
    let done = crate::prune::prune(&r.h.gateway, std::time::Duration::ZERO, false).unwrap();
    assert!(done.database_bytes > 0, "{done:?}");
    // Left: the newest key of each operation and the last requests; the current lease.
    let [keys, leases, _] = counts(&r.h, &r.session);
    assert_eq!((keys, leases), (6, 1));
    r.h.gateway.store.flush_head();
    assert_eq!(
        first_problem(&r.state_dir(), None),
        None,
        "verify after prune"
    );
    // The pruned session still recovers to the same lease, storing nothing.
    let after = counts(&r.h, &r.session);
    let again = r.h.recover(&r.view, &token, "r-after").await.unwrap();
    assert_eq!(again.lease_id, lease.lease_id);
    assert!(r.h.status(&again).await.is_ok());
    // A key deleted by the prune answers the final state as a new request would; the stop
    // that ended the session, the newest of its operation, still replays.
    let recovered = r.h.recover(&r.view, &token, "live0").await.unwrap();
    assert!(!recovered.replay && recovered.lease_id == lease.lease_id);
    assert!(r.h.stop(&again, "stop-1").await.unwrap().replay);
    assert_eq!(counts(&r.h, &r.session), after);
}

/// A session pruned before keys and leases went with its content (their build kept adding
/// both afterwards): the next prune deletes them, recorded in its ledger, and it verifies.
#[tokio::test]
async fn a_prune_deletes_what_an_already_pruned_session_kept_adding() {
    let r = recorded().await;
    r.h.stop(&r.view, "stop-1").await.unwrap();
    crate::prune::prune(&r.h.gateway, std::time::Duration::ZERO, false).unwrap();
    let pruned = counts(&r.h, &r.session);
    let scope = format!("stop:{}", r.session);
    r.h.gateway
        .store
        .write::<_, crate::state::StoreError>(|tx| {
            let answer = crate::state::IdempotentAnswer::InProgress {
                lease_generation: 1,
            };
            for i in 0..5 {
                tx.put_idempotency(&scope, &format!("old{i}"), "h", Some(&r.session), &answer)?;
                tx.insert_lease(&format!("old-lease-{i}"), &r.session, 0, 0)?;
            }
            Ok(())
        })
        .unwrap();
    let done = crate::prune::prune(&r.h.gateway, std::time::Duration::ZERO, false).unwrap();
    assert_eq!(done.sessions.len(), 1, "{done:?}");
    let [keys, leases, events] = counts(&r.h, &r.session);
    // The newest stop key of the five stays in place of the ending one.
    assert_eq!((keys, leases), (pruned[0], pruned[1]));
    assert_eq!(events, pruned[2] + 1, "one content_pruned event");
    r.h.gateway.store.flush_head();
    assert_eq!(
        first_problem(&r.state_dir(), None),
        None,
        "verify after prune"
    );
    let again = crate::prune::prune(&r.h.gateway, std::time::Duration::ZERO, false).unwrap();
    assert!(again.sessions.is_empty(), "{again:?}");
}
