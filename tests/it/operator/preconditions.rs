//! The CVO's preconditions before an update: a ClusterOperator reporting `Upgradeable=False`
//! makes ClusterVersion `Upgradeable=False`, which holds a minor update (4.13.0 → 4.14.0,
//! refused with `PreconditionChecks`) and lets a patch update (4.13.0 → 4.13.1) through;
//! `force` takes the minor update through, with the block recorded as an accepted risk.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::signatures::release_copy;
use super::support_op::{
    Operator, condition, fresh_cluster, history_is, kubectl, patch_cv, payloads, simulator, wait_cv,
};
use super::{INSTALL_LIMIT, desired_update, written};
use crate::support::{self, apply as apply_util};

const BLOCKER: &str = "minicvo-test-blocker";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgradeable_false_holds_a_minor_update_and_lets_a_patch_update_through() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let patch_release = release_copy("old", "4.13.1", &[]);
    let mut all = payloads(&["old", "new"]);
    all.push(patch_release.path().to_path_buf());
    let sim = simulator("old").await;
    let mut op = Operator::start("preconditions", &all, &["--no-leader-elect"]);
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;

    // A ClusterOperator outside the payload says it cannot take a minor update.
    let _ = kubectl(&["delete", "clusteroperator", BLOCKER, "--ignore-not-found"]);
    let co = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
                    "metadata": {"name": BLOCKER}, "spec": {}});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), co.to_string()).unwrap();
    kubectl(&["create", "-f", file.path().to_str().unwrap()]);
    let status = json!({"status": {"conditions": [{"type": "Upgradeable", "status": "False",
        "reason": "Migrating", "message": "the blocker is migrating its storage",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    kubectl(&[
        "patch",
        "clusteroperator",
        BLOCKER,
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        &status.to_string(),
    ]);
    // ClusterVersion says why it is not upgradeable, as the CVO words it.
    let cv = wait_cv(
        &client,
        "Upgradeable=False",
        Duration::from_secs(30),
        |cv| condition(cv, "Upgradeable").0 == "False",
    )
    .await;
    assert_eq!(
        condition(&cv, "Upgradeable"),
        (
            "False".into(),
            "RiskNameNotCompatibleWithReasonProperty".into(),
            "the blocker is migrating its storage".into()
        )
    );

    // The minor update is held: refused, nothing written, the cluster stays on 4.13.0.
    super::more_passes(&op, "reconciling", 1.0).await;
    let before = written(&client).await;
    let started = Instant::now();
    patch_cv(&desired_update("4.14.0"));
    let cv = wait_cv(
        &client,
        "ReleaseAccepted=False",
        Duration::from_secs(60),
        |cv| condition(cv, "ReleaseAccepted").0 == "False",
    )
    .await;
    eprintln!(
        "desiredUpdate patch to ReleaseAccepted=False (precondition): {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let (_, reason, message) = condition(&cv, "ReleaseAccepted");
    assert_eq!(reason, "PreconditionChecks", "{message}");
    assert!(
        message.starts_with(
            "Preconditions failed for payload loaded version=\"4.14.0\" image=\"\": Multiple precondition checks failed:\n* Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": the blocker is migrating its storage\n"
        ),
        "{message}"
    );
    assert!(
        history_is(&cv, 0, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        written(&client).await,
        before,
        "a held update wrote objects"
    );

    // A patch update goes through.
    let plan = apply_util::plan(patch_release.path(), minicvo::Mode::Updating);
    let patch_sim = minicvo::simulate::Simulator::start(
        support::admin_client().await,
        minicvo::simulate::operators(&plan),
        minicvo::simulate::SimulatorOptions {
            scripts: minicvo::simulate::Scripts::all(&[], Duration::ZERO),
            wait_available: false,
            pods: None,
        },
        None,
    );
    patch_cv(&desired_update("4.13.1"));
    let cv = wait_cv(&client, "4.13.1 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.1", "Completed")
    })
    .await;
    patch_sim.stop().await;
    assert_eq!(condition(&cv, "ReleaseAccepted").0, "True");
    let risks = cv["status"]["history"][0]["acceptedRisks"]
        .as_str()
        .unwrap_or_default();
    assert!(
        risks.contains("\"NoChannel\""),
        "{:#}",
        cv["status"]["history"][0]
    );

    // force takes the minor update through; the block is an accepted risk.
    let sim = simulator("new").await;
    patch_cv(&json!({"spec": {"desiredUpdate": {"version": "4.14.0", "force": true}}}).to_string());
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    sim.stop().await;
    let risks = cv["status"]["history"][0]["acceptedRisks"]
        .as_str()
        .unwrap_or_default();
    assert!(
        risks.starts_with("Forced through blocking failures: Multiple precondition checks failed:"),
        "{risks}"
    );
    kubectl(&["delete", "clusteroperator", BLOCKER]);
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
}
