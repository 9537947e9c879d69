//! `minicvo operator` as a process on the test control plane, with the real ClusterVersion
//! and ClusterOperator CRDs: an install, an update started by `kubectl patch` of
//! `spec.desiredUpdate`, drift restored by reconcile passes, a desired release without a
//! payload refused, leader election between replicas (SIGKILL and SIGTERM), `/metrics` parsed
//! as Prometheus text, and `e2e upgrade --via-operator`.
//!
//! These tests use the bundled samples' fixed names and ClusterVersion `version`, so each holds
//! [`support::fixed_names_lock`].

mod images;
mod leader;
mod metrics_access;
mod preconditions;
mod signatures;
mod supersede;
mod support_op;
mod update_graph;
mod update_service;

use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use self::support_op::{
    Operator, condition, fresh_cluster, history_is, kubectl, patch_cv, payloads, sample, simulator,
    wait_cv,
};
use crate::support;

const INSTALL_LIMIT: Duration = Duration::from_secs(120);

fn desired_update(version: &str) -> String {
    json!({"spec": {"desiredUpdate": {"version": version}}}).to_string()
}

/// resourceVersions of every ConfigMap, Deployment and ClusterRoleBinding the samples own.
async fn written(client: &kube::Client) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for ns in [
        "openshift-example-operator",
        "openshift-machine-config-operator",
    ] {
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
        let deps: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), ns);
        for o in cms.list(&ListParams::default()).await.unwrap() {
            out.push((
                format!("cm {ns}/{}", o.metadata.name.unwrap()),
                o.metadata.resource_version.unwrap(),
            ));
        }
        for o in deps.list(&ListParams::default()).await.unwrap() {
            out.push((
                format!("deploy {ns}/{}", o.metadata.name.unwrap()),
                o.metadata.resource_version.unwrap(),
            ));
        }
    }
    out.sort();
    out
}

/// The count of passes in `mode` the operator reports.
async fn passes(op: &Operator, mode: &str) -> f64 {
    let m = op.metrics().await.expect("metrics answer");
    m.samples
        .iter()
        .filter(|s| s.metric == "minicvo_sync_passes_total" && s.labels.get("mode") == Some(mode))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

/// Waits (at most 30 s) until the operator has ended `n` more passes in `mode`.
async fn more_passes(op: &Operator, mode: &str, n: f64) {
    let target = passes(op, mode).await + n;
    let deadline = Instant::now() + Duration::from_secs(30);
    while passes(op, mode).await < target {
        assert!(Instant::now() < deadline, "no {mode} passes\n{}", op.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_patch_updates_the_cluster_drift_is_restored_and_an_unknown_release_is_refused() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let sim = simulator("old").await;
    let mut op = Operator::start("solo", &payloads(&["old", "new"]), &["--no-leader-elect"]);
    let started = Instant::now();
    let cv = wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    eprintln!(
        "install by the operator: {:.2}s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(condition(&cv, "Available").0, "True", "{cv:#}");
    assert!(
        cv["spec"]["clusterID"]
            .as_str()
            .is_some_and(|id| id.len() == 36),
        "{cv:#}"
    );
    sim.stop().await;

    // Drift: a deleted ConfigMap and an edited Deployment come back with the next pass.
    let ns = "openshift-example-operator";
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    let deps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "openshift-machine-config-operator",
        &kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let image =
        |d: &DynamicObject| d.data["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    let original = image(&deps.get("machine-config-operator").await.unwrap());
    let drifted = Instant::now();
    cms.delete("example-operator-config", &Default::default())
        .await
        .unwrap();
    let patch = json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "drift.invalid/x:1"}]);
    deps.patch(
        "machine-config-operator",
        &PatchParams::default(),
        &Patch::<Value>::Json(serde_json::from_value(patch).unwrap()),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cm_back = cms
            .get_opt("example-operator-config")
            .await
            .unwrap()
            .is_some();
        let image_back = image(&deps.get("machine-config-operator").await.unwrap()) == original;
        if cm_back && image_back {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "drift not restored within 30s (ConfigMap {cm_back}, image {image_back})\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let restore = drifted.elapsed();
    eprintln!(
        "drift restored in {:.2}s (resync interval 1s)",
        restore.as_secs_f64()
    );
    // At most one interval plus one pass.
    assert!(restore < Duration::from_secs(15), "{restore:?}");

    // The update an admin starts.
    let sim = simulator("new").await;
    let before = op.metrics().await.expect("metrics answer");
    assert_eq!(
        sample(&before, "minicvo_leader", &[]),
        Some(1.0),
        "without election the one replica works"
    );
    let patched = Instant::now();
    patch_cv(&desired_update("4.14.0"));
    let mut applied: Vec<f64> = Vec::new();
    let mut first_write: Option<Duration> = None;
    let deadline = Instant::now() + INSTALL_LIMIT;
    let cv = loop {
        if let Some(m) = op.metrics().await
            && let Some(v) = sample(
                &m,
                "cluster_version_payload",
                &[("version", "4.14.0"), ("type", "applied")],
            )
            && applied.last() != Some(&v)
        {
            applied.push(v);
        }
        let cv = support_op::cluster_version(&client).await.unwrap();
        if first_write.is_none() && cv["status"]["history"][0]["version"] == "4.14.0" {
            first_write = Some(patched.elapsed());
        }
        if history_is(&cv, 0, "4.14.0", "Completed") {
            break cv;
        }
        assert!(
            Instant::now() < deadline,
            "the update did not complete: {:#}\n{}",
            cv["status"],
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!(
        "update: first write {:.3}s after the patch, completed after {:.2}s; applied counts seen {applied:?}",
        first_write.unwrap().as_secs_f64(),
        patched.elapsed().as_secs_f64()
    );
    sim.stop().await;
    assert!(
        history_is(&cv, 1, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );
    assert_eq!(cv["status"]["desired"]["version"], "4.14.0");
    assert_eq!(
        condition(&cv, "Available"),
        ("True".into(), String::new(), "Done applying 4.14.0".into())
    );
    assert_eq!(condition(&cv, "Failing").0, "False");
    let progressing = condition(&cv, "Progressing");
    assert_eq!(
        (progressing.0.as_str(), progressing.2.as_str()),
        ("False", "Cluster version is 4.14.0")
    );
    assert_eq!(condition(&cv, "ReleaseAccepted").1, "PayloadLoaded");
    // The payload counts moved during the update and ended with nothing pending.
    assert!(
        applied.len() >= 2 && applied.windows(2).all(|w| w[0] < w[1]),
        "{applied:?}"
    );
    // The operator records a completed pass in its metrics, then says so in an Event; the
    // ClusterVersion status above is written before either.
    signatures::wait_events(&client, "UpdateCompleted", "4.14.0", 1).await;
    let after = op.metrics().await.unwrap();
    assert_eq!(
        sample(
            &after,
            "cluster_version_payload",
            &[("version", "4.14.0"), ("type", "pending")]
        ),
        Some(0.0)
    );
    assert!(
        sample(
            &after,
            "cluster_version",
            &[("type", "completed"), ("version", "4.14.0")]
        )
        .is_some()
    );

    // A release no payload provides: refused, nothing written.
    let rvs = written(&client).await;
    // Neither an available update nor a payload at hand: the CVO's `Invalid` condition.
    patch_cv(&desired_update("4.99.0"));
    let cv = wait_cv(&client, "Invalid=True", Duration::from_secs(30), |cv| {
        condition(cv, "Invalid").0 == "True"
    })
    .await;
    let (_, reason, message) = condition(&cv, "Invalid");
    assert_eq!(reason, "InvalidClusterVersion");
    assert_eq!(
        message,
        "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"4.99.0\": when image is empty the update must be an available update"
    );
    let log = op.log();
    assert!(
        log.contains("no payload for version 4.99.0") && log.contains("4.13.0, 4.14.0"),
        "the payloads looked at are logged\n{log}"
    );
    // Two more reconcile passes of 4.14.0 run meanwhile, and write nothing.
    more_passes(&op, "reconciling", 2.0).await;
    assert_eq!(
        written(&client).await,
        rvs,
        "objects written after the refusal"
    );
    let cv = support_op::cluster_version(&client).await.unwrap();
    assert_eq!(cv["status"]["desired"]["version"], "4.14.0");
    assert_eq!(
        cv["status"]["history"].as_array().unwrap().len(),
        2,
        "{:#}",
        cv["status"]["history"]
    );
    // Back to the release the cluster runs: accepted again, `Invalid` removed.
    patch_cv(&desired_update("4.14.0"));
    let cv = wait_cv(&client, "no Invalid", Duration::from_secs(30), |cv| {
        condition(cv, "Invalid").0.is_empty()
    })
    .await;
    assert_eq!(condition(&cv, "ReleaseAccepted").0, "True");

    let term = Instant::now();
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
    eprintln!("SIGTERM to exit: {:.2}s", term.elapsed().as_secs_f64());
    let events = kubectl(&[
        "get",
        "events",
        "-n",
        "openshift-cluster-version",
        "-o",
        "json",
    ]);
    let events: Value = serde_json::from_str(&events).unwrap();
    let reasons: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .collect();
    for r in ["UpdateStarted", "UpdateCompleted", "ReleaseRejected"] {
        assert!(reasons.contains(&r), "no {r} event: {reasons:?}");
    }
    support::openshift::assert_real_crds(&client, "Default").await;
}

#[tokio::test]
async fn e2e_via_operator_fails_the_buggy_order_and_passes_the_fixed_one() {
    let _lock = support::fixed_names_lock().await;
    let admin = support::openshift::shared_plane_crds().await;
    let kc = support::apply::kubeconfig().display().to_string();
    let old = support::openshift::sample("old").display().to_string();
    for (to, code) in [("new-buggy", 1), ("new", 0)] {
        let new = support::openshift::sample(to).display().to_string();
        let run = crate::support::cli::minicvo(&[
            "e2e",
            "upgrade",
            "--from",
            &old,
            "--to",
            &new,
            "--kubeconfig",
            &kc,
            "--via-operator",
            "--clean",
            "--cleanup",
            "--no-progress",
            "-q",
            "-o",
            "json",
        ]);
        assert_eq!(run.code, code, "{to}: {}\n{}", run.stdout, run.stderr);
        let summary: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(summary["completed"], true, "{to}: {summary:#}");
        let failed: Vec<&str> = summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == false)
            .filter_map(|c| c["name"].as_str())
            .collect();
        if code == 1 {
            assert!(
                failed.contains(&"delete-before-workload-update"),
                "{failed:?}"
            );
            assert!(failed.contains(&"live-pods-keep-access"), "{failed:?}");
        } else {
            assert!(failed.is_empty(), "{failed:?}");
        }
        let modes: Vec<&str> = summary["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["mode"].as_str())
            .collect();
        assert_eq!(modes, ["initializing", "updating"], "{summary:#}");
    }
    support::openshift::assert_real_crds(&admin, "Default").await;
}
