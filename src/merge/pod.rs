//! Pod templates: the pod spec, containers, volumes, tolerations and security contexts, as the
//! CVO's `ensurePodTemplateSpec` merges them.

use serde_json::{Value, json};

use super::MergeError;
use super::meta::ensure_object_meta;
use super::prim::{
    Merger, Obj, get, get_list, get_obj, get_str, obj_mut, put, resource_list_eq, sem_eq, with_list,
};

/// Pod spec fields the CVO never reconciles.
pub const POD_NEVER: &[&str] = &[
    "hostPID",
    "hostIPC",
    "imagePullSecrets",
    "hostname",
    "subdomain",
    "schedulerName",
    "dnsConfig",
    "hostAliases",
    "runtimeClassName",
    "topologySpreadConstraints",
    "overhead",
    "enableServiceLinks",
    "preemptionPolicy",
    "readinessGates",
    "setHostnameAsFQDN",
    "os",
    "ephemeralContainers",
    "activeDeadlineSeconds",
    "nodeName",
    "resourceClaims",
    "schedulingGates",
    "resources",
];

/// Container fields the CVO never reconciles.
pub const CONTAINER_NEVER: &[&str] = &[
    "startupProbe",
    "lifecycle",
    "imagePullPolicy",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "stdin",
    "stdinOnce",
    "tty",
    "volumeDevices",
    "resizePolicy",
    "restartPolicy",
];

/// `ensurePodTemplateSpec`: template metadata, then the pod spec.
pub(crate) fn ensure_pod_template(
    m: &mut Merger,
    ex: &mut Obj,
    req: &Obj,
    at: &str,
) -> Result<(), MergeError> {
    ensure_object_meta(m, ex, req);
    let empty = Obj::new();
    let rs = get_obj(req, "spec").unwrap_or(&empty);
    ensure_pod_spec(m, obj_mut(ex, "spec"), rs, &format!("{at}.spec"))
}

fn ensure_pod_spec(m: &mut Merger, ex: &mut Obj, req: &Obj, at: &str) -> Result<(), MergeError> {
    let host_network = req.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for key in ["initContainers", "containers"] {
        let rl = get_list(req, key);
        with_list(ex, key, |el| ensure_containers(m, el, rl, host_network));
    }
    ensure_volumes(m, ex, get_list(req, "volumes"), at)?;
    if !get_str(req, "restartPolicy").is_empty() {
        m.set_if_non_empty(ex, req, "restartPolicy");
    }
    m.set_ptr(ex, req, "automountServiceAccountToken");
    m.set_if_non_empty(ex, req, "serviceAccountName");
    m.set_scalar(ex, req, "hostNetwork");
    m.set_ptr(ex, req, "hostUsers");
    m.merge_map(ex, req, "nodeSelector");
    ensure_pod_security_context(m, ex, req);
    ensure_affinity(m, ex, req);
    ensure_tolerations(m, ex, get_list(req, "tolerations"));
    m.set_if_non_empty(ex, req, "priorityClassName");
    m.set_ptr(ex, req, "priority");
    m.set_ptr(ex, req, "shareProcessNamespace");
    let mut dns = req.clone();
    if get_str(&dns, "dnsPolicy").is_empty() {
        dns.insert("dnsPolicy".into(), json!("ClusterFirst"));
    }
    m.set_scalar(ex, &dns, "dnsPolicy");
    let mut grace = Obj::new();
    grace.insert(
        "terminationGracePeriodSeconds".into(),
        get(req, "terminationGracePeriodSeconds")
            .cloned()
            .unwrap_or(json!(30)),
    );
    m.set_ptr(ex, &grace, "terminationGracePeriodSeconds");
    Ok(())
}

fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or("")
}

/// `ensureContainers`: match by name from the last existing one down (unmatched ones are
/// removed), then append the missing required ones verbatim.
fn ensure_containers(m: &mut Merger, ex: &mut Vec<Value>, req: &[Value], host_network: bool) {
    for i in (0..ex.len()).rev() {
        let name = name_of(&ex[i]).to_owned();
        match req.iter().find(|r| name_of(r) == name) {
            Some(r) => {
                if let (Some(e), Some(r)) = (ex[i].as_object_mut(), r.as_object()) {
                    ensure_container(m, e, r, host_network);
                }
            }
            None => {
                ex.remove(i);
                m.modified = true;
            }
        }
    }
    for r in req {
        if !ex.iter().any(|e| name_of(e) == name_of(r)) {
            ex.push(r.clone());
            m.modified = true;
        }
    }
}

fn ensure_container(m: &mut Merger, ex: &mut Obj, req: &Obj, host_network: bool) {
    m.set_if_non_empty(ex, req, "name");
    m.set_if_non_empty(ex, req, "image");
    m.set_string_slice(ex, req, "command");
    m.set_string_slice(ex, req, "args");
    let mut env = req.clone();
    with_list(&mut env, "env", |list| {
        for e in list {
            if let Some(fr) = e
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
                && get_str(fr, "apiVersion").is_empty()
            {
                fr.insert("apiVersion".into(), json!("v1"));
            }
        }
    });
    m.replace(ex, &env, "env");
    m.replace(ex, req, "envFrom");
    m.set_if_non_empty(ex, req, "workingDir");
    let empty = Obj::new();
    let rr = get_obj(req, "resources").unwrap_or(&empty);
    for key in ["limits", "requests"] {
        let er = get_obj(ex, "resources").unwrap_or(&empty);
        if !resource_list_eq(get(er, key), get(rr, key)) {
            put(obj_mut(ex, "resources"), key, get(rr, key).cloned());
            m.modified = true;
        }
    }
    with_list(ex, "ports", |el| {
        ensure_ports(m, el, get_list(req, "ports"), |p| {
            default_container_port(p, host_network)
        });
    });
    ensure_volume_mounts(m, ex, get_list(req, "volumeMounts"));
    ensure_probe(m, ex, req, "livenessProbe");
    ensure_probe(m, ex, req, "readinessProbe");
    ensure_container_security_context(m, ex, req);
}

fn default_container_port(p: &mut Obj, host_network: bool) {
    if get_str(p, "protocol").is_empty() {
        p.insert("protocol".into(), json!("TCP"));
    }
    let host_port = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
    if host_network
        && host_port == 0
        && let Some(c) = p.get("containerPort").cloned()
    {
        p.insert("hostPort".into(), c);
    }
}

/// Ports keyed by name: the container algorithm; a matched port is replaced whole when it
/// differs from the defaulted required port. Several unnamed ports all match the first
/// unnamed required port.
pub(crate) fn ensure_ports(
    m: &mut Merger,
    ex: &mut Vec<Value>,
    req: &[Value],
    default: impl Fn(&mut Obj),
) {
    for i in (0..ex.len()).rev() {
        let name = name_of(&ex[i]).to_owned();
        match req.iter().find(|r| name_of(r) == name) {
            Some(r) => {
                let mut d = r.clone();
                if let Some(o) = d.as_object_mut() {
                    default(o);
                }
                if !sem_eq(Some(&ex[i]), Some(&d)) {
                    ex[i] = d;
                    m.modified = true;
                }
            }
            None => {
                ex.remove(i);
                m.modified = true;
            }
        }
    }
    for r in req {
        if !ex.iter().any(|e| name_of(e) == name_of(r)) {
            ex.push(r.clone());
            m.modified = true;
        }
    }
}

fn ensure_volume_mounts(m: &mut Merger, ex: &mut Obj, req: &[Value]) {
    let path = |v: &Value| {
        v.get("mountPath")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    with_list(ex, "volumeMounts", |el| sync_keyed(m, el, req, path));
}

/// Makes list `el` hold exactly the `req` entries, matched by `key`: a differing entry is
/// replaced, a missing one appended, one `req` lacks removed (the CVO's rule for volumes and
/// volume mounts).
fn sync_keyed<K: PartialEq>(
    m: &mut Merger,
    el: &mut Vec<Value>,
    req: &[Value],
    key: impl Fn(&Value) -> K,
) {
    for r in req {
        match el.iter_mut().find(|e| key(e) == key(r)) {
            Some(e) if sem_eq(Some(e), Some(r)) => {}
            Some(e) => {
                *e = r.clone();
                m.modified = true;
            }
            None => {
                el.push(r.clone());
                m.modified = true;
            }
        }
    }
    let before = el.len();
    el.retain(|e| req.iter().any(|r| key(r) == key(e)));
    if el.len() != before {
        m.modified = true;
    }
}

fn ensure_probe(m: &mut Merger, ex: &mut Obj, req: &Obj, key: &str) {
    let (Some(e), Some(r)) = (get(ex, key), get(req, key)) else {
        m.set_ptr(ex, req, key);
        return;
    };
    let (Some(_), Some(r)) = (e.as_object(), r.as_object()) else {
        return;
    };
    let mut r = r.clone();
    for (k, d) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if r.get(k).and_then(Value::as_i64).unwrap_or(0) == 0 {
            r.insert(k.into(), json!(d));
        }
    }
    if let Some(h) = r.get_mut("httpGet").and_then(Value::as_object_mut)
        && get_str(h, "scheme").is_empty()
    {
        h.insert("scheme".into(), json!("HTTP"));
    }
    let e = obj_mut(ex, key);
    for k in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        m.set_scalar(e, &r, k);
    }
    for h in ["exec", "httpGet", "tcpSocket", "grpc"] {
        m.replace(e, &r, h);
    }
}

/// The pointer rule on a nested struct: `Some` when both sides are set and `merge_both` must
/// run; otherwise copies required over (clearing) and returns `None`.
fn ptr_rule<'a>(m: &mut Merger, ex: &'a mut Obj, req: &Obj, key: &str) -> Option<&'a mut Obj> {
    match (get(ex, key), get(req, key)) {
        (None, None) => None,
        (Some(_), Some(_)) => Some(obj_mut(ex, key)),
        (_, r) => {
            put(ex, key, r.cloned());
            m.modified = true;
            None
        }
    }
}

fn ensure_se_linux(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    if let Some(e) = ptr_rule(m, ex, req, "seLinuxOptions") {
        let r = get_obj(req, "seLinuxOptions").expect("checked by ptr_rule");
        for k in ["user", "role", "type", "level"] {
            m.set_if_non_empty(e, r, k);
        }
    }
}

fn union_in(m: &mut Merger, ex: &mut Obj, req: &Obj, key: &str) {
    let r = get_list(req, key).to_vec();
    with_list(ex, key, |el| {
        for v in r {
            if !el.contains(&v) {
                el.push(v);
                m.modified = true;
            }
        }
    });
}

fn ensure_container_security_context(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    let Some(e) = ptr_rule(m, ex, req, "securityContext") else {
        return;
    };
    let r = get_obj(req, "securityContext").expect("checked by ptr_rule");
    if let Some(c) = ptr_rule(m, e, r, "capabilities") {
        let rc = get_obj(r, "capabilities").expect("checked by ptr_rule");
        union_in(m, c, rc, "add");
        union_in(m, c, rc, "drop");
    }
    ensure_se_linux(m, e, r);
    for k in [
        "privileged",
        "runAsUser",
        "runAsNonRoot",
        "readOnlyRootFilesystem",
        "allowPrivilegeEscalation",
    ] {
        m.set_ptr(e, r, k);
    }
    m.replace(e, r, "seccompProfile");
}

fn ensure_pod_security_context(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    if get(req, "securityContext").is_none() && sem_eq(get(ex, "securityContext"), None) {
        return;
    }
    let Some(e) = ptr_rule(m, ex, req, "securityContext") else {
        return;
    };
    let r = get_obj(req, "securityContext").expect("checked by ptr_rule");
    ensure_se_linux(m, e, r);
    for k in ["runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup"] {
        m.set_ptr(e, r, k);
    }
    m.replace(e, r, "seccompProfile");
    union_in(m, e, r, "supplementalGroups");
    let sysctls = get_list(r, "sysctls").to_vec();
    with_list(e, "sysctls", |el| {
        for s in sysctls {
            match el.iter_mut().find(|x| name_of(x) == name_of(&s)) {
                Some(x) if x.get("value") == s.get("value") => {}
                Some(x) => {
                    x["value"] = s.get("value").cloned().unwrap_or(Value::Null);
                    m.modified = true;
                }
                None => {
                    el.push(s);
                    m.modified = true;
                }
            }
        }
    });
}

fn ensure_affinity(m: &mut Merger, ex: &mut Obj, req: &Obj) {
    let Some(r) = get_obj(req, "affinity") else {
        return;
    };
    if get(ex, "affinity").is_none() {
        ex.insert("affinity".into(), Value::Object(r.clone()));
        m.modified = true;
        return;
    }
    let e = obj_mut(ex, "affinity");
    for k in ["nodeAffinity", "podAffinity", "podAntiAffinity"] {
        m.replace(e, r, k);
    }
}

fn ensure_tolerations(m: &mut Merger, ex: &mut Obj, req: &[Value]) {
    with_list(ex, "tolerations", |el| {
        for r in req {
            let mut found = false;
            let mut i = 0;
            while i < el.len() {
                if sem_eq(Some(&el[i]), Some(r)) {
                    if found {
                        el.remove(i);
                        m.modified = true;
                        continue;
                    }
                    found = true;
                }
                i += 1;
            }
            if !found {
                el.push(r.clone());
                m.modified = true;
            }
        }
    });
}

const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// `ensureVolumeSourceDefaults` on a required volume. A projected volume without
/// `defaultMode` whose sources are not all service-account tokens crashes the CVO; here it is
/// an error.
fn default_volume(v: &mut Obj, at: &str) -> Result<(), MergeError> {
    if !VOLUME_SOURCES.iter().any(|s| get(v, s).is_some()) {
        v.insert("emptyDir".into(), json!({}));
    }
    let set = |v: &mut Obj, src: &str, key: &str, d: Value| {
        if let Some(s) = v.get_mut(src).and_then(Value::as_object_mut)
            && get(s, key).is_none()
        {
            s.insert(key.into(), d);
        }
    };
    for src in ["secret", "configMap", "downwardAPI"] {
        set(v, src, "defaultMode", json!(420));
    }
    if let Some(p) = v.get_mut("projected").and_then(Value::as_object_mut)
        && get(p, "defaultMode").is_none()
    {
        p.insert("defaultMode".into(), json!(420));
        if let Some(sources) = p.get_mut("sources").and_then(Value::as_array_mut) {
            for (i, s) in sources.iter_mut().enumerate() {
                match s
                    .get_mut("serviceAccountToken")
                    .and_then(Value::as_object_mut)
                {
                    Some(t) => {
                        if get(t, "expirationSeconds").is_none() {
                            t.insert("expirationSeconds".into(), json!(3600));
                        }
                    }
                    None => {
                        return Err(MergeError::ProjectedVolumeWithoutDefaultMode {
                            object: String::new(),
                            path: format!(
                                "{at}.volumes[{}].projected.sources[{i}]",
                                name_of_obj(v)
                            ),
                        });
                    }
                }
            }
        }
    }
    set(v, "iscsi", "iscsiInterface", json!("default"));
    for (k, d) in [
        ("pool", "rbd"),
        ("user", "admin"),
        ("keyring", "/etc/ceph/keyring"),
    ] {
        set(v, "rbd", k, json!(d));
    }
    for (k, d) in [
        ("cachingMode", json!("ReadWrite")),
        ("kind", json!("Shared")),
        ("fsType", json!("ext4")),
        ("readOnly", json!(false)),
    ] {
        set(v, "azureDisk", k, d);
    }
    for (k, d) in [("storageMode", "ThinProvisioned"), ("fsType", "xfs")] {
        set(v, "scaleIO", k, json!(d));
    }
    Ok(())
}

fn name_of_obj(v: &Obj) -> &str {
    get_str(v, "name")
}

fn ensure_volumes(m: &mut Merger, ex: &mut Obj, req: &[Value], at: &str) -> Result<(), MergeError> {
    let mut defaulted = Vec::with_capacity(req.len());
    for r in req {
        let mut d = r.as_object().cloned().unwrap_or_default();
        default_volume(&mut d, at)?;
        defaulted.push(Value::Object(d));
    }
    with_list(ex, "volumes", |el| {
        sync_keyed(m, el, &defaulted, |v| name_of(v).to_owned());
    });
    Ok(())
}
