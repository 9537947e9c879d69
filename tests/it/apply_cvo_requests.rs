//! What a no-op re-apply costs in the `cvo` strategy, counted by a transparent proxy in front
//! of the shared plane (every request the run sends, discovery included): 200 ConfigMaps and
//! their Namespace applied twice, and the second run must stay at or under 1.05 requests per
//! object (one GET each, plus the run's fixed overhead).

use crate::support::{self, apply as apply_util, fault::proxy::FaultMix, fault::proxy::FaultProxy};

use std::path::{Path, PathBuf};

use minicvo::Mode;
use minicvo::apply::ApplyStrategy;

/// The server URL of the shared plane's kubeconfig.
fn server(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("kubeconfig has a server")
        .trim()
        .to_string()
}

/// A proxy without faults in front of the shared plane, and a kubeconfig pointing at it.
async fn counting_proxy(dir: &Path) -> (FaultProxy, PathBuf) {
    let path = PathBuf::from(
        std::env::var_os(support::KUBECONFIG_ENV).expect("MINICVO_TEST_KUBECONFIG is not set"),
    );
    let pki = path.parent().expect("plane dir").join("pki");
    let text = std::fs::read_to_string(&path).unwrap();
    let upstream = server(&text);
    let proxy = FaultProxy::start(
        &upstream,
        &pki.join("ca.crt"),
        &pki.join("apiserver.crt"),
        &pki.join("apiserver.key"),
        FaultMix::none(),
    )
    .await;
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        text.replace(
            &format!("server: {upstream}"),
            &format!("server: {}", proxy.url()),
        ),
    )
    .unwrap();
    (proxy, kc)
}

#[tokio::test]
async fn a_no_op_re_apply_costs_at_most_1_05_requests_per_object() {
    const OBJECTS: usize = 200;
    let tmp = tempfile::tempdir().unwrap();
    let ns = support::unique_name("cvo-requests");
    let _guard = support::NamespaceGuard::adopt(ns.clone());
    let mut files = vec![(
        "0000_50_a_00_ns.yaml".to_string(),
        apply_util::namespace(&ns),
    )];
    for i in 0..OBJECTS {
        files.push((
            format!("0000_50_a_01_cm{i:03}.yaml"),
            apply_util::config_map(&ns, &format!("cm-{i}"), "v", &[]),
        ));
    }
    let dir = apply_util::write_payload(&tmp.path().join("payload"), "1.0.0", &files);
    let (proxy, kubeconfig) = counting_proxy(tmp.path()).await;
    let conn = minicvo::apply::connect(Some(&kubeconfig), None)
        .await
        .expect("connect through the proxy");
    let mut options = apply_util::options();
    options.runner.strategy = ApplyStrategy::Cvo;
    let plan = || apply_util::plan(&dir, Mode::Updating);

    let (first, _) = apply_util::run(&conn, plan(), &options).await;
    assert_eq!(first.counts.failed, 0, "{:?}", first.errors);
    assert_eq!(first.counts.created, OBJECTS + 1);
    eprintln!(
        "first apply in cvo: {} requests for {} objects",
        proxy.stats.counts().requests,
        OBJECTS + 1
    );

    let before = proxy.stats.counts();
    let (second, _) = apply_util::run(&conn, plan(), &options).await;
    let seen = proxy.stats.counts().since(&before).requests;
    assert_eq!(second.counts.unchanged, OBJECTS + 1, "{:?}", second.counts);
    // The proxy also sees the preflight's discovery, which the run's own count leaves out.
    assert!(
        seen >= second.requests,
        "proxy {seen}, run {}",
        second.requests
    );
    let per_object = seen as f64 / (OBJECTS + 1) as f64;
    eprintln!(
        "no-op re-apply in cvo: {seen} requests for {} objects ({per_object:.3} per object)",
        OBJECTS + 1
    );
    assert!(
        per_object <= 1.05,
        "{seen} requests for {} objects ({per_object:.3} per object)",
        OBJECTS + 1
    );
}
