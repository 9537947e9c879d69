//! Unit tests of the HTTP server: real sockets on 127.0.0.1, plain and TLS, and a raw HTTP/1.1
//! client, so what is checked is what a scraper or the kubelet gets. The API server is not
//! needed: every request here is decided before a review (the cluster tests in
//! `tests/it/operator/metrics_access.rs` do the reviews).

use std::net::SocketAddr;
use std::path::Path;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use super::*;

/// A server on an ephemeral port.
struct Server {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    cancel: CancellationToken,
    task: JoinHandle<io::Result<()>>,
}

async fn start_with(health: Health, transport: Transport) -> Server {
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

/// A client of an API server that is never reached (every request here is decided before a
/// review).
fn unreachable_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    kube::Client::try_from(config).expect("client")
}

/// A TLS server with `cert`, client certificates of `ca` (a PEM file) trusted.
async fn start_tls(cert: Arc<ServingCert>, ca: Option<&Path>) -> Server {
    let client_ca = Arc::new(ClientCa::new(ClientCaSource::File(
        ca.map_or_else(|| "/nonexistent".into(), Path::to_path_buf),
    )));
    if ca.is_some() {
        client_ca
            .refresh(&unreachable_client())
            .await
            .expect("the CA file loads");
    }
    let transport = Transport::Tls {
        cert,
        access: Arc::new(Access::new(unreachable_client(), client_ca)),
    };
    start_with(Health::new(), transport).await
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

fn parse(bytes: &[u8]) -> Reply {
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

fn request(method: &str, path: &str, extra: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n")
}

async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(addr, request("GET", path, "").as_bytes()).await
}

/// Accepts any server certificate (the tests read it instead).
#[derive(Debug)]
struct AnyServer;

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client certificate and its key.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Sends `raw` over TLS (with `identity` as client certificate), reads until the server
/// closes; returns the response and the server's leaf certificate.
async fn send_tls(
    addr: SocketAddr,
    raw: &[u8],
    identity: Option<Identity>,
) -> (Reply, CertificateDer<'static>) {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer));
    let config = match identity {
        Some((certs, key)) => builder
            .with_client_auth_cert(certs, key)
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("handshake");
    let leaf = tls.get_ref().1.peer_certificates().expect("a server cert")[0].clone();
    tls.write_all(raw).await.expect("write");
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut bytes))
        .await
        .expect("the server closes the connection")
        .expect("read");
    (parse(&bytes), leaf)
}

/// A client certificate that `ca` signed for `user` in `groups` (rcgen keeps one
/// organization: the last).
fn client_identity(
    ca: &rcgen::Issuer<'_, rcgen::KeyPair>,
    user: &str,
    groups: &[&str],
) -> Identity {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, user);
    for g in groups {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *g);
    }
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, ca).expect("signed");
    (
        vec![cert.der().clone()],
        PrivateKeyDer::try_from(key.serialize_der()).expect("key der"),
    )
}

/// A new CA: its issuer and its certificate as PEM.
fn new_ca(name: &str) -> (rcgen::Issuer<'static, rcgen::KeyPair>, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("ca");
    let pem = cert.pem();
    (rcgen::Issuer::new(params, key), pem)
}

/// A self-signed serving certificate and key as PEM files in `dir`, named `stem`.
fn write_pair(dir: &Path, stem: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let (c, k) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&c, cert.pem()).expect("write");
    std::fs::write(&k, key.serialize_pem()).expect("write");
    (c, k)
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

#[tokio::test]
async fn over_tls_the_probes_need_no_credentials_and_metrics_do() {
    let names = tls::names_for("127.0.0.1:0".parse().expect("addr"));
    let s = start_tls(
        Arc::new(ServingCert::generate(&names).expect("generated")),
        None,
    )
    .await;
    s.health.set_ready(true);
    for path in ["/healthz", "/readyz"] {
        let (r, _) = send_tls(s.addr, request("GET", path, "").as_bytes(), None).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{path}");
    }
    let (r, _) = send_tls(s.addr, request("GET", "/metrics", "").as_bytes(), None).await;
    assert_eq!(r.status, 401, "{r:?}");
    assert!(
        r.body.contains("no client certificate and no bearer token"),
        "{r:?}"
    );
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer realm=\"minicvo\"")
    );
    assert!(!r.body.contains("minicvo_leader"), "{r:?}");
    // A plain-HTTP request to the TLS port is not answered with the metrics.
    let mut stream = TcpStream::connect(s.addr).await.expect("connect");
    stream
        .write_all(request("GET", "/metrics", "").as_bytes())
        .await
        .expect("write");
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes)).await;
    assert!(
        !String::from_utf8_lossy(&bytes).contains("minicvo_leader"),
        "plain text on the TLS port"
    );
}

#[tokio::test]
async fn a_client_certificate_of_another_ca_is_401() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, trusted_pem) = new_ca("trusted");
    let (other, _) = new_ca("other");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, trusted_pem).expect("write");
    let names = tls::names_for("127.0.0.1:0".parse().expect("addr"));
    let s = start_tls(
        Arc::new(ServingCert::generate(&names).expect("cert")),
        Some(&ca_file),
    )
    .await;
    let (r, _) = send_tls(
        s.addr,
        request("GET", "/metrics", "").as_bytes(),
        Some(client_identity(&other, "mallory", &[])),
    )
    .await;
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.body.contains("client certificate not trusted"), "{r:?}");
}

#[tokio::test]
async fn the_client_ca_names_the_user_and_groups_of_a_certificate_it_signed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, pem) = new_ca("clients");
    let (other, _) = new_ca("other");
    let file = dir.path().join("ca.crt");
    std::fs::write(&file, pem).expect("write");
    let client_ca = ClientCa::new(ClientCaSource::File(file.clone()));
    let (certs, _) = client_identity(&ca, "system:serviceaccount:mon:prom", &["monitoring"]);
    assert!(
        matches!(
            client_ca.verify(&certs),
            Err(client_ca::CertError::NoClientCa)
        ),
        "nothing trusted before a load"
    );
    assert!(
        client_ca
            .refresh(&unreachable_client())
            .await
            .expect("loads")
    );
    assert!(
        !client_ca
            .refresh(&unreachable_client())
            .await
            .expect("same")
    );
    let user = client_ca.verify(&certs).expect("trusted");
    assert_eq!(user.name, "system:serviceaccount:mon:prom");
    assert_eq!(user.groups, ["monitoring"]);
    let (foreign, _) = client_identity(&other, "x", &[]);
    assert!(matches!(
        client_ca.verify(&foreign),
        Err(client_ca::CertError::NotTrusted(_))
    ));
    let generation = client_ca.generation();
    std::fs::write(&file, "not pem").expect("write");
    assert!(client_ca.refresh(&unreachable_client()).await.is_err());
    assert_eq!(
        client_ca.generation(),
        generation,
        "a bad bundle keeps the old one"
    );
    assert!(client_ca.verify(&certs).is_ok());
}

#[tokio::test]
async fn a_changed_certificate_file_serves_the_next_handshake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c1, k1) = write_pair(dir.path(), "one");
    let (c2, k2) = write_pair(dir.path(), "two");
    let cert = Arc::new(ServingCert::from_files(&c1, &k1).expect("loads"));
    assert!(!cert.is_generated());
    let s = start_tls(cert.clone(), None).await;
    let leaf = |c: &ServingCert| c.current().cert[0].clone();
    let before = leaf(&cert);
    let (_, served) = send_tls(s.addr, request("GET", "/healthz", "").as_bytes(), None).await;
    assert_eq!(served, before);
    std::fs::copy(&c2, &c1).expect("copy");
    std::fs::copy(&k2, &k1).expect("copy");
    assert!(cert.reload().expect("reloads"));
    let (r, served) = send_tls(s.addr, request("GET", "/healthz", "").as_bytes(), None).await;
    assert_eq!(r.status, 200);
    assert_ne!(served, before, "the new certificate serves");
    assert_eq!(served, leaf(&cert));
}

#[test]
fn a_reload_takes_a_new_pair_and_keeps_the_old_one_on_a_bad_pair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c1, k1) = write_pair(dir.path(), "one");
    let (c2, k2) = write_pair(dir.path(), "two");
    let cert = ServingCert::from_files(&c1, &k1).expect("loads");
    let first = cert.fingerprint();
    assert!(!cert.reload().expect("same files"), "unchanged");
    // A key that is not the certificate's: refused, the old pair stays.
    std::fs::copy(&k2, &k1).expect("copy");
    let e = cert.reload().expect_err("mismatch");
    assert!(matches!(e, TlsError::Key { .. }), "{e}");
    assert_eq!(cert.fingerprint(), first);
    std::fs::copy(&c2, &c1).expect("copy");
    assert!(cert.reload().expect("a usable pair"));
    assert_ne!(cert.fingerprint(), first);
    // Files that are not PEM: refused.
    std::fs::write(&c1, "garbage").expect("write");
    assert!(matches!(
        cert.reload(),
        Err(TlsError::Missing { .. } | TlsError::Pem { .. })
    ));
    assert!(matches!(
        ServingCert::from_files(&dir.path().join("absent"), &k2),
        Err(TlsError::Read { .. })
    ));
}
