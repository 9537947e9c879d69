//! The pre-merge steps: creation with the owner reference, create-only, proxy and TLS injection.

use serde_json::json;

use super::*;

#[test]
fn merge_creates_adds_owner_and_respects_create_only() {
    let cfg = ClusterConfig {
        cluster_version: Some(ClusterVersionRef {
            name: "version".into(),
            uid: "u".into(),
        }),
        ..ClusterConfig::default()
    };
    let m = obj("v1", "ConfigMap", json!({"data": {"a": "1"}}));
    let Outcome::Create(c) = merge(None, &m, &cfg).unwrap() else {
        panic!("create expected")
    };
    assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], "u");
    assert_eq!(merge(Some(&c), &m, &cfg).unwrap(), Outcome::Unchanged);
    let co = obj(
        "v1",
        "ConfigMap",
        json!({"data": {"a": "2"}, "metadata": {"annotations": {"release.openshift.io/create-only": "TRUE"}}}),
    );
    assert_eq!(merge(Some(&c), &co, &cfg).unwrap(), Outcome::Unchanged);
    let err = merge(None, &json!({"kind": "ConfigMap", "metadata": {}}), &cfg).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ConfigMap: invalid object: name cannot be empty"
    );
}

#[test]
fn proxy_injection_needs_a_proxy_with_values() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "annotations": {"config.openshift.io/inject-proxy": "c"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}}}});
    let none = prepare(&d, &ClusterConfig::default()).unwrap();
    assert_eq!(none, d);
    let cfg = ClusterConfig {
        proxy: Some(json!({"status": {"httpProxy": "http://p:3128", "noProxy": ".svc"}})),
        ..ClusterConfig::default()
    };
    let p = prepare(&d, &cfg).unwrap();
    assert_eq!(
        p["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "HTTP_PROXY", "value": "http://p:3128"},
               {"name": "HTTPS_PROXY", "value": ""}, {"name": "NO_PROXY", "value": ".svc"}])
    );
    let mut bad = d.clone();
    bad["metadata"]["annotations"]["config.openshift.io/inject-proxy"] = json!("c,missing");
    assert_eq!(
        prepare(&bad, &cfg).unwrap_err().to_string(),
        "Deployment d: requested injection for non-existent container: \"missing\""
    );
}

#[test]
fn tls_injection_only_with_an_apiserver_and_only_into_operator_configs() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {"config.openshift.io/inject-tls": "true"}},
        "data": {"config.yaml": "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\nservingInfo:\n  bindAddress: :8443\n",
                 "other": "not: [yaml"}});
    assert_eq!(prepare(&cm, &ClusterConfig::default()).unwrap(), cm);
    let cfg = ClusterConfig {
        apiserver: Some(json!({"spec": {"tlsSecurityProfile": {"type": "Modern"}}})),
        ..ClusterConfig::default()
    };
    let out = prepare(&cm, &cfg).unwrap();
    let doc: Value = serde_saphyr::from_str(out["data"]["config.yaml"].as_str().unwrap()).unwrap();
    assert_eq!(doc["servingInfo"]["bindAddress"], ":8443");
    assert_eq!(doc["servingInfo"]["minTLSVersion"], "VersionTLS13");
    assert_eq!(
        doc["servingInfo"]["cipherSuites"],
        json!([
            "TLS_AES_128_GCM_SHA256",
            "TLS_AES_256_GCM_SHA384",
            "TLS_CHACHA20_POLY1305_SHA256"
        ])
    );
    assert_eq!(out["data"]["other"], "not: [yaml");
}
