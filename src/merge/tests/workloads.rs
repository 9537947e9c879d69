//! Workload kinds: Deployment, DaemonSet, Job, CronJob and their pod templates.

use serde_json::json;

use super::*;

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
