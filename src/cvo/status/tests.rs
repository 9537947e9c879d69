use std::time::Duration;

use super::*;
use crate::cvo::error::{ApiErrorClass, summarize, task_error};
use crate::cvo::health;
use crate::plan::Mode;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-01T01:00:00Z";

fn input(version: &str) -> StatusInput {
    StatusInput {
        desired: Release {
            version: version.into(),
            image: format!("example.com/release:{version}"),
            architecture: "amd64".into(),
        },
        generation: 1,
        version_hash: "AAAAAAAAAAA=".into(),
        reconciling: false,
        completed: false,
        done: 0,
        total: 10,
        failure: None,
        operator_waits: BTreeMap::new(),
        capabilities: CapabilityStatus::all(),
        verified: false,
        checks: ReleaseChecks::default(),
        deletions_in_progress: Vec::new(),
        now: T0.into(),
    }
}

fn cond<'a>(s: &'a Value, t: &str) -> &'a Value {
    s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no condition {t} in {s:#}"))
}

fn summary(s: &Value, t: &str) -> (String, String, String) {
    let c = cond(s, t);
    let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (f("status"), f("reason"), f("message"))
}

fn operator_not_available(name: &str) -> UpdateError {
    let live = serde_json::json!({"status": {"conditions": [
        {"type": "Available", "status": "False", "reason": "Starting", "message": "not yet"}]}});
    let expected = vec![health::OperandVersion {
        name: "operator".into(),
        version: "4.2".into(),
    }];
    health::check_operator(name, &expected, &live, Mode::Updating).unwrap()
}

#[test]
fn an_install_in_progress_has_every_required_field() {
    let mut i = input("4.1.0");
    i.done = 334;
    i.total = 1000;
    let s = cluster_version_status(&Value::Null, &i);
    for k in [
        "desired",
        "observedGeneration",
        "versionHash",
        "availableUpdates",
        "history",
        "capabilities",
    ] {
        assert!(s.get(k).is_some(), "{k} missing");
    }
    assert!(s["availableUpdates"].is_null());
    let h = &s["history"][0];
    assert_eq!(h["state"], "Partial");
    assert!(h["completionTime"].is_null());
    assert_eq!(h["verified"], false);
    assert_eq!(h["image"], "example.com/release:4.1.0");
    assert_eq!(
        summary(&s, "Progressing"),
        (
            "True".into(),
            String::new(),
            "Working towards 4.1.0: 334 of 1000 done (33% complete)".into()
        )
    );
    assert_eq!(
        summary(&s, "Available"),
        ("False".into(), String::new(), String::new())
    );
    assert_eq!(
        summary(&s, "Failing"),
        ("False".into(), String::new(), String::new())
    );
    assert_eq!(
        summary(&s, "ReleaseAccepted"),
        ("True".into(), "PayloadLoaded".into(),
         "Payload loaded version=\"4.1.0\" image=\"example.com/release:4.1.0\" architecture=\"amd64\"".into())
    );
    assert_eq!(
        summary(&s, "ImplicitlyEnabledCapabilities"),
        (
            "False".into(),
            "AsExpected".into(),
            "Capabilities match configured spec".into()
        )
    );
    assert_eq!(summary(&s, "RetrievedUpdates").0, "False");
    assert_eq!(summary(&s, "Upgradeable").1, "ClusterVersionUpdating");
    let types: Vec<&str> = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "ImplicitlyEnabledCapabilities",
            "ReleaseAccepted",
            "Available",
            "Failing",
            "Progressing",
            "RetrievedUpdates",
            "Upgradeable"
        ]
    );
}

#[test]
fn completion_then_an_upgrade_then_a_failed_upgrade() {
    let mut i = input("4.1.0");
    let s = cluster_version_status(&Value::Null, &i);
    i.completed = true;
    i.done = 10;
    i.now = T1.into();
    i.reconciling = false;
    let s = cluster_version_status(&s, &i);
    assert_eq!(s["history"].as_array().unwrap().len(), 1);
    assert_eq!(s["history"][0]["state"], "Completed");
    assert_eq!(s["history"][0]["completionTime"], T1);
    assert_eq!(s["history"][0]["startedTime"], T0);
    assert_eq!(
        summary(&s, "Available"),
        ("True".into(), String::new(), "Done applying 4.1.0".into())
    );
    assert_eq!(cond(&s, "Available")["lastTransitionTime"], T1);
    assert!(
        s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "Upgradeable")
    );
    assert_eq!(
        summary(&s, "Progressing"),
        (
            "False".into(),
            String::new(),
            "Cluster version is 4.1.0".into()
        )
    );

    // The upgrade: a new Partial entry on top, the old one keeps its completion time.
    let mut u = input("4.2.0");
    u.now = T1.into();
    u.done = 5;
    u.failure = summarize(vec![
        operator_not_available("dns"),
        operator_not_available("etcd"),
    ]);
    let s2 = cluster_version_status(&s, &u);
    let h = s2["history"].as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(
        (h[0]["version"].as_str(), h[0]["state"].as_str()),
        (Some("4.2.0"), Some("Partial"))
    );
    assert!(h[0]["completionTime"].is_null());
    assert_eq!(h[1]["completionTime"], T1);
    assert_eq!(s2["desired"]["version"], "4.2.0");
    assert_eq!(
        summary(&s2, "Failing"),
        (
            "True".into(),
            "ClusterOperatorsNotAvailable".into(),
            "Cluster operators dns, etcd are not available".into()
        )
    );
    assert_eq!(
        summary(&s2, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorsNotAvailable".into(),
            "Unable to apply 4.2.0: some cluster operators are not available".into()
        )
    );
    // Available stays True from the completed install.
    assert_eq!(summary(&s2, "Available").0, "True");
}

#[test]
fn a_task_error_is_summarized_by_its_reason() {
    let mut i = input("4.2.0");
    i.failure = Some(task_error(
        "configmap \"ns/a\" (3 of 10)",
        ApiErrorClass::Invalid,
        "",
    ));
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "Failing"),
        ("True".into(), "UpdatePayloadResourceInvalid".into(),
         "Could not update configmap \"ns/a\" (3 of 10): the object is invalid, possibly due to local cluster configuration".into())
    );
    assert_eq!(
        summary(&s, "Progressing").2,
        "Unable to apply 4.2.0: some cluster configuration is invalid"
    );
}

#[test]
fn an_updating_operator_is_a_wait_not_a_failure() {
    let live = serde_json::json!({"status": {"conditions": [
        {"type": "Available", "status": "True"}, {"type": "Degraded", "status": "False"}],
        "versions": [{"name": "operator", "version": "4.1"}]}});
    let expected = vec![health::OperandVersion {
        name: "operator".into(),
        version: "4.2".into(),
    }];
    let e = health::check_operator("dns", &expected, &live, Mode::Updating).unwrap();
    let mut i = input("4.2.0");
    i.done = 5;
    i.failure = summarize(vec![e.clone()]);
    i.operator_waits
        .insert("dns".into(), Duration::from_secs(60));
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "Failing"),
        ("False".into(), String::new(), String::new())
    );
    assert_eq!(
        summary(&s, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorUpdating".into(),
            "Working towards 4.2.0: 5 of 10 done (50% complete), waiting on dns".into()
        )
    );
    // Slow after 30 minutes: Failing Unknown.
    i.operator_waits
        .insert("dns".into(), Duration::from_secs(31 * 60));
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "Failing"),
        (
            "Unknown".into(),
            "SlowClusterOperator".into(),
            "waiting on dns over 30 minutes which is longer than expected".into()
        )
    );
    // MultipleErrors drops the waits: the one real error remains.
    i.operator_waits.clear();
    i.failure = summarize(vec![e, task_error("x", ApiErrorClass::Forbidden, "")]);
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(summary(&s, "Failing").1, "UpdatePayloadResourceForbidden");
}

#[test]
fn a_degraded_operator_waits_up_to_40_minutes() {
    let live = serde_json::json!({"status": {"conditions": [
        {"type": "Available", "status": "True"}, {"type": "Degraded", "status": "True"}]}});
    let expected = vec![health::OperandVersion {
        name: "operator".into(),
        version: "4.2".into(),
    }];
    let e = health::check_operator("dns", &expected, &live, Mode::Updating).unwrap();
    let mut i = input("4.2.0");
    i.failure = Some(e);
    i.operator_waits
        .insert("dns".into(), Duration::from_secs(60));
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(summary(&s, "Failing").0, "False");
    assert_eq!(
        summary(&s, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            "Working towards 4.2.0: waiting up to 40 minutes on dns".into()
        )
    );
    i.operator_waits.clear();
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "Failing"),
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            "Cluster operator dns is degraded".into()
        )
    );
    assert_eq!(
        summary(&s, "Progressing").2,
        "Unable to apply 4.2.0: wait has exceeded 40 minutes for these operators: dns"
    );
}

#[test]
fn reconciling_reports_the_version_or_the_error() {
    let mut i = input("4.1.0");
    i.reconciling = true;
    i.completed = true;
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "Progressing"),
        (
            "False".into(),
            String::new(),
            "Cluster version is 4.1.0".into()
        )
    );
    i.failure = Some(task_error("t", ApiErrorClass::Conflict, ""));
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "Progressing"),
        (
            "False".into(),
            "UpdatePayloadResourceConflict".into(),
            "Error while reconciling 4.1.0: some resources could not be updated".into()
        )
    );
}

#[test]
fn implicit_capabilities_and_deletions_show_in_conditions() {
    let mut i = input("4.2.0");
    i.capabilities.implicit = ["Insights".to_string(), "Console".to_string()]
        .into_iter()
        .collect();
    i.deletions_in_progress = vec!["configmap \"ns/b\"".into(), "configmap \"ns/a\"".into()];
    let s = cluster_version_status(&Value::Null, &i);
    assert_eq!(
        summary(&s, "ImplicitlyEnabledCapabilities"),
        (
            "True".into(),
            "CapabilitiesImplicitlyEnabled".into(),
            "The following capabilities could not be disabled: Console, Insights".into()
        )
    );
    let (st, reason, message) = summary(&s, "Upgradeable");
    assert_eq!((st.as_str(), reason.as_str()), ("False", "MultipleReasons"));
    assert!(
        message.ends_with("resources=configmap \"ns/a\",configmap \"ns/b\""),
        "{message}"
    );
}

#[test]
fn an_abandoned_update_keeps_partial_with_a_completion_time() {
    let s = cluster_version_status(&Value::Null, &input("4.2.0"));
    let mut i = input("4.3.0");
    i.now = T1.into();
    let s = cluster_version_status(&s, &i);
    let h = s["history"].as_array().unwrap();
    assert_eq!(h[1]["state"], "Partial");
    assert_eq!(h[1]["completionTime"], T1);
}

#[test]
fn transition_times_change_only_with_the_status() {
    let s = cluster_version_status(&Value::Null, &input("4.1.0"));
    let mut i = input("4.1.0");
    i.now = T1.into();
    i.done = 3;
    let s = cluster_version_status(&s, &i);
    assert_eq!(cond(&s, "Progressing")["lastTransitionTime"], T0);
    assert_eq!(
        cond(&s, "Progressing")["message"],
        "Working towards 4.1.0: 3 of 10 done (30% complete)"
    );
}

#[test]
fn history_is_pruned_to_100_keeping_the_ends() {
    let mut history: Vec<Value> = (0..101)
        .map(|n| {
            serde_json::json!({"state": "Completed", "version": format!("4.{}.{}", n / 10, n % 10),
            "image": format!("i{n}"), "startedTime": T0, "completionTime": T0, "verified": false})
        })
        .collect();
    history.reverse();
    let newest = history[0].clone();
    let oldest = history[100].clone();
    prune(&mut history, 100);
    assert_eq!(history.len(), 100);
    assert_eq!(history[0], newest);
    assert_eq!(history[99], oldest);
}

#[test]
fn percentages_truncate_like_float32() {
    assert_eq!(
        fraction(334, 1000).unwrap(),
        "334 of 1000 done (33% complete)"
    );
    assert_eq!(fraction(1, 3).unwrap(), "1 of 3 done (33% complete)");
    assert_eq!(fraction(0, 3), None);
    assert_eq!(fraction(1, 0), None);
}
