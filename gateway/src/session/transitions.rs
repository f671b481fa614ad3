//! Every state change of a session record, and the only code that assigns its state fields
//! (`session/tests/owners.rs` checks that). Each is a pure method of the record and what
//! happened: it checks the change applies and returns the ledger event that says so (`None`, or
//! a refusal, when it does not), so the decisions are unit-tested without a store, a broker or
//! a runner. The caller persists the record with that event in one transaction.

use common::hash::sha256_hex;
use common::protocol::{ApprovedCall, PromptRelease};
use common::time::{now_rfc3339, now_unix_ms, rfc3339_ms};
use common::tools::ClaudeTier;

use super::ToolResult;
use crate::error::{ErrorCode, ToolError};
use crate::state::{
    ActionRecord, ApprovedAction, BrokerRecord, CurrentRun, LastResult, LaunchError, LedgerEvent,
    RunState, SessionRecord, SessionStatus, StopRequest, SubsessionEnd, SubsessionStatus, Terminal,
    TurnBody, TurnRecord, TurnStatus,
};

/// `terminal.detail` of a stop the gateway had to finish by killing the broker.
pub(crate) const FORCED_STOP_DETAIL: &str =
    "the broker did not stop in time and was killed, with its runner";
/// `terminal.detail` of a stop whose broker could not even be killed.
pub(crate) const UNKILLABLE_STOP_DETAIL: &str =
    "the broker did not stop and could not be killed; its runner may still exist";

/// Refuse work on a session that has ended.
pub(crate) fn ensure_not_terminal(session: &SessionRecord) -> ToolResult<()> {
    if session.status.is_terminal() {
        return Err(ToolError::new(
            ErrorCode::SessionTerminal,
            format!(
                "the session is {}; start a new session to do more work",
                session.status.as_str()
            ),
        ));
    }
    Ok(())
}

impl SessionRecord {
    /// Whether the current runner generation is alive as far as the gateway knows.
    pub(crate) fn runner_alive(&self) -> bool {
        self.current_run
            .as_ref()
            .is_some_and(|run| run.state == RunState::Alive)
    }

    /// An alive run is lost to this gateway (its link or broker went away).
    fn lose_run(&mut self) {
        if let Some(run) = self
            .current_run
            .as_mut()
            .filter(|r| r.state == RunState::Alive)
        {
            run.state = RunState::Lost;
        }
    }

    /// Nothing is running for ChatGPT to wait on any more: a busy session becomes idle.
    fn settle_idle(&mut self) {
        self.pending_turn_id = None;
        if matches!(
            self.status,
            SessionStatus::Running | SessionStatus::WaitingForGpt | SessionStatus::Starting
        ) {
            self.status = SessionStatus::Idle;
        }
    }

    /// The session's runtime is gone or failed verification: reported, not hidden.
    pub(crate) fn runtime_lost(&mut self, reason: &str) -> Option<LedgerEvent> {
        if self.status.is_terminal() {
            return None;
        }
        self.recovery_required = true;
        self.lose_run();
        self.settle_idle();
        Some(LedgerEvent::RuntimeLost {
            reason: reason.to_string(),
        })
    }

    /// The link to broker `broker_pid` closed. `broker_gone`: the broker process is gone too
    /// (it takes its runner's pending request with it); `forced`: the gateway killed it to
    /// finish a stop. Nothing applies to an ended session or to an older broker's link.
    pub(crate) fn link_lost(
        &mut self,
        broker_pid: i32,
        broker_gone: bool,
        forced: bool,
    ) -> Option<LedgerEvent> {
        if self.status.is_terminal() || self.broker.as_ref().is_some_and(|b| b.pid != broker_pid) {
            return None;
        }
        if self.stop_request.is_some() {
            self.status = SessionStatus::Stopped;
            if self.terminal.is_none() {
                self.terminal = Some(Terminal::stopped(
                    forced.then_some(FORCED_STOP_DETAIL),
                    None,
                    None,
                    now_rfc3339(),
                ));
            }
        } else {
            self.recovery_required = true;
            self.lose_run();
            // A live broker keeps the pending request for a re-attach.
            if broker_gone {
                self.settle_idle();
            }
        }
        Some(LedgerEvent::RuntimeDetached {})
    }

    /// The recorded broker proved not to be this session's (its record was moved or edited
    /// outside the gateway): the record is dropped, so nothing — no signal, no re-attach — is
    /// ever sent through it again, and the run is lost, said plainly.
    pub(crate) fn broker_disowned(&mut self, reason: &str) -> Option<LedgerEvent> {
        if self.status.is_terminal() {
            return None;
        }
        self.broker = None;
        self.runtime_lost(reason)
    }

    /// A verified link is up again: a run that was only lost to this gateway is alive (if the
    /// runner exited meanwhile, the broker's re-sent exit says so next).
    pub(crate) fn reattached(&mut self) -> Option<LedgerEvent> {
        let run = self
            .current_run
            .as_mut()
            .filter(|r| r.state == RunState::Lost)?;
        run.state = RunState::Alive;
        self.recovery_required = false;
        Some(LedgerEvent::RuntimeReattached {})
    }

    /// A recovery rotated the lease to `generation`, expiring at `expires_at_ms`; without an
    /// attached runtime the session needs a new runner.
    pub(crate) fn lease_rotated(
        &mut self,
        generation: u32,
        expires_at_ms: i64,
        attached: bool,
    ) -> LedgerEvent {
        self.lease_generation = generation;
        self.lease_expires_at_ms = expires_at_ms;
        if !attached && !self.status.is_terminal() {
            self.recovery_required = true;
            self.lose_run();
        }
        LedgerEvent::LeaseRotated {
            generation,
            runtime_attached: attached,
        }
    }

    /// ChatGPT asked to stop. Without an attached runtime nothing runs, and the session is
    /// stopped at once.
    pub(crate) fn stop_requested(&mut self, reason: &str, attached: bool) -> LedgerEvent {
        self.stop_request = Some(StopRequest::now(reason));
        self.pending_turn_id = None;
        if attached {
            self.status = SessionStatus::Stopping;
        } else {
            self.status = SessionStatus::Stopped;
            self.terminal = Some(Terminal::stopped(
                Some("the runtime was not attached; nothing was running to stop"),
                None,
                None,
                now_rfc3339(),
            ));
        }
        LedgerEvent::StopRequested {
            reason: reason.to_string(),
        }
    }

    /// The lease ran out at `now_ms`: the session expires (its runner is stopped separately).
    pub(crate) fn expire(&mut self, now_ms: i64) -> Option<LedgerEvent> {
        if self.status.is_terminal() || self.lease_expires_at_ms > now_ms {
            return None;
        }
        let at = now_rfc3339();
        self.status = SessionStatus::Expired;
        self.pending_turn_id = None;
        self.stop_request = Some(StopRequest {
            reason: "lease expired".into(),
            at: at.clone(),
        });
        self.terminal = Some(Terminal::lease_expired(at));
        Some(LedgerEvent::LeaseExpired {})
    }

    /// The gateway killed a stopping session's broker (`killed`: it is gone; otherwise it is
    /// stuck): the session is stopped if nothing else ended it.
    pub(crate) fn stop_enforced(&mut self, killed: bool) -> Option<LedgerEvent> {
        if self.status.is_terminal() {
            return None;
        }
        let detail = if killed {
            FORCED_STOP_DETAIL
        } else {
            UNKILLABLE_STOP_DETAIL
        };
        self.status = SessionStatus::Stopped;
        self.pending_turn_id = None;
        self.lose_run();
        self.terminal = Some(Terminal::stopped(Some(detail), None, None, now_rfc3339()));
        Some(LedgerEvent::StopEnforced {
            detail: detail.to_string(),
        })
    }

    /// The runtime of the session could not be started: it failed.
    pub(crate) fn launch_failed(&mut self, error: LaunchError) -> LedgerEvent {
        self.status = SessionStatus::Failed;
        self.launch_error = Some(error.clone());
        self.terminal = Some(Terminal::launch_error());
        LedgerEvent::LaunchFailed(error)
    }

    /// A write ended in an unknown state: the session stops with `recovery_required` and
    /// `terminal` saying which write; nothing is written again.
    pub(crate) fn write_indeterminate(&mut self, action: &ActionRecord) {
        let path = action.prepared.as_ref().map(|p| p.path.clone());
        self.status = SessionStatus::Failed;
        self.recovery_required = true;
        self.pending_turn_id = None;
        self.terminal = Some(Terminal::write_indeterminate(
            action.action_id.clone(),
            path,
        ));
    }

    /// The broker started runner generation `generation`.
    pub(crate) fn runner_started(
        &mut self,
        generation: u32,
        started_at_ms: i64,
        resumed: bool,
    ) -> LedgerEvent {
        self.current_run = Some(CurrentRun {
            generation,
            state: RunState::Alive,
            started_at: rfc3339_ms(started_at_ms),
            exit_code: None,
            signal: None,
        });
        // Later generations are launched to resume; one that could not (its predecessor saved no
        // transcript) is a new conversation, and ChatGPT must be told, never left to assume.
        if generation > 1 && !resumed {
            self.conversation_restart = Some(crate::state::ConversationRestart {
                generation,
                at: rfc3339_ms(started_at_ms),
                message: crate::view::CONVERSATION_RESTART_NOTICE.to_string(),
            });
            self.restart_notice_pending = true;
        }
        LedgerEvent::RunnerStarted {
            generation,
            resumed,
        }
    }

    /// The runner ended its turn: a running session with nothing pending is idle, and a
    /// closing text-only reply becomes the last result.
    pub(crate) fn runner_turn_ended(&mut self, subtype: String, is_error: bool) -> LedgerEvent {
        if self.status == SessionStatus::Running && self.pending_turn_id.is_none() {
            self.status = SessionStatus::Idle;
            if let Some(closing) = self.closing_reply.take() {
                self.last_result = Some(closing);
            }
        }
        LedgerEvent::RunnerTurnEnded { subtype, is_error }
    }

    /// The runner process exited: an expired session keeps `expired` (with the exit added), a
    /// stop is complete, and an exit on its own asks for recovery (`continue` starts a new
    /// generation).
    pub(crate) fn runner_exited(
        &mut self,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at_ms: i64,
    ) -> LedgerEvent {
        if let Some(run) = self.current_run.as_mut() {
            run.state = RunState::Exited;
            run.exit_code = exit_code;
            run.signal = signal;
        }
        if self.status == SessionStatus::Expired {
            if let Some(terminal) = self.terminal.as_mut() {
                terminal.exit_code = exit_code;
                terminal.signal = signal;
            }
        } else if self.stop_request.is_some() {
            self.status = SessionStatus::Stopped;
            self.terminal = Some(Terminal::stopped(
                None,
                exit_code,
                signal,
                rfc3339_ms(at_ms),
            ));
        } else if !self.status.is_terminal() {
            self.recovery_required = true;
            self.status = SessionStatus::Idle;
        }
        self.pending_turn_id = None;
        LedgerEvent::RunnerExited { exit_code, signal }
    }
}

/// Where an event of a broker stands against the session's record of its current broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventOrder {
    /// Not the session's current broker (an older generation winding down): not applied.
    NotCurrent,
    /// Applied before (re-sent after a reconnect): not applied again.
    Seen,
    /// The next event: apply it (the record now expects the one after).
    Next,
}

/// Starting a session and its runtime, and renewing its lease.
impl SessionRecord {
    /// The new session is recorded with its first lease (expiring at `lease_expires_at_ms`)
    /// and the prompt it starts with.
    pub(crate) fn started(
        &mut self,
        lease_expires_at_ms: i64,
        prompt_id: String,
        prompt_sha256: String,
    ) -> LedgerEvent {
        self.lease_expires_at_ms = lease_expires_at_ms;
        LedgerEvent::SessionStarted {
            profile: self.profile,
            working_directory: self.source_directory.clone(),
            prompt_id,
            prompt_sha256,
            skills: self.skill_snapshot.clone(),
        }
    }

    /// A call renewed the lease to `expires_at_ms` (not a ledger event: every call does it).
    pub(crate) fn lease_renewed(&mut self, expires_at_ms: i64) {
        self.lease_expires_at_ms = expires_at_ms;
    }

    /// A broker was spawned for the session. A session that ended meanwhile (its lease expired
    /// during the launch) does not get a new runtime: `None`, and the caller kills it.
    pub(crate) fn broker_spawned(&mut self, record: BrokerRecord) -> Option<LedgerEvent> {
        if self.status.is_terminal() {
            return None;
        }
        self.broker = Some(record);
        Some(LedgerEvent::BrokerSpawned {})
    }

    /// Event `seq` of broker `broker_pid` arrived: only the current broker's events are
    /// applied, each once, in order.
    pub(crate) fn broker_event(&mut self, broker_pid: i32, seq: u64) -> EventOrder {
        let Some(broker) = self.broker.as_mut().filter(|b| b.pid == broker_pid) else {
            return EventOrder::NotCurrent;
        };
        if seq < broker.next_event_seq {
            return EventOrder::Seen;
        }
        broker.next_event_seq = seq + 1;
        EventOrder::Next
    }

    /// Releases of an older runner generation are not the next one's: its broker approves
    /// nothing from before and gets only the prompt that follows (not a ledger event).
    pub(crate) fn forget_releases(&mut self) {
        self.undelivered_prompt = None;
        self.undelivered_reply_turn = None;
    }

    /// A new runner generation could not be launched; the session stays as it was.
    pub(crate) fn generation_launch_failed(&mut self, error: LaunchError) -> LedgerEvent {
        self.launch_error = Some(error.clone());
        LedgerEvent::GenerationLaunchFailed(error)
    }

    /// Runner generation `generation` was launched (to resume the conversation) and attached:
    /// nothing needs recovery any more.
    pub(crate) fn generation_started(&mut self, generation: u32) -> LedgerEvent {
        self.recovery_required = false;
        self.launch_error = None;
        self.forget_releases();
        LedgerEvent::RunnerGenerationStarted { generation }
    }
}

/// The turn hand-off: the runner asks, ChatGPT answers, the gateway releases.
impl SessionRecord {
    /// The runner asked for a model turn with request `fingerprint` (not a retry of a known
    /// one): a live session gets a pending turn for ChatGPT, with `body` (built from the record
    /// before it changes) and the notice of a conversation restart not told yet. Returns the
    /// turn to persist (none when the session is stopping or ended) and the ledger event.
    pub(crate) fn turn_requested<E>(
        &mut self,
        fingerprint: String,
        body: impl FnOnce(&SessionRecord) -> Result<TurnBody, E>,
    ) -> Result<(Option<TurnRecord>, LedgerEvent), E> {
        if self.status.is_terminal() || self.status == SessionStatus::Stopping {
            let ignored = LedgerEvent::TurnRequestIgnored {
                reason: "session is stopping".into(),
            };
            return Ok((None, ignored));
        }
        let body = body(self)?;
        self.turn_sequence += 1;
        let turn = TurnRecord {
            turn_id: format!("turn_{}", uuid::Uuid::new_v4().simple()),
            session_id: self.id.clone(),
            sequence: self.turn_sequence,
            fingerprint,
            status: TurnStatus::Pending,
            created_at_ms: now_unix_ms(),
            body,
            reply_id: None,
            notice: std::mem::take(&mut self.restart_notice_pending)
                .then(|| crate::view::CONVERSATION_RESTART_NOTICE.to_string()),
        };
        self.pending_turn_id = Some(turn.turn_id.clone());
        self.last_reply_turn_id = Some(turn.turn_id.clone());
        self.status = SessionStatus::WaitingForGpt;
        let event = LedgerEvent::TurnPending {
            turn_id: turn.turn_id.clone(),
            sequence: turn.sequence,
        };
        Ok((Some(turn), event))
    }

    /// A reply is accepted only for the pending turn of a session that has not ended.
    pub(crate) fn ensure_reply_to(&self, turn_id: &str) -> ToolResult<()> {
        ensure_not_terminal(self)?;
        if self.pending_turn_id.as_deref() != Some(turn_id) {
            return Err(ToolError::new(
                ErrorCode::TurnMismatch,
                format!("turn {turn_id:?} is no longer pending; call native_session_status"),
            ));
        }
        Ok(())
    }

    /// ChatGPT's reply `reply_id` to the pending turn `turn_id` is persisted with its approved
    /// calls: the runner runs again, the reply is to be delivered, and a text-only reply will be
    /// the last result once the runner ends its turn.
    pub(crate) fn reply_accepted(
        &mut self,
        turn_id: &str,
        reply_id: &str,
        text: &str,
        approved: &[ApprovedCall],
    ) -> ToolResult<LedgerEvent> {
        self.ensure_reply_to(turn_id)?;
        self.pending_turn_id = None;
        self.status = SessionStatus::Running;
        self.undelivered_reply_turn = Some(turn_id.to_string());
        self.closing_reply = approved.is_empty().then(|| LastResult {
            turn_id: turn_id.to_string(),
            text: text.to_string(),
            at: now_rfc3339(),
        });
        Ok(LedgerEvent::ReplyAccepted {
            turn_id: turn_id.to_string(),
            reply_id: reply_id.to_string(),
            text_sha256: sha256_hex(text.as_bytes()),
            actions: approved
                .iter()
                .map(|c| ApprovedAction::new(&c.action_id, &c.name, &c.arguments))
                .collect(),
        })
    }

    /// The broker confirmed the reply to `turn_id` reached the runner.
    pub(crate) fn reply_delivered(&mut self, turn_id: String) -> LedgerEvent {
        if self.undelivered_reply_turn.as_deref() == Some(turn_id.as_str()) {
            self.undelivered_reply_turn = None;
        }
        LedgerEvent::ReplyDelivered { turn_id }
    }

    /// A prompt (the user's, or a sub-session's task) is persisted for release to the runner:
    /// the session runs. An ended session is final and gets none.
    pub(crate) fn prompt_released(
        &mut self,
        prompt_id: String,
        text: String,
    ) -> ToolResult<LedgerEvent> {
        ensure_not_terminal(self)?;
        self.status = SessionStatus::Running;
        self.undelivered_prompt = Some(PromptRelease {
            prompt_id: prompt_id.clone(),
            text: text.clone(),
        });
        // The ledger keeps the prompt's hash and size, not its text (retention must be able to
        // remove it; the record's copy is checked against the hash before it is resent).
        Ok(LedgerEvent::PromptReleased {
            prompt_id,
            text_sha256: sha256_hex(text.as_bytes()),
            bytes: text.len() as u64,
        })
    }

    /// The broker confirmed prompt `prompt_id` reached the runner.
    pub(crate) fn prompt_delivered(&mut self, prompt_id: String) -> LedgerEvent {
        if self
            .undelivered_prompt
            .as_ref()
            .is_some_and(|p| p.prompt_id == prompt_id)
        {
            self.undelivered_prompt = None;
        }
        LedgerEvent::PromptDelivered { prompt_id }
    }
}

/// Retention: an ended session's content goes, its summary stays.
impl SessionRecord {
    /// Retention removed the ended session's content (`rows`, their digests as they were, and
    /// `bytes` of it; `answers` idempotency answers compacted): the record keeps its summary
    /// (ids, status, terminal reason, times, counts, hashes, label) and drops the texts that
    /// only the removed content explained. `None` for a live session or one pruned before.
    pub(crate) fn prune_content(
        &mut self,
        rows: Vec<common::ledger_chain::RowRecord>,
        bytes: u64,
        answers: u64,
    ) -> Option<LedgerEvent> {
        if !self.status.is_terminal() || self.content_pruned.is_some() {
            return None;
        }
        self.content_pruned = Some(crate::state::ContentPruned {
            at: now_rfc3339(),
            message: crate::view::CONTENT_PRUNED_NOTICE.to_string(),
        });
        self.last_result = None;
        self.closing_reply = None;
        self.undelivered_prompt = None;
        self.undelivered_reply_turn = None;
        self.pending_turn_id = None;
        if let Some(end) = self.delegation.as_mut().and_then(|d| d.end.as_mut()) {
            end.result_text = None;
        }
        Some(LedgerEvent::ContentPruned {
            rows,
            bytes,
            idempotency_answers: answers,
        })
    }
}

/// DeepSeek sub-sessions: a session delegates, a sub-session's calls and model requests, and
/// how it ends.
impl SessionRecord {
    /// The session delegated a task to the new sub-session `child` (persisted with the reply
    /// whose start call `action_id` asked for it), run as `tier` on `route`.
    pub(crate) fn subsession_delegated(
        &mut self,
        child: &SessionRecord,
        action_id: String,
        route: String,
        tier: ClaudeTier,
        deepseek_model: Option<String>,
    ) -> LedgerEvent {
        self.subsessions.push(child.id.clone());
        LedgerEvent::SubsessionDelegated {
            subsession_id: child.id.clone(),
            action_id,
            task_sha256: child
                .delegation
                .as_ref()
                .map(|d| d.task_sha256.clone())
                .unwrap_or_default(),
            route,
            tier,
            deepseek_model,
        }
    }

    /// A sub-session's runner made a tool call the gateway has not seen: the delegation
    /// approves it as the sub-session's next call; its call index.
    pub(crate) fn next_delegated_call(&mut self) -> u32 {
        self.turn_sequence += 1;
        u32::try_from(self.turn_sequence).unwrap_or(u32::MAX)
    }

    /// The sub-session ended (once) with `status`: its record becomes final. The event is for
    /// its own ledger (the caller also records it in its session's).
    pub(crate) fn subsession_ended(
        &mut self,
        status: SubsessionStatus,
        result_text: Option<String>,
        error: Option<String>,
    ) -> Option<LedgerEvent> {
        let delegation = self.delegation.as_mut()?;
        if delegation.end.is_some() {
            return None;
        }
        delegation.end = Some(SubsessionEnd {
            status,
            at_ms: now_unix_ms(),
            result_text,
            error: error.clone(),
        });
        if !self.status.is_terminal() {
            self.status = match status {
                SubsessionStatus::Succeeded | SubsessionStatus::Stopped => SessionStatus::Stopped,
                _ => SessionStatus::Failed,
            };
            self.pending_turn_id = None;
            self.terminal = Some(Terminal::stopped(
                Some(&format!("DeepSeek sub-session {}", status.as_str())),
                None,
                None,
                now_rfc3339(),
            ));
        }
        Some(LedgerEvent::SubsessionEnded {
            subsession_id: self.id.clone(),
            status,
            error,
        })
    }

    /// A running sub-session's model request (SHA-256 `request_sha256`) is about to leave for
    /// DeepSeek: it is in flight until answered (a resend is recorded as one). Only a running
    /// sub-session sends: `None` otherwise.
    pub(crate) fn deepseek_request_sent(&mut self, request_sha256: &str) -> Option<LedgerEvent> {
        let active = self.subsession_active();
        let delegation = self.delegation.as_mut().filter(|_| active)?;
        let resent = delegation.in_flight.iter().any(|h| h == request_sha256);
        if !resent {
            delegation.in_flight.push(request_sha256.to_string());
        }
        Some(LedgerEvent::DeepseekRequestSent {
            request_sha256: request_sha256.to_string(),
            resent,
        })
    }

    /// The model request `request_sha256` was answered (or refused): no longer in flight.
    /// Whether the record changed.
    pub(crate) fn deepseek_request_answered(&mut self, request_sha256: &str) -> bool {
        let Some(delegation) = self
            .delegation
            .as_mut()
            .filter(|d| d.in_flight.iter().any(|h| h == request_sha256))
        else {
            return false;
        };
        delegation.in_flight.retain(|h| h != request_sha256);
        true
    }
}
