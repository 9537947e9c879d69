//! Table tests: live object, manifest, expected write, per kind and per rule.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// One case: the live object, the manifest, and the expected write (`None`: unchanged).
struct Case {
    name: &'static str,
    live: Value,
    manifest: Value,
    expected: Option<Value>,
}

fn case(name: &'static str, live: Value, manifest: Value, expected: Option<Value>) -> Case {
    Case {
        name,
        live,
        manifest,
        expected,
    }
}

fn run(cases: Vec<Case>) {
    let mut failed = Vec::new();
    for c in cases {
        let got = merge_prepared(&c.live, &c.manifest).expect(c.name);
        if got != c.expected {
            failed.push(format!(
                "{}:\n  got      {}\n  expected {}",
                c.name,
                got.map_or("unchanged".into(), |v| v.to_string()),
                c.expected.map_or("unchanged".into(), |v| v.to_string())
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "namespace": "n"}, "spec": spec})
}

fn pod(containers: Value) -> Value {
    json!({"template": {"spec": {"containers": containers}}})
}

/// A Deployment spec as the merge normalises it, so that only the field under test differs.
fn full(extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 1,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}],
                              "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}}
    });
    merge_into(&mut spec, extra);
    spec
}

fn merge_into(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                merge_into(x.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

#[test]
fn deployment_rules() {
    run(vec![
        case(
            "replicas left out of the manifest is reset to 1",
            deploy(full(json!({"replicas": 5}))),
            deploy(json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})),
            Some(deploy(full(json!({})))),
        ),
        case(
            "normalised live object is unchanged",
            deploy(full(json!({}))),
            deploy(json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})),
            None,
        ),
        case(
            "labels the manifest dropped are kept, new ones added",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "d", "labels": {"old": "1"}}, "spec": full(json!({}))}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "d", "labels": {"new": "1"}}, "spec": pod(json!([{"name": "c", "image": "i"}]))}),
            Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "d", "labels": {"old": "1", "new": "1"}}, "spec": full(json!({}))})),
        ),
        case(
            "startupProbe, lifecycle and imagePullPolicy are never updated",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "imagePullPolicy": "Always", "startupProbe": {"exec": {"command": ["a"]}}}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i", "imagePullPolicy": "IfNotPresent",
                "lifecycle": {"preStop": {"exec": {"command": ["x"]}}}}]),
            )),
            None,
        ),
        case(
            "containers missing from the manifest are removed, new ones appended verbatim",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "x", "image": "i"}, {"name": "c", "image": "i"}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i"}, {"name": "y", "image": "j", "ports": [{"containerPort": 1}]}]),
            )),
            Some(deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"},
                {"name": "y", "image": "j", "ports": [{"containerPort": 1}]}]}}}),
            ))),
        ),
        case(
            "env is replaced whole",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i", "env": [{"name": "B", "value": "2"}]}]),
            )),
            Some(deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "env": [{"name": "B", "value": "2"}]}]}}}),
            ))),
        ),
        case(
            "env fieldRef apiVersion defaults to v1 before comparing",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}]}]}}}),
            )),
            deploy(pod(json!([{"name": "c", "image": "i",
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]))),
            None,
        ),
        case(
            "tolerations are only added",
            deploy(full(
                json!({"template": {"spec": {"tolerations": [{"key": "a"}]}}}),
            )),
            deploy(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "b"}]}}}),
            ),
            Some(deploy(full(
                json!({"template": {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}}),
            ))),
        ),
        case(
            "volumes missing from the manifest are removed; new ones defaulted",
            deploy(full(
                json!({"template": {"spec": {"volumes": [{"name": "old", "emptyDir": {}}]}}}),
            )),
            deploy(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "cm", "configMap": {"name": "x"}}]}}}),
            ),
            Some(deploy(full(json!({"template": {"spec": {"volumes": [
                {"name": "cm", "configMap": {"name": "x", "defaultMode": 420}}]}}})))),
        ),
        case(
            "volume mounts keyed by mountPath, missing ones removed",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/b"}]}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i", "volumeMounts": [{"name": "z", "mountPath": "/b"}]}]),
            )),
            Some(deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "volumeMounts": [{"name": "z", "mountPath": "/b"}]}]}}}),
            ))),
        ),
        case(
            "resources compare quantities by value",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i", "resources": {"requests": {"cpu": "0.1", "memory": "1024Mi"}}}]),
            )),
            None,
        ),
        case(
            "a Recreate strategy is not defaulted",
            deploy(full(json!({}))),
            deploy(
                json!({"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
            ),
            Some(deploy({
                let mut s = full(json!({}));
                s["strategy"] = json!({"type": "Recreate"});
                s
            })),
        ),
        case(
            "probe defaults make an equal probe unchanged",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "livenessProbe": {"httpGet": {"path": "/", "port": 8, "scheme": "HTTP"}, "timeoutSeconds": 1,
                                  "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i", "livenessProbe": {"httpGet": {"path": "/", "port": 8}}}]),
            )),
            None,
        ),
        case(
            "nodeSelector keys are never removed",
            deploy(full(
                json!({"template": {"spec": {"nodeSelector": {"a": "1"}}}}),
            )),
            deploy(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "nodeSelector": {"b": "2"}}}}),
            ),
            Some(deploy(full(
                json!({"template": {"spec": {"nodeSelector": {"a": "1", "b": "2"}}}}),
            ))),
        ),
        case(
            "container capabilities are unioned in",
            deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}}}),
            )),
            deploy(pod(
                json!([{"name": "c", "image": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]),
            )),
            Some(deploy(full(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i",
                "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}}}]}}}),
            ))),
        ),
    ]);
}

fn ds(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": spec})
}

#[test]
fn daemonset_update_strategy_is_never_updated() {
    let tmpl = json!({"spec": {"containers": [{"name": "c", "image": "i"}],
                               "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}});
    run(vec![
        case(
            "updateStrategy",
            ds(
                json!({"selector": {"matchLabels": {"a": "b"}}, "updateStrategy": {"type": "OnDelete"}, "template": tmpl}),
            ),
            ds(
                json!({"selector": {"matchLabels": {"a": "b"}}, "updateStrategy": {"type": "RollingUpdate"},
                      "minReadySeconds": 5, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
            ),
            None,
        ),
        case(
            "image is",
            ds(json!({"selector": {"matchLabels": {"a": "b"}}, "template": tmpl})),
            ds(
                json!({"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {"containers": [{"name": "c", "image": "j"}]}}}),
            ),
            Some(ds(
                json!({"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {
                "containers": [{"name": "c", "image": "j"}], "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}}}),
            )),
        ),
    ]);
}

fn job(spec: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec})
}

#[test]
fn job_rules() {
    let tmpl = json!({"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never",
                               "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}});
    let normal = json!({"backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false, "template": tmpl});
    let mut with_par = normal.clone();
    with_par["parallelism"] = json!(2);
    run(vec![
        case(
            "parallelism left out clears the live value",
            job(with_par),
            job(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}),
            ),
            Some(job(normal.clone())),
        ),
        case(
            "defaults make a normalised job unchanged",
            job(normal.clone()),
            job(
                json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}),
            ),
            None,
        ),
    ]);
    let err =
        merge_prepared(&job(normal), &job(json!({"selector": {}, "template": {}}))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Job j: spec.selector is not supported in Job manifests (the CVO crashes on it); hint: remove the selector, the API server generates it"
    );
}

#[test]
fn cronjob_job_template_selector_is_an_error_and_schedule_is_set() {
    let cj = |spec: Value| json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": spec});
    let err = merge_prepared(
        &cj(json!({})),
        &cj(json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"selector": {}}}})),
    )
    .unwrap_err();
    assert!(
        matches!(err, MergeError::JobSelector { ref path, .. } if path == "spec.jobTemplate.spec.selector")
    );
    let out = merge_prepared(
        &cj(json!({"schedule": "1 * * * *"})),
        &cj(json!({"schedule": "2 * * * *", "jobTemplate": {"spec": {"template": {}}}})),
    )
    .unwrap()
    .unwrap();
    assert_eq!(out["spec"]["schedule"], "2 * * * *");
    assert_eq!(out["spec"]["concurrencyPolicy"], "Allow");
}

#[test]
fn projected_volume_without_default_mode_and_config_map_source_is_an_error() {
    let m = deploy(json!({"template": {"spec": {"containers": [], "volumes": [
        {"name": "p", "projected": {"sources": [{"configMap": {"name": "x"}}]}}]}}}));
    let err = merge_prepared(&deploy(full(json!({}))), &m).unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.template.spec.volumes[p].projected.sources[0]"),
        "{err}"
    );
    // A token-only projected volume is defaulted, not an error.
    let ok = deploy(json!({"template": {"spec": {"containers": [], "volumes": [
        {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}}}));
    let out = merge_prepared(&deploy(full(json!({}))), &ok)
        .unwrap()
        .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"][0]["projected"],
        json!({"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}], "defaultMode": 420})
    );
}

fn obj(api: &str, kind: &str, rest: Value) -> Value {
    let mut o =
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "n"}});
    merge_into(&mut o, rest);
    o
}

#[test]
fn core_kinds() {
    let cm = |rest| obj("v1", "ConfigMap", rest);
    let svc = |rest| obj("v1", "Service", rest);
    let sa = |rest| obj("v1", "ServiceAccount", rest);
    let ns = |rest| obj("v1", "Namespace", rest);
    run(vec![
        case(
            "ConfigMap keys are never removed",
            cm(json!({"data": {"a": "1", "b": "2"}})),
            cm(json!({"data": {"a": "1"}})),
            None,
        ),
        case(
            "ConfigMap key changed",
            cm(json!({"data": {"a": "1", "b": "2"}})),
            cm(json!({"data": {"a": "9"}})),
            Some(cm(json!({"data": {"a": "9", "b": "2"}}))),
        ),
        case(
            "ConfigMap immutable untouched",
            cm(json!({"data": {"a": "1"}})),
            cm(json!({"data": {"a": "1"}, "immutable": true})),
            None,
        ),
        case(
            "Namespace: metadata only",
            ns(json!({"spec": {"finalizers": ["kubernetes"]}})),
            ns(json!({"spec": {"finalizers": []}, "metadata": {"labels": {"a": "b"}}})),
            Some(ns(
                json!({"spec": {"finalizers": ["kubernetes"]}, "metadata": {"labels": {"a": "b"}}}),
            )),
        ),
        case(
            "ServiceAccount secrets untouched",
            sa(json!({"secrets": [{"name": "t"}]})),
            sa(json!({})),
            None,
        ),
        case(
            "ServiceAccount automount is a pointer",
            sa(json!({"automountServiceAccountToken": false})),
            sa(json!({})),
            Some(sa(json!({}))),
        ),
        case(
            "Service defaults: ClusterIP, TCP, targetPort = port",
            svc(
                json!({"spec": {"clusterIP": "10.0.0.1", "type": "ClusterIP", "ports": [{"name": "h", "port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"a": "b"}}}),
            ),
            svc(json!({"spec": {"ports": [{"name": "h", "port": 80}], "selector": {"a": "b"}}})),
            None,
        ),
        case(
            "Service sessionAffinity never updated",
            svc(json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None"}})),
            svc(json!({"spec": {"sessionAffinity": "ClientIP"}})),
            None,
        ),
        case(
            "Service selector written",
            svc(json!({"spec": {"type": "ClusterIP", "selector": {"a": "b"}}})),
            svc(json!({"spec": {"selector": {"c": "d"}}})),
            Some(svc(
                json!({"spec": {"type": "ClusterIP", "selector": {"c": "d"}}}),
            )),
        ),
    ]);
}

#[test]
fn rbac_kinds() {
    let rb = "rbac.authorization.k8s.io/v1";
    let role = |rest| obj(rb, "Role", rest);
    let cr = |rest| obj(rb, "ClusterRole", rest);
    let crb = |rest| obj(rb, "ClusterRoleBinding", rest);
    let rbind = |rest| obj(rb, "RoleBinding", rest);
    run(vec![
        case(
            "Role rules replaced whole",
            role(json!({"rules": [{"verbs": ["get"]}, {"verbs": ["list"]}]})),
            role(json!({"rules": [{"verbs": ["get"]}]})),
            Some(role(json!({"rules": [{"verbs": ["get"]}]}))),
        ),
        case(
            "ClusterRole with aggregationRule keeps live rules",
            cr(json!({"rules": [{"verbs": ["x"]}], "aggregationRule": {"a": 1}})),
            cr(json!({"aggregationRule": {"a": 1}})),
            None,
        ),
        case(
            "ClusterRole rules",
            cr(json!({"rules": [{"verbs": ["x"]}]})),
            cr(json!({"rules": []})),
            Some(cr(json!({"rules": []}))),
        ),
        case(
            "binding roleRef apiGroup defaulted",
            crb(
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]}),
            ),
            crb(
                json!({"roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]}),
            ),
            None,
        ),
        case(
            "RoleBinding subjects replaced",
            rbind(
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}, {"kind": "User", "name": "v"}]}),
            ),
            rbind(
                json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]}),
            ),
            Some(rbind(
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]}),
            )),
        ),
    ]);
}

#[test]
fn extension_and_openshift_kinds() {
    let crd = |rest| obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", rest);
    let vwc = |rest| {
        obj(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            rest,
        )
    };
    let is = |rest| obj("image.openshift.io/v1", "ImageStream", rest);
    let scc = |rest| {
        obj(
            "security.openshift.io/v1",
            "SecurityContextConstraints",
            rest,
        )
    };
    let og = |rest| obj("operators.coreos.com/v1", "OperatorGroup", rest);
    let names = json!({"kind": "Foo", "plural": "foos", "singular": "foo", "listKind": "FooList"});
    let ca_live = crd(
        json!({"metadata": {"annotations": {"service.beta.openshift.io/inject-cabundle": "true"}},
        "spec": {"names": names, "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"caBundle": "CA", "service": {"name": "s", "namespace": "n", "port": 443}}}}}}),
    );
    run(vec![
        case(
            "CRD defaults make it unchanged",
            crd(json!({"spec": {"names": names, "conversion": {"strategy": "None"}}})),
            crd(json!({"spec": {"names": {"kind": "Foo", "plural": "foos"}}})),
            None,
        ),
        case(
            "CRD caBundle preserved when injected",
            ca_live.clone(),
            crd(
                json!({"spec": {"names": {"kind": "Foo", "plural": "foos"}, "conversion": {"strategy": "Webhook",
                 "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}}}}}),
            ),
            None,
        ),
        case(
            "CRD spec replaced whole",
            crd(
                json!({"spec": {"names": names, "conversion": {"strategy": "None"}, "scope": "Namespaced"}}),
            ),
            crd(json!({"spec": {"names": names}})),
            Some(crd(
                json!({"spec": {"names": names, "conversion": {"strategy": "None"}}}),
            )),
        ),
        case(
            "webhook defaults and first caBundle copied",
            vwc(
                json!({"metadata": {"annotations": {"service.beta.openshift.io/inject-cabundle": "true"}},
                 "webhooks": [{"name": "w", "clientConfig": {"caBundle": "CA"}, "failurePolicy": "Fail", "matchPolicy": "Equivalent",
                   "namespaceSelector": {}, "objectSelector": {}, "timeoutSeconds": 10, "rules": [{"scope": "*"}]}]}),
            ),
            vwc(json!({"webhooks": [{"name": "w", "clientConfig": {}, "rules": [{}]}]})),
            None,
        ),
        case(
            "ImageStream live-only tags kept, referencePolicy not compared",
            is(
                json!({"spec": {"tags": [{"name": "a", "from": {"name": "x"}, "importPolicy": {"importMode": "Legacy"}, "referencePolicy": {"type": "Local"}}, {"name": "b"}]}}),
            ),
            is(json!({"spec": {"tags": [{"name": "a", "from": {"name": "x"}}]}})),
            None,
        ),
        case(
            "SCC users replaced, allowPrivilegeEscalation nil is true",
            scc(json!({"allowPrivilegeEscalation": true, "users": ["a", "b"]})),
            scc(json!({"users": ["a"]})),
            Some(scc(
                json!({"allowPrivilegeEscalation": true, "users": ["a"]}),
            )),
        ),
        case(
            "OperatorGroup upgradeStrategy defaults to Default",
            og(json!({"spec": {"upgradeStrategy": "Default"}})),
            og(json!({"spec": {}})),
            None,
        ),
        case(
            "OperatorGroup upgradeStrategy is a string, replaced when it differs",
            og(json!({"spec": {"upgradeStrategy": "TechPreviewUnsafeFailForward"}})),
            og(json!({"spec": {}})),
            Some(og(json!({"spec": {"upgradeStrategy": "Default"}}))),
        ),
    ]);
}

#[test]
fn generic_rule() {
    let sec = |rest| obj("v1", "Secret", rest);
    run(vec![
        case(
            "annotation-only change is not written",
            sec(json!({"data": {"a": "YQ=="}, "metadata": {"annotations": {"x": "1"}}})),
            sec(json!({"data": {"a": "YQ=="}, "metadata": {"annotations": {"x": "2"}}})),
            None,
        ),
        case(
            "a data change replaces labels and annotations",
            sec(
                json!({"data": {"a": "YQ=="}, "type": "Opaque", "metadata": {"labels": {"l": "1"}, "resourceVersion": "5"}}),
            ),
            sec(json!({"data": {"a": "Yg=="}, "metadata": {"annotations": {"x": "2"}}})),
            Some(sec(
                json!({"data": {"a": "Yg=="}, "type": "Opaque", "metadata": {"annotations": {"x": "2"}, "resourceVersion": "5"}}),
            )),
        ),
        case(
            "stringData differs from the live data on every pass",
            sec(json!({"data": {"a": "YQ=="}})),
            sec(json!({"stringData": {"a": "a"}})),
            Some(sec(
                json!({"data": {"a": "YQ=="}, "stringData": {"a": "a"}}),
            )),
        ),
        case(
            "other versions of typed kinds are generic",
            obj(
                "rbac.authorization.k8s.io/v1beta1",
                "Role",
                json!({"rules": [], "metadata": {"labels": {"a": "b"}}}),
            ),
            obj(
                "rbac.authorization.k8s.io/v1beta1",
                "Role",
                json!({"rules": []}),
            ),
            None,
        ),
    ]);
}

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

fn arb_deployment() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(0..5i64),
        proptest::collection::btree_map("[a-c]", "[a-c]", 0..3),
        proptest::collection::vec(("[a-c]", "[a-c]", proptest::bool::ANY), 0..3),
        proptest::collection::vec("[a-c]", 0..3),
    )
        .prop_map(|(replicas, labels, containers, tolerations)| {
            let cs: Vec<Value> = containers
                .into_iter()
                .map(|(n, img, probe)| {
                    let mut c = json!({"name": n, "image": img, "env": [{"name": "E", "value": img}],
                                       "volumeMounts": [{"name": "v", "mountPath": format!("/{n}")}]});
                    if probe {
                        c["livenessProbe"] = json!({"httpGet": {"port": 8}});
                    }
                    c
                })
                .collect();
            let mut spec = json!({"template": {"metadata": {"labels": labels},
                "spec": {"containers": cs, "tolerations": tolerations.iter().map(|t| json!({"key": t})).collect::<Vec<_>>(),
                         "volumes": [{"name": "v", "secret": {"secretName": "s"}}]}}});
            if let Some(r) = replicas {
                spec["replicas"] = json!(r);
            }
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels}, "spec": spec})
        })
}

proptest! {
    /// The merge converges: a third merge of the same manifest changes nothing. (Not the
    /// second: containers the first merge appends are copied verbatim and only the next merge
    /// defaults their probes, as in the CVO; on a cluster the API server defaults them first.)
    #[test]
    fn merge_converges(live in arb_deployment(), manifest in arb_deployment()) {
        let once = merge_prepared(&live, &manifest).unwrap().unwrap_or(live);
        let twice = merge_prepared(&once, &manifest).unwrap().unwrap_or(once);
        prop_assert_eq!(merge_prepared(&twice, &manifest).unwrap(), None);
    }

    /// The same for the generic rule.
    #[test]
    fn generic_merge_is_idempotent(a in proptest::collection::btree_map("[a-c]", "[a-c]", 0..3),
                                   b in proptest::collection::btree_map("[a-c]", "[a-c]", 0..3)) {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": a}, "data": a});
        let manifest = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": b});
        let once = merge_prepared(&live, &manifest).unwrap().unwrap_or(live);
        prop_assert_eq!(merge_prepared(&once, &manifest).unwrap(), None);
    }
}
