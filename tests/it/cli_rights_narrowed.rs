//! `lint --previous` (`rights-lost-before-rollout`) on a payload pair written for the test: the
//! new release narrows the ClusterRole its operator's old pods run with (they lose `create` and
//! `update` on leases: leader election, an error), and drops their ServiceAccount from a
//! RoleBinding of the default role `view` (not in the payload, so what they lose is unknown: a
//! warning), both before the operator's Deployment is updated.

use std::path::Path;

use crate::support::cli::{command, stable};

const HEAD: &str =
    "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n";

fn write(dir: &Path, files: &[(&str, String)]) {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).expect("mkdir");
    for (name, text) in files {
        std::fs::write(rm.join(name), text).expect("write");
    }
}

fn namespace() -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: op\n{HEAD}")
}

fn deployment(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: op\n{HEAD}spec:\n  template:\n    spec:\n      serviceAccountName: op\n      containers:\n      - name: c\n        image: {image}\n"
    )
}

fn cluster_operator() -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: op\n{HEAD}status:\n  versions:\n  - name: operator\n    version: \"1.0.0\"\n"
    )
}

fn cluster_role(verbs: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: op\n{HEAD}rules:\n- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: {verbs}\n- apiGroups: [\"\"]\n  resources: [\"*\"]\n  verbs: [get]\n"
    )
}

fn cluster_role_binding() -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: op\n{HEAD}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: op\nsubjects:\n- kind: ServiceAccount\n  name: op\n  namespace: op\n"
    )
}

fn role_binding(subject: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: op-config\n  namespace: op\n{HEAD}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: view\nsubjects:\n- kind: ServiceAccount\n  name: {subject}\n"
    )
}

#[test]
fn lint_reports_a_narrowed_role_and_a_dropped_subject_before_the_update_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        &dir.path().join("old"),
        &[
            ("0000_50_op_00_namespace.yaml", namespace()),
            ("0000_50_op_02_rbac.yaml", cluster_role("[\"*\"]")),
            ("0000_50_op_03_binding.yaml", cluster_role_binding()),
            ("0000_50_op_03_rolebinding.yaml", role_binding("op")),
            ("0000_50_op_04_deployment.yaml", deployment("old")),
            ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
        ],
    );
    write(
        &dir.path().join("new"),
        &[
            ("0000_50_op_00_namespace.yaml", namespace()),
            (
                "0000_50_op_02_rbac.yaml",
                cluster_role("[get, list, watch]"),
            ),
            ("0000_50_op_03_binding.yaml", cluster_role_binding()),
            ("0000_50_op_03_rolebinding.yaml", role_binding("op-new")),
            ("0000_50_op_04_deployment.yaml", deployment("new")),
            ("0000_50_op_06_clusteroperator.yaml", cluster_operator()),
        ],
    );
    let out = command(&["lint", "new", "--previous", "old", "--no-schema"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let stdout = stable(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.matches("error[rights-lost-before-rollout]").count(),
        1,
        "{stdout}"
    );
    assert_eq!(
        stdout
            .matches("warning[rights-lost-before-rollout]")
            .count(),
        1,
        "{stdout}"
    );
    assert!(
        stdout.contains("the pods lose * on leases.coordination.k8s.io; leader election needs create,update on leases.coordination.k8s.io"),
        "{stdout}"
    );
    insta::assert_snapshot!(stdout);
}
