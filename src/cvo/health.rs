//! The CVO's ClusterOperator health rule (`checkOperatorHealth`): expected versions, then
//! Available, then Degraded, then the versions, each with its reason, effect and wording.

use serde_json::Value;

use super::error::{Effect, UpdateError};
use crate::plan::Mode;

/// One `status.versions[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandVersion {
    /// Operand name, e.g. `operator`.
    pub name: String,
    /// Version.
    pub version: String,
}

/// The `status.versions` of a ClusterOperator object (manifest or live).
#[must_use]
pub fn versions(object: &Value) -> Vec<OperandVersion> {
    object
        .pointer("/status/versions")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|v| OperandVersion {
                    name: v["name"].as_str().unwrap_or_default().to_string(),
                    version: v["version"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn error(
    name: &str,
    reason: &str,
    plural: &str,
    message: String,
    format: &str,
    nested: String,
    effect: Effect,
) -> UpdateError {
    let mut e = UpdateError::new(reason, message);
    e.plural_reason = plural.to_string();
    e.plural_message_format = format.to_string();
    e.name = name.to_string();
    e.nested_message = nested;
    e.effect = Some(effect);
    e.cluster_operator = true;
    e
}

/// An operator manifest without `status.versions`: the CVO fails it before reading the cluster.
#[must_use]
pub fn no_versions(name: &str) -> UpdateError {
    error(
        name,
        "ClusterOperatorNoVersions",
        "ClusterOperatorsNoVersions",
        format!("Cluster operator {name} does not declare expected versions"),
        "Cluster operators %s do not declare expected versions",
        String::new(),
        Effect::Fail,
    )
}

/// Checks a live ClusterOperator against the versions its manifest expects, in the CVO's
/// order: the first rule that fails, as the CVO words it, or `None` when healthy.
#[must_use]
pub fn check_operator(
    name: &str,
    expected: &[OperandVersion],
    actual: &Value,
    mode: Mode,
) -> Option<UpdateError> {
    if expected.is_empty() {
        return Some(no_versions(name));
    }
    let live = versions(actual);
    let mut undone: Vec<String> = expected
        .iter()
        .filter_map(|e| match live.iter().find(|a| a.name == e.name) {
            Some(a) if a.version == e.version => None,
            Some(a) => Some(format!("{} from {} to {}", e.name, a.version, e.version)),
            None => Some(format!("{} to {}", e.name, e.version)),
        })
        .collect();
    undone.sort();
    let condition = |t: &str| {
        actual
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|c| c["type"] == t))
    };
    let text = |c: Option<&Value>, k: &str| {
        c.and_then(|c| c[k].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let available_c = condition("Available");
    let degraded_c = condition("Degraded");
    let progressing_c = condition("Progressing");
    let available = available_c.is_some_and(|c| c["status"] == "True");
    let degraded = degraded_c.is_none_or(|c| c["status"] != "False");
    let progressing = progressing_c.is_some_and(|c| c["status"] == "True");
    let default_nested = format!(
        "cluster operator {name}: available={available}, progressing={progressing}, degraded={degraded}, undone={}",
        undone.join(", ")
    );
    if !available {
        let nested = if text(available_c, "message").is_empty() {
            default_nested
        } else {
            format!(
                "cluster operator {name} is Available={}: {}: {}",
                text(available_c, "status"),
                text(available_c, "reason"),
                text(available_c, "message")
            )
        };
        return Some(error(
            name,
            "ClusterOperatorNotAvailable",
            "ClusterOperatorsNotAvailable",
            format!("Cluster operator {name} is not available"),
            "Cluster operators %s are not available",
            nested,
            Effect::Fail,
        ));
    }
    if degraded {
        let nested = if text(degraded_c, "message").is_empty() {
            default_nested
        } else {
            format!(
                "cluster operator {name} is Degraded={}: {}, {}",
                text(degraded_c, "status"),
                text(degraded_c, "reason"),
                text(degraded_c, "message")
            )
        };
        let effect = if mode == Mode::Initializing {
            Effect::Report
        } else {
            Effect::FailAfterInterval
        };
        return Some(error(
            name,
            "ClusterOperatorDegraded",
            "ClusterOperatorsDegraded",
            format!("Cluster operator {name} is degraded"),
            "Cluster operators %s are degraded",
            nested,
            effect,
        ));
    }
    if !undone.is_empty() && mode != Mode::Initializing {
        return Some(error(
            name,
            "ClusterOperatorUpdating",
            "ClusterOperatorsUpdating",
            format!("Cluster operator {name} is updating versions"),
            "Cluster operators %s are updating versions",
            format!(
                "cluster operator {name} is available and not degraded but has not finished updating to target version"
            ),
            Effect::None,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn expected() -> Vec<OperandVersion> {
        vec![OperandVersion {
            name: "operator".into(),
            version: "4.2".into(),
        }]
    }

    fn co(available: &str, degraded: Option<&str>, version: Option<&str>) -> Value {
        let mut conditions = vec![json!({"type": "Available", "status": available,
            "reason": "R", "message": "m"})];
        if let Some(d) = degraded {
            conditions
                .push(json!({"type": "Degraded", "status": d, "reason": "D", "message": "dm"}));
        }
        let versions: Vec<Value> = version
            .map(|v| vec![json!({"name": "operator", "version": v})])
            .unwrap_or_default();
        json!({"status": {"conditions": conditions, "versions": versions}})
    }

    #[test]
    fn availability_is_checked_before_degraded_and_versions() {
        let e = check_operator(
            "dns",
            &expected(),
            &co("False", Some("True"), None),
            Mode::Updating,
        )
        .unwrap();
        assert_eq!(e.reason, "ClusterOperatorNotAvailable");
        assert_eq!(e.message, "Cluster operator dns is not available");
        assert_eq!(
            e.nested_message,
            "cluster operator dns is Available=False: R: m"
        );
        assert_eq!(e.effect, Some(Effect::Fail));
    }

    #[test]
    fn a_missing_degraded_condition_counts_as_degraded() {
        let e = check_operator(
            "dns",
            &expected(),
            &co("True", None, Some("4.2")),
            Mode::Updating,
        )
        .unwrap();
        assert_eq!(e.reason, "ClusterOperatorDegraded");
        assert_eq!(e.effect, Some(Effect::FailAfterInterval));
        assert_eq!(
            e.nested_message,
            "cluster operator dns: available=true, progressing=false, degraded=true, undone="
        );
        let e = check_operator(
            "dns",
            &expected(),
            &co("True", Some("True"), Some("4.2")),
            Mode::Initializing,
        )
        .unwrap();
        assert_eq!(e.effect, Some(Effect::Report));
        assert_eq!(
            e.nested_message,
            "cluster operator dns is Degraded=True: D, dm"
        );
    }

    #[test]
    fn old_versions_block_except_while_initializing() {
        let live = co("True", Some("False"), Some("4.1"));
        let e = check_operator("dns", &expected(), &live, Mode::Updating).unwrap();
        assert_eq!(e.reason, "ClusterOperatorUpdating");
        assert_eq!(e.effect, Some(Effect::None));
        assert_eq!(e.message, "Cluster operator dns is updating versions");
        assert!(check_operator("dns", &expected(), &live, Mode::Initializing).is_none());
        let done = co("True", Some("False"), Some("4.2"));
        assert!(check_operator("dns", &expected(), &done, Mode::Reconciling).is_none());
    }

    #[test]
    fn a_manifest_without_versions_fails() {
        let e = check_operator("dns", &[], &json!({}), Mode::Updating).unwrap();
        assert_eq!(e.reason, "ClusterOperatorNoVersions");
        assert_eq!(
            e.message,
            "Cluster operator dns does not declare expected versions"
        );
    }
}
