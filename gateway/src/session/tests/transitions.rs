//! The pure decisions: session transitions, action settlement, request checks.

use broker::executor::write::CrashResolution;
use common::outcome::OutcomeCode;
use common::protocol::{PreparedWrite, WriteEnd};
use common::tools::{CapabilityProfile, SubagentPolicy, ToolStatus};
use serde_json::json;

use crate::session::events::settled_state;
use crate::session::write_recovery::settle_after_crash;
use crate::state::{
    ActionRecord, ActionState, BrokerRecord, CurrentRun, LastResult, LedgerEvent, RunState,
    SessionRecord, SessionStatus, TerminalReason, Workspace, WorkspaceKind,
};
use crate::tools::{ReplyCall, request_hash};

pub(super) fn session(status: SessionStatus) -> SessionRecord {
    SessionRecord {
        id: "ns_test".into(),
        label: None,
        status,
        revision: 3,
        profile: CapabilityProfile::ReadOnly,
        subagent_policy: SubagentPolicy::None,
        source_directory: "/p".into(),
        working_directory: "/p".into(),
        workspace: Workspace::in_place(WorkspaceKind::ReadOnly, "/p".into()),
        claude_session_id: "c".into(),
        created_at_ms: 0,
        lease_generation: 1,
        lease_expires_at_ms: 1_000,
        current_run: Some(CurrentRun {
            generation: 1,
            state: RunState::Alive,
            started_at: "t".into(),
            exit_code: None,
            signal: None,
        }),
        pending_turn_id: Some("turn_1".into()),
        last_result: None,
        launch_error: None,
        stop_request: None,
        terminal: None,
        recovery_required: false,
        workspace_identity: None,
        conversation_restart: None,
        restart_notice_pending: false,
        network_boundary: crate::boundary::network_boundary(),
        skill_snapshot: Vec::new(),
        broker: Some(BrokerRecord {
            pid: 7,
            start_time: 1,
            boot_id: "b".into(),
            socket_path: String::new(),
            runtime_dir: String::new(),
            secret: String::new(),
            generation: 1,
            next_event_seq: 1,
        }),
        turn_sequence: 1,
        last_reply_turn_id: None,
        closing_reply: None,
        undelivered_prompt: None,
        undelivered_reply_turn: None,
        subsessions: Vec::new(),
        delegation: None,
        content_pruned: None,
    }
}

fn run_state(session: &SessionRecord) -> RunState {
    session.current_run.as_ref().unwrap().state
}

#[test]
fn a_lost_runtime_leaves_an_idle_session_that_needs_recovery() {
    let mut s = session(SessionStatus::WaitingForGpt);
    assert!(matches!(
        s.runtime_lost("gone"),
        Some(LedgerEvent::RuntimeLost { .. })
    ));
    assert_eq!(s.status, SessionStatus::Idle);
    assert!(s.recovery_required && s.pending_turn_id.is_none());
    assert_eq!(run_state(&s), RunState::Lost);
    let mut ended = session(SessionStatus::Stopped);
    assert!(ended.runtime_lost("gone").is_none());
    assert!(!ended.recovery_required);
}

#[test]
fn a_closed_link_keeps_the_turn_of_a_live_broker_and_drops_a_dead_ones() {
    let mut live = session(SessionStatus::WaitingForGpt);
    live.link_lost(7, false, false).unwrap();
    assert_eq!(live.status, SessionStatus::WaitingForGpt);
    assert!(live.pending_turn_id.is_some() && live.recovery_required);
    let mut dead = session(SessionStatus::WaitingForGpt);
    dead.link_lost(7, true, false).unwrap();
    assert_eq!(dead.status, SessionStatus::Idle);
    assert!(dead.pending_turn_id.is_none());
    // An older broker's link says nothing about the current one.
    let mut other = session(SessionStatus::Running);
    assert!(other.link_lost(6, true, false).is_none());
    assert_eq!(run_state(&other), RunState::Alive);
}

#[test]
fn a_closed_link_completes_a_requested_stop_and_says_when_it_was_forced() {
    let mut s = session(SessionStatus::Stopping);
    s.stop_requested("done", true);
    s.link_lost(7, true, true).unwrap();
    assert_eq!(s.status, SessionStatus::Stopped);
    let terminal = s.terminal.unwrap();
    assert_eq!(terminal.reason, TerminalReason::Stopped);
    assert!(terminal.detail.unwrap().contains("killed"));
}

#[test]
fn a_reattached_link_revives_only_a_lost_run() {
    let mut s = session(SessionStatus::Idle);
    assert!(s.reattached().is_none(), "an alive run needs nothing");
    s.runtime_lost("x");
    assert!(matches!(
        s.reattached(),
        Some(LedgerEvent::RuntimeReattached {})
    ));
    assert_eq!(run_state(&s), RunState::Alive);
    assert!(!s.recovery_required);
}

#[test]
fn a_lease_expires_only_once_its_time_has_passed() {
    let mut s = session(SessionStatus::Idle);
    assert!(s.expire(999).is_none());
    assert!(s.expire(1_000).is_some());
    assert_eq!(s.status, SessionStatus::Expired);
    assert_eq!(
        s.terminal.as_ref().unwrap().reason,
        TerminalReason::LeaseExpired
    );
    assert!(
        s.expire(5_000).is_none(),
        "an ended session does not expire again"
    );
}

#[test]
fn a_runner_exit_means_what_the_session_was_doing() {
    let mut stopping = session(SessionStatus::Stopping);
    stopping.stop_requested("done", true);
    stopping.runner_exited(Some(143), None, 0);
    assert_eq!(stopping.status, SessionStatus::Stopped);
    assert_eq!(stopping.terminal.unwrap().exit_code, Some(143));
    let mut expired = session(SessionStatus::Idle);
    expired.expire(2_000);
    expired.runner_exited(None, Some(15), 0);
    assert_eq!(expired.status, SessionStatus::Expired);
    assert_eq!(expired.terminal.unwrap().signal, Some(15));
    let mut crashed = session(SessionStatus::WaitingForGpt);
    crashed.runner_exited(Some(1), None, 0);
    assert_eq!(crashed.status, SessionStatus::Idle);
    assert!(crashed.recovery_required && crashed.pending_turn_id.is_none());
    assert_eq!(run_state(&crashed), RunState::Exited);
}

#[test]
fn the_end_of_a_turn_makes_the_closing_reply_the_last_result() {
    let closing = LastResult {
        turn_id: "turn_1".into(),
        text: "done".into(),
        at: "t".into(),
    };
    let mut s = session(SessionStatus::Running);
    s.pending_turn_id = None;
    s.closing_reply = Some(closing.clone());
    s.runner_turn_ended("success".into(), false);
    assert_eq!(s.status, SessionStatus::Idle);
    assert_eq!(s.last_result, Some(closing.clone()));
    // With a turn pending, nothing ended.
    let mut waiting = session(SessionStatus::WaitingForGpt);
    waiting.closing_reply = Some(closing);
    waiting.runner_turn_ended("success".into(), false);
    assert_eq!(waiting.status, SessionStatus::WaitingForGpt);
    assert!(waiting.last_result.is_none());
}

#[test]
fn a_stop_without_a_runtime_is_final_at_once() {
    let mut s = session(SessionStatus::Idle);
    s.stop_requested("why", false);
    assert_eq!(s.status, SessionStatus::Stopped);
    assert!(s.terminal.unwrap().detail.unwrap().contains("not attached"));
    let mut attached = session(SessionStatus::Idle);
    attached.stop_requested("why", true);
    assert_eq!(attached.status, SessionStatus::Stopping);
    assert!(attached.terminal.is_none());
}

#[test]
fn an_enforced_stop_says_whether_the_broker_could_be_killed() {
    let mut killed = session(SessionStatus::Stopping);
    killed.stop_enforced(true).unwrap();
    let mut stuck = session(SessionStatus::Stopping);
    stuck.stop_enforced(false).unwrap();
    assert_eq!(run_state(&stuck), RunState::Lost);
    assert_ne!(
        killed.terminal.unwrap().detail,
        stuck.terminal.unwrap().detail
    );
    assert!(session(SessionStatus::Failed).stop_enforced(true).is_none());
}

#[test]
fn a_rotated_lease_without_a_runtime_asks_for_a_new_runner() {
    let mut s = session(SessionStatus::Idle);
    s.lease_rotated(2, 9_000, false);
    assert_eq!((s.lease_generation, s.lease_expires_at_ms), (2, 9_000));
    assert!(s.recovery_required);
    let mut attached = session(SessionStatus::Idle);
    attached.lease_rotated(2, 9_000, true);
    assert!(!attached.recovery_required);
}

#[test]
fn finished_actions_settle_by_what_the_write_reported() {
    use ActionState::*;
    assert_eq!(
        settled_state(true, Some(WriteEnd::Committed), ToolStatus::Ok),
        Committed
    );
    assert_eq!(
        settled_state(true, Some(WriteEnd::NotApplied), ToolStatus::Error),
        NotApplied
    );
    assert_eq!(
        settled_state(true, Some(WriteEnd::Indeterminate), ToolStatus::Error),
        Indeterminate
    );
    assert_eq!(settled_state(true, None, ToolStatus::Rejected), NotApplied);
    assert_eq!(settled_state(true, None, ToolStatus::Ok), Committed);
    assert_eq!(settled_state(false, None, ToolStatus::Error), Committed);
}

#[test]
fn a_crash_resolution_gives_a_receipt_of_what_the_file_holds() {
    let action = ActionRecord {
        action_id: "act_1".into(),
        session_id: "ns_test".into(),
        turn_id: "turn_1".into(),
        call_index: 0,
        name: "Write".into(),
        arguments: json!({}),
        state: ActionState::Prepared,
        outcome: None,
        prepared: Some(PreparedWrite {
            action_id: "act_1".into(),
            path: "/p/a.txt".into(),
            pre_sha256: Some("old".into()),
            post_sha256: "new".into(),
            temp_name: "t".into(),
            pre_identity: None,
        }),
    };
    let (committed, _) = settle_after_crash(action.clone(), CrashResolution::Committed).unwrap();
    let receipt = committed.outcome.unwrap().receipt;
    assert_eq!(receipt.post_sha256.as_deref(), Some("new"));
    let (not_applied, event) =
        settle_after_crash(action.clone(), CrashResolution::NotApplied).unwrap();
    let outcome = not_applied.outcome.unwrap();
    assert_eq!(
        (outcome.status, outcome.receipt.post_sha256),
        (ToolStatus::Error, None)
    );
    assert_eq!(outcome.error_code, Some(OutcomeCode::NotApplied));
    let (_, data) = event.to_row().unwrap();
    assert_eq!(data["resolution"], "not_applied");
    let mut unprepared = action;
    unprepared.prepared = None;
    assert!(settle_after_crash(unprepared, CrashResolution::Committed).is_none());
}

#[test]
fn calls_are_approved_all_or_none_against_the_profile() {
    let reader = session(SessionStatus::WaitingForGpt);
    let call = |name: &str, arguments| ReplyCall {
        name: name.into(),
        arguments,
    };
    let ok = crate::tools::approve_calls(
        &reader,
        &[
            call("Read", json!({"file_path": "/p/a"})),
            call("FindFiles", json!({"name_contains": "a"})),
        ],
    )
    .unwrap();
    assert_eq!(ok.iter().map(|c| c.call_index).collect::<Vec<_>>(), [0, 1]);
    assert_ne!(ok[0].action_id, ok[1].action_id);
    let refused = crate::tools::approve_calls(
        &reader,
        &[
            call("Read", json!({"file_path": "/p/a"})),
            call("Write", json!({"file_path": "/p/a", "content": ""})),
        ],
    )
    .unwrap_err();
    assert!(
        refused.message.starts_with("tool_calls[1]"),
        "{}",
        refused.message
    );
    let mut writer = session(SessionStatus::WaitingForGpt);
    writer.profile = CapabilityProfile::DirectWrite;
    assert!(
        crate::tools::approve_calls(
            &writer,
            &[call("Write", json!({"file_path": "/p/a", "content": ""}))]
        )
        .is_ok()
    );
}

#[test]
fn a_request_hash_ignores_only_what_does_not_change_the_request() {
    let a = request_hash(
        &json!({"prompt": "p", "wait_seconds": 1, "lease_id": "x"}),
        &["wait_seconds", "lease_id"],
    );
    let b = request_hash(
        &json!({"lease_id": "y", "prompt": "p"}),
        &["wait_seconds", "lease_id"],
    );
    let c = request_hash(&json!({"prompt": "q"}), &["wait_seconds", "lease_id"]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// The names stored in columns and written in messages are the serde names.
#[test]
fn record_enum_names_match_their_serde_names() {
    fn wire<T: serde::Serialize>(value: T) -> String {
        serde_json::to_value(value)
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }
    for state in ActionState::ALL {
        assert_eq!(state.as_str(), wire(state));
        assert_eq!(ActionState::from_name(state.as_str()), Some(state));
    }
    assert_eq!(ActionState::from_name("bogus"), None);
    use SessionStatus::*;
    for status in [
        Starting,
        WaitingForGpt,
        Running,
        Idle,
        Stopping,
        Stopped,
        Failed,
        Expired,
    ] {
        assert_eq!(status.as_str(), wire(status));
    }
    use crate::error::ErrorCode;
    for code in [
        ErrorCode::InvalidArgument,
        ErrorCode::LeaseExpired,
        ErrorCode::Busy,
    ] {
        assert_eq!(code.as_str(), wire(code));
    }
    for status in [
        crate::state::TurnStatus::Pending,
        crate::state::TurnStatus::Answered,
    ] {
        assert_eq!(status.as_str(), wire(status));
    }
}

/// The broker host is handed the session's spec, nothing else of its record: a worktree's source
/// directory as the merge target (a session in place has none), a sub-session's delegation.
#[test]
fn a_broker_is_handed_its_sessions_spec() {
    let spec = session(SessionStatus::Idle).broker_spec();
    assert_eq!(spec.session_id, "ns_test");
    assert_eq!((spec.merge_target, spec.delegation), (None, None));
    let mut s = session(SessionStatus::Idle);
    s.source_directory = "/src".into();
    s.working_directory = "/state/worktrees/w".into();
    s.workspace = Workspace {
        kind: WorkspaceKind::Worktree,
        root: "/src".into(),
        worktree_path: Some("/state/worktrees/w".into()),
        branch: None,
        base_commit: None,
    };
    s.delegation = Some(crate::state::Delegation {
        parent_session_id: "ns_parent".into(),
        start_action_id: "act_1".into(),
        task_sha256: "t".into(),
        runner_model: "claude-sonnet-4-5".into(),
        end: None,
        in_flight: Vec::new(),
    });
    let spec = s.broker_spec();
    assert_eq!(spec.working_directory, "/state/worktrees/w");
    assert_eq!(spec.merge_target.as_deref(), Some("/src"));
    let delegation = spec.delegation.unwrap();
    assert_eq!(
        (
            delegation.parent_session_id.as_str(),
            delegation.runner_model.as_str()
        ),
        ("ns_parent", "claude-sonnet-4-5")
    );
}
