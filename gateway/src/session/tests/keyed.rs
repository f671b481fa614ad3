//! Leases stored keyed (red team 27b R2): a lease row a database writer plants with the plain
//! SHA-256 of a lease of their own is refused, and the schema 6 migration keeps genuine leases
//! stored the old way (they are derived from the server key) and drops planted ones.

use common::hash::sha256_hex;
use serde_json::json;

use super::harness::{Harness, code};
use crate::error::ErrorCode;
use crate::tools::PublicTool;

fn db(h: &Harness) -> rusqlite::Connection {
    rusqlite::Connection::open(h.gateway.config.state_dir.join(crate::state::DATABASE_FILE))
        .unwrap()
}

/// A lease row for `lease` as the gateway used to store it (plain SHA-256), in `session_id`.
fn plant(h: &Harness, session_id: &str, lease: &str) {
    db(h)
        .execute(
            "INSERT INTO leases (lease_hash, session_id, generation, expires_at_ms)
             VALUES (?1, ?2, 1, 9000000000000)",
            rusqlite::params![sha256_hex(lease.as_bytes()), session_id],
        )
        .unwrap();
}

/// Planted while the gateway is stopped, the row is refused by its key; planted while it runs,
/// the row seals refuse the next call outright.
#[tokio::test]
async fn a_lease_planted_as_plain_sha256_is_refused() {
    let h = Harness::new();
    let view = h.start().await;
    let id = view.native_session_id.clone();
    plant(&h, &id, "lease_planted");
    let restarted = h.restarted();
    let call = |tool: PublicTool, lease: &str, extra: serde_json::Value| {
        let mut args = json!({"native_session_id": id, "lease_id": lease});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        tool.call(&restarted, args)
    };
    assert_eq!(
        code(call(PublicTool::Status, "lease_planted", json!({})).await),
        ErrorCode::LeaseInvalid
    );
    // The stop a planted lease would allow is refused the same way, and nothing changed.
    let stopped = call(
        PublicTool::Stop,
        "lease_planted",
        json!({"request_id": "s1"}),
    )
    .await;
    assert_eq!(code(stopped), ErrorCode::LeaseInvalid);
    let kinds = super::harness::ledger_of(&restarted, &id);
    assert!(!kinds.contains(&"stop_requested".to_string()), "{kinds:?}");
    // The lease the gateway minted works.
    let lease = view.lease_id.clone().unwrap();
    assert!(call(PublicTool::Status, &lease, json!({})).await.is_ok());
    // Planted while this gateway runs: refused before the lease is even looked up.
    plant(&h, &id, "lease_planted_live");
    assert_eq!(
        code(call(PublicTool::Status, &lease, json!({})).await),
        ErrorCode::LedgerBroken
    );
}

#[tokio::test]
async fn schema_6_rekeys_genuine_old_leases_and_drops_planted_ones() {
    let h = Harness::new();
    let view = h.start().await;
    let id = view.native_session_id.clone();
    let lease = view.lease_id.clone().unwrap();
    // The state as a schema 5 gateway left it: the genuine lease stored as its SHA-256, beside
    // a planted one.
    {
        let db = db(&h);
        db.execute(
            "UPDATE leases SET lease_hash = ?1 WHERE session_id = ?2",
            rusqlite::params![sha256_hex(lease.as_bytes()), id],
        )
        .unwrap();
        db.execute_batch(
            "DROP INDEX idempotency_by_scope; ALTER TABLE idempotency DROP COLUMN mac;
             PRAGMA user_version = 5;",
        )
        .unwrap();
    }
    plant(&h, &id, "lease_planted");
    let restarted = h.restarted();
    let status = |lease: &str| {
        PublicTool::Status.call(
            &restarted,
            json!({"native_session_id": id, "lease_id": lease}),
        )
    };
    assert!(status(&lease).await.is_ok(), "the genuine lease was lost");
    assert_eq!(code(status("lease_planted").await), ErrorCode::LeaseInvalid);
    let rows: i64 = db(&h)
        .query_row("SELECT COUNT(*) FROM leases", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1, "the planted row is deleted");
}

/// `native_session_start`'s arguments as [`Harness::start`] sends them, under `key`.
fn start_args(h: &Harness, key: &str) -> serde_json::Value {
    json!({
        "prompt": "look around",
        "working_directory": h.project,
        "idempotency_key": key,
        "capability_profile": "read_only",
        "wait_seconds": 0,
    })
}

/// A replay hands out the lease and recovery token of the session its recorded answer names:
/// an idempotency row copied under another key, or an answer edited in the database, is not
/// replayed (red team 27b R2, the same class).
#[tokio::test]
async fn a_planted_or_edited_idempotency_answer_is_not_replayed() {
    let h = Harness::new();
    let view = h.start().await;
    let again = h.start().await;
    assert!(again.replay);
    assert_eq!(again.lease_id, view.lease_id);
    let refused = |result: Result<crate::view::SessionView, crate::error::ToolError>| {
        let err = result.unwrap_err();
        assert_eq!(err.code, ErrorCode::IdempotencyConflict, "{err:?}");
        assert!(err.message.contains("fails its integrity check"), "{err:?}");
    };
    // Planted and edited while the gateway is stopped: the next gateway refuses to replay them.
    db(&h)
        .execute(
            "INSERT INTO idempotency SELECT scope, 'k_forged', request_hash, session_id, answer,
             created_at_ms, mac FROM idempotency WHERE scope = 'start' AND key = 'k1'",
            [],
        )
        .unwrap();
    db(&h)
        .execute(
            "UPDATE idempotency SET answer = json_set(answer, '$.status', 'stopped')
             WHERE scope = 'start' AND key = 'k1'",
            [],
        )
        .unwrap();
    let restarted = h.restarted();
    refused(
        PublicTool::Start
            .call(&restarted, start_args(&h, "k_forged"))
            .await,
    );
    refused(
        PublicTool::Start
            .call(&restarted, start_args(&h, "k1"))
            .await,
    );
}

/// `recover` revokes the old lease; marking its row live again while the gateway is stopped (the
/// `revoked` column is state, not the chained record) does not bring it back: only the session's
/// current lease generation is accepted. The new lease keeps working.
#[tokio::test]
async fn a_revoked_lease_made_live_again_at_rest_stays_refused() {
    let h = Harness::new();
    let view = h.start().await;
    let id = view.native_session_id.clone();
    let old = view.lease_id.clone().unwrap();
    let token = view.recovery_token.clone().unwrap();
    let recovered = h.recover(&view, &token, "r1").await.unwrap();
    let new = recovered.lease_id.clone().unwrap();
    assert_ne!(old, new);
    let args = |lease: &str| json!({"native_session_id": id, "lease_id": lease});
    assert_eq!(
        code(PublicTool::Status.call(&h.gateway, args(&old)).await),
        ErrorCode::LeaseInvalid
    );
    // Every lease row of the session live again, expiring far in the future.
    let changed = db(&h)
        .execute(
            "UPDATE leases SET revoked = 0, expires_at_ms = 9000000000000 WHERE session_id = ?1",
            [&id],
        )
        .unwrap();
    assert_eq!(changed, 2);
    let restarted = h.restarted();
    assert_eq!(
        code(PublicTool::Status.call(&restarted, args(&old)).await),
        ErrorCode::LeaseInvalid
    );
    assert!(
        PublicTool::Status
            .call(&restarted, args(&new))
            .await
            .is_ok()
    );
}
