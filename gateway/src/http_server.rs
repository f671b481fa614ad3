//! The HTTP/1.1 server under the MCP app: accepts loopback (or tunnel) connections up to a cap,
//! bounds how long a client may take to send a request head (which also ends idle keep-alive
//! connections), keeps the owner's way in when strangers fill every slot (a connection that never
//! carried an authenticated request makes way first, the oldest of them; the owner's idle
//! keep-alive connections keep their slots, up to [`KEPT_IDLE_OWNER_CONNECTIONS`]), and stops
//! gracefully: no new connections, requests in flight finish (bounded), idle connections close.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::HttpLimits;

/// Connections over the cap that are still answered with a 503 (beyond that they are just
/// closed), and how long such an answer may take.
const OVERFLOW_ANSWERS: usize = 64;
const OVERFLOW_ANSWER_BOUND: Duration = Duration::from_secs(2);

/// How long a new connection waits for the slot of the connection it evicted.
const EVICTION_WAIT: Duration = Duration::from_millis(500);

/// How many idle connections that carried an authenticated request keep their slots under
/// pressure (the most recently used ones): a pooling client's keep-alive connections are the
/// owner's, and only the owner can make more of them. Beyond these, the least recently used
/// make way, after every connection that never authenticated. Each is closed anyway once idle
/// for the header read timeout.
const KEPT_IDLE_OWNER_CONNECTIONS: usize = 16;

/// Orders authenticated requests in time, for "least recently used" (a counter, not a clock).
static AUTHENTICATED_REQUESTS: AtomicU64 = AtomicU64::new(1);

/// One served connection, as its requests see it (a request extension): whether it is serving an
/// authenticated request now, when it last carried one (0: never, a stranger's for all we know),
/// and the signal that closes it to make way for another.
#[derive(Debug, Default)]
struct ConnectionState {
    authenticated_in_flight: AtomicUsize,
    last_authenticated: AtomicU64,
    evict: CancellationToken,
}

impl ConnectionState {
    fn mark_authenticated(&self) {
        let now = AUTHENTICATED_REQUESTS.fetch_add(1, Ordering::SeqCst);
        self.last_authenticated.store(now, Ordering::SeqCst);
    }
}

/// The connection a request arrived on; the auth layer marks its authenticated requests with it.
#[derive(Debug, Clone)]
pub struct ConnectionHandle(Arc<ConnectionState>);

impl ConnectionHandle {
    /// Mark the connection as serving an authenticated request until the guard is dropped: it is
    /// not evicted meanwhile, and afterwards it is the owner's (see
    /// [`KEPT_IDLE_OWNER_CONNECTIONS`]).
    pub fn authenticated(&self) -> AuthenticatedRequest {
        self.0
            .authenticated_in_flight
            .fetch_add(1, Ordering::SeqCst);
        self.0.mark_authenticated();
        AuthenticatedRequest(self.0.clone())
    }
}

/// An authenticated request in flight on a connection (see [`ConnectionHandle::authenticated`]).
#[derive(Debug)]
pub struct AuthenticatedRequest(Arc<ConnectionState>);

impl Drop for AuthenticatedRequest {
    fn drop(&mut self) {
        // Its idle time starts now, not when the request came in.
        self.0.mark_authenticated();
        self.0
            .authenticated_in_flight
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// The connections being served, oldest first.
#[derive(Debug, Default)]
struct Connections {
    next_id: u64,
    by_age: BTreeMap<u64, Arc<ConnectionState>>,
}

impl Connections {
    fn insert(&mut self, state: Arc<ConnectionState>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.by_age.insert(id, state);
        id
    }

    /// Close one connection to make way for a new one: the oldest that never carried an
    /// authenticated request (silent, a half-sent head, an anonymous request: whoever holds
    /// slots without credentials cannot keep the owner out, nor push the owner's idle keep-alive
    /// connection out), else the least recently used idle connection of the owner's beyond the
    /// `kept` most recent ([`KEPT_IDLE_OWNER_CONNECTIONS`], at most a quarter of the slots). A connection serving an authenticated
    /// request is never closed. False when nothing may make way.
    fn evict_for_new(&mut self, kept: usize) -> bool {
        let live = || {
            self.by_age
                .values()
                .filter(|state| !state.evict.is_cancelled())
        };
        let victim = live()
            .find(|state| state.last_authenticated.load(Ordering::SeqCst) == 0)
            .or_else(|| {
                let mut idle_owner: Vec<&Arc<ConnectionState>> = live()
                    .filter(|state| state.authenticated_in_flight.load(Ordering::SeqCst) == 0)
                    .collect();
                if idle_owner.len() <= kept {
                    return None;
                }
                idle_owner.sort_by_key(|state| state.last_authenticated.load(Ordering::SeqCst));
                idle_owner.first().copied()
            });
        match victim {
            Some(state) => {
                state.evict.cancel();
                true
            }
            None => false,
        }
    }
}

fn lock(connections: &Mutex<Connections>) -> std::sync::MutexGuard<'_, Connections> {
    connections
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Serve `app` on `listener` until `shutdown`, then stop gracefully within `drain_bound`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
    drain_bound: Duration,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // A quarter of the slots at most (review: with few slots, idle owner connections beyond
    // it must still make way).
    let kept = KEPT_IDLE_OWNER_CONNECTIONS.min(limits.max_connections / 4);
    let overflow = Arc::new(Semaphore::new(OVERFLOW_ANSWERS));
    let connections = Arc::new(Mutex::new(Connections::default()));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    loop {
        let (tcp, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accepting a connection: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Small SSE events must not wait for delayed ACKs (Nagle).
        let _ = tcp.set_nodelay(true);
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) if lock(&connections).evict_for_new(kept) => {
                match tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned()).await {
                    Ok(Ok(slot)) => slot,
                    _ => {
                        answer_overflow(tcp, &overflow);
                        continue;
                    }
                }
            }
            Err(_) => {
                answer_overflow(tcp, &overflow);
                continue;
            }
        };
        let state = Arc::new(ConnectionState::default());
        let id = lock(&connections).insert(state.clone());
        let handle = ConnectionHandle(state.clone());
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            app.clone(),
            move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(handle.clone());
                req
            },
        ));
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(tcp), service));
        let connections = connections.clone();
        tokio::spawn(async move {
            // Errors here are clients going away or timing out: nothing to report. An evicted
            // connection is dropped, which closes it.
            tokio::select! {
                _ = connection => {}
                () = state.evict.cancelled() => {}
            }
            lock(&connections).by_age.remove(&id);
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(drain_bound) => {
            tracing::warn!("HTTP connections still open after {drain_bound:?}; closing them");
        }
    }
    Ok(())
}

/// Tell a client over the connection cap so (503, `Retry-After`), within a small bound, or just
/// close its connection when too many are already being told.
fn answer_overflow(tcp: tokio::net::TcpStream, overflow: &Arc<Semaphore>) {
    let Ok(permit) = overflow.clone().try_acquire_owned() else {
        drop(tcp);
        return;
    };
    tokio::spawn(async move {
        let service = hyper::service::service_fn(|_req| async {
            let body =
                r#"{"error":"busy","error_description":"too many connections; retry shortly"}"#;
            http::Response::builder()
                .status(http::StatusCode::SERVICE_UNAVAILABLE)
                .header(http::header::RETRY_AFTER, "1")
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::CONNECTION, "close")
                .body(http_body_util::Full::new(bytes::Bytes::from_static(
                    body.as_bytes(),
                )))
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(OVERFLOW_ANSWER_BOUND)
            .keep_alive(false);
        let connection = builder.serve_connection(TokioIo::new(tcp), service);
        let _ = tokio::time::timeout(OVERFLOW_ANSWER_BOUND, connection).await;
        drop(permit);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connections(n: usize) -> (Connections, Vec<Arc<ConnectionState>>) {
        let mut connections = Connections::default();
        let states: Vec<Arc<ConnectionState>> = (0..n)
            .map(|_| Arc::new(ConnectionState::default()))
            .collect();
        for state in &states {
            connections.insert(state.clone());
        }
        (connections, states)
    }

    /// RT29 B4: the owner's idle keep-alive connection is older than the strangers' but is not
    /// the one that makes way; a request in flight is never closed.
    #[test]
    fn connections_that_never_authenticated_make_way_before_the_owners_idle_one() {
        let (mut connections, states) = connections(4);
        // The owner's: one idle after a request, one serving a request now.
        drop(ConnectionHandle(states[0].clone()).authenticated());
        let serving = ConnectionHandle(states[1].clone()).authenticated();
        assert!(connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
        assert!(states[2].evict.is_cancelled(), "the oldest stranger first");
        assert!(connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
        assert!(states[3].evict.is_cancelled());
        // Only the owner's are left, within the kept number: nothing makes way.
        assert!(!connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
        assert!(!states[0].evict.is_cancelled() && !states[1].evict.is_cancelled());
        drop(serving);
        assert!(!connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
    }

    /// The owner's idle connections are kept up to a bound: beyond it the least recently used
    /// make way (never one serving a request).
    #[test]
    fn the_owners_idle_connections_beyond_the_kept_number_make_way_least_recent_first() {
        let n = KEPT_IDLE_OWNER_CONNECTIONS + 2;
        let (mut connections, states) = connections(n);
        // Used newest-first, so the oldest connections are the most recently used.
        for state in states.iter().rev() {
            drop(ConnectionHandle(state.clone()).authenticated());
        }
        let serving = ConnectionHandle(states[n - 1].clone()).authenticated();
        assert!(connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
        assert!(
            states[n - 2].evict.is_cancelled(),
            "the least recently used idle one"
        );
        assert!(!states[n - 1].evict.is_cancelled(), "it serves a request");
        // The kept number of idle ones is left.
        assert!(!connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
        // The request ends: its connection is now the most recently used idle one.
        drop(serving);
        assert!(connections.evict_for_new(KEPT_IDLE_OWNER_CONNECTIONS));
        assert!(states[n - 3].evict.is_cancelled());
        assert!(!states[n - 1].evict.is_cancelled());
    }
}
