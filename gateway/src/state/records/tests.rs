//! The stored bytes of every durable record type are exactly what main stored before the records
//! got types of their own (`stored_by_main.jsonl`, written by main's code): existing state dirs
//! load, and the ledger's column digests and chained events do not change.

use common::tools::{CapabilityProfile, SubagentPolicy};

use super::*;
use crate::state::{
    ContentPruned, ConversationRestart, LaunchError, LaunchErrorCode, LedgerEvent, NetworkBoundary,
    SkillSnapshotEntry, StopRequest, Terminal, Workspace, WorkspaceKind,
};

const AT: &str = "2026-11-29T19:00:00Z";

fn launch_error(code: LaunchErrorCode) -> LaunchError {
    let mut error = LaunchError::now(code, "the session's runtime could not be started");
    error.at = AT.into();
    error
}

fn terminals() -> Vec<Terminal> {
    let mut indeterminate =
        Terminal::write_indeterminate("act_1".into(), Some("/home/me/project/a.txt".into()));
    indeterminate.at = AT.into();
    let mut launch = Terminal::launch_error();
    launch.at = AT.into();
    vec![
        indeterminate,
        launch,
        Terminal::stopped(Some("nothing was running"), Some(143), Some(15), AT.into()),
        Terminal::stopped(None, None, None, AT.into()),
        Terminal::lease_expired(AT.into()),
    ]
}

fn skills() -> Vec<SkillSnapshotEntry> {
    vec![
        SkillSnapshotEntry {
            skill_id: "project:review".into(),
            content_sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
                .into(),
        },
        SkillSnapshotEntry {
            skill_id: "user:style".into(),
            content_sha256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
                .into(),
        },
    ]
}

fn workspaces() -> Vec<Workspace> {
    vec![
        Workspace {
            kind: WorkspaceKind::Worktree,
            root: "/home/me/project".into(),
            worktree_path: Some("/state/worktrees/ns_0123".into()),
            branch: Some("native/ns_0123".into()),
            base_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
        },
        Workspace::in_place(WorkspaceKind::Direct, "/home/me/project".into()),
        Workspace::in_place(WorkspaceKind::ReadOnly, "/home/me/project".into()),
    ]
}

/// A session record with every field set (each optional part present).
fn full_session(workspace: Workspace, terminal: Terminal, code: LaunchErrorCode) -> SessionRecord {
    let dir = common::protocol::DirIdentity { dev: 2049, ino: 77 };
    SessionRecord {
        id: "ns_0123".into(),
        label: Some("demo".into()),
        status: SessionStatus::Stopped,
        revision: 9,
        profile: CapabilityProfile::WorktreeWrite,
        subagent_policy: SubagentPolicy::DeepseekExplicit,
        source_directory: "/home/me/project".into(),
        working_directory: "/state/worktrees/ns_0123".into(),
        workspace,
        claude_session_id: "6f1c0c1e-8d7e-4a53-9d44-0f2f4c1b2a10".into(),
        created_at_ms: 1_764_000_000_000,
        lease_generation: 2,
        lease_expires_at_ms: 1_764_000_900_000,
        current_run: Some(CurrentRun {
            generation: 2,
            state: RunState::Exited,
            started_at: AT.into(),
            exit_code: Some(0),
            signal: Some(9),
        }),
        pending_turn_id: Some("turn_3".into()),
        last_result: Some(LastResult {
            turn_id: "turn_2".into(),
            text: "done".into(),
            at: AT.into(),
        }),
        launch_error: Some(launch_error(code)),
        stop_request: Some({
            let mut stop = StopRequest::now("owner asked");
            stop.at = AT.into();
            stop
        }),
        terminal: Some(terminal),
        recovery_required: true,
        network_boundary: NetworkBoundary {
            runner: "loopback:broker-port-only".into(),
            runner_writes: "private-dirs-only".into(),
            commands: "none: empty network namespace, no sockets".into(),
            enforced_by: "linux:netns+landlock(v6)+seccomp+nnp+caps".into(),
            commands_enforced_by: "linux:netns+landlock(v6)+seccomp".into(),
            degraded: true,
        },
        skill_snapshot: skills(),
        broker: Some(BrokerRecord {
            pid: 4242,
            start_time: 123_456,
            boot_id: "boot".into(),
            socket_path: "/state/run/0123/b.sock".into(),
            runtime_dir: "/state/run/0123".into(),
            secret: "brk_secret".into(),
            generation: 2,
            next_event_seq: 17,
        }),
        turn_sequence: 3,
        last_reply_turn_id: Some("turn_2".into()),
        closing_reply: Some(LastResult {
            turn_id: "turn_3".into(),
            text: "closing".into(),
            at: AT.into(),
        }),
        undelivered_prompt: Some(common::protocol::PromptRelease {
            prompt_id: "prm_1".into(),
            text: "go on".into(),
        }),
        undelivered_reply_turn: Some("turn_3".into()),
        subsessions: vec!["ns_0456".into()],
        conversation_restart: Some(ConversationRestart {
            generation: 2,
            at: AT.into(),
            message: crate::view::CONVERSATION_RESTART_NOTICE.into(),
        }),
        restart_notice_pending: true,
        workspace_identity: Some(WorkspaceIdentity {
            working_directory: dir,
            git_dir: Some(common::protocol::DirIdentity { dev: 2049, ino: 78 }),
        }),
        delegation: Some(Delegation {
            parent_session_id: "ns_0001".into(),
            start_action_id: "act_9".into(),
            task_sha256: "ab".into(),
            runner_model: "claude-sonnet-4-5".into(),
            end: Some(SubsessionEnd {
                status: SubsessionStatus::Succeeded,
                at_ms: 1_764_000_500_000,
                result_text: Some("ok".into()),
                error: Some("none".into()),
            }),
            in_flight: vec!["cd".into()],
        }),
        content_pruned: Some(ContentPruned {
            at: AT.into(),
            message: crate::view::CONTENT_PRUNED_NOTICE.into(),
        }),
    }
}

/// Every durable value that holds one of the session's parts, as it is stored: session rows
/// (one per workspace kind, terminal reason and launch error code) and the ledger events that
/// carry a launch error or the skills.
fn stored_values() -> Vec<String> {
    let codes = [
        LaunchErrorCode::RunnerNotFound,
        LaunchErrorCode::RunnerLaunchFailed,
        LaunchErrorCode::BrokerSpawnFailed,
        LaunchErrorCode::BrokerUnreachable,
        LaunchErrorCode::SessionTerminal,
        LaunchErrorCode::Internal,
    ];
    let mut out = Vec::new();
    let (workspaces, terminals) = (workspaces(), terminals());
    for (index, code) in codes.iter().enumerate() {
        let session = full_session(
            workspaces[index % workspaces.len()].clone(),
            terminals[index % terminals.len()].clone(),
            *code,
        );
        out.push(serde_json::to_string(&session).unwrap());
        let event = LedgerEvent::LaunchFailed(launch_error(*code));
        out.push(serde_json::to_string(&event).unwrap());
        let event = LedgerEvent::GenerationLaunchFailed(launch_error(*code));
        out.push(serde_json::to_string(&event).unwrap());
    }
    let event = LedgerEvent::SessionStarted {
        profile: CapabilityProfile::DirectWrite,
        working_directory: "/home/me/project".into(),
        prompt_id: "prm_1".into(),
        prompt_sha256: "ef".into(),
        skills: skills(),
    };
    out.push(serde_json::to_string(&event).unwrap());
    out
}

/// What main's code stored for [`stored_values`], one value a line.
const STORED_BY_MAIN: &str = include_str!("stored_by_main.jsonl");

#[test]
fn records_serialize_to_the_bytes_main_stored() {
    let stored: Vec<&str> = STORED_BY_MAIN.lines().collect();
    let now = stored_values();
    assert_eq!(now.len(), stored.len());
    for (now, stored) in now.iter().zip(stored) {
        assert_eq!(now, stored);
    }
}

/// Rows main stored read back whole (nothing dropped as unknown) and are written again
/// byte for byte, so an untouched field keeps its column digest.
#[test]
fn session_rows_main_stored_read_back_and_write_the_same_bytes() {
    let rows: Vec<&str> = STORED_BY_MAIN
        .lines()
        .filter(|line| !line.starts_with("{\"kind\""))
        .collect();
    assert_eq!(rows.len(), 6);
    for row in rows {
        let session: SessionRecord = serde_json::from_str(row).unwrap();
        assert_eq!(serde_json::to_string(&session).unwrap(), row);
    }
}

/// Terminal parts written before the typed shapes (`message` for a write_indeterminate's text)
/// still read back.
#[test]
fn stored_terminal_parts_of_older_builds_read_back() {
    let stored = serde_json::json!({"reason": "write_indeterminate", "message": "m",
        "action_id": "act_1", "path": null, "at": "t"});
    let terminal: Terminal = serde_json::from_value(stored).unwrap();
    assert_eq!(terminal.detail.as_deref(), Some("m"));
}
