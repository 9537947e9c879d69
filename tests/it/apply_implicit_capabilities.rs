//! Implicitly enabled capabilities at apply time: an upgrade (`apply --previous OLD`) where a
//! manifest the cluster runs moved under a capability that is not enabled keeps it applied,
//! and ClusterVersion records the capability (`capabilities.enabledCapabilities`, the
//! ImplicitlyEnabledCapabilities condition). A later apply without `--previous` keeps the
//! capability enabled because ClusterVersion has it enabled.
//!
//! Runs on a private test plane with the REAL ClusterVersion CRD (cluster-wide, fixed name).

use crate::support;
use crate::support::apply as apply_util;
use crate::support::fault::plane;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

const NS: &str = "implicit-caps";
const CAPABILITY: (&str, &str) = ("capability.openshift.io/name", "Insights");

fn payload(dir: &Path, version: &str, moved: bool) -> PathBuf {
    let annotations: &[(&str, &str)] = if moved { &[CAPABILITY] } else { &[] };
    apply_util::write_payload(
        dir,
        version,
        &[
            (
                "0000_50_caps_00_namespace.yaml".into(),
                apply_util::namespace(NS),
            ),
            (
                "0000_50_caps_01_config.yaml".into(),
                apply_util::config_map(NS, "moved", version, annotations),
            ),
        ],
    )
}

struct Run {
    code: i32,
    stderr: String,
}

fn apply(payload: &Path, kubeconfig: &Path, extra: &[&str]) -> Run {
    let out = assert_cmd::Command::cargo_bin("minicvo")
        .unwrap()
        .arg("apply")
        .arg(payload)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--no-progress", "--capabilities", "MachineAPI"])
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn condition(status: &Value, kind: &str) -> (String, String, String) {
    let c = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {status:#}"))
        .clone();
    let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (f("status"), f("reason"), f("message"))
}

fn enabled(status: &Value) -> Vec<String> {
    status["capabilities"]["enabledCapabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_upgrade_keeps_a_manifest_that_moved_under_a_disabled_capability() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    support::install_corpus_crd(
        &client,
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    )
    .await;
    let kc = plane.kubeconfig();
    let tmp = tempfile::tempdir().unwrap();
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let versions: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let value = |cm: ConfigMap| cm.data.unwrap_or_default()["key"].clone();

    // Install 1.0.0 with only MachineAPI: the ConfigMap has no capability.
    let p1 = payload(&tmp.path().join("p1"), "1.0.0", false);
    let run = apply(&p1, &kc, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = versions.get("version").await.unwrap().data["status"].clone();
    assert_eq!(enabled(&s), ["MachineAPI"]);
    assert_eq!(
        condition(&s, "ImplicitlyEnabledCapabilities"),
        (
            "False".into(),
            "AsExpected".into(),
            "Capabilities match configured spec".into()
        )
    );

    // 2.0.0 moves it under Insights, which is off: the update implies Insights.
    let p2 = payload(&tmp.path().join("p2"), "2.0.0", true);
    let run = apply(&p2, &kc, &["--previous", p1.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "capability Insights is implicitly enabled: ConfigMap {NS}/moved moved under it"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(value(config_maps.get("moved").await.unwrap()), "2.0.0");
    let s = versions.get("version").await.unwrap().data["status"].clone();
    assert_eq!(enabled(&s), ["Insights", "MachineAPI"]);
    let implicit = (
        "True".to_string(),
        "CapabilitiesImplicitlyEnabled".to_string(),
        "The following capabilities could not be disabled: Insights".to_string(),
    );
    assert_eq!(condition(&s, "ImplicitlyEnabledCapabilities"), implicit);

    // 3.0.0 without --previous: ClusterVersion has Insights enabled, so it stays enabled.
    let p3 = payload(&tmp.path().join("p3"), "3.0.0", true);
    let run = apply(&p3, &kc, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("capabilities Insights stay enabled"),
        "{}",
        run.stderr
    );
    assert_eq!(value(config_maps.get("moved").await.unwrap()), "3.0.0");
    let s = versions.get("version").await.unwrap().data["status"].clone();
    assert_eq!(enabled(&s), ["Insights", "MachineAPI"]);
    assert_eq!(condition(&s, "ImplicitlyEnabledCapabilities"), implicit);
}
