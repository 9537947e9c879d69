//! Implicitly enabled capabilities in `plan --previous`, `upgrade-plan` and `lint --previous`:
//! an object the cluster runs that the update moves under a disabled capability keeps being
//! applied, as the CVO does, and the capability is named.

use std::path::Path;

use crate::support::cli::minicvo;
use serde_json::Value;

fn payload(dir: &Path, capability: Option<&str>) {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    let cap = capability
        .map(|c| format!("    capability.openshift.io/name: {c}\n"))
        .unwrap_or_default();
    std::fs::write(
        rm.join("0000_50_foo_00_cm.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bar\n  namespace: openshift-foo\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n{cap}"
        ),
    )
    .unwrap();
}

fn action(plan_json: &str) -> String {
    let v: Value = serde_json::from_str(plan_json).unwrap();
    v["tasks"][0]["action"].as_str().unwrap().to_string()
}

#[test]
fn a_manifest_moved_under_a_disabled_capability_stays_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
    payload(&old, None);
    payload(&new, Some("Console+Insights"));
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());

    // Without the previous payload the manifest is skipped.
    let alone = minicvo(&["plan", new, "--capabilities", "MachineAPI", "-o", "json"]);
    assert_eq!(alone.code, 0, "{}", alone.stderr);
    assert_eq!(action(&alone.stdout), "skip");

    let with = minicvo(&[
        "plan",
        new,
        "--capabilities",
        "MachineAPI",
        "--previous",
        old,
        "-o",
        "json",
    ]);
    assert_eq!(with.code, 0, "{}", with.stderr);
    assert_eq!(action(&with.stdout), "apply");
    for cap in ["Console", "Insights"] {
        assert!(
            with.stderr.contains(&format!(
                "note: capability {cap} is implicitly enabled: ConfigMap openshift-foo/bar moved under it"
            )),
            "{}",
            with.stderr
        );
    }

    let up = minicvo(&[
        "upgrade-plan",
        old,
        new,
        "--capabilities",
        "MachineAPI",
        "-o",
        "json",
    ]);
    assert_eq!(up.code, 0, "{}", up.stderr);
    assert!(
        up.stderr
            .contains("capability Console is implicitly enabled"),
        "{}",
        up.stderr
    );
    assert!(!up.stdout.contains("\"skip\""), "{}", up.stdout);

    // With every capability enabled there is nothing to enable.
    let all = minicvo(&["plan", new, "--previous", old]);
    assert!(!all.stderr.contains("implicitly enabled"), "{}", all.stderr);
}
