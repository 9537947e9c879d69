//! `ignored-tombstone`: a delete manifest the chosen profile filters out. The CVO drops it at
//! load time without a word, so the object stays on clusters of that profile
//! (openshift/cloud-credential-operator#388, openshift/cluster-network-operator#2758).
//!
//! - With `--previous`: a warning when the previous payload applied the object under this
//!   profile (it is left behind), an info otherwise.
//! - Without: a warning when the delete manifest names no profile at all, or names this one
//!   with a value other than `"true"`; an info when it is meant for other profiles only.
//! - Nothing when this payload applies the object under this profile (the tombstone is for
//!   the other profiles, by design).

use std::collections::BTreeSet;

use super::{Context, Finding, Location, Rule, Severity, Side, creates};
use crate::analysis::INCLUDE_PREFIX;
use crate::manifest::ObjectId;

/// Runs the rule.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let applied_here: BTreeSet<&ObjectId> = cx
        .plan
        .tasks
        .iter()
        .filter(|t| creates(t))
        .map(|t| &t.manifest.id)
        .collect();
    let applied_before: BTreeSet<&ObjectId> = cx
        .previous
        .map(|p| {
            p.plan
                .tasks
                .iter()
                .filter(|t| creates(t))
                .map(|t| &t.manifest.id)
                .collect()
        })
        .unwrap_or_default();
    let profile = &cx.plan.profile;
    let mut findings = Vec::new();
    for e in cx.excluded {
        let m = &e.manifest;
        let by_profile = e.reason == "no annotations" || e.reason.contains(INCLUDE_PREFIX);
        if !m.is_delete() || !by_profile || applied_here.contains(&m.id) {
            continue;
        }
        let profiles: Vec<&str> = m
            .annotations()
            .into_iter()
            .flatten()
            .filter(|(_, v)| v.as_str() == Some("true"))
            .filter_map(|(k, _)| k.strip_prefix(INCLUDE_PREFIX))
            .collect();
        let bad_value = e.reason.starts_with("unrecognized value");
        let (severity, message, hint) = if cx.previous.is_some() && applied_before.contains(&m.id) {
            (
                Severity::Warning,
                format!(
                    "delete manifest skipped under profile {profile} ({}): the object the previous payload applied stays behind",
                    e.reason
                ),
                format!(
                    "add include.release.openshift.io/{profile}: \"true\" to the delete manifest"
                ),
            )
        } else if profiles.is_empty() || bad_value {
            (
                Severity::Warning,
                format!(
                    "delete manifest skipped under profile {profile} ({}){}",
                    e.reason,
                    if profiles.is_empty() {
                        ": it deletes nothing under any profile"
                    } else {
                        ""
                    }
                ),
                "a delete manifest needs the include.release.openshift.io/<profile>: \"true\" annotation of every profile that had the object".to_string(),
            )
        } else {
            (
                Severity::Info,
                format!(
                    "not deleted under profile {profile}: the delete manifest is only for {}",
                    profiles.join(", ")
                ),
                format!(
                    "if clusters of profile {profile} have the object, add include.release.openshift.io/{profile}: \"true\""
                ),
            )
        };
        findings.push(
            Finding::at(
                Rule::IgnoredTombstone,
                severity,
                Location::of(m, Side::Payload),
                message,
            )
            .hint(hint),
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{DELETE, corpus, lint_files, lint_profile, of_rule};
    use super::super::{Rule, Severity};

    fn doc(annotations: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: op\n  annotations:\n{annotations}"
        )
    }

    #[test]
    fn tombstone_for_another_profile_only_is_an_info() {
        let t = doc(&format!(
            "    include.release.openshift.io/hypershift: \"true\"\n{DELETE}"
        ));
        let findings = lint_files(&[("0000_90_op_90_deletion.yaml", t.as_str())], None);
        let hits = of_rule(&findings, Rule::IgnoredTombstone);
        assert_eq!(hits.len(), 1, "{findings:#?}");
        assert_eq!(hits[0].severity, Severity::Info);
        assert_eq!(
            hits[0].message,
            "not deleted under profile self-managed-high-availability: the delete manifest is only for hypershift"
        );
    }

    #[test]
    fn tombstone_without_any_profile_is_a_warning() {
        let t = doc(DELETE);
        let findings = lint_files(&[("0000_90_op_90_deletion.yaml", t.as_str())], None);
        let hits = of_rule(&findings, Rule::IgnoredTombstone);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].severity, Severity::Warning);
        assert!(
            hits[0]
                .message
                .contains("deletes nothing under any profile")
        );
    }

    #[test]
    fn tombstone_with_a_false_profile_value_is_a_warning() {
        let t = doc(&format!(
            "    include.release.openshift.io/self-managed-high-availability: \"false\"\n    include.release.openshift.io/hypershift: \"true\"\n{DELETE}"
        ));
        let findings = lint_files(&[("0000_90_op_90_deletion.yaml", t.as_str())], None);
        let hits = of_rule(&findings, Rule::IgnoredTombstone);
        assert_eq!(hits[0].severity, Severity::Warning);
    }

    #[test]
    fn tombstone_skipped_where_the_previous_payload_applied_the_object_is_a_warning() {
        let t = doc(&format!(
            "    include.release.openshift.io/hypershift: \"true\"\n{DELETE}"
        ));
        let old =
            doc("    include.release.openshift.io/self-managed-high-availability: \"true\"\n");
        let findings = lint_files(
            &[("0000_90_op_90_deletion.yaml", t.as_str())],
            Some(&[("0000_50_op_01_cm.yaml", old.as_str())]),
        );
        let hits = of_rule(&findings, Rule::IgnoredTombstone);
        assert_eq!(hits[0].severity, Severity::Warning);
        assert!(hits[0].message.contains("stays behind"));
    }

    #[test]
    fn tombstone_for_other_profiles_of_an_object_applied_here_is_by_design() {
        let t = doc(&format!(
            "    include.release.openshift.io/hypershift: \"true\"\n{DELETE}"
        ));
        let live =
            doc("    include.release.openshift.io/self-managed-high-availability: \"true\"\n");
        let findings = lint_files(
            &[
                ("0000_50_op_01_cm.yaml", live.as_str()),
                ("0000_90_op_90_deletion.yaml", t.as_str()),
            ],
            None,
        );
        assert!(of_rule(&findings, Rule::IgnoredTombstone).is_empty());
    }

    #[test]
    fn openshift_multi_olm_tombstones_skip_single_node_developer() {
        let findings = lint_profile(&corpus("openshift-multi"), None, "single-node-developer");
        let hits = of_rule(&findings, Rule::IgnoredTombstone);
        let olm: Vec<_> = hits
            .iter()
            .filter(|f| f.location.as_ref().unwrap().file.contains("_olm_"))
            .collect();
        // collect-profiles and pprof: ConfigMap, Role, RoleBinding, ServiceAccount, Secret,
        // CronJob, NetworkPolicy.
        assert_eq!(olm.len(), 7, "{hits:#?}");
        assert!(hits.iter().all(|f| f.severity == Severity::Info));
    }
}
