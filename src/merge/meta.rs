//! ObjectMeta merge and the ClusterVersion owner reference.

use serde_json::{Value, json};

use super::prim::{Merger, Obj, get_list, get_obj, get_str, obj_mut, sem_eq, with_list};
use crate::manifest::CREATE_ONLY_ANNOTATION;

/// The ClusterVersion every payload object is owned by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterVersionRef {
    /// Its name (`version`).
    pub name: String,
    /// Its UID.
    pub uid: String,
}

/// The CVO's owner-reference modifier, run on the required object before anything else:
/// owner references of other kinds in the manifest win (ClusterVersion ones are dropped);
/// otherwise exactly one reference to the ClusterVersion, `controller: true` unless the
/// create-only annotation is exactly `"true"`.
pub(crate) fn set_owner_reference(required: &mut Obj, cv: &ClusterVersionRef) {
    let meta = obj_mut(required, "metadata");
    let others: Vec<Value> = get_list(meta, "ownerReferences")
        .iter()
        .filter(|r| r.get("kind").and_then(Value::as_str) != Some("ClusterVersion"))
        .cloned()
        .collect();
    if !others.is_empty() {
        meta.insert("ownerReferences".into(), Value::Array(others));
        return;
    }
    let create_only = get_obj(meta, "annotations")
        .and_then(|a| a.get(CREATE_ONLY_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true");
    let mut r = json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "ClusterVersion",
        "name": cv.name,
        "uid": cv.uid,
    });
    if !create_only {
        r["controller"] = Value::Bool(true);
    }
    meta.insert("ownerReferences".into(), Value::Array(vec![r]));
}

/// `EnsureObjectMeta`: namespace and name set if non-empty, labels and annotations merged
/// (never removed), owner references merged by UID (live-only ones kept).
pub(crate) fn ensure_object_meta(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    let empty = Obj::new();
    let rm = get_obj(req, "metadata").unwrap_or(&empty);
    if rm.is_empty() && !ex.contains_key("metadata") {
        return;
    }
    let em = obj_mut(ex, "metadata");
    m.set_if_non_empty(em, rm, "namespace");
    m.set_if_non_empty(em, rm, "name");
    m.merge_map(em, rm, "labels");
    m.merge_map(em, rm, "annotations");
    let refs = get_list(rm, "ownerReferences");
    if refs.is_empty() {
        return;
    }
    with_list(em, "ownerReferences", |list| {
        for r in refs {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
            match list
                .iter_mut()
                .find(|e| e.get("uid").and_then(Value::as_str).unwrap_or("") == uid)
            {
                Some(e) if sem_eq(Some(e), Some(r)) => {}
                Some(e) => {
                    *e = r.clone();
                    m.modified = true;
                }
                None => {
                    list.push(r.clone());
                    m.modified = true;
                }
            }
        }
    });
}

/// An annotation of an object, `""` when absent.
pub(crate) fn annotation<'a>(o: &'a Obj, key: &str) -> &'a str {
    get_obj(o, "metadata")
        .and_then(|m| get_obj(m, "annotations"))
        .map_or("", |a| get_str(a, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Obj {
        v.as_object().cloned().unwrap()
    }

    fn cv() -> ClusterVersionRef {
        ClusterVersionRef {
            name: "version".into(),
            uid: "u1".into(),
        }
    }

    #[test]
    fn owner_reference_is_the_cluster_version_unless_the_manifest_names_another_owner() {
        let mut r = obj(json!({"metadata": {"name": "a"}}));
        set_owner_reference(&mut r, &cv());
        assert_eq!(
            r["metadata"]["ownerReferences"],
            json!([{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                    "name": "version", "uid": "u1", "controller": true}])
        );
        let mut r = obj(json!({"metadata": {"name": "a", "ownerReferences": [
            {"kind": "ClusterVersion", "uid": "x"}, {"kind": "Foo", "uid": "f"}]}}));
        set_owner_reference(&mut r, &cv());
        assert_eq!(
            r["metadata"]["ownerReferences"],
            json!([{"kind": "Foo", "uid": "f"}])
        );
    }

    #[test]
    fn create_only_owner_reference_is_not_controller_only_for_exact_lower_case_true() {
        for (value, controller) in [("true", None), ("True", Some(true))] {
            let mut r = obj(json!({"metadata": {"annotations": {CREATE_ONLY_ANNOTATION: value}}}));
            set_owner_reference(&mut r, &cv());
            assert_eq!(
                r["metadata"]["ownerReferences"][0]
                    .get("controller")
                    .and_then(Value::as_bool),
                controller
            );
        }
    }

    #[test]
    fn object_meta_merge_never_removes_and_merges_owner_references_by_uid() {
        let mut m = Merger::default();
        let mut ex = obj(json!({"metadata": {"name": "a", "labels": {"old": "1"},
            "ownerReferences": [{"uid": "other", "kind": "X"}]}}));
        let req = obj(json!({"metadata": {"name": "a", "labels": {"new": "2"},
            "ownerReferences": [{"uid": "u1", "kind": "ClusterVersion"}]}}));
        ensure_object_meta(&mut m, &mut ex, &req);
        assert!(m.modified);
        assert_eq!(ex["metadata"]["labels"], json!({"old": "1", "new": "2"}));
        assert_eq!(
            ex["metadata"]["ownerReferences"],
            json!([{"uid": "other", "kind": "X"}, {"uid": "u1", "kind": "ClusterVersion"}])
        );
        let mut m = Merger::default();
        ensure_object_meta(&mut m, &mut ex, &req);
        assert!(!m.modified);
    }
}
