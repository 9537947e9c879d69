//! Unit tests of the HTTP server: real sockets on 127.0.0.1 and a raw client, so what is
//! checked is the bytes a scraper or the kubelet gets.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::*;

/// A server on an ephemeral port.
struct Server {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    cancel: CancellationToken,
    task: JoinHandle<io::Result<()>>,
}

async fn start_with(health: Health, limits: Limits) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (metrics, health, cancel) = (
        Arc::new(Metrics::new()),
        Arc::new(health),
        CancellationToken::new(),
    );
    let task = tokio::spawn(serve_with(
        listener,
        metrics.clone(),
        health.clone(),
        cancel.clone(),
        limits,
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
    start_with(Health::new(), LIMITS).await
}

/// A parsed response: status, headers (names lowercased), body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `raw`, reads until the server closes, and parses the response.
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

fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8(bytes.to_vec()).expect("utf-8");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head end in {text:?}"));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("a status line");
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
    let status = parts.next().and_then(|s| s.parse().ok()).expect("a status");
    assert!(
        !parts.next().unwrap_or_default().is_empty(),
        "no reason phrase: {status_line}"
    );
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

async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n").as_bytes(),
    )
    .await
}

/// Every response: a length that matches and `Connection: close`.
fn well_formed(r: &Reply) {
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str()),
        "{r:?}"
    );
    assert_eq!(r.header("connection"), Some("close"), "{r:?}");
}

#[tokio::test]
async fn metrics_are_served_in_the_text_format() {
    let s = start().await;
    s.metrics
        .set_cluster_version("completed", "4.2.0", "img", "4.1.0", 1_700_000_000.0);
    s.metrics.set_leader(true);
    let r = get(s.addr, "/metrics").await;
    well_formed(&r);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
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
    let r = send(s.addr, b"GET http://localhost:9099/readyz HTTP/1.1\n\n").await;
    assert_eq!(r.status, 503, "absolute form and bare line feeds: {r:?}");
}

#[tokio::test]
async fn head_answers_the_headers_without_the_body() {
    let s = start().await;
    s.metrics.set_requests(42);
    let r = send(s.addr, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
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
    well_formed(&r);
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    // A window of zero: never alive.
    let quiet = start_with(Health::with_liveness_window(Duration::ZERO), LIMITS).await;
    quiet.health.mark_alive();
    let r = get(quiet.addr, "/healthz").await;
    well_formed(&r);
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.starts_with("no progress for "), "{r:?}");
}

#[tokio::test]
async fn readyz_follows_set_ready() {
    let s = start().await;
    assert_eq!(get(s.addr, "/readyz").await.status, 503);
    s.health.set_ready(true);
    let r = get(s.addr, "/readyz").await;
    well_formed(&r);
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    s.health.set_ready(false);
    assert_eq!(get(s.addr, "/readyz").await.status, 503);
}

#[tokio::test]
async fn unknown_paths_are_404_and_other_methods_405() {
    let s = start().await;
    for path in ["/", "/metrics/", "/metricsx", "/healthz/extra"] {
        let r = get(s.addr, path).await;
        well_formed(&r);
        assert_eq!(r.status, 404, "{path}");
    }
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let r = send(
            s.addr,
            format!("{method} /metrics HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
        .await;
        well_formed(&r);
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{method}");
    }
}

#[tokio::test]
async fn a_request_body_never_read_does_not_lose_the_response() {
    let s = start().await;
    let body = "x".repeat(32 * 1024);
    let raw = format!(
        "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = send(s.addr, raw.as_bytes()).await;
    assert_eq!(r.status, 405, "{r:?}");
}

#[tokio::test]
async fn malformed_requests_are_400_and_other_versions_505() {
    let s = start().await;
    for raw in [
        &b"garbage\r\n\r\n"[..],
        b"GET /metrics\r\n\r\n",
        b"get /metrics HTTP/1.1\r\n\r\n",
        b"GET  /metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/1.1 extra\r\n\r\n",
        b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
    ] {
        let r = send(s.addr, raw).await;
        well_formed(&r);
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(raw));
    }
    assert_eq!(
        send(s.addr, b"GET /metrics HTTP/2.0\r\n\r\n").await.status,
        505
    );
}

#[tokio::test]
async fn an_oversized_head_is_431() {
    let s = start().await;
    let raw = format!(
        "GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(MAX_HEAD)
    );
    let r = send(s.addr, raw.as_bytes()).await;
    well_formed(&r);
    assert_eq!(r.status, 431);
    // At the limit exactly (the blank line not counted): served.
    let line = "GET /healthz HTTP/1.1\r\nX-Pad: ";
    let at_limit = format!("{line}{}\r\n\r\n", "a".repeat(MAX_HEAD - line.len()));
    assert_eq!(send(s.addr, at_limit.as_bytes()).await.status, 200);
    let over = format!("{line}{}\r\n\r\n", "a".repeat(MAX_HEAD + 1 - line.len()));
    assert_eq!(send(s.addr, over.as_bytes()).await.status, 431);
}

#[tokio::test]
async fn a_client_that_never_finishes_its_head_is_answered_408_and_closed() {
    let limits = Limits {
        head_timeout: Duration::from_millis(200),
        ..LIMITS
    };
    let s = start_with(Health::new(), limits).await;
    let mut stream = TcpStream::connect(s.addr).await.expect("connect");
    stream.write_all(b"GET /metr").await.expect("write");
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("closed by the server")
        .expect("read");
    assert_eq!(parse(&bytes).status, 408);
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
async fn more_clients_than_the_connection_limit_are_all_served() {
    let limits = Limits {
        max_connections: 2,
        ..LIMITS
    };
    let s = start_with(Health::new(), limits).await;
    // Two silent clients hold both slots for a moment.
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(TcpStream::connect(s.addr).await.expect("connect"));
    }
    let clients: Vec<_> = (0..16)
        .map(|_| tokio::spawn(get(s.addr, "/metrics")))
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(silent);
    for c in clients {
        assert_eq!(c.await.expect("client").status, 200);
    }
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

#[test]
fn the_head_end_is_found_across_reads() {
    let buf = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody";
    for from in 0..=23 {
        assert_eq!(head_end(buf, from), Some(23), "from {from}");
    }
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    assert_eq!(head_end(b"GET / HTTP/1.1\nHost: x\n\n", 0), Some(22));
}

#[test]
fn the_request_line_gives_method_and_path() {
    let ok = |line: &[u8]| {
        parse_request_line(line)
            .map_err(|r| r.status)
            .map(|(m, p)| (m.to_string(), p.to_string()))
    };
    assert_eq!(
        ok(b"GET /metrics HTTP/1.1\r\nHost: x"),
        Ok(("GET".into(), "/metrics".into()))
    );
    assert_eq!(
        ok(b"HEAD /readyz?x=1#f HTTP/1.0"),
        Ok(("HEAD".into(), "/readyz".into()))
    );
    assert_eq!(
        ok(b"GET http://h:1/healthz?q HTTP/1.1"),
        Ok(("GET".into(), "/healthz".into()))
    );
    assert_eq!(
        ok(b"GET http://h:1 HTTP/1.1"),
        Ok(("GET".into(), "/".into()))
    );
    assert_eq!(ok(b"GET /x HTTP/3"), Err(505));
    assert_eq!(ok(b""), Err(400));
}
