//! The checks the CVO runs before it accepts a new release (`pkg/payload/precondition`), as
//! pure functions of ClusterVersion: `ClusterVersionRollback` (a lower version only back to
//! the previous one, within a minor), `ClusterVersionGiantHop` (no major update, no skipped
//! minor), `ClusterVersionUpgradeable` (`Upgradeable=False` holds minor and major updates,
//! not patch updates) and `ClusterVersionRecommendedUpdate` (warnings only: the target is
//! not a recommended update). [`summarize`] turns the failures into the CVO's one error:
//! blocking unless every failure is a warning, or `force` is set, which turns blocks into
//! warnings. Warnings become the history entry's `acceptedRisks`.
//!
//! Also the risks behind ClusterVersion's own `Upgradeable` condition that a pass does not
//! see ([`upgradeable_risks`]): unmanaged overrides and ClusterOperators reporting
//! `Upgradeable=False`.

use std::cmp::Ordering;

use semver::Version;
use serde_json::Value;

use crate::cvo::status::Risk;

/// One failed precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The check, e.g. `ClusterVersionUpgradeable`.
    pub name: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// For people.
    pub message: String,
    /// Reported, not blocking (the CVO's `NonBlockingWarning`).
    pub warning: bool,
}

/// The outcome of [`summarize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The update is refused (`PreconditionChecks`).
    pub blocking: bool,
    /// The CVO's message.
    pub message: String,
}

fn parse(v: &str) -> Result<Version, String> {
    Version::parse(v).map_err(|e| format!("{e}"))
}

fn lt(a: &Version, b: &Version) -> bool {
    a.cmp_precedence(b) == Ordering::Less
}

/// Runs the four checks in the CVO's order for an update of the cluster `cv` (ClusterVersion
/// as read, `None`: absent) to `target`.
#[must_use]
pub fn run(cv: Option<&Value>, target: &str) -> Vec<Failure> {
    let Some(cv) = cv else {
        return Vec::new();
    };
    [
        rollback(cv, target),
        giant_hop(cv, target),
        upgradeable(cv, target),
        recommended(cv, target),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn text<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn condition<'v>(cv: &'v Value, kind: &str) -> Option<&'v Value> {
    cv.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Parses the current and the target version; a failure is the check's result.
fn versions(cv: &Value, target: &str, name: &'static str) -> Result<(Version, Version), Failure> {
    let current = parse(text(cv, "/status/desired/version")).map_err(|e| Failure {
        name,
        reason: "InvalidCurrentVersion".into(),
        message: e,
        warning: true,
    })?;
    let target = parse(target).map_err(|e| Failure {
        name,
        reason: "InvalidDesiredVersion".into(),
        message: e,
        warning: false,
    })?;
    Ok((current, target))
}

fn rollback(cv: &Value, target: &str) -> Option<Failure> {
    const NAME: &str = "ClusterVersionRollback";
    let (current, target) = match versions(cv, target, NAME) {
        Ok(v) => v,
        Err(f) => return Some(f),
    };
    if !lt(&target, &current) {
        return None;
    }
    let fail = |message: String| Failure {
        name: NAME,
        reason: "LowDesiredVersion".into(),
        message,
        warning: false,
    };
    let desired_image = text(cv, "/status/desired/image");
    let previous = cv
        .pointer("/status/history")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|e| text(e, "/version") != current.to_string() || text(e, "/image") != desired_image)
        .and_then(|e| {
            parse(text(e, "/version"))
                .ok()
                .map(|v| (v, text(e, "/image").to_string()))
        });
    let Some((previous, image)) = previous else {
        return Some(fail(format!(
            "{target} is less than the current target {current}, and the cluster has no previous Semantic Version"
        )));
    };
    if target.cmp_precedence(&previous) != Ordering::Equal {
        return Some(fail(format!(
            "{target} is less than the current target {current}, and the only supported rollback is to the cluster's previous version {previous} ({image})"
        )));
    }
    if previous.major == current.major && previous.minor == current.minor {
        return None;
    }
    Some(fail(format!(
        "{target} is less than the current target {current} and matches the cluster's previous version, but rollbacks that change major or minor versions are not recommended"
    )))
}

fn giant_hop(cv: &Value, target: &str) -> Option<Failure> {
    const NAME: &str = "ClusterVersionGiantHop";
    let (current, target) = match versions(cv, target, NAME) {
        Ok(v) => v,
        Err(f) => return Some(f),
    };
    if target.major > current.major {
        // The CVO lets 4 go to 5.0 for now.
        if target.major == 5 && current.major == 4 && target.minor == 0 {
            return None;
        }
        let to_five = if target.major == 5 && current.major == 4 {
            " or to 5.0"
        } else {
            ""
        };
        return Some(Failure {
            name: NAME,
            reason: "MajorVersionUpdate".into(),
            message: format!(
                "{target} has a larger major version than the current target {current} ({} > {}), and only updates within the current major version{to_five} are supported.",
                target.major, current.major
            ),
            warning: false,
        });
    }
    if target.minor > current.minor + 1 {
        return Some(Failure {
            name: NAME,
            reason: "MultipleMinorVersionsUpdate".into(),
            message: format!(
                "{target} is more than one minor version beyond the current target {current} ({}.{} > {}.({}+1)), and only updates within the current minor version or to the next minor version are supported.",
                target.major, target.minor, current.major, current.minor
            ),
            warning: false,
        });
    }
    None
}

/// "Major", "Minor" or "" for an update from `from` to `to` (the CVO's `UpdateType`).
fn update_type(from: &Version, to: &Version) -> &'static str {
    if from.major < to.major {
        "Major"
    } else if from.major == to.major && from.minor < to.minor {
        "Minor"
    } else {
        ""
    }
}

/// The overrides risk's message (the precondition words it "upgrades", the risk "updates").
const OVERRIDES_PRECONDITION: &str = "Disabling ownership via cluster version overrides prevents upgrades between minor or major versions. Please remove overrides before requesting a minor or major version update.";
const OVERRIDES_RISK: &str = "Disabling ownership via cluster version overrides prevents updates between minor or major versions. Please remove overrides before requesting a minor or major version update.";

fn unmanaged_overrides(cv: &Value) -> bool {
    cv.pointer("/spec/overrides")
        .and_then(Value::as_array)
        .is_some_and(|l| l.iter().any(|o| o["unmanaged"] == true))
}

fn upgradeable(cv: &Value, target: &str) -> Option<Failure> {
    const NAME: &str = "ClusterVersionUpgradeable";
    let up = condition(cv, "Upgradeable")?;
    if up["status"] != "False" {
        return None;
    }
    let (current, target) = match versions(cv, target, NAME) {
        Ok(v) => v,
        Err(f) => return Some(f),
    };
    let patch_only = target.major == current.major && target.minor == current.minor;
    if !lt(&current, &target) || patch_only {
        if unmanaged_overrides(cv) {
            return Some(Failure {
                name: NAME,
                reason: "ClusterVersionOverridesSet".into(),
                message: format!(
                    "Retarget from {current} to {target} is not blocked by ClusterVersionOverridesSet. But the cluster-version operator is not managing these resources; they are currently the responsibility of the agent that set the overrides: {OVERRIDES_PRECONDITION}"
                ),
                warning: true,
            });
        }
        // A patch retarget while a minor or major update is in progress is an accepted risk.
        let completed = completed_version(cv);
        let progressing = condition(cv, "Progressing").is_some_and(|c| c["status"] == "True");
        if patch_only
            && progressing
            && let Ok(from) = parse(&completed)
        {
            let kind = update_type(&from, &current);
            if !kind.is_empty() {
                return Some(Failure {
                    name: NAME,
                    reason: format!("{kind}VersionClusterUpdateInProgress"),
                    message: format!(
                        "Retarget to {target} while a {} version update from {completed} to {current} is in progress",
                        kind.to_lowercase()
                    ),
                    warning: true,
                });
            }
        }
        return None;
    }
    Some(Failure {
        name: NAME,
        reason: text(up, "/reason").to_string(),
        message: text(up, "/message").to_string(),
        warning: false,
    })
}

/// The first `Completed` version of history, else the oldest entry's (`GetCurrentVersion`).
fn completed_version(cv: &Value) -> String {
    let history = cv
        .pointer("/status/history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    history
        .iter()
        .find(|h| h["state"] == "Completed")
        .or_else(|| history.last())
        .map(|h| text(h, "/version").to_string())
        .unwrap_or_default()
}

fn recommended(cv: &Value, target: &str) -> Option<Failure> {
    const NAME: &str = "ClusterVersionRecommendedUpdate";
    let current = text(cv, "/status/desired/version");
    let warn = |reason: &str, message: String| {
        Some(Failure {
            name: NAME,
            reason: reason.to_string(),
            message,
            warning: true,
        })
    };
    let list = |p: &str| {
        cv.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    if list("/status/availableUpdates")
        .iter()
        .any(|u| u["version"] == target)
    {
        return None;
    }
    if let Some(cu) = list("/status/conditionalUpdates")
        .iter()
        .find(|u| u.pointer("/release/version").and_then(Value::as_str) == Some(target))
    {
        let rec = cu["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Recommended"));
        return match rec {
            None => warn(
                "UnknownConditionType",
                format!(
                    "Update from {current} to {target} has a status.conditionalUpdates entry, but no Recommended condition."
                ),
            ),
            Some(c) if c["status"] == "True" => None,
            Some(c) if c["status"] == "False" => warn(
                text(c, "/reason"),
                format!(
                    "Update from {current} to {target} is not recommended:\n\n{}",
                    text(c, "/message")
                ),
            ),
            Some(c) => warn(
                text(c, "/reason"),
                format!(
                    "Update from {current} to {target} is Recommended={}: {}: {}",
                    text(c, "/status"),
                    text(c, "/reason"),
                    text(c, "/message")
                ),
            ),
        };
    }
    if text(cv, "/spec/channel").is_empty() {
        return warn(
            "NoChannel",
            format!(
                "Configured channel is unset, so the recommended status of updating from {current} to {target} is unknown."
            ),
        );
    }
    let message = match condition(cv, "RetrievedUpdates") {
        None => format!(
            "No RetrievedUpdates, so the recommended status of updating from {current} to {target} is unknown."
        ),
        Some(r) if r["status"] == "True" => format!(
            "RetrievedUpdates=True ({}), so the update from {current} to {target} is probably neither recommended nor supported.",
            text(r, "/reason")
        ),
        Some(r) => format!(
            "RetrievedUpdates={} ({}), so the recommended status of updating from {current} to {target} is unknown.",
            text(r, "/status"),
            text(r, "/reason")
        ),
    };
    warn("UnknownUpdate", message)
}

/// The CVO's `precondition.Summarize`: `None` when nothing failed.
#[must_use]
pub fn summarize(failures: &[Failure], force: bool) -> Option<Summary> {
    if failures.is_empty() {
        return None;
    }
    let msgs: Vec<String> = failures
        .iter()
        .map(|f| {
            format!(
                "Precondition {:?} failed because of {:?}: {}",
                f.name, f.reason, f.message
            )
        })
        .collect();
    let mut warning = failures.iter().all(|f| f.warning);
    let mut message = match msgs.as_slice() {
        [one] => one.clone(),
        many => format!(
            "Multiple precondition checks failed:\n* {}",
            many.join("\n* ")
        ),
    };
    if force && !warning {
        message = format!("Forced through blocking failures: {message}");
        warning = true;
    }
    Some(Summary {
        blocking: !warning,
        message,
    })
}

/// The risks behind ClusterVersion's `Upgradeable` that a pass does not see: unmanaged
/// overrides (`ClusterVersionOverrides`) and each ClusterOperator with `Upgradeable=False`
/// (`ClusterOperatorUpgradeable-<name>`, its condition's message), by name.
#[must_use]
pub fn upgradeable_risks(cv: Option<&Value>, operators: &[Value]) -> Vec<Risk> {
    let mut out = Vec::new();
    if cv.is_some_and(unmanaged_overrides) {
        out.push(Risk {
            name: "ClusterVersionOverrides".into(),
            message: OVERRIDES_RISK.into(),
        });
    }
    let mut ops: Vec<Risk> = operators
        .iter()
        .filter_map(|co| {
            let up = co
                .pointer("/status/conditions")?
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Upgradeable" && c["status"] == "False")?;
            Some(Risk {
                name: format!("ClusterOperatorUpgradeable-{}", text(co, "/metadata/name")),
                message: text(up, "/message").to_string(),
            })
        })
        .collect();
    ops.sort_by(|a, b| a.name.cmp(&b.name));
    out.extend(ops);
    out
}

#[cfg(test)]
mod tests;
