//! The CVO's merge (`minicvo::merge`) against the real API server: objects written the CVO's
//! way (GET, CREATE when absent, merge, UPDATE with the GET's resourceVersion only when the
//! merge reports a change), then changed by hand or by a new manifest, and the live object
//! compared field by field with what each rule says.

use crate::support;

use kube::Client;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use minicvo::merge::{ClusterConfig, Outcome, merge};
use serde_json::{Value, json};
use support::objects::api;
use support::{admin_client, test_namespace, unique_name};

/// What one CVO write did.
#[derive(Debug, PartialEq, Eq)]
enum Wrote {
    Created,
    Updated,
    Nothing,
}

/// One CVO write of `manifest`: GET, then CREATE, UPDATE or nothing. Returns what it did and
/// the live object afterwards.
async fn cvo_write(client: &Client, manifest: &Value) -> (Wrote, Value) {
    let api = api(client, manifest);
    let name = manifest["metadata"]["name"].as_str().expect("name");
    let live = api.get_opt(name).await.expect("GET");
    let live = live.map(|o| serde_json::to_value(o).expect("json"));
    match merge(live.as_ref(), manifest, &ClusterConfig::default()).expect("merge") {
        Outcome::Create(obj) => {
            let obj: DynamicObject = serde_json::from_value(obj).expect("object");
            let created = api
                .create(&PostParams::default(), &obj)
                .await
                .expect("CREATE");
            (Wrote::Created, serde_json::to_value(created).expect("json"))
        }
        Outcome::Update(obj) => {
            let obj: DynamicObject = serde_json::from_value(obj).expect("object");
            let updated = api
                .replace(name, &PostParams::default(), &obj)
                .await
                .expect("UPDATE");
            (Wrote::Updated, serde_json::to_value(updated).expect("json"))
        }
        Outcome::Unchanged => (Wrote::Nothing, live.expect("live object")),
    }
}

async fn patch(client: &Client, object: &Value, patch: Value) {
    let api = api(client, object);
    let name = object["metadata"]["name"].as_str().expect("name");
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("PATCH by hand");
}

fn deployment(ns: &str, name: &str, container: Value, extra_spec: Value) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}
        }
    });
    if let (Some(s), Some(e)) = (d["spec"].as_object_mut(), extra_spec.as_object()) {
        s.extend(e.clone());
    }
    d
}

/// Every typed kind the plane serves: created the CVO's way, then written twice more with the
/// same manifest. The merge's defaults match the API server's, so a no-op re-apply costs one
/// GET per object, except for the two kinds where the CVO's merge itself writes again.
#[tokio::test]
async fn rewriting_each_typed_kind_is_a_no_op_except_where_the_cvo_rewrites() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "merge-noop").await;
    let cluster = unique_name("merge-noop");
    let pod = json!({"containers": [{"name": "c", "image": "registry.example/app:1",
        "ports": [{"name": "http", "containerPort": 8080}],
        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
        "tolerations": [{"operator": "Exists"}], "nodeSelector": {"kubernetes.io/os": "linux"}});
    let job_pod = json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/app:1"}]});
    let manifests = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("{cluster}-ns"), "labels": {"a": "b"}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": ns}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": ns},
               "spec": {"selector": {"app": "x"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns},
               "spec": {"selector": {"matchLabels": {"app": "d"}},
                        "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod}}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": ns},
               "spec": {"selector": {"matchLabels": {"app": "ds"}},
                        "template": {"metadata": {"labels": {"app": "ds"}}, "spec": pod}}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": ns},
               "spec": {"template": {"spec": job_pod}}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj", "namespace": ns},
               "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": job_pod}}}}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "namespace": ns},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb", "namespace": ns},
               "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": ns}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": format!("{cluster}-cr")},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": format!("{cluster}-crb")},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{cluster}-cr")},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": ns}]}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": format!("widgets.{cluster}.example.com")},
               "spec": {"group": format!("{cluster}.example.com"), "scope": "Namespaced",
                        "names": {"kind": "Widget", "plural": "widgets"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": format!("{cluster}-vwc")},
               "webhooks": [{"name": "w.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                             "clientConfig": {"url": "https://w.example.com/validate"},
                             "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}]}]}),
    ];
    let mut second = Vec::new();
    let mut third = Vec::new();
    for m in &manifests {
        let (first, _) = cvo_write(&client, m).await;
        assert_eq!(first, Wrote::Created, "{}", m["kind"]);
        let kind = m["kind"].as_str().unwrap().to_owned();
        if cvo_write(&client, m).await.0 != Wrote::Nothing {
            second.push(kind.clone());
        }
        if cvo_write(&client, m).await.0 != Wrote::Nothing {
            third.push(kind);
        }
    }
    for m in &manifests {
        if m["metadata"]["namespace"].is_null() {
            let name = m["metadata"]["name"].as_str().unwrap();
            let _ = api(&client, m).delete(name, &Default::default()).await;
        }
    }
    support::delete_namespace(&client, &ns).await;
    // The CVO creates the manifest as it stands, so the first merge after a create adds the
    // defaults the API server does not fill in (a CronJob's job template `completionMode` and
    // `suspend`): one extra UPDATE. A Job is written on every pass: the manifest leaves
    // `parallelism`, `completions` and `manualSelector` out, the pointer rule clears them and
    // the server defaults them again (the CVO's own hot loop). Every other kind is a no-op.
    assert_eq!(second, ["Job", "CronJob"]);
    assert_eq!(third, ["Job"]);
}

/// Deployment: `replicas` left out is reset to 1; containers the manifest drops are removed;
/// `env` is replaced whole; a changed `imagePullPolicy` and `startupProbe` are never updated;
/// tolerations are only added; labels are never removed.
#[tokio::test]
async fn deployment_rules_on_the_server() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "merge-deploy").await;
    let old_c = json!({"name": "main", "image": "registry.example/app:1", "imagePullPolicy": "Always",
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "startupProbe": {"exec": {"command": ["true"]}}});
    let mut old = deployment(&ns, "d", old_c, json!({}));
    old["metadata"]["labels"] = json!({"keep": "me"});
    old["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "registry.example/side:1"}));
    old["spec"]["template"]["spec"]["tolerations"] = json!([{"key": "old", "operator": "Exists"}]);
    cvo_write(&client, &old).await;
    // By hand: scale to 3.
    patch(&client, &old, json!({"spec": {"replicas": 3}})).await;
    let new_c = json!({"name": "main", "image": "registry.example/app:2", "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "B", "value": "2"}], "startupProbe": {"exec": {"command": ["false"]}}});
    let mut new = deployment(&ns, "d", new_c, json!({}));
    new["spec"]["template"]["spec"]["tolerations"] = json!([{"key": "new", "operator": "Exists"}]);
    let (wrote, live) = cvo_write(&client, &new).await;
    assert_eq!(wrote, Wrote::Updated);
    let spec = &live["spec"];
    assert_eq!(spec["replicas"], 1, "replicas reset");
    let containers = spec["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "sidecar removed: {containers:?}");
    let c = &containers[0];
    assert_eq!(c["image"], "registry.example/app:2");
    assert_eq!(c["env"], json!([{"name": "B", "value": "2"}]));
    assert_eq!(c["imagePullPolicy"], "Always", "never updated");
    assert_eq!(
        c["startupProbe"]["exec"]["command"],
        json!(["true"]),
        "never updated"
    );
    assert_eq!(
        spec["template"]["spec"]["tolerations"],
        json!([{"key": "old", "operator": "Exists"}, {"key": "new", "operator": "Exists"}])
    );
    assert_eq!(live["metadata"]["labels"]["keep"], "me");
    support::delete_namespace(&client, &ns).await;
}

/// DaemonSet `updateStrategy` is never updated; ConfigMap keys and annotations are never
/// removed.
#[tokio::test]
async fn daemonset_strategy_and_configmap_keys_stay() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "merge-ds").await;
    let ds = |strategy: &str, image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": ns},
               "spec": {"selector": {"matchLabels": {"app": "ds"}}, "updateStrategy": {"type": strategy},
                        "template": {"metadata": {"labels": {"app": "ds"}},
                                     "spec": {"containers": [{"name": "c", "image": image}]}}}})
    };
    cvo_write(&client, &ds("OnDelete", "registry.example/a:1")).await;
    let (wrote, _) = cvo_write(&client, &ds("RollingUpdate", "registry.example/a:1")).await;
    assert_eq!(wrote, Wrote::Nothing);
    let (wrote, live) = cvo_write(&client, &ds("RollingUpdate", "registry.example/a:2")).await;
    assert_eq!(wrote, Wrote::Updated);
    assert_eq!(live["spec"]["updateStrategy"]["type"], "OnDelete");
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/a:2"
    );

    let cm = |data: Value, ann: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cfg", "namespace": ns, "annotations": ann}, "data": data})
    };
    cvo_write(&client, &cm(json!({"a": "1", "b": "2"}), json!({"x": "1"}))).await;
    let (wrote, live) = cvo_write(&client, &cm(json!({"a": "3"}), json!({"y": "2"}))).await;
    assert_eq!(wrote, Wrote::Updated);
    assert_eq!(live["data"], json!({"a": "3", "b": "2"}));
    assert_eq!(live["metadata"]["annotations"], json!({"x": "1", "y": "2"}));
    support::delete_namespace(&client, &ns).await;
}

/// The generic rule (a Secret): an annotation-only change is not written (resourceVersion
/// unchanged); a data change replaces labels and annotations whole.
#[tokio::test]
async fn generic_kind_metadata_only_change_is_not_written() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "merge-generic").await;
    let secret = |data: &str, ann: Value, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "s", "namespace": ns, "annotations": ann, "labels": labels},
               "data": {"k": data}})
    };
    let (_, created) = cvo_write(
        &client,
        &secret("YQ==", json!({"a": "1"}), json!({"l": "1"})),
    )
    .await;
    let (wrote, live) = cvo_write(
        &client,
        &secret("YQ==", json!({"a": "2"}), json!({"l": "1"})),
    )
    .await;
    assert_eq!(wrote, Wrote::Nothing);
    assert_eq!(
        live["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(live["metadata"]["annotations"], json!({"a": "1"}));
    let (wrote, live) = cvo_write(&client, &secret("Yg==", json!({"b": "3"}), json!({}))).await;
    assert_eq!(wrote, Wrote::Updated);
    assert_eq!(live["metadata"]["annotations"], json!({"b": "3"}));
    assert!(
        live["metadata"]
            .get("labels")
            .is_none_or(|l| l.as_object().is_some_and(|m| m.is_empty())),
        "{live}"
    );
    assert_eq!(live["data"]["k"], "Yg==");
    support::delete_namespace(&client, &ns).await;
}
