//! ClusterVersion's `Upgradeable` condition as the CVO sets it (`setUpgradeableCondition`
//! over its risk sources): `False` while a risk of a minor or major update applies, with the
//! risk's name as the reason (when it is a valid reason) and its message.

use std::collections::BTreeSet;

use serde_json::Value;

use super::set;

/// A risk of a minor or major update, behind ClusterVersion's `Upgradeable` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Risk {
    /// The CVO's risk name, e.g. `ClusterOperatorUpgradeable-network`.
    pub name: String,
    /// For people.
    pub message: String,
}

/// The Upgradeable condition: removed when nothing blocks an upgrade, else False with the
/// CVO's risk names and messages (an update in progress, overrides, deletions in progress,
/// ClusterOperators), as [`upgradeable_condition`] words it.
pub(super) fn upgradeable(
    conditions: &mut Vec<Value>,
    now: &str,
    progressing: bool,
    deletions: &[String],
    extra: &[Risk],
) {
    const LEGACY: &[&str] = &[
        "UpgradeableAdminAckRequired",
        "UpgradeableDeletesInProgress",
        "UpgradeableClusterOperators",
        "UpgradeableClusterVersionOverrides",
        "UpgradeableUpgradeInProgress",
    ];
    conditions.retain(|c| !LEGACY.iter().any(|l| c["type"] == *l));
    match upgradeable_condition(progressing, deletions, extra) {
        None => conditions.retain(|c| c["type"] != "Upgradeable"),
        Some((reason, message)) => set(conditions, now, "Upgradeable", "False", &reason, &message),
    }
}

/// The reason and message of `Upgradeable=False` for these risks in the CVO's order
/// (`ClusterVersionUpdating`, `ClusterVersionOverrides`, `ResourceDeletionInProgress`, then
/// `extra`'s others); `None`: nothing blocks. A single risk's name is the reason when it is a
/// valid reason, else `RiskNameNotCompatibleWithReasonProperty`, as the CVO says it.
#[must_use]
pub fn upgradeable_condition(
    progressing: bool,
    deletions: &[String],
    extra: &[Risk],
) -> Option<(String, String)> {
    let mut risks: Vec<Risk> = Vec::new();
    if progressing {
        risks.push(Risk {
            name: "ClusterVersionUpdating".into(),
            message:
                "An update is already in progress and the details are in the Progressing condition."
                    .into(),
        });
    }
    risks.extend(
        extra
            .iter()
            .filter(|r| r.name == "ClusterVersionOverrides")
            .cloned(),
    );
    if !deletions.is_empty() {
        let list: BTreeSet<&str> = deletions.iter().map(String::as_str).collect();
        risks.push(Risk {
            name: "ResourceDeletionInProgress".into(),
            message: format!(
                "Cluster minor or major version upgrades are not allowed while resource deletions are in progress; resources={}",
                list.into_iter().collect::<Vec<_>>().join(",")
            ),
        });
    }
    risks.extend(
        extra
            .iter()
            .filter(|r| r.name != "ClusterVersionOverrides")
            .cloned(),
    );
    match risks.as_slice() {
        [] => None,
        [one] => {
            // `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
            let b = one.name.as_bytes();
            let valid = b.first().is_some_and(u8::is_ascii_alphabetic)
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"_,:".contains(c))
                && b.last()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
            let reason = if valid {
                one.name.clone()
            } else {
                "RiskNameNotCompatibleWithReasonProperty".to_string()
            };
            Some((reason, one.message.clone()))
        }
        many => {
            let messages: Vec<&str> = many.iter().map(|r| r.message.as_str()).collect();
            Some((
                "MultipleReasons".into(),
                format!(
                    "Cluster should not be upgraded between minor or major versions for multiple reasons:\n* {}",
                    messages.join("\n* ")
                ),
            ))
        }
    }
}
