//! The static twins of the harm shapes ([`crate::support::harm`]): `minicvo lint --previous
//! OLD NEW` reports every HARMFUL payload at the object that takes something from the old pods
//! (`delete-before-last-user` for a delete, `rights-lost-before-rollout` for a narrowed role or
//! a binding that comes after the Deployment that needs it) and nothing of the sort for its
//! FIXED twin. No cluster needed.

use serde_json::Value;

use crate::support::cli::command;
use crate::support::harm::{self, Fixture, Shape};

/// The rules that report something taken from running pods.
const HARM_RULES: [&str; 3] = [
    "delete-before-last-user",
    "rights-lost-before-rollout",
    "deleted-but-used",
];

/// `minicvo lint -o json --no-schema --previous OLD NEW`: exit code and every finding.
fn lint(old: &std::path::Path, new: &std::path::Path) -> (i32, Vec<Value>) {
    let out = command(&["lint", "-o", "json", "--no-schema", "--previous"])
        .arg(old)
        .arg(new)
        .output()
        .expect("minicvo runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "lint output is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let findings = report["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .flat_map(|p| p["findings"].as_array().cloned().unwrap_or_default())
        .collect();
    (out.status.code().unwrap_or(-1), findings)
}

fn rule(f: &Value) -> &str {
    f["rule"].as_str().unwrap_or_default()
}

fn check_shape(shape: Shape) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx: Fixture = harm::write(shape, dir.path(), &format!("harm-{}", shape.tag()));

    let (code, findings) = lint(&fx.old, &fx.harmful);
    let hit = findings.iter().find(|f| {
        rule(f) == fx.lint_rule
            && f["severity"] == "error"
            && f["object"]["kind"] == fx.cause_kind
            && f["object"]["name"] == fx.cause_name.as_str()
    });
    assert!(
        hit.is_some(),
        "{}: no error[{}] at {} {} among {findings:#?}",
        shape.tag(),
        fx.lint_rule,
        fx.cause_kind,
        fx.cause_name
    );
    assert_eq!(code, 1, "{}: lint exits 1 on an error", shape.tag());

    let (code, findings) = lint(&fx.old, &fx.fixed);
    let wrong: Vec<&Value> = findings
        .iter()
        .filter(|f| HARM_RULES.contains(&rule(f)) || f["severity"] == "error")
        .collect();
    assert!(
        wrong.is_empty(),
        "{}: the fixed payload is reported: {wrong:#?}",
        shape.tag()
    );
    assert_eq!(code, 0, "{}: {findings:#?}", shape.tag());
}

#[test]
fn lint_harm_rolebinding_deleted_before_update() {
    check_shape(Shape::RoleBindingDeleted);
}

#[test]
fn lint_harm_role_deleted_before_update() {
    check_shape(Shape::RoleDeleted);
}

#[test]
fn lint_harm_clusterrole_narrowed_before_update() {
    check_shape(Shape::ClusterRoleNarrowed);
}

#[test]
fn lint_harm_mounted_configmap_deleted_before_update() {
    check_shape(Shape::ConfigMapDeleted);
}

#[test]
fn lint_harm_secret_deleted_before_update() {
    check_shape(Shape::SecretDeleted);
}

#[test]
fn lint_harm_configmap_new_pods_mount_deleted_before_update() {
    check_shape(Shape::ConfigMapStillMounted);
}

#[test]
fn lint_harm_env_configmap_new_pods_reference_deleted_before_update() {
    check_shape(Shape::EnvStillReferenced);
}

#[test]
fn lint_harm_serviceaccount_deleted_before_update() {
    check_shape(Shape::ServiceAccountDeleted);
}

#[test]
fn lint_harm_binding_of_new_account_after_update() {
    check_shape(Shape::BindingAfterNewAccount);
}

/// Each OLD payload on its own, as an install, is clean: what the harmful twins report comes
/// from the update alone.
#[test]
fn lint_harm_old_payloads_are_clean() {
    for shape in Shape::ALL {
        let dir = tempfile::tempdir().expect("tempdir");
        let fx = harm::write(shape, dir.path(), &format!("harm-{}", shape.tag()));
        let out = command(&["lint", "-o", "json", "--no-schema"])
            .arg(&fx.old)
            .output()
            .expect("minicvo runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            shape.tag(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Switching a Deployment from `RollingUpdate` to `Recreate` takes nothing from its pods.
#[test]
fn lint_harm_strategy_switch_is_not_harm() {
    for strategy in ["RollingUpdate", "Recreate"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (old, new) = harm::write_rollout(dir.path(), "rollout", strategy);
        let (code, findings) = lint(&old, &new);
        let wrong: Vec<&Value> = findings
            .iter()
            .filter(|f| HARM_RULES.contains(&rule(f)) || f["severity"] == "error")
            .collect();
        assert!(wrong.is_empty(), "{strategy}: {wrong:#?}");
        assert_eq!(code, 0, "{strategy}: {findings:#?}");
    }
}
