//! Payload triples for the shapes in which an update harms the pods that still run: an OLD
//! payload (4.13.0), a HARMFUL NEW payload (4.14.0) that takes something from the old pods
//! before their workload is updated and its ClusterOperator reports, and a FIXED NEW payload
//! that takes the same thing only after the ClusterOperator wait.
//!
//! Each triple is one operator, component `ID` (a name the caller makes unique, e.g. with
//! [`crate::support::unique_name`], so tests run in parallel on one shared plane): Namespace
//! `ID`, ServiceAccount `ID/operator`, a ClusterRole and ClusterRoleBinding `ID-status` that let
//! it write ClusterOperator `ID`'s status, the lease rights it needs to lead (Role or
//! ClusterRole `leases`, RoleBinding `leases`), a configuration ConfigMap `settings`,
//! Deployment `ID/ID-operator` with a `RELEASE_VERSION` env, and ClusterOperator `ID` waiting
//! for `operator=0.0.1-snapshot`. Shapes add what they take away (a mounted ConfigMap, a
//! Secret).
//!
//! In updating mode the ClusterOperator manifest (run-level 50, after the Deployment) is a wait;
//! a harmful change sits at run-level 40, before the Deployment's update; the fixed one at
//! run-level 60, after the wait, when the old pods are gone. Where the change would take a right
//! from the new pods too, NEW moves the Deployment to a new ServiceAccount `ID/operator-v2` (with
//! its own bindings, applied before the Deployment), as a real operator that retires an account
//! does.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::apply::{cluster_operator, config_map, namespace, write_payload};

mod manifests;

use manifests::{
    LEASE_VERBS, LEASE_VERBS_NARROW, Pod, deployment, lease_cluster_role, role, role_binding,
    secret, service_account, settings, status_rbac,
};

/// The version of every OLD payload.
pub const OLD_VERSION: &str = "4.13.0";
/// The version of every NEW payload.
pub const NEW_VERSION: &str = "4.14.0";

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";
const DELETE: &str = "release.openshift.io/delete";
const PLACEHOLDER: &str = "0.0.1-snapshot";
/// The old pods' ServiceAccount.
const OLD_SA: &str = "operator";
/// The ServiceAccount NEW moves the Deployment to, in the shapes that retire the old one.
const NEW_SA: &str = "operator-v2";

/// One way an update takes something from pods that still run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// RoleBinding `leases` (the old pods' lease rights) deleted before the Deployment update.
    RoleBindingDeleted,
    /// Role `leases` (granted to the old pods) deleted before the Deployment update.
    RoleDeleted,
    /// ClusterRole `ID-leases` (granted to the old pods) narrowed before the Deployment update:
    /// leases lose `create`, `update`, `patch` and `delete`.
    ClusterRoleNarrowed,
    /// ConfigMap `config`, mounted as a volume by the old pods, deleted before the update.
    ConfigMapDeleted,
    /// Secret `credentials`, the old pods' `envFrom` source, deleted before the update.
    SecretDeleted,
    /// ServiceAccount `operator`, the old pods' account, deleted before the update.
    ServiceAccountDeleted,
    /// The Deployment moves to ServiceAccount `operator-v2`, whose RoleBinding to the lease Role
    /// comes one run-level after the Deployment (fixed: before it). The ClusterOperator wait
    /// sits between them, so the new pods start without the lease rights the old pods had,
    /// cannot lead, and the wait times out before the binding is applied.
    BindingAfterNewAccount,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 7] = [
        Shape::RoleBindingDeleted,
        Shape::RoleDeleted,
        Shape::ClusterRoleNarrowed,
        Shape::ConfigMapDeleted,
        Shape::SecretDeleted,
        Shape::ServiceAccountDeleted,
        Shape::BindingAfterNewAccount,
    ];

    /// A short name, for test names, prefixes and messages.
    pub fn tag(self) -> &'static str {
        match self {
            Shape::RoleBindingDeleted => "rolebinding",
            Shape::RoleDeleted => "role",
            Shape::ClusterRoleNarrowed => "narrowed",
            Shape::ConfigMapDeleted => "configmap",
            Shape::SecretDeleted => "secret",
            Shape::ServiceAccountDeleted => "account",
            Shape::BindingAfterNewAccount => "late-binding",
        }
    }
}

/// The three payloads of one shape and the names a test checks.
// The names are read by the e2e tests (`e2e_harm`), which need the live pod simulator.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The shape.
    pub shape: Shape,
    /// The OLD payload (4.13.0).
    pub old: PathBuf,
    /// The HARMFUL NEW payload (4.14.0).
    pub harmful: PathBuf,
    /// The FIXED NEW payload (4.14.0).
    pub fixed: PathBuf,
    /// The operator's namespace (also its component and ClusterOperator name).
    pub namespace: String,
    /// The Deployment's name.
    pub workload: String,
    /// The ClusterOperator's name.
    pub cluster_operator: String,
    /// The harmed pods' ServiceAccount as `ns/name`: the old pods' one, except for
    /// [`Shape::BindingAfterNewAccount`], where the new pods start without a right.
    pub harmed_account: String,
    /// The harmed pod, `<workload>#<generation>`: generation 1 (the old pods), or 2 for
    /// [`Shape::BindingAfterNewAccount`].
    pub harmed_pod: String,
    /// The kind of the object the harmful payload deletes, narrows or applies too late.
    pub cause_kind: &'static str,
    /// Its name (without namespace).
    pub cause_name: String,
    /// The lint rule that reports the harmful payload statically.
    pub lint_rule: &'static str,
}

#[allow(dead_code)]
impl Fixture {
    /// Whether a harm `cause` (e.g. `delete RoleBinding.rbac.authorization.k8s.io ns/leases`)
    /// names this shape's object: one word is its kind (maybe with `.group`), another its name
    /// (maybe as `ns/name`).
    pub fn cause_names_object(&self, cause: &str) -> bool {
        let words: Vec<&str> = cause.split_whitespace().collect();
        let kind = words.iter().any(|w| {
            *w == self.cause_kind
                || w.strip_prefix(self.cause_kind)
                    .is_some_and(|rest| rest.starts_with('.'))
        });
        let name = words.iter().any(|w| {
            *w == self.cause_name
                || w.rsplit_once('/')
                    .is_some_and(|(ns, n)| ns == self.namespace && n == self.cause_name)
        });
        kind && name
    }
}

/// Writes a payload at `dir` with `version` (and `previous` in its release-metadata).
fn payload(dir: &Path, version: &str, previous: Option<&str>, files: Vec<(String, String)>) {
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
struct Files<'a> {
    id: &'a str,
    files: Vec<(String, String)>,
}

impl<'a> Files<'a> {
    fn new(id: &'a str) -> Self {
        Files {
            id,
            files: Vec::new(),
        }
    }

    fn add(&mut self, level: u32, nn: &str, what: &str, text: String) -> &mut Self {
        self.files.push((
            format!("0000_{level:02}_{}_{nn}_{what}.yaml", self.id),
            text,
        ));
        self
    }

    /// The ServiceAccounts `accounts` at 50 and the status rights for `status` (which may name
    /// accounts the payload no longer creates).
    fn accounts(&mut self, accounts: &[&str], status: &[&str]) -> &mut Self {
        let id = self.id;
        let docs: Vec<String> = accounts
            .iter()
            .map(|a| service_account(id, a, false))
            .collect();
        self.add(50, "01", "serviceaccount", docs.join("---\n"))
            .add(50, "02", "status-rbac", status_rbac(id, status))
    }

    /// The lease RBAC documents at 50.
    fn rbac(&mut self, docs: &[String]) -> &mut Self {
        self.add(50, "02", "rbac", docs.join("---\n"))
    }

    /// The Deployment of `pod` and the ClusterOperator, at 50.
    fn operator(&mut self, pod: &Pod) -> &mut Self {
        let (ns, id) = (self.id, self.id);
        self.add(
            50,
            "04",
            "deployment",
            deployment(ns, &format!("{id}-operator"), pod, None),
        )
        .add(
            50,
            "06",
            "clusteroperator",
            cluster_operator(id, PLACEHOLDER),
        )
    }
}

/// Run-level of the harmful change (before the Deployment update at 50).
const EARLY: u32 = 40;
/// Run-level of the fixed change (after the ClusterOperator wait at 50).
const LATE: u32 = 60;

/// Writes the three payloads of `shape` under `dir` (`old/`, `harmful/`, `fixed/`), for an
/// operator named `id` (a DNS label of at most 40 characters without `_`).
///
/// # Panics
/// If the files cannot be written.
pub fn write(shape: Shape, dir: &Path, id: &str) -> Fixture {
    assert!(
        !id.contains('_') && id.len() <= 40,
        "bad operator id {id:?}"
    );
    let workload = format!("{id}-operator");
    let fixture = Fixture {
        shape,
        old: dir.join("old"),
        harmful: dir.join("harmful"),
        fixed: dir.join("fixed"),
        namespace: id.to_string(),
        workload: workload.clone(),
        cluster_operator: id.to_string(),
        harmed_account: format!(
            "{id}/{}",
            if shape == Shape::BindingAfterNewAccount {
                NEW_SA
            } else {
                OLD_SA
            }
        ),
        harmed_pod: format!(
            "{workload}#{}",
            if shape == Shape::BindingAfterNewAccount {
                2
            } else {
                1
            }
        ),
        cause_kind: match shape {
            Shape::RoleBindingDeleted | Shape::BindingAfterNewAccount => "RoleBinding",
            Shape::RoleDeleted => "Role",
            Shape::ClusterRoleNarrowed => "ClusterRole",
            Shape::ConfigMapDeleted => "ConfigMap",
            Shape::SecretDeleted => "Secret",
            Shape::ServiceAccountDeleted => "ServiceAccount",
        },
        cause_name: match shape {
            Shape::RoleBindingDeleted | Shape::RoleDeleted => "leases".to_string(),
            Shape::ClusterRoleNarrowed => format!("{id}-leases"),
            Shape::ConfigMapDeleted => "config".to_string(),
            Shape::SecretDeleted => "credentials".to_string(),
            Shape::ServiceAccountDeleted => OLD_SA.to_string(),
            Shape::BindingAfterNewAccount => "leases-v2".to_string(),
        },
        lint_rule: match shape {
            Shape::ClusterRoleNarrowed | Shape::BindingAfterNewAccount => {
                "rights-lost-before-rollout"
            }
            _ => "delete-before-last-user",
        },
    };
    payload(&fixture.old, OLD_VERSION, None, old_files(shape, id));
    payload(
        &fixture.harmful,
        NEW_VERSION,
        Some(OLD_VERSION),
        new_files(shape, id, true),
    );
    payload(
        &fixture.fixed,
        NEW_VERSION,
        Some(OLD_VERSION),
        new_files(shape, id, false),
    );
    fixture
}

fn old_files(shape: Shape, id: &str) -> Vec<(String, String)> {
    let ns = id;
    let mut f = Files::new(id);
    f.add(50, "00", "namespace", namespace(ns))
        .accounts(&[OLD_SA], &[OLD_SA]);
    if shape == Shape::ClusterRoleNarrowed {
        let role = format!("{id}-leases");
        f.rbac(&[
            lease_cluster_role(id, LEASE_VERBS),
            role_binding(ns, "leases", "ClusterRole", &role, &[OLD_SA], false),
        ]);
    } else {
        f.rbac(&[
            role(ns, "leases", false),
            role_binding(ns, "leases", "Role", "leases", &[OLD_SA], false),
        ]);
    }
    f.add(50, "03", "settings", settings(ns, "old"));
    let mut pod = Pod {
        account: OLD_SA,
        config_map: None,
        secret: None,
    };
    match shape {
        Shape::ConfigMapDeleted => {
            f.add(50, "03", "config", config_map(ns, "config", "old", &[]));
            pod.config_map = Some("config");
        }
        Shape::SecretDeleted => {
            f.add(50, "03", "secret", secret(ns, "credentials", false));
            pod.secret = Some("credentials");
        }
        _ => {}
    }
    f.operator(&pod);
    f.files
}

fn new_files(shape: Shape, id: &str, harmful: bool) -> Vec<(String, String)> {
    let ns = id;
    let level = if harmful { EARLY } else { LATE };
    let both = [OLD_SA, NEW_SA];
    let mut f = Files::new(id);
    f.add(50, "00", "namespace", namespace(ns))
        .add(50, "03", "settings", settings(ns, "new"));
    let mut pod = Pod {
        account: NEW_SA,
        config_map: None,
        secret: None,
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
        Shape::ConfigMapDeleted | Shape::SecretDeleted => {
            pod.account = OLD_SA;
            f.accounts(&[OLD_SA], &[OLD_SA]).rbac(&[
                role(ns, "leases", false),
                role_binding(ns, "leases", "Role", "leases", &[OLD_SA], false),
            ]);
            if shape == Shape::ConfigMapDeleted {
                pod.config_map = Some("config-v2");
                f.add(50, "03", "config", config_map(ns, "config-v2", "new", &[]))
                    .add(
                        level,
                        "90",
                        "deletion",
                        config_map(ns, "config", "old", &[(DELETE, "true")]),
                    );
            } else {
                pod.secret = Some("credentials-v2");
                f.add(50, "03", "secret", secret(ns, "credentials-v2", false))
                    .add(level, "90", "deletion", secret(ns, "credentials", true));
            }
        }
        Shape::ServiceAccountDeleted => {
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
            f.accounts(&both, &both)
                .rbac(&[
                    role(ns, "leases", false),
                    role_binding(ns, "leases", "Role", "leases", &[OLD_SA], false),
                ])
                .add(
                    binding_level,
                    nn,
                    "rbac-v2",
                    role_binding(ns, "leases-v2", "Role", "leases", &[NEW_SA], false),
                );
        }
    }
    f.operator(&pod);
    f.files
}

/// Writes an OLD and a NEW payload (`old/`, `new/` under `dir`) of one operator `id` that
/// harm nothing, NEW's Deployment updated with `strategy` (`RollingUpdate` or `Recreate`):
/// the pair for watching how a rollout's generations overlap. Returns (OLD, NEW).
///
/// # Panics
/// If the files cannot be written.
pub fn write_rollout(dir: &Path, id: &str, strategy: &str) -> (PathBuf, PathBuf) {
    let ns = id;
    let pod = Pod {
        account: OLD_SA,
        config_map: None,
        secret: None,
    };
    let files = |strategy: Option<&str>| {
        let mut f = Files::new(id);
        f.add(50, "00", "namespace", namespace(ns))
            .accounts(&[OLD_SA], &[OLD_SA])
            .rbac(&[
                role(ns, "leases", false),
                role_binding(ns, "leases", "Role", "leases", &[OLD_SA], false),
            ])
            .add(50, "03", "settings", settings(ns, "same"))
            .add(
                50,
                "04",
                "deployment",
                deployment(ns, &format!("{id}-operator"), &pod, strategy),
            )
            .add(
                50,
                "06",
                "clusteroperator",
                cluster_operator(id, PLACEHOLDER),
            );
        f.files
    };
    let old = dir.join("old");
    let new = dir.join("new");
    payload(&old, OLD_VERSION, None, files(Some("RollingUpdate")));
    payload(&new, NEW_VERSION, Some(OLD_VERSION), files(Some(strategy)));
    (old, new)
}
