//! Runner generations: launching a session's broker (recorded in the transaction that checks the
//! session is still live, then attached), and making sure a verified broker with a live runner
//! is there before a prompt is released — re-attaching the recorded one, or starting a new
//! generation that resumes the same Claude Code conversation once the old broker is gone.

use std::sync::Arc;
use std::time::Duration;

use common::protocol::{GatewayToBroker, PromptRelease};

use super::idempotency::Request;
use super::supervision::BrokerStop;
use super::{Gateway, ToolResult, ensure_not_terminal};
use crate::brokers::{BrokerSignal, LaunchSpec, SPAWN_CONNECT_TIMEOUT};
use crate::error::{ErrorCode, ToolError};
use crate::state::{LaunchError, LaunchErrorCode};
use crate::state::{SessionRecord, StoreError};

/// Our part of the runner's system prompt; the session's frozen skills follow it.
const SYSTEM_PROMPT: &str = "You are the local agent harness of Native Gateway. The user's messages \
and your answers come from ChatGPT, which decides every step. Use only the mcp__gw__ tools you are \
given, exactly as the assistant turn specifies, and do not add commentary of your own.";

impl Gateway {
    /// Start a broker for runner generation `generation` of `session` (`resume`: continue the
    /// recorded conversation), record it, and attach to it. On failure, the launch error to
    /// show; nothing is left running.
    pub(crate) async fn launch(
        self: &Arc<Self>,
        session: &SessionRecord,
        generation: u32,
        resume: bool,
    ) -> Result<(), LaunchError> {
        let system_prompt = if session.delegation.is_some() {
            // A sub-session: its task is its prompt; skills are ChatGPT's.
            self.subsessions().system_prompt().to_string()
        } else {
            // Every generation gets the snapshot frozen at start, never the skill files as
            // they are.
            let skills =
                crate::skills::load_snapshot(&self.config.state_dir, session).map_err(|err| {
                    tracing::error!(session = %session.id, "{err:#}");
                    LaunchError::now(
                        LaunchErrorCode::Internal,
                        "the session's frozen skills could not be read; see the gateway log",
                    )
                })?;
            crate::skills::system_prompt(SYSTEM_PROMPT, &skills, &session.id)
        };
        let owner = self.broker_owner(&session.id, generation);
        let spec = LaunchSpec {
            config: &self.config,
            session: session.broker_spec(),
            generation,
            owner: &owner,
            resume,
            system_prompt: &system_prompt,
        };
        let record = self.host.spawn(spec).await?;
        // In the transaction that records it: a session that ended meanwhile (its lease expired
        // during the launch) does not get a new runtime.
        let saved = self.store.write(|tx| {
            let Some(mut stored) = tx.session(&session.id)? else {
                return Ok::<_, StoreError>(false);
            };
            let Some(event) = stored.broker_spawned(record.clone()) else {
                return Ok(false);
            };
            tx.put_session(&stored)?;
            tx.record(&session.id, &event)?;
            Ok(true)
        });
        match saved {
            Ok(true) => {}
            Ok(false) => {
                self.host.signal(&record, BrokerSignal::Kill);
                return Err(LaunchError::now(
                    LaunchErrorCode::SessionTerminal,
                    "the session ended while its runtime was starting; start a new session",
                ));
            }
            Err(err) => {
                tracing::error!("recording broker: {err}");
                self.host.signal(&record, BrokerSignal::Kill);
                return Err(LaunchError::now(
                    LaunchErrorCode::Internal,
                    "the gateway could not record the session's runtime",
                ));
            }
        }
        self.attach(&session.id, &record, SPAWN_CONNECT_TIMEOUT)
            .await
            .map_err(|err| {
                tracing::error!(session = %session.id, "attaching broker: {err:#}");
                // A broker that never answered is not left running with its runner (red team
                // 50: one kept 50-60 % of a CPU after its session had failed).
                self.host.signal(&record, BrokerSignal::Kill);
                LaunchError::now(
                    LaunchErrorCode::BrokerUnreachable,
                    "the session's runtime did not answer; start a new session",
                )
            })
    }

    /// Refuse to go on in a session whose working directory (or managed worktree's Git
    /// directory) is no longer the one recorded at start: replaced or moved, it is another
    /// directory, and nothing of the session runs or writes there.
    pub(crate) fn check_workspace(session: &SessionRecord) -> ToolResult<()> {
        let Some(recorded) = session.workspace_identity else {
            return Ok(());
        };
        let worktree = recorded.git_dir.is_some();
        let now = crate::state::WorkspaceIdentity::measure(
            std::path::Path::new(&session.working_directory),
            worktree,
        );
        if now == Some(recorded) {
            return Ok(());
        }
        let what = match now {
            None => "is gone",
            Some(now) if now.working_directory != recorded.working_directory => {
                "is another directory now (replaced or moved since the session started)"
            }
            Some(_) => "has another Git directory now (its worktree registration was replaced)",
        };
        Err(ToolError::new(
            ErrorCode::WorkspaceChanged,
            format!(
                "the session's working directory {} {what}; the session cannot go on there and \
                 nothing was changed. Start a new session on the directory you want (and stop \
                 this one if you still hold its lease)",
                session.working_directory
            ),
        ))
    }

    /// Make sure a verified broker with a live runner is attached before a prompt is released:
    /// re-attach the recorded broker if it is still ours, or start a new runner generation that
    /// resumes the same Claude Code conversation.
    pub(crate) async fn ensure_runner(self: &Arc<Self>, session_id: &str) -> ToolResult<()> {
        if self.load(session_id)?.runner_alive() {
            self.reattach_if_detached(session_id).await;
        }
        let session = self.load(session_id)?;
        if session.runner_alive() && self.live(session_id).attached() {
            return Ok(());
        }
        // The runner is gone: a new generation resumes the recorded conversation. Completed
        // actions are in its transcript; nothing is re-executed.
        if let Some(record) = &session.broker {
            // Two runners must never share one transcript, and the old broker's prepared writes
            // are settled only once it is gone: it gets 8 s, then SIGKILL.
            let stopped = self
                .stop_broker(session_id, record, Duration::ZERO, Duration::from_secs(8))
                .await;
            if stopped == BrokerStop::StillThere {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    "the session's previous runtime did not exit even when killed (it may be stuck \
                     in the kernel); no new runner is started beside it. Try again later or stop \
                     the session",
                ));
            }
        }
        // Writes the old broker left `prepared` are settled from the files before anything new
        // runs; an indeterminate one ends the session here.
        self.resolve_prepared_writes(session_id);
        let session = self.load(session_id)?;
        ensure_not_terminal(&session)?;
        Self::check_workspace(&session)?;
        let generation = session.current_run.as_ref().map_or(0, |run| run.generation) + 1;
        // Releases of the old generation are not the new runner's: its broker approves nothing
        // from before and gets only the prompt that follows.
        let session = self.store.write(|tx| {
            let mut current = self.session(tx, session_id)?;
            current.forget_releases();
            tx.put_session(&current)?;
            Ok::<_, ToolError>(current)
        })?;
        if let Err(launch_error) = self.launch(&session, generation, true).await {
            let message = launch_error.message.clone();
            let stored = self.store.write(|tx| {
                let mut current = self.session(tx, session_id)?;
                let event = current.generation_launch_failed(launch_error);
                self.commit(tx, &mut current, &event)?;
                Ok::<_, ToolError>(current)
            })?;
            self.notify(&stored);
            return Err(ToolError::new(
                ErrorCode::Internal,
                format!("{message}; nothing was sent to the runner"),
            ));
        }
        let stored = self.store.write(|tx| {
            let mut current = self.session(tx, session_id)?;
            let event = current.generation_started(generation);
            self.commit(tx, &mut current, &event)?;
            Ok::<_, ToolError>(current)
        })?;
        self.notify(&stored);
        Ok(())
    }

    /// Persist a prompt (claiming its request, if any) and release it to the broker.
    pub(crate) fn release_prompt(
        &self,
        session_id: &str,
        prompt_id: String,
        text: String,
        claim: Option<&Request<'_>>,
    ) -> ToolResult<()> {
        let session = self.store.write(|tx| {
            let mut session = self.session(tx, session_id)?;
            if let Some(request) = claim {
                self.claim(tx, request, session_id, session.lease_generation)?;
            }
            let event = session.prompt_released(prompt_id.clone(), text.clone())?;
            self.commit(tx, &mut session, &event)?;
            Ok::<_, ToolError>(session)
        })?;
        self.notify(&session);
        if !self
            .live(session_id)
            .send(GatewayToBroker::Prompt(PromptRelease { prompt_id, text }))
        {
            return Err(ToolError::new(
                ErrorCode::Busy,
                "the session's runtime is not attached right now; call native_session_status, \
                 and native_session_recover if it stays detached",
            ));
        }
        Ok(())
    }
}
