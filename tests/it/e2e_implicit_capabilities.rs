//! `e2e upgrade` enables the capabilities the update implies: a ConfigMap the install runs
//! that the new payload moved under a capability that is off is still applied in the upgrade.
//! Unique names, no ClusterVersion recording (the shared plane's `version` is not touched).

use crate::support;
use crate::support::apply as apply_util;

use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use minicvo::apply::Outcome;
use minicvo::e2e::{self, Phase, UpgradeOptions};
use minicvo::filter::Capabilities;
use tokio_util::sync::CancellationToken;

fn payload(dir: PathBuf, ns: &str, version: &str, moved: bool) -> PathBuf {
    let annotations: &[(&str, &str)] = if moved {
        &[("capability.openshift.io/name", "Insights")]
    } else {
        &[]
    };
    apply_util::write_payload(
        &dir,
        version,
        &[
            ("0000_50_caps_00_ns.yaml".into(), apply_util::namespace(ns)),
            (
                "0000_50_caps_01_config.yaml".into(),
                apply_util::config_map(ns, "moved", version, annotations),
            ),
        ],
    )
}

#[tokio::test]
async fn the_upgrade_phase_applies_a_manifest_moved_under_a_disabled_capability() {
    let admin = support::admin_client().await;
    let ns = support::NamespaceGuard::adopt(support::unique_name("e2e-caps"));
    let tmp = tempfile::tempdir().unwrap();
    let mut options = UpgradeOptions {
        from: payload(tmp.path().join("old"), &ns, "1.0.0", false),
        to: payload(tmp.path().join("new"), &ns, "2.0.0", true),
        ..UpgradeOptions::default()
    };
    options.load.filters.capabilities =
        Capabilities::Enabled(BTreeSet::from(["MachineAPI".to_string()]));
    options.apply.record_cluster_version = false;
    let clients = apply_util::e2e_clients().await;
    let report = e2e::upgrade(&clients, &options, None, CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("e2e could not run: {e}"));
    assert!(report.completed(), "{}", report.text());
    let upgrade = report.run(Phase::Upgrade).unwrap();
    let moved = upgrade
        .report
        .tasks
        .iter()
        .find(|t| t.object.name == "moved")
        .unwrap();
    assert_eq!(moved.outcome, Outcome::Configured, "{moved:?}");
    let cms: Api<ConfigMap> = Api::namespaced(admin, &ns);
    let data = cms.get("moved").await.unwrap().data.unwrap_or_default();
    assert_eq!(data["key"], "2.0.0");
}
