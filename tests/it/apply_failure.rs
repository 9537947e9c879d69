//! A failing manifest in one component: the other components of its run-level still finish,
//! the rest of its own node and every later run-level do not start, and `minicvo apply` exits
//! 1 with errors naming the file and object, and a message saying why the rest did not run.
//! Run through the binary, so the exit code and the JSON contract are checked too.

use crate::support;
use crate::support::apply as apply_util;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

#[tokio::test]
async fn a_failing_component_lets_siblings_finish_and_stops_later_run_levels() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "fail").await;
    let mut files = vec![];
    for i in 0..4 {
        files.push((
            format!("0000_10_alpha_{i:02}_config.yaml"),
            apply_util::config_map(&ns, &format!("alpha-{i}"), "1", &[]),
        ));
    }
    files.push((
        "0000_10_bravo_00_config.yaml".into(),
        apply_util::config_map(&ns, "bravo-first", "1", &[]),
    ));
    files.push((
        "0000_10_bravo_01_invalid.yaml".into(),
        apply_util::config_map(&ns, "Not_A_Valid_Name", "1", &[]),
    ));
    files.push((
        "0000_10_bravo_02_config.yaml".into(),
        apply_util::config_map(&ns, "bravo-after", "1", &[]),
    ));
    files.push((
        "0000_10_charlie_00_config.yaml".into(),
        apply_util::config_map(&ns, "charlie", "1", &[]),
    ));
    files.push((
        "0000_20_delta_00_config.yaml".into(),
        apply_util::config_map(&ns, "delta", "1", &[]),
    ));
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "1.0.0", &files);

    let output = assert_cmd::Command::from_std(apply_util::apply_command(dir.path(), &[]))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["kind"], "ApplyResult");
    assert_eq!(report["ok"], false);
    let errors = report["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let e = &errors[0];
    assert_eq!(e["file"], "release-manifests/0000_10_bravo_01_invalid.yaml");
    assert_eq!(e["kind"], "ConfigMap");
    assert_eq!(e["namespace"], ns.as_str());
    assert_eq!(e["name"], "Not_A_Valid_Name");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("Invalid"), "{message}");
    assert_eq!(report["counts"]["failed"], 1);
    // bravo-after (rest of the node) and delta (next run-level) never started.
    assert_eq!(report["counts"]["notRun"], 2);
    assert!(
        stderr.contains("0000_10_bravo_01_invalid.yaml#0 ConfigMap"),
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains("2 tasks did not run because a node they depend on failed"),
        "stderr: {stderr}"
    );

    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    for name in [
        "alpha-0",
        "alpha-1",
        "alpha-2",
        "alpha-3",
        "bravo-first",
        "charlie",
    ] {
        assert!(
            cms.get_opt(name).await.unwrap().is_some(),
            "{name} was not applied"
        );
    }
    for name in ["bravo-after", "delta"] {
        assert!(
            cms.get_opt(name).await.unwrap().is_none(),
            "{name} was applied"
        );
    }
    support::delete_namespace(&admin, &ns).await;
}
