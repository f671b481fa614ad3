//! Re-adoption after a restart attaches a session only to the broker started for it: broker
//! records swapped, copied or edited in the database (red team 27, B3) are refused and reported,
//! the record is dropped, no other session's broker is attached or signalled, and the session's
//! own broker its record no longer leads to is stopped.

use std::sync::Arc;

use common::tools::CapabilityProfile;
use serde_json::json;

use super::harness::Harness;
use crate::brokers::BrokerSignal;
use crate::session::Gateway;
use crate::state::{BrokerRecord, RunState, SessionStatus};
use crate::tools::PublicTool;
use crate::view::SessionView;

/// Two live sessions, each with a runner asking for a turn; their ids and broker pids.
async fn two_sessions(h: &Harness) -> ((SessionView, i32), (SessionView, i32)) {
    let a = h.start_with("ka", CapabilityProfile::ReadOnly).await;
    let b = h.start_with("kb", CapabilityProfile::ReadOnly).await;
    let (pa, pb) = (h.pid(&a), h.pid(&b));
    h.runner_asks(pa, "fa").await;
    h.runner_asks(pb, "fb").await;
    ((a, pa), (b, pb))
}

fn record(h: &Harness, view: &SessionView) -> BrokerRecord {
    h.gateway
        .load(&view.native_session_id)
        .unwrap()
        .broker
        .unwrap()
}

/// Write `broker` into the session's row behind the gateway's back (the broker record is not
/// covered by the ledger, so only the adoption check can catch it).
fn put_broker(h: &Harness, view: &SessionView, broker: BrokerRecord) {
    h.gateway
        .store
        .write(|tx| {
            let mut session = tx.session(&view.native_session_id)?.unwrap();
            session.broker = Some(broker);
            tx.put_session(&session)
        })
        .unwrap();
}

/// The reason of the session's `runtime_lost` events.
fn lost_reasons(gateway: &Gateway, view: &SessionView) -> Vec<String> {
    gateway
        .store
        .read(|tx| tx.events(&view.native_session_id))
        .unwrap()
        .into_iter()
        .filter(|(_, _, kind, _)| kind == "runtime_lost")
        .map(|(_, _, _, data)| data["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The session was refused as not its broker's: reported lost, its record dropped, unattached.
fn assert_disowned(gateway: &Gateway, view: &SessionView) {
    let id = &view.native_session_id;
    let session = gateway.load(id).unwrap();
    assert!(session.broker.is_none(), "the foreign record is dropped");
    assert!(session.recovery_required);
    assert_eq!(session.status, SessionStatus::Idle);
    assert_eq!(session.current_run.unwrap().state, RunState::Lost);
    assert!(!gateway.live(id).attached());
    let reasons = lost_reasons(gateway, view);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("the recorded broker is not this session's"),
        "{reasons:?}"
    );
    assert!(
        reasons[0].contains("changed outside the gateway"),
        "{reasons:?}"
    );
}

fn assert_adopted(gateway: &Gateway, view: &SessionView) {
    let session = gateway.load(&view.native_session_id).unwrap();
    assert_eq!(session.status, SessionStatus::WaitingForGpt);
    assert!(gateway.live(&view.native_session_id).attached());
    assert!(lost_reasons(gateway, view).is_empty());
}

async fn restart(h: &Harness) -> Arc<Gateway> {
    let restarted = h.restarted();
    restarted.adopt_all().await;
    restarted
}

#[tokio::test]
async fn swapped_broker_records_are_refused_and_each_own_broker_stopped() {
    let h = Harness::new();
    let ((a, pa), (b, pb)) = two_sessions(&h).await;
    let (ra, rb) = (record(&h, &a), record(&h, &b));
    put_broker(&h, &a, rb);
    put_broker(&h, &b, ra);
    let g = restart(&h).await;
    assert_disowned(&g, &a);
    assert_disowned(&g, &b);
    // Each broker was stopped as its own session's, found at that session's own socket.
    assert!(!h.host.alive(pa) && !h.host.alive(pb));
    let mut signalled = h.host.signals();
    signalled.sort_by_key(|(pid, _)| *pid);
    assert_eq!(
        signalled,
        vec![(pa, BrokerSignal::Term), (pb, BrokerSignal::Term)]
    );
    let reasons = lost_reasons(&g, &a);
    assert!(
        reasons[0].contains("the session's own runner was stopped"),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn a_record_copied_from_another_session_leaves_that_sessions_broker_alone() {
    let h = Harness::new();
    let ((a, pa), (b, pb)) = two_sessions(&h).await;
    put_broker(&h, &b, record(&h, &a));
    let g = restart(&h).await;
    assert_adopted(&g, &a);
    assert_disowned(&g, &b);
    assert!(h.host.alive(pa), "a's broker serves a");
    assert!(
        !h.host.alive(pb),
        "b's own broker, unreachable by its record, is stopped"
    );
    assert!(h.host.signals().iter().all(|(pid, _)| *pid == pb));
}

/// One field at a time of a's record set to b's (or made up): a is refused, b is untouched.
#[tokio::test]
async fn a_single_field_moved_from_another_record_is_refused() {
    type Edit = fn(&mut BrokerRecord, &BrokerRecord);
    let edits: [(&str, Edit); 5] = [
        ("socket_path", |r, o| r.socket_path = o.socket_path.clone()),
        ("runtime_dir", |r, o| r.runtime_dir = o.runtime_dir.clone()),
        ("secret", |r, o| r.secret = o.secret.clone()),
        ("generation", |r, _| r.generation = 2),
        // b's process: the record passes the derivation, the handshake refuses it.
        ("pid", |r, o| {
            r.pid = o.pid;
            r.start_time = o.start_time;
        }),
    ];
    for (field, edit) in edits {
        let h = Harness::new();
        let ((a, pa), (b, pb)) = two_sessions(&h).await;
        let mut edited = record(&h, &a);
        edit(&mut edited, &record(&h, &b));
        put_broker(&h, &a, edited);
        let g = restart(&h).await;
        assert_disowned(&g, &a);
        assert_adopted(&g, &b);
        assert!(h.host.alive(pb), "{field}: b's broker is never signalled");
        assert!(!h.host.alive(pa), "{field}: a's own broker is stopped");
        assert!(
            h.host.signals().iter().all(|(pid, _)| *pid == pa),
            "{field}: {:?}",
            h.host.signals()
        );
    }
}

/// After a refused adoption, `continue` starts a new generation for the session itself and
/// signals nothing that is not its own.
#[tokio::test]
async fn continue_after_a_refused_adoption_starts_its_own_generation() {
    let h = Harness::new();
    let ((a, _), (b, pb)) = two_sessions(&h).await;
    let mut edited = record(&h, &a);
    edited.pid = pb;
    put_broker(&h, &a, edited);
    let g = restart(&h).await;
    let continued = PublicTool::Continue
        .call(
            &g,
            json!({"native_session_id": a.native_session_id, "lease_id": a.lease_id,
                   "prompt": "next", "idempotency_key": "c1", "wait_seconds": 0}),
        )
        .await
        .unwrap();
    assert!(continued.runtime_attached);
    let spawn = h.host.spawns().last().cloned().unwrap();
    assert_eq!(
        (spawn.session_id.as_str(), spawn.generation),
        (a.native_session_id.as_str(), 2)
    );
    assert!(h.host.alive(pb));
    assert!(h.host.signals().iter().all(|(pid, _)| *pid != pb));
    assert_adopted(&g, &b);
}

/// A record of an older gateway (no generation) at the session's own places is its own broker
/// that cannot prove its session: reported lost, but kept, so the broker can still be stopped.
#[tokio::test]
async fn an_unbound_record_at_the_sessions_own_places_is_kept_but_not_attached() {
    let h = Harness::new();
    let ((a, pa), (b, _)) = two_sessions(&h).await;
    let mut old = record(&h, &a);
    old.generation = 0;
    put_broker(&h, &a, old.clone());
    let g = restart(&h).await;
    let session = g.load(&a.native_session_id).unwrap();
    assert_eq!(session.broker, Some(old));
    assert!(session.recovery_required);
    assert!(!g.live(&a.native_session_id).attached());
    let reasons = lost_reasons(&g, &a);
    assert!(
        reasons[0].contains("older than session-bound brokers"),
        "{reasons:?}"
    );
    // Its own broker still answers at its socket for the current run's generation: stopped.
    assert!(!h.host.alive(pa));
    assert_adopted(&g, &b);
}
