//! `cluster-operator-without-workload` and `version-placeholder`: ClusterOperator manifests
//! are waited on, never applied. During an update the CVO blocks the graph on each until the
//! in-cluster ClusterOperator reports every version the manifest lists, so something must be
//! there to report them, and the versions must be real ones.
//!
//! - A ClusterOperator whose component (from the file name) ships no Deployment or DaemonSet
//!   in this payload: nothing here will report its versions (a warning: the operator may be
//!   shipped by another component).
//! - A version still holding the `0.0.1-snapshot` placeholder that `oc adm release new`
//!   replaces: the CVO would wait for that literal string.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Context, Finding, Rule, Severity, applies};
use crate::payload::VERSION_PLACEHOLDER;
use crate::plan::Action;

/// Runs both rules.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let with_workload: BTreeSet<&str> = cx
        .plan
        .tasks
        .iter()
        .filter(|t| applies(t))
        .filter(|t| {
            let id = &t.manifest.id;
            id.group == "apps" && (id.kind == "Deployment" || id.kind == "DaemonSet")
        })
        .filter_map(|t| t.component.as_deref())
        .collect();
    let mut findings = Vec::new();
    for t in cx.plan.tasks.iter().filter(|t| t.action == Action::Wait) {
        let name = &t.manifest.id.name;
        if !t
            .component
            .as_deref()
            .is_some_and(|c| with_workload.contains(c))
        {
            let component = t
                .component
                .as_deref()
                .unwrap_or("(none: unparsable file name)");
            findings.push(
                Finding::at(
                    Rule::ClusterOperatorWithoutWorkload,
                    Severity::Warning,
                    cx.location(t.id),
                    format!(
                        "ClusterOperator {name} is waited on, but component {component} ships no Deployment or DaemonSet in this payload to report its versions"
                    ),
                )
                .hint("ship the operator's workload in the same component, or make sure another component's operator reports this ClusterOperator"),
            );
        }
        let placeholders: Vec<String> = t
            .manifest
            .object
            .pointer("/status/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| {
                let version = v.get("version")?.as_str()?;
                version.contains(VERSION_PLACEHOLDER).then(|| {
                    let n = v.get("name").and_then(Value::as_str).unwrap_or("?");
                    format!("{n}: {version}")
                })
            })
            .collect();
        if !placeholders.is_empty() {
            findings.push(
                Finding::at(
                    Rule::VersionPlaceholder,
                    Severity::Warning,
                    cx.location(t.id),
                    format!(
                        "ClusterOperator {name} lists the unsubstituted placeholder {VERSION_PLACEHOLDER} ({}): the CVO would wait for that literal version",
                        placeholders.join(", ")
                    ),
                )
                .hint("build the payload with the release tooling (oc adm release new), or lint with --release-version VERSION"),
            );
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{
        MULTI_PROFILES, corpus, lint_files, lint_profile, obj, of_rule, op_cluster_operator,
    };
    use super::super::{Rule, Severity};

    fn co(version: &str) -> String {
        op_cluster_operator(version)
    }

    #[test]
    fn cluster_operator_without_a_workload_in_its_component() {
        let c = co("1.0.0");
        let elsewhere = obj("apps/v1", "Deployment", "x", "op", "", "");
        let findings = lint_files(
            &[
                ("0000_50_op_06_clusteroperator.yaml", c.as_str()),
                ("0000_50_other_04_deployment.yaml", elsewhere.as_str()),
            ],
            None,
        );
        let hits = of_rule(&findings, Rule::ClusterOperatorWithoutWorkload);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].severity, Severity::Warning);
        assert!(hits[0].message.contains("component op ships no Deployment"));
        assert!(of_rule(&findings, Rule::VersionPlaceholder).is_empty());
    }

    #[test]
    fn cluster_operator_with_a_daemonset_in_its_component_is_fine() {
        let c = co("1.0.0");
        let ds = obj("apps/v1", "DaemonSet", "x", "op", "", "");
        let findings = lint_files(
            &[
                ("0000_50_op_04_ds.yaml", ds.as_str()),
                ("0000_50_op_06_clusteroperator.yaml", c.as_str()),
            ],
            None,
        );
        assert!(of_rule(&findings, Rule::ClusterOperatorWithoutWorkload).is_empty());
    }

    #[test]
    fn placeholder_versions_are_a_warning() {
        let c = co("0.0.1-snapshot-kubernetes");
        let findings = lint_files(&[("0000_50_op_06_clusteroperator.yaml", c.as_str())], None);
        let hits = of_rule(&findings, Rule::VersionPlaceholder);
        assert_eq!(hits.len(), 1);
        assert!(
            hits[0]
                .message
                .contains("(operator: 0.0.1-snapshot-kubernetes)")
        );
    }

    #[test]
    fn every_openshift_multi_cluster_operator_has_the_placeholder() {
        let findings = lint_profile(&corpus("openshift-multi"), None, MULTI_PROFILES[0]);
        // 14 ClusterOperator documents; under self-managed-high-availability all are included.
        assert_eq!(of_rule(&findings, Rule::VersionPlaceholder).len(), 14);
    }

    #[test]
    fn openshift_multi_monitoring_operator_has_no_workload_under_hypershift() {
        let findings = lint_profile(&corpus("openshift-multi"), None, "hypershift");
        let hits = of_rule(&findings, Rule::ClusterOperatorWithoutWorkload);
        assert_eq!(hits.len(), 1, "{hits:#?}");
        assert_eq!(hits[0].location.as_ref().unwrap().object.name, "monitoring");
        let findings = lint_profile(&corpus("openshift-multi"), None, MULTI_PROFILES[0]);
        assert!(of_rule(&findings, Rule::ClusterOperatorWithoutWorkload).is_empty());
    }
}
