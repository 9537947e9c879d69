//! The generic rule for every kind without a typed merge (`applyUnstructured`).

use serde_json::Value;

use super::prim::{Obj, obj_mut, put};

/// Top-level keys the generic rule never compares.
pub const META_KEYS: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// Whether any top-level key other than `apiVersion`, `kind`, `metadata` and `status` differs
/// exactly (a key on one side only, `null` against empty and `1` against `1.0` all differ).
pub(crate) fn differs(ex: &Obj, req: &Obj) -> bool {
    ex.keys()
        .chain(req.keys())
        .filter(|k| !META_KEYS.contains(&k.as_str()))
        .any(|k| ex.get(k) != req.get(k))
}

/// The object the generic rule writes: live, with every non-metadata top-level key of the
/// manifest copied in and labels, annotations and owner references replaced by the
/// manifest's. `None` when only metadata (or nothing) differs.
pub(crate) fn merge(ex: &Obj, req: &Obj) -> Option<Obj> {
    if !differs(ex, req) {
        return None;
    }
    let mut out = ex.clone();
    for (k, v) in req {
        if !META_KEYS.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    let rm = req.get("metadata").and_then(Value::as_object);
    let om = obj_mut(&mut out, "metadata");
    for k in ["annotations", "labels", "ownerReferences"] {
        put(om, k, rm.and_then(|m| m.get(k)).cloned());
    }
    Some(out)
}
