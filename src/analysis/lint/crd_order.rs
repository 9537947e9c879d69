//! `crd-order` and `unserved-kind`: a custom resource needs its CRD served before the CVO can
//! apply it. In updating mode a task that fails twice fails its run-level, and later run-levels
//! never start, so a resource planned before (or in parallel with) the CRD that defines it
//! stalls an update from a release that did not serve the kind yet. At install time the CVO
//! flattens the graph and retries, which hides the problem.
//!
//! A kind counts as served already when the previous payload applies a CRD for it, or when it
//! is one of the API groups a Kubernetes API server serves itself.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Context, Finding, Rule, Severity, applies, creates};
use crate::manifest::Manifest;
use crate::plan::Plan;

/// API groups served by kube-apiserver itself (no CRD needed).
pub const BUILTIN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// The group and kind a CRD defines, and whether it is namespaced.
#[must_use]
pub fn defines(crd: &Manifest) -> Option<(String, String, bool)> {
    if !crd.is_crd() {
        return None;
    }
    let spec = crd.object.get("spec")?;
    let group = spec.get("group")?.as_str()?;
    let kind = spec.get("names")?.get("kind")?.as_str()?;
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    Some((group.to_string(), kind.to_string(), namespaced))
}

/// For every (group, kind) a plan's applied CRDs define, the CRD tasks.
#[must_use]
pub fn crd_tasks(plan: &Plan) -> BTreeMap<(String, String), Vec<usize>> {
    let mut map: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for t in plan.tasks.iter().filter(|t| applies(t)) {
        if let Some((g, k, _)) = defines(&t.manifest) {
            map.entry((g, k)).or_default().push(t.id);
        }
    }
    map
}

/// Runs both rules.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let crds = crd_tasks(cx.plan);
    let served_before: BTreeSet<(String, String)> = cx
        .previous
        .map(|p| crd_tasks(p.plan).into_keys().collect())
        .unwrap_or_default();
    let severity = if cx.previous.is_some() {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut findings = Vec::new();
    let mut unserved: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for t in cx.plan.tasks.iter().filter(|t| creates(t)) {
        let id = &t.manifest.id;
        if BUILTIN_GROUPS.contains(&id.group.as_str()) {
            continue;
        }
        let key = (id.group.clone(), id.kind.clone());
        if served_before.contains(&key) {
            continue;
        }
        let Some(defining) = crds.get(&key) else {
            unserved.entry(key).or_default().push(t.id);
            continue;
        };
        if defining.iter().any(|&c| cx.runs_before(c, t.id)) {
            continue;
        }
        let c = defining[0];
        let crd = &cx.plan.tasks[c];
        let hint = if cx.previous.is_some() {
            "move the object to a later run-level than its CRD (or the CRD to an earlier one): the update stops at the first run-level that fails"
        } else {
            "move the object to a later run-level than its CRD (or the CRD to an earlier one); this is fine only on clusters that already serve the kind (pass --previous OLD to check)"
        };
        findings.push(
            Finding::at(
                Rule::CrdOrder,
                severity,
                cx.location(t.id),
                format!(
                    "planned {} CustomResourceDefinition {} (run-level {}) that defines {}.{}",
                    cx.before_or_parallel(t.id, c),
                    crd.manifest.id.name,
                    crd.run_level.as_deref().unwrap_or("-"),
                    id.kind,
                    id.group,
                ),
            )
            .hint(hint)
            .related("crd", cx.location(c)),
        );
    }
    let prev = if cx.previous.is_some() {
        " or the previous one"
    } else {
        ""
    };
    for ((group, kind), tasks) in unserved {
        let first = &cx.plan.tasks[tasks[0]];
        findings.push(
            Finding::at(
                Rule::UnservedKind,
                Severity::Info,
                cx.location(tasks[0]),
                format!(
                    "no CustomResourceDefinition in this payload{prev} defines {kind}.{group}: {} object(s) from run-level {} on need a cluster that serves it already",
                    tasks.len(),
                    first.run_level.as_deref().unwrap_or("-"),
                ),
            )
            .hint("make sure another component or the installer provides the API before this run-level"),
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{MULTI_PROFILES, corpus, lint_files, lint_profile, obj, of_rule};
    use super::super::{Rule, Severity};

    fn crd() -> String {
        obj(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "",
            "widgets.example.com",
            "",
            "spec:\n  group: example.com\n  scope: Cluster\n  names:\n    kind: Widget\n    plural: widgets\n",
        )
    }

    fn widget() -> String {
        obj("example.com/v1", "Widget", "", "cluster", "", "")
    }

    #[test]
    fn custom_resource_at_an_earlier_run_level_than_its_crd() {
        let (crd, w) = (crd(), widget());
        let files = [
            ("0000_05_a_01_widget.cr.yaml", w.as_str()),
            ("0000_10_b_01_widget.crd.yaml", crd.as_str()),
        ];
        let findings = lint_files(&files, None);
        let hits = of_rule(&findings, Rule::CrdOrder);
        assert_eq!(hits.len(), 1, "{findings:#?}");
        assert_eq!(hits[0].severity, Severity::Warning);
        assert!(hits[0].message.starts_with(
            "planned before CustomResourceDefinition widgets.example.com (run-level 10)"
        ));
        // The previous payload did not serve it either: an update stalls.
        let findings = lint_files(
            &files,
            Some(&[(
                "0000_05_a_00_cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: other\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n",
            )]),
        );
        assert_eq!(
            of_rule(&findings, Rule::CrdOrder)[0].severity,
            Severity::Error
        );
    }

    #[test]
    fn custom_resource_in_a_parallel_component_of_the_same_run_level() {
        let (crd, w) = (crd(), widget());
        let files = [
            ("0000_10_a_01_widget.cr.yaml", w.as_str()),
            ("0000_10_b_01_widget.crd.yaml", crd.as_str()),
        ];
        let findings = lint_files(&files, None);
        let hits = of_rule(&findings, Rule::CrdOrder);
        assert_eq!(hits.len(), 1);
        assert!(hits[0].message.starts_with("planned in parallel with"));
    }

    #[test]
    fn crd_served_by_the_previous_payload_or_ordered_first_is_fine() {
        let (crd, w) = (crd(), widget());
        let late = [
            ("0000_05_a_01_widget.cr.yaml", w.as_str()),
            ("0000_10_b_01_widget.crd.yaml", crd.as_str()),
        ];
        let old = [("0000_10_b_01_widget.crd.yaml", crd.as_str())];
        assert!(of_rule(&lint_files(&late, Some(&old)), Rule::CrdOrder).is_empty());
        let ordered = [
            ("0000_05_a_00_widget.crd.yaml", crd.as_str()),
            ("0000_05_a_01_widget.cr.yaml", w.as_str()),
        ];
        let findings = lint_files(&ordered, None);
        assert!(of_rule(&findings, Rule::CrdOrder).is_empty());
        assert!(of_rule(&findings, Rule::UnservedKind).is_empty());
    }

    #[test]
    fn kind_without_any_crd_is_one_info_per_kind() {
        let w = widget();
        let w2 = obj("example.com/v1", "Widget", "", "other", "", "");
        let findings = lint_files(
            &[
                ("0000_05_a_01_w.yaml", w.as_str()),
                ("0000_05_a_02_w.yaml", w2.as_str()),
            ],
            None,
        );
        let hits = of_rule(&findings, Rule::UnservedKind);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].severity, Severity::Info);
        assert!(hits[0].message.contains("Widget.example.com: 2 object(s)"));
    }

    #[test]
    fn openshift_multi_config_singletons_come_before_their_crds() {
        let findings = lint_profile(&corpus("openshift-multi"), None, MULTI_PROFILES[0]);
        let hits = of_rule(&findings, Rule::CrdOrder);
        let names: Vec<String> = hits
            .iter()
            .map(|f| f.location.as_ref().unwrap().object.to_string())
            .collect();
        assert!(
            names.contains(&"Infrastructure.config.openshift.io cluster".to_string()),
            "{names:#?}"
        );
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("ServiceMonitor.monitoring.coreos.com")),
            "{names:#?}"
        );
    }
}
