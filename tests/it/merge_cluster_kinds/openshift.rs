//! The table's cases for the OpenShift kinds (OperatorGroup, SecurityContextConstraints,
//! ImageStream).

use serde_json::{Value, json};

use super::*;

pub(super) fn cases(ns: &str, suffix: &str) -> Vec<Case> {
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
