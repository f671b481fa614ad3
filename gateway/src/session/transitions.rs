//! The typed state changes of a session record. Each is a pure function of the record and what
//! happened, returning the ledger event that says so (or `None` when nothing applies), so the
//! decisions are unit-tested without a store, a broker or a runner.

use common::time::{now_rfc3339, rfc3339_ms};

use super::ToolResult;
use crate::error::{ErrorCode, ToolError};
use crate::state::{ActionRecord, CurrentRun, LedgerEvent, RunState, SessionRecord, SessionStatus};
use crate::view::{LaunchError, StopRequest, Terminal};

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
            self.conversation_restart = Some(crate::view::ConversationRestart {
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
