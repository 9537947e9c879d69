//! A new desired state in the middle of an update: `spec.overrides` changed while the update
//! waits on an operator cancels the pass in flight, the update starts again with the override,
//! and the object the override names is left alone from then on.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::support_op::{
    Operator, condition, fresh_cluster, history_is, patch_cv, payloads, simulator,
    simulator_delayed, wait_cv,
};
use super::{INSTALL_LIMIT, desired_update, more_passes};
use crate::support;

const NS: &str = "openshift-machine-config-operator";
const DASHBOARD: &str = "machine-config-dashboard";

async fn dashboard(cms: &Api<ConfigMap>) -> String {
    let cm = cms.get(DASHBOARD).await.unwrap();
    cm.data
        .unwrap_or_default()
        .get("dashboard.json")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_overrides_during_an_update_supersede_the_pass_and_are_honoured() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let sim = simulator("old").await;
    let mut op = Operator::start(
        "overrides",
        &payloads(&["old", "new"]),
        &["--no-leader-elect"],
    );
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;

    // The new release's operators report 5 s after their Deployments roll out: the update
    // waits on machine-config at run-level 80, before the dashboard's run-level 90.
    let sim = simulator_delayed("new", Duration::from_secs(5)).await;
    patch_cv(&desired_update("4.14.0"));
    wait_cv(&client, "4.14.0 under way", Duration::from_secs(60), |cv| {
        let progressing = condition(cv, "Progressing").2;
        history_is(cv, 0, "4.14.0", "Partial")
            && progressing.contains(" of ")
            && !progressing.contains(": 0 of ")
    })
    .await;
    // Someone edits the dashboard and marks it unmanaged, mid-update.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let edited = r#"{"title": "edited by hand"}"#;
    cms.patch(
        DASHBOARD,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"dashboard.json": edited}})),
    )
    .await
    .unwrap();
    let overrides = json!({"spec": {"overrides": [{
        "kind": "ConfigMap", "group": "", "namespace": NS, "name": DASHBOARD, "unmanaged": true
    }]}});
    patch_cv(&overrides.to_string());
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    sim.stop().await;
    assert!(
        history_is(&cv, 1, "4.13.0", "Completed"),
        "one entry for 4.14.0 above 4.13.0: {:#}",
        cv["status"]["history"]
    );
    let log = op.log();
    assert!(
        log.contains("updating pass of 4.14.0 superseded"),
        "the pass in flight was not superseded:\n{log}"
    );

    // A reconciling pass later, the edit is still there.
    more_passes(&op, "reconciling", 1.0).await;
    assert_eq!(
        dashboard(&cms).await,
        edited,
        "an unmanaged object was written"
    );
    op.signal("TERM");
    assert_eq!(
        op.exit(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        op.log()
    );
    support::openshift::assert_real_crds(&client, "Default").await;
}
