//! The API of an object given as JSON, for the tests that write objects by hand: its resource
//! (plural and scope) from a fixed table of the kinds the merge tests use.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

/// The resource of `object` (from its `apiVersion` and `kind`) and whether it is namespaced.
pub fn resource(object: &Value) -> (ApiResource, bool) {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (plural, namespaced) = match kind {
        "Deployment" => ("deployments", true),
        "DaemonSet" => ("daemonsets", true),
        "Job" => ("jobs", true),
        "CronJob" => ("cronjobs", true),
        "ConfigMap" => ("configmaps", true),
        "Secret" => ("secrets", true),
        "Service" => ("services", true),
        "ServiceAccount" => ("serviceaccounts", true),
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        "Namespace" => ("namespaces", false),
        "ClusterRole" => ("clusterroles", false),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "CustomResourceDefinition" => ("customresourcedefinitions", false),
        "ValidatingWebhookConfiguration" => ("validatingwebhookconfigurations", false),
        "OperatorGroup" => ("operatorgroups", true),
        "SecurityContextConstraints" => ("securitycontextconstraints", false),
        "ImageStream" => ("imagestreams", true),
        other => panic!("no plural for {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    (ApiResource::from_gvk_with_plural(&gvk, plural), namespaced)
}

/// The API of `object`'s collection (its namespace's, when namespaced).
pub fn api(client: &Client, object: &Value) -> Api<DynamicObject> {
    let (ar, namespaced) = resource(object);
    if namespaced {
        let ns = object["metadata"]["namespace"].as_str().expect("namespace");
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}
