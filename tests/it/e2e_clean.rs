//! `--clean` (`minicvo::e2e::cleanup::clean`) on the test control plane: it empties and
//! finalizes the payload's namespaces itself, waits for what finalizers hold, and leaves
//! nothing that a namespace of the same name created afterwards would find.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use minicvo::{Filters, LoadOptions, Mode};
use serde_json::json;

use crate::support;

const INCLUDE: &str = "include.release.openshift.io/self-managed-high-availability";

/// A payload of one Namespace `ns` and one ConfigMap in it.
fn payload(dir: &std::path::Path, ns: &str) -> minicvo::Plan {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    std::fs::write(
        rm.join("0000_10_clean_00_namespace.yaml"),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        rm.join("0000_10_clean_01_configmap.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: in-payload\n  namespace: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n"
        ),
    )
    .unwrap();
    let options = LoadOptions {
        release_version: Some("4.99.0".into()),
        ..LoadOptions::default()
    };
    let loaded = minicvo::load(dir, &options).unwrap();
    minicvo::plan::from_payload(loaded, &Filters::default(), Mode::Initializing, 0)
}

async fn create_namespace(namespaces: &Api<Namespace>, name: &str) {
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

#[tokio::test]
async fn clean_empties_and_finalizes_namespaces_and_nothing_survives_into_the_next_round() {
    let client = support::admin_client().await;
    let ns = support::unique_name("clean");
    let _guard = support::NamespaceGuard::adopt(ns.clone());
    let dir = tempfile::tempdir().unwrap();
    let plan = payload(dir.path(), &ns);

    // A round's leftovers: the payload's objects and others nobody's payload names (a Secret,
    // a Lease of another API group), and a ConfigMap a finalizer holds.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_namespace(&namespaces, &ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for (name, finalizers) in [
        ("in-payload", json!([])),
        ("left-by-an-operator", json!([])),
        ("held", json!(["example.com/hold"])),
    ] {
        let cm = json!({"metadata": {"name": name, "finalizers": finalizers}, "data": {"k": "v"}});
        cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
            .await
            .unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "token"}})).unwrap(),
        )
        .await
        .unwrap();
    // Leases are served by every plane: a kind of a group other than the core one.
    let lease_gvk = GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease");
    let lease_ar = kube::api::ApiResource::from_gvk(&lease_gvk);
    let leases: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &lease_ar);
    let mut lease = DynamicObject::new("leader", &lease_ar);
    lease.data = json!({"spec": {"holderIdentity": "old-pod"}});
    leases.create(&PostParams::default(), &lease).await.unwrap();

    // The finalizer is removed a moment after the clean started: the clean must wait for it.
    let released = Arc::new(AtomicBool::new(false));
    let release = {
        let (cms, released) = (cms.clone(), released.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            released.store(true, Ordering::SeqCst);
            cms.patch(
                "held",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        })
    };
    let cleaned = minicvo::e2e::cleanup::clean(&client, &[&plan], Duration::from_secs(60))
        .await
        .unwrap();
    assert!(
        released.load(Ordering::SeqCst),
        "the clean ended while a finalizer still held an object of the namespace"
    );
    release.await.unwrap();
    assert!(cleaned.deleted >= 1, "{cleaned:?}");
    assert!(
        namespaces.get_opt(&ns).await.unwrap().is_none(),
        "namespace {ns} still exists after the clean"
    );

    // The next round creates the namespace again: it is empty.
    create_namespace(&namespaces, &ns).await;
    let lp = ListParams::default();
    let left: Vec<String> = cms
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    assert!(left.is_empty(), "ConfigMaps of the last round: {left:?}");
    assert!(secrets.list(&lp).await.unwrap().items.is_empty());
    assert!(leases.list(&lp).await.unwrap().items.is_empty());
}

/// A payload of the Namespaces `names`.
fn namespaces_payload(dir: &std::path::Path, names: &[String]) -> minicvo::Plan {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    for (i, ns) in names.iter().enumerate() {
        std::fs::write(
            rm.join(format!("0000_10_reclean_{i:02}_namespace.yaml")),
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n"
            ),
        )
        .unwrap();
    }
    let loaded = minicvo::load(dir, &LoadOptions::default()).unwrap();
    minicvo::plan::from_payload(loaded, &Filters::default(), Mode::Initializing, 0)
}

/// Creates the namespaces and `per_ns` ConfigMaps labelled `round` in each.
async fn fill(client: &kube::Client, names: &[String], round: &str, per_ns: usize) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in names {
        create_namespace(&namespaces, ns).await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..per_ns {
            let cm = json!({"metadata": {"name": format!("cm-{i}"), "labels": {"round": round}}});
            cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
                .await
                .unwrap();
        }
    }
}

/// Namespaces filled by one round, cleaned, and created again by the next at once: nothing of
/// the next round is deleted afterwards. (kube-controller-manager's namespace controller
/// deletes by namespace *name* while its pass over a terminating namespace lasts, so a clean
/// that removed the namespaces before that pass ended let it empty the next round's.)
#[tokio::test]
async fn the_next_round_in_namespaces_of_the_same_names_is_left_alone() {
    let client = support::admin_client().await;
    let names: Vec<String> = (0..4).map(|_| support::unique_name("reclean")).collect();
    let _guards: Vec<_> = names
        .iter()
        .map(|n| support::NamespaceGuard::adopt(n.clone()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let plan = namespaces_payload(dir.path(), &names);
    fill(&client, &names, "1", 30).await;
    minicvo::e2e::cleanup::clean(&client, &[&plan], Duration::from_secs(60))
        .await
        .unwrap();
    fill(&client, &names, "2", 30).await;
    // No event marks the end of a deletion that should not happen: the next round's objects
    // are counted again after a window longer than the namespace controller's pass.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cms: Api<ConfigMap> = Api::all(client.clone());
    let lp = ListParams::default().labels("round");
    let mut left: Vec<String> = Vec::new();
    for c in cms.list(&lp).await.unwrap().items {
        let ns = c.metadata.namespace.unwrap_or_default();
        if names.contains(&ns) {
            let round = c.metadata.labels.unwrap_or_default()["round"].clone();
            left.push(format!(
                "{ns}/{} (round {round})",
                c.metadata.name.unwrap_or_default()
            ));
        }
    }
    let of_round_2 = left.iter().filter(|l| l.ends_with("(round 2)")).count();
    assert_eq!(
        (left.len(), of_round_2),
        (names.len() * 30, names.len() * 30),
        "the next round's ConfigMaps after the clean: {left:?}"
    );
}
