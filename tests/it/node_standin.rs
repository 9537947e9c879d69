//! Real pods on the plane with a node (`hack/testplane.sh start --nodes 1`): the
//! `standin-apply` scenario of `hack/scenarios/real-pods.sh`, the script `hack/kind-e2e.sh
//! real-pods` runs on kind. `minicvo apply --wait-available` of a payload whose operator is the
//! stand-in image (`hack/tools/standin`) must exit 0: its ClusterOperator wait ends only when
//! the running pod, acting as its own ServiceAccount, has taken its lease and reported the
//! payload's version. The script then checks that apply waited for the one Deployment and that
//! it was Available (no wait of its own) when apply returned, that the ClusterOperator's status
//! was written by the stand-in's field manager, and that its one pod never restarted and took
//! its lease before it reported.

use std::time::{Duration, Instant};

use crate::support::{self, node};

#[tokio::test]
async fn standin_pod_reports_its_clusteroperator_and_apply_completes() {
    // The scenario uses fixed names (its namespace, ClusterOperator and ClusterRole).
    let _lock = node::fixed_names_lock().await;
    let client = node::client().await;
    support::openshift::install_both(&client, "Default").await;
    let out = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let (code, verdict) =
        node::real_pods_scenarios(&["standin-apply"], out.path(), Duration::from_secs(180)).await;
    let log = std::fs::read_to_string(out.path().join("standin-apply.log")).unwrap_or_default();
    assert_eq!(code, 0, "{verdict}\nminicvo apply:\n{log}");
    assert!(verdict.contains("standin-apply: as expected"), "{verdict}");
    eprintln!(
        "{verdict}apply of a real operator pod, checks included: {:?}",
        start.elapsed()
    );
}

/// A Deployment of `replicas` pods of `image`, included in every profile.
fn deployment(ns: &str, name: &str, replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n\
         spec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  \
         template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      \
         - name: c\n        image: {image}\n"
    )
}

#[tokio::test]
async fn wait_available_names_the_workload_that_is_not_rolled_out_and_exits_1() {
    // On the node: one pause pod becomes available, an image that cannot be pulled never does.
    let client = node::client().await;
    let ns = node::namespace(&client, "avail").await;
    let dir = tempfile::tempdir().unwrap();
    crate::support::apply::write_payload(
        dir.path(),
        "1.0.0",
        &[
            (
                "0000_50_a_01_runs.yaml".into(),
                deployment(&ns, "runs", 1, &node::pause_image()),
            ),
            (
                "0000_50_a_02_stuck.yaml".into(),
                deployment(&ns, "stuck", 1, "registry.invalid/minicvo/none:1"),
            ),
        ],
    );
    let (code, stdout, stderr) = node::apply(
        dir.path(),
        &[
            "--no-cluster-version",
            "--wait-available",
            "--wait-timeout",
            "20s",
        ],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(code, 1, "stderr: {stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["ok"], true, "the apply itself succeeded: {report}");
    let available = &report["available"];
    assert_eq!(available["workloads"], 2, "{available}");
    let not = available["notAvailable"].as_array().expect("a list");
    assert_eq!(not.len(), 1, "{available}");
    assert_eq!(
        not[0]["workload"],
        format!("Deployment {}/stuck", &*ns).as_str()
    );
    let why = not[0]["why"].as_str().unwrap();
    assert!(why.contains("0 available"), "{why}");
    assert!(
        stderr.contains(&format!(
            "error: Deployment {}/stuck is not available: ",
            &*ns
        )),
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains("1 of 2 workloads available after"),
        "{stderr}"
    );
}
