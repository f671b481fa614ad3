//! Losing and regaining a runtime: recovery tokens and lease rotation, lost links and brokers,
//! new runner generations, re-adoption after a gateway restart, and settling prepared writes.

use common::hash::sha256_hex;
use common::protocol::{BrokerEvent, GatewayToBroker, PreparedWrite};
use common::tools::CapabilityProfile;
use serde_json::json;

use super::harness::{Harness, code, ledger_of};
use super::lifecycle::wait_for;
use crate::error::ErrorCode;
use crate::state::{ActionState, RunState, SessionStatus};
use crate::tools::PublicTool;
use crate::view::SessionView;

async fn recovered(h: &Harness, view: &SessionView, id: &str) -> SessionView {
    let token = view.recovery_token.clone().unwrap();
    h.recover(view, &token, id).await.unwrap()
}

#[tokio::test]
async fn recovery_rotates_the_lease_and_the_old_one_stops_working() {
    let h = Harness::new();
    let view = h.start().await;
    let fresh = recovered(&h, &view, "rec1").await;
    assert_ne!(fresh.lease_id, view.lease_id);
    assert!(fresh.runtime_attached);
    assert!(!fresh.recovery_required);
    assert_eq!(code(h.status(&view).await), ErrorCode::LeaseInvalid);
    assert!(h.status(&fresh).await.is_ok());
    // The same recovery id replays the same lease; it does not rotate again.
    let again = recovered(&h, &view, "rec1").await;
    assert!(again.replay);
    assert_eq!(again.lease_id, fresh.lease_id);
    assert!(h.status(&fresh).await.is_ok());
}

#[tokio::test]
async fn a_wrong_recovery_token_is_denied_and_changes_nothing() {
    let h = Harness::new();
    let view = h.start().await;
    let denied = h.recover(&view, "rec_guess", "rec1").await;
    assert_eq!(code(denied), ErrorCode::RecoveryDenied);
    assert!(h.status(&view).await.is_ok());
    assert!(
        !h.ledger(&view.native_session_id)
            .contains(&"lease_rotated".to_string())
    );
}

#[tokio::test]
async fn a_dead_broker_is_reported_lost_and_its_pending_turn_goes_with_it() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    h.host.kill(pid);
    let id = view.native_session_id.clone();
    wait_for(|| h.gateway.load(&id).unwrap().recovery_required).await;
    let lost = h.status(&view).await.unwrap();
    assert_eq!(lost.status, SessionStatus::Idle);
    assert!(lost.pending_turn.is_none());
    assert!(!lost.runtime_attached);
    assert_eq!(lost.current_run.unwrap().state, RunState::Lost);
}

#[tokio::test]
async fn a_lost_link_to_a_live_broker_keeps_the_turn_and_recovery_reattaches() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    h.host.drop_link(pid);
    let id = view.native_session_id.clone();
    wait_for(|| h.gateway.load(&id).unwrap().recovery_required).await;
    let detached = h.gateway.load(&id).unwrap();
    assert!(
        detached.pending_turn_id.is_some(),
        "a live broker keeps its request"
    );
    let fresh = recovered(&h, &view, "rec1").await;
    assert!(fresh.runtime_attached);
    assert!(!fresh.recovery_required);
    assert_eq!(fresh.current_run.unwrap().state, RunState::Alive);
    assert_eq!(h.host.spawns().len(), 1, "no new broker for a live one");
}

#[tokio::test]
async fn continue_after_the_runner_exited_starts_a_resuming_generation() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    h.event(
        pid,
        3,
        BrokerEvent::RunnerExited {
            exit_code: Some(1),
            signal: None,
            at_ms: 0,
        },
    )
    .await;
    let exited = h.status(&view).await.unwrap();
    assert_eq!(exited.status, SessionStatus::Idle);
    assert!(exited.recovery_required);
    let continued = h
        .call(
            PublicTool::Continue,
            json!({"native_session_id": view.native_session_id, "lease_id": view.lease_id,
                   "prompt": "next", "idempotency_key": "c1", "wait_seconds": 0}),
        )
        .await
        .unwrap();
    assert_eq!(continued.status, SessionStatus::Running);
    assert!(!continued.recovery_required);
    let spawns = h.host.spawns();
    assert_eq!(spawns.len(), 2);
    assert_eq!((spawns[1].generation, spawns[1].resume), (2, true));
    assert!(
        !h.host.alive(pid),
        "the old broker is gone before the new one runs"
    );
    let sent = h.host.drain_sent(spawns[1].pid).await;
    assert!(
        sent.iter()
            .any(|m| matches!(m, GatewayToBroker::Prompt(p) if p.text == "next")),
        "{sent:?}"
    );
    assert!(
        !sent
            .iter()
            .any(|m| matches!(m, GatewayToBroker::Prompt(p) if p.text == "look around")),
        "an old generation's release is not the new runner's"
    );
}

#[tokio::test]
async fn continue_is_busy_unless_the_session_is_idle() {
    let h = Harness::new();
    let view = h.start().await;
    let busy = h
        .call(
            PublicTool::Continue,
            json!({"native_session_id": view.native_session_id, "lease_id": view.lease_id,
                   "prompt": "next", "idempotency_key": "c1", "wait_seconds": 0}),
        )
        .await;
    assert_eq!(code(busy), ErrorCode::Busy);
    assert_eq!(h.host.spawns().len(), 1);
}

#[tokio::test]
async fn a_restarted_gateway_readopts_live_brokers_and_reports_dead_ones() {
    let h = Harness::new();
    let alive = h.start_with("k1", CapabilityProfile::ReadOnly).await;
    let dead = h.start_with("k2", CapabilityProfile::ReadOnly).await;
    let (alive_pid, dead_pid) = (h.pid(&alive), h.pid(&dead));
    h.runner_asks(alive_pid, "f1").await;
    h.runner_asks(dead_pid, "f2").await;
    h.host.kill(dead_pid);
    let restarted = h.restarted();
    restarted.adopt_all().await;
    let kept = restarted.load(&alive.native_session_id).unwrap();
    assert_eq!(kept.status, SessionStatus::WaitingForGpt);
    assert!(restarted.live(&alive.native_session_id).attached());
    let lost = restarted.load(&dead.native_session_id).unwrap();
    assert!(lost.recovery_required);
    assert_eq!(lost.status, SessionStatus::Idle);
    let kinds = ledger_of(&restarted, &alive.native_session_id);
    assert!(kinds.contains(&"broker_adopted".to_string()), "{kinds:?}");
    assert!(ledger_of(&restarted, &dead.native_session_id).contains(&"runtime_lost".to_string()));
}

/// A direct_write session with a write its broker prepared before it died, the file holding
/// `on_disk`; the action's settled state.
async fn settle(on_disk: &str) -> (ActionState, Option<crate::state::TerminalReason>) {
    let h = Harness::new();
    let (view, pid, action_id) = h.approved_write("new\n").await;
    let path = h.project.join("a.txt");
    let prepared = PreparedWrite {
        action_id: action_id.clone(),
        path: path.display().to_string(),
        pre_sha256: Some(sha256_hex(b"hello\n")),
        post_sha256: sha256_hex(b"new\n"),
        temp_name: ".ngw-tmp-test".into(),
        pre_identity: None,
    };
    h.event(pid, 3, BrokerEvent::WritePrepared(prepared)).await;
    std::fs::write(&path, on_disk).unwrap();
    h.host.kill(pid);
    let id = view.native_session_id.clone();
    let settled = |h: &Harness| {
        h.gateway
            .store
            .read(|tx| tx.action(&action_id))
            .unwrap()
            .unwrap()
            .state
    };
    wait_for(|| settled(&h) != ActionState::Prepared).await;
    let terminal = h.gateway.load(&id).unwrap().terminal.map(|t| t.reason);
    (settled(&h), terminal)
}

#[tokio::test]
async fn a_dead_brokers_prepared_write_is_settled_from_the_file() {
    assert_eq!(settle("new\n").await, (ActionState::Committed, None));
    assert_eq!(settle("hello\n").await, (ActionState::NotApplied, None));
    assert_eq!(
        settle("something else\n").await,
        (
            ActionState::Indeterminate,
            Some(crate::state::TerminalReason::WriteIndeterminate)
        )
    );
}
