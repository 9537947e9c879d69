//! Administrator acknowledgements, the CVO's `AdminAck` risk source (`pkg/risk/adminack`):
//! ConfigMap `openshift-config-managed/admin-gates` names gates, ConfigMap
//! `openshift-config/admin-acks` acknowledges them. A gate `ack-<major>.<minor>-<name>` of the
//! running release's minor that is not acknowledged (`"true"` under the same key) is a risk of a
//! minor or major update, named `AdminAck-<gate>`, whose message is the gate's text: it makes
//! ClusterVersion `Upgradeable=False`, which holds a minor update (the
//! `ClusterVersionUpgradeable` precondition).
//!
//! A ConfigMap that is missing is the risk `AdminAckUnknown`, as in the CVO, but only when the
//! running release ships `admin-gates` (every OpenShift release does, among the CVO's own
//! manifests); for a payload without it a missing ConfigMap counts as an empty one (no gates,
//! nothing acknowledged).

use std::time::Duration;

use kube::Client;
use semver::Version;
use serde_json::Value;

use crate::cvo::status::Risk;
use crate::manifest::Manifest;

/// The gates ConfigMap's namespace and name.
pub const GATES: (&str, &str) = ("openshift-config-managed", "admin-gates");
/// The acknowledgements ConfigMap's namespace and name.
pub const ACKS: (&str, &str) = ("openshift-config", "admin-acks");

const SOURCE: &str = "AdminAck";
const GATE_FORMAT: &str = "^ack-([4-5][.][0-9]{1,})-[^-]";

/// A ConfigMap as read from the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// Its `data` (`Value::Null` when it has none).
    Found(Value),
    /// It does not exist.
    Missing,
    /// It could not be read: why.
    Failed(String),
}

/// Whether `manifests` (a release's) ship the `admin-gates` ConfigMap.
#[must_use]
pub fn ships_gates(manifests: &[Manifest]) -> bool {
    manifests.iter().any(|m| {
        m.id.kind == "ConfigMap"
            && m.id.group.is_empty()
            && m.id.namespace.as_deref() == Some(GATES.0)
            && m.id.name == GATES.1
    })
}

/// Reads both ConfigMaps: (gates, acknowledgements).
pub async fn read(client: &Client, timeout: Duration) -> (Read, Read) {
    let one = |(namespace, name): (&'static str, &'static str)| async move {
        let collection = format!("/api/v1/namespaces/{namespace}/configmaps");
        match crate::cluster::watch::get(client, &collection, name, timeout).await {
            Ok(Some(cm)) => Read::Found(cm.get("data").cloned().unwrap_or(Value::Null)),
            Ok(None) => Read::Missing,
            Err(e) => Read::Failed(e.to_string()),
        }
    };
    tokio::join!(one(GATES), one(ACKS))
}

/// The risks of the gates for a cluster on `version`, the CVO's way, sorted by name. `ships`:
/// the running release ships `admin-gates` (else a missing ConfigMap counts as empty).
#[must_use]
pub fn risks(version: &str, gates: &Read, acks: &Read, ships: bool) -> Vec<Risk> {
    let unknown = |message: String| {
        vec![Risk {
            name: format!("{SOURCE}Unknown"),
            message,
        }]
    };
    let current = match Version::parse(version) {
        Ok(v) => v,
        Err(e) => {
            return unknown(format!(
                "Failed to parse cluster version to check admin-acks: {e}"
            ));
        }
    };
    let mut data = Vec::new();
    for (read, (namespace, name)) in [(gates, GATES), (acks, ACKS)] {
        let why = match read {
            Read::Found(d) => {
                data.push(d);
                continue;
            }
            Read::Missing if !ships => {
                data.push(&Value::Null);
                continue;
            }
            Read::Missing => format!("configmap {name:?} not found"),
            Read::Failed(e) => e.clone(),
        };
        return unknown(format!(
            "Failed to retrieve ConfigMap {name} from namespace {namespace}: {why}"
        ));
    }
    let (gates, acks) = (data[0], data[1]);
    let mut out: Vec<Risk> = gates
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(gate, value)| {
            check_gate(gate, value.as_str().unwrap_or_default(), &current, acks)
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The risk of one gate, or `None` when it does not apply to `current` or is acknowledged.
fn check_gate(gate: &str, value: &str, current: &Version, acks: &Value) -> Option<Risk> {
    let risk = |message: String| {
        Some(Risk {
            name: format!("{SOURCE}-{gate}"),
            message,
        })
    };
    match applies(gate, current) {
        Ok(false) => return None,
        Ok(true) => {}
        Err(e) => {
            return risk(format!(
                "{} configmap gate {gate:?} is invalid: {e}",
                GATES.1
            ));
        }
    }
    if value.is_empty() {
        return risk(format!(
            "{} configmap gate {gate} must contain a non-empty value.",
            GATES.1
        ));
    }
    if acks.get(gate).and_then(Value::as_str) == Some("true") {
        return None;
    }
    risk(value.to_string())
}

/// Whether gate `gate` is of `current`'s major and minor version; an error when its name does
/// not follow the CVO's format.
fn applies(gate: &str, current: &Version) -> Result<bool, String> {
    let Some(ack) = gate_version(gate) else {
        return Err(format!(
            "{} configmap gate name {gate} has invalid format; must comply with {GATE_FORMAT:?}",
            GATES.1
        ));
    };
    let v = Version::parse(&format!("{ack}.0"))
        .map_err(|e| format!("failed to parse SemVer ack version from admin-gate {gate:?}: {e}"))?;
    Ok(v.major == current.major && v.minor == current.minor)
}

/// The `<major>.<minor>` of a gate named as `^ack-([4-5][.][0-9]{1,})-[^-]` requires.
fn gate_version(gate: &str) -> Option<&str> {
    let rest = gate.strip_prefix("ack-")?;
    let b = rest.as_bytes();
    if !matches!(b.first(), Some(b'4' | b'5')) || b.get(1) != Some(&b'.') {
        return None;
    }
    let digits = b[2..].iter().take_while(|c| c.is_ascii_digit()).count();
    let end = 2 + digits;
    (digits > 0 && b.get(end) == Some(&b'-') && b.get(end + 1).is_some_and(|c| *c != b'-'))
        .then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const GATE: &str = "ack-4.13-kube-1.27-api-removals-in-4.14";
    const TEXT: &str = "Kubernetes 1.27 and therefore OpenShift 4.14 remove several APIs which require admin consideration. Please see the knowledge article https://access.redhat.com/articles/6958394 for details and instructions.";

    fn found(v: Value) -> Read {
        Read::Found(v)
    }

    #[test]
    fn an_unacknowledged_gate_of_the_running_minor_is_a_risk_with_its_text() {
        let gates = found(json!({GATE: TEXT, "ack-4.12-old": "for 4.12 clusters"}));
        assert_eq!(
            risks("4.13.2", &gates, &found(Value::Null), true),
            vec![Risk {
                name: format!("AdminAck-{GATE}"),
                message: TEXT.into(),
            }]
        );
        // Acknowledged only by "true".
        let acked = found(json!({GATE: "yes"}));
        assert_eq!(risks("4.13.2", &gates, &acked, true).len(), 1);
        let acked = found(json!({GATE: "true"}));
        assert_eq!(risks("4.13.2", &gates, &acked, true), Vec::new());
        // A gate of another minor does not apply.
        assert_eq!(risks("4.14.0", &gates, &found(json!({})), true), Vec::new());
    }

    #[test]
    fn invalid_and_empty_gates_are_risks_sorted_by_name() {
        let gates = found(json!({"ack-4.13-b": "", "bad-gate": "x", "ack-4.13-a": "text a"}));
        let got = risks("4.13.0", &gates, &found(json!({})), true);
        let names: Vec<&str> = got.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AdminAck-ack-4.13-a",
                "AdminAck-ack-4.13-b",
                "AdminAck-bad-gate"
            ]
        );
        assert_eq!(got[0].message, "text a");
        assert_eq!(
            got[1].message,
            "admin-gates configmap gate ack-4.13-b must contain a non-empty value."
        );
        assert_eq!(
            got[2].message,
            "admin-gates configmap gate \"bad-gate\" is invalid: admin-gates configmap gate name bad-gate has invalid format; must comply with \"^ack-([4-5][.][0-9]{1,})-[^-]\""
        );
    }

    #[test]
    fn gate_names_follow_the_cvo_pattern() {
        assert_eq!(gate_version("ack-4.13-x"), Some("4.13"));
        assert_eq!(gate_version("ack-5.0-x-y"), Some("5.0"));
        for bad in [
            "ack-4.13--x",
            "ack-4.13-",
            "ack-3.13-x",
            "ack-4.-x",
            "ack-4.1a-x",
            "ack-4-x",
        ] {
            assert_eq!(gate_version(bad), None, "{bad}");
        }
        // A minor with a leading zero matches the pattern but is no SemVer.
        let e = applies("ack-4.013-x", &Version::new(4, 13, 0)).unwrap_err();
        assert!(
            e.starts_with("failed to parse SemVer ack version from admin-gate \"ack-4.013-x\": "),
            "{e}"
        );
    }

    #[test]
    fn a_missing_config_map_is_unknown_when_the_release_ships_the_gates() {
        let gates = found(json!({GATE: TEXT}));
        assert_eq!(
            risks("4.13.0", &gates, &Read::Missing, true),
            vec![Risk {
                name: "AdminAckUnknown".into(),
                message: "Failed to retrieve ConfigMap admin-acks from namespace openshift-config: configmap \"admin-acks\" not found".into(),
            }]
        );
        assert_eq!(
            risks("4.13.0", &Read::Missing, &found(json!({})), true)[0].message,
            "Failed to retrieve ConfigMap admin-gates from namespace openshift-config-managed: configmap \"admin-gates\" not found"
        );
        assert_eq!(
            risks(
                "4.13.0",
                &Read::Failed("forbidden".into()),
                &Read::Missing,
                false
            )[0]
            .message,
            "Failed to retrieve ConfigMap admin-gates from namespace openshift-config-managed: forbidden"
        );
        // For a release without the gates ConfigMap, a missing one counts as empty.
        assert_eq!(
            risks("4.13.0", &Read::Missing, &Read::Missing, false),
            Vec::new()
        );
        assert_eq!(
            risks("4.13.0", &gates, &Read::Missing, false),
            vec![Risk {
                name: format!("AdminAck-{GATE}"),
                message: TEXT.into(),
            }]
        );
        let bad = risks("", &gates, &found(json!({})), true);
        assert_eq!(bad[0].name, "AdminAckUnknown");
        assert!(
            bad[0]
                .message
                .starts_with("Failed to parse cluster version to check admin-acks: "),
            "{bad:?}"
        );
    }
}
