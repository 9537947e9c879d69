//! `/metrics`, `/healthz` and `/readyz`: a minimal HTTP/1.1 server on tokio, enough for a
//! Prometheus scrape and the kubelet's probes, with no HTTP framework.
//!
//! One request per connection: the server reads the request head (at most [`MAX_HEAD`] bytes
//! within [`HEAD_TIMEOUT`]), answers with `Connection: close` and closes. Only `GET` and
//! `HEAD` are served; a request body is never read. Each connection runs in its own task, at
//! most [`MAX_CONNECTIONS`] at a time (further clients wait in the listen backlog).
//!
//! | path | answer |
//! |---|---|
//! | `/metrics` | 200, [`Metrics::render`] as `text/plain; version=0.0.4; charset=utf-8` |
//! | `/healthz` | 200 `ok` while [`Health`] is alive, else 503 |
//! | `/readyz` | 200 `ok` once [`Health::set_ready`] said so, else 503 |
//! | other | 404; a method other than `GET` or `HEAD`: 405 |

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;

/// How long after the last [`Health::mark_alive`] `/healthz` still answers 200, by default.
///
/// The sync loop marks itself alive before every pass and every wait, so the longest quiet
/// time is one pass: with the CVO's default interval (2 to 4 minutes) a pass may run up to
/// twice the interval, 8 minutes. A longer interval or pass timeout needs a longer window
/// ([`Health::with_liveness_window`]), or the kubelet restarts a busy operator.
pub const DEFAULT_LIVENESS_WINDOW: Duration = Duration::from_secs(10 * 60);
/// The largest request head read (request line and headers); a larger one is answered 431.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head; a slower one is disconnected.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long writing a response may take.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The `Content-Type` of `/metrics`: the Prometheus text format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Liveness and readiness, as `/healthz` and `/readyz` report them.
///
/// Alive: [`Health::mark_alive`] was called within the liveness window (by default
/// [`DEFAULT_LIVENESS_WINDOW`]); until the first call, the window counts from creation, so a
/// process that is still connecting is not restarted. Ready: the last [`Health::set_ready`]
/// said `true` (a leader or a standby candidate; not yet while starting).
#[derive(Debug)]
pub struct Health {
    window: Duration,
    last_alive: Mutex<Instant>,
    ready: AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

impl Health {
    /// Alive for [`DEFAULT_LIVENESS_WINDOW`] from now, not ready.
    #[must_use]
    pub fn new() -> Self {
        Self::with_liveness_window(DEFAULT_LIVENESS_WINDOW)
    }

    /// Alive for `window` after each [`Health::mark_alive`] (and from now), not ready.
    #[must_use]
    pub fn with_liveness_window(window: Duration) -> Self {
        Health {
            window,
            last_alive: Mutex::new(Instant::now()),
            ready: AtomicBool::new(false),
        }
    }

    /// Records that the operator made progress now.
    pub fn mark_alive(&self) {
        *self
            .last_alive
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Sets readiness.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Whether [`Health::mark_alive`] (or the creation) was less than the window ago.
    #[must_use]
    pub fn is_alive(&self) -> bool {
        self.last_alive
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
            < self.window
    }

    /// Whether the last [`Health::set_ready`] said `true`.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The time since the last sign of life.
    fn quiet_for(&self) -> Duration {
        self.last_alive
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }
}

/// The limits of one server (the constants, shorter in tests).
#[derive(Debug, Clone, Copy)]
struct Limits {
    head_timeout: Duration,
    write_timeout: Duration,
    max_head: usize,
    max_connections: usize,
}

const LIMITS: Limits = Limits {
    head_timeout: HEAD_TIMEOUT,
    write_timeout: WRITE_TIMEOUT,
    max_head: MAX_HEAD,
    max_connections: MAX_CONNECTIONS,
};

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until `cancel` fires; then stops
/// accepting, drops the connections in flight and returns `Ok`.
///
/// An error accepting one connection (the client gave up, too many open files) is logged and
/// the server goes on, pausing briefly when the process is out of resources.
///
/// # Errors
/// Only when the listener itself is unusable (accept fails with `InvalidInput`).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    cancel: CancellationToken,
) -> io::Result<()> {
    serve_with(listener, metrics, health, cancel, LIMITS).await
}

async fn serve_with(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    cancel: CancellationToken,
    limits: Limits,
) -> io::Result<()> {
    // Dropped on return: the connections still in flight are aborted.
    let mut connections = JoinSet::new();
    loop {
        // At the limit, wait for a connection to end before accepting another.
        while connections.len() >= limits.max_connections {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                _ = connections.join_next() => {}
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let (metrics, health) = (metrics.clone(), health.clone());
                    connections.spawn(async move {
                        if let Err(e) = handle(stream, &metrics, &health, limits).await {
                            tracing::debug!("http connection from {peer}: {e}");
                        }
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => return Err(e),
                Err(e) if is_connection_error(&e) => tracing::debug!("http accept: {e}"),
                Err(e) => {
                    // Out of file descriptors or memory: give the process a moment.
                    tracing::warn!("http accept: {e}");
                    tokio::select! {
                        () = cancel.cancelled() => return Ok(()),
                        () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                }
            },
        }
    }
}

/// An accept error that concerns one client only.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// A response: status, content type, body.
struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    /// Extra header lines, each ending in CRLF.
    extra: &'static str,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            extra: "",
        }
    }
}

/// Reads one request head, answers it and closes.
async fn handle(
    mut stream: TcpStream,
    metrics: &Metrics,
    health: &Health,
    limits: Limits,
) -> io::Result<()> {
    let (response, is_head) =
        match timeout(limits.head_timeout, read_head(&mut stream, limits.max_head)).await {
            Err(_) => (
                Response::text(408, "request head not received in time\n"),
                false,
            ),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Head::Closed)) => return Ok(()),
            Ok(Ok(Head::TooLarge)) => (Response::text(431, "request head too large\n"), false),
            Ok(Ok(Head::Complete(head))) => match parse_request_line(&head) {
                Ok((method, path)) => (route(method, path, metrics, health), method == "HEAD"),
                Err(r) => (r, false),
            },
        };
    let bytes = encode(&response, is_head);
    timeout(limits.write_timeout, async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "writing the response"))??;
    // Read what the client may still send (a body we did not read) until it closes, briefly:
    // closing a socket with unread data resets the connection, and the client could lose the
    // response.
    let mut sink = [0u8; 1024];
    let _ = timeout(Duration::from_secs(1), async {
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
    Ok(())
}

/// What reading a request head gave.
enum Head {
    /// The request line and headers (without the blank line).
    Complete(Vec<u8>),
    /// Longer than the limit without an end.
    TooLarge,
    /// The client closed before sending a whole head.
    Closed,
}

/// Reads until the blank line that ends the head (CRLF CRLF, or a bare LF LF).
async fn read_head(stream: &mut TcpStream, max: usize) -> io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        let searched = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf, searched) {
            if end > max {
                return Ok(Head::TooLarge);
            }
            buf.truncate(end);
            return Ok(Head::Complete(buf));
        }
        if buf.len() > max {
            return Ok(Head::TooLarge);
        }
    }
}

/// Where the head ends in `buf` (the blank line's start), searching from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find(|&i| buf[i..].starts_with(b"\r\n\r\n") || buf[i..].starts_with(b"\n\n"))
}

/// The method and path (without the query) of the request line, or the error response.
fn parse_request_line(head: &[u8]) -> Result<(&str, &str), Response> {
    let line_end = head.iter().position(|b| *b == b'\n').unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end])
        .map_err(|_| Response::text(400, "bad request\n"))?
        .trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Response::text(400, "bad request\n"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Response::text(400, "bad request\n"));
    }
    if !version.starts_with("HTTP/1.") {
        return Err(Response::text(505, "HTTP/1.x only\n"));
    }
    // The absolute form (`http://host/path`) names the path after the authority.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    Ok((method, path))
}

/// The answer to `method` on `path`.
fn route(method: &str, path: &str, metrics: &Metrics, health: &Health) -> Response {
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
        return Response::text(404, "not found\n");
    }
    if method != "GET" && method != "HEAD" {
        return Response {
            extra: "Allow: GET, HEAD\r\n",
            ..Response::text(405, "method not allowed\n")
        };
    }
    match path {
        "/metrics" => Response {
            content_type: METRICS_CONTENT_TYPE,
            ..Response::text(200, metrics.render())
        },
        "/healthz" if health.is_alive() => Response::text(200, "ok"),
        "/healthz" => Response::text(
            503,
            format!("no progress for {}s\n", health.quiet_for().as_secs()),
        ),
        _ if health.is_ready() => Response::text(200, "ok"),
        _ => Response::text(503, "not ready\n"),
    }
}

/// The response's bytes; a response to `HEAD` has the headers only.
fn encode(r: &Response, head: bool) -> Vec<u8> {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len(),
        r.extra
    )
    .into_bytes();
    if !head {
        out.extend_from_slice(r.body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests;
