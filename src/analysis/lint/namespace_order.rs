//! `namespace-order` and `missing-namespace`: a namespaced object can only be created once
//! its Namespace exists. As with CRDs ([`crd_order`](super::crd_order)), an object planned
//! before (or in parallel with) the Namespace manifest that creates it fails its task, and in
//! updating mode the run-level with it, unless the previous payload created the namespace.

use std::collections::{BTreeMap, BTreeSet};

use super::crd_order::defines;
use super::{Context, Finding, Rule, Severity, applies, creates};
use crate::plan::Plan;

/// Namespaces every Kubernetes cluster has.
pub const BUILTIN_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Built-in kinds that are cluster-scoped (a namespace on them is ignored).
pub const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("node.k8s.io", "RuntimeClass"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
];

fn namespaces(plan: &Plan) -> BTreeMap<&str, Vec<usize>> {
    let mut map: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for t in plan.tasks.iter().filter(|t| applies(t)) {
        let id = &t.manifest.id;
        if id.group.is_empty() && id.kind == "Namespace" {
            map.entry(id.name.as_str()).or_default().push(t.id);
        }
    }
    map
}

fn cluster_scoped_crs(plan: &Plan) -> impl Iterator<Item = (String, String)> + '_ {
    plan.tasks
        .iter()
        .filter_map(|t| defines(&t.manifest))
        .filter(|(_, _, namespaced)| !namespaced)
        .map(|(g, k, _)| (g, k))
}

/// Runs both rules.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let creating = namespaces(cx.plan);
    let existing: BTreeSet<&str> = cx
        .previous
        .map(|p| namespaces(p.plan).into_keys().collect())
        .unwrap_or_default();
    let mut cluster_scoped: BTreeSet<(String, String)> = CLUSTER_SCOPED
        .iter()
        .map(|(g, k)| ((*g).to_string(), (*k).to_string()))
        .collect();
    cluster_scoped.extend(cluster_scoped_crs(cx.plan));
    if let Some(p) = cx.previous {
        cluster_scoped.extend(cluster_scoped_crs(p.plan));
    }
    let severity = if cx.previous.is_some() {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut findings = Vec::new();
    let mut missing: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for t in cx.plan.tasks.iter().filter(|t| creates(t)) {
        let id = &t.manifest.id;
        let Some(ns) = id.namespace.as_deref() else {
            continue;
        };
        if cluster_scoped.contains(&(id.group.clone(), id.kind.clone()))
            || BUILTIN_NAMESPACES.contains(&ns)
            || existing.contains(ns)
        {
            continue;
        }
        let Some(ns_tasks) = creating.get(ns) else {
            missing.entry(ns).or_default().push(t.id);
            continue;
        };
        if ns_tasks.iter().any(|&n| cx.runs_before(n, t.id)) {
            continue;
        }
        let n = ns_tasks[0];
        let hint = if cx.previous.is_some() {
            "create the Namespace earlier: in an earlier file of the same component, or at an earlier run-level"
        } else {
            "create the Namespace earlier; this is fine only on clusters that have the namespace already (pass --previous OLD to check)"
        };
        findings.push(
            Finding::at(
                Rule::NamespaceOrder,
                severity,
                cx.location(t.id),
                format!(
                    "planned {} Namespace {ns} (run-level {}) is created",
                    cx.before_or_parallel(t.id, n),
                    cx.plan.tasks[n].run_level.as_deref().unwrap_or("-"),
                ),
            )
            .hint(hint)
            .related("namespace", cx.location(n)),
        );
    }
    let prev = if cx.previous.is_some() {
        " or the previous one"
    } else {
        ""
    };
    for (ns, tasks) in missing {
        findings.push(
            Finding::at(
                Rule::MissingNamespace,
                Severity::Info,
                cx.location(tasks[0]),
                format!(
                    "no Namespace manifest in this payload{prev} creates {ns}: {} object(s) need a cluster that has it already",
                    tasks.len()
                ),
            )
            .hint(format!("add a Namespace manifest for {ns} before its first use, or make sure another component creates it")),
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{MULTI_PROFILES, corpus, lint_files, lint_profile, obj, of_rule};
    use super::super::{Rule, Severity};

    #[test]
    fn object_before_its_namespace_in_the_same_component() {
        let cm = obj("v1", "ConfigMap", "op", "x", "", "");
        let ns = obj("v1", "Namespace", "", "op", "", "");
        let findings = lint_files(
            &[
                ("0000_50_op_00_cm.yaml", cm.as_str()),
                ("0000_50_op_01_ns.yaml", ns.as_str()),
            ],
            None,
        );
        let hits = of_rule(&findings, Rule::NamespaceOrder);
        assert_eq!(hits.len(), 1, "{findings:#?}");
        assert_eq!(hits[0].severity, Severity::Warning);
        assert_eq!(
            hits[0].message,
            "planned before Namespace op (run-level 50) is created"
        );
    }

    #[test]
    fn namespace_first_or_from_the_previous_payload_is_fine() {
        let cm = obj("v1", "ConfigMap", "op", "x", "", "");
        let ns = obj("v1", "Namespace", "", "op", "", "");
        let ordered = [
            ("0000_50_op_00_ns.yaml", ns.as_str()),
            ("0000_50_op_01_cm.yaml", cm.as_str()),
        ];
        assert!(
            lint_files(&ordered, None)
                .iter()
                .all(|f| f.rule != Rule::NamespaceOrder)
        );
        let late = [
            ("0000_50_op_00_cm.yaml", cm.as_str()),
            ("0000_50_op_01_ns.yaml", ns.as_str()),
        ];
        let old = [("0000_50_op_01_ns.yaml", ns.as_str())];
        assert!(of_rule(&lint_files(&late, Some(&old)), Rule::NamespaceOrder).is_empty());
    }

    #[test]
    fn namespace_nobody_creates_is_one_info_and_builtin_ones_are_skipped() {
        let a = obj("v1", "ConfigMap", "elsewhere", "a", "", "");
        let b = obj("v1", "ConfigMap", "elsewhere", "b", "", "");
        let c = obj("v1", "ConfigMap", "kube-system", "c", "", "");
        let findings = lint_files(
            &[
                ("0000_50_op_00_a.yaml", a.as_str()),
                ("0000_50_op_01_b.yaml", b.as_str()),
                ("0000_50_op_02_c.yaml", c.as_str()),
            ],
            None,
        );
        let hits = of_rule(&findings, Rule::MissingNamespace);
        assert_eq!(hits.len(), 1, "{findings:#?}");
        assert!(hits[0].message.contains("creates elsewhere: 2 object(s)"));
    }

    #[test]
    fn openshift_multi_namespace_order_findings_name_real_namespaces() {
        let findings = lint_profile(&corpus("openshift-multi"), None, MULTI_PROFILES[0]);
        for f in of_rule(&findings, Rule::NamespaceOrder) {
            let r = &f.related[0];
            assert_eq!(r.location.object.kind, "Namespace");
            assert_eq!(
                Some(&r.location.object.name),
                f.location.as_ref().unwrap().object.namespace.as_ref()
            );
        }
    }
}
