//! Answering a repeated request once: every mutating call claims its key inside the transaction
//! that carries it out (so a concurrent duplicate never runs it twice), records its answer, and a
//! resend with the same arguments replays that answer; different arguments are a conflict. Also
//! the one wrapper the leased operations share: check the lease, serialise on the session, replay
//! or act, wait, answer, remember. What is recorded is charged to the state budget and bounded
//! per session and operation ([`ANSWERS_KEPT`], red team 29 B1/B2).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Gateway, ToolResult, WaitFor, within_budget};
use crate::error::{ErrorCode, ToolError};
use crate::state::{IdempotentAnswer, SessionRecord, Tx};
use crate::view::{SessionView, TurnKind};

/// How many recorded answers a session keeps per operation (continue, reply, stop, recover):
/// older ones are dropped (their keys still recognised, a replay refused saying why). A client
/// retries its last call, rarely an older one; and recover and stop, which work past the state
/// budget, may then store at most this many views each per session (red team 29 B1: 703 KiB to
/// 1022 KiB per call, 2.9 GiB a minute, unbounded).
pub const ANSWERS_KEPT: usize = 4;

/// Which operation a key belongs to: keys are unique per operation (and per session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Start,
    Continue,
    Reply,
    Stop,
    Recover,
}

/// One idempotent request: its operation, session, key and canonical hash.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    scope: String,
    kind: Scope,
    pub key: &'a str,
    pub hash: &'a str,
}

impl<'a> Request<'a> {
    pub(crate) fn new(kind: Scope, session_id: &str, key: &'a str, hash: &'a str) -> Self {
        let scope = match kind {
            Scope::Start => "start".to_string(),
            Scope::Continue => format!("continue:{session_id}"),
            Scope::Reply => format!("reply:{session_id}"),
            Scope::Stop => format!("stop:{session_id}"),
            Scope::Recover => format!("recover:{session_id}"),
        };
        Request {
            scope,
            kind,
            key,
            hash,
        }
    }
}

/// What a leased operation asks the wrapper to wait for before answering.
pub(crate) struct Settle {
    pub wait: WaitFor,
    pub timeout: Duration,
}

/// A leased operation on a session: who asks, and the request.
pub(crate) struct Leased<'a> {
    pub session_id: &'a str,
    pub lease_id: &'a str,
    pub request: Request<'a>,
}

impl Gateway {
    /// The answer recorded for `request`: a replay of the same request, or a conflict.
    /// A request still in progress (claimed, answer not yet recorded) replays the current view.
    pub(crate) fn replayed(&self, request: &Request<'_>) -> ToolResult<Option<SessionView>> {
        let row = self
            .store
            .read(|tx| tx.idempotency(&request.scope, request.key))?;
        let Some(row) = row else { return Ok(None) };
        if !row.signed {
            // Planted or edited in the database (or recorded before rows were signed): its
            // answer would name whose lease to hand out. Nothing is replayed.
            return Err(ToolError::new(
                ErrorCode::IdempotencyConflict,
                format!(
                    "the answer recorded for {:?} fails its integrity check (changed in the \
                     state database, or recorded before this gateway signed them); nothing was \
                     done. Use a new key",
                    request.key
                ),
            ));
        }
        if row.request_hash != request.hash {
            return Err(key_conflict(request.key));
        }
        let (mut view, generation) = match row.answer {
            // Still in progress, or its recorded answer removed by retention: the session as
            // it is now.
            IdempotentAnswer::InProgress { lease_generation }
            | IdempotentAnswer::Pruned { lease_generation } => {
                let session = self.load(row.session_id.as_deref().unwrap_or_default())?;
                (self.view(&session, None)?, lease_generation)
            }
            IdempotentAnswer::Done {
                lease_generation,
                view,
            } => (*view, lease_generation),
            IdempotentAnswer::Dropped { .. } => {
                return Err(ToolError::new(
                    ErrorCode::IdempotencyConflict,
                    format!(
                        "the answer recorded for {:?} is no longer kept (a session keeps the \
                         answers of its last {ANSWERS_KEPT} calls of each operation, and \
                         `gatewayctl prune` drops older ones); nothing was done. Call status to \
                         see the session as it is now, and use a new key for a new request",
                        request.key
                    ),
                ));
            }
        };
        if let Some(turn) = view
            .pending_turn
            .as_mut()
            .filter(|t| t.kind == TurnKind::Prompt)
        {
            // Stored answers hold no skill bodies; the frozen snapshot gives them back.
            let session = self.load(&view.native_session_id)?;
            turn.skill_contexts = self.skill_contexts(&session)?;
        }
        view.replay = true;
        view.lease_id = Some(self.lease_id(&view.native_session_id, generation));
        if request.kind == Scope::Start {
            view.recovery_token = Some(self.recovery_token(&view.native_session_id));
        }
        Ok(Some(view))
    }

    /// The scope under which an ended session keeps the last request of this operation.
    fn last_scope(request: &Request<'_>) -> String {
        format!("ended:{}", request.scope)
    }

    /// Whether the ended session's last request of this operation is kept (for a recover: the
    /// lease was already rotated after the session ended).
    pub(crate) fn has_last_request(&self, tx: &Tx<'_>, request: &Request<'_>) -> ToolResult<bool> {
        Ok(tx.last_request(&Self::last_scope(request))?.is_some())
    }

    /// Keep `request` as the ended session's last of its operation (overwriting the one before),
    /// in the caller's transaction.
    pub(crate) fn keep_last_request(
        &self,
        tx: &Tx<'_>,
        request: &Request<'_>,
        session_id: &str,
        generation: u32,
    ) -> ToolResult<()> {
        tx.put_last_request(
            &Self::last_scope(request),
            &last_request_hash(request),
            session_id,
            &IdempotentAnswer::Pruned {
                lease_generation: generation,
            },
        )?;
        Ok(())
    }

    /// Answer a request on an ended session that changes nothing (a stop, a recover after the
    /// first since the end): the session as stored with `lease_id` (renewed in place when
    /// `renew`), storing nothing but the one overwritten last request of the operation (red team
    /// 31/32 N1: each new key stored a row, an answer and, for a recover, a lease row and an
    /// event). The same key and arguments as that last request answer `replay: true` (never
    /// paced); the same key with other arguments is a conflict; a new key is paced as
    /// `operation` of an ended session.
    pub(crate) fn answer_ended(
        &self,
        session_id: &str,
        request: &Request<'_>,
        operation: &str,
        lease: (&str, bool),
    ) -> ToolResult<SessionView> {
        let (lease_id, renew) = lease;
        let wanted = last_request_hash(request);
        let last = self
            .store
            .read(|tx| tx.last_request(&Self::last_scope(request)))?;
        let replay = match last.filter(|row| row.signed) {
            Some(row) if row.request_hash == wanted => true,
            Some(row) if row.request_hash.split(':').next() == wanted.split(':').next() => {
                return Err(key_conflict(request.key));
            }
            _ => false,
        };
        if !replay {
            self.pace_recovery(operation, session_id, true)?;
        }
        let session = self.store.write(|tx| {
            let session = self.session(tx, session_id)?;
            if renew {
                self.renew_lease(tx, session_id, lease_id)?;
            }
            if !replay {
                self.keep_last_request(tx, request, session_id, session.lease_generation)?;
            }
            Ok::<_, ToolError>(session)
        })?;
        let mut view = self.view(&session, Some(lease_id.to_string()))?;
        view.replay = replay;
        Ok(view)
    }

    /// Claim `request` inside the transaction that carries it out. `busy` if already claimed
    /// (a concurrent identical request is being handled).
    pub(crate) fn claim(
        &self,
        tx: &Tx<'_>,
        request: &Request<'_>,
        session_id: &str,
        generation: u32,
    ) -> ToolResult<()> {
        if tx.idempotency(&request.scope, request.key)?.is_some() {
            return Err(ToolError::new(
                ErrorCode::Busy,
                "an identical request is already being handled; send it again to get its answer",
            ));
        }
        tx.put_idempotency(
            &request.scope,
            request.key,
            request.hash,
            Some(session_id),
            &IdempotentAnswer::InProgress {
                lease_generation: generation,
            },
        )?;
        Ok(())
    }

    /// Record the answer of a claimed request. Lease id and recovery token are not stored; they
    /// are derived again on replay, and so are a prompt turn's skill bodies (the database holds
    /// skill ids and hashes only). What is stored is charged to the state budget, and the
    /// session's answers of this operation beyond the newest [`ANSWERS_KEPT`] are dropped in the
    /// same transaction (a start's answer is its new session's first: nothing to bound).
    pub(crate) fn remember(&self, request: &Request<'_>, view: &SessionView, generation: u32) {
        let mut view = view.clone();
        if let Some(turn) = view.pending_turn.as_mut() {
            turn.skill_contexts.clear();
        }
        view.lease_id = None;
        view.replay = false;
        view.recovery_token = None;
        let answer = IdempotentAnswer::Done {
            lease_generation: generation,
            view: Box::new(view),
        };
        let recorded = self.store.write(|tx| {
            let bytes = tx.replace_idempotency_answer(&request.scope, request.key, &answer)?;
            if request.kind != Scope::Start {
                tx.drop_answers_beyond(&request.scope, ANSWERS_KEPT)?;
            }
            Ok::<_, crate::state::StoreError>(bytes)
        });
        match recorded {
            Ok(bytes) => self
                .state_budget
                .charge(bytes.saturating_mul(crate::state_budget::ANSWER_COST_FACTOR)),
            Err(err) => tracing::error!("recording idempotent answer: {err}"),
        }
    }

    /// Run a leased operation: the session must exist, then — holding its operation lock — the
    /// lease is checked and renewed, a repeated request replays its answer, and otherwise `act`
    /// runs (claiming the request in its own transaction). Then the answer waits as `act` asked,
    /// within the call budget, and is recorded for replays.
    pub(crate) async fn leased<'a, F, Fut>(
        self: &Arc<Self>,
        call: Leased<'a>,
        act: F,
    ) -> ToolResult<SessionView>
    where
        F: FnOnce(SessionRecord, Request<'a>) -> Fut,
        Fut: Future<Output = ToolResult<Settle>>,
    {
        let started = tokio::time::Instant::now();
        // Only a session that exists gets an in-memory entry.
        self.load(call.session_id)?;
        let live = self.live(call.session_id);
        let op = live.op_lock.lock().await;
        let session = self.authenticate(call.session_id, call.lease_id)?;
        if let Some(view) = self.replayed(&call.request)? {
            return Ok(view);
        }
        if session.status.is_terminal() && call.request.kind == Scope::Stop {
            // Nothing to stop: answered from the session as stored, nothing per request kept.
            let lease = (call.lease_id, false);
            return self.answer_ended(call.session_id, &call.request, "stop", lease);
        }
        let settle = act(session, call.request.clone()).await?;
        drop(op);
        let session = self
            .wait_until(
                call.session_id,
                within_budget(started, settle.timeout),
                settle.wait,
            )
            .await?;
        let view = self.view(&session, Some(call.lease_id.to_string()))?;
        self.remember(&call.request, &view, session.lease_generation);
        Ok(view)
    }
}

/// A key already used for a different request (a recorded one, or an ended session's last).
fn key_conflict(key: &str) -> ToolError {
    ToolError::new(
        ErrorCode::IdempotencyConflict,
        format!(
            "{key:?} was already used for a different request; use a new key for a new \
             request, or resend the original arguments to get its answer again"
        ),
    )
}

/// What an ended session's last request is known by: the key's hash (to tell a reused key) and
/// the request's canonical hash, `<key hash>:<request hash>`.
fn last_request_hash(request: &Request<'_>) -> String {
    format!(
        "{}:{}",
        common::hash::sha256_hex(request.key.as_bytes()),
        request.hash
    )
}
