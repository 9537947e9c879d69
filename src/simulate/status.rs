//! The ClusterOperator status a simulated operator writes, and whether the live status
//! already says it. Pure.

use serde_json::{Value, json};

use super::operators::OperatorSpec;
use super::script::Report;

/// The message every simulated condition carries.
pub const MESSAGE: &str = "simulated by minicvo";

fn condition(kind: &str, status: bool, reason: &str, now: &str) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": MESSAGE,
        "lastTransitionTime": now,
    })
}

/// The `status` to write for `report` (`None` for [`Report::Never`]). `flap_up` is the
/// current half-period of [`Report::Flap`]. `now` is an RFC 3339 time.
#[must_use]
pub fn status_for(op: &OperatorSpec, report: &Report, flap_up: bool, now: &str) -> Option<Value> {
    let versions = |over: Option<&str>| -> Vec<Value> {
        op.versions
            .iter()
            .map(|(n, v)| json!({"name": n, "version": over.unwrap_or(v)}))
            .collect()
    };
    let (versions, available, degraded, reason) = match report {
        Report::Never => return None,
        Report::Normal => (versions(None), true, false, "AsExpected"),
        Report::Degraded => (versions(None), true, true, "SimulatedDegraded"),
        Report::WrongVersion(v) => (versions(Some(v)), true, false, "AsExpected"),
        Report::Flap(_) if flap_up => (versions(None), true, false, "AsExpected"),
        Report::Flap(_) => (versions(None), false, false, "SimulatedFlap"),
    };
    let available_reason = if available { "AsExpected" } else { reason };
    let degraded_reason = if degraded { reason } else { "AsExpected" };
    Some(json!({
        "versions": versions,
        "conditions": [
            condition("Available", available, available_reason, now),
            condition("Degraded", degraded, degraded_reason, now),
            condition("Progressing", false, "AsExpected", now),
        ],
    }))
}

fn condition_statuses(status: &Value) -> Vec<(String, String)> {
    let mut c: Vec<(String, String)> = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c.get("type")?.as_str()?.to_string(),
                c.get("status")?.as_str()?.to_string(),
            ))
        })
        .collect();
    c.sort();
    c
}

fn version_pairs(status: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = status
        .get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                v.get("name")?.as_str()?.to_string(),
                v.get("version")?.as_str()?.to_string(),
            ))
        })
        .collect();
    v.sort();
    v
}

/// Whether the live ClusterOperator's status already has `want`'s versions and condition
/// statuses (times and messages are not compared), so nothing needs writing.
#[must_use]
pub fn already_reported(live: &Value, want: &Value) -> bool {
    let have = live.get("status").unwrap_or(&Value::Null);
    version_pairs(have) == version_pairs(want)
        && condition_statuses(have) == condition_statuses(want)
}

/// A one-line summary of a ClusterOperator's status for timelines and logs:
/// `operator=4.14.0 Available=True Degraded=False Progressing=False`.
#[must_use]
pub fn summary(live: &Value) -> String {
    let status = live.get("status").unwrap_or(&Value::Null);
    let mut parts: Vec<String> = version_pairs(status)
        .into_iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let order = ["Available", "Degraded", "Progressing"];
    let mut conds = condition_statuses(status);
    conds.sort_by_key(|(t, _)| order.iter().position(|o| o == t).unwrap_or(order.len()));
    parts.extend(conds.into_iter().map(|(t, s)| format!("{t}={s}")));
    if parts.is_empty() {
        "no status".into()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> OperatorSpec {
        OperatorSpec {
            name: "mc".into(),
            task: 0,
            versions: vec![
                ("operator".into(), "4.14.0".into()),
                ("operator-image".into(), "img".into()),
            ],
            component: None,
            workloads: Vec::new(),
        }
    }

    fn conds(s: &Value) -> Vec<(String, String)> {
        condition_statuses(s)
    }

    #[test]
    fn normal_report_is_done_by_the_cvo_rule() {
        let s = status_for(&op(), &Report::Normal, true, "2024-01-01T00:00:00Z").unwrap();
        assert_eq!(
            version_pairs(&s),
            vec![
                ("operator".to_string(), "4.14.0".to_string()),
                ("operator-image".to_string(), "img".to_string())
            ]
        );
        let live = json!({"status": s});
        let h = crate::clusteroperator::health(
            Some(&live),
            &op().versions,
            crate::plan::Mode::Updating,
        );
        assert!(h.done, "{h:?}");
    }

    #[test]
    fn scripted_reports_block_the_wait() {
        let now = "2024-01-01T00:00:00Z";
        assert!(status_for(&op(), &Report::Never, true, now).is_none());
        let degraded = status_for(&op(), &Report::Degraded, true, now).unwrap();
        assert!(conds(&degraded).contains(&("Degraded".into(), "True".into())));
        let h = crate::clusteroperator::health(
            Some(&json!({"status": degraded})),
            &op().versions,
            crate::plan::Mode::Updating,
        );
        assert_eq!(
            h.blocking,
            vec![format!("Degraded=True: SimulatedDegraded: {MESSAGE}")]
        );
        let wrong = status_for(&op(), &Report::WrongVersion("9".into()), true, now).unwrap();
        assert_eq!(version_pairs(&wrong)[0].1, "9");
        let down = status_for(
            &op(),
            &Report::Flap(std::time::Duration::from_secs(1)),
            false,
            now,
        )
        .unwrap();
        assert!(conds(&down).contains(&("Available".into(), "False".into())));
    }

    #[test]
    fn already_reported_ignores_times_and_order() {
        let want = status_for(&op(), &Report::Normal, true, "2024-01-01T00:00:00Z").unwrap();
        let mut live = status_for(&op(), &Report::Normal, true, "2023-01-01T00:00:00Z").unwrap();
        live["conditions"].as_array_mut().unwrap().reverse();
        assert!(already_reported(&json!({"status": live}), &want));
        assert!(!already_reported(&json!({}), &want));
        let degraded = status_for(&op(), &Report::Degraded, true, "x").unwrap();
        assert!(!already_reported(&json!({"status": degraded}), &want));
    }

    #[test]
    fn summaries() {
        let s = status_for(&op(), &Report::Normal, true, "x").unwrap();
        assert_eq!(
            summary(&json!({"status": s})),
            "operator=4.14.0 operator-image=img Available=True Degraded=False Progressing=False"
        );
        assert_eq!(summary(&json!({})), "no status");
    }
}
