//! The HTTP/1.1 server under the MCP app: accepts loopback (or tunnel) connections up to a cap,
//! bounds how long a client may take to send a request head (which also ends idle keep-alive
//! connections), and stops gracefully: no new connections, requests in flight finish (bounded),
//! idle connections close.

use std::sync::Arc;
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            answer_overflow(tcp, &overflow);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            // Errors here are clients going away or timing out: nothing to report.
            let _ = connection.await;
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
