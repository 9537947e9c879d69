//! Helpers for the apply cluster tests: small payloads in temp dirs, running the library's
//! apply with an event log (or with [`Watched`] events a test can wait for), and playing a
//! ClusterOperator. Formerly `tests/apply_util/mod.rs`; use it as
//! `use crate::support::apply as apply_util;`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use minicvo::apply::{self, ApplyEvent, ApplyOptions, ApplyReport, Connection, EventLog};
use minicvo::{Filters, LoadOptions, Mode, Plan};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support;

/// The annotation every manifest needs to be included with the default profile.
pub const INCLUDE: &str = "include.release.openshift.io/self-managed-high-availability";

/// A connection (with request counting) for the test plane; `context` `None` is the admin.
pub async fn connection(context: Option<&str>) -> Connection {
    connection_at(&support::shared_kubeconfig(), context).await
}

/// A connection (with request counting) for the plane of the kubeconfig at `path`.
pub async fn connection_at(path: &Path, context: Option<&str>) -> Connection {
    apply::connect(Some(path), context)
        .await
        .unwrap_or_else(|e| panic!("connect to the plane of {}: {e}", path.display()))
}

/// The e2e harness's two counted connections to the test plane (minicvo's writes, the
/// simulator's).
pub async fn e2e_clients() -> minicvo::e2e::Clients {
    e2e_clients_at(&support::shared_kubeconfig()).await
}

/// [`e2e_clients`] for the plane of the kubeconfig at `path`.
pub async fn e2e_clients_at(path: &Path) -> minicvo::e2e::Clients {
    minicvo::e2e::Clients {
        apply: connection_at(path, None).await,
        simulator: connection_at(path, None).await,
    }
}

/// The kubeconfig path of the test plane.
pub fn kubeconfig() -> PathBuf {
    support::shared_kubeconfig()
}

/// `minicvo apply --no-cluster-version --no-progress -o json [EXTRA] --kubeconfig PLANE
/// PAYLOAD`, the built binary against the test plane, ready to run or spawn (wrap it in
/// `assert_cmd::Command::from_std` for a timeout).
pub fn apply_command(payload: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = super::cli::command(&[
        "apply",
        "--no-cluster-version",
        "--no-progress",
        "-o",
        "json",
    ]);
    c.args(extra)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .arg(payload)
        .env_remove("KUBECONFIG");
    c
}

/// Writes a payload (release-manifests/ with the files, release-metadata with `version`).
pub fn write_payload(dir: &Path, version: &str, files: &[(String, String)]) -> PathBuf {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    std::fs::write(
        rm.join("release-metadata"),
        json!({"kind": "cincinnati-metadata-v0", "version": version}).to_string(),
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(rm.join(name), text).unwrap();
    }
    dir.to_path_buf()
}

/// The real ClusterOperator CRD of the corpus (file name and text, read by path), for a test
/// payload that carries it: applying it leaves the CRD the shared plane serves unchanged.
/// A test that only needs the kind served calls
/// [`crate::support::openshift::shared_plane_crds`] instead.
pub fn clusteroperator_crd() -> (String, String) {
    let name = crate::support::openshift::CLUSTER_OPERATOR_CRD;
    let path = crate::support::corpus("openshift-multi/release-manifests").join(name);
    (
        name.to_string(),
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())),
    )
}

/// A Namespace manifest.
pub fn namespace(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  annotations:\n    {INCLUDE}: \"true\"\n"
    )
}

/// A ConfigMap manifest with one data key, plus extra annotations.
pub fn config_map(ns: &str, name: &str, value: &str, annotations: &[(&str, &str)]) -> String {
    let mut extra = String::new();
    for (k, v) in annotations {
        extra.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n{extra}data:\n  key: \"{value}\"\n"
    )
}

/// A ClusterOperator manifest waiting for `operator=version`.
pub fn cluster_operator(name: &str, version: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: {name}\n  annotations:\n    {INCLUDE}: \"true\"\nspec: {{}}\nstatus:\n  versions:\n  - name: operator\n    version: \"{version}\"\n"
    )
}

/// Loads and plans a payload directory (placeholder substitution on, like `apply`).
pub fn plan(dir: &Path, mode: Mode) -> Arc<Plan> {
    let options = LoadOptions {
        filters: Filters::default(),
        release_image: String::new(),
        release_version: None,
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    let payload = minicvo::load(dir, &options).expect("payload loads");
    Arc::new(minicvo::plan::from_payload(
        payload,
        &options.filters,
        mode,
        0,
    ))
}

/// Options for tests: no ClusterVersion recording (it is cluster-wide), short timeouts.
pub fn options() -> ApplyOptions {
    let mut o = ApplyOptions {
        record_cluster_version: false,
        ..ApplyOptions::default()
    };
    o.runner.wait_timeout = Duration::from_secs(60);
    o.timeout = Some(Duration::from_secs(120));
    o
}

/// Runs apply and returns the report and every event.
pub async fn run(
    conn: &Connection,
    plan: Arc<Plan>,
    options: &ApplyOptions,
) -> (ApplyReport, Vec<ApplyEvent>) {
    let log = Arc::new(EventLog::new());
    let report = apply::run(conn, plan, options, log.clone(), CancellationToken::new())
        .await
        .expect("apply runs");
    (report, log.events())
}

/// The ClusterOperator API.
pub fn operators(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterOperator");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusteroperators"),
    )
}

/// Sets a ClusterOperator's status to done at `version` (Available, not Degraded), once a
/// watch has seen the operator created. Returns the instant just before the status write was
/// sent.
pub async fn finish_operator(client: &Client, name: &str, version: &str) -> tokio::time::Instant {
    let api = operators(client);
    let status = json!({"status": {
        "versions": [{"name": "operator", "version": version}],
        "conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Degraded", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Progressing", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
        ],
    }});
    tokio::time::timeout(
        Duration::from_secs(60),
        kube::runtime::wait::await_condition(api.clone(), name, |o: Option<&DynamicObject>| {
            o.is_some()
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("clusteroperator {name} was never created"))
    .unwrap_or_else(|e| panic!("watching clusteroperator {name}: {e}"));
    let sent = tokio::time::Instant::now();
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("cannot set the status of clusteroperator {name}: {e}"));
    sent
}

/// The first event matching `f`, with its index.
pub fn find(
    events: &[ApplyEvent],
    f: impl Fn(&ApplyEvent) -> bool,
) -> Option<(usize, &ApplyEvent)> {
    events.iter().enumerate().find(|(_, e)| f(e))
}

/// An observer that keeps every event and lets a test wait for one, so a test reacts to what
/// the run did instead of sleeping.
#[derive(Default)]
pub struct Watched {
    log: EventLog,
    seen: tokio::sync::watch::Sender<usize>,
}

impl Watched {
    /// A new, empty observer.
    pub fn new() -> Arc<Self> {
        Arc::new(Watched::default())
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<ApplyEvent> {
        self.log.events()
    }

    /// Waits until an event matching `f` has been seen (bounded: panics after 120 s, the
    /// run's own timeout in [`options`]).
    pub async fn wait_for(&self, what: &str, f: impl Fn(&ApplyEvent) -> bool) {
        let mut rx = self.seen.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            if self.log.events().iter().any(&f) {
                return;
            }
            tokio::select! {
                r = rx.changed() => r.expect("observer alive"),
                () = tokio::time::sleep_until(deadline) => panic!("no event: {what}"),
            }
        }
    }
}

impl apply::ApplyObserver for Watched {
    fn on_event(&self, event: &ApplyEvent) {
        apply::ApplyObserver::on_event(&self.log, event);
        self.seen.send_modify(|n| *n += 1);
    }
}

/// Runs apply with a [`Watched`] observer and returns the report.
pub async fn run_watched(
    conn: &Connection,
    plan: Arc<Plan>,
    options: &ApplyOptions,
    watched: Arc<Watched>,
) -> ApplyReport {
    apply::run(conn, plan, options, watched, CancellationToken::new())
        .await
        .expect("apply runs")
}

/// Runs of the e2e harness that take longer than this say so on the test run's own stderr.
pub const SLOW_E2E: Duration = Duration::from_secs(60);

/// `minicvo::e2e::upgrade` with `clients` and `options`; a run that took [`SLOW_E2E`] or
/// more writes its report, and how its time splits between the install and upgrade runs and
/// the rest (loading, `--clean` before and after), to the test run's stderr, uncaptured, so a
/// stall shows in a passing run.
///
/// # Panics
/// If the harness cannot run.
pub async fn e2e_upgrade(
    clients: &minicvo::e2e::Clients,
    options: &minicvo::e2e::UpgradeOptions,
) -> minicvo::e2e::UpgradeReport {
    use std::io::Write;
    let started = std::time::Instant::now();
    let report = minicvo::e2e::upgrade(clients, options, None, CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("e2e could not run: {e}"));
    let took = started.elapsed();
    if took >= SLOW_E2E {
        let runs: f64 = report.runs.iter().map(|r| r.report.seconds).sum();
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let text = format!(
            "slow e2e: {test}: {:.1} s, of which the install and upgrade runs {runs:.1} s and \
             the rest (loading, --clean before and after) {:.1} s; its report:\n{}\n",
            took.as_secs_f64(),
            took.as_secs_f64() - runs,
            report.text()
        );
        let _ = std::io::stderr().write_all(text.as_bytes());
        // A CRD that `--clean` waited for in vain: what the server says of its deletion.
        for w in &report.warnings {
            let Some((_, left)) = w.split_once("still present after ") else {
                continue;
            };
            let crds: kube::Api<
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            > = kube::Api::all(clients.apply.client.clone());
            for name in left.split([',', ' ', ':']).filter(|n| n.contains('.')) {
                let Ok(Some(crd)) = crds.get_opt(name).await else {
                    continue;
                };
                let line = format!(
                    "slow e2e: CRD {name} now: deletionTimestamp {:?}, finalizers {:?}, \
                     conditions {}\n",
                    crd.metadata.deletion_timestamp,
                    crd.metadata.finalizers,
                    serde_json::to_string(&crd.status.map(|s| s.conditions)).unwrap_or_default()
                );
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
        }
    }
    report
}
