//! The transitions of the turn hand-off, the broker's event order and DeepSeek sub-sessions,
//! each on a record alone: what they change, what they refuse, and the event they return.

use common::protocol::ApprovedCall;
use serde_json::json;

use super::transitions::session;
use crate::error::ErrorCode;
use crate::session::transitions::EventOrder;
use crate::state::{
    Delegation, LedgerEvent, SessionRecord, SessionStatus, StoreError, SubsessionStatus, TurnBody,
};

fn prompt_body(_: &SessionRecord) -> Result<TurnBody, StoreError> {
    Ok(TurnBody::Prompt {
        text: "next".into(),
        interrupted_turn_id: None,
    })
}

/// The transition refused with exactly this code and message.
fn refused(result: crate::session::ToolResult<LedgerEvent>, code: ErrorCode, message: &str) {
    let err = result.err().map(|e| (e.code, e.message));
    assert_eq!(err, Some((code, message.to_string())));
}

#[test]
fn a_turn_request_makes_a_pending_turn_only_in_a_live_session() {
    let mut s = session(SessionStatus::Running);
    s.pending_turn_id = None;
    s.restart_notice_pending = true;
    let (turn, event) = s.turn_requested("fp".into(), prompt_body).unwrap();
    let turn = turn.unwrap();
    assert_eq!((turn.sequence, turn.fingerprint.as_str()), (2, "fp"));
    assert!(turn.notice.is_some(), "the restart notice goes with it");
    assert_eq!(s.status, SessionStatus::WaitingForGpt);
    assert_eq!(s.pending_turn_id.as_ref(), Some(&turn.turn_id));
    assert_eq!(s.last_reply_turn_id.as_ref(), Some(&turn.turn_id));
    assert!(!s.restart_notice_pending, "told once");
    assert!(matches!(
        event,
        LedgerEvent::TurnPending { ref turn_id, sequence: 2 } if *turn_id == turn.turn_id
    ));
    for status in [SessionStatus::Stopping, SessionStatus::Stopped] {
        let mut stopping = session(status);
        let mut built = false;
        let (turn, event) = stopping
            .turn_requested("fp".into(), |s| {
                built = true;
                prompt_body(s)
            })
            .unwrap();
        assert!(turn.is_none() && !built);
        assert!(matches!(
            event,
            LedgerEvent::TurnRequestIgnored { ref reason } if reason == "session is stopping"
        ));
        assert_eq!((stopping.status, stopping.turn_sequence), (status, 1));
    }
}

#[test]
fn a_reply_is_accepted_only_for_the_pending_turn_of_a_live_session() {
    let mut s = session(SessionStatus::WaitingForGpt);
    refused(
        s.reply_accepted("turn_2", "r", "t", &[]),
        ErrorCode::TurnMismatch,
        "turn \"turn_2\" is no longer pending; call native_session_status",
    );
    assert_eq!(s.status, SessionStatus::WaitingForGpt);
    let event = s.reply_accepted("turn_1", "r", "done", &[]).unwrap();
    assert!(matches!(event, LedgerEvent::ReplyAccepted { ref actions, .. } if actions.is_empty()));
    assert_eq!(s.status, SessionStatus::Running);
    assert!(s.pending_turn_id.is_none());
    assert_eq!(s.undelivered_reply_turn.as_deref(), Some("turn_1"));
    assert_eq!(
        s.closing_reply.as_ref().map(|r| r.text.as_str()),
        Some("done")
    );
    let mut with_calls = session(SessionStatus::WaitingForGpt);
    let call = ApprovedCall {
        action_id: "act_1".into(),
        call_index: 0,
        name: "Read".into(),
        arguments: json!({"file_path": "/p/a"}),
        outcome: None,
    };
    with_calls
        .reply_accepted("turn_1", "r", "reading", &[call])
        .unwrap();
    assert!(with_calls.closing_reply.is_none(), "the turn goes on");
    let mut ended = session(SessionStatus::Expired);
    refused(
        ended.reply_accepted("turn_1", "r", "t", &[]),
        ErrorCode::SessionTerminal,
        "the session is expired; start a new session to do more work",
    );
}

#[test]
fn a_prompt_is_never_released_into_an_ended_session() {
    let mut ended = session(SessionStatus::Stopped);
    refused(
        ended.prompt_released("p1".into(), "go".into()),
        ErrorCode::SessionTerminal,
        "the session is stopped; start a new session to do more work",
    );
    assert_eq!(ended.status, SessionStatus::Stopped);
    assert!(ended.undelivered_prompt.is_none());
    let mut s = session(SessionStatus::Idle);
    let event = s.prompt_released("p1".into(), "go".into()).unwrap();
    assert!(matches!(
        event,
        LedgerEvent::PromptReleased { ref prompt_id, ref text_sha256, bytes }
            if prompt_id == "p1" && *text_sha256 == common::hash::sha256_hex(b"go") && bytes == 2
    ));
    // The ledger holds the prompt's hash, never its text.
    let (_, data) = event.to_row().unwrap();
    assert!(data.get("text").is_none(), "{data}");
    assert_eq!(s.status, SessionStatus::Running);
    s.prompt_delivered("p0".into());
    assert!(s.undelivered_prompt.is_some(), "another prompt's delivery");
    s.prompt_delivered("p1".into());
    assert!(s.undelivered_prompt.is_none());
}

#[test]
fn only_the_current_brokers_next_event_is_applied() {
    let mut s = session(SessionStatus::Running);
    assert_eq!(s.broker_event(6, 1), EventOrder::NotCurrent);
    assert_eq!(s.broker_event(7, 0), EventOrder::Seen);
    assert_eq!(s.broker_event(7, 1), EventOrder::Next);
    assert_eq!(s.broker.as_ref().map(|b| b.next_event_seq), Some(2));
    assert_eq!(s.broker_event(7, 1), EventOrder::Seen, "applied once");
    let record = s.broker.clone().unwrap();
    let mut ended = session(SessionStatus::Expired);
    ended.broker = None;
    assert!(ended.broker_spawned(record.clone()).is_none());
    assert!(ended.broker.is_none(), "an ended session gets no runtime");
    let mut starting = session(SessionStatus::Starting);
    assert!(matches!(
        starting.broker_spawned(record),
        Some(LedgerEvent::BrokerSpawned {})
    ));
}

fn subsession() -> SessionRecord {
    let mut child = session(SessionStatus::Running);
    child.id = "ds_1".into();
    child.pending_turn_id = None;
    child.delegation = Some(Delegation {
        parent_session_id: "ns_test".into(),
        start_action_id: "act_start".into(),
        task_sha256: "h".into(),
        runner_model: "sonnet".into(),
        end: None,
        in_flight: Vec::new(),
    });
    child
}

#[test]
fn a_delegation_is_listed_in_its_session_with_its_task_hash() {
    let mut parent = session(SessionStatus::WaitingForGpt);
    let child = subsession();
    let event = parent.subsession_delegated(
        &child,
        "act_start".into(),
        "route".into(),
        common::tools::ClaudeTier::default(),
        None,
    );
    assert_eq!(parent.subsessions, ["ds_1"]);
    assert!(
        matches!(event, LedgerEvent::SubsessionDelegated { ref task_sha256, .. } if task_sha256 == "h")
    );
    let mut calls = subsession();
    assert_eq!(
        (calls.next_delegated_call(), calls.next_delegated_call()),
        (2, 3)
    );
}

#[test]
fn a_subsession_ends_once_and_its_requests_stop_with_it() {
    let mut child = subsession();
    let sent = child.deepseek_request_sent("r1");
    assert!(matches!(
        sent,
        Some(LedgerEvent::DeepseekRequestSent { resent: false, .. })
    ));
    let again = child.deepseek_request_sent("r1");
    assert!(matches!(
        again,
        Some(LedgerEvent::DeepseekRequestSent { resent: true, .. })
    ));
    assert!(child.deepseek_request_answered("r1"));
    assert!(!child.deepseek_request_answered("r1"), "answered once");
    let ended = child.subsession_ended(SubsessionStatus::Succeeded, Some("done".into()), None);
    assert!(matches!(
        ended,
        Some(LedgerEvent::SubsessionEnded {
            ref subsession_id,
            status: SubsessionStatus::Succeeded,
            error: None
        }) if subsession_id == "ds_1"
    ));
    assert_eq!(child.status, SessionStatus::Stopped);
    assert!(child.terminal.is_some() && child.pending_turn_id.is_none());
    assert!(
        child
            .subsession_ended(SubsessionStatus::Failed, None, Some("late".into()))
            .is_none(),
        "its end is recorded once"
    );
    assert_eq!(child.subsession_status(), SubsessionStatus::Succeeded);
    assert!(
        child.deepseek_request_sent("r2").is_none(),
        "an ended one sends nothing"
    );
    let mut failed = subsession();
    failed.subsession_ended(SubsessionStatus::Lost, None, Some("gone".into()));
    assert_eq!(failed.status, SessionStatus::Failed);
}
