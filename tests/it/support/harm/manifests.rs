//! The manifest documents of the harm-shape payloads, as YAML text.

use super::super::apply::{INCLUDE, config_map};
use super::{DELETE, PLACEHOLDER, RBAC_API};

/// The pods of a Deployment: their account and what they mount or load.
pub(super) struct Pod<'a> {
    pub(super) account: &'a str,
    pub(super) config_map: Option<&'a str>,
    pub(super) secret: Option<&'a str>,
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

/// The operator's Deployment (one replica; `strategy` a YAML `type` value, or the default).
pub(super) fn deployment(ns: &str, name: &str, pod: &Pod, strategy: Option<&str>) -> String {
    let strategy = strategy.map_or_else(String::new, |s| format!("  strategy:\n    type: {s}\n"));
    let mut container = format!(
        "      - name: operator\n        image: registry.example.invalid/{ns}:{PLACEHOLDER}\n        env:\n        - name: RELEASE_VERSION\n          value: \"{PLACEHOLDER}\"\n"
    );
    let mut volumes = String::new();
    if let Some(secret) = pod.secret {
        container.push_str(&format!(
            "        envFrom:\n        - secretRef:\n            name: {secret}\n"
        ));
    }
    if let Some(cm) = pod.config_map {
        container.push_str(
            "        volumeMounts:\n        - name: config\n          mountPath: /etc/operator\n",
        );
        volumes = format!(
            "      volumes:\n      - name: config\n        configMap:\n          name: {cm}\n"
        );
    }
    object(
        "apps/v1",
        "Deployment",
        Some(ns),
        name,
        false,
        &format!(
            "spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: {name}\n{strategy}  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      serviceAccountName: {}\n      containers:\n{container}{volumes}",
            pod.account
        ),
    )
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
