use super::super::testutil::{
    DELETE, MULTI_PROFILES, corpus, lint_dirs, lint_files, lint_profile, obj, of_rule,
    op_cluster_operator, op_deployment, op_namespace,
};
use super::super::{Rule, Severity};

const NS: &str = "0000_50_op_00_namespace.yaml";

fn namespace() -> String {
    op_namespace()
}

fn deployment(pod: &str) -> String {
    op_deployment(pod, "x")
}

fn binding(extra: &str) -> String {
    obj(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "",
        "default-account",
        extra,
        "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: admin\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: op\n",
    )
}

fn cluster_operator() -> String {
    op_cluster_operator("1.0.0")
}

/// The old release: the operator runs as `default`, bound by `default-account`.
fn old() -> Vec<(&'static str, String)> {
    vec![
        (NS, namespace()),
        ("0000_50_op_03_rbac.yaml", binding("")),
        ("0000_50_op_04_deployment.yaml", deployment("")),
        ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
    ]
}

/// The new release: the operator runs as its own account, and `delete_file` deletes the
/// old binding.
fn new(delete_file: &'static str) -> Vec<(&'static str, String)> {
    vec![
        (NS, namespace()),
        (
            "0000_50_op_04_deployment.yaml",
            deployment("      serviceAccountName: op\n"),
        ),
        ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
        (delete_file, binding(DELETE)),
    ]
}

fn refs<'a>(files: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    files.iter().map(|(n, t)| (*n, t.as_str())).collect()
}

#[test]
fn delete_of_old_accounts_binding_before_the_deployment_update_is_an_error() {
    let findings = lint_files(
        &refs(&new("0000_50_op_03_zz_delete.yaml")),
        Some(&refs(&old())),
    );
    let hits = of_rule(&findings, Rule::DeleteBeforeLastUser);
    assert_eq!(hits.len(), 1, "{findings:#?}");
    let f = hits[0];
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(
        f.location.as_ref().unwrap().file,
        "release-manifests/0000_50_op_03_zz_delete.yaml"
    );
    assert!(
        f.message
            .starts_with("deleted before the update of Deployment.apps op/op"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("ServiceAccount op/default"),
        "{}",
        f.message
    );
    assert!(f.related.iter().any(|r| r.role == "update"));
    assert!(f.hint.as_ref().unwrap().contains("ClusterOperator op"));
}

#[test]
fn delete_after_the_deployment_but_before_the_cluster_operator_wait_is_an_error() {
    let findings = lint_files(
        &refs(&new("0000_50_op_05_delete.yaml")),
        Some(&refs(&old())),
    );
    let hits = of_rule(&findings, Rule::DeleteBeforeLastUser);
    assert_eq!(hits.len(), 1, "{findings:#?}");
    assert_eq!(hits[0].severity, Severity::Error);
    assert!(
        hits[0]
            .message
            .contains("before ClusterOperator op reports"),
        "{}",
        hits[0].message
    );
}

#[test]
fn delete_at_a_later_run_level_than_the_cluster_operator_is_fine() {
    let findings = lint_files(
        &refs(&new("0000_90_op_90_deletion.yaml")),
        Some(&refs(&old())),
    );
    assert!(
        of_rule(&findings, Rule::DeleteBeforeLastUser).is_empty(),
        "{findings:#?}"
    );
    assert!(of_rule(&findings, Rule::DeletedButUsed).is_empty());
}

#[test]
fn delete_by_another_component_in_the_same_run_level_runs_in_parallel() {
    let mut files = new("0000_50_other_00_delete.yaml");
    files.push((
        "0000_50_other_01_cm.yaml",
        obj("v1", "ConfigMap", "op", "x", "", ""),
    ));
    let findings = lint_files(&refs(&files), Some(&refs(&old())));
    let hits = of_rule(&findings, Rule::DeleteBeforeLastUser);
    assert_eq!(hits.len(), 1, "{findings:#?}");
    assert!(
        hits[0]
            .message
            .starts_with("deleted in parallel with the update"),
        "{}",
        hits[0].message
    );
}

#[test]
fn configmap_volume_still_mounted_by_this_payload_is_deleted_but_used() {
    let pod = "      volumes:\n      - name: cfg\n        configMap:\n          name: settings\n";
    let files = [
        (NS, namespace()),
        ("0000_50_op_04_deployment.yaml", deployment(pod)),
        (
            "0000_90_op_90_deletion.yaml",
            obj("v1", "ConfigMap", "op", "settings", DELETE, ""),
        ),
    ];
    let findings = lint_files(&refs(&files), None);
    let hits = of_rule(&findings, Rule::DeletedButUsed);
    assert_eq!(hits.len(), 1, "{findings:#?}");
    assert_eq!(hits[0].severity, Severity::Error);
    assert_eq!(
        hits[0].message,
        "deleted, but Deployment.apps op/op of this payload still uses it: its pods mount it as volume cfg"
    );
    // Without --previous the ordering rule leaves a note, nothing more.
    let notes = of_rule(&findings, Rule::DeleteBeforeLastUser);
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].severity, Severity::Info);
    assert!(notes[0].location.is_none());
}

#[test]
fn optional_secret_reference_is_only_a_warning() {
    let pod = "      volumes:\n      - name: s\n        secret:\n          secretName: creds\n          optional: true\n";
    let files = [
        (NS, namespace()),
        ("0000_50_op_04_deployment.yaml", deployment(pod)),
        (
            "0000_50_op_05_delete.yaml",
            obj("v1", "Secret", "op", "creds", DELETE, ""),
        ),
    ];
    let findings = lint_files(&refs(&files), None);
    let hits = of_rule(&findings, Rule::DeletedButUsed);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].severity, Severity::Warning);
}

#[test]
fn binding_removed_while_this_payload_still_runs_as_its_account_is_not_dangling() {
    // Taking permissions away is what a binding delete is for.
    let files = [
        (NS, namespace()),
        ("0000_50_op_04_deployment.yaml", deployment("")),
        ("0000_90_op_90_deletion.yaml", binding(DELETE)),
    ];
    let findings = lint_files(&refs(&files), None);
    assert!(
        of_rule(&findings, Rule::DeletedButUsed).is_empty(),
        "{findings:#?}"
    );
}

#[test]
fn workload_dropped_without_a_delete_keeps_using_the_object() {
    let old = old();
    let files = [
        (NS, namespace()),
        ("0000_50_op_03_delete.yaml", binding(DELETE)),
    ];
    let findings = lint_files(&refs(&files), Some(&refs(&old)));
    let hits = of_rule(&findings, Rule::DeleteBeforeLastUser);
    assert_eq!(hits.len(), 1, "{findings:#?}");
    assert_eq!(hits[0].severity, Severity::Warning);
    assert!(
        hits[0].message.contains("left behind"),
        "{}",
        hits[0].message
    );
}

#[test]
fn workload_deleted_after_its_config_is_a_warning() {
    let pod = "      volumes:\n      - name: cfg\n        configMap:\n          name: settings\n";
    let old = [
        (NS, namespace()),
        (
            "0000_50_op_02_cm.yaml",
            obj("v1", "ConfigMap", "op", "settings", "", ""),
        ),
        ("0000_50_op_04_deployment.yaml", deployment(pod)),
    ];
    let new = [
        (NS, namespace()),
        (
            "0000_50_op_02_cm.yaml",
            obj("v1", "ConfigMap", "op", "settings", DELETE, ""),
        ),
        (
            "0000_50_op_04_deployment.yaml",
            obj("apps/v1", "Deployment", "op", "op", DELETE, ""),
        ),
    ];
    let findings = lint_files(&refs(&new), Some(&refs(&old)));
    let hits = of_rule(&findings, Rule::DeleteBeforeLastUser);
    assert_eq!(hits.len(), 1, "{findings:#?}");
    assert_eq!(hits[0].severity, Severity::Warning);
    assert!(hits[0].message.contains("itself is deleted"));
}

fn rule1(new: &str, old: Option<&str>) -> Vec<super::super::Finding> {
    let findings = lint_dirs(&corpus(new), old.map(corpus).as_deref());
    findings
        .into_iter()
        .filter(|f| {
            matches!(f.rule, Rule::DeleteBeforeLastUser | Rule::DeletedButUsed)
                && f.severity > Severity::Info
        })
        .collect()
}

#[test]
fn mco_4_13_to_before_fix_flags_the_default_account_binding_delete() {
    let hits = rule1("mco-before-fix", Some("mco-4.13"));
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let f = &hits[0];
    assert_eq!(f.rule, Rule::DeleteBeforeLastUser);
    assert_eq!(f.severity, Severity::Error);
    let loc = f.location.as_ref().unwrap();
    assert_eq!(
        loc.file,
        "release-manifests/0000_80_machine-config-operator_03_rbac.yaml"
    );
    assert_eq!(loc.document, 4);
    assert_eq!(
        loc.object.name,
        "default-account-openshift-machine-config-operator"
    );
    assert!(
        f.message.starts_with(
            "deleted before the update of Deployment.apps openshift-machine-config-operator/machine-config-operator"
        ),
        "{}",
        f.message
    );
}

#[test]
fn mco_4_13_to_after_fix_and_to_4_14_are_not_flagged() {
    assert!(rule1("mco-after-fix", Some("mco-4.13")).is_empty());
    assert!(rule1("mco-4.14", Some("mco-4.13")).is_empty());
}

#[test]
fn sample_payload_old_to_new_buggy_is_flagged_and_to_new_is_not() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("payload");
    let run = |new: &str| {
        lint_dirs(&root.join(new), Some(&root.join("old")))
            .into_iter()
            .filter(|f| f.rule == Rule::DeleteBeforeLastUser && f.severity == Severity::Error)
            .count()
    };
    assert_eq!(run("new-buggy"), 1);
    assert_eq!(run("new"), 0);
}

#[test]
fn openshift_multi_has_no_delete_before_user_findings_under_any_profile() {
    for profile in MULTI_PROFILES {
        let hits: Vec<_> = lint_profile(&corpus("openshift-multi"), None, profile)
            .into_iter()
            .filter(|f| {
                matches!(f.rule, Rule::DeleteBeforeLastUser | Rule::DeletedButUsed)
                    && f.severity > Severity::Info
            })
            .collect();
        assert!(hits.is_empty(), "{profile}: {hits:#?}");
    }
}
