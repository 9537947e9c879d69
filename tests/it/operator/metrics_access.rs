//! `/metrics` of `minicvo operator` over HTTPS on the test plane: who may read it (no
//! identity 401, an identity without the right 403, a ServiceAccount bound to
//! `deploy/60-metrics-reader.yaml`'s ClusterRole 200, by token and by client certificate), the
//! serving certificate reloaded from its files, and plain HTTP only when asked for.
//!
//! Each operator stands by: its Lease (in the test's own namespace) is held by a holder that
//! never lets go, so it serves its endpoints and never touches ClusterVersion or the samples.
//! These tests need no lock and run in parallel with the others.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

use super::support_op::{free_port, kubectl, payloads};
use crate::support::{self, apply as apply_util};

/// A standby `minicvo operator` with its endpoints on 127.0.0.1.
struct Standby {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        super::support_op::end_log(&self.log);
    }
}

impl Standby {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Holds Lease `ns/held` for an hour in the name of `someone-else`.
async fn hold_lease(client: &kube::Client, ns: &str) {
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("held".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("someone-else".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
}

/// Starts the operator in `ns` (standing by) with `--metrics-addr HOST:PORT` on a free port and
/// `metrics_flags`.
fn start(ns: &str, host: &str, metrics_flags: &[&str]) -> Standby {
    let port = free_port();
    let log =
        std::env::temp_dir().join(format!("{}.log", support::unique_name("operator-metrics")));
    let mut c = crate::support::cli::command(&["-v", "operator", "--release", "4.13.0"]);
    for p in payloads(&["old"]) {
        c.arg("--payloads").arg(p);
    }
    c.args([
        "--namespace",
        ns,
        "--lease-name",
        "held",
        "--identity",
        "standby",
        "--retry-period",
        "500ms",
        "--lease-duration",
        "4s",
        "--renew-deadline",
        "3s",
        "--metrics-addr",
    ])
    .arg(format!("{host}:{port}"))
    .args(metrics_flags)
    .arg("--kubeconfig")
    .arg(apply_util::kubeconfig())
    .env_remove("KUBECONFIG")
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    Standby {
        child: c.spawn().expect("operator starts"),
        port,
        log,
    }
}

/// Accepts any server certificate; the tests read it instead.
#[derive(Debug)]
struct AnyServer;

fn algorithms() -> rustls::crypto::WebPkiSupportedAlgorithms {
    rustls::crypto::ring::default_provider().signature_verification_algorithms
}

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
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        algorithms().supported_schemes()
    }
}

/// A client certificate and its key.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A response over HTTPS: status, body, the server's leaf certificate.
type Answer = (u16, String, CertificateDer<'static>);

/// One HTTPS GET of `path` on 127.0.0.1:`port`, with a bearer `token` and/or a client
/// certificate (`None` while the server does not answer).
async fn https_get(
    port: u16,
    path: &str,
    token: Option<&str>,
    identity: Option<Identity>,
) -> Option<Answer> {
    let go = async {
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .ok()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyServer));
        let config = match identity {
            Some((certs, key)) => builder.with_client_auth_cert(certs, key).ok()?,
            None => builder.with_no_client_auth(),
        };
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").ok()?, tcp)
            .await
            .ok()?;
        let leaf = tls.get_ref().1.peer_certificates()?.first()?.clone();
        let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
        tls.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n")
                .as_bytes(),
        )
        .await
        .ok()?;
        let mut buf = Vec::new();
        tls.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, body.to_string(), leaf))
    };
    tokio::time::timeout(Duration::from_secs(10), go)
        .await
        .ok()
        .flatten()
}

/// Waits (at most 60 s) until `/readyz` answers 200 over HTTPS without credentials.
async fn wait_ready(op: &Standby) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((200, _, _)) = https_get(op.port, "/readyz", None, None).await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz never answered 200\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A new CA: its issuer and its certificate as PEM.
fn new_ca(name: &str) -> (rcgen::Issuer<'static, rcgen::KeyPair>, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (rcgen::Issuer::new(params, key), pem)
}

/// A client certificate `ca` signed for `user`.
fn client_cert(ca: &rcgen::Issuer<'_, rcgen::KeyPair>, user: &str) -> Identity {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, user);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (
        vec![cert.der().clone()],
        PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    )
}

/// The token of the kubeconfig's user `alice` (unprivileged, group `testers`).
fn alice_token() -> String {
    kubectl(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.users[?(@.name==\"alice\")].user.token}",
    ])
}

/// Deletes ClusterRoleBinding `name` when dropped.
struct BindingGuard(String);

impl Drop for BindingGuard {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            kubectl(&[
                "delete",
                "clusterrolebinding",
                &self.0,
                "--ignore-not-found",
            ])
        });
    }
}

fn deploy_file(name: &str) -> String {
    crate::support::cli::root()
        .join("deploy")
        .join(name)
        .display()
        .to_string()
}

#[tokio::test]
async fn metrics_answer_401_without_identity_403_without_the_right_and_200_with_it() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "metrics-access").await;
    hold_lease(&client, &ns).await;
    // The ClusterRole deploy/ gives Prometheus, bound to a ServiceAccount of this test.
    kubectl(&["apply", "-f", &deploy_file("60-metrics-reader.yaml")]);
    for sa in ["scraper", "stranger"] {
        kubectl(&["-n", &ns, "create", "serviceaccount", sa]);
    }
    let binding = BindingGuard(support::unique_name("metrics-scraper"));
    kubectl(&[
        "create",
        "clusterrolebinding",
        &binding.0,
        "--clusterrole=minicvo-metrics-reader",
        &format!("--serviceaccount={}:scraper", *ns),
    ]);
    // Real ServiceAccount tokens (TokenRequest).
    let token = |sa: &str| {
        kubectl(&["-n", &ns, "create", "token", sa, "--duration=10m"])
            .trim()
            .to_string()
    };
    let (scraper, stranger, alice) = (token("scraper"), token("stranger"), alice_token());
    assert!(
        !alice.is_empty(),
        "the plane's kubeconfig has alice's token"
    );

    let dir = tempfile::tempdir().unwrap();
    let (ca, ca_pem) = new_ca("metrics clients");
    let (foreign_ca, _) = new_ca("someone else");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let op = start(
        &ns,
        "127.0.0.1",
        &["--metrics-client-ca-file", ca_file.to_str().unwrap()],
    );
    wait_ready(&op).await;

    let get = |token: Option<&str>, identity: Option<Identity>| {
        let token = token.map(str::to_string);
        let port = op.port;
        async move {
            https_get(port, "/metrics", token.as_deref(), identity)
                .await
                .expect("an answer")
        }
    };
    // The probes: no credentials needed.
    assert_eq!(
        https_get(op.port, "/healthz", None, None).await.unwrap().0,
        200
    );

    let (status, body, _) = get(None, None).await;
    assert_eq!(status, 401, "no identity: {body}");
    assert!(!body.contains("minicvo_"), "{body}");
    let (status, body, _) = get(Some("not-a-token"), None).await;
    assert_eq!(status, 401, "a token the API server does not know: {body}");
    let (status, body, _) = get(Some(&alice), None).await;
    assert_eq!(status, 403, "alice: {body}");
    assert!(body.contains("\"alice\""), "{body}");
    let (status, body, _) = get(Some(&stranger), None).await;
    assert_eq!(status, 403, "a ServiceAccount without the binding: {body}");
    let (status, body, _) = get(Some(&scraper), None).await;
    assert_eq!(status, 200, "the bound ServiceAccount: {body}");
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("Prometheus text");
    assert_eq!(
        super::support_op::sample(&scrape, "minicvo_leader", &[]),
        Some(0.0),
        "a standby: {body}"
    );

    // Client certificates of the client CA: the user is the common name, authorized as a
    // token's user is.
    let sa_user = format!("system:serviceaccount:{}:scraper", *ns);
    let (status, body, _) = get(None, Some(client_cert(&ca, &sa_user))).await;
    assert_eq!(status, 200, "certificate of {sa_user}: {body}");
    let (status, body, _) = get(None, Some(client_cert(&ca, "alice"))).await;
    assert_eq!(status, 403, "certificate of alice: {body}");
    let (status, body, _) = get(None, Some(client_cert(&foreign_ca, &sa_user))).await;
    assert_eq!(status, 401, "a certificate of another CA: {body}");
    assert!(body.contains("not trusted"), "{body}");
    // An untrusted certificate does not hide a good token.
    let (status, _, _) = get(Some(&scraper), Some(client_cert(&foreign_ca, "x"))).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn without_a_client_ca_flag_the_api_servers_ca_is_looked_up_as_the_cvo_does() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "metrics-ca").await;
    hold_lease(&client, &ns).await;
    let op = start(&ns, "127.0.0.1", &[]);
    wait_ready(&op).await;
    // The plane's kube-apiserver has no --client-ca-file: the ConfigMap has no client CA, so no
    // certificate is trusted, and the operator says why.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !op
        .log()
        .contains("kube-system/extension-apiserver-authentication")
    {
        assert!(Instant::now() < deadline, "{}", op.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (ca, _) = new_ca("any");
    let (status, body, _) = https_get(
        op.port,
        "/metrics",
        None,
        Some(client_cert(&ca, "system:admin")),
    )
    .await
    .unwrap();
    assert_eq!(status, 401, "{body}");
    // A token still works (the admin of the plane may do anything).
    let admin_token = kubectl(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.users[?(@.name==\"admin\")].user.token}",
    ]);
    let (status, body, _) = https_get(op.port, "/metrics", Some(&admin_token), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        op.log().contains("self-signed"),
        "the generated certificate is announced: {}",
        op.log()
    );
}

/// Writes a self-signed serving pair as `dir/tls.crt` and `dir/tls.key` the way the kubelet
/// updates a Secret volume: new files, then a rename over the old ones.
fn write_serving_pair(dir: &Path) -> CertificateDer<'static> {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    for (name, text) in [("tls.key", key.serialize_pem()), ("tls.crt", cert.pem())] {
        let tmp = dir.join(format!(".{name}.new"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
    cert.der().clone()
}

#[tokio::test]
async fn a_renewed_serving_certificate_is_served_without_a_restart() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "metrics-cert").await;
    hold_lease(&client, &ns).await;
    let dir = tempfile::tempdir().unwrap();
    let first = write_serving_pair(dir.path());
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let mut op = start(
        &ns,
        "127.0.0.1",
        &[
            "--serving-cert-file",
            cert.to_str().unwrap(),
            "--serving-key-file",
            key.to_str().unwrap(),
        ],
    );
    wait_ready(&op).await;
    let (_, _, leaf) = https_get(op.port, "/healthz", None, None).await.unwrap();
    assert_eq!(leaf, first, "the certificate of the files");
    let second = write_serving_pair(dir.path());
    let renewed = Instant::now();
    loop {
        let (status, _, leaf) = https_get(op.port, "/healthz", None, None).await.unwrap();
        assert_eq!(status, 200);
        if leaf == second {
            break;
        }
        assert_eq!(leaf, first, "only ever the old or the new certificate");
        assert!(
            renewed.elapsed() < Duration::from_secs(30),
            "the new certificate was never served\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "new certificate served {:?} after the write",
        renewed.elapsed()
    );
    assert!(
        op.log().contains("reloaded the serving certificate"),
        "{}",
        op.log()
    );
    assert!(op.child.try_wait().unwrap().is_none(), "no restart");
}

/// One plain HTTP GET on 127.0.0.1:`port`: status and body.
async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    super::support_op::get(port, path).await
}

#[tokio::test]
async fn plain_http_is_served_only_when_asked_for_and_warned_about_off_loopback() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "metrics-plain").await;
    hold_lease(&client, &ns).await;
    let warning = "not a loopback address";

    let open = start(&ns, "0.0.0.0", &["--metrics-plain-http"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (status, body) = loop {
        if let Some(answer) = http_get(open.port, "/metrics").await {
            break answer;
        }
        assert!(Instant::now() < deadline, "no answer\n{}", open.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 200, "plain HTTP, no authentication: {body}");
    assert!(body.contains("minicvo_leader"), "{body}");
    assert!(open.log().contains(warning), "{}", open.log());

    let local = start(&ns, "127.0.0.1", &["--metrics-plain-http"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while http_get(local.port, "/healthz").await.is_none() {
        assert!(Instant::now() < deadline, "no answer\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!local.log().contains(warning), "{}", local.log());
    assert!(
        local.log().contains("on http://127.0.0.1:"),
        "{}",
        local.log()
    );
}

#[test]
fn the_metrics_flags_refuse_half_or_contradictory_settings() {
    for (args, says) in [
        (
            &["--metrics-addr", "9", "--serving-cert-file", "c"][..],
            "--serving-key-file",
        ),
        (&["--serving-key-file", "k"][..], "--serving-cert-file"),
        (
            &[
                "--metrics-addr",
                "9",
                "--metrics-plain-http",
                "--serving-cert-file",
                "c",
                "--serving-key-file",
                "k",
            ][..],
            "cannot be used with",
        ),
        (&["--metrics-plain-http"][..], "--metrics-addr"),
    ] {
        let mut all = vec!["operator", "--payloads", "x"];
        all.extend_from_slice(args);
        let run = crate::support::cli::minicvo(&all);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}

/// A kubeconfig in `dir` for ServiceAccount `ns/name` of the plane (a TokenRequest token).
fn service_account_kubeconfig(dir: &Path, ns: &str, name: &str) -> PathBuf {
    let view =
        |path: &str| kubectl(&["config", "view", "--raw", "-o", &format!("jsonpath={path}")]);
    let server = view("{.clusters[0].cluster.server}");
    let ca = view("{.clusters[0].cluster.certificate-authority-data}");
    let token = kubectl(&["-n", ns, "create", "token", name, "--duration=10m"]);
    let file = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: plane\n  cluster:\n    server: {server}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {}\n\
             contexts:\n- name: {name}\n  context:\n    cluster: plane\n    user: {name}\n\
             current-context: {name}\n",
            token.trim()
        ),
    )
    .unwrap();
    file
}

#[tokio::test]
async fn deploy_rbac_lets_the_operator_review_scrapers_and_prometheus_scrape() {
    // deploy/ works in namespace openshift-cluster-version with Lease `version`, as the operator
    // tests do.
    let _lock = support::fixed_names_lock().await;
    let client = support::admin_client().await;
    // The operator's own RBAC, without 21-clusterrole-payload.yaml (full access would hide a
    // missing rule), and the scraper's.
    for f in [
        "00-namespace.yaml",
        "10-serviceaccount.yaml",
        "20-clusterrole-operator.yaml",
        "22-clusterrolebindings.yaml",
        "30-role.yaml",
        "31-rolebinding-client-ca.yaml",
        "60-metrics-reader.yaml",
    ] {
        kubectl(&["apply", "-f", &deploy_file(f)]);
    }
    let ns = "openshift-cluster-version";
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let _ = leases.delete("version", &Default::default()).await;
    let held = Lease {
        metadata: ObjectMeta {
            name: Some("version".into()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    };
    let mut held = held;
    held.spec = Some(LeaseSpec {
        holder_identity: Some("someone-else".into()),
        lease_duration_seconds: Some(3600),
        renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        ..LeaseSpec::default()
    });
    leases.create(&PostParams::default(), &held).await.unwrap();
    // Prometheus's ServiceAccount, as kube-prometheus names it.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "monitoring"}}))
                .unwrap(),
        )
        .await;
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "monitoring");
    let _ = accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "prometheus-k8s"}}))
                .unwrap(),
        )
        .await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(dir.path(), ns, "minicvo");
    let port = free_port();
    let log = dir.path().join("operator.log");
    let mut c = crate::support::cli::command(&["-v", "operator", "--release", "4.13.0"]);
    for p in payloads(&["old"]) {
        c.arg("--payloads").arg(p);
    }
    c.args(["--retry-period", "500ms", "--metrics-addr"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let op = Standby {
        child: c.spawn().expect("operator starts"),
        port,
        log,
    };
    wait_ready(&op).await;

    let prometheus = kubectl(&["-n", "monitoring", "create", "token", "prometheus-k8s"]);
    let (status, body, _) = https_get(op.port, "/metrics", Some(prometheus.trim()), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "prometheus-k8s: {body}\n{}", op.log());
    let (status, body, _) = https_get(op.port, "/metrics", Some(&alice_token()), None)
        .await
        .unwrap();
    assert_eq!(status, 403, "alice: {body}");
    // The client CA: the RoleBinding lets the operator read the ConfigMap, which the plane's
    // API server (no --client-ca-file) does not publish: absent, not forbidden.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !op.log().contains("is absent") {
        assert!(Instant::now() < deadline, "{}", op.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !op.log().contains("hint: the operator needs"),
        "{}",
        op.log()
    );
    drop(op);
    let _ = leases.delete("version", &Default::default()).await;
}

#[tokio::test]
async fn a_client_ca_file_that_does_not_load_stops_the_operator_at_start() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "metrics-badca").await;
    hold_lease(&client, &ns).await;
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.crt");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    for file in [not_pem, dir.path().join("absent.crt")] {
        let mut op = start(
            &ns,
            "127.0.0.1",
            &["--metrics-client-ca-file", file.to_str().unwrap()],
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let code = loop {
            if let Some(s) = op.child.try_wait().unwrap() {
                break s.code();
            }
            assert!(Instant::now() < deadline, "still running\n{}", op.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(code, Some(2), "{}", op.log());
        assert!(
            op.log().contains("--metrics-client-ca-file"),
            "{}",
            op.log()
        );
    }
}
