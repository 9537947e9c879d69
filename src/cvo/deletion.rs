//! The CVO's delete rules: the `release.openshift.io/delete` value must be exactly `"true"`,
//! and the names it prints for the object being deleted.

use crate::manifest::{DELETE_ANNOTATION, Manifest};

/// What a manifest's delete annotation asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteRequest {
    /// No annotation: the manifest is applied.
    Absent,
    /// `"true"`: the object is deleted and never applied.
    Delete,
    /// Any other value: the task fails and nothing is applied.
    Invalid(String),
}

/// Reads the annotation of a manifest.
#[must_use]
pub fn request(m: &Manifest) -> DeleteRequest {
    match m.annotation(DELETE_ANNOTATION) {
        None => DeleteRequest::Absent,
        Some("true") => DeleteRequest::Delete,
        Some(other) => DeleteRequest::Invalid(other.to_string()),
    }
}

/// The CVO's error for an invalid value.
#[must_use]
pub fn invalid_message(value: &str) -> String {
    format!("invalid delete annotation \"{DELETE_ANNOTATION}\" value: \"{value}\"")
}

/// Kinds the CVO deletes through a typed client, which it names in lower case.
const TYPED: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "ConfigMap"),
    ("", "Namespace"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("image.openshift.io", "ImageStream"),
    ("operators.coreos.com", "OperatorGroup"),
    ("security.openshift.io", "SecurityContextConstraints"),
];

/// Whether the CVO deletes this kind through a typed client (whose GET of a kind the server
/// does not serve answers 404, so the object counts as already deleted); any other kind goes
/// through the REST mapper and an unserved kind fails the task.
#[must_use]
pub fn is_typed(group: &str, kind: &str) -> bool {
    TYPED.iter().any(|(g, k)| *g == group && *k == kind)
}

/// How the CVO names an object it deletes: `{kind} "{ns}/{name}"` or `{kind} "{name}"`, typed
/// kinds in lower case, namespaces and CRDs without a namespace, other kinds as written.
#[must_use]
pub fn resource_label(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> String {
    let shown = if is_typed(group, kind) {
        kind.to_lowercase()
    } else {
        kind.to_string()
    };
    let ns = namespace
        .filter(|n| !n.is_empty())
        .filter(|_| kind != "Namespace" && kind != "CustomResourceDefinition");
    match ns {
        Some(ns) => format!("{shown} \"{ns}/{name}\""),
        None => format!("{shown} \"{name}\""),
    }
}

/// The warning for an object already absent before this run asked for its deletion.
#[must_use]
pub fn not_found_message(label: &str) -> String {
    format!(
        "{label} not found. It either has already been removed or it has never been installed on this cluster."
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::manifest::{ObjectId, Source};

    fn manifest(value: Option<&str>) -> Manifest {
        let mut annotations = json!({});
        if let Some(v) = value {
            annotations[DELETE_ANNOTATION] = json!(v);
        }
        Manifest {
            source: Source::ReleaseManifests,
            file: "f.yaml".into(),
            document: 0,
            line: 1,
            api_version: "v1".into(),
            id: ObjectId {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: "a".into(),
            },
            object: json!({"metadata": {"name": "a", "annotations": annotations}}).into(),
        }
    }

    #[test]
    fn only_true_deletes_and_other_values_are_errors() {
        assert_eq!(request(&manifest(None)), DeleteRequest::Absent);
        assert_eq!(request(&manifest(Some("true"))), DeleteRequest::Delete);
        assert_eq!(
            request(&manifest(Some("True"))),
            DeleteRequest::Invalid("True".into())
        );
        assert_eq!(
            invalid_message("yes"),
            "invalid delete annotation \"release.openshift.io/delete\" value: \"yes\""
        );
    }

    #[test]
    fn labels_follow_the_typed_and_generic_paths() {
        assert_eq!(
            resource_label("apps", "Deployment", Some("ns"), "d"),
            "deployment \"ns/d\""
        );
        assert_eq!(
            resource_label("", "Namespace", Some("x"), "x"),
            "namespace \"x\""
        );
        assert_eq!(
            resource_label("monitoring.coreos.com", "ServiceMonitor", Some("ns"), "s"),
            "ServiceMonitor \"ns/s\""
        );
        assert_eq!(
            not_found_message("configmap \"ns/a\""),
            "configmap \"ns/a\" not found. It either has already been removed or it has never been installed on this cluster."
        );
    }
}
