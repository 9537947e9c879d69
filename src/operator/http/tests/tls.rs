//! TLS: the probes open and `/metrics` closed without credentials, client certificates checked
//! against the client CA, a reloaded certificate served from the next handshake.

use std::net::SocketAddr;
use std::path::Path;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::TlsConnector;

use super::super::*;
use super::{Reply, Server, parse, request, start_with};

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
