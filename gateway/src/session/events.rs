//! Broker events into state: each event of the session's current broker is applied once (by its
//! sequence number), in one transaction with its ledger entry, before the broker gets its
//! acknowledgement; then waiters are woken and any follow-up (a re-sent reply, a stop) goes out.

use broker::executor::failpoint::Failpoint;
use common::protocol::{
    ApprovedCall, BrokerEvent, GatewayToBroker, PreparedWrite, ReplyRelease, TurnContent,
    TurnRequest, Verdict, WriteEnd,
};
use common::tools::{ActionOutcome, LogicalTool, ToolStatus};

use std::sync::Arc;

use serde_json::Value;

use super::Gateway;
use super::transitions::EventOrder;
use crate::state::{
    ActionEnd, ActionRecord, ActionState, LedgerEvent, ReplyRecord, SessionRecord, StoreError,
    TurnBody, TurnRecord, Tx,
};
use crate::state::{LaunchError, LaunchErrorCode};

/// What to do once a broker event is persisted.
#[derive(Default)]
struct AfterEvent {
    /// Re-send this reply (the runner retried a request that already has one).
    resend: Option<ReplyRelease>,
    /// Stop the runner, for this reason.
    stop: Option<String>,
    /// Crash tests: the failpoint to hit after the record is durable.
    failpoint: Option<Failpoint>,
    /// A sub-session's runner ended its turn: its result text and whether in error.
    subsession_done: Option<(Option<String>, bool)>,
    /// Fail this sub-session (and stop its runtime) with this error.
    fail_subsession: Option<String>,
}

/// A sub-session runner's tool call, as its broker reported it.
struct DelegatedCall {
    action_id: String,
    tool_use_id: String,
    name: String,
    arguments: Value,
}

/// What follows a delegated call's record.
enum CallEnd {
    /// Approved: it runs.
    Runs,
    /// Not a tool of the sub-session: its runner is stopped.
    Stop,
    /// Refused by the sub-session's kind, and the sub-session fails with this error.
    Fail(String),
}

/// A stored reply released again (a re-attached broker, a retried request), exactly as it went
/// out first: the calls the gateway carried out itself get their recorded outcomes back, so the
/// broker answers them from these and runs nothing.
pub(super) fn release_again(
    tx: &Tx<'_>,
    turn: &TurnRecord,
    reply: ReplyRecord,
) -> Result<ReplyRelease, StoreError> {
    let mut calls = reply.calls;
    for call in &mut calls {
        if LogicalTool::from_name(&call.name).is_some_and(LogicalTool::executed_by_gateway) {
            call.outcome = tx.action(&call.action_id)?.and_then(|a| a.outcome);
        }
    }
    Ok(ReplyRelease {
        turn_id: turn.turn_id.clone(),
        fingerprint: turn.fingerprint.clone(),
        text: reply.text,
        calls,
    })
}

/// The state a finished action settles in. A write reports how it ended; a write that failed
/// without saying (refused before it was prepared, or before its temp file existed) changed
/// nothing; everything else that ran is committed.
pub(crate) fn settled_state(
    is_write: bool,
    write: Option<WriteEnd>,
    status: ToolStatus,
) -> ActionState {
    match write {
        Some(WriteEnd::Committed) => ActionState::Committed,
        Some(WriteEnd::NotApplied) => ActionState::NotApplied,
        Some(WriteEnd::Indeterminate) => ActionState::Indeterminate,
        None if is_write && status != ToolStatus::Ok => ActionState::NotApplied,
        None => ActionState::Committed,
    }
}

/// Whether the broker waits for the gateway's verdict on this event before it goes on.
fn asks_verdict(event: &BrokerEvent) -> bool {
    matches!(
        event,
        BrokerEvent::WritePrepared(_) | BrokerEvent::DelegatedCall { .. }
    )
}

/// A sub-session that ended (or is stopping): nothing of it runs or is written any more.
fn delegation_ended(session: &SessionRecord) -> bool {
    session.delegation.is_some() && !session.subsession_active()
}

fn prepare_refusal(session: &SessionRecord) -> &'static str {
    if delegation_ended(session) {
        "the sub-session has ended (stopped, failed or finished); nothing is written"
    } else {
        "no approved action of this session has this write; nothing is written"
    }
}

/// The verdict on an event that asks for one, from what is recorded: a write only if its
/// action is this session's and prepared with exactly this intent; a delegated call only if its
/// action is this sub-session's, approved, and the sub-session still runs.
fn verdict_on(
    tx: &Tx<'_>,
    session: &SessionRecord,
    event: &BrokerEvent,
) -> Result<Option<Verdict>, StoreError> {
    let refused = |reason: &str| Verdict::Refused {
        reason: reason.to_string(),
    };
    Ok(match event {
        BrokerEvent::WritePrepared(prepared) => {
            let action = tx
                .action(&prepared.action_id)?
                .filter(|a| a.session_id == session.id);
            Some(match action {
                Some(a)
                    if !delegation_ended(session)
                        && a.state == ActionState::Prepared
                        && a.prepared.as_ref() == Some(prepared) =>
                {
                    Verdict::Approved
                }
                _ => refused(prepare_refusal(session)),
            })
        }
        BrokerEvent::DelegatedCall { action_id, .. } => {
            let action = tx.action(action_id)?.filter(|a| a.session_id == session.id);
            Some(match action {
                _ if delegation_ended(session) => refused(
                    "the sub-session has ended (stopped, failed or finished); the call does not run",
                ),
                Some(a) if a.state == ActionState::Approved => Verdict::Approved,
                _ => refused("not a tool of this sub-session; the call does not run"),
            })
        }
        _ => None,
    })
}

/// The runner asked for a model turn. A retry of a request already known gets its reply again
/// (if it has one); a new request becomes the pending turn ChatGPT answers. A sub-session's
/// requests go to DeepSeek, never to ChatGPT.
fn turn_requested(
    tx: &Tx<'_>,
    session: &mut SessionRecord,
    request: TurnRequest,
    after: &mut AfterEvent,
) -> Result<LedgerEvent, StoreError> {
    if session.delegation.is_some() {
        return Ok(LedgerEvent::TurnRequestIgnored {
            reason: "a DeepSeek sub-session does not ask ChatGPT for turns".into(),
        });
    }
    if let Some(turn) = tx.turn_by_fingerprint(&session.id, &request.fingerprint)? {
        if let Some(reply_id) = &turn.reply_id
            && let Some(reply) = tx.reply(&session.id, reply_id)?
        {
            after.resend = Some(release_again(tx, &turn, reply)?);
        }
        return Ok(LedgerEvent::TurnRequestRetried {
            turn_id: turn.turn_id,
        });
    }
    let (turn, event) = session.turn_requested(request.fingerprint, |session| {
        Ok::<_, StoreError>(match request.content {
            TurnContent::Prompt { text } => {
                // The last turn's calls were answered by no tool-results turn.
                let interrupted = match &session.last_reply_turn_id {
                    Some(id) if tx.turn_has_actions(id)? => Some(id.clone()),
                    _ => None,
                };
                TurnBody::Prompt {
                    text,
                    interrupted_turn_id: interrupted,
                }
            }
            TurnContent::ToolResults { results } => TurnBody::ToolResults {
                previous_turn_id: session.last_reply_turn_id.clone().unwrap_or_default(),
                runner_results: results,
            },
        })
    })?;
    if let Some(turn) = &turn {
        tx.put_turn(turn)?;
    }
    Ok(event)
}

/// The broker recorded a write's intent: its approved action becomes `prepared` with it, unless
/// the action is not this session's approved one or the sub-session has ended.
fn write_prepared(
    tx: &Tx<'_>,
    session: &SessionRecord,
    prepared: PreparedWrite,
) -> Result<LedgerEvent, StoreError> {
    let approved = tx
        .action(&prepared.action_id)?
        .filter(|a| a.session_id == session.id && a.state == ActionState::Approved);
    Ok(match approved {
        Some(mut action) if !delegation_ended(session) => {
            action.state = ActionState::Prepared;
            action.prepared = Some(prepared.clone());
            tx.put_action(&action)?;
            LedgerEvent::WritePrepared {
                action_id: prepared.action_id,
                path: prepared.path,
                pre_sha256: prepared.pre_sha256,
                post_sha256: prepared.post_sha256,
            }
        }
        _ => LedgerEvent::WritePrepareRefused {
            reason: prepare_refusal(session).into(),
            action_id: prepared.action_id,
            path: prepared.path,
        },
    })
}

impl Gateway {
    /// Persist one event of broker `broker_pid`. Events of a broker that is no longer the
    /// session's (an older generation winding down) and events already applied (re-sent after a
    /// reconnect) are acknowledged without being applied.
    ///
    /// Returns the verdict for an event that asks for one (`WritePrepared`, `DelegatedCall`),
    /// to send just before the acknowledgement: decided from what is recorded once the event is
    /// applied, so a re-sent event gets the same answer and an unknown broker a refusal.
    pub fn on_broker_event(
        self: &Arc<Self>,
        session_id: &str,
        broker_pid: i32,
        seq: u64,
        event: BrokerEvent,
    ) -> Result<Option<Verdict>, StoreError> {
        let mut after = AfterEvent::default();
        let asks = asks_verdict(&event).then(|| event.clone());
        let (session, verdict) = self.store.write(|tx| {
            let not_current = asks.as_ref().map(|_| Verdict::Refused {
                reason: "this broker is not the session's current runtime".into(),
            });
            let Some(mut session) = tx.session(session_id)? else {
                return Ok((None, not_current));
            };
            match session.broker_event(broker_pid, seq) {
                EventOrder::NotCurrent => return Ok((None, not_current)),
                EventOrder::Seen => {
                    let verdict = match &asks {
                        Some(event) => verdict_on(tx, &session, event)?,
                        None => None,
                    };
                    return Ok((None, verdict));
                }
                EventOrder::Next => {}
            }
            let recorded = self.apply_event(tx, &mut session, event, &mut after)?;
            if recorded.changes_view() {
                self.commit(tx, &mut session, &recorded)?;
            } else {
                tx.put_session(&session)?;
                tx.record(&session.id, &recorded)?;
            }
            let verdict = match &asks {
                Some(event) => verdict_on(tx, &session, event)?,
                None => None,
            };
            Ok::<_, StoreError>((Some(session), verdict))
        })?;
        if let Some(point) = after.failpoint {
            // Crash tests: the record is durable, the broker has no acknowledgement yet.
            let _ = broker::executor::failpoint::hit(point);
        }
        if let Some(session) = session {
            self.notify(&session);
        }
        if let Some(reply) = after.resend {
            self.live(session_id).send(GatewayToBroker::Reply(reply));
        }
        if let Some(reason) = after.stop {
            self.live(session_id).send(GatewayToBroker::Stop { reason });
        }
        if let Some(error) = after.fail_subsession {
            self.subsessions().fail(self, session_id, error);
        }
        if let Some((result, is_error)) = after.subsession_done {
            self.subsessions()
                .turn_ended(self, session_id, result, is_error);
        }
        Ok(verdict)
    }

    /// Apply one broker event to the session (and its turns and actions): the ledger event that
    /// records it, and in `after` what follows once it is durable.
    fn apply_event(
        &self,
        tx: &Tx<'_>,
        session: &mut SessionRecord,
        event: BrokerEvent,
        after: &mut AfterEvent,
    ) -> Result<LedgerEvent, StoreError> {
        after.failpoint = match &event {
            BrokerEvent::WritePrepared(_) => Some(Failpoint::GatewayAfterPreparedPersisted),
            BrokerEvent::ActionFinished { write: Some(_), .. } => {
                Some(Failpoint::GatewayAfterFinishedPersisted)
            }
            _ => None,
        };
        Ok(match event {
            BrokerEvent::RunnerStarted {
                generation,
                started_at_ms,
                resumed,
            } => session.runner_started(generation, started_at_ms, resumed),
            BrokerEvent::RunnerLaunchFailed { message } => session.launch_failed(LaunchError::now(
                LaunchErrorCode::RunnerLaunchFailed,
                message,
            )),
            BrokerEvent::TurnRequested(request) => turn_requested(tx, session, request, after)?,
            BrokerEvent::ReplyDelivered { turn_id } => session.reply_delivered(turn_id),
            BrokerEvent::PromptDelivered { prompt_id } => session.prompt_delivered(prompt_id),
            BrokerEvent::WritePrepared(prepared) => write_prepared(tx, session, prepared)?,
            BrokerEvent::ActionFinished {
                action_id,
                outcome,
                write,
            } => self.action_finished(tx, session, action_id, outcome, write, after)?,
            BrokerEvent::UnapprovedCall {
                tool_use_id,
                name,
                reason,
            } => LedgerEvent::UnapprovedCall {
                tool_use_id,
                name,
                reason,
            },
            BrokerEvent::SideRequest {
                purpose,
                fingerprint,
            } => LedgerEvent::SideRequestAnsweredLocally {
                purpose,
                fingerprint,
            },
            BrokerEvent::RunnerTurnEnded {
                subtype,
                is_error,
                result,
            } => {
                if session.delegation.is_some() {
                    after.subsession_done = Some((result, is_error));
                }
                session.runner_turn_ended(subtype, is_error)
            }
            BrokerEvent::DelegatedCall {
                action_id,
                tool_use_id,
                name,
                arguments,
            } => {
                let call = DelegatedCall {
                    action_id,
                    tool_use_id,
                    name,
                    arguments,
                };
                self.delegated_call_event(tx, session, call, after)?
            }
            BrokerEvent::RunnerExited {
                exit_code,
                signal,
                at_ms,
            } => session.runner_exited(exit_code, signal, at_ms),
            BrokerEvent::BrokerExiting { reason } => LedgerEvent::BrokerExiting { reason },
            BrokerEvent::Unknown => LedgerEvent::UnknownBrokerEvent {},
        })
    }

    /// A sub-session's runner called a tool: recorded (approved or not); what follows goes in
    /// `after` (a refused call stops or fails the sub-session).
    fn delegated_call_event(
        &self,
        tx: &Tx<'_>,
        session: &mut SessionRecord,
        call: DelegatedCall,
        after: &mut AfterEvent,
    ) -> Result<LedgerEvent, StoreError> {
        let (event, end) = self.delegated_call(tx, session, call)?;
        match end {
            CallEnd::Runs => {}
            CallEnd::Stop => {
                after.stop = Some("the sub-session called a tool it does not have".into());
            }
            CallEnd::Fail(error) => after.fail_subsession = Some(error),
        }
        Ok(event)
    }

    /// A sub-session's runner called a tool: recorded as an approved action of the sub-session
    /// (the delegation is its approval) if it is one of the sub-session's tools and its kind lets
    /// it through ([`super::Subsessions::screen_call`]). A call that is not its tool is refused
    /// and stops the sub-session: its broker checks the same list, so only a broken or hostile
    /// broker sends one.
    fn delegated_call(
        &self,
        tx: &Tx<'_>,
        child: &mut SessionRecord,
        call: DelegatedCall,
    ) -> Result<(LedgerEvent, CallEnd), StoreError> {
        let offered = LogicalTool::offered(child.profile, child.subagent_policy);
        let allowed = child.delegation.is_some()
            && child.subsession_active()
            && LogicalTool::from_name(&call.name).is_some_and(|t| offered.contains(&t))
            && call.action_id.starts_with("act_");
        if !allowed {
            return Ok((
                LedgerEvent::UnapprovedCall {
                    tool_use_id: call.tool_use_id,
                    name: call.name,
                    reason: "not a tool of this sub-session, or it has ended".into(),
                },
                CallEnd::Stop,
            ));
        }
        if let Err(screened) = self
            .subsessions()
            .screen_call(self, &call.name, &call.arguments)
        {
            // Never recorded with its arguments, never run: the sub-session fails.
            return Ok((
                LedgerEvent::UnapprovedCall {
                    tool_use_id: call.tool_use_id,
                    name: call.name,
                    reason: screened.reason,
                },
                CallEnd::Fail(screened.error),
            ));
        }
        if tx.action(&call.action_id)?.is_none() {
            let approved = ApprovedCall {
                action_id: call.action_id.clone(),
                call_index: child.next_delegated_call(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                outcome: None,
            };
            tx.put_action(&ActionRecord::approved(&approved, &child.id, &child.id))?;
        }
        let (arguments_sha256, arguments_bytes) = crate::state::arguments_digest(&call.arguments);
        Ok((
            LedgerEvent::DelegatedCallApproved {
                action_id: call.action_id,
                tool_use_id: call.tool_use_id,
                name: call.name,
                arguments_sha256,
                arguments_bytes,
            },
            CallEnd::Runs,
        ))
    }

    /// Settle a finished action; an indeterminate write stops the session.
    fn action_finished(
        &self,
        tx: &Tx<'_>,
        session: &mut SessionRecord,
        action_id: String,
        mut outcome: ActionOutcome,
        write: Option<WriteEnd>,
        after: &mut AfterEvent,
    ) -> Result<LedgerEvent, StoreError> {
        self.subsessions()
            .screen_outcome(self, session, &mut outcome);
        // Stored here and, by the runner, in its transcript: counted before the next walk.
        self.state_budget.charge(
            (outcome.output.len() as u64).saturating_mul(crate::state_budget::OUTPUT_COST_FACTOR),
        );
        let mut state = ActionState::Committed;
        if let Some(mut action) = tx
            .action(&action_id)?
            .filter(|a| a.session_id == session.id)
        {
            let is_write = LogicalTool::from_name(&action.name).is_some_and(|t| t.writes());
            state = settled_state(is_write, write, outcome.status);
            action.state = state;
            action.outcome = Some(outcome.clone());
            tx.put_action(&action)?;
            if state == ActionState::Indeterminate {
                session.write_indeterminate(&action);
                after.stop = Some("a write ended in an unknown state".into());
            }
            if is_write && state == ActionState::Committed && session.delegation.is_some() {
                after.fail_subsession = self.subsessions().screen_write(self, &action);
            }
        }
        let end = ActionEnd {
            action_id,
            status: outcome.status,
            receipt: outcome.receipt,
        };
        Ok(match state {
            ActionState::NotApplied => LedgerEvent::WriteNotApplied(end),
            ActionState::Indeterminate => LedgerEvent::WriteIndeterminate(end),
            _ => LedgerEvent::ActionCommitted(end),
        })
    }
}
