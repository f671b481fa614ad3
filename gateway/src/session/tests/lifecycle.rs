//! Starting, replaying, refusing, stopping and expiring sessions.

use std::time::Duration;

use common::protocol::{BrokerEvent, GatewayToBroker};
use common::tools::CapabilityProfile;
use serde_json::json;

use super::fake_host::runner_not_found;
use super::harness::{Harness, Tuning, code};
use crate::brokers::BrokerSignal;
use crate::error::ErrorCode;
use crate::state::SessionStatus;
use crate::tools::PublicTool;
use crate::view::{LaunchErrorCode, TerminalReason};

#[tokio::test]
async fn a_start_records_the_session_launches_one_broker_and_releases_the_prompt() {
    let h = Harness::new();
    let view = h.start().await;
    assert_eq!(view.status, SessionStatus::Running);
    assert!(view.lease_id.as_deref().unwrap().starts_with("lease_"));
    assert!(view.recovery_token.as_deref().unwrap().starts_with("rec_"));
    assert!(view.runtime_attached);
    let spawns = h.host.spawns();
    assert_eq!(spawns.len(), 1);
    assert_eq!((spawns[0].generation, spawns[0].resume), (1, false));
    let sent = h.host.drain_sent(spawns[0].pid).await;
    assert!(
        sent.iter()
            .any(|m| matches!(m, GatewayToBroker::Prompt(p) if p.text == "look around")),
        "{sent:?}"
    );
    assert_eq!(
        h.ledger(&view.native_session_id),
        ["session_started", "broker_spawned", "prompt_released"]
    );
}

#[tokio::test]
async fn a_repeated_start_replays_its_answer_without_a_second_session() {
    let h = Harness::new();
    let first = h.start().await;
    let again = h.start().await;
    assert!(again.replay);
    assert_eq!(again.native_session_id, first.native_session_id);
    assert_eq!(again.lease_id, first.lease_id);
    assert_eq!(again.recovery_token, first.recovery_token);
    assert_eq!(h.host.spawns().len(), 1);
}

#[tokio::test]
async fn a_start_key_reused_for_another_request_is_a_conflict() {
    let h = Harness::new();
    h.start().await;
    let other = h
        .call(
            PublicTool::Start,
            json!({"prompt": "something else", "working_directory": h.project,
                   "idempotency_key": "k1", "wait_seconds": 0}),
        )
        .await;
    assert_eq!(code(other), ErrorCode::IdempotencyConflict);
    assert_eq!(h.host.spawns().len(), 1);
}

#[tokio::test]
async fn wait_seconds_does_not_change_what_a_start_means() {
    let h = Harness::new();
    let first = h.start().await;
    let again = h
        .call(
            PublicTool::Start,
            json!({"prompt": "look around", "working_directory": h.project,
                   "idempotency_key": "k1", "capability_profile": "read_only",
                   "wait_seconds": 1}),
        )
        .await
        .unwrap();
    assert!(again.replay);
    assert_eq!(again.native_session_id, first.native_session_id);
}

#[tokio::test]
async fn a_runtime_that_cannot_start_fails_the_session_and_says_why() {
    let h = Harness::new();
    *h.host.fail_spawn.lock().unwrap() = Some(runner_not_found());
    let view = h.start().await;
    assert_eq!(view.status, SessionStatus::Failed);
    assert_eq!(
        view.launch_error.as_ref().map(|e| e.code),
        Some(LaunchErrorCode::RunnerNotFound)
    );
    assert_eq!(
        view.terminal.as_ref().map(|t| t.reason),
        Some(TerminalReason::LaunchError)
    );
    let more = h.reply(&view, "r1", "hi", json!([])).await;
    assert_eq!(code(more), ErrorCode::SessionTerminal);
}

#[tokio::test]
async fn a_broker_that_does_not_answer_fails_the_start() {
    let h = Harness::new();
    h.host
        .refuse_connect
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let view = h.start().await;
    assert_eq!(view.status, SessionStatus::Failed);
    assert_eq!(
        view.launch_error.as_ref().map(|e| e.code),
        Some(LaunchErrorCode::BrokerUnreachable)
    );
    // The broker that never answered is stopped, not left running (red team 50).
    let spawned: Vec<i32> = h.host.spawns().iter().map(|s| s.pid).collect();
    assert_eq!(spawned.len(), 1);
    assert!(
        h.host.signals().iter().any(|(pid, _)| *pid == spawned[0]),
        "{:?}",
        h.host.signals()
    );
}

#[tokio::test]
async fn starts_beyond_the_live_session_limit_are_busy_and_persist_nothing() {
    let h = Harness::with(Tuning {
        max_live_sessions: 1,
        ..Tuning::default()
    });
    h.start().await;
    let second = h
        .call(
            PublicTool::Start,
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "k2",
                   "wait_seconds": 0}),
        )
        .await;
    assert_eq!(code(second), ErrorCode::Busy);
    assert_eq!(h.gateway.store.read(|tx| tx.sessions()).unwrap().len(), 1);
    assert_eq!(h.host.spawns().len(), 1);
}

#[tokio::test]
async fn past_the_state_budget_new_work_is_refused_while_status_and_stop_work() {
    let h = Harness::new();
    let view = h.start().await;
    // The state dir is past its budget (issue 24).
    h.gateway.state_budget.set_max_bytes(1);
    h.gateway.state_budget.refresh_now();
    let second = h
        .call(
            PublicTool::Start,
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "k2",
                   "wait_seconds": 0}),
        )
        .await;
    let err = second.unwrap_err();
    assert_eq!(err.code, ErrorCode::StorageFull);
    assert!(
        err.message.contains("CLAUDE_TOOLS_STATE_MAX_MB"),
        "{}",
        err.message
    );
    let continued = h
        .call(
            PublicTool::Continue,
            json!({"native_session_id": view.native_session_id, "lease_id": view.lease_id,
                   "prompt": "more", "idempotency_key": "c1"}),
        )
        .await;
    assert_eq!(code(continued), ErrorCode::StorageFull);
    assert_eq!(h.gateway.store.read(|tx| tx.sessions()).unwrap().len(), 1);
    // The existing session: status and stop still work (a stop reason is bounded too).
    h.status(&view).await.unwrap();
    let long_reason = h
        .call(
            PublicTool::Stop,
            json!({"native_session_id": view.native_session_id, "lease_id": view.lease_id,
                   "request_id": "s0", "reason": "r".repeat(501)}),
        )
        .await;
    assert_eq!(code(long_reason), ErrorCode::InvalidArgument);
    let stopped = h.stop(&view, "s1").await.unwrap();
    assert_eq!(stopped.status, SessionStatus::Stopped);
}

#[tokio::test]
async fn prune_removes_an_ended_sessions_files_keeps_its_ledger_and_never_a_live_one() {
    let h = Harness::with(Tuning {
        max_live_sessions: 4,
        ..Tuning::default()
    });
    let ended = h.start_with("k1", CapabilityProfile::ReadOnly).await;
    let live = h.start_with("k2", CapabilityProfile::ReadOnly).await;
    h.stop(&ended, "s1").await.unwrap();
    let run = h.gateway.config.state_dir.join("run");
    let dir_of = |id: &str| run.join(&id.trim_start_matches("ns_")[..12]);
    for view in [&ended, &live] {
        let dir = dir_of(&view.native_session_id);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::write(dir.join("home/transcript.jsonl"), vec![1u8; 64 << 10]).unwrap();
    }
    // A symlink inside points outside: removed as a link, its target stays.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir_of(&ended.native_session_id).join("out"))
        .unwrap();
    // Not old enough: nothing goes.
    let report = crate::prune::prune(&h.gateway, Duration::from_secs(3600), false).unwrap();
    assert!(report.sessions.is_empty(), "{report:?}");
    let dry = crate::prune::prune(&h.gateway, Duration::ZERO, true).unwrap();
    assert_eq!(dry.sessions.len(), 1);
    assert!(
        dir_of(&ended.native_session_id).exists(),
        "a dry run removed files"
    );
    let report = crate::prune::prune(&h.gateway, Duration::ZERO, false).unwrap();
    assert_eq!(report.sessions.len(), 1, "{report:?}");
    assert_eq!(report.sessions[0].session_id, ended.native_session_id);
    assert!(report.bytes >= 64 << 10);
    assert!(!dir_of(&ended.native_session_id).exists());
    assert!(
        dir_of(&live.native_session_id)
            .join("home/transcript.jsonl")
            .exists()
    );
    assert!(
        outside.path().join("keep").exists(),
        "a symlink was followed"
    );
    // The ended session's record and ledger stay readable.
    let stopped = h.status(&ended).await.unwrap();
    assert_eq!(stopped.status, SessionStatus::Stopped);
    h.status(&live).await.unwrap();
}

#[tokio::test]
async fn bad_start_input_is_refused_before_anything_is_created() {
    let h = Harness::new();
    let cases = [
        (
            json!({"prompt": "  ", "working_directory": h.project, "idempotency_key": "a"}),
            ErrorCode::InvalidArgument,
        ),
        (
            json!({"prompt": "p", "working_directory": "relative", "idempotency_key": "a"}),
            ErrorCode::InvalidArgument,
        ),
        (
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": ""}),
            ErrorCode::InvalidArgument,
        ),
        (
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "a",
                "wait_seconds": 51}),
            ErrorCode::InvalidArgument,
        ),
        (
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "a",
                "subagent_policy": "deepseek_explicit"}),
            ErrorCode::InvalidArgument,
        ),
        (
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "a",
                "subagent_policy": "deepseek_explicit", "capability_profile": "direct_write"}),
            ErrorCode::InvalidArgument,
        ),
        (
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "a",
                "skill_contexts": [{"skill_id": "personal:x"}]}),
            ErrorCode::NotPermitted,
        ),
        (
            json!({"prompt": "p", "working_directory": h.gateway.config.state_dir,
                "idempotency_key": "a"}),
            ErrorCode::NotPermitted,
        ),
        (
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "a",
                "surprise": 1}),
            ErrorCode::InvalidArgument,
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(
            code(h.call(PublicTool::Start, args.clone()).await),
            expected,
            "{args}"
        );
    }
    assert!(h.gateway.store.read(|tx| tx.sessions()).unwrap().is_empty());
    assert!(h.host.spawns().is_empty());
}

#[tokio::test]
async fn calls_for_unknown_sessions_are_not_found_and_leave_no_trace_in_memory() {
    let h = Harness::new();
    let (id, lease) = ("ns_nope", "lease_x");
    for (tool, args) in [
        (
            PublicTool::Status,
            json!({"native_session_id": id, "lease_id": lease}),
        ),
        (
            PublicTool::Stop,
            json!({"native_session_id": id, "lease_id": lease, "request_id": "r"}),
        ),
        (
            PublicTool::Continue,
            json!({"native_session_id": id, "lease_id": lease,
                                      "prompt": "p", "idempotency_key": "i"}),
        ),
        (
            PublicTool::ReplyAndWait,
            json!({"native_session_id": id, "lease_id": lease,
                                          "turn_id": "t", "reply_id": "r"}),
        ),
    ] {
        let result = h.call(tool, args).await;
        assert_eq!(code(result), ErrorCode::NotFound, "{tool:?}");
    }
    let recover = h
        .call(
            PublicTool::Recover,
            json!({"native_session_id": "ns_nope", "recovery_token": "rec_x", "recovery_id": "r"}),
        )
        .await;
    assert_eq!(code(recover), ErrorCode::NotFound);
    assert_eq!(h.gateway.live.len(), 0);
}

#[tokio::test]
async fn a_wrong_lease_is_lease_invalid_and_changes_nothing() {
    let h = Harness::new();
    let view = h.start().await;
    let mut wrong = view.clone();
    wrong.lease_id = Some("lease_0000".into());
    assert_eq!(code(h.status(&wrong).await), ErrorCode::LeaseInvalid);
    assert_eq!(code(h.stop(&wrong, "s1").await), ErrorCode::LeaseInvalid);
    assert_eq!(
        h.status(&view).await.unwrap().status,
        SessionStatus::Running
    );
}

#[tokio::test]
async fn a_stop_goes_over_the_link_and_the_runner_exit_ends_the_session() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let gateway = h.gateway.clone();
    let args = json!({"native_session_id": view.native_session_id,
                      "lease_id": view.lease_id, "request_id": "s1", "reason": "done"});
    let args_again = args.clone();
    let stopping = tokio::spawn(async move { PublicTool::Stop.call(&gateway, args).await });
    // The broker is asked to stop over its link, then reports the runner's exit.
    loop {
        if let GatewayToBroker::Stop { reason } = h.host.next_sent(pid).await {
            assert_eq!(reason, "done");
            break;
        }
    }
    h.event(
        pid,
        3,
        BrokerEvent::RunnerExited {
            exit_code: Some(143),
            signal: None,
            at_ms: 0,
        },
    )
    .await;
    let stopped = stopping.await.unwrap().unwrap();
    assert_eq!(stopped.status, SessionStatus::Stopped);
    let terminal = stopped.terminal.unwrap();
    assert_eq!(
        (terminal.reason, terminal.exit_code),
        (TerminalReason::Stopped, Some(143))
    );
    assert_eq!(stopped.stop_request.unwrap().reason, "done");
    assert!(stopped.pending_turn.is_none());
    // Replayed, not stopped twice; the same key for another reason is a conflict.
    let again = h.call(PublicTool::Stop, args_again).await.unwrap();
    assert!(again.replay);
    assert_eq!(
        code(h.stop(&view, "s1").await),
        ErrorCode::IdempotencyConflict
    );
}

#[tokio::test]
async fn a_stop_without_a_link_signals_the_verified_broker_and_ends_at_once() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.host.drop_link(pid);
    wait_for(|| !h.gateway.live(&view.native_session_id).attached()).await;
    let stopped = h.stop(&view, "s1").await.unwrap();
    assert_eq!(stopped.status, SessionStatus::Stopped);
    assert!(
        stopped
            .terminal
            .unwrap()
            .detail
            .unwrap()
            .contains("not attached"),
        "the terminal says nothing was running"
    );
    assert!(h.host.signals().contains(&(pid, BrokerSignal::Term)));
}

#[tokio::test]
async fn an_expired_lease_expires_the_session_and_stops_its_runner() {
    let h = Harness::with(Tuning {
        lease_ttl: Duration::from_millis(300),
        ..Tuning::default()
    });
    let view = h.start().await;
    let pid = h.pid(&view);
    tokio::time::sleep(Duration::from_millis(400)).await;
    h.gateway.enforce_leases();
    let stored = h.gateway.load(&view.native_session_id).unwrap();
    assert_eq!(stored.status, SessionStatus::Expired);
    assert_eq!(
        stored.terminal.map(|t| t.reason),
        Some(crate::state::TerminalReason::LeaseExpired)
    );
    let sent = h.host.drain_sent(pid).await;
    assert!(
        sent.iter()
            .any(|m| matches!(m, GatewayToBroker::Stop { reason } if reason == "lease expired")),
        "{sent:?}"
    );
    assert_eq!(code(h.status(&view).await), ErrorCode::LeaseExpired);
}

#[tokio::test]
async fn ended_sessions_leave_the_in_memory_registry() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.host.drop_link(pid);
    wait_for(|| !h.gateway.live(&view.native_session_id).attached()).await;
    h.stop(&view, "s1").await.unwrap();
    assert_eq!(h.gateway.live.len(), 1);
    h.gateway.enforce_leases();
    assert_eq!(h.gateway.live.len(), 0);
    assert_eq!(
        h.status(&view).await.unwrap().status,
        SessionStatus::Stopped
    );
}

/// Poll `done` for up to 5 s.
pub async fn wait_for(done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in time");
}

#[tokio::test]
async fn every_key_and_request_id_is_bounded_and_a_refused_one_changes_nothing() {
    let h = Harness::new();
    let view = h.start().await;
    let before = h.ledger(&view.native_session_id);
    let (id, lease) = (view.native_session_id.clone(), view.lease_id.clone());
    let token = view.recovery_token.clone();
    let bounded = "must be 1 to 200";
    let printable = "may hold only printable ASCII";
    for (key, why) in [
        (String::new(), bounded),
        ("k".repeat(201), bounded),
        // Issue 23: ids reach the owner's terminal; nothing in them may act on it.
        ("k\u{1b}]0;pwned\u{7}".to_string(), printable),
        ("reply\nforged".to_string(), printable),
        ("id\u{202e}gnp".to_string(), printable),
        ("with space".to_string(), printable),
        ("\u{9b}2J".to_string(), printable),
    ] {
        let cases = [
            (
                PublicTool::Continue,
                "idempotency_key",
                json!({"native_session_id": id, "lease_id": lease, "prompt": "p",
                       "idempotency_key": key}),
            ),
            (
                PublicTool::ReplyAndWait,
                "reply_id",
                json!({"native_session_id": id, "lease_id": lease, "turn_id": "t",
                       "reply_id": key}),
            ),
            (
                PublicTool::Stop,
                "request_id",
                json!({"native_session_id": id, "lease_id": lease, "request_id": key}),
            ),
            (
                PublicTool::Recover,
                "recovery_id",
                json!({"native_session_id": id, "recovery_token": token, "recovery_id": key}),
            ),
            (
                PublicTool::Start,
                "idempotency_key",
                json!({"prompt": "p", "working_directory": h.project, "idempotency_key": key}),
            ),
        ];
        for (tool, field, args) in cases {
            let refused = h.call(tool, args).await.unwrap_err();
            assert_eq!(refused.code, ErrorCode::InvalidArgument, "{tool:?}");
            assert!(
                refused.message.starts_with(&format!("{field} {why}")),
                "{tool:?}: {}",
                refused.message
            );
        }
    }
    assert_eq!(h.ledger(&view.native_session_id), before);
    assert_eq!(h.host.spawns().len(), 1);
    assert_eq!(
        h.status(&view).await.unwrap().status,
        SessionStatus::Running
    );
}

#[tokio::test]
async fn a_session_label_is_short_printable_text() {
    let h = Harness::new();
    for (i, label) in [
        "x".repeat(201),
        "ok\u{1b}]0;pwned\u{7}".to_string(),
        "two\nlines".to_string(),
        "client\u{202e}gnp.exe".to_string(),
        "zero\u{200b}width".to_string(),
        // Issue 23, F9: invisible, blank-looking, private and stacked characters.
        "joiner\u{34f}x".to_string(),
        "\u{fe0f}lone selector".to_string(),
        "braille\u{2800}blank".to_string(),
        "ideographic\u{3000}space".to_string(),
        "no-break\u{a0}space".to_string(),
        "private\u{e000}use".to_string(),
        "unassigned\u{378}".to_string(),
        format!("zalgo e{}", "\u{301}".repeat(4)),
    ]
    .into_iter()
    .enumerate()
    {
        let refused = h
            .call(
                PublicTool::Start,
                json!({"prompt": "p", "working_directory": h.project,
                       "idempotency_key": format!("label-{i}"), "session_label": label}),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidArgument, "{label:?}");
        assert!(
            refused.message.starts_with("session_label "),
            "{}",
            refused.message
        );
        if i > 0 {
            assert!(
                refused
                    .message
                    .contains("ordinary spaces (U+0020), at most 3 combining marks"),
                "{}",
                refused.message
            );
        }
    }
    assert!(h.host.spawns().is_empty(), "nothing started");
    let ok = h
        .call(
            PublicTool::Start,
            json!({"prompt": "p", "working_directory": h.project, "idempotency_key": "label-ok",
                   "session_label": "Refactor the parser — étape 2 ✓ Vie\u{323}\u{302}t ✔\u{fe0f}"}),
        )
        .await
        .unwrap();
    assert_eq!(
        ok.session_label.as_deref(),
        Some("Refactor the parser — étape 2 ✓ Vie\u{323}\u{302}t ✔\u{fe0f}")
    );
}
