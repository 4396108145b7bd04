//! Serving the router on a TCP listener with the connection limits a
//! public server needs and `axum::serve` leaves unset: a client must send
//! a request's headers within `header_read_timeout` (a connection that
//! sends nothing, or trickles its headers, is closed: no slow client holds
//! a connection for ever; an idle keep-alive connection is closed after the
//! same time), and the headers must fit `max_header_bytes` (larger is a 431
//! from hyper). A response body (an SSE stream) has no time limit. HTTP/1.1
//! only, as `baton serve` is reached directly or behind a proxy.
//!
//! Graceful shutdown: when `shutdown` resolves, no new connection is
//! accepted and the open ones finish their request in flight.

use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

/// The limits of each connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// The time a client has to send a request's headers
    /// (`BATON_HEADER_READ_TIMEOUT_SECONDS`).
    pub header_read_timeout: Duration,
    /// The largest request head (request line and headers) read
    /// (`BATON_MAX_HEADER_BYTES`; at least 8 KiB, hyper's floor).
    pub max_header_bytes: usize,
}

/// Defaults: 30 s to send the headers, 64 KiB of them.
pub const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = ConnectionLimits {
    header_read_timeout: Duration::from_secs(30),
    max_header_bytes: 64 * 1024,
};

/// hyper's smallest read buffer.
const SMALLEST_HEADER_BUFFER: usize = 8 * 1024;

impl Default for ConnectionLimits {
    fn default() -> Self {
        DEFAULT_CONNECTION_LIMITS
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, each connection
/// under `limits`. An accept error (too many open files, say) is logged and
/// the loop goes on after a short pause.
pub async fn serve_with_limits(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, _peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // The router takes axum's body; hyper hands it `Incoming`.
        let service =
            TowerToHyperService::new(app.clone().map_request(
                |request: hyper::Request<Incoming>| request.map(axum::body::Body::new),
            ));
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_buf_size(limits.max_header_bytes.max(SMALLEST_HEADER_BUFFER));
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "a connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
