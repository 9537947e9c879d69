//! The table's cases for Namespace, ServiceAccount, the RBAC kinds, CRDs, webhooks and the
//! generic rule.

use serde_json::{Value, json};

use super::*;

/// The other typed kinds and the generic rule, in namespace `ns` (cluster-scoped names get
/// `suffix`).
pub(super) fn cases(ns: &str, suffix: &str) -> Vec<Case> {
    let n = |s: &str| format!("{s}-{suffix}");
    let group = format!("{suffix}.merge-kinds.minicvo.test");
    let crd = |description: &str, labels: Value| {
        meta(
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1",
            None,
            &format!("widgets.{group}"),
            json!({"metadata": {"labels": labels}, "spec": {
                "group": group, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "description": description,
                    "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        )
    };
    let webhook = |timeout: u32, annotations: Value| {
        meta(
            "ValidatingWebhookConfiguration",
            "admissionregistration.k8s.io/v1",
            None,
            &n("merge-kinds"),
            json!({"metadata": {"annotations": annotations}, "webhooks": [{
                "name": format!("check.{group}"),
                "clientConfig": {"url": "https://webhook.invalid/validate"},
                "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothing"]}],
                "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": timeout}]}),
        )
    };
    let rule = |verb: &str| json!([{"apiGroups": [""], "resources": ["pods"], "verbs": [verb]}]);
    let subject = |sa: &str| json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}]);
    vec![
        Case {
            rule: "Namespace: a dropped label is kept",
            old: meta(
                "Namespace",
                "v1",
                None,
                &n("mk-ns"),
                json!({"metadata": {"labels": {"l": "1"}}}),
            ),
            hand: None,
            new: meta("Namespace", "v1", None, &n("mk-ns"), json!({})),
            checks: vec![differ("/metadata/labels/l", Some(json!("1")), None)],
        },
        Case {
            rule: "Service: ports updated, sessionAffinity never",
            old: meta(
                "Service",
                "v1",
                Some(ns),
                "svc",
                json!({"spec": {"selector": {"app": "x"}, "ports": [{"name": "http", "port": 80}]}}),
            ),
            hand: None,
            new: meta(
                "Service",
                "v1",
                Some(ns),
                "svc",
                json!({"spec": {"selector": {"app": "x"}, "sessionAffinity": "ClientIP",
                    "ports": [{"name": "http", "port": 81}]}}),
            ),
            checks: vec![
                both("/spec/ports/0/port", json!(81)),
                differ(
                    "/spec/sessionAffinity",
                    Some(json!("None")),
                    Some(json!("ClientIP")),
                ),
            ],
        },
        Case {
            rule: "ServiceAccount: a dropped annotation is kept",
            old: meta(
                "ServiceAccount",
                "v1",
                Some(ns),
                "sa",
                json!({"metadata": {"annotations": {"a": "1"}}}),
            ),
            hand: None,
            new: meta("ServiceAccount", "v1", Some(ns), "sa", json!({})),
            checks: vec![differ("/metadata/annotations/a", Some(json!("1")), None)],
        },
        Case {
            rule: "Role: rules replaced whole, a dropped label kept",
            old: meta(
                "Role",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "role",
                json!({"metadata": {"labels": {"l": "1"}}, "rules": rule("get")}),
            ),
            hand: None,
            new: meta(
                "Role",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "role",
                json!({"rules": rule("list")}),
            ),
            checks: vec![
                both("/rules/0/verbs", json!(["list"])),
                both("/rules/1", Value::Null).none(),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "RoleBinding: subjects replaced whole",
            old: meta(
                "RoleBinding",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "rb",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
                    "subjects": subject("a")}),
            ),
            hand: Some(Edit::Merge(json!({"metadata": {"labels": {"hand": "1"}}}))),
            new: meta(
                "RoleBinding",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "rb",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
                    "subjects": subject("b")}),
            ),
            checks: vec![
                both("/subjects/0/name", json!("b")),
                both("/subjects/1", Value::Null).none(),
                both("/metadata/labels/hand", json!("1")),
            ],
        },
        Case {
            rule: "ClusterRole: rules replaced whole, a dropped annotation kept",
            old: meta(
                "ClusterRole",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-cr"),
                json!({"metadata": {"annotations": {"a": "1"}}, "rules": rule("get")}),
            ),
            hand: None,
            new: meta(
                "ClusterRole",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-cr"),
                json!({"rules": rule("watch")}),
            ),
            checks: vec![
                both("/rules/0/verbs", json!(["watch"])),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "ClusterRoleBinding: subjects replaced whole, a dropped label kept",
            old: meta(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-crb"),
                json!({"metadata": {"labels": {"l": "1"}},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": n("mk-cr")},
                    "subjects": subject("a")}),
            ),
            hand: None,
            new: meta(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-crb"),
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": n("mk-cr")},
                    "subjects": subject("b")}),
            ),
            checks: vec![
                both("/subjects/0/name", json!("b")),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "CRD: spec replaced, a dropped label kept",
            old: crd("old", json!({"l": "1"})),
            hand: None,
            new: crd("new", json!({})),
            checks: vec![
                both(
                    "/spec/versions/0/schema/openAPIV3Schema/description",
                    json!("new"),
                ),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "ValidatingWebhookConfiguration: webhooks replaced, a dropped annotation kept",
            old: webhook(5, json!({"a": "1"})),
            hand: None,
            new: webhook(7, json!({})),
            checks: vec![
                both("/webhooks/0/timeoutSeconds", json!(7)),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            // With `type` in the manifest: without it the live `type: Opaque` differs and the
            // CVO rewrites the Secret on every pass.
            rule: "generic (Secret): an annotation-only change is not written",
            old: meta(
                "Secret",
                "v1",
                Some(ns),
                "annotated",
                json!({"metadata": {"annotations": {"a": "1"}}, "type": "Opaque", "data": {"k": "YQ=="}}),
            ),
            hand: None,
            new: meta(
                "Secret",
                "v1",
                Some(ns),
                "annotated",
                json!({"metadata": {"annotations": {"a": "2"}}, "type": "Opaque", "data": {"k": "YQ=="}}),
            ),
            checks: vec![differ(
                "/metadata/annotations/a",
                Some(json!("1")),
                Some(json!("2")),
            )],
        },
        Case {
            rule: "generic (Secret): a data change replaces labels and annotations whole",
            old: meta(
                "Secret",
                "v1",
                Some(ns),
                "changed",
                json!({"metadata": {"labels": {"l": "1"}}, "data": {"k": "YQ=="}}),
            ),
            hand: Some(Edit::Merge(
                json!({"metadata": {"annotations": {"hand": "1"}}}),
            )),
            new: meta(
                "Secret",
                "v1",
                Some(ns),
                "changed",
                json!({"metadata": {"labels": {"m": "2"}}, "data": {"k": "Yg=="}}),
            ),
            checks: vec![
                both("/data/k", json!("Yg==")),
                both("/metadata/labels/m", json!("2")),
                both("/metadata/labels/l", Value::Null).none(),
                differ("/metadata/annotations/hand", None, Some(json!("1"))),
            ],
        },
    ]
}
