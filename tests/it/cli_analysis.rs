//! `minicvo lint` and `minicvo upgrade-plan` on the sample payloads and the shared corpus:
//! snapshots of the text outputs, the JSON contracts, and exit codes.

use crate::support::cli as cli_support;

use cli_support::minicvo;
use serde_json::Value;

const CORPUS: &str = "../shared/payloads";

fn corpus(name: &str) -> String {
    format!("{CORPUS}/{name}")
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).expect("valid JSON")
}

#[test]
fn lint_mco_4_13_to_before_fix_flags_the_binding_delete_and_exits_1() {
    let r = minicvo(&[
        "lint",
        &corpus("mco-before-fix"),
        "--previous",
        &corpus("mco-4.13"),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_mco_4_13_to_after_fix_has_no_error_and_exits_0() {
    let r = minicvo(&[
        "lint",
        &corpus("mco-after-fix"),
        "--previous",
        &corpus("mco-4.13"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains("delete-before-last-user"),
        "{}",
        r.stdout
    );
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_backport_conflict_applies_and_deletes_one_binding() {
    let r = minicvo(&["lint", &corpus("mco-4.13-backport-conflict")]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_sample_new_buggy_from_old() {
    let r = minicvo(&["lint", "payload/new-buggy", "--previous", "payload/old"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_sample_new_from_old_is_clean_with_the_release_version() {
    let r = minicvo(&[
        "lint",
        "payload/new",
        "--previous",
        "payload/old",
        "--release-version",
        "4.14.0",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_all_profiles_reports_each_profile() {
    let r = minicvo(&[
        "lint",
        &corpus("mco-before-fix"),
        "--previous",
        &corpus("mco-4.13"),
        "--all-profiles",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_json_contract() {
    let r = minicvo(&[
        "lint",
        "payload/new-buggy",
        "--previous",
        "payload/old",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let v = json(&r.stdout);
    assert_eq!(v["apiVersion"], "minicvo/v1alpha1");
    assert_eq!(v["kind"], "LintReport");
    assert_eq!(v["payload"], "payload/new-buggy");
    assert_eq!(v["previous"], "payload/old");
    assert_eq!(v["summary"]["error"], 1);
    let p = &v["profiles"][0];
    assert_eq!(p["profile"], "self-managed-high-availability");
    assert_eq!(p["featureSet"], "Default");
    let f = &p["findings"][0];
    assert_eq!(f["rule"], "delete-before-last-user");
    assert_eq!(f["severity"], "error");
    assert_eq!(
        f["file"],
        "release-manifests/0000_80_machine-config-operator_03_rbac.yaml"
    );
    assert_eq!(f["document"], 3);
    assert_eq!(f["runLevel"], "80");
    assert_eq!(f["object"]["kind"], "ClusterRoleBinding");
    assert_eq!(
        f["object"]["name"],
        "default-account-openshift-machine-config-operator"
    );
    assert!(
        f["hint"]
            .as_str()
            .unwrap()
            .contains("ClusterOperator machine-config")
    );
    let roles: Vec<&str> = f["related"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "update"]);
    assert_eq!(f["related"][0]["payload"], "previous");
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn lint_openshift_multi_has_no_errors_under_any_profile() {
    let r = minicvo(&[
        "lint",
        &corpus("openshift-multi"),
        "--all-profiles",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r.stdout);
    let profiles = v["profiles"].as_array().unwrap();
    let names: Vec<&str> = profiles
        .iter()
        .map(|p| p["profile"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hypershift",
            "ibm-cloud-managed",
            "self-managed-high-availability",
            "single-node-developer"
        ]
    );
    for p in profiles {
        for f in p["findings"].as_array().unwrap() {
            let rule = f["rule"].as_str().unwrap();
            assert_ne!(f["severity"], "error", "{f}");
            if matches!(
                rule,
                "delete-before-last-user" | "deleted-but-used" | "applied-and-deleted"
            ) {
                assert_eq!(f["severity"], "info", "{f}");
            }
        }
    }
}

#[test]
fn lint_missing_payload_exits_1() {
    let r = minicvo(&["lint", "payload/does-not-exist"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("does-not-exist"), "{}", r.stderr);
}

#[test]
fn upgrade_plan_text_of_the_sample_with_diff() {
    let r = minicvo(&["upgrade-plan", "payload/old", "payload/new", "--diff"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn upgrade_plan_mco_4_13_to_before_fix_changed_only() {
    let r = minicvo(&[
        "upgrade-plan",
        &corpus("mco-4.13"),
        &corpus("mco-before-fix"),
        "--changed-only",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn upgrade_plan_back_from_before_fix_to_4_13_lists_orphans() {
    let r = minicvo(&[
        "upgrade-plan",
        &corpus("mco-before-fix"),
        &corpus("mco-4.13"),
        "--changed-only",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("orphaned          ServiceAccount openshift-machine-config-operator/machine-config-operator"), "{}", r.stdout);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn upgrade_plan_json_contract() {
    let r = minicvo(&[
        "upgrade-plan",
        "payload/old",
        "payload/new",
        "-o",
        "json",
        "--diff",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r.stdout);
    assert_eq!(v["apiVersion"], "minicvo/v1alpha1");
    assert_eq!(v["kind"], "UpgradePlan");
    assert_eq!(v["old"]["version"], "4.13.0");
    assert_eq!(v["new"]["version"], "4.14.0");
    assert_eq!(v["mode"], "updating");
    assert_eq!(v["summary"]["deleted"], 1);
    let objects = v["objects"].as_array().unwrap();
    let deleted = objects.iter().find(|o| o["change"] == "deleted").unwrap();
    assert_eq!(deleted["kind"], "ClusterRoleBinding");
    assert_eq!(deleted["new"]["action"], "delete");
    assert_eq!(deleted["new"]["runLevel"], "90");
    assert_eq!(
        deleted["old"]["file"],
        "release-manifests/0000_80_machine-config-operator_03_rbac.yaml"
    );
    let updated = objects
        .iter()
        .find(|o| o["change"] == "updated" && o["kind"] == "Deployment")
        .unwrap();
    assert!(updated["diff"].as_str().unwrap().starts_with("--- old/"));
    assert!(
        objects
            .iter()
            .filter(|o| o["change"] == "unchanged")
            .all(|o| o.get("diff").is_none())
    );
    assert!(v["nodes"].is_array() && v["edges"].is_array());
}

#[test]
fn upgrade_plan_dot() {
    let r = minicvo(&["upgrade-plan", "payload/old", "payload/new", "-o", "dot"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("digraph upgrade {"));
    insta::assert_snapshot!(r.stdout);
}
