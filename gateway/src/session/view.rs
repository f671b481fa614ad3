//! The SessionView of a session record: what ChatGPT reads after every call, built from the
//! stored session, its pending turn (a prompt turn with the session's frozen skills) and the
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
            workspace: session.workspace.clone(),
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
            launch_error: session.launch_error.clone(),
            stop_request: session.stop_request.clone(),
            terminal: session.terminal.clone(),
            network_boundary: session.network_boundary.clone(),
            skill_snapshot: session.skill_snapshot.clone(),
            deepseek_route,
            deepseek_subsessions,
            active_deepseek_subsession_id,
            conversation_restarted: session.conversation_restart.clone(),
            content_pruned: session.content_pruned.clone(),
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
