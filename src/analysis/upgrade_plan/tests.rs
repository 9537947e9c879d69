use std::path::Path;

use super::*;
use crate::payload::{LoadOptions, load};

fn load_dir(dir: &Path) -> Payload {
    let options = LoadOptions {
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    load(dir, &options).expect("loads")
}

fn upgrade(old: &Path, new: &Path) -> UpgradePlan {
    build(&load_dir(old), &load_dir(new), &Filters::default())
}

fn sample(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("payload")
        .join(name)
}

fn corpus(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/payloads")
        .join(name)
}

fn change_of(up: &UpgradePlan, kind: &str, name: &str) -> Vec<Change> {
    up.entries
        .iter()
        .filter(|e| e.id.kind == kind && e.id.name == name)
        .map(|e| e.change)
        .collect()
}

#[test]
fn sample_old_to_new_classifies_every_object() {
    let up = upgrade(&sample("old"), &sample("new"));
    let binding = "default-account-openshift-machine-config-operator";
    assert_eq!(
        change_of(&up, "ClusterRoleBinding", binding),
        [Change::Deleted]
    );
    assert_eq!(
        change_of(
            &up,
            "ClusterRoleBinding",
            "custom-account-openshift-machine-config-operator"
        ),
        [Change::Created]
    );
    assert_eq!(
        change_of(&up, "ServiceAccount", "machine-config-operator"),
        [Change::Created]
    );
    assert_eq!(
        change_of(&up, "Deployment", "machine-config-operator"),
        [Change::Updated]
    );
    assert_eq!(
        change_of(&up, "Namespace", "openshift-machine-config-operator"),
        [Change::Unchanged]
    );
    // The version placeholder is substituted with each payload's version.
    assert_eq!(
        change_of(&up, "ClusterOperator", "machine-config"),
        [Change::Updated]
    );
}

#[test]
fn deleted_object_is_placed_in_new_plan() {
    let up = upgrade(&sample("old"), &sample("new"));
    let e = up
        .entries
        .iter()
        .find(|e| e.change == Change::Deleted)
        .unwrap();
    let p = e.placement.as_ref().unwrap();
    assert_eq!(p.run_level.as_deref(), Some("90"));
    assert_eq!(p.component.as_deref(), Some("machine-config-operator"));
    let co = up
        .entries
        .iter()
        .find(|e| e.id.kind == "ClusterOperator" && e.id.name == "machine-config")
        .unwrap();
    let c = co.placement.as_ref().unwrap();
    // Same serial node (run-levels 80 and 90 of one component), the delete after the wait.
    assert_eq!(p.node, c.node);
    assert!(p.position > c.position);
    assert!(e.old.is_some(), "compared with the binding OLD applied");
}

#[test]
fn object_absent_from_new_without_a_delete_is_orphaned() {
    // NEW (fixed) without the deletion file leaves the binding behind.
    let dir = tempfile::tempdir().unwrap();
    let rm = dir.path().join("release-manifests");
    std::fs::create_dir(&rm).unwrap();
    for f in std::fs::read_dir(sample("new").join("release-manifests")).unwrap() {
        let f = f.unwrap();
        if !f.file_name().to_string_lossy().contains("90_deletion") {
            std::fs::copy(f.path(), rm.join(f.file_name())).unwrap();
        }
    }
    let up = upgrade(&sample("old"), dir.path());
    let binding = "default-account-openshift-machine-config-operator";
    assert_eq!(
        change_of(&up, "ClusterRoleBinding", binding),
        [Change::Orphaned]
    );
    let e = up
        .entries
        .iter()
        .find(|e| e.change == Change::Orphaned)
        .unwrap();
    assert!(e.placement.is_none());
    assert_eq!(
        e.old.as_ref().unwrap().file,
        "0000_80_machine-config-operator_03_rbac.yaml"
    );
}

#[test]
fn tombstone_only_in_old_is_dropped_not_orphaned() {
    let up = upgrade(&sample("new"), &sample("old"));
    let binding = "default-account-openshift-machine-config-operator";
    // Going back: OLD (new/) deletes it, NEW (old/) applies it again.
    assert_eq!(
        change_of(&up, "ClusterRoleBinding", binding),
        [Change::Created]
    );
    let up = upgrade(&corpus("mco-after-fix"), &corpus("mco-4.13"));
    assert!(
        up.entries
            .iter()
            .all(|e| e.change != Change::TombstoneDropped || e.placement.is_none())
    );
}

#[test]
fn updated_object_has_a_unified_diff() {
    let up = upgrade(&sample("old"), &sample("new"));
    let e = up
        .entries
        .iter()
        .find(|e| e.id.kind == "Deployment" && e.id.name == "machine-config-operator")
        .unwrap();
    let d = up.diff(e);
    assert!(
        d.contains("+      serviceAccountName: machine-config-operator"),
        "{d}"
    );
    assert!(
        d.starts_with(
            "--- old/release-manifests/0000_80_machine-config-operator_04_deployment.yaml#0"
        ),
        "{d}"
    );
}

#[test]
fn upgrade_plan_diff_masks_secret_values() {
    let secret = |value: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: x\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\ndata:\n  token: {value}\nstringData:\n  password: {value}-clear\n"
        )
    };
    let dirs: Vec<tempfile::TempDir> = ["b2xkLXZhbHVl", "bmV3LXZhbHVl"]
        .iter()
        .map(|v| {
            let d = tempfile::tempdir().unwrap();
            std::fs::write(d.path().join("0000_10_a_secret.yaml"), secret(v)).unwrap();
            d
        })
        .collect();
    let up = upgrade(dirs[0].path(), dirs[1].path());
    let e = up.entries.iter().find(|e| e.id.kind == "Secret").unwrap();
    let d = up.diff(e);
    assert!(d.contains("+  token: \"*** (after)\""), "{d}");
    for value in ["b2xkLXZhbHVl", "bmV3LXZhbHVl"] {
        assert!(!d.contains(value), "the diff shows a Secret value:\n{d}");
    }
}

#[test]
fn mco_4_13_to_before_fix_deletes_the_binding_at_run_level_80() {
    let up = upgrade(&corpus("mco-4.13"), &corpus("mco-before-fix"));
    let deleted: Vec<_> = up
        .entries
        .iter()
        .filter(|e| e.change == Change::Deleted)
        .collect();
    assert_eq!(deleted.len(), 1);
    let p = deleted[0].placement.as_ref().unwrap();
    assert_eq!(p.run_level.as_deref(), Some("80"));
    assert!(up.entries.iter().all(|e| e.change != Change::Orphaned));
    let counts = up.counts();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    assert_eq!(total, up.entries.len());
}
