//! Create-only as the CVO does it: read first, and leave an existing object alone without
//! sending it to the server. The API server validates a create before it finds the name
//! taken, so a POST of a create-only manifest that no longer validates fails with 422 even
//! though the object exists (4.22's `Console cluster` against its CRD); the CVO, which GETs
//! first, leaves the object alone and succeeds.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::support;
use crate::support::apply as apply_util;

const CREATE_ONLY: (&str, &str) = ("release.openshift.io/create-only", "true");

#[tokio::test]
async fn create_only_leaves_an_existing_object_alone_even_when_its_manifest_is_invalid() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "create-only").await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let existing: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "settings"},
        "data": {"mine": "kept"}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &existing).await.unwrap();

    // The same name, with a data key the API server rejects (a create of it is 422), and a
    // create-only object that does not exist yet.
    let invalid = apply_util::config_map(&ns, "settings", "1", &[CREATE_ONLY])
        .replace("  key: \"1\"", "  \"not a valid key!\": \"1\"");
    let files = vec![
        ("0000_10_alpha_00_settings.yaml".to_string(), invalid),
        (
            "0000_10_alpha_01_fresh.yaml".to_string(),
            apply_util::config_map(&ns, "fresh", "1", &[CREATE_ONLY]),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "1.0.0", &files);

    let output = assert_cmd::Command::from_std(apply_util::apply_command(dir.path(), &[]))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["counts"]["createOnlySkipped"], 1, "{report:#}");
    assert_eq!(report["counts"]["created"], 1, "{report:#}");
    assert_eq!(report["counts"]["failed"], 0, "{report:#}");

    let settings = cms.get("settings").await.unwrap();
    let data = settings.data.unwrap_or_default();
    assert_eq!(data.get("mine").map(String::as_str), Some("kept"));
    assert_eq!(
        data.len(),
        1,
        "the existing object was left alone: {data:?}"
    );
    let fresh = cms.get("fresh").await.unwrap();
    assert_eq!(
        fresh
            .data
            .unwrap_or_default()
            .get("key")
            .map(String::as_str),
        Some("1")
    );
}
