//! The SessionView and the records it is made of, as ChatGPT reads them.

use super::*;
use common::tools::Receipt;

/// The SessionView is what ChatGPT reads after every call.
#[test]
fn session_view_snapshot() {
    let view = SessionView {
        native_session_id: "ns_0123".into(),
        session_label: Some("demo".into()),
        status: SessionStatus::WaitingForGpt,
        revision: 7,
        replay: false,
        route: "chatgpt-main".into(),
        fallback: "none".into(),
        lease_id: Some("lease_abc".into()),
        lease_expires_at: Some("2026-11-29T19:00:00Z".into()),
        recovery_token: None,
        capability_profile: CapabilityProfile::ReadOnly,
        subagent_policy: SubagentPolicy::None,
        source_directory: "/home/me/project".into(),
        working_directory: "/home/me/project".into(),
        workspace: Workspace {
            kind: WorkspaceKind::ReadOnly,
            root: "/home/me/project".into(),
            worktree_path: None,
            branch: None,
            base_commit: None,
        },
        claude_session_id: "6f1c0c1e-8d7e-4a53-9d44-0f2f4c1b2a10".into(),
        current_run: Some(CurrentRunView {
            generation: 1,
            state: RunState::Alive,
            started_at: "2026-11-29T18:30:00Z".into(),
            exit_code: None,
        }),
        runtime_attached: true,
        recovery_required: false,
        pending_turn: Some(PendingTurn {
            turn_id: "turn_2".into(),
            sequence: 2,
            kind: TurnKind::ToolResults,
            prompt: None,
            tool_results: Some(vec![ToolResultView {
                call_index: 0,
                name: "Read".into(),
                status: ToolStatus::Ok,
                output: "     1\thello".into(),
                truncated: false,
                receipt: Some(Receipt {
                    action_id: "act_1".into(),
                    path: Some("/home/me/project/a.txt".into()),
                    sha256: Some(
                        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03".into(),
                    ),
                    duration_ms: 1,
                    ..Receipt::default()
                }),
            }]),
            skill_contexts: Vec::new(),
            allowed_tools: vec!["Read".into(), "FindFiles".into(), "SearchText".into()],
            reply_budget_bytes: REPLY_BUDGET_BYTES,
            notice: None,
        }),
        last_result: None,
        launch_error: None,
        stop_request: None,
        terminal: None,
        network_boundary: NetworkBoundary {
            runner: "loopback:broker-port-only".into(),
            runner_writes: "private-dirs-only".into(),
            commands: "none: empty network namespace, no sockets".into(),
            enforced_by: "linux:netns+landlock(v6)+seccomp+nnp+caps".into(),
            commands_enforced_by: "linux:netns+landlock(v6)+seccomp".into(),
            degraded: false,
        },
        skill_snapshot: vec![SkillSnapshotEntry {
            skill_id: "project:review".into(),
            content_sha256: PIN.into(),
        }],
        deepseek_route: "disabled".into(),
        deepseek_subsessions: Vec::new(),
        active_deepseek_subsession_id: None,
        conversation_restarted: None,
        content_pruned: None,
    };
    insta::assert_json_snapshot!(view);
}

const PIN: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// A prompt turn of a session with skills: each frozen body comes with it.
#[test]
fn prompt_turn_with_skill_contexts_snapshot() {
    let turn = PendingTurn {
        turn_id: "turn_1".into(),
        sequence: 1,
        kind: TurnKind::Prompt,
        prompt: Some("Review the parser".into()),
        tool_results: None,
        skill_contexts: vec![SkillContextView {
            skill_id: "project:review".into(),
            content_sha256: PIN.into(),
            instructions: "Check error paths first.\n".into(),
        }],
        allowed_tools: vec!["Read".into()],
        reply_budget_bytes: REPLY_BUDGET_BYTES,
        notice: None,
    };
    insta::assert_json_snapshot!(turn);
}

/// The typed records of a session that ended, as ChatGPT reads them (built from the stored
/// records, as `session::view` builds them).
#[test]
fn ended_session_records_snapshot() {
    use crate::state::{LaunchError, StopRequest, Terminal};
    let public = |terminal: Terminal| super::Terminal::from(&terminal);
    let at = "2026-11-29T19:00:00Z".to_string();
    let mut indeterminate =
        Terminal::write_indeterminate("act_1".into(), Some("/home/me/project/a.txt".into()));
    indeterminate.at = at.clone();
    let mut launch_terminal = Terminal::launch_error();
    launch_terminal.at = at.clone();
    let mut launch_error = LaunchError::now(
        crate::state::LaunchErrorCode::RunnerNotFound,
        "the Claude Code binary was not found",
    );
    launch_error.at = at.clone();
    let records = serde_json::json!({
        "stopped": public(Terminal::stopped(None, Some(143), None, at.clone())),
        "stopped_unattached":
            public(Terminal::stopped(Some("nothing was running"), None, None, at.clone())),
        "lease_expired": public(Terminal::lease_expired(at.clone())),
        "write_indeterminate": public(indeterminate),
        "launch_error": public(launch_terminal),
        "launch_error_record": super::LaunchError::from(&launch_error),
        "stop_request": super::StopRequest::from(&StopRequest { reason: "done".into(), at }),
    });
    insta::assert_json_snapshot!(records);
}

/// Views stored as idempotent answers before the typed shapes (`message` for a
/// write_indeterminate's text) still read back.
#[test]
fn stored_terminal_records_read_back() {
    let stored = serde_json::json!({"reason": "write_indeterminate", "message": "m",
        "action_id": "act_1", "path": null, "at": "t"});
    let terminal: Terminal = serde_json::from_value(stored).unwrap();
    assert_eq!(terminal.detail.as_deref(), Some("m"));
    let stored = serde_json::json!({"reason": "lease_expired", "exit_code": null, "at": "t"});
    let terminal: Terminal = serde_json::from_value(stored).unwrap();
    assert_eq!(terminal.reason, TerminalReason::LeaseExpired);
}
