//! When a ClusterOperator is done, by the CVO's rule (`checkOperatorHealth`, cvo.md §7), and
//! why it is not, in words a person can act on.
//!
//! - Every `status.versions` entry of the manifest must be matched exactly by the live entry
//!   of the same name (extra live entries are ignored).
//! - `Available` must be `True` (a missing condition counts as not available).
//! - `Degraded` must be `False` (a missing condition counts as degraded).
//! - `Progressing` is ignored.
//! - Initializing mode requires only `Available=True`: degraded operators are reported and
//!   unfinished versions accepted.
//!
//! The CVO checks once per pass and re-walks the graph later; minicvo watches the operator
//! and continues the moment it is done (see [`crate::cluster::watch`]).

use serde_json::Value;

use crate::plan::Mode;

/// The versions a ClusterOperator manifest asks for: `(name, version)` pairs.
#[must_use]
pub fn wanted_versions(manifest: &Value) -> Vec<(String, String)> {
    manifest
        .pointer("/status/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|v| {
            Some((
                v.get("name")?.as_str()?.to_string(),
                v.get("version")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// The verdict on a live ClusterOperator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Whether the wait is over.
    pub done: bool,
    /// What blocks it (empty when done), e.g. `operator=4.13.0 want 4.14.0`.
    pub blocking: Vec<String>,
    /// What is wrong but does not block in this mode (initializing: degraded, versions).
    pub reported: Vec<String>,
}

fn condition<'a>(live: &'a Value, kind: &str) -> Option<&'a Value> {
    live.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn reason_text(c: &Value) -> String {
    let reason = c.get("reason").and_then(Value::as_str).unwrap_or_default();
    let message = c.get("message").and_then(Value::as_str).unwrap_or_default();
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => reason.to_string(),
        (true, false) => message.to_string(),
        (false, false) => format!("{reason}: {message}"),
    }
}

/// Judges `live` (`None`: absent) against the wanted versions.
#[must_use]
pub fn health(live: Option<&Value>, want: &[(String, String)], mode: Mode) -> Health {
    let Some(live) = live else {
        return Health {
            done: false,
            blocking: vec!["not found".into()],
            reported: Vec::new(),
        };
    };
    let mut availability = Vec::new();
    match condition(live, "Available") {
        None => availability.push("not Available (no Available condition)".to_string()),
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => {}
        Some(c) => {
            let status = c.get("status").and_then(Value::as_str).unwrap_or("Unknown");
            let why = reason_text(c);
            availability.push(if why.is_empty() {
                format!("Available={status}")
            } else {
                format!("Available={status}: {why}")
            });
        }
    }
    let mut degraded = Vec::new();
    match condition(live, "Degraded") {
        None => degraded.push("no Degraded condition (counts as degraded)".to_string()),
        Some(c) if c.get("status").and_then(Value::as_str) == Some("False") => {}
        Some(c) => {
            let status = c.get("status").and_then(Value::as_str).unwrap_or("Unknown");
            let why = reason_text(c);
            degraded.push(if why.is_empty() {
                format!("Degraded={status}")
            } else {
                format!("Degraded={status}: {why}")
            });
        }
    }
    let live_versions = live
        .pointer("/status/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut versions = Vec::new();
    for (name, version) in want {
        let have = live_versions
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|v| v.get("version").and_then(Value::as_str));
        if have != Some(version.as_str()) {
            versions.push(format!(
                "{name}={} want {version}",
                have.unwrap_or("<none>")
            ));
        }
    }
    let (blocking, reported) = if mode == Mode::Initializing {
        (availability, [degraded, versions].concat())
    } else {
        ([availability, degraded, versions].concat(), Vec::new())
    };
    Health {
        done: blocking.is_empty(),
        blocking,
        reported,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn want() -> Vec<(String, String)> {
        vec![("operator".into(), "4.14.0".into())]
    }

    fn co(versions: &Value, conditions: &Value) -> Value {
        json!({"status": {"versions": versions, "conditions": conditions}})
    }

    fn ok_conditions() -> Value {
        json!([{"type": "Available", "status": "True"}, {"type": "Degraded", "status": "False"}])
    }

    #[test]
    fn wanted_versions_read_the_manifest_status() {
        let m =
            json!({"status": {"versions": [{"name": "operator", "version": "1"}, {"name": "x"}]}});
        assert_eq!(wanted_versions(&m), vec![("operator".into(), "1".into())]);
        assert!(wanted_versions(&json!({})).is_empty());
    }

    #[test]
    fn done_when_versions_match_available_and_not_degraded() {
        let live = co(
            &json!([{"name": "operator", "version": "4.14.0"}, {"name": "extra", "version": "9"}]),
            &ok_conditions(),
        );
        let h = health(Some(&live), &want(), Mode::Updating);
        assert!(h.done, "{h:?}");
    }

    #[test]
    fn desired_versions_and_no_conditions_is_not_available() {
        // Test_checkOperatorHealth "desired versions and no conditions".
        let live = co(
            &json!([{"name": "operator", "version": "4.14.0"}]),
            &json!([]),
        );
        let h = health(Some(&live), &want(), Mode::Updating);
        assert!(!h.done);
        assert_eq!(h.blocking[0], "not Available (no Available condition)");
    }

    #[test]
    fn missing_degraded_counts_as_degraded() {
        // Test_checkOperatorHealth "available=true no progressing or degraded".
        let live = co(
            &json!([{"name": "operator", "version": "4.14.0"}]),
            &json!([{"type": "Available", "status": "True"}]),
        );
        let h = health(Some(&live), &want(), Mode::Updating);
        assert_eq!(
            h.blocking,
            vec!["no Degraded condition (counts as degraded)"]
        );
    }

    #[test]
    fn version_mismatch_names_both_versions() {
        let live = co(
            &json!([{"name": "operator", "version": "4.13.0"}]),
            &ok_conditions(),
        );
        let h = health(Some(&live), &want(), Mode::Updating);
        assert_eq!(h.blocking, vec!["operator=4.13.0 want 4.14.0"]);
        let live = co(&json!([]), &ok_conditions());
        let h = health(Some(&live), &want(), Mode::Reconciling);
        assert_eq!(h.blocking, vec!["operator=<none> want 4.14.0"]);
    }

    #[test]
    fn every_listed_version_must_match_not_only_operator() {
        let want = vec![
            ("operator".into(), "4.14.0".into()),
            ("operand".into(), "2.0".into()),
        ];
        let live = co(
            &json!([{"name": "operator", "version": "4.14.0"}]),
            &ok_conditions(),
        );
        let h = health(Some(&live), &want, Mode::Updating);
        assert_eq!(h.blocking, vec!["operand=<none> want 2.0"]);
    }

    #[test]
    fn degraded_reason_is_shown() {
        let live = co(
            &json!([{"name": "operator", "version": "4.14.0"}]),
            &json!([{"type": "Available", "status": "True"},
                    {"type": "Degraded", "status": "True", "reason": "DrainFailed", "message": "node a"}]),
        );
        let h = health(Some(&live), &want(), Mode::Updating);
        assert_eq!(h.blocking, vec!["Degraded=True: DrainFailed: node a"]);
    }

    #[test]
    fn initializing_needs_only_available() {
        let live = co(
            &json!([{"name": "operator", "version": "4.13.0"}]),
            &json!([{"type": "Available", "status": "True"}, {"type": "Degraded", "status": "True"}]),
        );
        let h = health(Some(&live), &want(), Mode::Initializing);
        assert!(h.done);
        assert_eq!(h.reported.len(), 2);
        let live = co(
            &json!([]),
            &json!([{"type": "Available", "status": "False", "reason": "Starting"}]),
        );
        let h = health(Some(&live), &want(), Mode::Initializing);
        assert_eq!(h.blocking, vec!["Available=False: Starting"]);
    }

    #[test]
    fn absent_operator_is_not_done() {
        assert_eq!(
            health(None, &want(), Mode::Updating).blocking,
            vec!["not found"]
        );
    }
}
