//! What is sent for a manifest, and how a result is compared with the live object.
//!
//! The body of a server-side apply (and of a create) is the manifest without `status` (status
//! is never applied; a ClusterOperator's `status.versions` is only the target of its wait)
//! and without the metadata the server owns. The namespace follows discovery: dropped for
//! cluster-scoped kinds, the context's default namespace for namespaced objects that name
//! none (as kubectl does).

use serde_json::{Map, Value};

/// Metadata fields owned by the API server: never sent, and left out of every comparison of
/// a manifest with a live object (dry-run apply, `diff`).
pub const SERVER_OWNED_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// `object` without `status` and the metadata of [`SERVER_OWNED_METADATA`]: the one
/// normalisation behind what is sent ([`request_body`]) and what is compared (dry-run apply's
/// [`changed_paths`], `diff`).
#[must_use]
pub fn without_server_owned(object: &Value) -> Value {
    let mut v = object.clone();
    strip_server_owned(&mut v);
    v
}

fn strip_server_owned(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in SERVER_OWNED_METADATA {
                meta.remove(*k);
            }
        }
    }
}

/// The body to send for `object`. `namespace` is the namespace to use (`None` for a
/// cluster-scoped kind).
#[must_use]
pub fn request_body(object: &Value, namespace: Option<&str>) -> Value {
    let mut body = without_server_owned(object);
    if let Some(map) = body.as_object_mut() {
        typed_zero_values(map);
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            match namespace {
                Some(ns) => {
                    meta.insert("namespace".into(), Value::String(ns.to_string()));
                }
                None => {
                    meta.remove("namespace");
                }
            }
        }
    }
    body
}

/// Fields the CVO's typed Go clients always send, because openshift/api declares them
/// without `omitempty`: a manifest that leaves them out still reaches the API server with
/// them (`null` slices and pointers, `false` booleans, an empty `spec`). The CRDs of those
/// kinds list the fields as required (and nullable), so a manifest sent as written would be
/// rejected ("spec: Required value", "priority: Required value").
const TYPED_FIELDS: &[TypedFields] = &[
    // ClusterOperatorSpec has no omitempty: precreation sends `spec: {}`.
    (
        "config.openshift.io",
        "ClusterOperator",
        &[("spec", Zero::Object)],
    ),
    (
        "security.openshift.io",
        "SecurityContextConstraints",
        &[
            ("priority", Zero::Null),
            ("allowPrivilegedContainer", Zero::False),
            ("defaultAddCapabilities", Zero::Null),
            ("requiredDropCapabilities", Zero::Null),
            ("allowedCapabilities", Zero::Null),
            ("allowHostDirVolumePlugin", Zero::False),
            ("volumes", Zero::Null),
            ("allowHostNetwork", Zero::False),
            ("allowHostPorts", Zero::False),
            ("allowHostPID", Zero::False),
            ("allowHostIPC", Zero::False),
            ("readOnlyRootFilesystem", Zero::False),
            ("users", Zero::Null),
            ("groups", Zero::Null),
        ],
    ),
];

/// `(group, kind, fields with their zero values)`.
type TypedFields = (&'static str, &'static str, &'static [(&'static str, Zero)]);

/// The zero value a Go client sends for a field.
#[derive(Debug, Clone, Copy)]
enum Zero {
    /// A nil slice or pointer.
    Null,
    /// A `false` bool.
    False,
    /// An empty struct.
    Object,
}

/// Adds the [`TYPED_FIELDS`] a manifest leaves out.
fn typed_zero_values(map: &mut Map<String, Value>) {
    let group = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|a| a.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    let Some((_, _, fields)) = TYPED_FIELDS
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
    else {
        return;
    };
    for (field, zero) in *fields {
        map.entry(*field).or_insert_with(|| match zero {
            Zero::Null => Value::Null,
            Zero::Object => Value::Object(Map::new()),
            Zero::False => Value::Bool(false),
        });
    }
}

/// The `resourceVersion` of an object.
#[must_use]
pub fn resource_version(object: &Value) -> Option<&str> {
    object.pointer("/metadata/resourceVersion")?.as_str()
}

/// The `uid` of an object.
#[must_use]
pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid")?.as_str()
}

/// The time of the `Apply` managed-fields entry of `manager` (RFC 3339, second precision).
#[must_use]
pub fn applied_at<'a>(object: &'a Value, manager: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|e| {
            e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
                && e.get("subresource")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
        })?
        .get("time")?
        .as_str()
}

/// Paths (`spec.replicas`, `data.key`, `metadata.labels.app`) where `after` differs from
/// `before`, both [`without_server_owned`]. Lists are compared whole. At most `limit` paths
/// are returned.
#[must_use]
pub fn changed_paths(before: &Value, after: &Value, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    diff(
        &without_server_owned(before),
        &without_server_owned(after),
        "",
        &mut out,
        limit,
    );
    out
}

fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>, limit: usize) {
    if out.len() >= limit || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &p,
                    out,
                    limit,
                );
            }
        }
        _ => out.push(if path.is_empty() {
            ".".into()
        } else {
            path.into()
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn typed_clients_send_fields_without_omitempty() {
        let co = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "dns"}, "status": {"versions": []}});
        let b = request_body(&co, None);
        assert_eq!(b["spec"], json!({}));
        assert!(b.get("status").is_none());
        let scc = json!({"apiVersion": "security.openshift.io/v1",
            "kind": "SecurityContextConstraints", "metadata": {"name": "x"},
            "allowHostNetwork": true, "volumes": ["hostPath"]});
        let b = request_body(&scc, None);
        assert_eq!(b["allowHostNetwork"], true);
        assert_eq!(b["volumes"], json!(["hostPath"]));
        assert_eq!(b["priority"], Value::Null);
        assert_eq!(b["allowHostPID"], false);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        assert!(request_body(&cm, Some("ns")).get("spec").is_none());
    }

    #[test]
    fn status_and_server_metadata_are_dropped() {
        let m = json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "x", "namespace": "ignored", "resourceVersion": "5", "uid": "u",
                "annotations": {"a": "b"}},
            "spec": {},
            "status": {"versions": [{"name": "operator", "version": "1"}]},
        });
        let b = request_body(&m, None);
        assert_eq!(
            b,
            json!({
                "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
                "metadata": {"name": "x", "annotations": {"a": "b"}},
                "spec": {},
            })
        );
    }

    #[test]
    fn namespaced_objects_get_their_namespace() {
        let m = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        assert_eq!(
            request_body(&m, Some("default"))["metadata"]["namespace"],
            "default"
        );
    }

    #[test]
    fn applied_at_finds_the_apply_entry_of_the_manager() {
        let o = json!({"metadata": {"managedFields": [
            {"manager": "minicvo", "operation": "Update", "time": "2020-01-01T00:00:00Z"},
            {"manager": "minicvo", "operation": "Apply", "subresource": "status", "time": "2021-01-01T00:00:00Z"},
            {"manager": "minicvo", "operation": "Apply", "time": "2022-01-01T00:00:00Z"},
        ]}});
        assert_eq!(applied_at(&o, "minicvo"), Some("2022-01-01T00:00:00Z"));
        assert_eq!(applied_at(&o, "kubectl"), None);
    }

    #[test]
    fn changed_paths_name_the_fields() {
        let before = json!({"metadata": {"name": "x", "resourceVersion": "1", "labels": {"a": "1"}},
            "data": {"k": "v", "gone": "1"}, "status": {"x": 1}});
        let after = json!({"metadata": {"name": "x", "resourceVersion": "2", "labels": {"a": "2"}},
            "data": {"k": "v", "new": "1"}, "status": {"x": 2}});
        assert_eq!(
            changed_paths(&before, &after, 10),
            vec!["data.gone", "data.new", "metadata.labels.a"]
        );
        assert_eq!(changed_paths(&before, &after, 1).len(), 1);
        assert!(changed_paths(&before, &before, 10).is_empty());
    }
}
