//! The table's cases for ConfigMap and the workload kinds (Deployment, DaemonSet, Job,
//! CronJob).

use serde_json::{Value, json};

use super::*;

/// ConfigMap and the workload kinds, in namespace `ns`.
pub(super) fn cases(ns: &str) -> Vec<Case> {
    let probe = json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10});
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
    ]
}
