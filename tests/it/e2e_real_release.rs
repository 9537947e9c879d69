//! The upgrade of the real releases: `../shared/payloads/openshift-4.21` installed, then
//! updated to `openshift-4.22` (both written by the real `oc adm release new`), with simulated
//! operators on the test plane. What broke on them before: ClusterOperator
//! `operator-lifecycle-manager` (run-level 50) waited for a workload the plan applies only at
//! run-level 51 (`simulated_operators_never_wait_for_a_later_run_level`), and create-only
//! `Console cluster` was POSTed and rejected (422) by 4.22's CRD although it existed.
//!
//! The payloads use fixed object names, so the test holds a plane of the fixed-names pool
//! ([`support::fixed_names_plane`]) and starts and ends by deleting both payloads' objects.
//! Their own ClusterOperator and ClusterVersion CRDs are left out
//! ([`support::openshift::without_real_crds`]): the plane serves the real ones already.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject};
use minicvo::e2e::{self, Phase, TimelineAction, UpgradeOptions};
use serde_json::Value;

use crate::support::{self, corpus};

/// The release image rendered into the CVO's own manifests (`{{.ReleaseImage}}`).
const RELEASE_IMAGE: &str = "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64";

/// The corpus `name`, or a one-line failure naming what is missing.
fn real_release(name: &str) -> PathBuf {
    let dir = corpus(name);
    assert!(
        dir.join("release-manifests").is_dir(),
        "missing {}: the real releases of ../shared/payloads (REAL-4.21-4.22-SOURCES.md) are \
         needed",
        dir.display()
    );
    dir
}

/// The documents of `file` in `release` (a file of `release-manifests/`).
fn documents(release: &Path, file: &str) -> Vec<Value> {
    let path = release.join("release-manifests").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn image_of(d: &Value) -> String {
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn cluster_operators(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "config.openshift.io".into(),
        version: "v1".into(),
        api_version: "config.openshift.io/v1".into(),
        kind: "ClusterOperator".into(),
        plural: "clusteroperators".into(),
    };
    Api::all_with(client.clone(), &ar)
}

fn cluster_versions(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "config.openshift.io".into(),
        version: "v1".into(),
        api_version: "config.openshift.io/v1".into(),
        kind: "ClusterVersion".into(),
        plural: "clusterversions".into(),
    };
    Api::all_with(client.clone(), &ar)
}

#[tokio::test]
async fn real_4_21_to_4_22_upgrade_completes_with_simulated_operators() {
    let old = real_release("openshift-4.21");
    let new = real_release("openshift-4.22");
    let new_dir = new.clone();
    let mut o = UpgradeOptions {
        from: support::openshift::without_real_crds(&old),
        to: support::openshift::without_real_crds(&new),
        clean: true,
        clean_after: false,
        stub_missing_crds: true,
        create_missing_namespaces: true,
        ..UpgradeOptions::default()
    };
    o.load.release_image = RELEASE_IMAGE.into();
    o.apply.release_image = RELEASE_IMAGE.into();
    o.apply.runner.wait_timeout = Duration::from_secs(120);

    let plane = support::fixed_names_plane().await;
    let admin = plane.real_crds().await;
    let report = support::apply::e2e_upgrade(&plane.e2e_clients().await, &o).await;
    eprintln!("{}", report.text());
    assert!(report.completed(), "{}", report.text());
    let install = report.run(Phase::Install).unwrap();
    let upgrade = report.run(Phase::Upgrade).unwrap();
    assert_eq!(install.version.as_deref(), Some("4.21.0"));
    assert_eq!(upgrade.version.as_deref(), Some("4.22.0"));
    assert_eq!(upgrade.report.counts.failed, 0);
    assert_eq!(upgrade.report.counts.not_run, 0, "{}", report.text());
    eprintln!(
        "openshift-4.21 -> 4.22: install {:.2}s / {} requests, upgrade {:.2}s / {} requests, \
         simulator {} requests",
        install.report.seconds,
        install.report.requests,
        upgrade.report.seconds,
        upgrade.report.requests,
        report.simulator_requests()
    );

    // The one harm is the known one (docs/e2e.md, "The real releases"): 4.22 drops `create`
    // on networks.config.openshift.io from ClusterRole openshift-dns-operator, applied before
    // the dns-operator Deployment; any other harm is new.
    let harms: Vec<_> = report
        .timeline
        .events
        .iter()
        .filter(|e| e.action == TimelineAction::Harm)
        .filter_map(|e| e.harm.as_ref())
        .collect();
    assert!(
        harms.iter().all(|h| {
            h.service_account == "openshift-dns-operator/dns-operator"
                && h.what.contains("create on networks.config.openshift.io")
        }),
        "{}",
        report.text()
    );
    let live = report.check(None, e2e::LIVE_PODS_CHECK).unwrap();
    assert_eq!(live.passed(), harms.is_empty());

    // ClusterVersion: 4.22.0 Completed over 4.21.0 Completed.
    let cv = cluster_versions(&admin).get("version").await.unwrap();
    let history = cv.data["status"]["history"].as_array().unwrap();
    let h: Vec<(&str, &str)> = history
        .iter()
        .map(|e| {
            (
                e["version"].as_str().unwrap_or_default(),
                e["state"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    // The newest two entries; older ones are the plane's earlier runs (the fixed-names
    // planes are shared with the other stories, and ClusterVersion `version` outlives them).
    assert_eq!(
        h.get(..2),
        Some(&[("4.22.0", "Completed"), ("4.21.0", "Completed")][..]),
        "{h:?}"
    );

    // Deployments run 4.22's images; OLM's three among them (run-level 50).
    for (file, ns, name) in [
        (
            "0000_50_olm_07-olm-operator.deployment.yaml",
            "openshift-operator-lifecycle-manager",
            "olm-operator",
        ),
        (
            "0000_50_olm_08-catalog-operator.deployment.yaml",
            "openshift-operator-lifecycle-manager",
            "catalog-operator",
        ),
        (
            "0000_51_olm_06_deployment.yaml",
            "openshift-cluster-olm-operator",
            "cluster-olm-operator",
        ),
        (
            "0000_70_dns-operator_02-deployment.yaml",
            "openshift-dns-operator",
            "dns-operator",
        ),
    ] {
        let want = image_of(&documents(&new_dir, file)[0]);
        let old_image = image_of(&documents(&old, file)[0]);
        assert_ne!(want, old_image, "{file}: the releases differ in the image");
        let live: Api<Deployment> = Api::namespaced(admin.clone(), ns);
        let d = serde_json::to_value(live.get(name).await.unwrap()).unwrap();
        assert_eq!(image_of(&d), want, "deployment {ns}/{name}");
    }

    // Every ClusterOperator of 4.22 reports its versions, OLM's included.
    let cos = cluster_operators(&admin);
    for name in [
        "operator-lifecycle-manager",
        "operator-lifecycle-manager-catalog",
        "operator-lifecycle-manager-packageserver",
        "olm",
        "console",
        "dns",
    ] {
        let co = cos.get(name).await.unwrap();
        let versions = &co.data["status"]["versions"];
        assert!(
            versions
                .as_array()
                .is_some_and(|v| v.iter().any(|e| e["version"] == "4.22.0")),
            "clusteroperator {name}: {versions}"
        );
    }
    assert_eq!(upgrade.report.counts.waited, 34);

    // A delete of 4.22 ran at its place and the object is gone.
    let deleted = report
        .timeline
        .phase(Phase::Upgrade)
        .find(|e| {
            e.action == TimelineAction::Delete
                && e.object.kind == "CronJob"
                && e.object.name == "collect-profiles"
        })
        .unwrap_or_else(|| panic!("no delete of CronJob collect-profiles: {}", report.text()));
    assert!(deleted.succeeded(), "{deleted:?}");
    let cronjobs: Api<k8s_openapi::api::batch::v1::CronJob> =
        Api::namespaced(admin.clone(), "openshift-operator-lifecycle-manager");
    assert!(
        cronjobs
            .get_opt("collect-profiles")
            .await
            .unwrap()
            .is_none(),
        "CronJob collect-profiles is still there"
    );

    // Create-only Console `cluster` exists and was left alone by the upgrade.
    let console_skipped = report
        .timeline
        .phase(Phase::Upgrade)
        .any(|e| e.object.kind == "Console" && e.object.name == "cluster" && e.succeeded());
    assert!(console_skipped, "{}", report.text());

    // The ImageStreams went through the Go round trip, as the CVO writes them.
    let is_ar = ApiResource {
        group: "image.openshift.io".into(),
        version: "v1".into(),
        api_version: "image.openshift.io/v1".into(),
        kind: "ImageStream".into(),
        plural: "imagestreams".into(),
    };
    let streams: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "openshift", &is_ar);
    let cli = streams.get("cli").await.unwrap();
    assert_eq!(
        cli.data["spec"]["lookupPolicy"],
        serde_json::json!({"local": false})
    );
    assert_eq!(
        cli.data["spec"]["tags"][0]["referencePolicy"],
        serde_json::json!({"type": ""})
    );

    // What `--cleanup` does, now that the cluster has been looked at.
    let old_plan = support::apply::plan(&o.from, minicvo::plan::Mode::Initializing);
    let new_plan = support::apply::plan(&o.to, minicvo::plan::Mode::Updating);
    minicvo::e2e::cleanup::clean(
        &plane.e2e_clients().await.apply.client,
        &[&old_plan, &new_plan],
        Duration::from_secs(180),
    )
    .await
    .unwrap_or_else(|e| panic!("cleaning up: {e}"));
    support::openshift::assert_real_crds(&admin, "Default").await;
}
