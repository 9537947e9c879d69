//! Real pods on the plane with a node (`hack/testplane.sh start --nodes 1`): `minicvo apply`
//! of a payload whose operator is the stand-in image (`hack/tools/standin`). The apply's
//! ClusterOperator wait ends only when the running pod, acting as its own ServiceAccount, has
//! taken its lease and reported the payload's version; its Deployment is then Available.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, LogParams};

use crate::support::apply::{
    INCLUDE, cluster_operator, clusteroperator_crd, namespace, write_payload,
};
use crate::support::node;

/// The manifests of one stand-in operator: namespace, ServiceAccount, the rights it needs
/// (its lease, its ClusterOperator), the Deployment and the ClusterOperator to wait on.
pub fn standin_operator(ns: &str, operator: &str, version: &str) -> Vec<(String, String)> {
    let rbac = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: operator\n  namespace: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\nrules:\n\
         - apiGroups: [\"coordination.k8s.io\"]\n  resources: [\"leases\"]\n  verbs: [\"get\", \"create\", \"update\"]\n\
         - apiGroups: [\"config.openshift.io\"]\n  resources: [\"clusteroperators\", \"clusteroperators/status\"]\n  verbs: [\"get\", \"update\"]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {ns}\nsubjects:\n- kind: ServiceAccount\n  name: operator\n  namespace: {ns}\n"
    );
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: operator\n  namespace: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n\
         spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: operator\n  template:\n    metadata:\n      labels:\n        app: operator\n\
         \x20   spec:\n      serviceAccountName: operator\n      hostNetwork: true\n      terminationGracePeriodSeconds: 5\n      containers:\n\
         \x20     - name: operator\n        image: {}\n        env:\n{}",
        node::standin_image(),
        node::standin_env(operator, version, 3)
    );
    vec![
        clusteroperator_crd(),
        (format!("0000_50_{ns}_00_namespace.yaml"), namespace(ns)),
        (format!("0000_50_{ns}_03_rbac.yaml"), rbac),
        (format!("0000_50_{ns}_04_deployment.yaml"), deployment),
        (
            format!("0000_50_{ns}_06_clusteroperator.yaml"),
            cluster_operator(operator, version),
        ),
    ]
}

fn clusteroperators(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterOperator");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

#[tokio::test]
async fn standin_pod_reports_its_clusteroperator_and_apply_completes() {
    let client = node::client().await;
    let ns = node::namespace(&client, "node-standin").await;
    let operator = ns.to_string();
    let dir = tempfile::tempdir().unwrap();
    let payload = write_payload(
        dir.path(),
        "1.0.0",
        &standin_operator(&ns, &operator, "1.0.0"),
    );

    let start = Instant::now();
    let (code, stdout, stderr) = node::apply(
        &payload,
        &["--no-cluster-version", "--wait-timeout", "90s"],
        Duration::from_secs(120),
    )
    .await;
    let applied = start.elapsed();
    let pods = node::pod_summary(&client, &ns).await;
    assert_eq!(code, 0, "apply failed: {stderr}\n{stdout}\npods: {pods}");
    let available = node::wait_available(&client, &ns, "operator", Duration::from_secs(30)).await;
    eprintln!("apply with a real operator pod: {applied:?}; then Available after {available:?}");

    // The version came from the pod, written as its ServiceAccount.
    let co = clusteroperators(&client).get(&operator).await.unwrap();
    let versions = &co.data["status"]["versions"];
    assert_eq!(versions[0]["version"], "1.0.0", "{versions}");
    let writers: Vec<_> = co
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.subresource.as_deref() == Some("status"))
        .filter_map(|f| f.manager.clone())
        .collect();
    assert!(
        writers
            .iter()
            .any(|m| m.starts_with("minicvo-standin-operator")),
        "status writers: {writers:?}"
    );

    // One pod, never restarted, which took the lease before it reported.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let list = pods
        .list(&ListParams::default().labels("app=operator"))
        .await
        .unwrap();
    assert_eq!(
        list.items.len(),
        1,
        "{}",
        node::pod_summary(&client, &ns).await
    );
    let pod = &list.items[0];
    let restarts: i32 = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| c.restart_count)
        .sum();
    assert_eq!(restarts, 0, "{}", node::pod_summary(&client, &ns).await);
    let log = pods
        .logs(pod.metadata.name.as_deref().unwrap(), &LogParams::default())
        .await
        .expect("the pod's log through the API server (kubelet)");
    let lease = log
        .find("acquired lease")
        .unwrap_or_else(|| panic!("no lease in the log:\n{log}"));
    let reported = log
        .find(&format!(
            "reported clusteroperator {operator} at version 1.0.0"
        ))
        .unwrap_or_else(|| panic!("no report in the log:\n{log}"));
    assert!(lease < reported, "{log}");

    let _ =
        Api::<DynamicObject>::delete(&clusteroperators(&client), &operator, &Default::default())
            .await;
    let rbac: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
    let _ = rbac.delete(&ns, &Default::default()).await;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    let _ = roles.delete(&ns, &Default::default()).await;
}
