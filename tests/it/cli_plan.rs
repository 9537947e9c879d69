//! `minicvo plan` and `minicvo render` on the bundled sample payloads: snapshots and exit codes.

use crate::support::cli as cli_support;

use cli_support::minicvo;

#[test]
fn plan_text_of_the_fixed_sample() {
    let r = minicvo(&["plan", "payload/new"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn plan_text_of_the_buggy_sample() {
    let r = minicvo(&["plan", "payload/new-buggy"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn plan_json_contract() {
    let r = minicvo(&["plan", "payload/new", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["apiVersion"], "minicvo/v1alpha1");
    assert_eq!(v["kind"], "Plan");
    assert_eq!(v["version"], "4.14.0");
    assert_eq!(v["mode"], "updating");
    assert_eq!(v["profile"], "self-managed-high-availability");
    assert_eq!(v["featureSet"], "Default");
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 17);
    assert_eq!(
        tasks[0],
        serde_json::json!({"id":0,"file":"0000_00_cluster-version-operator_01_clusteroperators.crd.yaml","document":0,"runLevel":"00","component":"cluster-version-operator","apiVersion":"apiextensions.k8s.io/v1","group":"apiextensions.k8s.io","kind":"CustomResourceDefinition","namespace":null,"name":"clusteroperators.config.openshift.io","action":"apply"})
    );
    let actions: Vec<&str> = tasks
        .iter()
        .map(|t| t["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions.iter().filter(|a| **a == "wait").count(), 2);
    assert_eq!(actions.last(), Some(&"delete"));
    // Every task in exactly one node; edges reference nodes.
    let nodes = v["nodes"].as_array().unwrap();
    let mut placed: Vec<u64> = nodes
        .iter()
        .flat_map(|n| {
            n["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap())
        })
        .collect();
    placed.sort_unstable();
    assert_eq!(placed, (0..17).collect::<Vec<u64>>());
    for e in v["edges"].as_array().unwrap() {
        assert!(
            e[0].as_u64().unwrap() < nodes.len() as u64
                && e[1].as_u64().unwrap() < nodes.len() as u64
        );
    }
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn plan_dot() {
    let r = minicvo(&["plan", "payload/new", "-o", "dot"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("digraph plan {"));
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn plan_initializing_flattens_components() {
    let r = minicvo(&["plan", "payload/new", "--mode", "initializing"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("in 5 nodes, 1 stages"), "{}", r.stdout);
}

#[test]
fn plan_with_disabled_capability_skips_the_task() {
    let r = minicvo(&[
        "plan",
        "payload/new",
        "--capabilities",
        "MachineAPI",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let skipped: Vec<&serde_json::Value> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["action"] == "skip")
        .collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["name"], "widget-settings");
    assert_eq!(skipped[0]["skipReason"], "disabled capabilities: Console");
}

#[test]
fn render_json_substitutes_the_version_placeholder() {
    let r = minicvo(&["render", "payload/new", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["kind"], "List");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 17);
    let co = items
        .iter()
        .find(|i| i["kind"] == "ClusterOperator" && i["metadata"]["name"] == "machine-config")
        .unwrap();
    assert_eq!(co["status"]["versions"][0]["version"], "4.14.0");
    // YAML 1.1 numbers as kubectl reads them: defaultMode 0644 is 420.
    let dep = items
        .iter()
        .find(|i| i["kind"] == "Deployment" && i["metadata"]["name"] == "example-operator")
        .unwrap();
    assert_eq!(
        dep["spec"]["template"]["spec"]["volumes"][0]["configMap"]["defaultMode"],
        420
    );
}

#[test]
fn render_yaml_round_trips() {
    let r = minicvo(&["render", "payload/old"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.matches("\n---\n").count() + 1, 15, "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "# release-manifests/0000_80_machine-config-operator_03_rbac.yaml document 1"
        )
    );
}

#[test]
fn invalid_payload_exits_1_with_file_document_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_x.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n",
    )
    .unwrap();
    let r = minicvo(&["plan", dir.path().to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("error: 0000_10_a_x.yaml: document 0 (line 3): invalid YAML: "),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(minicvo(&["plan"]).code, 2);
    assert_eq!(
        minicvo(&["plan", "payload/new", "--mode", "sideways"]).code,
        2
    );
    let r = minicvo(&["plan", "payload/new", "--feature-set", "Bogus"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("unknown feature set \"Bogus\""),
        "{}",
        r.stderr
    );
}

#[test]
fn missing_payload_exits_1() {
    let r = minicvo(&["plan", "does/not/exist"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("does/not/exist: not a payload directory"),
        "{}",
        r.stderr
    );
}

#[test]
fn verbose_logs_why_manifests_were_excluded() {
    let r = minicvo(&[
        "plan",
        "-v",
        "payload/new",
        "--profile",
        "single-node-developer",
    ]);
    assert_eq!(r.code, 0);
    assert!(
        r.stderr.contains("excluded 0000_50_example-operator_02_config.yaml#1 ConfigMap openshift-example-operator/example-operator-trusted-ca: include.release.openshift.io/single-node-developer unset"),
        "{}",
        r.stderr
    );
}
