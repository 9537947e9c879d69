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

/// The real release payloads `openshift-4.21` and `openshift-4.22` of the shared corpus, as
/// absolute paths; one clear line when they are missing.
fn real_pair() -> (String, String) {
    let [old, new] = ["openshift-4.21", "openshift-4.22"].map(|name| {
        let path = crate::support::corpus(name);
        assert!(
            path.is_dir(),
            "{} is missing: the real release payloads are shared reference data (see ../shared/payloads/REAL-4.21-4.22-SOURCES.md)",
            path.display()
        );
        path.display().to_string()
    });
    (old, new)
}

/// `lint -o json NEW --previous OLD [extra]` on the real pair: exit code and every finding.
fn lint_real(extra: &[&str]) -> (i32, Vec<Value>) {
    let (old, new) = real_pair();
    let mut args = vec![
        "lint",
        "-o",
        "json",
        new.as_str(),
        "--previous",
        old.as_str(),
    ];
    args.extend(extra);
    let r = minicvo(&args);
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("lint output is not JSON ({e}): {}", r.stderr));
    let findings = v["profiles"][0]["findings"]
        .as_array()
        .expect("findings")
        .clone();
    (r.code, findings)
}

fn finding<'a>(findings: &'a [Value], rule: &str, kind: &str, name: &str) -> Option<&'a Value> {
    findings
        .iter()
        .find(|f| f["rule"] == rule && f["object"]["kind"] == kind && f["object"]["name"] == name)
}

/// On a Default cluster the CVO never applies what `ClusterAPIMachineManagement` gates (the
/// payload's own FeatureGate for SelfManagedHA Default lists it as disabled), the node-tuning
/// ClusterRoleBindings' `userNames` is dropped by the CVO's typed decoding, and the dns
/// operator's narrowed ClusterRole takes no right its pods are known to use: no error.
#[test]
fn lint_real_4_21_to_4_22_default_has_no_error_and_exits_0() {
    let (code, findings) = lint_real(&[]);
    let errors: Vec<&Value> = findings
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(code, 0);
    assert!(
        findings.iter().all(|f| !f["file"]
            .as_str()
            .unwrap_or_default()
            .contains("cluster-api")),
        "a manifest gated by ClusterAPIMachineManagement is linted under Default"
    );
    let dns = finding(
        &findings,
        "rights-lost-before-rollout",
        "ClusterRole",
        "openshift-dns-operator",
    )
    .expect("the dns operator's narrowed ClusterRole");
    assert_eq!(dns["severity"], "warning", "{dns}");
    let tuned = finding(
        &findings,
        "schema",
        "ClusterRoleBinding",
        "cluster-node-tuning:tuned",
    )
    .expect("the userNames of cluster-node-tuning:tuned");
    assert_eq!(tuned["severity"], "warning", "{tuned}");
}

/// Under TechPreviewNoUpgrade the payload's own FeatureGate enables `ClusterAPIMachineManagement`,
/// and ClusterAPI `cluster` is planned in parallel with the CRD that defines it.
#[test]
fn lint_real_4_21_to_4_22_tech_preview_finds_the_cluster_api_cr_beside_its_crd() {
    let (code, findings) = lint_real(&["--feature-set", "TechPreviewNoUpgrade"]);
    let capi = finding(&findings, "crd-order", "ClusterAPI", "cluster")
        .expect("crd-order of ClusterAPI cluster");
    assert_eq!(capi["severity"], "error", "{capi}");
    assert!(
        capi["message"].as_str().unwrap().contains(
            "in parallel with CustomResourceDefinition clusterapis.operator.openshift.io"
        ),
        "{capi}"
    );
    assert_eq!(code, 1);
}

/// The text output names the FeatureGate manifests the gates come from.
#[test]
fn lint_real_prints_where_the_feature_gates_come_from() {
    let (old, new) = real_pair();
    let r = minicvo(&[
        "lint",
        "--no-schema",
        new.as_str(),
        "--previous",
        old.as_str(),
    ]);
    assert!(
        r.stdout.contains(
            "features: feature set Default (default); feature gates of the payload's FeatureGate release-manifests/0000_50_cluster-config-api_featureGate-4-10-SelfManagedHA-Default.yaml (33 enabled)"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "previous payload's features: feature set Default (default); feature gates of the payload's FeatureGate release-manifests/0000_50_cluster-config-api_featureGate-SelfManagedHA-Default.yaml (44 enabled)"
        ),
        "{}",
        r.stdout
    );
}
