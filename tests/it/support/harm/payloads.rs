//! The files of the harm-shape payloads: one builder for a payload's files, and what OLD and
//! NEW hold for each shape.

use std::path::Path;

use serde_json::json;

use super::super::apply::{cluster_operator, config_map, namespace, write_payload};
use super::manifests::{
    LEASE_VERBS, LEASE_VERBS_NARROW, Pod, deployment, lease_cluster_role, role, role_binding,
    secret, service_account, settings, status_rbac,
};
use super::{DELETE, NEW_SA, OLD_SA, PLACEHOLDER, Shape, Standin};

/// Run-level of the harmful change (before the Deployment update at 50).
const EARLY: u32 = 40;
/// Run-level of the fixed change (after the ClusterOperator wait at 50).
const LATE: u32 = 60;
/// Run-level of the clean-up OpenShift payloads do last, after every ClusterOperator wait.
const CLEANUP: u32 = 90;

/// Writes a payload at `dir` with `version` (and `previous` in its release-metadata).
pub(super) fn payload(
    dir: &Path,
    version: &str,
    previous: Option<&str>,
    files: Vec<(String, String)>,
) {
    write_payload(dir, version, &files);
    let previous: Vec<&str> = previous.into_iter().collect();
    std::fs::write(
        dir.join("release-manifests/release-metadata"),
        json!({"kind": "cincinnati-metadata-v0", "version": version, "previous": previous, "metadata": {}})
            .to_string(),
    )
    .expect("write release-metadata");
}

/// Builder for the files of one payload: `0000_<level>_<ID>_<nn>_<what>.yaml`.
pub(super) struct Files<'a> {
    id: &'a str,
    standin: Option<&'a Standin>,
    pub(super) files: Vec<(String, String)>,
}

impl<'a> Files<'a> {
    pub(super) fn new(id: &'a str, standin: Option<&'a Standin>) -> Self {
        Files {
            id,
            standin,
            files: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, level: u32, nn: &str, what: &str, text: String) -> &mut Self {
        self.files.push((
            format!("0000_{level:02}_{}_{nn}_{what}.yaml", self.id),
            text,
        ));
        self
    }

    /// The ServiceAccounts `accounts` at 50 and the status rights for `status` (which may name
    /// accounts the payload no longer creates).
    pub(super) fn accounts(&mut self, accounts: &[&str], status: &[&str]) -> &mut Self {
        let id = self.id;
        let docs: Vec<String> = accounts
            .iter()
            .map(|a| service_account(id, a, false))
            .collect();
        self.add(50, "01", "serviceaccount", docs.join("---\n"))
            .add(50, "02", "status-rbac", status_rbac(id, status))
    }

    /// The lease RBAC documents at 50.
    pub(super) fn rbac(&mut self, docs: &[String]) -> &mut Self {
        self.add(50, "02", "rbac", docs.join("---\n"))
    }

    /// The lease Role `leases` and its RoleBinding to the old account, at 50.
    pub(super) fn lease_rights(&mut self) -> &mut Self {
        let ns = self.id;
        self.rbac(&[
            role(ns, "leases", false),
            role_binding(ns, "leases", "Role", "leases", &[OLD_SA], false),
        ])
    }

    /// The Deployment of `pod` (rolled out with `strategy`, or the default) and the
    /// ClusterOperator, at 50.
    pub(super) fn operator(&mut self, pod: &Pod, strategy: Option<&str>) -> &mut Self {
        let (ns, id, standin) = (self.id, self.id, self.standin);
        self.add(
            50,
            "04",
            "deployment",
            deployment(ns, &format!("{id}-operator"), pod, strategy, standin),
        )
        .add(
            50,
            "06",
            "clusteroperator",
            cluster_operator(id, PLACEHOLDER),
        )
    }
}

/// ConfigMap `name` of the operator's namespace, deleted by the payload when `delete`.
fn config(ns: &str, name: &str, value: &str, delete: bool) -> String {
    if delete {
        config_map(ns, name, value, &[(DELETE, "true")])
    } else {
        config_map(ns, name, value, &[])
    }
}

/// The files of OLD for `shape`.
pub(super) fn old_files(
    shape: Shape,
    id: &str,
    standin: Option<&Standin>,
) -> Vec<(String, String)> {
    let ns = id;
    let mut f = Files::new(id, standin);
    f.add(50, "00", "namespace", namespace(ns))
        .accounts(&[OLD_SA], &[OLD_SA]);
    if shape == Shape::ClusterRoleNarrowed {
        let role = format!("{id}-leases");
        f.rbac(&[
            lease_cluster_role(id, LEASE_VERBS),
            role_binding(ns, "leases", "ClusterRole", &role, &[OLD_SA], false),
        ]);
    } else {
        f.lease_rights();
    }
    f.add(50, "03", "settings", settings(ns, "old"));
    let mut pod = Pod {
        account: OLD_SA,
        ..Pod::default()
    };
    match shape {
        Shape::ConfigMapDeleted | Shape::ConfigMapStillMounted => {
            f.add(50, "03", "config", config(ns, "config", "old", false));
            pod.config_map = Some("config");
        }
        Shape::EnvStillReferenced => {
            f.add(
                50,
                "03",
                "env-config",
                config(ns, "env-config", "old", false),
            );
            pod.env_config = Some("env-config");
        }
        Shape::SecretDeleted => {
            f.add(50, "03", "secret", secret(ns, "credentials", false));
            pod.secret = Some("credentials");
        }
        _ => {}
    }
    f.operator(&pod, None);
    f.files
}

/// The files of NEW for `shape`: the harmful twin, or the fixed one.
pub(super) fn new_files(
    shape: Shape,
    id: &str,
    harmful: bool,
    standin: Option<&Standin>,
) -> Vec<(String, String)> {
    let ns = id;
    let level = if harmful { EARLY } else { LATE };
    let both = [OLD_SA, NEW_SA];
    let mut f = Files::new(id, standin);
    f.add(50, "00", "namespace", namespace(ns))
        .add(50, "03", "settings", settings(ns, "new"));
    let mut pod = Pod {
        account: NEW_SA,
        ..Pod::default()
    };
    match shape {
        Shape::RoleBindingDeleted => {
            f.accounts(&both, &both)
                .rbac(&[
                    role(ns, "leases", false),
                    role_binding(ns, "leases-v2", "Role", "leases", &[NEW_SA], false),
                ])
                .add(
                    level,
                    "90",
                    "deletion",
                    role_binding(ns, "leases", "Role", "leases", &[OLD_SA], true),
                );
        }
        Shape::RoleDeleted => {
            f.accounts(&both, &both)
                .rbac(&[
                    role(ns, "leases-v2", false),
                    role_binding(ns, "leases-v2", "Role", "leases-v2", &[NEW_SA], false),
                ])
                .add(level, "90", "deletion", role(ns, "leases", true))
                .add(
                    LATE,
                    "91",
                    "deletion",
                    role_binding(ns, "leases", "Role", "leases", &[OLD_SA], true),
                );
        }
        Shape::ClusterRoleNarrowed => {
            let role_name = format!("{id}-leases");
            f.accounts(&both, &both)
                .rbac(&[
                    role_binding(ns, "leases", "ClusterRole", &role_name, &[OLD_SA], false),
                    role(ns, "leases-v2", false),
                    role_binding(ns, "leases-v2", "Role", "leases-v2", &[NEW_SA], false),
                ])
                .add(
                    level,
                    "02",
                    "narrowed-rbac",
                    lease_cluster_role(id, LEASE_VERBS_NARROW),
                );
        }
        Shape::ConfigMapDeleted
        | Shape::SecretDeleted
        | Shape::ConfigMapStillMounted
        | Shape::EnvStillReferenced => {
            pod.account = OLD_SA;
            f.accounts(&[OLD_SA], &[OLD_SA]).lease_rights();
            // The harmful twin of the "still" shapes deletes what NEW's pods still use; every
            // fixed twin moves NEW to a `-v2` object first and deletes the old one late.
            let still = harmful
                && matches!(
                    shape,
                    Shape::ConfigMapStillMounted | Shape::EnvStillReferenced
                );
            let (name, v2) = match shape {
                Shape::EnvStillReferenced => ("env-config", "env-config-v2"),
                Shape::SecretDeleted => ("credentials", "credentials-v2"),
                _ => ("config", "config-v2"),
            };
            let used = if still { name } else { v2 };
            if shape == Shape::ConfigMapDeleted {
                // The old pods run on 8 s after their replacement is ready: longer than the
                // plane kubelet's resync of a running pod (`syncFrequency: 5s`, up to 7.5 s
                // with its jitter), so that it sets their volume up again after the delete
                // (and keeps the files).
                pod.min_ready = Some(8);
            }
            match shape {
                Shape::EnvStillReferenced => pod.env_config = Some(used),
                Shape::SecretDeleted => pod.secret = Some(used),
                _ => pod.config_map = Some(used),
            }
            if shape == Shape::SecretDeleted {
                f.add(50, "03", "secret", secret(ns, v2, false)).add(
                    level,
                    "90",
                    "deletion",
                    secret(ns, name, true),
                );
            } else {
                if !still {
                    f.add(50, "03", name, config(ns, v2, "new", false));
                }
                f.add(level, "90", "deletion", config(ns, name, "old", true));
            }
        }
        Shape::ServiceAccountDeleted => {
            // The API server accepts a token it authenticated in the last 10 s even once its
            // account is gone: the old pod outlives its replacement by more than that, as in
            // a rollout of real length, so that a real pod feels the delete too.
            pod.min_ready = Some(12);
            f.accounts(&[NEW_SA], &both)
                .rbac(&[
                    role(ns, "leases", false),
                    role_binding(ns, "leases", "Role", "leases", &[OLD_SA], false),
                    role_binding(ns, "leases-v2", "Role", "leases", &[NEW_SA], false),
                ])
                .add(level, "90", "deletion", service_account(ns, OLD_SA, true));
        }
        Shape::BindingAfterNewAccount => {
            // Harmful: the binding one run-level after the Deployment; fixed: just before it.
            let (binding_level, nn) = if harmful { (55, "02") } else { (50, "03") };
            f.accounts(&both, &both).lease_rights().add(
                binding_level,
                nn,
                "rbac-v2",
                role_binding(ns, "leases-v2", "Role", "leases", &[NEW_SA], false),
            );
        }
    }
    f.operator(&pod, None);
    f.files
}

/// OLD and NEW of the clean-up after the report: OLD's pods mount ConfigMap `config`, NEW's
/// mount `config-v2`, and NEW deletes `config` at run-level 90, after the ClusterOperator
/// reported the new version (both `RollingUpdate`).
pub(super) fn cleanup_files(id: &str, standin: Option<&Standin>) -> [Vec<(String, String)>; 2] {
    let ns = id;
    let files = |new: bool| {
        let mut f = Files::new(id, standin);
        f.add(50, "00", "namespace", namespace(ns))
            .accounts(&[OLD_SA], &[OLD_SA])
            .lease_rights()
            .add(50, "03", "settings", settings(ns, "same"));
        let used = if new {
            f.add(50, "03", "config", config(ns, "config-v2", "new", false))
                .add(CLEANUP, "90", "deletion", config(ns, "config", "old", true));
            "config-v2"
        } else {
            f.add(50, "03", "config", config(ns, "config", "old", false));
            "config"
        };
        let pod = Pod {
            account: OLD_SA,
            config_map: Some(used),
            ..Pod::default()
        };
        f.operator(&pod, Some("RollingUpdate"));
        f.files
    };
    [files(false), files(true)]
}

/// OLD and NEW of a rollout that harms nothing, NEW's Deployment updated with `strategy`.
pub(super) fn rollout_files(id: &str, strategy: &str) -> [Vec<(String, String)>; 2] {
    let ns = id;
    let pod = Pod {
        account: OLD_SA,
        ..Pod::default()
    };
    let files = |strategy: &str| {
        let mut f = Files::new(id, None);
        f.add(50, "00", "namespace", namespace(ns))
            .accounts(&[OLD_SA], &[OLD_SA])
            .lease_rights()
            .add(50, "03", "settings", settings(ns, "same"))
            .operator(&pod, Some(strategy));
        f.files
    };
    [files("RollingUpdate"), files(strategy)]
}
