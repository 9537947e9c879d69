//! The ClusterVersion status minicvo computes (`minicvo::cvo::status`) is accepted, field for
//! field, by the real ClusterVersion CRD in every feature-set variant the OpenShift payload
//! ships, and `kubectl get clusterversion` shows it as on an OpenShift cluster.
//!
//! The real CRD is installed under its real name, so this runs on a private test plane
//! (`fault_support/plane.rs`), never on the suite's shared plane.

use crate::support::fault::plane;

use std::collections::BTreeMap;
use std::path::Path;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use minicvo::cvo::capabilities::CapabilityStatus;
use minicvo::cvo::error::{ApiErrorClass, summarize, task_error};
use minicvo::cvo::health::{self, OperandVersion};
use minicvo::cvo::status::{Release, ReleaseChecks, Risk, StatusInput, cluster_version_status};
use minicvo::cvo::version_hash::version_hash;
use minicvo::{LoadOptions, Mode};
use serde_json::{Value, json};

use crate::support::openshift::CLUSTER_VERSION_VARIANTS as VARIANTS;

fn cluster_versions(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    )
}

/// The CVO's write: PUT of the whole object to `/status`. Returns the status the server
/// stored.
async fn put_status(api: &Api<DynamicObject>, status: &Value) -> Value {
    let mut cv = api.get("version").await.unwrap();
    cv.data["status"] = status.clone();
    let stored = api
        .replace_status("version", &PostParams::default(), &cv)
        .await
        .unwrap_or_else(|e| panic!("status rejected: {e}\n{status:#}"));
    stored.data["status"].clone()
}

fn input(version: &str, now: &str, hash: &str) -> StatusInput {
    StatusInput {
        desired: Release {
            version: version.into(),
            image: format!(
                "quay.io/example/release@sha256:{:0>64}",
                version.replace('.', "")
            ),
            architecture: "Multi".into(),
        },
        generation: 1,
        version_hash: hash.into(),
        reconciling: false,
        completed: false,
        done: 0,
        total: 478,
        failure: None,
        operator_waits: BTreeMap::new(),
        capabilities: CapabilityStatus::all(),
        verified: false,
        deletions_in_progress: Vec::new(),
        checks: ReleaseChecks::default(),
        now: now.into(),
    }
}

/// Install, completion, an upgrade stuck on two unavailable operators with implicit
/// capabilities and a deletion in progress, and a reconcile error: every status the CVO
/// writes along the way.
fn statuses(hash: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut i = input("4.20.0", "2026-01-01T00:00:00Z", hash);
    let s = cluster_version_status(&Value::Null, &i);
    out.push(s.clone());
    i.done = 200;
    i.now = "2026-01-01T00:05:00Z".into();
    let s = cluster_version_status(&s, &i);
    out.push(s.clone());
    i.done = 478;
    i.completed = true;
    i.now = "2026-01-01T00:30:00Z".into();
    let s = cluster_version_status(&s, &i);
    out.push(s.clone());

    let live = json!({"status": {"conditions": [
        {"type": "Available", "status": "False", "reason": "Starting", "message": "not yet"}]}});
    let expected = [OperandVersion {
        name: "operator".into(),
        version: "4.21.0".into(),
    }];
    let mut u = input("4.21.0", "2026-01-02T00:00:00Z", hash);
    u.generation = 2;
    u.done = 300;
    u.failure = summarize(vec![
        health::check_operator("dns", &expected, &live, Mode::Updating).unwrap(),
        health::check_operator("etcd", &expected, &live, Mode::Updating).unwrap(),
    ]);
    u.capabilities.implicit = ["Console".to_string()].into_iter().collect();
    u.deletions_in_progress = vec!["configmap \"openshift-foo/old\"".into()];
    // A verified update with accepted risks, held back from minor updates by an operator.
    u.checks = ReleaseChecks {
        verified: true,
        accepted_risks: Some("Precondition \"ClusterVersionRecommendedUpdate\" failed because of \"NoChannel\": Configured channel is unset, so the recommended status of updating from 4.20.0 to 4.21.0 is unknown.".into()),
        risks: vec![Risk {
            name: "ClusterOperatorUpgradeable-network".into(),
            message: "the network is migrating".into(),
        }],
        refusal: None,
    };
    let s = cluster_version_status(&s, &u);
    out.push(s.clone());

    let mut r = input("4.21.0", "2026-01-03T00:00:00Z", hash);
    r.generation = 2;
    r.reconciling = true;
    r.failure = Some(task_error(
        "configmap \"openshift-foo/a\" (3 of 478)",
        ApiErrorClass::Invalid,
        "",
    ));
    out.push(cluster_version_status(&s, &r));
    out
}

async fn create_version(api: &Api<DynamicObject>) {
    if api.get_opt("version").await.unwrap().is_none() {
        let cv = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "spec": {"clusterID": "6f1d0b6e-6a0f-4b53-9b7a-1a2b3c4d5e6f"}});
        let cv: DynamicObject = serde_json::from_value(cv).unwrap();
        api.create(&PostParams::default(), &cv).await.unwrap();
    }
}

/// The check can fail: the real CRD rejects the status minicvo used to write.
async fn rejects_a_status_missing_required_fields(client: &Client, api: &Api<DynamicObject>) {
    crate::support::install_corpus_crd(
        client,
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    )
    .await;
    create_version(api).await;
    let mut cv = api.get("version").await.unwrap();
    cv.data["status"] = json!({"desired": {"version": "4.20.0", "image": ""},
        "history": [{"state": "Partial", "version": "4.20.0", "image": "",
                     "startedTime": "2026-01-01T00:00:00Z", "verified": false}]});
    let err = api
        .replace_status("version", &PostParams::default(), &cv)
        .await
        .unwrap_err();
    let text = err.to_string();
    for field in [
        "completionTime",
        "versionHash",
        "availableUpdates",
        "observedGeneration",
    ] {
        assert!(text.contains(field), "{field} not named in: {text}");
    }
}

#[tokio::test]
async fn cvo_status_is_stored_unchanged_by_every_real_clusterversion_crd() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    let payload = minicvo::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("payload/new"),
        &LoadOptions::default(),
    )
    .unwrap();
    let hash = version_hash(&payload.manifests);
    let api = cluster_versions(&client);
    let statuses = statuses(&hash);
    rejects_a_status_missing_required_fields(&client, &api).await;
    for variant in VARIANTS {
        crate::support::install_corpus_crd(
            &client,
            &format!("0000_00_cluster-version-operator_01_clusterversions-{variant}.crd.yaml"),
        )
        .await;
        create_version(&api).await;
        for status in &statuses {
            let stored = put_status(&api, status).await;
            assert_eq!(&stored, status, "{variant}: the server changed the status");
        }
    }

    // What `oc get clusterversion` shows for the stuck upgrade: the last completed version,
    // Available True from the install, Progressing True with the CVO's message.
    let stuck = &statuses[3];
    put_status(&api, stuck).await;
    let line =
        crate::support::openshift::clusterversion_line(&plane.kubectl(), &plane.kubeconfig());
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &columns[..4],
        ["version", "4.20.0", "True", "True"],
        "{line}"
    );
    assert!(
        line.trim_end()
            .ends_with("Unable to apply 4.21.0: some cluster operators are not available"),
        "{line}"
    );
    put_status(&api, &statuses[1]).await;
    let out = std::process::Command::new(plane.kubectl())
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .args(["get", "clusterversion", "version", "--no-headers"])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    let columns: Vec<&str> = line.split_whitespace().collect();
    // No completed version yet: VERSION is empty, so AVAILABLE comes second.
    assert_eq!(&columns[..3], ["version", "False", "True"], "{line}");
    assert!(
        line.trim_end()
            .ends_with("Working towards 4.20.0: 200 of 478 done (41% complete)"),
        "{line}"
    );
}
