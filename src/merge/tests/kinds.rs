//! Core, RBAC, extension and OpenShift kinds, and the generic rule for every other kind.

use serde_json::json;

use super::*;

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
            // As the Go type encodes it: fields without omitempty written.
            Some(scc(
                json!({"priority": null, "allowPrivilegedContainer": false,
                "defaultAddCapabilities": null, "requiredDropCapabilities": null,
                "allowedCapabilities": null, "allowHostDirVolumePlugin": false, "volumes": null,
                "allowHostNetwork": false, "allowHostPorts": false, "allowHostPID": false,
                "allowHostIPC": false, "allowPrivilegeEscalation": true, "seLinuxContext": {},
                "runAsUser": {}, "supplementalGroups": {}, "fsGroup": {},
                "readOnlyRootFilesystem": false, "users": ["a"], "groups": null}),
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
