//! The manifest documents of the harm-shape payloads, as YAML text.

use serde_json::json;

use super::super::apply::{INCLUDE, config_map};
use super::{DELETE, PLACEHOLDER, RBAC_API, Standin};

/// The pods of a Deployment: their account and what they mount or load.
#[derive(Default)]
pub(super) struct Pod<'a> {
    pub(super) account: &'a str,
    /// A ConfigMap mounted as a volume.
    pub(super) config_map: Option<&'a str>,
    /// A Secret the container's environment comes from (`envFrom`).
    pub(super) secret: Option<&'a str>,
    /// A ConfigMap one environment variable comes from (`valueFrom.configMapKeyRef`).
    pub(super) env_config: Option<&'a str>,
    /// The Deployment's `minReadySeconds`: how long an old pod outlives its replacement.
    pub(super) min_ready: Option<u32>,
}

/// One manifest document: `apiVersion`, `kind`, metadata (namespace when given, the include
/// annotation, the delete annotation when `delete`), then `body`.
pub(super) fn object(
    api: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
    delete: bool,
    body: &str,
) -> String {
    let ns = ns.map_or_else(String::new, |ns| format!("  namespace: {ns}\n"));
    let delete = if delete {
        format!("    {DELETE}: \"true\"\n")
    } else {
        String::new()
    };
    format!(
        "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}  annotations:\n    {INCLUDE}: \"true\"\n{delete}{body}"
    )
}

pub(super) fn service_account(ns: &str, name: &str, delete: bool) -> String {
    object("v1", "ServiceAccount", Some(ns), name, delete, "")
}

/// Lease rights (`verbs`) on leases.
pub(super) fn lease_rules(verbs: &str) -> String {
    format!(
        "rules:\n- apiGroups: [\"coordination.k8s.io\"]\n  resources: [leases]\n  verbs: {verbs}\n"
    )
}

pub(super) const LEASE_VERBS: &str = "[get, list, watch, create, update, patch, delete]";
pub(super) const LEASE_VERBS_NARROW: &str = "[get, list, watch]";

pub(super) fn role(ns: &str, name: &str, delete: bool) -> String {
    object(
        RBAC_API,
        "Role",
        Some(ns),
        name,
        delete,
        &lease_rules(LEASE_VERBS),
    )
}

pub(super) fn subjects(ns: &str, accounts: &[&str]) -> String {
    let mut s = String::from("subjects:\n");
    for a in accounts {
        s.push_str(&format!(
            "- kind: ServiceAccount\n  name: {a}\n  namespace: {ns}\n"
        ));
    }
    s
}

pub(super) fn role_binding(
    ns: &str,
    name: &str,
    role_kind: &str,
    role: &str,
    accounts: &[&str],
    delete: bool,
) -> String {
    object(
        RBAC_API,
        "RoleBinding",
        Some(ns),
        name,
        delete,
        &format!(
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role_kind}\n  name: {role}\n{}",
            subjects(ns, accounts)
        ),
    )
}

/// ClusterRole and ClusterRoleBinding `ID-status`: write ClusterOperators and their status.
pub(super) fn status_rbac(id: &str, accounts: &[&str]) -> String {
    let name = format!("{id}-status");
    let role = object(
        RBAC_API,
        "ClusterRole",
        None,
        &name,
        false,
        "rules:\n- apiGroups: [\"config.openshift.io\"]\n  resources: [clusteroperators, clusteroperators/status]\n  verbs: [get, list, watch, create, update, patch]\n",
    );
    let binding = object(
        RBAC_API,
        "ClusterRoleBinding",
        None,
        &name,
        false,
        &format!(
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {name}\n{}",
            subjects(id, accounts)
        ),
    );
    format!("{role}---\n{binding}")
}

/// ConfigMap `settings`: the operator's own configuration object, which its pods do not mount.
pub(super) fn settings(ns: &str, value: &str) -> String {
    config_map(ns, "settings", value, &[])
}

pub(super) fn secret(ns: &str, name: &str, delete: bool) -> String {
    object(
        "v1",
        "Secret",
        Some(ns),
        name,
        delete,
        "type: Opaque\nstringData:\n  token: not-a-secret\n",
    )
}

/// Where the pods of a Deployment find the ConfigMap they mount (its data key `key`).
pub(super) const MOUNTED_FILE: &str = "/etc/operator/key";

/// The operator's Deployment (one replica; `strategy` a `type` value, or the default). With
/// `standin`, its container is the stand-in operator, made to use what the pod uses: it reads
/// the mounted file and checks its environment every second, and reports ClusterOperator
/// `ns` as itself while it leads.
pub(super) fn deployment(
    ns: &str,
    name: &str,
    pod: &Pod,
    strategy: Option<&str>,
    standin: Option<&Standin>,
) -> String {
    let mut env = vec![json!({"name": "RELEASE_VERSION", "value": PLACEHOLDER})];
    let mut container = json!({
        "name": "operator",
        "image": format!("registry.example.invalid/{ns}:{PLACEHOLDER}"),
    });
    let mut spec = json!({"serviceAccountName": pod.account});
    let (mut files, mut needed_env) = (Vec::new(), Vec::new());
    if let Some(secret) = pod.secret {
        container["envFrom"] = json!([{"secretRef": {"name": secret}}]);
        needed_env.push("token");
    }
    if let Some(cm) = pod.env_config {
        env.push(
            json!({"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "key"}}}),
        );
        needed_env.push("MODE");
    }
    if let Some(cm) = pod.config_map {
        container["volumeMounts"] = json!([{"name": "config", "mountPath": "/etc/operator"}]);
        spec["volumes"] = json!([{"name": "config", "configMap": {"name": cm}}]);
        files.push(MOUNTED_FILE);
    }
    if let Some(s) = standin {
        container["image"] = json!(s.image);
        container["imagePullPolicy"] = json!("IfNotPresent");
        let plain = |n: &str, v: String| json!({"name": n, "value": v});
        // Empty values are left out: the API server drops them, and the simulator would not
        // find the payload's template in the live Deployment.
        for (n, v) in [
            ("STANDIN_CLUSTEROPERATOR", ns.to_string()),
            ("STANDIN_LEASE_DURATION", "3".into()),
            ("STANDIN_REQUIRE_FILES", files.join(",")),
            ("STANDIN_REQUIRE_ENV", needed_env.join(",")),
            ("STANDIN_TERMINATION_DELAY", s.linger.to_string()),
        ] {
            if !v.is_empty() && v != "0" {
                env.push(plain(n, v));
            }
        }
        env.push(
            json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        );
        if let Some((host, port)) = s.api.as_deref().and_then(|a| a.rsplit_once(':')) {
            spec["hostNetwork"] = json!(true);
            env.extend([
                plain("KUBERNETES_SERVICE_HOST", host.into()),
                plain("KUBERNETES_SERVICE_PORT", port.into()),
            ]);
        }
        spec["terminationGracePeriodSeconds"] = json!(s.linger + 5);
    }
    container["env"] = json!(env);
    spec["containers"] = json!([container]);
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "annotations": {INCLUDE: "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    });
    if let Some(s) = strategy {
        deployment["spec"]["strategy"] = json!({"type": s});
    }
    if let Some(n) = pod.min_ready {
        deployment["spec"]["minReadySeconds"] = json!(n);
    }
    serde_json::to_string_pretty(&deployment).expect("JSON") + "\n"
}

/// The ClusterRole `<id>-leases` with the lease verbs `verbs`.
pub(super) fn lease_cluster_role(id: &str, verbs: &str) -> String {
    object(
        RBAC_API,
        "ClusterRole",
        None,
        &format!("{id}-leases"),
        false,
        &lease_rules(verbs),
    )
}
