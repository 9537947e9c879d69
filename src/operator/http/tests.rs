//! Unit tests of the HTTP server: real sockets on 127.0.0.1, plain and TLS, and a raw HTTP/1.1
//! client, so what is checked is what a scraper or the kubelet gets. The API server is not
//! needed: every request here is decided before a review (the cluster tests in
//! `tests/it/operator/metrics_access.rs` do the reviews). The TLS tests are in `tests/tls.rs`.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::JoinHandle;

use super::*;

/// A server on an ephemeral port.
pub(super) struct Server {
    pub(super) addr: SocketAddr,
    pub(super) metrics: Arc<Metrics>,
    pub(super) health: Arc<Health>,
    pub(super) cancel: CancellationToken,
    pub(super) task: JoinHandle<io::Result<()>>,
}

pub(super) async fn start_with(health: Health, transport: Transport) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (metrics, health, cancel) = (
        Arc::new(Metrics::new()),
        Arc::new(health),
        CancellationToken::new(),
    );
    let task = tokio::spawn(serve(
        listener,
        metrics.clone(),
        health.clone(),
        transport,
        cancel.clone(),
    ));
    Server {
        addr,
        metrics,
        health,
        cancel,
        task,
    }
}

async fn start() -> Server {
    start_with(Health::new(), Transport::PlainHttp).await
}

/// A parsed response: status, headers (names lowercased), body.
#[derive(Debug)]
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `raw` on a plain connection, reads until the server closes, and parses the response.
async fn send(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(raw).await.expect("write");
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("the server closes the connection")
        .expect("read");
    parse(&bytes)
}

pub(super) fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8(bytes.to_vec()).expect("utf-8");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head end in {text:?}"));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("a status line");
    let mut parts = status_line.splitn(3, ' ');
    assert!(
        parts.next().is_some_and(|v| v.starts_with("HTTP/1.")),
        "{status_line}"
    );
    let status = parts.next().and_then(|s| s.parse().ok()).expect("a status");
    let headers = lines
        .map(|l| {
            let (n, v) = l
                .split_once(": ")
                .unwrap_or_else(|| panic!("bad header {l:?}"));
            (n.to_ascii_lowercase(), v.to_string())
        })
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

pub(super) fn request(method: &str, path: &str, extra: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n")
}

async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(addr, request("GET", path, "").as_bytes()).await
}

#[tokio::test]
async fn metrics_are_served_in_the_text_format() {
    let s = start().await;
    s.metrics
        .set_cluster_version("completed", "4.2.0", "img", "4.1.0", 1_700_000_000.0);
    s.metrics.set_leader(true);
    let r = get(s.addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    assert_eq!(r.body, s.metrics.render());
    assert!(r.body.contains("minicvo_leader 1\n"), "{}", r.body);
    let scrape =
        prometheus_parse::Scrape::parse(r.body.lines().map(|l| Ok(l.to_string()))).expect("parses");
    assert!(scrape.samples.iter().any(|x| x.metric == "cluster_version"));
}

#[tokio::test]
async fn a_query_string_and_http_1_0_are_accepted() {
    let s = start().await;
    let r = send(s.addr, b"GET /metrics?debug=1 HTTP/1.0\r\n\r\n").await;
    assert_eq!(r.status, 200, "{r:?}");
}

#[tokio::test]
async fn a_kept_alive_connection_serves_several_requests() {
    let s = start().await;
    s.health.set_ready(true);
    let mut stream = TcpStream::connect(s.addr).await.expect("connect");
    let raw = format!(
        "{}{}",
        "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n",
        request("GET", "/healthz", "")
    );
    stream.write_all(raw.as_bytes()).await.expect("write");
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("closed after the second")
        .expect("read");
    let text = String::from_utf8(bytes).expect("utf-8");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
}

#[tokio::test]
async fn head_answers_the_headers_without_the_body() {
    let s = start().await;
    s.metrics.set_requests(42);
    let r = send(s.addr, request("HEAD", "/metrics", "").as_bytes()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "");
    assert_eq!(
        r.header("content-length"),
        Some(s.metrics.render().len().to_string().as_str())
    );
}

#[tokio::test]
async fn healthz_answers_503_once_the_operator_is_quiet_for_the_window() {
    let s = start().await;
    let r = get(s.addr, "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    // A window of zero: never alive.
    let quiet = start_with(
        Health::with_liveness_window(Duration::ZERO),
        Transport::PlainHttp,
    )
    .await;
    quiet.health.mark_alive();
    let r = get(quiet.addr, "/healthz").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.starts_with("no progress for "), "{r:?}");
}

#[tokio::test]
async fn readyz_follows_set_ready() {
    let s = start().await;
    assert_eq!(get(s.addr, "/readyz").await.status, 503);
    s.health.set_ready(true);
    let r = get(s.addr, "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    s.health.set_ready(false);
    assert_eq!(get(s.addr, "/readyz").await.status, 503);
}

#[tokio::test]
async fn unknown_paths_are_404_and_other_methods_405() {
    let s = start().await;
    for path in ["/", "/metrics/", "/metricsx", "/healthz/extra"] {
        assert_eq!(get(s.addr, path).await.status, 404, "{path}");
    }
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let r = send(s.addr, request(method, "/metrics", "").as_bytes()).await;
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{method}");
    }
}

#[tokio::test]
async fn malformed_requests_are_400() {
    let s = start().await;
    for raw in [
        &b"garbage\r\n\r\n"[..],
        b"GET /metrics HTTP/1.1 extra\r\n\r\n",
    ] {
        let r = send(s.addr, raw).await;
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[tokio::test]
async fn an_oversized_head_is_431() {
    let s = start().await;
    let big = format!("X-Big: {}\r\n", "a".repeat(MAX_HEADER_SIZE));
    let r = send(s.addr, request("GET", "/metrics", &big).as_bytes()).await;
    assert_eq!(r.status, 431);
    // A ServiceAccount token's worth of header: served.
    let token = format!("Authorization: Bearer {}\r\n", "a".repeat(2048));
    assert_eq!(
        send(s.addr, request("GET", "/healthz", &token).as_bytes())
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_client_that_closes_at_once_gets_nothing_and_the_server_goes_on() {
    let s = start().await;
    drop(TcpStream::connect(s.addr).await.expect("connect"));
    let mut half = TcpStream::connect(s.addr).await.expect("connect");
    half.write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .expect("write");
    drop(half);
    assert_eq!(get(s.addr, "/healthz").await.status, 200);
}

#[tokio::test]
async fn serve_returns_when_cancelled_even_with_a_connection_open() {
    let s = start().await;
    let idle = TcpStream::connect(s.addr).await.expect("connect");
    assert_eq!(get(s.addr, "/readyz").await.status, 503);
    s.cancel.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(5), s.task).await;
    ended
        .expect("returns promptly")
        .expect("no panic")
        .expect("Ok");
    drop(idle);
    assert!(
        TcpStream::connect(s.addr).await.is_err(),
        "the listener is closed once serve returns"
    );
}

#[tokio::test(start_paused = true)]
async fn liveness_lasts_the_window_after_each_mark() {
    let h = Health::with_liveness_window(Duration::from_secs(60));
    assert!(h.is_alive(), "alive from creation");
    assert!(!h.is_ready(), "not ready until told");
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(h.is_alive());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(!h.is_alive(), "61 s quiet");
    h.mark_alive();
    assert!(h.is_alive());
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(!h.is_alive(), "the window is exclusive");
    assert_eq!(Health::default().window, DEFAULT_LIVENESS_WINDOW);
}

mod tls;
