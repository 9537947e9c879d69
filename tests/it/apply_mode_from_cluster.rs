//! `minicvo apply` without `--mode` takes the CVO's mode from ClusterVersion `version`: no
//! ClusterVersion or no completed update → initializing, the payload's release completed last
//! → reconciling, another release → updating; it prints which and why, and `--mode` wins.
//!
//! Runs on a private test plane: it installs the real ClusterVersion CRD and owns the
//! cluster-wide `version` object.

use crate::support::fault::plane;

use std::path::{Path, PathBuf};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

fn write_payload(dir: &Path) -> PathBuf {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    std::fs::write(
        rm.join("0000_50_modes_00_ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mode-test\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n",
    )
    .unwrap();
    dir.to_path_buf()
}

/// `minicvo apply --dry-run server` (nothing written), returning its stderr.
fn apply(payload: &Path, kubeconfig: &Path, version: &str, extra: &[&str]) -> String {
    let out = crate::support::cli::command(&[])
        .arg("apply")
        .arg(payload)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--no-progress",
            "--dry-run",
            "server",
            "--release-version",
            version,
        ])
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn history(state: &str, version: &str) -> serde_json::Value {
    json!({"state": state, "version": version, "image": "", "verified": false,
           "startedTime": "2026-01-01T00:00:00Z",
           "completionTime": if state == "Completed" { json!("2026-01-01T00:10:00Z") } else { json!(null) }})
}

#[tokio::test]
async fn apply_takes_its_mode_from_the_clusterversion_history() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    let tmp = tempfile::tempdir().unwrap();
    let payload = write_payload(tmp.path());
    let kc = plane.kubeconfig();

    // Not even served.
    let e = apply(&payload, &kc, "1.0.0", &[]);
    assert!(
        e.contains("mode: initializing (no ClusterVersion \"version\" in the cluster)"),
        "{e}"
    );

    crate::support::install_corpus_crd(
        &client,
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    )
    .await;
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    let cv: DynamicObject = serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
        "kind": "ClusterVersion", "metadata": {"name": "version"},
        "spec": {"clusterID": "6f1d0b6e-6a0f-4b53-9b7a-1a2b3c4d5e6f"}}))
    .unwrap();
    api.create(&PostParams::default(), &cv).await.unwrap();
    let set_history = |entries: Vec<serde_json::Value>| {
        let api = api.clone();
        async move {
            let mut cv = api.get("version").await.unwrap();
            cv.data["status"] = json!({"desired": {"version": "", "image": ""},
                "observedGeneration": 1, "versionHash": "", "availableUpdates": null,
                "history": entries});
            api.replace_status("version", &PostParams::default(), &cv)
                .await
                .unwrap();
        }
    };

    let e = apply(&payload, &kc, "1.0.0", &[]);
    assert!(
        e.contains("mode: initializing (no completed update in the ClusterVersion history)"),
        "{e}"
    );

    set_history(vec![history("Partial", "1.0.0")]).await;
    let e = apply(&payload, &kc, "1.0.0", &[]);
    assert!(e.contains("mode: initializing (no completed update"), "{e}");

    set_history(vec![history("Completed", "1.0.0")]).await;
    let e = apply(&payload, &kc, "1.0.0", &[]);
    assert!(
        e.contains("mode: reconciling (the cluster already runs 1.0.0)"),
        "{e}"
    );
    let e = apply(&payload, &kc, "2.0.0", &[]);
    assert!(e.contains("mode: updating (the cluster runs 1.0.0)"), "{e}");

    set_history(vec![
        history("Partial", "2.0.0"),
        history("Completed", "1.0.0"),
    ])
    .await;
    let e = apply(&payload, &kc, "2.0.0", &[]);
    assert!(
        e.contains("mode: updating (the newest history entry, 2.0.0, is Partial)"),
        "{e}"
    );

    // --mode overrides, and says nothing about the cluster.
    let e = apply(&payload, &kc, "2.0.0", &["--mode", "reconciling"]);
    assert!(!e.lines().any(|l| l.starts_with("mode: ")), "{e}");
    assert!(e.contains("in reconciling mode"), "{e}");
    let e = apply(&payload, &kc, "2.0.0", &["--no-cluster-version"]);
    assert!(e.contains("mode: updating (--no-cluster-version"), "{e}");
}
