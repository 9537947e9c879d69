//! Conditional updates evaluated as the CVO evaluates them (`pkg/cvo/availableupdates.go`
//! `evaluateConditionalUpdates`, `pkg/clusterconditions`): each risk's matching rules are
//! tried in order and the first one that can be evaluated decides whether the risk applies; an
//! update none of whose risks apply is `Recommended=True` and joins `availableUpdates`, one
//! with a risk that applies is `Recommended=False` (reason: the risk's name), and one whose
//! risks cannot be evaluated is `Recommended=Unknown` (`EvaluationFailed`).
//!
//! `Always` rules apply. `PromQL` rules cannot be evaluated here: minicvo has no Prometheus
//! to query, so they fail as a CVO's queries fail when Thanos does not answer, and the update
//! is `Recommended=Unknown` with the CVO's "Could not evaluate exposure to update risk …"
//! message.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::cincinnati::{ConditionalUpdate, Release, Risk};

/// Why a `PromQL` rule is not evaluated.
pub const NO_PROMQL: &str = "executing PromQL query: minicvo has no Prometheus to query";

/// A conditional update with its `Recommended` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluated {
    /// The update.
    pub update: ConditionalUpdate,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// `NotExposedToRisks`, `EvaluationFailed`, the name of a risk that applies,
    /// `ExposedToRisks` or `MultipleReasons`.
    pub reason: String,
    /// For people.
    pub message: String,
}

/// Whether a risk applies: `Err` when none of its rules could be evaluated.
fn applies(risk: &Risk) -> Result<bool, String> {
    let mut errors = Vec::new();
    for rule in &risk.matching_rules {
        match rule.kind.as_str() {
            "Always" => return Ok(true),
            "PromQL" => errors.push(NO_PROMQL.to_string()),
            _ => {}
        }
    }
    match errors.len() {
        0 => Ok(false),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

fn reason_compatible(name: &str) -> bool {
    let b = name.as_bytes();
    let middle = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    match b {
        [] => false,
        [first] => first.is_ascii_alphabetic(),
        [first, mid @ .., last] => {
            first.is_ascii_alphabetic()
                && mid.iter().all(middle)
                && (last.is_ascii_alphanumeric() || *last == b'_')
        }
    }
}

/// The CVO's `newRecommendedStatus`.
fn combine_status(now: &'static str, want: &'static str) -> &'static str {
    if now == "False" || want == "False" {
        "False"
    } else if now == "Unknown" || want == "Unknown" {
        "Unknown"
    } else {
        want
    }
}

/// The CVO's `newRecommendedReason` (without accepted risks).
fn combine_reason(now: &str, want: &str) -> String {
    const NOT_EXPOSED: &str = "NotExposedToRisks";
    const FAILED: &str = "EvaluationFailed";
    const EXPOSED: &str = "ExposedToRisks";
    if now == NOT_EXPOSED || (now == FAILED && want == EXPOSED) || now == want {
        want.to_string()
    } else if want == NOT_EXPOSED || (now == EXPOSED && want == FAILED) {
        now.to_string()
    } else {
        "MultipleReasons".to_string()
    }
}

/// Evaluates every conditional update. A risk named by several updates is evaluated once,
/// with the definition of the update of the highest version (as the CVO does).
#[must_use]
pub fn evaluate(conditional: &[ConditionalUpdate]) -> Vec<Evaluated> {
    let mut by_name: BTreeMap<&str, (semver::Version, &Risk)> = BTreeMap::new();
    for c in conditional {
        let Ok(v) = semver::Version::parse(&c.release.version) else {
            continue;
        };
        for r in &c.risks {
            match by_name.get(r.name.as_str()) {
                Some((old, _)) if *old >= v => {}
                _ => {
                    by_name.insert(r.name.as_str(), (v.clone(), r));
                }
            }
        }
    }
    let verdicts: BTreeMap<&str, Result<bool, String>> = by_name
        .iter()
        .map(|(name, (_, risk))| {
            let verdict = applies(risk).map_err(|e| {
                format!(
                    "Could not evaluate exposure to update risk {name} ({e})\n  {name} description: {}\n  {name} URL: {}",
                    risk.message, risk.url
                )
            });
            (*name, verdict)
        })
        .collect();
    conditional
        .iter()
        .map(|c| {
            let mut status = "True";
            let mut reason = "NotExposedToRisks".to_string();
            let mut messages = Vec::new();
            for risk in &c.risks {
                match verdicts.get(risk.name.as_str()) {
                    Some(Ok(false)) => {}
                    Some(Ok(true)) => {
                        status = combine_status(status, "False");
                        let want = if reason_compatible(&risk.name) {
                            risk.name.as_str()
                        } else {
                            "ExposedToRisks"
                        };
                        reason = combine_reason(&reason, want);
                        messages.push(format!("{} {}", risk.message, risk.url));
                    }
                    Some(Err(e)) => {
                        status = combine_status(status, "Unknown");
                        reason = combine_reason(&reason, "EvaluationFailed");
                        messages.push(e.clone());
                    }
                    None => {
                        status = combine_status(status, "Unknown");
                        reason = combine_reason(&reason, "EvaluationFailed");
                        messages.push(format!("failed to find risk condition for risk {}", risk.name));
                    }
                }
            }
            let message = if messages.is_empty() {
                "The update is recommended, because none of the conditional update risks apply to this cluster."
                    .to_string()
            } else {
                messages.join("\n\n")
            };
            Evaluated {
                update: c.clone(),
                status,
                reason,
                message,
            }
        })
        .collect()
}

/// The recommended updates: `updates` and the conditional updates that are
/// `Recommended=True`, without duplicate images, highest version first.
#[must_use]
pub fn recommended(updates: &[Release], evaluated: &[Evaluated]) -> Vec<Release> {
    let mut out: Vec<Release> = updates.to_vec();
    for e in evaluated {
        if e.status == "True" {
            if !out.iter().any(|u| u.image == e.update.release.image) {
                out.push(e.update.release.clone());
            }
        } else {
            out.retain(|u| u.image != e.update.release.image);
        }
    }
    sort_by_version(&mut out, |r| &r.version);
    out
}

/// Sorts highest version first (versions that do not parse last, as the CVO's sort leaves
/// them; the graph's versions always parse).
pub fn sort_by_version<T>(items: &mut [T], version: impl Fn(&T) -> &str) {
    items.sort_by(|a, b| {
        let (va, vb) = (
            semver::Version::parse(version(a)),
            semver::Version::parse(version(b)),
        );
        match (va, vb) {
            (Ok(a), Ok(b)) => b.cmp_precedence(&a),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
            (Err(_), Err(_)) => version(b).cmp(version(a)),
        }
    });
}

/// `status.conditionalUpdates`: each update with its risks and its `Recommended` condition,
/// highest version first. `previous` is the list the status has now: a condition whose
/// status did not change keeps its `lastTransitionTime` (`meta.SetStatusCondition`).
#[must_use]
pub fn status_entries(evaluated: &[Evaluated], previous: Option<&Value>, now: &str) -> Vec<Value> {
    let mut sorted: Vec<&Evaluated> = evaluated.iter().collect();
    sort_by_version(&mut sorted, |e| &e.update.release.version);
    sorted
        .into_iter()
        .map(|e| {
            let old = previous
                .and_then(Value::as_array)
                .and_then(|l| {
                    l.iter()
                        .find(|c| c["release"]["image"] == e.update.release.image.as_str())
                })
                .and_then(|c| c["conditions"].as_array())
                .and_then(|l| l.iter().find(|c| c["type"] == "Recommended"));
            let since = old
                .filter(|c| c["status"] == e.status)
                .and_then(|c| c.get("lastTransitionTime"))
                .cloned()
                .unwrap_or_else(|| json!(now));
            json!({
                "release": e.update.release,
                "risks": e.update.risks,
                "conditions": [{
                    "type": "Recommended",
                    "status": e.status,
                    "reason": e.reason,
                    "message": e.message,
                    "lastTransitionTime": since,
                }],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update_graph::cincinnati::{MatchingRule, PromQl};

    fn risk(name: &str, kind: &str) -> Risk {
        Risk {
            url: format!("https://bug.example/{name}"),
            name: name.into(),
            message: format!("{name} breaks things."),
            matching_rules: vec![MatchingRule {
                kind: kind.into(),
                promql: (kind == "PromQL").then(|| PromQl {
                    promql: "up == 0".into(),
                }),
            }],
        }
    }

    fn update(version: &str, risks: Vec<Risk>) -> ConditionalUpdate {
        ConditionalUpdate {
            release: Release {
                version: version.into(),
                image: format!("img:{version}"),
                ..Release::default()
            },
            risks,
        }
    }

    #[test]
    fn always_applies_promql_cannot_be_evaluated() {
        let all = evaluate(&[
            update("4.14.0", vec![risk("Boom", "Always")]),
            update("4.14.1", vec![risk("NeedsMetrics", "PromQL")]),
            update(
                "4.14.2",
                vec![risk("Boom", "Always"), risk("NeedsMetrics", "PromQL")],
            ),
            update("4.14.3", vec![risk("has-dash", "Always")]),
        ]);
        assert_eq!((all[0].status, all[0].reason.as_str()), ("False", "Boom"));
        assert_eq!(
            all[0].message,
            "Boom breaks things. https://bug.example/Boom"
        );
        assert_eq!(
            (all[1].status, all[1].reason.as_str()),
            ("Unknown", "EvaluationFailed")
        );
        assert_eq!(
            all[1].message,
            format!(
                "Could not evaluate exposure to update risk NeedsMetrics ({NO_PROMQL})\n  NeedsMetrics description: NeedsMetrics breaks things.\n  NeedsMetrics URL: https://bug.example/NeedsMetrics"
            )
        );
        assert_eq!(
            (all[2].status, all[2].reason.as_str()),
            ("False", "MultipleReasons")
        );
        assert_eq!(all[3].reason, "ExposedToRisks");
        let rec = recommended(&[], &all);
        assert!(rec.is_empty());
    }

    #[test]
    fn a_risk_that_does_not_apply_recommends_the_update() {
        let mut r = risk("Never", "Always");
        r.matching_rules.clear();
        let all = evaluate(&[update("4.14.0", vec![r])]);
        assert_eq!(all[0].status, "True");
        let plain = Release {
            version: "4.13.5".into(),
            image: "img:4.13.5".into(),
            ..Release::default()
        };
        let rec = recommended(&[plain], &all);
        let versions: Vec<&str> = rec.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(versions, ["4.14.0", "4.13.5"]);
        let entries = status_entries(&all, None, "2026-01-01T00:00:00Z");
        assert_eq!(entries[0]["conditions"][0]["reason"], "NotExposedToRisks");
    }

    #[test]
    fn reasons_follow_the_condition_reason_pattern() {
        assert!(reason_compatible("A"));
        assert!(reason_compatible("Some_Risk:1"));
        assert!(!reason_compatible("has-dash"));
        assert!(!reason_compatible("1abc"));
        assert!(!reason_compatible("ends,"));
    }
}
