//! The SessionView of a session record: what ChatGPT reads after every call, built from the
//! stored session (its stored parts become the public ones here, `parts`), its pending turn (a prompt turn with the session's frozen skills) and the
//! ledger's record of the actions that turn reports.

use common::protocol::RunnerToolResult;
use common::time::rfc3339_ms;
use common::tools::{LogicalTool, ToolStatus};

use super::{Gateway, ToolResult};
use crate::error::{ErrorCode, ToolError};
use crate::state::{ActionRecord, SessionRecord, TurnBody, Tx};
use crate::view::{
    CurrentRunView, LastResultView, PendingTurn, REPLY_BUDGET_BYTES, SessionView, SkillContextView,
    ToolResultView, TurnKind,
};

impl Gateway {
    /// Build the public view of a session.
    pub fn view(
        &self,
        session: &SessionRecord,
        lease_id: Option<String>,
    ) -> ToolResult<SessionView> {
        let pending_turn = match &session.pending_turn_id {
            Some(turn_id) => self
                .store
                .read(|tx| self.pending_turn_view(tx, session, turn_id))?,
            None => None,
        };
        let (deepseek_route, deepseek_subsessions, active_deepseek_subsession_id) =
            if session.subagent_policy == common::tools::SubagentPolicy::DeepseekExplicit {
                let subsessions = self
                    .store
                    .read(|tx| self.subsessions().summaries(tx, session))?;
                let active = subsessions
                    .iter()
                    .find(|s| {
                        matches!(
                            s.status,
                            crate::state::SubsessionStatus::Starting
                                | crate::state::SubsessionStatus::Running
                        )
                    })
                    .map(|s| s.subsession_id.clone());
                (self.config.deepseek.describe(), subsessions, active)
            } else {
                ("disabled".to_string(), Vec::new(), None)
            };
        Ok(SessionView {
            native_session_id: session.id.clone(),
            session_label: session.label.clone(),
            status: session.status,
            revision: session.revision,
            replay: false,
            route: "chatgpt-main".into(),
            fallback: "none".into(),
            lease_id,
            lease_expires_at: Some(rfc3339_ms(session.lease_expires_at_ms)),
            recovery_token: None,
            capability_profile: session.profile,
            subagent_policy: session.subagent_policy,
            source_directory: session.source_directory.clone(),
            working_directory: session.working_directory.clone(),
            workspace: (&session.workspace).into(),
            claude_session_id: session.claude_session_id.clone(),
            current_run: session.current_run.as_ref().map(|run| CurrentRunView {
                generation: run.generation,
                state: run.state,
                started_at: run.started_at.clone(),
                exit_code: run.exit_code,
            }),
            runtime_attached: self.live(&session.id).attached(),
            recovery_required: session.recovery_required,
            pending_turn,
            last_result: session.last_result.as_ref().map(|r| LastResultView {
                turn_id: r.turn_id.clone(),
                text: r.text.clone(),
                at: r.at.clone(),
            }),
            launch_error: session.launch_error.as_ref().map(Into::into),
            stop_request: session.stop_request.as_ref().map(Into::into),
            terminal: session.terminal.as_ref().map(Into::into),
            network_boundary: (&session.network_boundary).into(),
            skill_snapshot: session.skill_snapshot.iter().map(Into::into).collect(),
            deepseek_route,
            deepseek_subsessions,
            active_deepseek_subsession_id,
            conversation_restarted: session.conversation_restart.as_ref().map(Into::into),
            content_pruned: session.content_pruned.as_ref().map(Into::into),
        })
    }

    /// The session's frozen skills as a prompt turn carries them (none without skills). A
    /// snapshot that cannot be read is an error, never a turn without its skills.
    pub(crate) fn skill_contexts(
        &self,
        session: &SessionRecord,
    ) -> ToolResult<Vec<SkillContextView>> {
        match crate::skills::load_snapshot(&self.config.state_dir, session) {
            Ok(skills) => Ok(skills.iter().map(|s| s.context_view()).collect()),
            Err(err) => {
                tracing::error!(session = %session.id, "{err:#}");
                Err(ToolError::new(
                    ErrorCode::Internal,
                    "the session's frozen skills could not be read; the owner should check the \
                     gateway log. Stop this session and start a new one",
                ))
            }
        }
    }

    fn pending_turn_view(
        &self,
        tx: &Tx<'_>,
        session: &SessionRecord,
        turn_id: &str,
    ) -> ToolResult<Option<PendingTurn>> {
        let Some(turn) = tx.turn(turn_id)? else {
            return Ok(None);
        };
        let allowed_tools = LogicalTool::offered(session.profile, session.subagent_policy)
            .into_iter()
            .map(|t| t.name().to_string())
            .collect();
        let (kind, prompt, tool_results) = match &turn.body {
            TurnBody::Prompt {
                text,
                interrupted_turn_id,
            } => {
                // Results of calls an interrupted runner never reported (a write resolved after
                // a crash, a call that never ran) come with the next prompt turn.
                let results = match interrupted_turn_id {
                    Some(id) => Some(
                        tx.actions_for_turn(id)?
                            .into_iter()
                            .map(|action| tool_result_view(&action, &[]))
                            .collect(),
                    ),
                    None => None,
                };
                (TurnKind::Prompt, Some(text.clone()), results)
            }
            TurnBody::ToolResults {
                previous_turn_id,
                runner_results,
            } => {
                let results = tx
                    .actions_for_turn(previous_turn_id)?
                    .into_iter()
                    .map(|action| tool_result_view(&action, runner_results))
                    .collect();
                (TurnKind::ToolResults, None, Some(results))
            }
        };
        let skill_contexts = match kind {
            TurnKind::Prompt => self.skill_contexts(session)?,
            TurnKind::ToolResults => Vec::new(),
        };
        Ok(Some(PendingTurn {
            turn_id: turn.turn_id,
            sequence: turn.sequence,
            kind,
            prompt,
            tool_results,
            skill_contexts,
            allowed_tools,
            reply_budget_bytes: REPLY_BUDGET_BYTES,
            notice: turn.notice,
        }))
    }
}

/// One entry of `tool_results`: the ledger's record of the action, or `not_executed` with what the
/// runner said when the action never ran.
fn tool_result_view(action: &ActionRecord, runner_results: &[RunnerToolResult]) -> ToolResultView {
    match &action.outcome {
        Some(outcome) => ToolResultView {
            call_index: action.call_index,
            name: action.name.clone(),
            status: outcome.status,
            output: outcome.output.clone(),
            truncated: outcome.truncated,
            receipt: Some(outcome.receipt.clone()),
        },
        None => {
            let tool_use_id = format!("toolu_{}", action.action_id);
            let said = runner_results
                .iter()
                .find(|r| r.tool_use_id == tool_use_id)
                .map(|r| format!("the runner reported: {}", r.text))
                .unwrap_or_else(|| "the runner reported no result for it".to_string());
            let mut output = format!("not executed; {said}");
            let truncated =
                common::tools::clip_utf8(&mut output, common::tools::MAX_TOOL_OUTPUT_BYTES);
            ToolResultView {
                call_index: action.call_index,
                name: action.name.clone(),
                status: ToolStatus::NotExecuted,
                output,
                truncated,
                receipt: None,
            }
        }
    }
}

/// The public parts of the SessionView from the session record's stored parts: the one place the
/// storage types become the public schema. Each destructures its record whole, so a field added
/// to a record is a decision here (shown or not), never a silent change of either side.
mod parts {
    use crate::state as stored;
    use crate::view as public;

    impl From<&stored::Workspace> for public::Workspace {
        fn from(workspace: &stored::Workspace) -> Self {
            let stored::Workspace {
                kind,
                root,
                worktree_path,
                branch,
                base_commit,
            } = workspace;
            public::Workspace {
                kind: match kind {
                    stored::WorkspaceKind::ReadOnly => public::WorkspaceKind::ReadOnly,
                    stored::WorkspaceKind::Direct => public::WorkspaceKind::Direct,
                    stored::WorkspaceKind::Worktree => public::WorkspaceKind::Worktree,
                },
                root: root.clone(),
                worktree_path: worktree_path.clone(),
                branch: branch.clone(),
                base_commit: base_commit.clone(),
            }
        }
    }

    impl From<&stored::LaunchError> for public::LaunchError {
        fn from(error: &stored::LaunchError) -> Self {
            let stored::LaunchError { code, message, at } = error;
            use public::LaunchErrorCode as Public;
            use stored::LaunchErrorCode as Stored;
            public::LaunchError {
                code: match code {
                    Stored::RunnerNotFound => Public::RunnerNotFound,
                    Stored::RunnerLaunchFailed => Public::RunnerLaunchFailed,
                    Stored::BrokerSpawnFailed => Public::BrokerSpawnFailed,
                    Stored::BrokerUnreachable => Public::BrokerUnreachable,
                    Stored::SessionTerminal => Public::SessionTerminal,
                    Stored::Internal => Public::Internal,
                },
                message: message.clone(),
                at: at.clone(),
            }
        }
    }

    impl From<&stored::StopRequest> for public::StopRequest {
        fn from(stop: &stored::StopRequest) -> Self {
            let stored::StopRequest { reason, at } = stop;
            public::StopRequest {
                reason: reason.clone(),
                at: at.clone(),
            }
        }
    }

    impl From<&stored::Terminal> for public::Terminal {
        fn from(terminal: &stored::Terminal) -> Self {
            let stored::Terminal {
                reason,
                detail,
                exit_code,
                signal,
                action_id,
                path,
                at,
            } = terminal;
            use public::TerminalReason as Public;
            use stored::TerminalReason as Stored;
            public::Terminal {
                reason: match reason {
                    Stored::LaunchError => Public::LaunchError,
                    Stored::Stopped => Public::Stopped,
                    Stored::LeaseExpired => Public::LeaseExpired,
                    Stored::WriteIndeterminate => Public::WriteIndeterminate,
                },
                detail: detail.clone(),
                exit_code: *exit_code,
                signal: *signal,
                action_id: action_id.clone(),
                path: path.clone(),
                at: at.clone(),
            }
        }
    }

    impl From<&stored::NetworkBoundary> for public::NetworkBoundary {
        fn from(boundary: &stored::NetworkBoundary) -> Self {
            let stored::NetworkBoundary {
                runner,
                runner_writes,
                commands,
                enforced_by,
                commands_enforced_by,
                degraded,
            } = boundary;
            public::NetworkBoundary {
                runner: runner.clone(),
                runner_writes: runner_writes.clone(),
                commands: commands.clone(),
                enforced_by: enforced_by.clone(),
                commands_enforced_by: commands_enforced_by.clone(),
                degraded: *degraded,
            }
        }
    }

    impl From<&stored::SkillSnapshotEntry> for public::SkillSnapshotEntry {
        fn from(entry: &stored::SkillSnapshotEntry) -> Self {
            let stored::SkillSnapshotEntry {
                skill_id,
                content_sha256,
            } = entry;
            public::SkillSnapshotEntry {
                skill_id: skill_id.clone(),
                content_sha256: content_sha256.clone(),
            }
        }
    }

    impl From<&stored::ConversationRestart> for public::ConversationRestart {
        fn from(restart: &stored::ConversationRestart) -> Self {
            let stored::ConversationRestart {
                generation,
                at,
                message,
            } = restart;
            public::ConversationRestart {
                generation: *generation,
                at: at.clone(),
                message: message.clone(),
            }
        }
    }

    impl From<&stored::ContentPruned> for public::ContentPruned {
        fn from(pruned: &stored::ContentPruned) -> Self {
            let stored::ContentPruned { at, message } = pruned;
            public::ContentPruned {
                at: at.clone(),
                message: message.clone(),
            }
        }
    }
}
