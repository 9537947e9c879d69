//! `invalid-delete-annotation`: a `release.openshift.io/delete` value other than `"true"`.
//! The CVO neither applies nor deletes such a manifest: the task fails with
//! `invalid delete annotation "release.openshift.io/delete" value: "{v}"` on every cluster,
//! so the update never completes.

use super::{Context, Finding, Location, Rule, Severity, Side};
use crate::cvo::deletion::{self, DeleteRequest};

/// Runs the rule.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    cx.plan
        .tasks
        .iter()
        .map(|t| &t.manifest)
        .filter_map(|m| match deletion::request(m) {
            DeleteRequest::Invalid(v) => Some(
                Finding::at(
                    Rule::InvalidDeleteAnnotation,
                    Severity::Error,
                    Location::of(m, Side::Payload),
                    format!(
                        "{}: the update fails on this manifest",
                        deletion::invalid_message(&v)
                    ),
                )
                .hint("set the annotation to \"true\" to delete the object, or remove it to apply the object"),
            ),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{lint_files, obj, of_rule};
    use super::*;

    #[test]
    fn only_true_is_a_valid_delete_value() {
        let bad = obj(
            "v1",
            "ConfigMap",
            "ns",
            "a",
            "    release.openshift.io/delete: \"yes\"\n",
            "",
        );
        let good = obj(
            "v1",
            "ConfigMap",
            "ns",
            "b",
            "    release.openshift.io/delete: \"true\"\n",
            "",
        );
        let findings = lint_files(
            &[("0000_50_a_00.yaml", &bad), ("0000_50_a_01.yaml", &good)],
            None,
        );
        let found = of_rule(&findings, Rule::InvalidDeleteAnnotation);
        assert_eq!(found.len(), 1, "{findings:#?}");
        assert_eq!(found[0].severity, Severity::Error);
        assert_eq!(found[0].location.as_ref().unwrap().object.name, "a");
        assert!(
            found[0].message.starts_with(
                "invalid delete annotation \"release.openshift.io/delete\" value: \"yes\""
            ),
            "{}",
            found[0].message
        );
    }
}
