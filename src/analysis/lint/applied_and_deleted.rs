//! `applied-and-deleted`: one payload (under one profile) both puts an object on the cluster
//! and deletes it. The CVO does not check this: every update pass creates the object at one
//! place in the graph and deletes it at another, and the pending delete keeps ClusterVersion
//! `Upgradeable=False` (`ResourceDeletesInProgress`), as the 4.13 backport of the
//! machine-config fix did (OCPBUGS-21721).

use std::collections::BTreeMap;

use super::{Context, Finding, Rule, Severity, creates};
use crate::manifest::ObjectId;
use crate::plan::Action;

/// Runs the rule: one error per delete task of an object that another task creates.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let mut by_id: BTreeMap<&ObjectId, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for t in &cx.plan.tasks {
        let entry = by_id.entry(&t.manifest.id).or_default();
        if t.action == Action::Delete {
            entry.1.push(t.id);
        } else if creates(t) {
            entry.0.push(t.id);
        }
    }
    let mut findings = Vec::new();
    for (applied, deleted) in by_id.values() {
        if applied.is_empty() {
            continue;
        }
        for &d in deleted {
            let a = applied[0];
            let (ta, td) = (&cx.plan.tasks[a], &cx.plan.tasks[d]);
            let level = |t: &crate::plan::Task| t.run_level.clone().unwrap_or_else(|| "-".into());
            let mut f = Finding::at(
                Rule::AppliedAndDeleted,
                Severity::Error,
                cx.location(d),
                format!(
                    "deleted at run-level {} but also applied by {}#{} at run-level {}: every update pass creates it and deletes it again",
                    level(td),
                    ta.manifest.file,
                    ta.manifest.document,
                    level(ta),
                ),
            )
            .hint("keep one of the two: drop the delete manifest while this release still ships the object, or stop applying it");
            for &x in applied {
                f = f.related("applied", cx.location(x));
            }
            findings.push(f);
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{
        DELETE, MULTI_PROFILES, corpus, lint_dirs, lint_files, lint_profile, obj, of_rule,
    };
    use super::super::{Rule, Severity};

    #[test]
    fn object_applied_at_one_level_and_deleted_at_another_is_an_error() {
        let cm = obj("v1", "ConfigMap", "op", "x", "", "");
        let del = obj("v1", "ConfigMap", "op", "x", DELETE, "");
        let findings = lint_files(
            &[
                ("0000_50_op_01_cm.yaml", cm.as_str()),
                ("0000_90_op_90_deletion.yaml", del.as_str()),
            ],
            None,
        );
        let hits = of_rule(&findings, Rule::AppliedAndDeleted);
        assert_eq!(hits.len(), 1, "{findings:#?}");
        assert_eq!(hits[0].severity, Severity::Error);
        assert_eq!(
            hits[0].location.as_ref().unwrap().file,
            "release-manifests/0000_90_op_90_deletion.yaml"
        );
        assert!(
            hits[0]
                .message
                .contains("0000_50_op_01_cm.yaml#0 at run-level 50")
        );
    }

    #[test]
    fn apply_and_delete_for_different_profiles_is_fine() {
        let cm = obj("v1", "ConfigMap", "op", "x", "", "");
        // The delete is for another profile only.
        let del = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: op\n  annotations:\n    include.release.openshift.io/hypershift: \"true\"\n    release.openshift.io/delete: \"true\"\n";
        let findings = lint_files(
            &[
                ("0000_50_op_01_cm.yaml", cm.as_str()),
                ("0000_90_op_90_deletion.yaml", del),
            ],
            None,
        );
        assert!(of_rule(&findings, Rule::AppliedAndDeleted).is_empty());
    }

    #[test]
    fn mco_4_13_backport_conflict_is_flagged() {
        let findings = lint_dirs(&corpus("mco-4.13-backport-conflict"), None);
        let hits = of_rule(&findings, Rule::AppliedAndDeleted);
        assert_eq!(hits.len(), 1, "{findings:#?}");
        let loc = hits[0].location.as_ref().unwrap();
        assert_eq!(
            loc.file,
            "release-manifests/0000_90_machine-config-operator_90_deletion.yaml"
        );
        assert_eq!(
            loc.object.name,
            "default-account-openshift-machine-config-operator"
        );
        assert_eq!(
            hits[0].related[0].location.file,
            "release-manifests/0000_80_machine-config-operator_03_rbac.yaml"
        );
    }

    #[test]
    fn openshift_multi_applies_nothing_it_deletes_under_any_profile() {
        for profile in MULTI_PROFILES {
            let findings = lint_profile(&corpus("openshift-multi"), None, profile);
            assert!(
                of_rule(&findings, Rule::AppliedAndDeleted).is_empty(),
                "{profile}: {findings:#?}"
            );
        }
    }

    #[test]
    fn the_other_mco_payloads_apply_nothing_they_delete() {
        for p in ["mco-4.13", "mco-4.14", "mco-before-fix", "mco-after-fix"] {
            let findings = lint_dirs(&corpus(p), None);
            assert!(
                of_rule(&findings, Rule::AppliedAndDeleted).is_empty(),
                "{p}: {findings:#?}"
            );
        }
    }
}
