//! Core and RBAC kinds: ConfigMap, Namespace, Service, ServiceAccount, Role, RoleBinding,
//! ClusterRole, ClusterRoleBinding.

use serde_json::{Value, json};

use super::meta::ensure_object_meta;
use super::pod::ensure_ports;
use super::prim::{Merger, Obj, get, get_obj, get_str, obj_mut, sem_eq, with_list};

/// ConfigMap: metadata, then `data` and `binaryData` merged key by key (never removed).
pub(crate) fn config_map(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    m.merge_map(ex, req, "data");
    m.merge_map(ex, req, "binaryData");
}

/// Namespace: metadata only.
pub(crate) fn namespace(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
}

/// ServiceAccount: metadata and `automountServiceAccountToken`.
pub(crate) fn service_account(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    m.set_ptr(ex, req, "automountServiceAccountToken");
}

/// Service: metadata, ports by name, type (`""` is `ClusterIP`), and the selector, which is
/// written whenever an update goes out.
pub(crate) fn service(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    let rs = get_obj(req, "spec").cloned().unwrap_or_default();
    let es = obj_mut(ex, "spec");
    let rp = super::prim::get_list(&rs, "ports").to_vec();
    with_list(es, "ports", |el| {
        ensure_ports(m, el, &rp, |p| {
            if get_str(p, "protocol").is_empty() {
                p.insert("protocol".into(), json!("TCP"));
            }
            let target_unset = match get(p, "targetPort") {
                None => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                Some(_) => false,
            };
            if target_unset && let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        });
    });
    let rt = match get_str(&rs, "type") {
        "" => "ClusterIP",
        t => t,
    };
    let et = match get_str(es, "type") {
        "" => "ClusterIP",
        t => t,
    };
    if rt != et {
        es.insert("type".into(), json!(rt));
        m.modified = true;
    }
    if !sem_eq(get(es, "selector"), get(&rs, "selector")) {
        m.modified = true;
    }
    if m.modified {
        super::prim::put(es, "selector", get(&rs, "selector").cloned());
    }
}

/// Role: metadata, `rules` replaced whole.
pub(crate) fn role(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    m.replace(ex, req, "rules");
}

/// ClusterRole: metadata, `aggregationRule` replaced; `rules` replaced unless the manifest
/// aggregates.
pub(crate) fn cluster_role(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    m.replace(ex, req, "aggregationRule");
    if get(req, "aggregationRule").is_none() {
        m.replace(ex, req, "rules");
    }
}

/// RoleBinding and ClusterRoleBinding: metadata, `subjects` and `roleRef` (its `apiGroup`
/// defaulted) replaced whole.
pub(crate) fn binding(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    let mut req = req.clone();
    let rr = obj_mut(&mut req, "roleRef");
    if get_str(rr, "apiGroup").is_empty() {
        rr.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
    }
    m.replace(ex, &req, "subjects");
    m.replace(ex, &req, "roleRef");
}
