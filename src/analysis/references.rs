//! What a workload's pods use: their ServiceAccount (the namespace's `default` when none is
//! named), the RoleBindings and ClusterRoleBindings that name that account and the roles they
//! grant, ConfigMaps and Secrets mounted as volumes or read by `env` and `envFrom`, and
//! image pull Secrets. Deleting any of these while the pods still run can break them.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::manifest::{Manifest, ObjectId};

const RBAC: &str = "rbac.authorization.k8s.io";

/// Kinds whose pods are described by a pod template (or are a Pod).
pub const WORKLOAD_KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "DaemonSet"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "Pod"),
];

/// How a workload uses an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Via {
    /// The pods run as this ServiceAccount; `implicit` when the pod spec names none and the
    /// namespace's `default` account is used.
    ServiceAccount {
        /// No `serviceAccountName` in the pod spec.
        implicit: bool,
    },
    /// A binding whose subjects name the pods' ServiceAccount: deleting it takes the
    /// permissions away from the running pods.
    Binding {
        /// The pods' ServiceAccount.
        service_account: String,
    },
    /// The role granted to the pods' ServiceAccount by a binding.
    Role {
        /// The binding, as `kind name`.
        binding: String,
        /// The pods' ServiceAccount.
        service_account: String,
    },
    /// A `configMap`, `secret` or `projected` volume.
    Volume {
        /// Volume name.
        volume: String,
    },
    /// `env[].valueFrom` of a container.
    Env {
        /// Container name.
        container: String,
        /// Variable name.
        variable: String,
    },
    /// `envFrom` of a container.
    EnvFrom {
        /// Container name.
        container: String,
    },
    /// `imagePullSecrets`.
    ImagePullSecret,
}

/// One object a workload uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Use {
    /// The object used.
    pub target: ObjectId,
    /// How.
    pub via: Via,
    /// The reference is marked `optional: true`: pods start without the object.
    pub optional: bool,
}

/// Describes the use from the used object's point of view, as what the workload's pods do
/// with "it": `run as ServiceAccount ns/default, which it names as a subject`,
/// `mount it as volume config (optional)`.
impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = if self.optional { " (optional)" } else { "" };
        match &self.via {
            Via::ServiceAccount { implicit: true } => {
                f.write_str("run as it (no serviceAccountName: the namespace's default account)")
            }
            Via::ServiceAccount { implicit: false } => f.write_str("run as it"),
            Via::Binding { service_account } => {
                write!(f, "run as {service_account}, which it names as a subject")
            }
            Via::Role {
                binding,
                service_account,
            } => write!(f, "run as {service_account}, which {binding} grants it"),
            Via::Volume { volume } => write!(f, "mount it as volume {volume}{opt}"),
            Via::Env {
                container,
                variable,
            } => write!(f, "read it into ${variable} of container {container}{opt}"),
            Via::EnvFrom { container } => {
                write!(
                    f,
                    "load the environment of container {container} from it{opt}"
                )
            }
            Via::ImagePullSecret => f.write_str("pull images with it"),
        }
    }
}

/// Whether the manifest is a workload (see [`WORKLOAD_KINDS`]).
#[must_use]
pub fn is_workload(m: &Manifest) -> bool {
    WORKLOAD_KINDS
        .iter()
        .any(|(g, k)| m.id.group == *g && m.id.kind == *k)
}

/// The pod spec of a workload: `spec` of a Pod, `spec.jobTemplate.spec.template.spec` of a
/// CronJob, `spec.template.spec` of the others.
#[must_use]
pub fn pod_spec(m: &Manifest) -> Option<&Value> {
    if !is_workload(m) {
        return None;
    }
    let spec = m.object.get("spec")?;
    match m.id.kind.as_str() {
        "Pod" => Some(spec),
        "CronJob" => spec
            .get("jobTemplate")?
            .get("spec")?
            .get("template")?
            .get("spec"),
        _ => spec.get("template")?.get("spec"),
    }
}

fn core(kind: &str, namespace: Option<&String>, name: &str) -> ObjectId {
    ObjectId {
        group: String::new(),
        kind: kind.to_string(),
        namespace: namespace.cloned(),
        name: name.to_string(),
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn optional(v: &Value) -> bool {
    v.get("optional").and_then(Value::as_bool) == Some(true)
}

fn array<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The ServiceAccount the workload's pods run as (`default` when unset), and whether it was
/// implicit.
#[must_use]
pub fn service_account(m: &Manifest) -> Option<(ObjectId, bool)> {
    let spec = pod_spec(m)?;
    let named = str_at(spec, "serviceAccountName").or_else(|| str_at(spec, "serviceAccount"));
    let ns = m.id.namespace.as_ref();
    Some(match named {
        Some(n) => (core("ServiceAccount", ns, n), false),
        None => (core("ServiceAccount", ns, "default"), true),
    })
}

/// The objects a workload uses directly, from its pod spec: ServiceAccount, volumes, `env`,
/// `envFrom` and image pull Secrets. Empty for a manifest that is not a workload.
#[must_use]
pub fn direct_uses(m: &Manifest) -> Vec<Use> {
    let Some(spec) = pod_spec(m) else {
        return Vec::new();
    };
    let ns = m.id.namespace.as_ref();
    let mut uses = Vec::new();
    if let Some((sa, implicit)) = service_account(m) {
        uses.push(Use {
            target: sa,
            via: Via::ServiceAccount { implicit },
            optional: false,
        });
    }
    for s in array(spec, "imagePullSecrets") {
        if let Some(name) = str_at(s, "name") {
            uses.push(Use {
                target: core("Secret", ns, name),
                via: Via::ImagePullSecret,
                optional: false,
            });
        }
    }
    for vol in array(spec, "volumes") {
        let volume = str_at(vol, "name").unwrap_or("").to_string();
        let mut add = |kind: &str, name: Option<&str>, src: &Value| {
            if let Some(name) = name {
                uses.push(Use {
                    target: core(kind, ns, name),
                    via: Via::Volume {
                        volume: volume.clone(),
                    },
                    optional: optional(src),
                });
            }
        };
        if let Some(cm) = vol.get("configMap") {
            add("ConfigMap", str_at(cm, "name"), cm);
        }
        if let Some(s) = vol.get("secret") {
            add("Secret", str_at(s, "secretName"), s);
        }
        if let Some(p) = vol.get("projected") {
            for src in array(p, "sources") {
                if let Some(cm) = src.get("configMap") {
                    add("ConfigMap", str_at(cm, "name"), cm);
                }
                if let Some(s) = src.get("secret") {
                    add("Secret", str_at(s, "name"), s);
                }
            }
        }
    }
    let containers = ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|k| array(spec, k));
    for c in containers {
        let container = str_at(c, "name").unwrap_or("").to_string();
        for e in array(c, "env") {
            let Some(from) = e.get("valueFrom") else {
                continue;
            };
            let variable = str_at(e, "name").unwrap_or("").to_string();
            for (key, kind) in [("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")] {
                if let Some(r) = from.get(key)
                    && let Some(name) = str_at(r, "name")
                {
                    uses.push(Use {
                        target: core(kind, ns, name),
                        via: Via::Env {
                            container: container.clone(),
                            variable: variable.clone(),
                        },
                        optional: optional(r),
                    });
                }
            }
        }
        for e in array(c, "envFrom") {
            for (key, kind) in [("configMapRef", "ConfigMap"), ("secretRef", "Secret")] {
                if let Some(r) = e.get(key)
                    && let Some(name) = str_at(r, "name")
                {
                    uses.push(Use {
                        target: core(kind, ns, name),
                        via: Via::EnvFrom {
                            container: container.clone(),
                        },
                        optional: optional(r),
                    });
                }
            }
        }
    }
    uses
}

/// Whether a binding subject names the ServiceAccount `sa`: a `ServiceAccount` subject (its
/// namespace defaulting to the binding's), the `system:serviceaccount:<ns>:<name>` user, or
/// the `system:serviceaccounts` and `system:serviceaccounts:<ns>` groups.
fn subject_names(subject: &Value, binding: &Manifest, sa: &ObjectId) -> bool {
    let Some(name) = str_at(subject, "name") else {
        return false;
    };
    let sa_ns = sa.namespace.as_deref().unwrap_or("");
    match str_at(subject, "kind") {
        Some("ServiceAccount") => {
            let ns = str_at(subject, "namespace").or(binding.id.namespace.as_deref());
            name == sa.name && ns == sa.namespace.as_deref()
        }
        Some("User") => name == format!("system:serviceaccount:{sa_ns}:{}", sa.name),
        Some("Group") => {
            name == "system:serviceaccounts" || name == format!("system:serviceaccounts:{sa_ns}")
        }
        _ => false,
    }
}

/// The bindings of a payload indexed by the ServiceAccounts their subjects may name, so that
/// [`binding_uses`] of many workloads reads only the bindings that can match instead of all
/// of them. A candidate is re-checked by [`binding_uses`]; the index only narrows.
pub struct BindingIndex<'a> {
    bindings: Vec<&'a Manifest>,
    /// (namespace, name) of a `ServiceAccount` subject, or of a `User`
    /// `system:serviceaccount:NS:NAME` subject → positions.
    by_account: std::collections::HashMap<(String, String), Vec<usize>>,
    /// `Group` subjects: `system:serviceaccounts` under `""`, `system:serviceaccounts:NS` under
    /// `NS` → positions.
    by_group: std::collections::HashMap<String, Vec<usize>>,
}

impl<'a> BindingIndex<'a> {
    /// Indexes `bindings` (anything else is ignored), keeping their order.
    #[must_use]
    pub fn new(bindings: impl IntoIterator<Item = &'a Manifest>) -> Self {
        let bindings: Vec<&Manifest> = bindings.into_iter().filter(|b| is_binding(b)).collect();
        let mut by_account: std::collections::HashMap<(String, String), Vec<usize>> =
            std::collections::HashMap::new();
        let mut by_group: std::collections::HashMap<String, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, b) in bindings.iter().enumerate() {
            for subject in array(&b.object, "subjects") {
                let Some(name) = str_at(subject, "name") else {
                    continue;
                };
                match str_at(subject, "kind") {
                    Some("ServiceAccount") => {
                        let ns = str_at(subject, "namespace")
                            .or(b.id.namespace.as_deref())
                            .unwrap_or_default();
                        by_account
                            .entry((ns.to_string(), name.to_string()))
                            .or_default()
                            .push(i);
                    }
                    Some("User") => {
                        if let Some((ns, sa)) = name
                            .strip_prefix("system:serviceaccount:")
                            .and_then(|r| r.split_once(':'))
                        {
                            by_account
                                .entry((ns.to_string(), sa.to_string()))
                                .or_default()
                                .push(i);
                        }
                    }
                    Some("Group") => {
                        if name == "system:serviceaccounts" {
                            by_group.entry(String::new()).or_default().push(i);
                        } else if let Some(ns) = name.strip_prefix("system:serviceaccounts:") {
                            by_group.entry(ns.to_string()).or_default().push(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        BindingIndex {
            bindings,
            by_account,
            by_group,
        }
    }

    /// The positions (in the order given to [`BindingIndex::new`]) of the bindings that may
    /// name the ServiceAccount of `workload`.
    #[must_use]
    pub fn positions(&self, workload: &Manifest) -> Vec<usize> {
        let Some((sa, _)) = service_account(workload) else {
            return Vec::new();
        };
        let ns = sa.namespace.clone().unwrap_or_default();
        let mut out: Vec<usize> = self
            .by_account
            .get(&(ns.clone(), sa.name.clone()))
            .into_iter()
            .chain(self.by_group.get(""))
            .chain(self.by_group.get(&ns))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The bindings that may name the ServiceAccount of `workload`, in order.
    #[must_use]
    pub fn candidates(&self, workload: &Manifest) -> Vec<&'a Manifest> {
        self.positions(workload)
            .into_iter()
            .map(|i| self.bindings[i])
            .collect()
    }
}

/// Whether the manifest is a RoleBinding or ClusterRoleBinding.
#[must_use]
pub fn is_binding(m: &Manifest) -> bool {
    m.id.group == RBAC && (m.id.kind == "RoleBinding" || m.id.kind == "ClusterRoleBinding")
}

/// The role a binding grants.
#[must_use]
pub fn role_of(binding: &Manifest) -> Option<ObjectId> {
    let r = binding.object.get("roleRef")?;
    let name = str_at(r, "name")?;
    let (kind, namespace) = match str_at(r, "kind")? {
        "ClusterRole" => ("ClusterRole", None),
        "Role" => ("Role", binding.id.namespace.clone()),
        _ => return None,
    };
    Some(ObjectId {
        group: RBAC.to_string(),
        kind: kind.to_string(),
        namespace,
        name: name.to_string(),
    })
}

/// The uses a workload gets through the bindings among `bindings`: each binding naming its
/// ServiceAccount, and the role that binding grants.
#[must_use]
pub fn binding_uses<'a>(
    workload: &Manifest,
    bindings: impl IntoIterator<Item = &'a Manifest>,
) -> Vec<Use> {
    let Some((sa, _)) = service_account(workload) else {
        return Vec::new();
    };
    let mut uses = Vec::new();
    for b in bindings.into_iter().filter(|b| is_binding(b)) {
        let names_it = array(&b.object, "subjects").any(|s| subject_names(s, b, &sa));
        if !names_it {
            continue;
        }
        uses.push(Use {
            target: b.id.clone(),
            via: Via::Binding {
                service_account: sa.to_string(),
            },
            optional: false,
        });
        if let Some(role) = role_of(b) {
            uses.push(Use {
                target: role,
                via: Via::Role {
                    binding: b.id.to_string(),
                    service_account: sa.to_string(),
                },
                optional: false,
            });
        }
    }
    uses
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Source;
    use serde_json::json;

    fn manifest(object: Value) -> Manifest {
        let api = object["apiVersion"].as_str().unwrap().to_string();
        let group = api.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        Manifest {
            source: Source::ReleaseManifests,
            file: "0000_50_a_00.yaml".into(),
            document: 0,
            line: 1,
            id: ObjectId {
                group,
                kind: object["kind"].as_str().unwrap().into(),
                namespace: object["metadata"]["namespace"].as_str().map(str::to_string),
                name: object["metadata"]["name"].as_str().unwrap().into(),
            },
            api_version: api,
            object: object.into(),
        }
    }

    fn deployment(pod: Value) -> Manifest {
        manifest(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "op", "namespace": "ns"},
            "spec": {"template": {"spec": pod}},
        }))
    }

    fn targets(uses: &[Use]) -> Vec<String> {
        uses.iter().map(|u| u.target.to_string()).collect()
    }

    #[test]
    fn unset_service_account_is_the_namespace_default() {
        let d = deployment(json!({"containers": [{"name": "c"}]}));
        let uses = direct_uses(&d);
        assert_eq!(targets(&uses), ["ServiceAccount ns/default"]);
        assert_eq!(uses[0].via, Via::ServiceAccount { implicit: true });
    }

    #[test]
    fn every_pod_spec_reference_is_a_use() {
        let d = deployment(json!({
            "serviceAccountName": "op",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "v1", "configMap": {"name": "cm-vol"}},
                {"name": "v2", "secret": {"secretName": "s-vol", "optional": true}},
                {"name": "v3", "projected": {"sources": [
                    {"configMap": {"name": "cm-proj"}}, {"secret": {"name": "s-proj"}}]}},
            ],
            "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "s-from"}}]}],
            "containers": [{"name": "c",
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "a"}}},
                        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "b"}}},
                        {"name": "C", "value": "plain"}],
                "envFrom": [{"configMapRef": {"name": "cm-from"}}]}],
        }));
        let uses = direct_uses(&d);
        assert_eq!(
            targets(&uses),
            [
                "ServiceAccount ns/op",
                "Secret ns/pull",
                "ConfigMap ns/cm-vol",
                "Secret ns/s-vol",
                "ConfigMap ns/cm-proj",
                "Secret ns/s-proj",
                "Secret ns/s-from",
                "ConfigMap ns/cm-env",
                "Secret ns/s-env",
                "ConfigMap ns/cm-from",
            ]
        );
        assert!(uses[3].optional);
        assert!(!uses[2].optional);
    }

    #[test]
    fn cronjob_pod_template_is_found() {
        let c = manifest(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "cj", "namespace": "ns"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"serviceAccountName": "x"}}}}},
        }));
        assert_eq!(targets(&direct_uses(&c)), ["ServiceAccount ns/x"]);
    }

    #[test]
    fn non_workloads_use_nothing() {
        let cm = manifest(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns"}}));
        assert!(direct_uses(&cm).is_empty());
    }

    #[test]
    fn bindings_naming_the_account_and_their_roles_are_uses() {
        let d = deployment(json!({"containers": []}));
        let crb = manifest(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "default-account"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "ns"}],
        }));
        let rb_implicit_ns = manifest(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "rb", "namespace": "ns"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "default"}],
        }));
        let group = manifest(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "all-in-ns"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts:ns"}],
        }));
        let other = manifest(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "other"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "elsewhere"},
                         {"kind": "User", "name": "system:serviceaccount:ns:op"}],
        }));
        let uses = binding_uses(&d, [&crb, &rb_implicit_ns, &group, &other]);
        assert_eq!(
            targets(&uses),
            [
                "ClusterRoleBinding.rbac.authorization.k8s.io default-account",
                "ClusterRole.rbac.authorization.k8s.io admin",
                "RoleBinding.rbac.authorization.k8s.io ns/rb",
                "Role.rbac.authorization.k8s.io ns/r",
                "ClusterRoleBinding.rbac.authorization.k8s.io all-in-ns",
                "ClusterRole.rbac.authorization.k8s.io view",
            ]
        );
    }
}
