//! `/metrics`, `/healthz` and `/readyz`: HTTP/1.1 served by hyper, over TLS (tokio-rustls) or,
//! only when asked for, plain HTTP.
//!
//! | path | answer |
//! |---|---|
//! | `/metrics` | 200, [`Metrics::render`] as `text/plain; version=0.0.4; charset=utf-8`, to a client that [`Access`] allows; 401 without an identity, 403 for a user not allowed to `get` `/metrics`, 500 when the API server cannot say |
//! | `/healthz` | 200 `ok` while [`Health`] is alive, else 503; no authentication |
//! | `/readyz` | 200 `ok` once [`Health::set_ready`] said so, else 503; no authentication |
//! | other | 404; a method other than `GET` or `HEAD`: 405 |
//!
//! Over TLS ([`Transport::Tls`]) the certificate is a [`ServingCert`] (files reloaded when they
//! change, or generated at start) and `/metrics` needs a client certificate of the client CA or
//! a bearer token, authorized by a SubjectAccessReview ([`access`]). The probes stay
//! unauthenticated, as the kube components' `/healthz` and `/readyz` are (the kubelet probes
//! without credentials). Over plain HTTP ([`Transport::PlainHttp`]) nothing is authenticated:
//! a token sent in clear text would be given away.
//!
//! Connections are kept alive; a client has [`HEADER_TIMEOUT`] for each request head (also while
//! idle between requests) and [`HANDSHAKE_TIMEOUT`] for the TLS handshake; a head larger than
//! [`MAX_HEADER_SIZE`] is answered 431. At most [`MAX_CONNECTIONS`] connections are served at
//! once (further clients wait in the listen backlog), each for at most [`CONNECTION_LIFETIME`].

pub mod access;
pub mod client_ca;
mod routes;
pub mod tls;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;

pub use self::access::{Access, Decision, UserInfo};
pub use self::client_ca::{ClientCa, ClientCaSource};
pub use self::tls::{ServingCert, TlsError};

/// How long after the last [`Health::mark_alive`] `/healthz` still answers 200, by default.
///
/// The sync loop marks itself alive before every pass and every wait, so the longest quiet
/// time is one pass: with the CVO's default interval (2 to 4 minutes) a pass may run up to
/// twice the interval, 8 minutes. A longer interval or pass timeout needs a longer window
/// ([`Health::with_liveness_window`]), or the kubelet restarts a busy operator.
pub const DEFAULT_LIVENESS_WINDOW: Duration = Duration::from_secs(10 * 60);
/// The largest request head read (request line and headers; a ServiceAccount token is about
/// 1 KiB); a larger one is answered 431.
pub const MAX_HEADER_SIZE: usize = 16 * 1024;
/// How long a client may take to send a request head, and stay idle between requests.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection is served at most (a client that stops reading cannot hold a
/// connection slot for ever).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The `Content-Type` of `/metrics`: the Prometheus text format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// How the server talks to its clients.
#[derive(Debug, Clone)]
pub enum Transport {
    /// HTTPS with this certificate; `/metrics` only for a client that `access` allows.
    Tls {
        /// The serving certificate.
        cert: Arc<ServingCert>,
        /// Who may read `/metrics`.
        access: Arc<Access>,
    },
    /// Plain HTTP without authentication: anyone who reaches the address reads `/metrics`.
    PlainHttp,
}

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

impl Transport {
    /// HTTPS with `cert` (its files read again every [`tls::RELOAD_INTERVAL`]) and `/metrics`
    /// for clients that `client` (the operator's connection) authenticates and authorizes,
    /// client certificates checked against `client_ca` (read again every
    /// [`client_ca::REFRESH_INTERVAL`]). The reloads stop when `cancel` fires.
    #[must_use]
    pub fn tls(
        client: kube::Client,
        cert: ServingCert,
        client_ca: ClientCa,
        cancel: &CancellationToken,
    ) -> Self {
        let cert = Arc::new(cert);
        cert.spawn_reload(tls::RELOAD_INTERVAL, cancel.clone());
        let ca = Arc::new(client_ca);
        ca.spawn_refresh(client.clone(), client_ca::REFRESH_INTERVAL, cancel.clone());
        Transport::Tls {
            cert,
            access: Arc::new(Access::new(client, ca)),
        }
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until `cancel` fires; then stops
/// accepting, drops the connections in flight and returns `Ok`.
///
/// An error accepting one connection (the client gave up, too many open files) is logged and
/// the server goes on, pausing briefly when the process is out of resources.
///
/// # Errors
/// The TLS settings could not be made ([`io::ErrorKind::InvalidInput`]), or the listener itself
/// is unusable (accept fails with `InvalidInput`).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    transport: Transport,
    cancel: CancellationToken,
) -> io::Result<()> {
    let (acceptor, access) = match &transport {
        Transport::Tls { cert, access } => {
            let config = cert
                .server_config()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            (Some(TlsAcceptor::from(config)), Some(access.clone()))
        }
        Transport::PlainHttp => (None, None),
    };
    let context = Arc::new(routes::Context {
        metrics,
        health,
        access,
    });
    // Dropped on return: the connections still in flight are aborted.
    let mut connections = JoinSet::new();
    loop {
        // At the limit, wait for a connection to end before accepting another.
        while connections.len() >= MAX_CONNECTIONS {
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
                    let (context, acceptor) = (context.clone(), acceptor.clone());
                    connections.spawn(async move {
                        let served = timeout(CONNECTION_LIFETIME, connection(stream, context, acceptor));
                        if let Ok(Err(e)) = served.await {
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

/// One connection: the TLS handshake if any, then HTTP/1.1 requests until the client closes.
async fn connection(
    stream: TcpStream,
    context: Arc<routes::Context>,
    acceptor: Option<TlsAcceptor>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Responses go out at once: without it, a response written in two pieces (the TLS records
    // of head and body) can wait for the client's delayed ACK, 40 ms.
    stream.set_nodelay(true)?;
    let Some(acceptor) = acceptor else {
        return requests(stream, context, None).await;
    };
    let tls = timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
        .await
        .map_err(|_| "tls handshake timed out")??;
    let chain: Option<Arc<[CertificateDer<'static>]>> =
        tls.get_ref().1.peer_certificates().map(Arc::from);
    requests(tls, context, chain).await
}

/// Serves the requests of one connection.
async fn requests<S>(
    io: S,
    context: Arc<routes::Context>,
    chain: Option<Arc<[CertificateDer<'static>]>>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let (context, chain) = (context.clone(), chain.clone());
        async move {
            Ok::<_, std::convert::Infallible>(
                routes::answer(&request, &context, chain.as_deref()).await,
            )
        }
    });
    http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_SIZE)
        .serve_connection(TokioIo::new(io), service)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests;
