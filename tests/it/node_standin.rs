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
