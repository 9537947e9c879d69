//! The ClusterVersion `status` exactly as the CVO writes it (`updateClusterVersionStatus`),
//! as a pure function of the status read from the cluster and the state of the run.
//!
//! Fields in the CVO's order: `observedGeneration`, `versionHash`, `availableUpdates` (kept,
//! `null` when never set), the Upgradeable condition, `history` and `desired`,
//! `capabilities`, then the conditions ImplicitlyEnabledCapabilities, ReleaseAccepted,
//! Available, Failing, Progressing and RetrievedUpdates. Every field the real CRD requires is
//! present in all its feature-set variants.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use self::upgradeable::upgradeable;
pub use self::upgradeable::{Risk, upgradeable_condition};
use super::capabilities::CapabilityStatus;
use super::error::{Effect, UpdateError, multiple, summary_for_reason};

/// The Go name of this machine's architecture, as the CVO reports it.
#[must_use]
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The release being applied (`status.desired`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Release {
    /// Version, e.g. `4.16.0`.
    pub version: String,
    /// Pull spec; empty for a payload read from a directory.
    pub image: String,
    /// Architecture for the ReleaseAccepted message (`amd64`, `Multi`, …).
    pub architecture: String,
}

/// What the operator's checks of a release found, written with the run's status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReleaseChecks {
    /// The release image's signature was verified (`history[0].verified`).
    pub verified: bool,
    /// `history[0].acceptedRisks`: `None` leaves it as it is (a release the checks do not
    /// run for, as the CVO's local payload); `Some("")` clears it.
    pub accepted_risks: Option<String>,
    /// Risks the run does not see itself: unmanaged overrides (`ClusterVersionOverrides`)
    /// and ClusterOperators with `Upgradeable=False` (`ClusterOperatorUpgradeable-*`).
    pub risks: Vec<Risk>,
    /// A release asked for and refused, as (reason, message) of `ReleaseAccepted=False`: the
    /// status of the run of the current release keeps saying so, as the CVO's does, instead
    /// of `PayloadLoaded`.
    pub refusal: Option<(String, String)>,
}

/// The state of the run the status reports.
#[derive(Debug, Clone)]
pub struct StatusInput {
    /// The release being applied.
    pub desired: Release,
    /// `metadata.generation` of the ClusterVersion the run works from.
    pub generation: i64,
    /// [`super::version_hash::version_hash`] of the payload.
    pub version_hash: String,
    /// The run is in reconciling mode.
    pub reconciling: bool,
    /// A full pass succeeded (the CVO's `Completed > 0`); the worker then reconciles, so the
    /// status reads as reconciling too.
    pub completed: bool,
    /// Tasks done so far (succeeded, or failed with a Report-effect error).
    pub done: usize,
    /// Tasks in the payload.
    pub total: usize,
    /// The failure of the pass, from [`super::error::summarize`].
    pub failure: Option<UpdateError>,
    /// For each operator waited on, how long ago the wait started; an operator absent here
    /// counts as waited on for longer than any limit (as in the CVO).
    pub operator_waits: BTreeMap<String, Duration>,
    /// Enabled, known and implicitly enabled capabilities.
    pub capabilities: CapabilityStatus,
    /// The release's signature was verified (never for a directory payload).
    pub verified: bool,
    /// Deletions requested and not yet seen finished, as `{kind} "{ns}/{name}"`.
    pub deletions_in_progress: Vec<String>,
    /// What the checks of the release found, for history and `Upgradeable`.
    pub checks: ReleaseChecks,
    /// The time to write, RFC 3339 in seconds (`2024-01-01T00:00:00Z`).
    pub now: String,
}

/// The status the CVO would write over `previous` (the `status` read from the cluster,
/// `Value::Null` or `{}` when none).
#[must_use]
pub fn cluster_version_status(previous: &Value, input: &StatusInput) -> Value {
    let prev = previous.as_object().cloned().unwrap_or_default();
    let mut conditions: Vec<Value> = prev
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let now = input.now.as_str();
    let mut out = Map::new();
    out.insert("observedGeneration".into(), json!(input.generation));
    let hash = if input.version_hash.is_empty() {
        prev.get("versionHash").cloned().unwrap_or(json!(""))
    } else {
        json!(input.version_hash)
    };
    out.insert("versionHash".into(), hash);
    out.insert(
        "availableUpdates".into(),
        prev.get("availableUpdates").cloned().unwrap_or(Value::Null),
    );
    for key in ["conditionalUpdates", "conditionalUpdateRisks"] {
        if let Some(v) = prev.get(key) {
            out.insert(key.into(), v.clone());
        }
    }

    // History and desired.
    let mut history: Vec<Value> = prev
        .get("history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    merge_history(&mut history, input);
    out.insert("history".into(), Value::Array(history.clone()));
    out.insert(
        "desired".into(),
        json!({"version": input.desired.version, "image": input.desired.image}),
    );
    out.insert(
        "capabilities".into(),
        json!({
            "enabledCapabilities": input.capabilities.enabled,
            "knownCapabilities": input.capabilities.known,
        }),
    );

    // Conditions.
    conditions.retain(|c| c["type"] != "ImplicitlyEnabled");
    if input.capabilities.implicit.is_empty() {
        set(
            &mut conditions,
            now,
            "ImplicitlyEnabledCapabilities",
            "False",
            "AsExpected",
            "Capabilities match configured spec",
        );
    } else {
        let caps: Vec<&str> = input
            .capabilities
            .implicit
            .iter()
            .map(String::as_str)
            .collect();
        set(
            &mut conditions,
            now,
            "ImplicitlyEnabledCapabilities",
            "True",
            "CapabilitiesImplicitlyEnabled",
            &format!(
                "The following capabilities could not be disabled: {}",
                caps.join(", ")
            ),
        );
    }
    let d = &input.desired;
    if let Some((reason, message)) = &input.checks.refusal {
        set(
            &mut conditions,
            now,
            "ReleaseAccepted",
            "False",
            reason,
            message,
        );
    } else {
        set(
            &mut conditions,
            now,
            "ReleaseAccepted",
            "True",
            "PayloadLoaded",
            &format!(
                "Payload loaded version=\"{}\" image=\"{}\" architecture=\"{}\"",
                d.version, d.image, d.architecture
            ),
        );
    }
    if input.completed {
        set(
            &mut conditions,
            now,
            "Available",
            "True",
            "",
            &format!("Done applying {}", shown_version(d)),
        );
    } else if !has(&conditions, "Available") {
        set(&mut conditions, now, "Available", "False", "", "");
    }
    let (failing, progressing) = failing_and_progressing(input, !history.is_empty());
    let (s, r, m) = failing;
    set(&mut conditions, now, "Failing", s, &r, &m);
    let (s, r, m) = progressing;
    let progressing_true = s == "True";
    set(&mut conditions, now, "Progressing", s, &r, &m);
    if !has(&conditions, "RetrievedUpdates") {
        set(&mut conditions, now, "RetrievedUpdates", "False", "", "");
    }
    upgradeable(
        &mut conditions,
        now,
        progressing_true,
        &input.deletions_in_progress,
        &input.checks.risks,
    );
    out.insert("conditions".into(), Value::Array(conditions));
    Value::Object(out)
}

fn shown_version(d: &Release) -> &str {
    if !d.version.is_empty() {
        &d.version
    } else if !d.image.is_empty() {
        &d.image
    } else {
        "<unknown>"
    }
}

fn has(conditions: &[Value], kind: &str) -> bool {
    conditions.iter().any(|c| c["type"] == kind)
}

/// `SetOperatorStatusCondition`: new types are appended with `lastTransitionTime` = now; an
/// existing one keeps its time unless the status changes; reason and message are always
/// overwritten (empty ones are omitted).
pub fn set(
    conditions: &mut Vec<Value>,
    now: &str,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let mut c = json!({"type": kind, "status": status, "lastTransitionTime": now});
    if !reason.is_empty() {
        c["reason"] = json!(reason);
    }
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    match conditions.iter_mut().find(|x| x["type"] == kind) {
        Some(old) => {
            if old["status"] == status
                && let Some(t) = old.get("lastTransitionTime")
            {
                c["lastTransitionTime"] = t.clone();
            }
            *old = c;
        }
        None => conditions.push(c),
    }
}

type Cond = (&'static str, String, String);

/// The Failing and Progressing conditions (`convertErrorToProgressing` and the rules around
/// it).
fn failing_and_progressing(input: &StatusInput, history_known: bool) -> (Cond, Cond) {
    let v = shown_version(&input.desired);
    let reconciling = input.reconciling || input.completed;
    let mut failure = input.failure.clone();
    let (mut p_reason, mut p_message, mut skip) = (String::new(), String::new(), false);
    if !reconciling && history_known {
        if let Some(f) = &failure {
            (p_reason, p_message, skip) = convert_error_to_progressing(f, &input.operator_waits);
        }
        if let Some(f) = failure.take() {
            failure = drop_none_effect(f);
        }
    }
    let failing: Cond = match &failure {
        Some(f) if p_reason.starts_with("Slow::") => {
            ("Unknown", "SlowClusterOperator".into(), p_message.clone())
        }
        Some(f) if !skip => ("True", f.reason.clone(), f.message.clone()),
        _ => ("False", String::new(), String::new()),
    };
    let p_reason = p_reason.trim_start_matches("Slow::").to_string();
    let progressing: Cond = match &failure {
        Some(f) if !skip => {
            let msg = if p_message.is_empty() {
                summary_for_reason(&f.reason, &f.name)
            } else {
                p_message.clone()
            };
            if reconciling {
                (
                    "False",
                    f.reason.clone(),
                    format!("Error while reconciling {v}: {msg}"),
                )
            } else {
                (
                    "True",
                    f.reason.clone(),
                    format!("Unable to apply {v}: {msg}"),
                )
            }
        }
        _ if reconciling => ("False", String::new(), format!("Cluster version is {v}")),
        _ => {
            let fraction = fraction(input.done, input.total);
            match (fraction, skip) {
                (Some(fr), true) => (
                    "True",
                    p_reason,
                    format!("Working towards {v}: {fr}, {p_message}"),
                ),
                (Some(fr), false) => ("True", String::new(), format!("Working towards {v}: {fr}")),
                (None, true) => (
                    "True",
                    p_reason,
                    format!("Working towards {v}: {p_message}"),
                ),
                (None, false) => ("True", String::new(), format!("Working towards {v}")),
            }
        }
    };
    (failing, progressing)
}

/// `N of M done (P% complete)` when any task is done; the percentage computed in `f32` and
/// truncated, as the CVO does.
#[must_use]
pub fn fraction(done: usize, total: usize) -> Option<String> {
    if total == 0 || done == 0 {
        return None;
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let pct = ((done as f32 / total as f32) * 100.0_f32) as u32;
    Some(format!("{done} of {total} done ({pct}% complete)"))
}

/// `MultipleErrors` without its nested errors of effect None: none left is no failure, one
/// is that error.
fn drop_none_effect(f: UpdateError) -> Option<UpdateError> {
    if f.reason != "MultipleErrors" {
        return Some(f);
    }
    let mut rest: Vec<UpdateError> = f
        .nested
        .into_iter()
        .filter(|e| e.effect != Some(Effect::None))
        .collect();
    match rest.len() {
        0 => None,
        1 => rest.pop(),
        _ => Some(multiple(rest)),
    }
}

const SLOW: Duration = Duration::from_secs(30 * 60);
const SLOW_MACHINE_CONFIG: Duration = Duration::from_secs(90 * 60);
const FAIL_AFTER: Duration = Duration::from_secs(40 * 60);

/// `convertErrorToProgressing`: `(reason, message, skip)`; `skip` means the error is a wait,
/// not a failure.
fn convert_error_to_progressing(
    f: &UpdateError,
    waits: &BTreeMap<String, Duration>,
) -> (String, String, bool) {
    let names: Vec<String> = if f.names.is_empty() {
        vec![f.name.clone()]
    } else {
        f.names.clone()
    };
    match f.effect {
        Some(Effect::Report) => (f.reason.clone(), f.message.clone(), false),
        None | Some(Effect::Fail) => (String::new(), String::new(), false),
        Some(Effect::None) => {
            let slow_mc = names.iter().any(|n| {
                n == "machine-config" && waits.get(n).is_some_and(|d| *d > SLOW_MACHINE_CONFIG)
            });
            let slow: Vec<&str> = names
                .iter()
                .filter(|n| *n != "machine-config" && waits.get(*n).is_some_and(|d| *d > SLOW))
                .map(String::as_str)
                .collect();
            let reason = format!("Slow::{}", f.reason);
            match (slow.is_empty(), slow_mc) {
                (false, false) => (
                    reason,
                    format!(
                        "waiting on {} over 30 minutes which is longer than expected",
                        slow.join(", ")
                    ),
                    true,
                ),
                (false, true) => (
                    reason,
                    format!(
                        "waiting on {} over 30 minutes and machine-config over 90 minutes which is longer than expected",
                        slow.join(", ")
                    ),
                    true,
                ),
                (true, true) => (
                    reason,
                    "waiting on machine-config over 90 minutes which is longer than expected"
                        .into(),
                    true,
                ),
                (true, false) => (
                    f.reason.clone(),
                    format!("waiting on {}", names.join(", ")),
                    true,
                ),
            }
        }
        Some(Effect::FailAfterInterval) => {
            let exceeded: Vec<&str> = names
                .iter()
                .filter(|n| waits.get(*n).is_none_or(|d| *d > FAIL_AFTER))
                .map(String::as_str)
                .collect();
            if exceeded.is_empty() {
                (
                    f.reason.clone(),
                    format!("waiting up to 40 minutes on {}", f.name),
                    true,
                )
            } else {
                (
                    f.reason.clone(),
                    format!(
                        "wait has exceeded 40 minutes for these operators: {}",
                        exceeded.join(", ")
                    ),
                    false,
                )
            }
        }
    }
}

/// `mergeOperatorHistory`: closes or completes the newest entry, or prepends one, then prunes
/// to 100 entries.
fn merge_history(history: &mut Vec<Value>, input: &StatusInput) {
    let d = &input.desired;
    let now = input.now.as_str();
    let entry = |state: &str, completion: Value| {
        json!({"state": state, "startedTime": now, "completionTime": completion,
               "version": d.version, "image": d.image, "verified": false})
    };
    if history.is_empty() {
        history.push(entry("Partial", Value::Null));
    }
    let last = &mut history[0];
    if last
        .get("state")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        last["state"] = json!("Partial");
    }
    let last_image = last["image"].as_str().unwrap_or_default().to_string();
    let last_version = last["version"].as_str().unwrap_or_default().to_string();
    let matches = if !d.image.is_empty() && d.image == last_image {
        if !d.version.is_empty() && (last_version.is_empty() || last_version == d.version) {
            last["version"] = json!(d.version);
            true
        } else {
            d.version.is_empty()
        }
    } else if !d.version.is_empty()
        && d.version == last_version
        && (last_image.is_empty() || last_image == d.image)
    {
        last["image"] = json!(d.image);
        true
    } else {
        false
    };
    if matches {
        if input.completed {
            last["state"] = json!("Completed");
            if last.get("completionTime").is_none_or(Value::is_null) {
                last["completionTime"] = json!(now);
            }
        }
    } else {
        if last.get("completionTime").is_none_or(Value::is_null) {
            last["completionTime"] = json!(now);
        }
        let new = if input.completed {
            entry("Completed", json!(now))
        } else {
            entry("Partial", Value::Null)
        };
        history.insert(0, new);
    }
    for h in history.iter_mut() {
        if h.get("completionTime").is_none() {
            h["completionTime"] = Value::Null;
        }
        if h.get("verified").is_none() {
            h["verified"] = json!(false);
        }
    }
    if input.verified {
        history[0]["verified"] = json!(true);
    }
    match input.checks.accepted_risks.as_deref() {
        None => {}
        Some("") => {
            if let Some(o) = history[0].as_object_mut() {
                o.remove("acceptedRisks");
            }
        }
        Some(risks) => history[0]["acceptedRisks"] = json!(risks),
    }
    prune(history, 100);
}

/// `prune`: while longer than `max`, removes the lowest-ranked entry (the CVO's ranking keeps
/// the newest and oldest entries, the newest Completed, and the first and last of each minor).
fn prune(history: &mut Vec<Value>, max: usize) {
    while history.len() > max {
        let state = |i: usize| history[i]["state"].as_str().unwrap_or_default().to_string();
        let field = |i: usize, n: usize| {
            history[i]["version"]
                .as_str()
                .unwrap_or_default()
                .split('.')
                .nth(n)
                .unwrap_or_default()
                .to_string()
        };
        let completed = |i: usize| state(i) == "Completed";
        let most_recent_completed = (0..history.len()).find(|&i| completed(i));
        let older = |i: usize| (i + 1..history.len()).find(|&j| completed(j));
        let newer = |i: usize| (0..i).rev().find(|&j| completed(j));
        let last = max;
        let mut best: Option<(f64, usize)> = None;
        for i in 0..history.len() {
            let mut rank: f64 = 0.0;
            if i == last || i <= 4 || Some(i) == most_recent_completed {
                rank = 1000.0;
            } else {
                let partial = !completed(i);
                let minor = field(i, 1);
                let (o, n) = (older(i), newer(i));
                let first_or_last = !partial
                    && (i == 0
                        || i == last
                        || o.is_none_or(|o| field(o, 1) != minor)
                        || n.is_none_or(|n| field(n, 1) != minor));
                if first_or_last {
                    rank += 30.0;
                } else if let (true, Some(o), Some(n)) = (partial, o, n) {
                    if field(o, 1) != field(n, 1) {
                        rank += 20.0;
                    } else if field(o, 2) != field(n, 2) {
                        rank -= 20.0;
                    }
                }
            }
            #[allow(clippy::cast_precision_loss)]
            let r = rank - 1.01 * i as f64;
            if best.is_none_or(|(b, _)| r < b) {
                best = Some((r, i));
            }
        }
        let (_, i) = best.expect("history is not empty");
        history.remove(i);
    }
}

mod upgradeable;

#[cfg(test)]
mod tests;
