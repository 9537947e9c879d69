//! ClusterOperator precreation: the CVO creates each ClusterOperator of a graph node before
//! the node's tasks run, then copies the manifest's `status.relatedObjects` into the new
//! object's status, so must-gather finds the operator's objects before it reports.

use serde_json::{Value, json};

/// The status the CVO writes right after creating a ClusterOperator from its manifest: only
/// `relatedObjects`, copied as written. `None` when the manifest has none.
#[must_use]
pub fn related_objects_status(manifest_object: &Value) -> Option<Value> {
    let related = manifest_object.pointer("/status/relatedObjects")?;
    if related.as_array().is_none_or(Vec::is_empty) {
        return None;
    }
    Some(json!({"relatedObjects": related}))
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
