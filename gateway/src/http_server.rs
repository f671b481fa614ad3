//! The HTTP/1.1 server under the MCP app: accepts loopback (or tunnel) connections up to a cap,
//! bounds how long a client may take to send a request head (which also ends idle keep-alive
//! connections), keeps the owner's way in when strangers fill every slot (the oldest connection
//! that is not serving an authenticated request makes way), and stops gracefully: no new
//! connections, requests in flight finish (bounded), idle connections close.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// One served connection, as its requests see it (a request extension): whether it is serving an
/// authenticated request now, and the signal that closes it to make way for another.
#[derive(Debug, Default)]
struct ConnectionState {
    authenticated_in_flight: AtomicUsize,
    evict: CancellationToken,
}

/// The connection a request arrived on; the auth layer marks its authenticated requests with it.
#[derive(Debug, Clone)]
pub struct ConnectionHandle(Arc<ConnectionState>);

impl ConnectionHandle {
    /// Mark the connection as serving an authenticated request until the guard is dropped: it is
    /// not evicted meanwhile.
    pub fn authenticated(&self) -> AuthenticatedRequest {
        self.0
            .authenticated_in_flight
            .fetch_add(1, Ordering::SeqCst);
        AuthenticatedRequest(self.0.clone())
    }
}

/// An authenticated request in flight on a connection (see [`ConnectionHandle::authenticated`]).
#[derive(Debug)]
pub struct AuthenticatedRequest(Arc<ConnectionState>);

impl Drop for AuthenticatedRequest {
    fn drop(&mut self) {
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

    /// Close the oldest connection that serves no authenticated request (silent, a half-sent
    /// head, idle keep-alive, an anonymous request): whoever holds slots without credentials
    /// cannot keep the owner out. False when every connection is serving the owner.
    fn evict_oldest_anonymous(&mut self) -> bool {
        let victim = self.by_age.iter().find(|(_, state)| {
            !state.evict.is_cancelled() && state.authenticated_in_flight.load(Ordering::SeqCst) == 0
        });
        match victim {
            Some((_, state)) => {
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
            Err(_) if lock(&connections).evict_oldest_anonymous() => {
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

    #[test]
    fn the_oldest_connection_serving_no_authenticated_request_makes_way() {
        let mut connections = Connections::default();
        let states: Vec<Arc<ConnectionState>> = (0..3)
            .map(|_| Arc::new(ConnectionState::default()))
            .collect();
        for state in &states {
            connections.insert(state.clone());
        }
        let owner = ConnectionHandle(states[0].clone()).authenticated();
        assert!(connections.evict_oldest_anonymous());
        assert!(
            !states[0].evict.is_cancelled(),
            "the owner's request is served"
        );
        assert!(states[1].evict.is_cancelled());
        assert!(connections.evict_oldest_anonymous());
        assert!(states[2].evict.is_cancelled());
        // Only the owner's connection is left: nothing to evict.
        assert!(!connections.evict_oldest_anonymous());
        drop(owner);
        assert!(connections.evict_oldest_anonymous());
        assert!(states[0].evict.is_cancelled());
    }
}
