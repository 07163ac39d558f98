//! The HTTP server: an accept loop of our own over hyper, so that no local user can make
//! the HTTP side take what the monitor needs. Every connection:
//!
//! - must deliver a complete request head within [`HEADER_READ_TIMEOUT`] of being opened
//!   or of its previous response: one deadline that is both the header-read timeout (slow
//!   headers) and the keep-alive idle timeout (idle connections);
//! - may send a request head of at most [`MAX_HEADER_BYTES`] (else 431);
//! - counts against a cap derived from the open-file limit ([`descriptors`]): at the cap a
//!   new connection closes the oldest idle one ([`registry`]).
//!
//! On shutdown the loop stops accepting, idle connections close, and requests in flight
//! finish (the caller bounds how long).

pub mod descriptors;
mod registry;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

use registry::{Registry, Slot};

/// Time a connection has to send a request head, from its opening or its previous
/// response.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (request line and headers).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Largest buffer of one connection.
const MAX_BUFFER_BYTES: usize = 32 * 1024;
/// Connections the kernel completes and queues before the agent accepts them: a burst
/// waits there instead of having its SYNs dropped (and retried a second later).
const BACKLOG: u32 = 1024;
/// Pause after a failed accept (out of descriptors, say) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The limits of the HTTP side.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections held at once.
    pub connections: usize,
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
}

/// Listens on `addr` with a backlog of [`BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Serves `app` on `listener` until `stop` turns true, then until every connection has
/// closed (idle ones at once, those answering a request when they have answered).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let registry = Registry::new(limits.connections);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(MAX_HEADER_BYTES)
        .max_buf_size(MAX_BUFFER_BYTES);
    let (mut warned_full, mut accept_failing) = (false, false);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and the like: the connection stays in the backlog meanwhile.
                    // Said once until an accept succeeds again.
                    if !accept_failing {
                        tracing::warn!("accepting connections: {e}; retrying every {ACCEPT_BACKOFF:?}");
                    }
                    accept_failing = true;
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        accept_failing = false;
        let slot = loop {
            match registry.admit() {
                Some((slot, evicted)) => {
                    if evicted && !warned_full {
                        tracing::warn!(
                            "{} HTTP connections open, the most the agent holds: closing \
                             the oldest idle one for each new one",
                            limits.connections
                        );
                    }
                    warned_full = evicted;
                    break Some(slot);
                }
                // Every connection is answering a request: wait for one to end.
                None => tokio::select! {
                    () = registry.freed() => {}
                    _ = stop.changed() => break None,
                },
            }
        };
        let Some(slot) = slot else { break };
        tokio::spawn(connection(
            stream,
            app.clone(),
            http.clone(),
            slot,
            stop.clone(),
        ));
    }
    drop(listener);
    while registry.len() > 0 {
        registry.freed().await;
    }
}

/// Serves one connection until it closes, is evicted, or the server stops.
async fn connection(
    stream: TcpStream,
    app: Router,
    http: http1::Builder,
    slot: Slot,
    mut stop: watch::Receiver<bool>,
) {
    let slot = Arc::new(slot);
    let request_slot = slot.clone();
    let service = hyper::service::service_fn(move |request| {
        let busy = request_slot.busy();
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await;
            drop(busy);
            response
        }
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let served = tokio::select! {
        served = conn.as_mut() => served,
        // Dropping the connection closes its socket.
        () = slot.evicted() => Ok(()),
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = served {
        tracing::debug!("HTTP connection: {e}");
    }
}
