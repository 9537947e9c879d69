//! Extension and OpenShift kinds: CustomResourceDefinition, ValidatingWebhookConfiguration,
//! ImageStream, SecurityContextConstraints and OperatorGroup.

use serde_json::{Value, json};

use super::meta::{annotation, ensure_object_meta};
use super::prim::{Merger, Obj, get, get_list, get_obj, get_str, obj_mut, sem_eq, with_list};

/// The annotation that makes service-ca inject a CA bundle.
pub const INJECT_CABUNDLE: &str = "service.beta.openshift.io/inject-cabundle";

/// CRD: metadata; the decode-time defaults; the live conversion webhook `caBundle` kept when
/// the CA bundle is injected; then the whole `spec` replaced when it differs.
pub(crate) fn crd(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    let mut rs = get_obj(req, "spec").cloned().unwrap_or_default();
    let names = obj_mut(&mut rs, "names");
    let kind = get_str(names, "kind").to_owned();
    if get_str(names, "singular").is_empty() {
        names.insert("singular".into(), json!(kind.to_lowercase()));
    }
    if get_str(names, "listKind").is_empty() {
        names.insert("listKind".into(), json!(format!("{kind}List")));
    }
    if get(&rs, "conversion").is_none() {
        rs.insert("conversion".into(), json!({"strategy": "None"}));
    }
    if let Some(svc) = rs
        .get_mut("conversion")
        .and_then(|c| c.pointer_mut("/webhook/clientConfig/service"))
        .and_then(Value::as_object_mut)
        && get(svc, "port").is_none()
    {
        svc.insert("port".into(), json!(443));
    }
    let live_ca = ex
        .get("spec")
        .and_then(|s| s.pointer("/conversion/webhook/clientConfig"))
        .filter(|v| !v.is_null())
        .map(|c| c.get("caBundle").cloned());
    if annotation(ex, INJECT_CABUNDLE) == "true"
        && rs.get("conversion").and_then(|c| c.get("strategy")) == Some(&json!("Webhook"))
        && let Some(live_ca) = live_ca
        && let Some(cc) = rs
            .get_mut("conversion")
            .and_then(|c| c.pointer_mut("/webhook/clientConfig"))
            .and_then(Value::as_object_mut)
    {
        super::prim::put(cc, "caBundle", live_ca);
    }
    let mut r = Obj::new();
    r.insert("spec".into(), Value::Object(rs));
    m.replace(ex, &r, "spec");
}

/// ValidatingWebhookConfiguration: metadata, per-webhook defaults, the first live webhook's
/// `caBundle` copied into every webhook when injected, the whole `webhooks` list replaced.
pub(crate) fn validating_webhook(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    let mut req = req.clone();
    let ca = if annotation(ex, INJECT_CABUNDLE) == "true" {
        get_list(ex, "webhooks")
            .first()
            .map(|w| w.pointer("/clientConfig/caBundle").cloned())
    } else {
        None
    };
    with_list(&mut req, "webhooks", |list| {
        for w in list.iter_mut().filter_map(Value::as_object_mut) {
            for (k, d) in [
                ("failurePolicy", json!("Fail")),
                ("matchPolicy", json!("Equivalent")),
                ("namespaceSelector", json!({})),
                ("objectSelector", json!({})),
                ("timeoutSeconds", json!(10)),
            ] {
                if get(w, k).is_none() {
                    w.insert(k.into(), d);
                }
            }
            with_list(w, "rules", |rules| {
                for r in rules.iter_mut().filter_map(Value::as_object_mut) {
                    if get(r, "scope").is_none() {
                        r.insert("scope".into(), json!("*"));
                    }
                }
            });
            if let Some(ca) = &ca {
                super::prim::put(obj_mut(w, "clientConfig"), "caBundle", ca.clone());
            }
        }
    });
    m.replace(ex, &req, "webhooks");
}

/// ImageStream: metadata, `lookupPolicy`, tags keyed by name (only `from` and `importPolicy`
/// of a matched tag are reconciled; live-only tags kept).
pub(crate) fn image_stream(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    let rs = get_obj(req, "spec").cloned().unwrap_or_default();
    let es = obj_mut(ex, "spec");
    m.replace(es, &rs, "lookupPolicy");
    let tags = get_list(&rs, "tags").to_vec();
    with_list(es, "tags", |el| {
        for t in tags {
            let name = t.get("name").cloned();
            match el
                .iter_mut()
                .find(|e| e.get("name") == name.as_ref())
                .and_then(Value::as_object_mut)
            {
                None => {
                    el.push(t);
                    m.modified = true;
                }
                Some(e) => {
                    let mut d = t.as_object().cloned().unwrap_or_default();
                    let ip = obj_mut(&mut d, "importPolicy");
                    if get_str(ip, "importMode").is_empty() {
                        ip.insert("importMode".into(), json!("Legacy"));
                    }
                    let rp = obj_mut(&mut d, "referencePolicy");
                    if get_str(rp, "type").is_empty() {
                        rp.insert("type".into(), json!("Source"));
                    }
                    m.replace(e, &d, "importPolicy");
                    m.replace(e, &d, "from");
                }
            }
        }
    });
}

/// SecurityContextConstraints (top-level fields, no `spec`).
pub(crate) fn scc(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    m.set_ptr(ex, req, "priority");
    for k in [
        "allowPrivilegedContainer",
        "allowHostDirVolumePlugin",
        "allowHostNetwork",
        "allowHostPorts",
        "allowHostPID",
        "allowHostIPC",
        "readOnlyRootFilesystem",
    ] {
        m.set_scalar(ex, req, k);
    }
    m.set_ptr(ex, req, "defaultAllowPrivilegeEscalation");
    let mut r = req.clone();
    if get(&r, "allowPrivilegeEscalation").is_none() {
        r.insert("allowPrivilegeEscalation".into(), json!(true));
    }
    m.set_ptr(ex, &r, "allowPrivilegeEscalation");
    for k in [
        "defaultAddCapabilities",
        "requiredDropCapabilities",
        "allowedCapabilities",
        "volumes",
        "allowedFlexVolumes",
        "seLinuxContext",
        "runAsUser",
        "fsGroup",
        "supplementalGroups",
        "users",
        "groups",
        "seccompProfiles",
        "allowedUnsafeSysctls",
        "forbiddenSysctls",
    ] {
        m.replace(ex, req, k);
    }
}

/// OperatorGroup: metadata, selector (as Deployment), targetNamespaces, serviceAccountName,
/// staticProvidedAPIs, upgradeStrategy (`""` is `Default`).
pub(crate) fn operator_group(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    ensure_object_meta(m, ex, req);
    let mut rs = get_obj(req, "spec").cloned().unwrap_or_default();
    let es = obj_mut(ex, "spec");
    if get(es, "selector").is_none() && get(&rs, "selector").is_some() {
        es.insert("selector".into(), rs["selector"].clone());
        m.modified = true;
    }
    m.replace(es, &rs, "selector");
    m.set_string_slice(es, &rs, "targetNamespaces");
    m.set_if_non_empty(es, &rs, "serviceAccountName");
    m.set_scalar(es, &rs, "staticProvidedAPIs");
    // On the wire the strategy is its name, a string (OLM's type marshals to its name; the
    // CRD's schema is `type: string`), and `""` means `Default`.
    if get_str(&rs, "upgradeStrategy").is_empty() {
        rs.insert("upgradeStrategy".into(), json!("Default"));
    }
    if !sem_eq(get(es, "upgradeStrategy"), get(&rs, "upgradeStrategy")) {
        es.insert("upgradeStrategy".into(), rs["upgradeStrategy"].clone());
        m.modified = true;
    }
}
