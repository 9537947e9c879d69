//! Both apply strategies side by side on the test control plane, one table of cases: every
//! object is applied by an OLD payload, changed by hand and/or by a NEW payload, and the live
//! object is compared field by field with what each strategy's rule says. One case per rule
//! of the CVO's merge that differs from server-side apply, and one per typed kind (plus the
//! generic rule on a Secret). The OpenShift kinds (OperatorGroup, SecurityContextConstraints
//! with their real CRDs from openshift-multi, ImageStream with a permissive stand-in: the
//! corpus has no CRD for it, OpenShift serves it from an aggregated API server) are in a second
//! test that holds the fixed-names lock, because those CRDs are cluster-wide under their real
//! names.
//!
//! The ClusterVersion owner reference is not exercised here: the run reads ClusterVersion
//! `version` only when it records the ClusterVersion, which the shared plane's tests turn off
//! (an owner reference to a cluster-wide object would let its deletion garbage-collect other
//! tests' objects). The merge's unit tests cover the reference itself.

use crate::support::{self, apply as apply_util};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use minicvo::Mode;
use minicvo::apply::ApplyStrategy;
use serde_json::{Value, json};
use support::objects::api;
use support::{admin_client, test_namespace, unique_name};

/// Expected value at a JSON pointer of the live object, per strategy (`None`: absent).
struct Check {
    path: &'static str,
    cvo: Option<Value>,
    ssa: Option<Value>,
}

fn both(path: &'static str, v: Value) -> Check {
    Check {
        path,
        cvo: Some(v.clone()),
        ssa: Some(v),
    }
}

fn differ(path: &'static str, cvo: Option<Value>, ssa: Option<Value>) -> Check {
    Check { path, cvo, ssa }
}

/// How a hand edit is sent.
enum Edit {
    Merge(Value),
    Strategic(Value),
}

struct Case {
    rule: &'static str,
    old: Value,
    hand: Option<Edit>,
    new: Value,
    checks: Vec<Check>,
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().expect("name")
}

/// Writes the payload of `objects` (with the include annotation) and applies it in `strategy`.
async fn apply(dir: &std::path::Path, version: &str, objects: &[&Value], strategy: ApplyStrategy) {
    let files: Vec<(String, String)> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut o = (*o).clone();
            o["metadata"]["annotations"][apply_util::INCLUDE] = json!("true");
            (format!("0000_50_case_{i:02}.yaml"), o.to_string())
        })
        .collect();
    let _ = std::fs::remove_dir_all(dir);
    let dir = apply_util::write_payload(dir, version, &files);
    let conn = apply_util::connection(None).await;
    let mut options = apply_util::options();
    options.runner.strategy = strategy;
    let (report, _) =
        apply_util::run(&conn, apply_util::plan(&dir, Mode::Updating), &options).await;
    assert_eq!(
        report.counts.failed, 0,
        "{strategy:?} apply of {version} failed: {:?}",
        report.errors
    );
}

/// OLD, the hand edits, NEW, then every check, in one strategy. Returns the mismatches.
async fn run_table(client: &Client, cases: &[Case], strategy: ApplyStrategy) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let old: Vec<&Value> = cases.iter().map(|c| &c.old).collect();
    apply(&tmp.path().join("old"), "1.0.0", &old, strategy).await;
    for c in cases {
        let Some(edit) = &c.hand else { continue };
        let (params, patch) = match edit {
            Edit::Merge(p) => (PatchParams::default(), Patch::Merge(p.clone())),
            Edit::Strategic(p) => (PatchParams::default(), Patch::Strategic(p.clone())),
        };
        api(client, &c.old)
            .patch(name_of(&c.old), &params, &patch)
            .await
            .unwrap_or_else(|e| panic!("{}: hand edit: {e}", c.rule));
    }
    let new: Vec<&Value> = cases.iter().map(|c| &c.new).collect();
    apply(&tmp.path().join("new"), "2.0.0", &new, strategy).await;
    let mut wrong = Vec::new();
    for c in cases {
        let live = api(client, &c.new)
            .get(name_of(&c.new))
            .await
            .unwrap_or_else(|e| panic!("{}: GET: {e}", c.rule));
        let live = serde_json::to_value(live).unwrap();
        for check in &c.checks {
            let want = match strategy {
                ApplyStrategy::Cvo => &check.cvo,
                ApplyStrategy::ServerSide => &check.ssa,
            };
            let got = live.pointer(check.path);
            if got != want.as_ref() {
                wrong.push(format!(
                    "{strategy:?} {}: {} is {got:?}, want {want:?}",
                    c.rule, check.path
                ));
            }
        }
    }
    wrong
}

fn meta(kind: &str, api_version: &str, ns: Option<&str>, name: &str, extra: Value) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let Some(ns) = ns {
        o["metadata"]["namespace"] = json!(ns);
    }
    for (k, v) in extra.as_object().expect("object") {
        if k == "metadata" {
            for (mk, mv) in v.as_object().expect("metadata") {
                o["metadata"][mk] = mv.clone();
            }
        } else {
            o[k] = v.clone();
        }
    }
    o
}

fn pod(containers: Value, extra: Value) -> Value {
    let mut spec = json!({"containers": containers});
    for (k, v) in extra.as_object().expect("object") {
        spec[k] = v.clone();
    }
    spec
}

fn deployment(ns: &str, name: &str, pod_spec: Value, extra_spec: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    });
    for (k, v) in extra_spec.as_object().expect("object") {
        spec[k] = v.clone();
    }
    meta(
        "Deployment",
        "apps/v1",
        Some(ns),
        name,
        json!({"spec": spec}),
    )
}

fn daemon_set(ns: &str, name: &str, pod_spec: Value, extra_spec: Value) -> Value {
    let mut d = deployment(ns, name, pod_spec, extra_spec);
    d["kind"] = json!("DaemonSet");
    d
}

fn c(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": "registry.example/app:1"});
    for (k, v) in extra.as_object().expect("object") {
        c[k] = v.clone();
    }
    c
}

/// The typed kinds and the generic rule, in namespace `ns` (cluster-scoped names get
/// `suffix`).
fn typed_cases(ns: &str, suffix: &str) -> Vec<Case> {
    let n = |s: &str| format!("{s}-{suffix}");
    let group = format!("{suffix}.merge-kinds.minicvo.test");
    let crd = |description: &str, labels: Value| {
        meta(
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1",
            None,
            &format!("widgets.{group}"),
            json!({"metadata": {"labels": labels}, "spec": {
                "group": group, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "description": description,
                    "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        )
    };
    let webhook = |timeout: u32, annotations: Value| {
        meta(
            "ValidatingWebhookConfiguration",
            "admissionregistration.k8s.io/v1",
            None,
            &n("merge-kinds"),
            json!({"metadata": {"annotations": annotations}, "webhooks": [{
                "name": format!("check.{group}"),
                "clientConfig": {"url": "https://webhook.invalid/validate"},
                "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothing"]}],
                "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": timeout}]}),
        )
    };
    let job = |labels: Value| {
        meta(
            "Job",
            "batch/v1",
            Some(ns),
            "job",
            json!({"metadata": {"labels": labels}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [c("c", json!({}))]}}}}),
        )
    };
    let cron = |schedule: &str, annotations: Value| {
        meta(
            "CronJob",
            "batch/v1",
            Some(ns),
            "cron",
            json!({"metadata": {"annotations": annotations}, "spec": {"schedule": schedule,
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never", "containers": [c("c", json!({}))]}}}}}}),
        )
    };
    let rule = |verb: &str| json!([{"apiGroups": [""], "resources": ["pods"], "verbs": [verb]}]);
    let subject = |sa: &str| json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}]);
    let probe = json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10});
    vec![
        Case {
            rule: "ConfigMap: keys, labels and annotations the payload stops setting are kept",
            old: meta(
                "ConfigMap",
                "v1",
                Some(ns),
                "cm",
                json!({"metadata": {"labels": {"l": "1"}, "annotations": {"a": "1"}},
                    "data": {"a": "1", "b": "2"}}),
            ),
            hand: None,
            new: meta(
                "ConfigMap",
                "v1",
                Some(ns),
                "cm",
                json!({"data": {"a": "1"}}),
            ),
            checks: vec![
                both("/data/a", json!("1")),
                differ("/data/b", Some(json!("2")), None),
                differ("/metadata/labels/l", Some(json!("1")), None),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "Deployment without replicas: a hand scale is undone (set to 1)",
            old: deployment(
                ns,
                "scaled",
                pod(json!([c("c", json!({}))]), json!({})),
                json!({}),
            ),
            hand: Some(Edit::Merge(json!({"spec": {"replicas": 3}}))),
            new: deployment(
                ns,
                "scaled",
                pod(json!([c("c", json!({}))]), json!({})),
                json!({}),
            ),
            checks: vec![differ("/spec/replicas", Some(json!(1)), Some(json!(3)))],
        },
        Case {
            rule: "Deployment: startupProbe and imagePullPolicy are never updated",
            old: deployment(
                ns,
                "probe",
                pod(
                    json!([c("c", json!({"imagePullPolicy": "IfNotPresent"}))]),
                    json!({}),
                ),
                json!({}),
            ),
            hand: None,
            new: deployment(
                ns,
                "probe",
                pod(
                    json!([c(
                        "c",
                        json!({"imagePullPolicy": "Always", "startupProbe": probe})
                    )]),
                    json!({}),
                ),
                json!({}),
            ),
            checks: vec![
                differ(
                    "/spec/template/spec/containers/0/imagePullPolicy",
                    Some(json!("IfNotPresent")),
                    Some(json!("Always")),
                ),
                differ(
                    "/spec/template/spec/containers/0/startupProbe/httpGet/path",
                    None,
                    Some(json!("/healthz")),
                ),
            ],
        },
        Case {
            rule: "Deployment: containers, volumes and mounts missing from the manifest are removed, image rolled out",
            old: deployment(
                ns,
                "two",
                pod(
                    json!([
                        c(
                            "a",
                            json!({"volumeMounts": [
                            {"name": "v1", "mountPath": "/v1"}, {"name": "v2", "mountPath": "/v2"}]})
                        ),
                        c("b", json!({}))
                    ]),
                    json!({"volumes": [{"name": "v1", "emptyDir": {}}, {"name": "v2", "emptyDir": {}}]}),
                ),
                json!({}),
            ),
            hand: None,
            new: deployment(
                ns,
                "two",
                pod(
                    json!([c(
                        "a",
                        json!({"image": "registry.example/app:2",
                        "volumeMounts": [{"name": "v1", "mountPath": "/v1"}]})
                    )]),
                    json!({"volumes": [{"name": "v1", "emptyDir": {}}]}),
                ),
                json!({}),
            ),
            checks: vec![
                both(
                    "/spec/template/spec/containers/0/image",
                    json!("registry.example/app:2"),
                ),
                both("/spec/template/spec/containers/1", Value::Null).none(),
                both("/spec/template/spec/volumes/0/name", json!("v1")),
                both("/spec/template/spec/volumes/1", Value::Null).none(),
                both(
                    "/spec/template/spec/containers/0/volumeMounts/0/name",
                    json!("v1"),
                ),
                both(
                    "/spec/template/spec/containers/0/volumeMounts/1",
                    Value::Null,
                )
                .none(),
            ],
        },
        Case {
            rule: "Deployment: env is replaced whole (a hand-added variable goes)",
            old: deployment(
                ns,
                "env",
                pod(
                    json!([c("c", json!({"env": [{"name": "X", "value": "1"}]}))]),
                    json!({}),
                ),
                json!({}),
            ),
            hand: Some(Edit::Strategic(
                json!({"spec": {"template": {"spec": {"containers": [
                {"name": "c", "env": [{"name": "Z", "value": "9"}]}]}}}}),
            )),
            new: deployment(
                ns,
                "env",
                pod(
                    json!([c("c", json!({"env": [{"name": "X", "value": "1"}]}))]),
                    json!({}),
                ),
                json!({}),
            ),
            // The strategic merge patch puts Z first; server-side apply leaves it there.
            checks: vec![
                differ(
                    "/spec/template/spec/containers/0/env/0/name",
                    Some(json!("X")),
                    Some(json!("Z")),
                ),
                differ(
                    "/spec/template/spec/containers/0/env/1/name",
                    None,
                    Some(json!("X")),
                ),
            ],
        },
        Case {
            rule: "DaemonSet: updateStrategy is never updated; tolerations are only added",
            old: daemon_set(
                ns,
                "ds",
                pod(
                    json!([c("c", json!({}))]),
                    json!({"tolerations": [{"key": "t1", "operator": "Exists"}]}),
                ),
                json!({}),
            ),
            hand: None,
            new: daemon_set(
                ns,
                "ds",
                pod(
                    json!([c("c", json!({}))]),
                    json!({"tolerations": [{"key": "t2", "operator": "Exists"}]}),
                ),
                json!({"updateStrategy": {"type": "OnDelete"}}),
            ),
            checks: vec![
                differ(
                    "/spec/updateStrategy/type",
                    Some(json!("RollingUpdate")),
                    Some(json!("OnDelete")),
                ),
                differ(
                    "/spec/template/spec/tolerations/0/key",
                    Some(json!("t1")),
                    Some(json!("t2")),
                ),
                differ(
                    "/spec/template/spec/tolerations/1/key",
                    Some(json!("t2")),
                    None,
                ),
            ],
        },
        Case {
            rule: "Job: a label the payload stops setting is kept",
            old: job(json!({"l": "1"})),
            hand: None,
            new: job(json!({})),
            checks: vec![differ("/metadata/labels/l", Some(json!("1")), None)],
        },
        Case {
            rule: "CronJob: schedule updated, a dropped annotation kept",
            old: cron("*/5 * * * *", json!({"a": "1"})),
            hand: None,
            new: cron("*/10 * * * *", json!({})),
            checks: vec![
                both("/spec/schedule", json!("*/10 * * * *")),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "Namespace: a dropped label is kept",
            old: meta(
                "Namespace",
                "v1",
                None,
                &n("mk-ns"),
                json!({"metadata": {"labels": {"l": "1"}}}),
            ),
            hand: None,
            new: meta("Namespace", "v1", None, &n("mk-ns"), json!({})),
            checks: vec![differ("/metadata/labels/l", Some(json!("1")), None)],
        },
        Case {
            rule: "Service: ports updated, sessionAffinity never",
            old: meta(
                "Service",
                "v1",
                Some(ns),
                "svc",
                json!({"spec": {"selector": {"app": "x"}, "ports": [{"name": "http", "port": 80}]}}),
            ),
            hand: None,
            new: meta(
                "Service",
                "v1",
                Some(ns),
                "svc",
                json!({"spec": {"selector": {"app": "x"}, "sessionAffinity": "ClientIP",
                    "ports": [{"name": "http", "port": 81}]}}),
            ),
            checks: vec![
                both("/spec/ports/0/port", json!(81)),
                differ(
                    "/spec/sessionAffinity",
                    Some(json!("None")),
                    Some(json!("ClientIP")),
                ),
            ],
        },
        Case {
            rule: "ServiceAccount: a dropped annotation is kept",
            old: meta(
                "ServiceAccount",
                "v1",
                Some(ns),
                "sa",
                json!({"metadata": {"annotations": {"a": "1"}}}),
            ),
            hand: None,
            new: meta("ServiceAccount", "v1", Some(ns), "sa", json!({})),
            checks: vec![differ("/metadata/annotations/a", Some(json!("1")), None)],
        },
        Case {
            rule: "Role: rules replaced whole, a dropped label kept",
            old: meta(
                "Role",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "role",
                json!({"metadata": {"labels": {"l": "1"}}, "rules": rule("get")}),
            ),
            hand: None,
            new: meta(
                "Role",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "role",
                json!({"rules": rule("list")}),
            ),
            checks: vec![
                both("/rules/0/verbs", json!(["list"])),
                both("/rules/1", Value::Null).none(),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "RoleBinding: subjects replaced whole",
            old: meta(
                "RoleBinding",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "rb",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
                    "subjects": subject("a")}),
            ),
            hand: Some(Edit::Merge(json!({"metadata": {"labels": {"hand": "1"}}}))),
            new: meta(
                "RoleBinding",
                "rbac.authorization.k8s.io/v1",
                Some(ns),
                "rb",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
                    "subjects": subject("b")}),
            ),
            checks: vec![
                both("/subjects/0/name", json!("b")),
                both("/subjects/1", Value::Null).none(),
                both("/metadata/labels/hand", json!("1")),
            ],
        },
        Case {
            rule: "ClusterRole: rules replaced whole, a dropped annotation kept",
            old: meta(
                "ClusterRole",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-cr"),
                json!({"metadata": {"annotations": {"a": "1"}}, "rules": rule("get")}),
            ),
            hand: None,
            new: meta(
                "ClusterRole",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-cr"),
                json!({"rules": rule("watch")}),
            ),
            checks: vec![
                both("/rules/0/verbs", json!(["watch"])),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "ClusterRoleBinding: subjects replaced whole, a dropped label kept",
            old: meta(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-crb"),
                json!({"metadata": {"labels": {"l": "1"}},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": n("mk-cr")},
                    "subjects": subject("a")}),
            ),
            hand: None,
            new: meta(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                None,
                &n("mk-crb"),
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": n("mk-cr")},
                    "subjects": subject("b")}),
            ),
            checks: vec![
                both("/subjects/0/name", json!("b")),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "CRD: spec replaced, a dropped label kept",
            old: crd("old", json!({"l": "1"})),
            hand: None,
            new: crd("new", json!({})),
            checks: vec![
                both(
                    "/spec/versions/0/schema/openAPIV3Schema/description",
                    json!("new"),
                ),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "ValidatingWebhookConfiguration: webhooks replaced, a dropped annotation kept",
            old: webhook(5, json!({"a": "1"})),
            hand: None,
            new: webhook(7, json!({})),
            checks: vec![
                both("/webhooks/0/timeoutSeconds", json!(7)),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            // With `type` in the manifest: without it the live `type: Opaque` differs and the
            // CVO rewrites the Secret on every pass.
            rule: "generic (Secret): an annotation-only change is not written",
            old: meta(
                "Secret",
                "v1",
                Some(ns),
                "annotated",
                json!({"metadata": {"annotations": {"a": "1"}}, "type": "Opaque", "data": {"k": "YQ=="}}),
            ),
            hand: None,
            new: meta(
                "Secret",
                "v1",
                Some(ns),
                "annotated",
                json!({"metadata": {"annotations": {"a": "2"}}, "type": "Opaque", "data": {"k": "YQ=="}}),
            ),
            checks: vec![differ(
                "/metadata/annotations/a",
                Some(json!("1")),
                Some(json!("2")),
            )],
        },
        Case {
            rule: "generic (Secret): a data change replaces labels and annotations whole",
            old: meta(
                "Secret",
                "v1",
                Some(ns),
                "changed",
                json!({"metadata": {"labels": {"l": "1"}}, "data": {"k": "YQ=="}}),
            ),
            hand: Some(Edit::Merge(
                json!({"metadata": {"annotations": {"hand": "1"}}}),
            )),
            new: meta(
                "Secret",
                "v1",
                Some(ns),
                "changed",
                json!({"metadata": {"labels": {"m": "2"}}, "data": {"k": "Yg=="}}),
            ),
            checks: vec![
                both("/data/k", json!("Yg==")),
                both("/metadata/labels/m", json!("2")),
                both("/metadata/labels/l", Value::Null).none(),
                differ("/metadata/annotations/hand", None, Some(json!("1"))),
            ],
        },
    ]
}

impl Check {
    /// The same path, expected absent in both strategies.
    fn none(self) -> Check {
        Check {
            path: self.path,
            cvo: None,
            ssa: None,
        }
    }
}

/// Every typed kind of the plane and the generic rule, both strategies at once (each in its
/// own namespace, cluster-scoped objects with their own names).
#[tokio::test]
async fn each_rule_and_typed_kind_in_both_strategies() {
    let client = admin_client().await;
    let mut guards = Vec::new();
    let mut runs = Vec::new();
    for strategy in [ApplyStrategy::Cvo, ApplyStrategy::ServerSide] {
        let ns = test_namespace(&client, "merge-kinds").await;
        let suffix = unique_name("mk");
        let cases = typed_cases(&ns, &suffix);
        guards.push(ns);
        guards.push(support::NamespaceGuard::adopt(format!("mk-ns-{suffix}")));
        runs.push((strategy, cases, suffix));
    }
    let results = futures::future::join_all(
        runs.iter()
            .map(|(strategy, cases, _)| run_table(&client, cases, *strategy)),
    )
    .await;
    for (_, cases, _) in &runs {
        for c in cases {
            let obj = &c.new;
            if obj["metadata"]["namespace"].is_null() && obj["kind"] != "Namespace" {
                support::delete_quietly(&api(&client, obj), name_of(obj)).await;
            }
        }
    }
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// OperatorGroup and SecurityContextConstraints with the real openshift-multi CRDs, ImageStream
/// with a permissive stand-in, in both strategies. Holds the fixed-names lock: the CRDs are
/// cluster-wide under their real names (the typed merge matches the real group).
#[tokio::test]
async fn openshift_kinds_in_both_strategies() {
    let client = admin_client().await;
    let _lock = support::fixed_names_lock().await;
    support::install_corpus_crd(&client, "0000_50_olm_00-operatorgroups.crd.yaml").await;
    support::install_corpus_crd(
        &client,
        "0000_03_config-operator_01_securitycontextconstraints.crd.yaml",
    )
    .await;
    install_image_stream_stand_in(&client).await;
    let mut guards = Vec::new();
    let mut runs = Vec::new();
    for strategy in [ApplyStrategy::Cvo, ApplyStrategy::ServerSide] {
        let ns = test_namespace(&client, "merge-oskinds").await;
        let suffix = unique_name("mk");
        let cases = openshift_cases(&ns, &suffix);
        guards.push(ns);
        runs.push((strategy, cases));
    }
    let results = futures::future::join_all(
        runs.iter()
            .map(|(strategy, cases)| run_table(&client, cases, *strategy)),
    )
    .await;
    for (_, cases) in &runs {
        for c in cases
            .iter()
            .filter(|c| c.new["kind"] == "SecurityContextConstraints")
        {
            support::delete_quietly(&api(&client, &c.new), name_of(&c.new)).await;
        }
    }
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `imagestreams.image.openshift.io`, permissive (OpenShift serves ImageStream from an
/// aggregated API server; the corpus has no CRD for it). Applied identically by every caller.
async fn install_image_stream_stand_in(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::wait::{await_condition, conditions};
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "imagestreams.image.openshift.io"},
        "spec": {"group": "image.openshift.io", "scope": "Namespaced",
            "names": {"plural": "imagestreams", "singular": "imagestream", "kind": "ImageStream", "listKind": "ImageStreamList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "imagestreams.image.openshift.io",
        &PatchParams::apply("minicvo-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("ImageStream stand-in");
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        await_condition(
            crds,
            "imagestreams.image.openshift.io",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("stand-in established within 60 s")
    .unwrap();
}

fn openshift_cases(ns: &str, suffix: &str) -> Vec<Case> {
    let og = |targets: Value, labels: Value| {
        meta(
            "OperatorGroup",
            "operators.coreos.com/v1",
            Some(ns),
            "og",
            json!({"metadata": {"labels": labels}, "spec": {"targetNamespaces": targets}}),
        )
    };
    let scc_name = format!("mk-scc-{suffix}");
    let scc = |users: Value, annotations: Value| {
        meta(
            "SecurityContextConstraints",
            "security.openshift.io/v1",
            None,
            &scc_name,
            json!({"metadata": {"annotations": annotations},
                "allowHostDirVolumePlugin": false, "allowHostIPC": false, "allowHostNetwork": false,
                "allowHostPID": false, "allowHostPorts": false, "allowPrivilegedContainer": false,
                "readOnlyRootFilesystem": false, "allowedCapabilities": null,
                "defaultAddCapabilities": null, "requiredDropCapabilities": null,
                "priority": null, "volumes": ["configMap"],
                "runAsUser": {"type": "MustRunAsRange"}, "seLinuxContext": {"type": "MustRunAs"},
                "users": users}),
        )
    };
    let is = |tags: Value| {
        meta(
            "ImageStream",
            "image.openshift.io/v1",
            Some(ns),
            "is",
            json!({"spec": {"tags": tags}}),
        )
    };
    let tag = |name: &str, image: &str| json!({"name": name, "from": {"kind": "DockerImage", "name": image}});
    vec![
        Case {
            rule: "OperatorGroup: targetNamespaces set, upgradeStrategy defaulted, a dropped label kept",
            old: og(json!([ns]), json!({"l": "1"})),
            hand: None,
            new: og(json!([ns, "default"]), json!({})),
            checks: vec![
                both("/spec/targetNamespaces", json!([ns, "default"])),
                both("/spec/upgradeStrategy", json!("Default")),
                differ("/metadata/labels/l", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "SecurityContextConstraints: users replaced whole, a dropped annotation kept",
            old: scc(json!(["a", "b"]), json!({"a": "1"})),
            hand: None,
            new: scc(json!(["c"]), json!({})),
            checks: vec![
                both("/users", json!(["c"])),
                differ("/metadata/annotations/a", Some(json!("1")), None),
            ],
        },
        Case {
            rule: "ImageStream: tags the payload stops listing are kept",
            old: is(json!([
                tag("a", "registry.example/a:1"),
                tag("b", "registry.example/b:1")
            ])),
            hand: None,
            new: is(json!([tag("a", "registry.example/a:2")])),
            checks: vec![
                both("/spec/tags/0/from/name", json!("registry.example/a:2")),
                differ("/spec/tags/1/name", Some(json!("b")), None),
            ],
        },
    ]
}
