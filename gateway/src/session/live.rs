//! What the gateway keeps in memory per session: a revision signal for waiters, the current
//! broker link, a lock that serialises public operations on the session, and (a sub-session)
//! the cancellation of its model requests in flight. Entries exist only
//! for sessions found in the store, and go when the session has ended and nobody holds them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::protocol::GatewayToBroker;
use tokio::sync::{mpsc, watch};

/// One session's in-memory side.
pub struct LiveSession {
    pub(crate) revision: watch::Sender<u64>,
    /// The current broker link and its number (a re-attach replaces it).
    link: Mutex<Option<(u64, mpsc::UnboundedSender<GatewayToBroker>)>>,
    next_link_id: AtomicU64,
    pub op_lock: tokio::sync::Mutex<()>,
    /// The gateway is killing this session's broker to finish a stop: the link's end then says
    /// so in the session's final state.
    stop_enforced: AtomicBool,
    /// A DeepSeek sub-session's model requests in flight end when this is cancelled (it
    /// stopped or ended): their upstream connections close at once, not at the timeout.
    egress_cancel: tokio_util::sync::CancellationToken,
}

impl LiveSession {
    fn new() -> Self {
        LiveSession {
            revision: watch::channel(0).0,
            link: Mutex::new(None),
            next_link_id: AtomicU64::new(1),
            op_lock: tokio::sync::Mutex::new(()),
            stop_enforced: AtomicBool::new(false),
            egress_cancel: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Send `message` over the current link; whether there was one to take it.
    pub(crate) fn send(&self, message: GatewayToBroker) -> bool {
        let link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        link.as_ref()
            .is_some_and(|(_, tx)| tx.send(message).is_ok())
    }

    pub fn attached(&self) -> bool {
        let link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        link.as_ref().is_some_and(|(_, tx)| !tx.is_closed())
    }

    /// Make `tx` the session's broker link; returns its number.
    pub fn set_link(&self, tx: mpsc::UnboundedSender<GatewayToBroker>) -> u64 {
        let id = self.next_link_id.fetch_add(1, Ordering::Relaxed);
        *self.link.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, tx));
        self.revision.send_modify(|_| {});
        id
    }

    /// Drop link `id` if it is still the current one; returns whether it was.
    pub fn clear_link(&self, id: u64) -> bool {
        let mut link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        if link.as_ref().is_some_and(|(current, _)| *current == id) {
            *link = None;
            drop(link);
            self.revision.send_modify(|_| {});
            return true;
        }
        false
    }

    /// Resolves once the sub-session's model requests must end.
    pub(crate) fn egress_cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.egress_cancel.cancelled()
    }

    /// End the sub-session's model requests in flight (and refuse any later one).
    pub(crate) fn cancel_egress(&self) {
        self.egress_cancel.cancel();
    }

    pub(crate) fn mark_stop_enforced(&self) {
        self.stop_enforced.store(true, Ordering::SeqCst);
    }

    pub(crate) fn stop_enforced(&self) -> bool {
        self.stop_enforced.load(Ordering::SeqCst)
    }
}

/// The registry of live sessions.
#[derive(Default)]
pub(crate) struct LiveSessions(Mutex<HashMap<String, Arc<LiveSession>>>);

impl LiveSessions {
    /// The entry of a session; callers make sure the session exists first, so an unknown id
    /// from a caller never grows the map.
    pub(crate) fn get_or_insert(&self, session_id: &str) -> Arc<LiveSession> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(session_id.to_string())
            .or_insert_with(|| Arc::new(LiveSession::new()))
            .clone()
    }

    /// Drop the entries of ended sessions (`ended`) that have no link and nobody holding them.
    pub(crate) fn prune(&self, ended: impl Fn(&str) -> bool) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|id, live| Arc::strong_count(live) > 1 || live.attached() || !ended(id));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
