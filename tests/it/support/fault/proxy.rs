//! A fault-injecting HTTPS proxy between minicvo and a kube-apiserver.
//!
//! It terminates TLS with the test plane's own serving certificate (issued for 127.0.0.1 by the
//! plane's CA), so minicvo verifies it exactly as it verifies the real server, and forwards
//! every request over a fresh TLS client to the real kube-apiserver, which the proxy trusts by
//! the same CA. Bearer tokens pass through untouched.
//!
//! Per request, a seeded random draw picks at most one fault from the current [`FaultMix`]:
//!
//! | fault | what the client sees | did the server see it |
//! |---|---|---|
//! | `500` | `500 Internal Server Error` (a `Status` body) | no |
//! | `500 after` | `500`, although the request was applied | yes |
//! | `429` | `429 Too Many Requests`, `Retry-After: 1` | no |
//! | reset | the connection closes without a response | no |
//! | reset after | the connection closes without a response | yes |
//! | slow | the response, after a delay | yes |
//!
//! A request that failed [`MAX_FAULT_STREAK`] times in a row (the same method, path and query)
//! is passed through the next time: the faults stay transient, so a client that retries
//! enough converges; without the cap, six failures in a row of one request (about one run in a
//! hundred of the fault-mix test at these rates) exhaust minicvo's retries.
//!
//! Watches (`watch=true`) may also be dropped: the response stream ends, cleanly or with a
//! broken connection, after a random time. Every request and every fault is counted in
//! [`Stats`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, RootCertStore};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = BoxBody<Bytes, BoxError>;
type Upstream = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Probabilities of each fault, per request, and how slow and short-lived things get.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultMix {
    /// A name for reports.
    pub name: &'static str,
    /// 500 before forwarding.
    pub error_500: f64,
    /// Forward, then answer 500 instead of the real response.
    pub error_500_after: f64,
    /// 429 with `Retry-After: 1` before forwarding.
    pub throttle_429: f64,
    /// Close the connection before forwarding.
    pub reset: f64,
    /// Forward, then close the connection without answering.
    pub reset_after: f64,
    /// Delay the response by a random time in `slow_delay`.
    pub slow: f64,
    /// How slow a slow response is.
    pub slow_delay: Range<Duration>,
    /// Probability that a watch is dropped, after a random time in `watch_life`.
    pub drop_watch: f64,
    /// How long a dropped watch lives.
    pub watch_life: Range<Duration>,
    /// Seed of the random draws.
    pub seed: u64,
}

impl FaultMix {
    /// No faults: a transparent proxy.
    pub fn none() -> Self {
        FaultMix {
            name: "none",
            error_500: 0.0,
            error_500_after: 0.0,
            throttle_429: 0.0,
            reset: 0.0,
            reset_after: 0.0,
            slow: 0.0,
            slow_delay: Duration::from_millis(200)..Duration::from_millis(1500),
            drop_watch: 0.0,
            watch_life: Duration::from_millis(200)..Duration::from_secs(3),
            seed: 1,
        }
    }
}

/// What the proxy saw and did.
#[derive(Debug, Default)]
pub struct Stats {
    /// TCP connections accepted.
    pub connections: AtomicU64,
    /// HTTP requests received.
    pub requests: AtomicU64,
    /// Requests forwarded to the API server.
    pub forwarded: AtomicU64,
    /// 500 before forwarding.
    pub error_500: AtomicU64,
    /// 500 after forwarding.
    pub error_500_after: AtomicU64,
    /// 429s.
    pub throttle_429: AtomicU64,
    /// Connections closed before forwarding.
    pub reset: AtomicU64,
    /// Connections closed after forwarding.
    pub reset_after: AtomicU64,
    /// Slow responses.
    pub slow: AtomicU64,
    /// Watches started.
    pub watches: AtomicU64,
    /// Watches dropped.
    pub watches_dropped: AtomicU64,
    /// Requests that could not be forwarded (API server down).
    pub upstream_errors: AtomicU64,
}

/// A snapshot of [`Stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Counts {
    pub connections: u64,
    pub requests: u64,
    pub forwarded: u64,
    pub error_500: u64,
    pub error_500_after: u64,
    pub throttle_429: u64,
    pub reset: u64,
    pub reset_after: u64,
    pub slow: u64,
    pub watches: u64,
    pub watches_dropped: u64,
    pub upstream_errors: u64,
}

impl Counts {
    /// Faults injected, all kinds together.
    pub fn faults(&self) -> u64 {
        self.error_500
            + self.error_500_after
            + self.throttle_429
            + self.reset
            + self.reset_after
            + self.slow
            + self.watches_dropped
    }

    /// The faults as `500:3 500-after:2 ...`, leaving out zeros.
    pub fn faults_line(&self) -> String {
        let parts: Vec<String> = [
            ("500", self.error_500),
            ("500-after", self.error_500_after),
            ("429", self.throttle_429),
            ("reset", self.reset),
            ("reset-after", self.reset_after),
            ("slow", self.slow),
            ("watch-drop", self.watches_dropped),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}:{n}"))
        .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(" ")
        }
    }

    /// `self - before`, field by field.
    pub fn since(&self, before: &Counts) -> Counts {
        Counts {
            connections: self.connections - before.connections,
            requests: self.requests - before.requests,
            forwarded: self.forwarded - before.forwarded,
            error_500: self.error_500 - before.error_500,
            error_500_after: self.error_500_after - before.error_500_after,
            throttle_429: self.throttle_429 - before.throttle_429,
            reset: self.reset - before.reset,
            reset_after: self.reset_after - before.reset_after,
            slow: self.slow - before.slow,
            watches: self.watches - before.watches,
            watches_dropped: self.watches_dropped - before.watches_dropped,
            upstream_errors: self.upstream_errors - before.upstream_errors,
        }
    }
}

impl Stats {
    /// A snapshot.
    pub fn counts(&self) -> Counts {
        let g = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Counts {
            connections: g(&self.connections),
            requests: g(&self.requests),
            forwarded: g(&self.forwarded),
            error_500: g(&self.error_500),
            error_500_after: g(&self.error_500_after),
            throttle_429: g(&self.throttle_429),
            reset: g(&self.reset),
            reset_after: g(&self.reset_after),
            slow: g(&self.slow),
            watches: g(&self.watches),
            watches_dropped: g(&self.watches_dropped),
            upstream_errors: g(&self.upstream_errors),
        }
    }
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::SeqCst);
}

/// What a request hook wants done with the request it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookAction {
    /// Go on (faults from the mix still apply).
    Continue,
    /// Close the connection without forwarding.
    Drop,
}

/// Called for every request with its number (from 1), method and path, before any fault.
pub type Hook = Box<dyn FnMut(u64, &http::Method, &str) -> HookAction + Send>;

struct Shared {
    upstream: Upstream,
    upstream_base: String,
    mix: Mutex<(FaultMix, StdRng)>,
    hook: Mutex<Option<Hook>>,
    stats: Arc<Stats>,
    /// Failures in a row, by `METHOD path?query`.
    streaks: Mutex<HashMap<String, u32>>,
}

/// How many times in a row one request may fail before it is passed through once.
pub const MAX_FAULT_STREAK: u32 = 3;

/// A running proxy. It stops when dropped.
pub struct FaultProxy {
    /// Where it listens (`https://{addr}`).
    pub addr: SocketAddr,
    /// Its counters.
    pub stats: Arc<Stats>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One fault decision.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    Error500,
    Error500After,
    Throttle,
    Reset,
    ResetAfter,
    Slow(Duration),
}

impl FaultProxy {
    /// Starts a proxy on 127.0.0.1 (a free port) in front of `upstream` (e.g.
    /// `https://127.0.0.1:6443`), serving `cert`/`key` and trusting `ca` for the upstream.
    ///
    /// # Panics
    /// If the certificates cannot be read or the port cannot be bound.
    pub async fn start(upstream: &str, ca: &Path, cert: &Path, key: &Path, mix: FaultMix) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("serving cert")
            .collect::<Result<_, _>>()
            .expect("serving cert parses");
        let key = PrivateKeyDer::from_pem_file(key).expect("serving key");
        let mut server = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server TLS config");
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(server));

        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).expect("CA") {
            roots.add(c.expect("CA parses")).expect("CA added");
        }
        let client_tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(client_tls)
            .https_only()
            .enable_http1()
            .build();
        let upstream_client: Upstream = Client::builder(TokioExecutor::new()).build(connector);

        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let seed = mix.seed;
        let shared = Arc::new(Shared {
            upstream: upstream_client,
            upstream_base: upstream.trim_end_matches('/').to_string(),
            mix: Mutex::new((mix, StdRng::seed_from_u64(seed))),
            hook: Mutex::new(None),
            stats: stats.clone(),
            streaks: Mutex::new(HashMap::new()),
        });
        let accept_shared = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                bump(&accept_shared.stats.connections);
                let acceptor = acceptor.clone();
                let shared = accept_shared.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move { handle(shared, req).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        FaultProxy {
            addr,
            stats,
            shared,
            task,
        }
    }

    /// Replaces the fault mix (and reseeds).
    pub fn set_mix(&self, mix: FaultMix) {
        let seed = mix.seed;
        *self.shared.mix.lock().unwrap() = (mix, StdRng::seed_from_u64(seed));
    }

    /// Sets (or clears) the request hook.
    pub fn set_hook(&self, hook: Option<Hook>) {
        *self.shared.hook.lock().unwrap() = hook;
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }
}

/// The reason a connection is dropped without an answer (hyper then closes it).
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by the fault proxy")
    }
}

impl std::error::Error for Dropped {}

/// `fault`, or no fault when the request already failed [`MAX_FAULT_STREAK`] times in a row.
fn cap_streak(shared: &Shared, req: &Request<Incoming>, fault: Fault) -> Fault {
    let fails = matches!(
        fault,
        Fault::Error500 | Fault::Error500After | Fault::Throttle | Fault::Reset | Fault::ResetAfter
    );
    let key = format!(
        "{} {}",
        req.method(),
        req.uri().path_and_query().map_or("/", |p| p.as_str())
    );
    let mut streaks = shared.streaks.lock().unwrap();
    if !fails {
        streaks.remove(&key);
        return fault;
    }
    let n = streaks.entry(key.clone()).or_insert(0);
    if *n >= MAX_FAULT_STREAK {
        streaks.remove(&key);
        return Fault::None;
    }
    *n += 1;
    fault
}

fn is_watch(req: &Request<Incoming>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    })
    .to_string();
    let mut r = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for h in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::HOST,
    ] {
        headers.remove(h);
    }
    headers.remove("keep-alive");
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Dropped> {
    let stats = &shared.stats;
    let number = stats.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(hook) = shared.hook.lock().unwrap().as_mut() {
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
        if hook(number, req.method(), path) == HookAction::Drop {
            return Err(Dropped);
        }
    }
    let watch = is_watch(&req);
    let (fault, watch_drop) = {
        let mut guard = shared.mix.lock().unwrap();
        let (mix, rng) = &mut *guard;
        let x: f64 = rng.random();
        let mut edge = 0.0;
        let mut pick = Fault::None;
        for (p, f) in [
            (mix.error_500, Fault::Error500),
            (mix.error_500_after, Fault::Error500After),
            (mix.throttle_429, Fault::Throttle),
            (mix.reset, Fault::Reset),
            (mix.reset_after, Fault::ResetAfter),
            (mix.slow, Fault::Slow(Duration::ZERO)),
        ] {
            edge += p;
            if x < edge {
                pick = f;
                break;
            }
        }
        if pick == Fault::Slow(Duration::ZERO) {
            pick = Fault::Slow(rng.random_range(mix.slow_delay.clone()));
        }
        // Watches are long polls: a fault after forwarding would only delay them; faults
        // before forwarding and drops apply.
        if watch
            && matches!(
                pick,
                Fault::Error500After | Fault::ResetAfter | Fault::Slow(_)
            )
        {
            pick = Fault::None;
        }
        let drop = (watch && rng.random::<f64>() < mix.drop_watch)
            .then(|| rng.random_range(mix.watch_life.clone()));
        (pick, drop)
    };
    let fault = cap_streak(&shared, &req, fault);
    match fault {
        Fault::Error500 => {
            bump(&stats.error_500);
            return Ok(status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "fault proxy: injected 500",
            ));
        }
        Fault::Throttle => {
            bump(&stats.throttle_429);
            let mut r = status(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManyRequests",
                "fault proxy: injected 429",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return Ok(r);
        }
        Fault::Reset => {
            bump(&stats.reset);
            return Err(Dropped);
        }
        _ => {}
    }

    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(Dropped),
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    let uri: http::Uri = format!("{}{path}", shared.upstream_base)
        .parse()
        .expect("upstream uri");
    let mut up = Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(Full::new(body))
        .expect("request");
    *up.headers_mut() = parts.headers;
    strip_hop_by_hop(up.headers_mut());
    bump(&stats.forwarded);
    if watch {
        bump(&stats.watches);
    }
    let response = match shared.upstream.request(up).await {
        Ok(r) => r,
        Err(_) => {
            // The API server is down (e.g. restarted by a test): the client sees what it would
            // see without the proxy, a failed connection.
            bump(&stats.upstream_errors);
            return Err(Dropped);
        }
    };
    match fault {
        Fault::Error500After => {
            bump(&stats.error_500_after);
            let _ = response.into_body().collect().await;
            return Ok(status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "fault proxy: injected 500 after the request was applied",
            ));
        }
        Fault::ResetAfter => {
            bump(&stats.reset_after);
            let _ = response.into_body().collect().await;
            return Err(Dropped);
        }
        Fault::Slow(d) => {
            bump(&stats.slow);
            tokio::time::sleep(d).await;
        }
        _ => {}
    }
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let body: ProxyBody = match watch_drop {
        None => body.map_err(BoxError::from).boxed(),
        Some(life) => {
            bump(&stats.watches_dropped);
            let clean_end = life.as_millis() % 2 == 0;
            let deadline = tokio::time::sleep(life);
            let frames = http_body_util::BodyStream::new(body)
                .map(|f| f.map_err(BoxError::from))
                .take_until(deadline);
            let tail = futures::stream::once(async move {
                if clean_end {
                    None
                } else {
                    Some(Err::<Frame<Bytes>, BoxError>(Box::new(Dropped)))
                }
            })
            .filter_map(|x| async move { x });
            BodyExt::boxed(StreamBody::new(frames.chain(tail)))
        }
    };
    Ok(Response::from_parts(parts, body))
}
