//! `not-rolled-out` (needs `--previous`): a field that changed between the previous payload
//! and this one, but that the CVO's merge never writes to the live object, so the cluster
//! keeps the old value after the update. Examples: a DaemonSet's `updateStrategy`, a
//! container's `startupProbe` or `imagePullPolicy`, a label or ConfigMap key the payload stops
//! setting, an annotation-only change of a kind without a typed merge, or any change of a
//! create-only object. The comparison is [`crate::merge::rollout::compare`]; each finding
//! names the field path and the merge rule.

use std::collections::HashMap;

use super::{Context, Finding, Location, Rule, Severity, Side};
use crate::manifest::{Manifest, ObjectId};
use crate::merge::rollout::compare;
use crate::plan::{Action, Plan};

/// The previous payload's applied documents by identity, in payload order.
fn by_id(previous: &Plan) -> HashMap<&ObjectId, Vec<&Manifest>> {
    let mut map: HashMap<&ObjectId, Vec<&Manifest>> = HashMap::new();
    for o in previous
        .tasks
        .iter()
        .map(|t| &t.manifest)
        .filter(|o| !o.is_delete())
    {
        map.entry(&o.id).or_default().push(o);
    }
    map
}

/// The previous payload's applied document for a manifest (`previous` from [`by_id`]): same
/// file and document, else same file, else the first.
fn counterpart<'a>(
    previous: &HashMap<&ObjectId, Vec<&'a Manifest>>,
    m: &Manifest,
) -> Option<&'a Manifest> {
    let all = previous.get(&m.id)?;
    all.iter()
        .find(|o| o.file == m.file && o.document == m.document)
        .or_else(|| all.iter().find(|o| o.file == m.file))
        .or_else(|| all.first())
        .copied()
}

/// Runs the rule: one warning per field the CVO leaves at its old value.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let Some(prev) = cx.previous else {
        return Vec::new();
    };
    let previous = by_id(prev.plan);
    let mut findings = Vec::new();
    for t in &cx.plan.tasks {
        if !matches!(t.action, Action::Apply | Action::CreateOnly) {
            continue;
        }
        let Some(old) = counterpart(&previous, &t.manifest) else {
            continue;
        };
        if old.object == t.manifest.object {
            continue;
        }
        let here = cx.location(t.id);
        let there = Location::of(old, Side::Previous);
        if t.action == Action::CreateOnly {
            findings.push(
                Finding::at(
                    Rule::NotRolledOut,
                    Severity::Warning,
                    here,
                    "the object changed, but it is create-only: the CVO never updates an existing create-only object".into(),
                )
                .related("previous", there),
            );
            continue;
        }
        match compare(&old.object, &t.manifest.object) {
            Ok(r) => {
                for n in r.not_rolled_out {
                    findings.push(
                        Finding::at(
                            Rule::NotRolledOut,
                            Severity::Warning,
                            here.clone(),
                            format!("{} changed, but the CVO keeps the old value: {}", n.path, n.rule),
                        )
                        .hint("change the object another way (a new name, a delete manifest, or an operator that owns the field), or accept the old value")
                        .related("previous", there.clone()),
                    );
                }
            }
            Err(e) => findings.push(
                Finding::at(
                    Rule::NotRolledOut,
                    Severity::Warning,
                    here,
                    format!("the CVO's merge fails on this manifest: {e}"),
                )
                .related("previous", there),
            ),
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use crate::analysis::lint::testutil::{lint_files, obj, of_rule};
    use crate::analysis::lint::{Rule, Severity};

    fn ds(strategy: &str, image: &str) -> String {
        obj(
            "apps/v1",
            "DaemonSet",
            "ns",
            "agent",
            "",
            &format!(
                "spec:\n  updateStrategy:\n    type: {strategy}\n  template:\n    spec:\n      containers:\n      - name: c\n        image: {image}\n"
            ),
        )
    }

    #[test]
    fn daemonset_update_strategy_change_is_not_rolled_out() {
        let old = ds("OnDelete", "i");
        let new = ds("RollingUpdate", "j");
        let f = lint_files(
            &[("0000_50_a_00_ds.yaml", &new)],
            Some(&[("0000_50_a_00_ds.yaml", &old)]),
        );
        let f = of_rule(&f, Rule::NotRolledOut);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(
            f[0].message,
            "spec.updateStrategy changed, but the CVO keeps the old value: the CVO never updates this DaemonSet field"
        );
        assert_eq!(f[0].related[0].role, "previous");
    }

    #[test]
    fn rolled_out_changes_and_lint_without_previous_find_nothing() {
        let old = ds("OnDelete", "i");
        let new = ds("OnDelete", "j");
        let f = lint_files(
            &[("0000_50_a_00_ds.yaml", &new)],
            Some(&[("0000_50_a_00_ds.yaml", &old)]),
        );
        assert!(of_rule(&f, Rule::NotRolledOut).is_empty());
        let f = lint_files(&[("0000_50_a_00_ds.yaml", &new)], None);
        assert!(of_rule(&f, Rule::NotRolledOut).is_empty());
    }

    #[test]
    fn secret_annotation_only_change_and_create_only_change() {
        let secret = |v: &str| {
            obj(
                "v1",
                "Secret",
                "ns",
                "s",
                &format!("    note: \"{v}\"\n"),
                "data:\n  k: dg==\n",
            )
        };
        let co = |v: &str| {
            obj(
                "v1",
                "ConfigMap",
                "ns",
                "c",
                "    release.openshift.io/create-only: \"true\"\n",
                &format!("data:\n  k: {v}\n"),
            )
        };
        let (s1, s2, c1, c2) = (secret("1"), secret("2"), co("a"), co("b"));
        let f = lint_files(
            &[("0000_50_a_00_s.yaml", &s2), ("0000_50_a_01_c.yaml", &c2)],
            Some(&[("0000_50_a_00_s.yaml", &s1), ("0000_50_a_01_c.yaml", &c1)]),
        );
        let f = of_rule(&f, Rule::NotRolledOut);
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(
            f[0].message
                .starts_with("metadata.annotations.note changed"),
            "{}",
            f[0].message
        );
        assert!(f[1].message.contains("create-only"), "{}", f[1].message);
    }
}
