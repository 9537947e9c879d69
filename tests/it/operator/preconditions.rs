//! The CVO's preconditions before an update: a ClusterOperator reporting `Upgradeable=False`
//! makes ClusterVersion `Upgradeable=False`, which holds a minor update (4.13.0 → 4.14.0,
//! refused with `PreconditionChecks`) and lets a patch update (4.13.0 → 4.13.1) through;
//! `force` takes the minor update through, with the block recorded as an accepted risk.

use std::time::Duration;

use serde_json::{Value, json};
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
    let risks = accepted_risks(&cv);
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
    let risks = accepted_risks(&cv);
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

/// The gate the test's release ships, as a real release words one.
const GATE: &str = "ack-4.13-kube-1.27-api-removals-in-4.14";
const GATE_TEXT: &str = "Kubernetes 1.27 and therefore OpenShift 4.14 remove several APIs which require admin consideration. Please see the knowledge article https://access.redhat.com/articles/6958394 for details and instructions.";

/// Deletes the admin-gates and admin-acks ConfigMaps (before the test, and after it even
/// when it fails: a gate left behind would hold other tests' updates).
struct AdminConfigMaps;

impl AdminConfigMaps {
    fn clean() -> Self {
        Self::delete();
        AdminConfigMaps
    }

    fn delete() {
        for (ns, name) in [
            ("openshift-config-managed", "admin-gates"),
            ("openshift-config", "admin-acks"),
        ] {
            let _ = kubectl(&["delete", "configmap", "-n", ns, name, "--ignore-not-found"]);
        }
    }
}

impl Drop for AdminConfigMaps {
    fn drop(&mut self) {
        Self::delete();
    }
}

/// The release ships `admin-gates` with a gate for 4.13 clusters and an empty, create-only
/// `admin-acks` (as the CVO's own manifests do): the minor update is held with the gate's
/// text until the admin acknowledges it in `admin-acks`, then it proceeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_gate_holds_a_minor_update_until_it_is_acknowledged() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let _admin = AdminConfigMaps::clean();
    // As the CVO's own manifests (annotations for the profile, admin-acks create-only).
    let manifest = |ns: &str, name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n{extra}"
        )
    };
    let gates = manifest(
        "openshift-config-managed",
        "admin-gates",
        &format!("data:\n  {GATE}: {GATE_TEXT:?}\n"),
    );
    let acks = manifest(
        "openshift-config",
        "admin-acks",
        "    release.openshift.io/create-only: \"true\"\n",
    );
    let release = release_copy(
        "old",
        "4.13.0",
        &[
            (
                "0000_00_cluster-version-operator_01_admingate_configmap.yaml",
                gates,
            ),
            (
                "0000_00_cluster-version-operator_01_adminack_configmap.yaml",
                acks,
            ),
        ],
    );
    let mut all = payloads(&["new"]);
    all.push(release.path().to_path_buf());
    let sim = simulator("old").await;
    let mut op = Operator::start("admin-acks", &all, &["--no-leader-elect"]);
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;
    // Not acknowledged: Upgradeable=False with the gate's text, as the CVO's AdminAck risk.
    let held = (
        "False".to_string(),
        "RiskNameNotCompatibleWithReasonProperty".to_string(),
        GATE_TEXT.to_string(),
    );
    wait_cv(
        &client,
        "Upgradeable=False with the gate",
        Duration::from_secs(30),
        |cv| condition(cv, "Upgradeable") == held,
    )
    .await;

    // The minor update is held, nothing is written.
    super::more_passes(&op, "reconciling", 1.0).await;
    let before = written(&client).await;
    patch_cv(&desired_update("4.14.0"));
    let cv = wait_cv(
        &client,
        "ReleaseAccepted=False",
        Duration::from_secs(60),
        |cv| condition(cv, "ReleaseAccepted").0 == "False",
    )
    .await;
    let (_, reason, message) = condition(&cv, "ReleaseAccepted");
    assert_eq!(reason, "PreconditionChecks", "{message}");
    assert!(
        message.starts_with(&format!(
            "Preconditions failed for payload loaded version=\"4.14.0\" image=\"\": Multiple precondition checks failed:\n* Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": {GATE_TEXT}\n"
        )),
        "{message}"
    );
    assert!(history_is(&cv, 0, "4.13.0", "Completed"));
    assert_eq!(
        written(&client).await,
        before,
        "a held update wrote objects"
    );

    // Acknowledged: the refused update is tried again and proceeds.
    let sim = simulator("new").await;
    kubectl(&[
        "patch",
        "configmap",
        "-n",
        "openshift-config",
        "admin-acks",
        "--type",
        "merge",
        "-p",
        &json!({"data": {GATE: "true"}}).to_string(),
    ]);
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    sim.stop().await;
    assert_eq!(condition(&cv, "ReleaseAccepted").0, "True");
    let risks = accepted_risks(&cv);
    assert!(!risks.contains(GATE_TEXT), "{risks}");
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
}

/// `acceptedRisks` of the newest history entry ("" when it has none).
fn accepted_risks(cv: &Value) -> &str {
    cv["status"]["history"][0]["acceptedRisks"]
        .as_str()
        .unwrap_or_default()
}
