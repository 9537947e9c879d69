//! `minicvo lint` with offline schema validation: a payload with typos the API server would
//! refuse, as text (snapshot) and as JSON, and the flags that choose the schemas.

use crate::support::cli::minicvo;

const TYPOS: &str = "tests/schema_payloads/typos";

#[test]
fn lint_reports_objects_the_api_server_would_refuse() {
    let r = minicvo(&["lint", TYPOS]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_json_has_the_schema_findings_with_their_paths() {
    let r = minicvo(&["lint", TYPOS, "-o", "json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    let messages: Vec<&str> = v["profiles"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "schema")
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    // A Deployment is decoded into its Go type by the CVO, which drops the unknown field.
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("unknown field \"spec.replica\": the CVO decodes a Deployment")),
        "{messages:?}"
    );
    assert!(
        messages.contains(&"spec.size: Required value"),
        "{messages:?}"
    );
}

#[test]
fn no_schema_turns_the_validation_off() {
    let r = minicvo(&["lint", TYPOS, "--no-schema"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(!r.stdout.contains("[schema]"), "{}", r.stdout);
}

#[test]
fn an_unknown_kube_version_is_a_clear_error() {
    let r = minicvo(&["lint", TYPOS, "--kube-version", "1.20"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("no stored schemas for Kubernetes 1.20; stored: 1.37"),
        "{}",
        r.stderr
    );
}

#[test]
fn crds_from_a_directory_check_custom_resources() {
    // The Widget CRD lives in the payload; a payload with only the Widget and the CRD given
    // by --crds gives the same finding.
    let dir = tempfile::tempdir().unwrap();
    let rm = dir.path().join("release-manifests");
    std::fs::create_dir(&rm).unwrap();
    let src = crate::support::cli::root()
        .join(TYPOS)
        .join("release-manifests");
    for f in [
        "0000_20_app_00_namespace.yaml",
        "0000_30_app_00_widget.yaml",
    ] {
        std::fs::copy(src.join(f), rm.join(f)).unwrap();
    }
    let crds = tempfile::tempdir().unwrap();
    std::fs::copy(
        src.join("0000_10_widgets_00_crd.yaml"),
        crds.path().join("crd.yaml"),
    )
    .unwrap();
    let payload = dir.path().display().to_string();
    let without = minicvo(&["lint", &payload]);
    assert!(!without.stdout.contains("spec.size"), "{}", without.stdout);
    let with = minicvo(&[
        "lint",
        &payload,
        "--crds",
        &crds.path().display().to_string(),
    ]);
    assert_eq!(with.code, 1, "{}", with.stderr);
    assert!(
        with.stdout.contains("spec.size: Required value"),
        "{}",
        with.stdout
    );
}
