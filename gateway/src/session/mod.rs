//! The session core behind the public tools: the [`Gateway`] (durable state, configuration, the
//! live-session registry and the broker host), and the building blocks every tool and broker
//! event goes through. Every state change is one SQLite transaction that also appends to the
//! ledger, and wakes whoever waits on the session.
//!
//! - `live`: per-session memory (revision signal, broker link, operation lock).
//! - `lease`, `idempotency`: who may act on a session, and answering a repeated request once.
//! - `transitions`: every state change of a session record (pure, unit-tested; the only
//!   code that assigns its fields).
//! - `events`: broker events into state; `supervision`: links, adoption, stops, expiry;
//!   `runner`: launching runner generations (`broker_spec`: what the broker host is handed);
//!   `write_recovery`: settling a dead broker's writes.
//! - `view`: the SessionView of a session record (the one place stored parts become public).
//! - `subsessions`: the hooks a sub-session kind (DeepSeek) plugs into the core by.

mod broker_spec;
mod events;
mod idempotency;
mod lease;
mod live;
mod runner;
mod subsessions;
pub(crate) mod supervision;
mod transitions;
mod view;
mod write_recovery;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use crate::brokers::BrokerHost;
use crate::config::Config;
use crate::error::{ErrorCode, ToolError};
use crate::state::{LedgerEvent, SessionRecord, Store, StoreError, Tx};

pub use idempotency::ANSWERS_KEPT;
pub(crate) use idempotency::{Leased, Request, Scope, Settle};
pub use live::LiveSession;
pub use subsessions::{ScreenedOut, Subsessions};
pub(crate) use transitions::ensure_not_terminal;

/// Every call answers within this budget, whatever it had to do first (launching a broker,
/// re-attaching one): ChatGPT abandons a tool call after about 60 s.
const CALL_BUDGET: Duration = Duration::from_secs(50);

/// How long a call that began at `started` may still wait, at most `wanted`.
pub(crate) fn within_budget(started: tokio::time::Instant, wanted: Duration) -> Duration {
    wanted.min(CALL_BUDGET.saturating_sub(started.elapsed()))
}

pub(crate) type ToolResult<T> = Result<T, ToolError>;

/// The gateway core shared by the MCP layer and the broker links.
pub struct Gateway {
    pub store: Store,
    pub config: Config,
    server_key: String,
    live: live::LiveSessions,
    host: Arc<dyn BrokerHost>,
    /// Set when `gateway serve` is stopping: waits end at once, new calls are refused.
    pub drain: crate::drain::Drain,
    /// The sub-sessions this gateway hosts (DeepSeek's), registered by whoever builds it.
    subsessions: Arc<dyn Subsessions>,
    /// The state dir's disk budget and its last measurement.
    pub state_budget: crate::state_budget::StateBudget,
    /// The one deleter of what sessions discarded in the command runtime area.
    pub reaper: crate::runtime_area::Reaper,
    /// Recovers and stops, keyed by operation and live session, or ended sessions together
    /// (`state_budget::PACED_BURST`).
    pub recovery_pace: crate::pace::Pace,
    /// `worktree_write` starts go one at a time through the budget check, the checkout and its
    /// measurement (concurrent ones each passed the check before any checkout was measured).
    pub worktree_starts: tokio::sync::Mutex<()>,
}

/// What a waiting call waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitFor {
    /// A pending turn to answer, or the runner's turn ended (idle).
    NextTurn,
    /// Any change after `revision`.
    ChangeAfter(u64),
    /// The session ended.
    Terminal,
}

impl WaitFor {
    fn done(self, session: &SessionRecord) -> bool {
        match self {
            Self::NextTurn => {
                session.pending_turn_id.is_some()
                    || session.status == crate::state::SessionStatus::Idle
            }
            Self::ChangeAfter(revision) => session.revision != revision,
            Self::Terminal => session.status.is_terminal(),
        }
    }
}

impl Gateway {
    pub fn new(
        store: Store,
        config: Config,
        server_key: String,
        host: Arc<dyn BrokerHost>,
        subsessions: Arc<dyn Subsessions>,
    ) -> Arc<Gateway> {
        let state_budget =
            crate::state_budget::StateBudget::new(&config.state_dir, config.state_max_mb);
        let reaper = crate::runtime_area::Reaper::start(sandbox::protected::command_runtime_area(
            &config.state_dir,
        ));
        Arc::new(Gateway {
            state_budget,
            reaper,
            recovery_pace: crate::pace::Pace::new(
                crate::state_budget::PACED_BURST,
                crate::state_budget::PACED_EVERY,
            ),
            worktree_starts: tokio::sync::Mutex::new(()),
            store,
            config,
            server_key,
            live: live::LiveSessions::default(),
            host,
            drain: crate::drain::Drain::default(),
            subsessions,
        })
    }

    /// `operation` (`recover`, `stop`) is paced whatever the state budget (red team 29 B1, 31/32
    /// N1): legitimately rare (a client's retry loop, a few a minute), it must not become a write
    /// rate for whoever holds sessions' tokens. A live session's calls are paced per session; an
    /// ended session's share one pace (a holder of many ended sessions' tokens would multiply a
    /// per-session one). `busy` says when to send it again.
    pub fn pace_recovery(
        &self,
        operation: &str,
        session_id: &str,
        ended: bool,
    ) -> Result<(), ToolError> {
        let key = if ended {
            format!("{operation}:ended sessions")
        } else {
            format!("{operation}:{session_id}")
        };
        self.recovery_pace
            .take(&key, common::time::now_unix_ms())
            .map_err(|wait_s| crate::state_budget::paced(operation, wait_s))
    }

    /// The in-memory side of a session known to exist.
    pub fn live(&self, session_id: &str) -> Arc<LiveSession> {
        self.live.get_or_insert(session_id)
    }

    /// Load a session or answer `not_found` (`invalid_argument` for an id this gateway never
    /// gives: too long, or not printable ASCII). Only a short prefix of the id is echoed.
    pub(crate) fn session(&self, tx: &Tx<'_>, session_id: &str) -> ToolResult<SessionRecord> {
        if session_id.len() > crate::error::MAX_SESSION_ID_BYTES
            || !session_id.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(ToolError::invalid(format!(
                "native_session_id {} is not one this gateway gives (at most {} printable ASCII \
                 characters, e.g. ns_ and 32 hex digits); use the one native_session_start \
                 answered",
                crate::error::shown(session_id),
                crate::error::MAX_SESSION_ID_BYTES
            )));
        }
        tx.session(session_id)?.ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "no session {session_id:?}; check native_session_id or start a new session"
                ),
            )
        })
    }

    /// The session as stored now.
    pub(crate) fn load(&self, session_id: &str) -> ToolResult<SessionRecord> {
        self.store.read(|tx| self.session(tx, session_id))
    }

    /// Persist a changed session: bump its revision and append the ledger event.
    pub(crate) fn commit(
        &self,
        tx: &Tx<'_>,
        session: &mut SessionRecord,
        event: &LedgerEvent,
    ) -> Result<(), StoreError> {
        session.revision += 1;
        tx.put_session(session)?;
        tx.record(&session.id, event)
    }

    /// Change the stored session with `change` (which says what happened, or `None` when nothing
    /// applies) in one transaction, and wake its waiters; a failure is logged as `what`. Returns
    /// the session as changed, if it was.
    pub(crate) fn transition(
        &self,
        session_id: &str,
        what: &str,
        change: impl FnOnce(&mut SessionRecord) -> Option<LedgerEvent>,
    ) -> Option<SessionRecord> {
        let res = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            let Some(event) = change(&mut session) else {
                return Ok(None);
            };
            self.commit(tx, &mut session, &event)?;
            Ok(Some(session))
        });
        match res {
            Ok(Some(session)) => {
                self.notify(&session);
                Some(session)
            }
            Ok(None) => None,
            Err(err) => {
                tracing::error!("{what}: {err}");
                None
            }
        }
    }

    pub(crate) fn notify(&self, session: &SessionRecord) {
        self.live(&session.id)
            .revision
            .send_replace(session.revision);
        if session.status.is_terminal() {
            self.discard_runtime_dir(session);
        }
    }

    /// The session's dir in the command runtime area (its layer, scratch and what its broker
    /// set aside) goes to the deleter once its broker is gone: called at every end (a terminal
    /// state, a lost link, a lost runtime, an enforced stop). A live broker still uses it; its
    /// exit is one of those ends.
    pub(crate) fn discard_runtime_dir(&self, session: &SessionRecord) {
        if session
            .broker
            .as_ref()
            .is_some_and(|b| self.host.is_alive(b))
        {
            return;
        }
        self.reaper.discard_session(&session.id);
    }

    /// [`Self::discard_runtime_dir`] of the session as stored.
    pub(crate) fn discard_runtime_dir_of(&self, session_id: &str) {
        if let Ok(session) = self.load(session_id) {
            self.discard_runtime_dir(&session);
        }
    }

    /// Append a ledger-only event (nothing ChatGPT sees changes); a failure is logged.
    pub(crate) fn record_event(&self, session_id: &str, event: LedgerEvent) {
        if let Err(err) = self.store.write(|tx| tx.record(session_id, &event)) {
            tracing::error!("recording {event:?}: {err}");
        }
    }

    /// Wait until `until` holds for the session, the timeout passes, the session ends, or the
    /// gateway stops.
    pub(crate) async fn wait_until(
        &self,
        session_id: &str,
        timeout: Duration,
        until: WaitFor,
    ) -> ToolResult<SessionRecord> {
        let mut rx = self.live(session_id).revision.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            let session = self.load(session_id)?;
            if until.done(&session) || session.status.is_terminal() {
                return Ok(session);
            }
            // A stopping gateway answers waits with the state as it is, at once.
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, rx.changed()) => match changed {
                    Ok(Ok(())) => continue,
                    _ => return Ok(session),
                },
                () = self.drain.started() => return Ok(session),
            }
        }
    }

    /// The broker host (real processes, or a test's).
    pub(crate) fn host(&self) -> &dyn BrokerHost {
        self.host.as_ref()
    }

    /// The sub-sessions' hooks (see [`Subsessions`]).
    pub(crate) fn subsessions(&self) -> &dyn Subsessions {
        self.subsessions.as_ref()
    }
}
