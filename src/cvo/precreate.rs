//! ClusterOperator precreation: the CVO creates each ClusterOperator of a graph node before
//! the node's tasks run, then copies the manifest's `status.relatedObjects` into the new
//! object's status, so must-gather finds the operator's objects before it reports.

use serde_json::{Value, json};

/// The status the CVO writes right after creating a ClusterOperator from its manifest: only
/// `relatedObjects`, each entry as the Go type encodes it. `None` when the manifest has none.
#[must_use]
pub fn related_objects_status(manifest_object: &Value) -> Option<Value> {
    let related = manifest_object
        .pointer("/status/relatedObjects")?
        .as_array()?;
    if related.is_empty() {
        return None;
    }
    let related: Vec<Value> = related.iter().map(go_object_reference).collect();
    Some(json!({"relatedObjects": related}))
}

/// One entry as the CVO sends it: decoded into the Go `ObjectReference` and encoded again, so
/// `group`, `resource` and `name` are always present (`""` when the manifest leaves them out:
/// the real CRD requires `name`), `namespace` only when set, and other keys dropped.
fn go_object_reference(entry: &Value) -> Value {
    let field = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut out = json!({"group": field("group"), "resource": field("resource")});
    if !field("namespace").is_empty() {
        out["namespace"] = json!(field("namespace"));
    }
    out["name"] = json!(field("name"));
    out
}

/// The object the CVO creates: the manifest without its `status`.
#[must_use]
pub fn created_object(manifest_object: &Value) -> Value {
    let mut o = manifest_object.clone();
    if let Some(map) = o.as_object_mut() {
        map.remove("status");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn related_objects_are_sent_as_the_go_struct_encodes_them() {
        let m = json!({"status": {"relatedObjects": [
            {"group": "machineconfiguration.openshift.io", "resource": "machineconfigpools"},
            {"resource": "pods", "namespace": "ns", "name": "p", "extra": 1}]}});
        assert_eq!(
            related_objects_status(&m).unwrap(),
            json!({"relatedObjects": [
                {"group": "machineconfiguration.openshift.io", "resource": "machineconfigpools", "name": ""},
                {"group": "", "resource": "pods", "namespace": "ns", "name": "p"}]})
        );
    }

    #[test]
    fn related_objects_are_copied_and_status_is_not_created() {
        let m = json!({"metadata": {"name": "dns"}, "status": {
            "versions": [{"name": "operator", "version": "4.2"}],
            "relatedObjects": [{"group": "", "resource": "namespaces", "name": "openshift-dns"}]}});
        assert_eq!(
            related_objects_status(&m).unwrap(),
            json!({"relatedObjects": [{"group": "", "resource": "namespaces", "name": "openshift-dns"}]})
        );
        assert!(created_object(&m).get("status").is_none());
        assert!(related_objects_status(&json!({"status": {"relatedObjects": []}})).is_none());
    }
}
