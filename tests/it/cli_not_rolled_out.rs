//! `lint --previous` (`not-rolled-out`) and `upgrade-plan` on a payload pair whose changes the
//! CVO's merge mostly does not write (`tests/rollout_payloads/`).

use crate::support::cli::minicvo;

const OLD: &str = "tests/rollout_payloads/old";
const NEW: &str = "tests/rollout_payloads/new";

#[test]
fn lint_reports_each_field_the_cvo_keeps_and_exits_0() {
    let r = minicvo(&["lint", NEW, "--previous", OLD]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout.matches("warning[not-rolled-out]").count(),
        5,
        "{}",
        r.stdout
    );
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn upgrade_plan_marks_changes_the_cvo_does_not_write_unchanged() {
    let r = minicvo(&["upgrade-plan", OLD, NEW]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("1 updated, 4 unchanged (3 not rolled out)"),
        "{}",
        r.stdout
    );
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn upgrade_plan_json_lists_the_kept_fields() {
    let r = minicvo(&["upgrade-plan", OLD, NEW, "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let ds = v["objects"]
        .as_array()
        .expect("object list")
        .iter()
        .find(|o| o["kind"] == "DaemonSet")
        .expect("the DaemonSet");
    assert_eq!(ds["change"], "unchanged");
    assert_eq!(
        ds["notRolledOut"],
        serde_json::json!([{"path": "spec.updateStrategy", "rule": "the CVO never updates this DaemonSet field"}])
    );
}
