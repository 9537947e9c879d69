//! The CVO's pre-merge mutations that also make sense off OpenShift: proxy variables injected
//! into Deployments and DaemonSets, and the API server's TLS profile injected into operator
//! configuration held in ConfigMaps. Each one reads a cluster config object, passed in by the
//! caller; without it the mutation does not run (see [`super::ClusterConfig`]).

use serde_json::{Value, json};

use super::MergeError;
use super::meta::annotation;
use super::prim::{Obj, get_obj, get_str, obj_mut, with_list};

/// Annotation naming the containers that get the proxy variables.
pub const INJECT_PROXY: &str = "config.openshift.io/inject-proxy";
/// Annotation asking for the TLS profile in a ConfigMap.
pub const INJECT_TLS: &str = "config.openshift.io/inject-tls";

/// A cluster config object that a manifest's pre-merge mutation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigRead {
    /// `proxies.config.openshift.io/cluster`, for an `inject-proxy` Deployment or DaemonSet.
    Proxy,
    /// `apiservers.config.openshift.io/cluster`, for an `inject-tls` ConfigMap.
    ApiServer,
}

/// The cluster config object the CVO reads to prepare `manifest`, if any: the proxy for a
/// typed Deployment or DaemonSet with a non-empty `inject-proxy` annotation, the API server
/// for a typed ConfigMap whose `inject-tls` is exactly `"true"`.
#[must_use]
pub fn reads(manifest: &Value) -> Option<ConfigRead> {
    let o = manifest.as_object()?;
    match super::typed_of(o)? {
        super::TypedKind::Deployment | super::TypedKind::DaemonSet
            if !annotation(o, INJECT_PROXY).is_empty() =>
        {
            Some(ConfigRead::Proxy)
        }
        super::TypedKind::ConfigMap if annotation(o, INJECT_TLS) == "true" => {
            Some(ConfigRead::ApiServer)
        }
        _ => None,
    }
}

/// Appends `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` (from the Proxy's `status`) to the `env`
/// of every container and init container named in the `inject-proxy` annotation.
pub(crate) fn inject_proxy(req: &mut Obj, proxy: Option<&Value>) -> Result<(), MergeError> {
    let names = annotation(req, INJECT_PROXY).to_owned();
    if names.is_empty() {
        return Ok(());
    }
    let Some(status) = proxy
        .and_then(|p| p.get("status"))
        .and_then(Value::as_object)
    else {
        return Ok(());
    };
    let vals: Vec<(&str, String)> = [
        ("HTTP_PROXY", "httpProxy"),
        ("HTTPS_PROXY", "httpsProxy"),
        ("NO_PROXY", "noProxy"),
    ]
    .into_iter()
    .map(|(n, k)| (n, get_str(status, k).to_owned()))
    .collect();
    if vals.iter().all(|(_, v)| v.is_empty()) {
        return Ok(());
    }
    let pod = obj_mut(obj_mut(obj_mut(req, "spec"), "template"), "spec");
    for name in names.split(',') {
        let mut found = false;
        for key in ["containers", "initContainers"] {
            with_list(pod, key, |list| {
                for c in list.iter_mut().filter_map(Value::as_object_mut) {
                    if get_str(c, "name") == name {
                        found = true;
                        with_list(c, "env", |env| {
                            for (n, v) in &vals {
                                env.push(json!({"name": n, "value": v}));
                            }
                        });
                    }
                }
            });
        }
        if !found {
            return Err(MergeError::ProxyContainerMissing {
                object: String::new(),
                container: name.to_owned(),
            });
        }
    }
    Ok(())
}

/// The OpenSSL cipher names and minimum version of a TLS profile type.
fn profile(kind: &str) -> (&'static [&'static str], &'static str) {
    const TLS13: [&str; 3] = [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ];
    const INTERMEDIATE: [&str; 9] = [
        TLS13[0],
        TLS13[1],
        TLS13[2],
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
    ];
    const OLD: [&str; 19] = [
        TLS13[0],
        TLS13[1],
        TLS13[2],
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-SHA256",
        "ECDHE-RSA-AES128-SHA256",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "AES128-GCM-SHA256",
        "AES256-GCM-SHA384",
        "AES128-SHA256",
        "DES-CBC3-SHA",
    ];
    match kind {
        "Modern" => (&TLS13, "VersionTLS13"),
        "Old" => (&OLD, "VersionTLS10"),
        _ => (&INTERMEDIATE, "VersionTLS12"),
    }
}

/// The IANA name of an OpenSSL cipher name, `None` for names without one (dropped).
fn iana(openssl: &str) -> Option<String> {
    if openssl.starts_with("TLS_") {
        return Some(openssl.to_owned());
    }
    let table = [
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ),
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        ),
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
        (
            "ECDHE-ECDSA-AES128-SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        ),
        (
            "ECDHE-RSA-AES128-SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        ),
        (
            "ECDHE-ECDSA-AES128-SHA",
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        ),
        ("ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"),
        (
            "ECDHE-ECDSA-AES256-SHA",
            "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        ),
        ("ECDHE-RSA-AES256-SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"),
        ("AES128-GCM-SHA256", "TLS_RSA_WITH_AES_128_GCM_SHA256"),
        ("AES256-GCM-SHA384", "TLS_RSA_WITH_AES_256_GCM_SHA384"),
        ("AES128-SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA256"),
        ("AES128-SHA", "TLS_RSA_WITH_AES_128_CBC_SHA"),
        ("AES256-SHA", "TLS_RSA_WITH_AES_256_CBC_SHA"),
        ("DES-CBC3-SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA"),
    ];
    table
        .iter()
        .find(|(o, _)| *o == openssl)
        .map(|(_, i)| (*i).to_owned())
}

/// The observed (IANA cipher suites, minimum TLS version) of an APIServer object.
fn observe_tls(apiserver: &Value) -> (Vec<String>, String) {
    let p = apiserver.pointer("/spec/tlsSecurityProfile");
    let kind = p
        .and_then(|p| p.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let custom = p.and_then(|p| p.get("custom")).filter(|c| !c.is_null());
    if kind == "Custom"
        && let Some(c) = custom
    {
        let ciphers = c
            .get("ciphers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .filter_map(iana)
                    .collect()
            })
            .unwrap_or_default();
        let min = c.get("minTLSVersion").and_then(Value::as_str).unwrap_or("");
        return (ciphers, min.to_owned());
    }
    let (ciphers, min) = profile(kind);
    (
        ciphers.iter().copied().filter_map(iana).collect(),
        min.to_owned(),
    )
}

/// Writes the API server's TLS profile into the `servingInfo` of every `data` entry that is a
/// `GenericOperatorConfig` or `GenericControllerConfig`. Other entries keep their bytes.
pub(crate) fn inject_tls(req: &mut Obj, apiserver: Option<&Value>) {
    if annotation(req, INJECT_TLS) != "true" {
        return;
    }
    let Some(apiserver) = apiserver else { return };
    if get_obj(req, "data").is_none() {
        return;
    }
    let (ciphers, min) = observe_tls(apiserver);
    let data = obj_mut(req, "data");
    for v in data.values_mut() {
        let Some(text) = v.as_str() else { continue };
        let Ok(mut doc) = serde_saphyr::from_str::<Value>(text) else {
            continue;
        };
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if !matches!(
            (kind, api),
            ("GenericOperatorConfig", "operator.openshift.io/v1alpha1")
                | ("GenericControllerConfig", "config.openshift.io/v1")
        ) {
            continue;
        }
        let Some(o) = doc.as_object_mut() else {
            continue;
        };
        let si = obj_mut(o, "servingInfo");
        si.insert("cipherSuites".into(), json!(ciphers));
        si.insert("minTLSVersion".into(), json!(min));
        if let Ok(s) = serde_saphyr::to_string(&doc) {
            *v = Value::String(s);
        }
    }
}
