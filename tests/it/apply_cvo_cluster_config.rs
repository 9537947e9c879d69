//! The `cvo` strategy's reads of the cluster's config objects, with the real ClusterVersion,
//! Proxy and APIServer CRDs of openshift-multi. Runs on a private test plane: those CRDs and
//! their `version`/`cluster` objects are cluster-wide, and an owner reference to a shared
//! ClusterVersion would let its deletion garbage-collect other tests' objects.
//!
//! With ClusterVersion `version`, Proxy `cluster` (with a proxy in its status) and APIServer
//! `cluster`: every written object carries the ClusterVersion owner reference (a create-only
//! one not as controller), the annotated Deployment gets the proxy variables and the annotated
//! ConfigMap the TLS profile. With `--no-cluster-version` the owner reference is left out.

use crate::support::{self, fault::plane};

use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const INCLUDE: &str = "include.release.openshift.io/self-managed-high-availability";

fn config_api(client: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

fn payload(dir: &Path, ns: &str) -> PathBuf {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    let docs = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "op", "namespace": ns,
                "annotations": {"config.openshift.io/inject-proxy": "c"}},
            "spec": {"selector": {"matchLabels": {"app": "op"}},
                "template": {"metadata": {"labels": {"app": "op"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.example/op:1"}]}}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "op-config", "namespace": ns,
                "annotations": {"config.openshift.io/inject-tls": "true"}},
            "data": {"config.yaml": "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\n"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "once", "namespace": ns,
                "annotations": {"release.openshift.io/create-only": "true"}}}),
    ];
    for (i, mut d) in docs.into_iter().enumerate() {
        d["metadata"]["annotations"][INCLUDE] = json!("true");
        std::fs::write(rm.join(format!("0000_50_cfg_{i:02}.yaml")), d.to_string()).unwrap();
    }
    std::fs::write(
        rm.join("release-metadata"),
        json!({"kind": "cincinnati-metadata-v0", "version": "1.0.0"}).to_string(),
    )
    .unwrap();
    dir.to_path_buf()
}

fn apply(payload: &Path, kubeconfig: &Path, extra: &[&str]) {
    let out = assert_cmd::Command::cargo_bin("minicvo")
        .unwrap()
        .arg("apply")
        .arg(payload)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--no-progress", "--mode", "updating"])
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn live(client: &Client, ns: &str, kind: &str, name: &str) -> Value {
    let (ar, plural) = match kind {
        "Deployment" => (GroupVersionKind::gvk("apps", "v1", kind), "deployments"),
        _ => (GroupVersionKind::gvk("", "v1", kind), "configmaps"),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&ar, plural),
    );
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

#[tokio::test]
async fn owner_reference_proxy_and_tls_come_from_the_cluster_objects() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    for crd in [
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
        "0000_03_config-operator_01_proxies.crd.yaml",
        "0000_10_config-operator_01_apiservers-Default.crd.yaml",
    ] {
        support::install_corpus_crd(&client, crd).await;
    }
    let pp = PostParams::default();
    let cv = config_api(&client, "ClusterVersion", "clusterversions")
        .create(
            &pp,
            &serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
                "kind": "ClusterVersion", "metadata": {"name": "version"},
                "spec": {"clusterID": "5b2a3c1e-0000-4000-8000-000000000001"}}))
            .unwrap(),
        )
        .await
        .expect("ClusterVersion version");
    let cv_uid = cv.metadata.uid.clone().unwrap();
    let proxies = config_api(&client, "Proxy", "proxies");
    proxies
        .create(
            &pp,
            &serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
                "kind": "Proxy", "metadata": {"name": "cluster"}, "spec": {}}))
            .unwrap(),
        )
        .await
        .expect("Proxy cluster");
    proxies
        .patch_status(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"httpProxy": "http://proxy.example:3128",
                "httpsProxy": "http://proxy.example:3129", "noProxy": ".cluster.local"}})),
        )
        .await
        .expect("Proxy status");
    config_api(&client, "APIServer", "apiservers")
        .create(
            &pp,
            &serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
                "kind": "APIServer", "metadata": {"name": "cluster"}, "spec": {}}))
            .unwrap(),
        )
        .await
        .expect("APIServer cluster");

    let tmp = tempfile::tempdir().unwrap();
    let kc = plane.kubeconfig();
    apply(&payload(&tmp.path().join("a"), "cfg-a"), &kc, &[]);

    let owner = |o: &Value| o["metadata"]["ownerReferences"].clone();
    let d = live(&client, "cfg-a", "Deployment", "op").await;
    assert_eq!(
        owner(&d),
        json!([{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "name": "version", "uid": cv_uid, "controller": true}])
    );
    let env = &d["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(
        env,
        &json!([{"name": "HTTP_PROXY", "value": "http://proxy.example:3128"},
            {"name": "HTTPS_PROXY", "value": "http://proxy.example:3129"},
            {"name": "NO_PROXY", "value": ".cluster.local"}])
    );
    let cm = live(&client, "cfg-a", "ConfigMap", "op-config").await;
    assert_eq!(owner(&cm)[0]["controller"], json!(true));
    let config = cm["data"]["config.yaml"].as_str().unwrap();
    assert!(
        config.contains("minTLSVersion: VersionTLS12") && config.contains("cipherSuites:"),
        "{config}"
    );
    let once = live(&client, "cfg-a", "ConfigMap", "once").await;
    assert_eq!(
        owner(&once),
        json!([{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "name": "version", "uid": cv_uid}]),
        "create-only: the owner reference without controller"
    );

    // Without ClusterVersion reading: no owner reference; the injections still run.
    apply(
        &payload(&tmp.path().join("b"), "cfg-b"),
        &kc,
        &["--no-cluster-version"],
    );
    let d = live(&client, "cfg-b", "Deployment", "op").await;
    assert!(owner(&d).is_null(), "{d:#}");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"],
        "HTTP_PROXY"
    );
}
