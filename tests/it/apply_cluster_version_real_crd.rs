//! `minicvo apply` records install, upgrade and a failed upgrade in ClusterVersion `version`
//! served by the REAL ClusterVersion CRD, with the full status the CVO writes; a failed
//! upgrade exits 1; then an install and a failed upgrade under every other feature-set
//! variant of the real CRD. Runs on a private test plane (the real CRD under its real name).

use crate::support::fault::plane;

use std::path::{Path, PathBuf};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

const INCLUDE: &str = "    include.release.openshift.io/self-managed-high-availability: \"true\"\n";

fn payload(dir: &Path, broken: bool) -> PathBuf {
    payload_in(dir, broken, "cvtest")
}

/// The test payload with its objects in namespace `ns`.
fn payload_in(dir: &Path, broken: bool, ns: &str) -> PathBuf {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    std::fs::write(
        rm.join("0000_50_cvtest_00_ns.yaml"),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n{INCLUDE}"
        ),
    )
    .unwrap();
    std::fs::write(
        rm.join("0000_50_cvtest_01_cm.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: {ns}\n  annotations:\n{INCLUDE}data:\n  dir: {}\n", dir.display()),
    )
    .unwrap();
    if broken {
        // An invalid key: the server answers 422 Invalid.
        std::fs::write(
            rm.join("0000_50_cvtest_02_cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\n  annotations:\n{INCLUDE}data:\n  \"bad key!\": x\n"),
        )
        .unwrap();
    }
    dir.to_path_buf()
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn apply(payload: &Path, kubeconfig: &Path, version: &str) -> Run {
    let out = crate::support::cli::command(&[])
        .arg("apply")
        .arg(payload)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--no-progress",
            "--release-version",
            version,
            "--release-image",
        ])
        .arg(format!("example.com/release:{version}"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn cond(status: &Value, kind: &str) -> (String, String, String) {
    let c = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {status:#}"));
    let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (f("status"), f("reason"), f("message"))
}

fn history(status: &Value) -> Vec<(String, String, bool)> {
    status["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["version"].as_str().unwrap().to_string(),
                h["state"].as_str().unwrap().to_string(),
                h["completionTime"].is_null(),
            )
        })
        .collect()
}

fn t(s: &str, r: &str, m: &str) -> (String, String, String) {
    (s.into(), r.into(), m.into())
}

#[tokio::test]
async fn install_upgrade_and_failed_upgrade_are_recorded_in_the_real_clusterversion() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    let kc = plane.kubeconfig();
    let tmp = tempfile::tempdir().unwrap();
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );

    // Install.
    let p1 = payload(&tmp.path().join("p1"), false);
    let run = apply(&p1, &kc, "1.0.0");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("mode: initializing"), "{}", run.stderr);
    assert!(
        run.stdout.contains("clusterversion version: recorded"),
        "{}",
        run.stdout
    );
    let s = api.get("version").await.unwrap().data["status"].clone();
    assert_eq!(history(&s), [("1.0.0".into(), "Completed".into(), false)]);
    assert_eq!(s["desired"]["version"], "1.0.0");
    assert_eq!(s["desired"]["image"], "example.com/release:1.0.0");
    assert!(s["availableUpdates"].is_null());
    assert_eq!(s["versionHash"].as_str().map(str::len), Some(12), "{s:#}");
    assert_eq!(cond(&s, "Available"), t("True", "", "Done applying 1.0.0"));
    assert_eq!(
        cond(&s, "Progressing"),
        t("False", "", "Cluster version is 1.0.0")
    );
    assert_eq!(cond(&s, "Failing"), t("False", "", ""));
    assert_eq!(cond(&s, "ReleaseAccepted").1, "PayloadLoaded");
    assert_eq!(
        cond(&s, "ImplicitlyEnabledCapabilities"),
        t("False", "AsExpected", "Capabilities match configured spec")
    );
    assert_eq!(cond(&s, "RetrievedUpdates").0, "False");
    assert!(
        s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "Upgradeable")
    );
    let line =
        crate::support::openshift::clusterversion_line(&plane.kubectl(), &plane.kubeconfig());
    assert!(line.ends_with("Cluster version is 1.0.0"), "{line}");
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[..4], ["version", "1.0.0", "True", "False"], "{line}");

    // Upgrade.
    let p2 = payload(&tmp.path().join("p2"), false);
    let run = apply(&p2, &kc, "2.0.0");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("mode: updating (the cluster runs 1.0.0)"),
        "{}",
        run.stderr
    );
    let s = api.get("version").await.unwrap().data["status"].clone();
    assert_eq!(
        history(&s),
        [
            ("2.0.0".into(), "Completed".into(), false),
            ("1.0.0".into(), "Completed".into(), false)
        ]
    );
    assert_eq!(
        cond(&s, "Progressing"),
        t("False", "", "Cluster version is 2.0.0")
    );
    assert_eq!(cond(&s, "Available"), t("True", "", "Done applying 2.0.0"));

    // A failed upgrade: exit 1, Failing with the CVO's reason, the entry stays Partial.
    let p3 = payload(&tmp.path().join("p3"), true);
    let run = apply(&p3, &kc, "3.0.0");
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let s = api.get("version").await.unwrap().data["status"].clone();
    assert_eq!(
        history(&s),
        [
            ("3.0.0".into(), "Partial".into(), true),
            ("2.0.0".into(), "Completed".into(), false),
            ("1.0.0".into(), "Completed".into(), false)
        ]
    );
    assert_eq!(
        cond(&s, "Failing"),
        t(
            "True",
            "UpdatePayloadResourceInvalid",
            "Could not update configmap \"cvtest/c\" (3 of 3): the object is invalid, possibly due to local cluster configuration"
        )
    );
    assert_eq!(
        cond(&s, "Progressing"),
        t(
            "True",
            "UpdatePayloadResourceInvalid",
            "Unable to apply 3.0.0: some cluster configuration is invalid"
        )
    );
    assert_eq!(cond(&s, "Available"), t("True", "", "Done applying 2.0.0"));
    assert_eq!(cond(&s, "Upgradeable").1, "ClusterVersionUpdating");
    let line =
        crate::support::openshift::clusterversion_line(&plane.kubectl(), &plane.kubeconfig());
    assert!(
        line.ends_with("Unable to apply 3.0.0: some cluster configuration is invalid"),
        "{line}"
    );

    crate::support::openshift::assert_real_crds(&client, "Default").await;

    // Every other feature-set variant of the real CRD: a fresh install (no `version` yet) and a
    // failed upgrade, each recorded in full.
    for variant in crate::support::openshift::CLUSTER_VERSION_VARIANTS {
        if variant == "Default" {
            continue;
        }
        let file = crate::support::openshift::cluster_version_crd(variant);
        crate::support::openshift::install(&client, &file).await;
        // The suite's check notices that the served CRD is not the Default one.
        let schema = |f: &str| {
            serde_json::to_value(&crate::support::openshift::corpus_crd(f).spec.versions).unwrap()
        };
        if schema(&file) != schema(&crate::support::openshift::cluster_version_crd("Default")) {
            let c = client.clone();
            let check = tokio::spawn(async move {
                crate::support::openshift::assert_real_crds(&c, "Default").await;
            });
            assert!(
                check.await.is_err(),
                "{variant}: assert_real_crds accepted another CRD than the Default one"
            );
        }
        // ClusterVersion has no finalizer: gone when the DELETE returns. A fresh install:
        // objects of their own (the previous ones still carry the deleted ClusterVersion's
        // owner reference, which the new one's would join as a second controller).
        crate::support::delete_quietly(&api, "version").await;
        let ns = format!("cvtest-{}", variant.to_lowercase());
        let p1 = payload_in(&tmp.path().join(format!("p1-{ns}")), false, &ns);
        let p3 = payload_in(&tmp.path().join(format!("p3-{ns}")), true, &ns);
        let run = apply(&p1, &kc, "1.0.0");
        assert_eq!(run.code, 0, "{variant}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("clusterversion version: recorded"),
            "{variant}: {}",
            run.stdout
        );
        let s = api.get("version").await.unwrap().data["status"].clone();
        assert_eq!(
            history(&s),
            [("1.0.0".into(), "Completed".into(), false)],
            "{variant}"
        );
        assert_eq!(
            cond(&s, "Available"),
            t("True", "", "Done applying 1.0.0"),
            "{variant}"
        );
        assert_eq!(
            cond(&s, "Progressing"),
            t("False", "", "Cluster version is 1.0.0"),
            "{variant}"
        );
        let run = apply(&p3, &kc, "3.0.0");
        assert_eq!(run.code, 1, "{variant}: {}\n{}", run.stdout, run.stderr);
        let s = api.get("version").await.unwrap().data["status"].clone();
        assert_eq!(
            history(&s),
            [
                ("3.0.0".into(), "Partial".into(), true),
                ("1.0.0".into(), "Completed".into(), false)
            ],
            "{variant}"
        );
        assert_eq!(
            cond(&s, "Failing").1,
            "UpdatePayloadResourceInvalid",
            "{variant}"
        );
        let live = kube::Api::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >::all(client.clone())
        .get("clusterversions.config.openshift.io")
        .await
        .unwrap();
        let want = crate::support::openshift::corpus_crd(&file);
        assert_eq!(
            serde_json::to_value(&live.spec.versions[0].schema).unwrap(),
            serde_json::to_value(&want.spec.versions[0].schema).unwrap(),
            "{variant}: the served CRD is not the corpus variant"
        );
    }
}

/// A first install on a cluster that does not serve ClusterVersion, of a payload that carries
/// the real ClusterVersion CRD: the run creates the CRD and `version` before its first write,
/// as OpenShift's bootstrap and the CVO do, so the install's objects carry the owner reference.
#[tokio::test]
async fn a_first_install_creates_clusterversion_before_its_first_write() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    let tmp = tempfile::tempdir().unwrap();
    let p = payload_in(&tmp.path().join("p"), false, "cvfirst");
    let file = crate::support::openshift::cluster_version_crd("Default");
    std::fs::copy(
        crate::support::corpus("openshift-multi/release-manifests").join(&file),
        p.join("release-manifests").join(&file),
    )
    .unwrap();
    let run = apply(&p, &plane.kubeconfig(), "1.0.0");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("clusterversion version: recorded"),
        "{}",
        run.stdout
    );
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let cvs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    let uid = cvs.get("version").await.unwrap().metadata.uid.unwrap();
    let owners =
        |o: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>| {
            o.unwrap_or_default()
                .into_iter()
                .map(|r| (r.kind, r.name, r.uid, r.controller))
                .collect::<Vec<_>>()
        };
    let want = vec![(
        "ClusterVersion".to_string(),
        "version".to_string(),
        uid,
        Some(true),
    )];
    let ns = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get("cvfirst")
        .await
        .unwrap();
    assert_eq!(
        owners(ns.metadata.owner_references),
        want,
        "Namespace cvfirst"
    );
    let cm = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), "cvfirst")
        .get("a")
        .await
        .unwrap();
    assert_eq!(
        owners(cm.metadata.owner_references),
        want,
        "ConfigMap cvfirst/a"
    );
}
