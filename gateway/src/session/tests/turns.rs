//! The turn hand-off: pending turns, replies and their approvals, tool results, duplicates.

use common::protocol::{BrokerEvent, GatewayToBroker, WriteEnd};
use common::tools::{ActionOutcome, Receipt, ToolStatus};
use serde_json::json;

use super::harness::{Harness, code, prompt_turn, results_turn};
use crate::error::ErrorCode;
use crate::state::{ActionState, SessionStatus};
use crate::view::{SessionView, TurnKind};

/// A started session whose runner asked for its first turn; its view and broker.
async fn waiting(h: &Harness) -> (SessionView, i32) {
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    (h.status(&view).await.unwrap(), pid)
}

fn finished(action_id: &str, status: ToolStatus, write: Option<WriteEnd>) -> BrokerEvent {
    BrokerEvent::ActionFinished {
        action_id: action_id.into(),
        outcome: ActionOutcome {
            status,
            output: "out".into(),
            truncated: false,
            error_code: None,
            receipt: Receipt {
                action_id: action_id.into(),
                duration_ms: 1,
                ..Receipt::default()
            },
        },
        write,
    }
}

#[tokio::test]
async fn a_runner_request_becomes_the_pending_prompt_turn() {
    let h = Harness::new();
    let (view, _) = waiting(&h).await;
    assert_eq!(view.status, SessionStatus::WaitingForGpt);
    let turn = view.pending_turn.unwrap();
    assert_eq!(turn.kind, TurnKind::Prompt);
    assert_eq!(turn.prompt.as_deref(), Some("look around"));
    assert_eq!(turn.sequence, 1);
    assert!(turn.allowed_tools.contains(&"Read".to_string()));
    assert!(!turn.allowed_tools.contains(&"Edit".to_string()));
    assert_eq!(view.current_run.unwrap().generation, 1);
}

#[tokio::test]
async fn an_approved_call_is_released_and_its_result_comes_back_with_its_receipt() {
    let h = Harness::new();
    let (view, pid) = waiting(&h).await;
    let path = h.project.join("a.txt");
    let answered = h
        .reply(
            &view,
            "r1",
            "reading",
            json!([{"name": "Read", "arguments": {"file_path": path}}]),
        )
        .await
        .unwrap();
    assert_eq!(answered.status, SessionStatus::Running);
    let release = h.next_reply(pid).await;
    assert_eq!(release.calls.len(), 1);
    assert_eq!(release.calls[0].name, "Read");
    let action_id = release.calls[0].action_id.clone();
    h.event(pid, 3, finished(&action_id, ToolStatus::Ok, None))
        .await;
    h.event(pid, 4, results_turn("f2")).await;
    let next = h.status(&answered).await.unwrap();
    let turn = next.pending_turn.unwrap();
    assert_eq!(turn.kind, TurnKind::ToolResults);
    let results = turn.tool_results.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].status, ToolStatus::Ok);
    assert_eq!(results[0].receipt.as_ref().unwrap().action_id, action_id);
    let action = h
        .gateway
        .store
        .read(|tx| tx.action(&action_id))
        .unwrap()
        .unwrap();
    assert_eq!(action.state, ActionState::Committed);
}

#[tokio::test]
async fn a_text_only_reply_ends_the_turn_and_becomes_the_last_result() {
    let h = Harness::new();
    let (view, pid) = waiting(&h).await;
    h.reply(&view, "r1", "all done", json!([])).await.unwrap();
    h.event(
        pid,
        3,
        BrokerEvent::RunnerTurnEnded {
            result: None,
            subtype: "success".into(),
            is_error: false,
        },
    )
    .await;
    let idle = h.status(&view).await.unwrap();
    assert_eq!(idle.status, SessionStatus::Idle);
    assert_eq!(idle.last_result.unwrap().text, "all done");
}

#[tokio::test]
async fn a_resent_reply_replays_and_is_released_once() {
    let h = Harness::new();
    let (view, pid) = waiting(&h).await;
    let calls = json!([{"name": "FindFiles", "arguments": {"name_contains": ".txt"}}]);
    h.reply(&view, "r1", "t", calls.clone()).await.unwrap();
    let again = h.reply(&view, "r1", "t", calls).await;
    // The turn is no longer pending, yet the same reply replays rather than failing.
    assert!(again.unwrap().replay);
    let replies = h
        .host
        .drain_sent(pid)
        .await
        .into_iter()
        .filter(|m| matches!(m, GatewayToBroker::Reply(_)))
        .count();
    assert_eq!(replies, 1);
    let conflict = h.reply(&view, "r1", "other text", json!([])).await;
    assert_eq!(code(conflict), ErrorCode::IdempotencyConflict);
}

#[tokio::test]
async fn replies_to_the_wrong_turn_or_with_bad_calls_approve_nothing() {
    let h = Harness::new();
    let (view, _) = waiting(&h).await;
    let mut stale = view.clone();
    stale.pending_turn.as_mut().unwrap().turn_id = "turn_old".into();
    assert_eq!(
        code(h.reply(&stale, "r1", "t", json!([])).await),
        ErrorCode::TurnMismatch
    );
    let edit = json!([{"name": "Edit", "arguments": {"file_path": "/x", "old_string": "a", "new_string": "b"}}]);
    let refused = h.reply(&view, "r2", "t", edit).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotPermitted);
    assert!(
        refused
            .message
            .contains("not permitted in a read_only session"),
        "{}",
        refused.message
    );
    let unknown = h
        .reply(&view, "r3", "t", json!([{"name": "Bash", "arguments": {}}]))
        .await;
    assert_eq!(code(unknown), ErrorCode::NotPermitted);
    let bad_args = h
        .reply(&view, "r4", "t", json!([{"name": "Read", "arguments": {}}]))
        .await;
    assert_eq!(code(bad_args), ErrorCode::InvalidArgument);
    let many: Vec<_> = (0..65)
        .map(|_| json!({"name": "FindFiles", "arguments": {"name_contains": "a"}}))
        .collect();
    assert_eq!(
        code(h.reply(&view, "r5", "t", json!(many)).await),
        ErrorCode::InvalidArgument
    );
    let huge = "x".repeat(800 * 1024);
    assert_eq!(
        code(h.reply(&view, "r6", &huge, json!([])).await),
        ErrorCode::ReplyTooLarge
    );
    // Still pending, nothing approved.
    let still = h.status(&view).await.unwrap();
    assert_eq!(
        still.pending_turn.unwrap().turn_id,
        view.pending_turn.unwrap().turn_id
    );
    let approved = h
        .gateway
        .store
        .read(|tx| tx.prepared_actions(&view.native_session_id))
        .unwrap();
    assert!(approved.is_empty());
}

#[tokio::test]
async fn an_event_resent_after_a_reconnect_is_applied_once() {
    let h = Harness::new();
    let (view, pid) = waiting(&h).await;
    // The broker re-sends event 2 (its ack was lost): acknowledged, not a second turn.
    h.event(pid, 2, prompt_turn("f-other", "again")).await;
    let after = h.status(&view).await.unwrap();
    assert_eq!(after.pending_turn.unwrap().sequence, 1);
    assert_eq!(after.revision, view.revision);
}

#[tokio::test]
async fn a_retried_runner_request_gets_the_same_reply_again() {
    let h = Harness::new();
    let (view, pid) = waiting(&h).await;
    h.reply(&view, "r1", "hello", json!([])).await.unwrap();
    h.host.drain_sent(pid).await;
    // The runner asks again with the same fingerprint: the stored reply is re-sent.
    let sent = h.event(pid, 3, prompt_turn("f1", "look around")).await;
    assert!(
        sent.iter()
            .any(|m| matches!(m, GatewayToBroker::Reply(r) if r.text == "hello")),
        "{sent:?}"
    );
    assert!(
        h.ledger(&view.native_session_id)
            .contains(&"turn_request_retried".to_string())
    );
}

#[tokio::test]
async fn an_indeterminate_write_fails_the_session_and_stops_the_runner() {
    let h = Harness::new();
    let (view, pid, action_id) = h.approved_write("x").await;
    let sent = h
        .event(
            pid,
            3,
            finished(&action_id, ToolStatus::Error, Some(WriteEnd::Indeterminate)),
        )
        .await;
    assert!(
        sent.iter()
            .any(|m| matches!(m, GatewayToBroker::Stop { .. })),
        "{sent:?}"
    );
    let stored = h.gateway.load(&view.native_session_id).unwrap();
    assert_eq!(stored.status, SessionStatus::Failed);
    assert!(stored.recovery_required);
    let terminal = stored.terminal.unwrap();
    assert_eq!(
        terminal.reason,
        crate::state::TerminalReason::WriteIndeterminate
    );
    assert_eq!(terminal.action_id.as_deref(), Some(action_id.as_str()));
}

#[tokio::test]
async fn events_of_a_broker_that_is_no_longer_the_sessions_are_not_applied() {
    let h = Harness::new();
    let (view, pid) = waiting(&h).await;
    // Pretend a newer broker took over.
    h.gateway
        .store
        .write(|tx| {
            let mut session = tx.session(&view.native_session_id)?.unwrap();
            session.broker.as_mut().unwrap().pid = pid + 100;
            tx.put_session(&session)
        })
        .unwrap();
    h.event(
        pid,
        3,
        BrokerEvent::RunnerExited {
            exit_code: Some(0),
            signal: None,
            at_ms: 0,
        },
    )
    .await;
    let stored = h.gateway.load(&view.native_session_id).unwrap();
    assert_eq!(stored.status, SessionStatus::WaitingForGpt);
    assert!(stored.runner_alive());
}
