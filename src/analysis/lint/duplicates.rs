//! `duplicate-object`: the same object (group, kind, namespace, name) in two files of one
//! profile's included set. The CVO checks duplicates only inside one file; across files both
//! copies become tasks and the last writer wins on every pass. When the copies differ they
//! overwrite each other on every pass (an error); identical copies are only redundant (a
//! warning). An object both applied and deleted is `applied-and-deleted` instead.

use std::collections::BTreeMap;

use super::{Context, Finding, Rule, Severity, creates};
use crate::analysis::objects::same_content;
use crate::manifest::ObjectId;

/// Runs the rule: one finding per extra copy, at the copy.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let mut by_id: BTreeMap<&ObjectId, Vec<usize>> = BTreeMap::new();
    for t in cx.plan.tasks.iter().filter(|t| creates(t)) {
        by_id.entry(&t.manifest.id).or_default().push(t.id);
    }
    let mut findings = Vec::new();
    for tasks in by_id.values().filter(|t| t.len() > 1) {
        let first = &cx.plan.tasks[tasks[0]];
        for &other in &tasks[1..] {
            let copy = &cx.plan.tasks[other];
            let same = same_content(&first.manifest.object, &copy.manifest.object);
            let (severity, what) = if same {
                (Severity::Warning, "an identical copy")
            } else {
                (
                    Severity::Error,
                    "a different copy: the two overwrite each other on every pass",
                )
            };
            findings.push(
                Finding::at(
                    Rule::DuplicateObject,
                    severity,
                    cx.location(other),
                    format!(
                        "also in {}#{}, {what}",
                        first.manifest.file, first.manifest.document
                    ),
                )
                .hint("keep the object in one file, or give the copies disjoint profile, feature-set or capability annotations")
                .related("first copy", cx.location(first.id)),
            );
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{MULTI_PROFILES, corpus, lint_files, lint_profile, obj, of_rule};
    use super::super::{Rule, Severity};

    #[test]
    fn different_copies_in_two_files_are_an_error_and_identical_ones_a_warning() {
        let a = obj("v1", "ConfigMap", "op", "x", "", "data:\n  k: a\n");
        let b = obj("v1", "ConfigMap", "op", "x", "", "data:\n  k: b\n");
        let findings = lint_files(
            &[
                ("0000_50_op_01_a.yaml", a.as_str()),
                ("0000_50_op_02_b.yaml", b.as_str()),
            ],
            None,
        );
        let hits = of_rule(&findings, Rule::DuplicateObject);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].severity, Severity::Error);
        assert_eq!(
            hits[0].location.as_ref().unwrap().file,
            "release-manifests/0000_50_op_02_b.yaml"
        );
        let findings = lint_files(
            &[
                ("0000_50_op_01_a.yaml", a.as_str()),
                ("0000_60_x_02_a.yaml", a.as_str()),
            ],
            None,
        );
        assert_eq!(
            of_rule(&findings, Rule::DuplicateObject)[0].severity,
            Severity::Warning
        );
    }

    #[test]
    fn copies_for_different_profiles_are_fine() {
        let a = obj("v1", "ConfigMap", "op", "x", "", "");
        let b = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: op\n  annotations:\n    include.release.openshift.io/hypershift: \"true\"\n";
        let findings = lint_files(
            &[
                ("0000_50_op_01_a.yaml", a.as_str()),
                ("0000_50_op_02_b.yaml", b),
            ],
            None,
        );
        assert!(of_rule(&findings, Rule::DuplicateObject).is_empty());
    }

    #[test]
    fn openshift_multi_has_no_duplicates_within_a_profile() {
        for profile in MULTI_PROFILES {
            let findings = lint_profile(&corpus("openshift-multi"), None, profile);
            assert!(
                of_rule(&findings, Rule::DuplicateObject).is_empty(),
                "{profile}: {findings:#?}"
            );
        }
    }
}
