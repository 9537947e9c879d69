use serde_json::{Value, json};

use super::*;

fn cv(current: &str, conditions: Value) -> Value {
    json!({
        "spec": {"clusterID": "x"},
        "status": {
            "desired": {"version": current, "image": format!("r:{current}")},
            "history": [
                {"state": "Completed", "version": current, "image": format!("r:{current}")},
                {"state": "Completed", "version": "4.13.0", "image": "r:4.13.0"},
            ],
            "conditions": conditions,
        },
    })
}

fn names(f: &[Failure]) -> Vec<(&str, &str, bool)> {
    f.iter()
        .map(|f| (f.name, f.reason.as_str(), f.warning))
        .collect()
}

const NO_CHANNEL: (&str, &str, bool) = ("ClusterVersionRecommendedUpdate", "NoChannel", true);

#[test]
fn upgradeable_false_holds_a_minor_update_and_lets_a_patch_through() {
    let held = cv(
        "4.14.0",
        json!([{"type": "Upgradeable", "status": "False", "reason": "RiskNameNotCompatibleWithReasonProperty",
                "message": "the network operator is migrating"}]),
    );
    let minor = run(Some(&held), "4.15.0");
    assert_eq!(
        names(&minor),
        [
            (
                "ClusterVersionUpgradeable",
                "RiskNameNotCompatibleWithReasonProperty",
                false
            ),
            NO_CHANNEL
        ]
    );
    let s = summarize(&minor, false).unwrap();
    assert!(s.blocking);
    assert!(
        s.message.starts_with("Multiple precondition checks failed:\n* Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": the network operator is migrating\n* Precondition \"ClusterVersionRecommendedUpdate\" failed because of \"NoChannel\": Configured channel is unset, so the recommended status of updating from 4.14.0 to 4.15.0 is unknown."),
        "{}",
        s.message
    );
    // force: the block becomes a warning.
    let forced = summarize(&minor, true).unwrap();
    assert!(
        !forced.blocking
            && forced
                .message
                .starts_with("Forced through blocking failures: ")
    );
    // A patch update is not held; the only failure is the warning.
    let patch = run(Some(&held), "4.14.1");
    assert_eq!(names(&patch), [NO_CHANNEL]);
    assert!(!summarize(&patch, false).unwrap().blocking);
}

#[test]
fn a_rollback_only_to_the_previous_patch_release() {
    let at = |v: &str, prev: &str| {
        json!({"status": {"desired": {"version": v, "image": format!("r:{v}")},
               "history": [{"version": v, "image": format!("r:{v}")}, {"version": prev, "image": format!("r:{prev}")}]}})
    };
    assert_eq!(
        names(&run(Some(&at("4.14.2", "4.14.1")), "4.14.1")),
        [NO_CHANNEL]
    );
    let f = run(Some(&at("4.14.2", "4.14.1")), "4.14.0");
    let low = ("ClusterVersionRollback", "LowDesiredVersion", false);
    assert_eq!(names(&f), [low, NO_CHANNEL]);
    assert_eq!(
        f[0].message,
        "4.14.0 is less than the current target 4.14.2, and the only supported rollback is to the cluster's previous version 4.14.1 (r:4.14.1)"
    );
    let minor = run(Some(&at("4.14.0", "4.13.0")), "4.13.0");
    assert_eq!(names(&minor), [low, NO_CHANNEL]);
    assert!(
        minor[0]
            .message
            .ends_with("rollbacks that change major or minor versions are not recommended")
    );
    let fresh = json!({"status": {"desired": {"version": "4.14.0", "image": "r"}, "history": [{"version": "4.14.0", "image": "r"}]}});
    let none = run(Some(&fresh), "4.13.9");
    assert_eq!(names(&none), [low, NO_CHANNEL]);
    assert!(
        none[0]
            .message
            .ends_with("the cluster has no previous Semantic Version")
    );
}

#[test]
fn a_giant_hop_is_refused() {
    let c = cv("4.13.0", json!([]));
    let two = run(Some(&c), "4.15.0");
    assert_eq!(
        names(&two),
        [
            (
                "ClusterVersionGiantHop",
                "MultipleMinorVersionsUpdate",
                false
            ),
            NO_CHANNEL
        ]
    );
    assert_eq!(
        two[0].message,
        "4.15.0 is more than one minor version beyond the current target 4.13.0 (4.15 > 4.(13+1)), and only updates within the current minor version or to the next minor version are supported."
    );
    assert_eq!(
        names(&run(Some(&c), "5.1.0")),
        [
            ("ClusterVersionGiantHop", "MajorVersionUpdate", false),
            NO_CHANNEL
        ]
    );
    // 4 to 5.0 is let through for now, as by the CVO.
    assert_eq!(names(&run(Some(&c), "5.0.0")), [NO_CHANNEL]);
    // A target that is no version blocks both version checks; only the channel warning
    // comes besides.
    let bad = run(Some(&c), "not-semver");
    assert_eq!(
        names(&bad),
        [
            ("ClusterVersionRollback", "InvalidDesiredVersion", false),
            ("ClusterVersionGiantHop", "InvalidDesiredVersion", false),
            NO_CHANNEL,
        ]
    );
}

#[test]
fn overrides_and_an_update_in_progress_make_patch_retargets_accepted_risks() {
    let mut c = cv(
        "4.14.0",
        json!([{"type": "Upgradeable", "status": "False", "reason": "ClusterVersionUpdating", "message": "m"},
               {"type": "Progressing", "status": "True"}]),
    );
    c["status"]["history"][0]["state"] = json!("Partial");
    let f = run(Some(&c), "4.14.1");
    assert_eq!(f[0].reason, "MinorVersionClusterUpdateInProgress");
    assert_eq!(
        f[0].message,
        "Retarget to 4.14.1 while a minor version update from 4.13.0 to 4.14.0 is in progress"
    );
    c["spec"]["overrides"] = json!([{"kind": "ConfigMap", "unmanaged": true}]);
    let f = run(Some(&c), "4.14.1");
    assert_eq!(
        (f[0].reason.as_str(), f[0].warning),
        ("ClusterVersionOverridesSet", true)
    );
}

#[test]
fn a_recommended_update_is_no_warning() {
    let mut c = cv("4.14.0", json!([]));
    c["spec"]["channel"] = json!("stable-4.15");
    c["status"]["availableUpdates"] = json!([{"version": "4.15.1", "image": "r:4.15.1"}]);
    assert!(run(Some(&c), "4.15.1").is_empty());
    let other = run(Some(&c), "4.15.2");
    assert_eq!(
        names(&other),
        [("ClusterVersionRecommendedUpdate", "UnknownUpdate", true)]
    );
    assert_eq!(
        other[0].message,
        "No RetrievedUpdates, so the recommended status of updating from 4.14.0 to 4.15.2 is unknown."
    );
    c["status"]["conditionalUpdates"] = json!([{"release": {"version": "4.15.2"},
        "conditions": [{"type": "Recommended", "status": "False", "reason": "SomeRisk", "message": "bad"}]}]);
    let f = run(Some(&c), "4.15.2");
    assert_eq!(
        (f[0].reason.as_str(), f[0].message.as_str()),
        (
            "SomeRisk",
            "Update from 4.14.0 to 4.15.2 is not recommended:\n\nbad"
        )
    );
    assert!(run(None, "4.15.2").is_empty());
}

#[test]
fn operators_with_upgradeable_false_and_unmanaged_overrides_are_risks() {
    let co = |name: &str, status: &str| {
        json!({"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Upgradeable", "status": status, "message": format!("{name} says no")}]}})
    };
    let c = json!({"spec": {"overrides": [{"unmanaged": true}]}});
    let risks = upgradeable_risks(
        Some(&c),
        &[
            co("zeta", "False"),
            co("alpha", "False"),
            co("beta", "True"),
        ],
    );
    let got: Vec<&str> = risks.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        got,
        [
            "ClusterVersionOverrides",
            "ClusterOperatorUpgradeable-alpha",
            "ClusterOperatorUpgradeable-zeta"
        ]
    );
    let one = crate::cvo::status::upgradeable_condition(false, &[], &risks[1..2]).unwrap();
    assert_eq!(
        one,
        (
            "RiskNameNotCompatibleWithReasonProperty".into(),
            "alpha says no".into()
        )
    );
    let (reason, message) = crate::cvo::status::upgradeable_condition(true, &[], &risks).unwrap();
    assert_eq!(reason, "MultipleReasons");
    assert!(message.starts_with("Cluster should not be upgraded between minor or major versions for multiple reasons:\n* An update is already in progress"), "{message}");
    assert_eq!(
        crate::cvo::status::upgradeable_condition(false, &[], &[]),
        None
    );
}
