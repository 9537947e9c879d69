//! Payload triples for the shapes in which an update takes something from the pods that still
//! run: an OLD payload (4.13.0), a HARMFUL NEW payload (4.14.0) that takes it before the
//! workload is updated and its ClusterOperator reports, and a FIXED NEW payload that takes the
//! same thing only after the ClusterOperator wait (or no longer takes what NEW's pods use).
//!
//! Each triple is one operator, component `ID` (a name the caller makes unique, e.g. with
//! [`crate::support::unique_name`], so tests run in parallel on one shared plane): Namespace
//! `ID`, ServiceAccount `ID/operator`, a ClusterRole and ClusterRoleBinding `ID-status` that let
//! it write ClusterOperator `ID`'s status, the lease rights it needs to lead (Role or
//! ClusterRole `leases`, RoleBinding `leases`), a configuration ConfigMap `settings`,
//! Deployment `ID/ID-operator` with a `RELEASE_VERSION` env, and ClusterOperator `ID` waiting
//! for `operator=0.0.1-snapshot`. Shapes add what they take away (a mounted ConfigMap, a
//! Secret the environment comes from, a ConfigMap one variable comes from).
//!
//! In updating mode the ClusterOperator manifest (run-level 50, after the Deployment) is a wait;
//! a harmful change sits at run-level 40, before the Deployment's update; the fixed one at
//! run-level 60, after the wait, when the old pods are gone. Where the change would take a right
//! from the new pods too, NEW moves the Deployment to a new ServiceAccount `ID/operator-v2` (with
//! its own bindings, applied before the Deployment), as a real operator that retires an account
//! does.
//!
//! What the harmful twin does to the pods follows the kubelet's rules ([`Fixture::harms`]): a
//! right or the ServiceAccount taken from a running pod harms it; a ConfigMap or Secret only the
//! old pods use, deleted while they run, does not (they keep it) — it leaves a danger window;
//! one NEW's pods still need harms them, since they cannot start.
//!
//! With a [`Standin`], the Deployment runs the stand-in operator image (`hack/tools/standin`) on
//! a cluster with a kubelet, made to use what the shape takes away: its lease and status
//! rights, its mounted file, its environment.

use std::path::{Path, PathBuf};

mod manifests;
mod payloads;

use payloads::{cleanup_files, new_files, old_files, payload, rollout_files};

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
    /// ConfigMap `config`, mounted as a volume by the old pods only (NEW's mount `config-v2`),
    /// deleted before the update. The old pods keep their files: no harm, a danger window.
    /// NEW's Deployment has `minReadySeconds: 5`, so that a real old pod runs on for a while
    /// after the delete.
    ConfigMapDeleted,
    /// Secret `credentials`, the old pods' `envFrom` source only, deleted before the update.
    /// The old pods keep their environment: no harm, a danger window.
    SecretDeleted,
    /// ConfigMap `config`, mounted by the old pods and by NEW's, deleted before the update
    /// (fixed: NEW mounts `config-v2` and `config` goes after the wait). The new pod cannot
    /// start: `started-without`.
    ConfigMapStillMounted,
    /// ConfigMap `env-config`, the source of the old and new pods' `MODE` variable
    /// (`valueFrom.configMapKeyRef`), deleted before the update (fixed: NEW takes it from
    /// `env-config-v2` and `env-config` goes after the wait). The new pod's container cannot
    /// be created: `started-without`.
    EnvStillReferenced,
    /// ServiceAccount `operator`, the old pods' account, deleted before the update. NEW's
    /// Deployment has `minReadySeconds: 12`: the old pods run on for 12 s after their
    /// replacement is ready, longer than the API server caches a token's authentication
    /// (10 s), so a real pod's token is rejected too.
    ServiceAccountDeleted,
    /// The Deployment moves to ServiceAccount `operator-v2`, whose RoleBinding to the lease Role
    /// comes one run-level after the Deployment (fixed: before it). The ClusterOperator wait
    /// sits between them, so the new pods start without the lease rights the old pods had,
    /// cannot lead, and the wait times out before the binding is applied.
    BindingAfterNewAccount,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 9] = [
        Shape::RoleBindingDeleted,
        Shape::RoleDeleted,
        Shape::ClusterRoleNarrowed,
        Shape::ConfigMapDeleted,
        Shape::SecretDeleted,
        Shape::ConfigMapStillMounted,
        Shape::EnvStillReferenced,
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
            Shape::ConfigMapStillMounted => "configmap-in-use",
            Shape::EnvStillReferenced => "env",
            Shape::ServiceAccountDeleted => "account",
            Shape::BindingAfterNewAccount => "late-binding",
        }
    }

    /// Whether the harmful twin takes from the pods what a pod that has to start needs: the
    /// new pods are the harmed ones.
    fn new_pods_harmed(self) -> bool {
        matches!(
            self,
            Shape::BindingAfterNewAccount
                | Shape::ConfigMapStillMounted
                | Shape::EnvStillReferenced
        )
    }
}

/// How the pods of a shape run on a cluster with a kubelet: the stand-in operator image.
#[derive(Debug, Clone)]
pub struct Standin {
    /// The stand-in operator image.
    pub image: String,
    /// `HOST:PORT` of the API server for pods on the host network (a cluster without a service
    /// proxy, the plane with a node); `None`: the pods use the `kubernetes` Service.
    pub api: Option<String>,
    /// Seconds a stopped pod keeps running (still checking its files) after it released its
    /// lease, as a terminating pod does.
    pub linger: u32,
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
    /// The harmed pod, `<workload>#<generation>`: generation 1 (the old pods), or 2 where the
    /// new pods start without a right or an object they need.
    pub harmed_pod: String,
    /// Whether the harmful twin harms a pod (by the kubelet's rules), or only leaves a danger
    /// window: the old pods keep a ConfigMap or Secret only they used.
    pub harms: bool,
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

/// Writes the three payloads of `shape` under `dir` (`old/`, `harmful/`, `fixed/`), for an
/// operator named `id` (a DNS label of at most 40 characters without `_`).
///
/// # Panics
/// If the files cannot be written.
pub fn write(shape: Shape, dir: &Path, id: &str) -> Fixture {
    write_with(shape, dir, id, None)
}

/// [`write`], the Deployment running the stand-in operator when `standin` is given.
///
/// # Panics
/// If the files cannot be written.
pub fn write_with(shape: Shape, dir: &Path, id: &str, standin: Option<&Standin>) -> Fixture {
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
        harmed_pod: format!("{workload}#{}", if shape.new_pods_harmed() { 2 } else { 1 }),
        harms: !matches!(shape, Shape::ConfigMapDeleted | Shape::SecretDeleted),
        cause_kind: match shape {
            Shape::RoleBindingDeleted | Shape::BindingAfterNewAccount => "RoleBinding",
            Shape::RoleDeleted => "Role",
            Shape::ClusterRoleNarrowed => "ClusterRole",
            Shape::ConfigMapDeleted | Shape::ConfigMapStillMounted | Shape::EnvStillReferenced => {
                "ConfigMap"
            }
            Shape::SecretDeleted => "Secret",
            Shape::ServiceAccountDeleted => "ServiceAccount",
        },
        cause_name: match shape {
            Shape::RoleBindingDeleted | Shape::RoleDeleted => "leases".to_string(),
            Shape::ClusterRoleNarrowed => format!("{id}-leases"),
            Shape::ConfigMapDeleted | Shape::ConfigMapStillMounted => "config".to_string(),
            Shape::EnvStillReferenced => "env-config".to_string(),
            Shape::SecretDeleted => "credentials".to_string(),
            Shape::ServiceAccountDeleted => OLD_SA.to_string(),
            Shape::BindingAfterNewAccount => "leases-v2".to_string(),
        },
        lint_rule: match shape {
            Shape::ClusterRoleNarrowed | Shape::BindingAfterNewAccount => {
                "rights-lost-before-rollout"
            }
            Shape::ConfigMapStillMounted | Shape::EnvStillReferenced => "deleted-but-used",
            _ => "delete-before-last-user",
        },
    };
    payload(
        &fixture.old,
        OLD_VERSION,
        None,
        old_files(shape, id, standin),
    );
    payload(
        &fixture.harmful,
        NEW_VERSION,
        Some(OLD_VERSION),
        new_files(shape, id, true, standin),
    );
    payload(
        &fixture.fixed,
        NEW_VERSION,
        Some(OLD_VERSION),
        new_files(shape, id, false, standin),
    );
    fixture
}

/// Writes an OLD and a NEW payload (`old/`, `new/` under `dir`) of one operator `id` that
/// harm nothing, NEW's Deployment updated with `strategy` (`RollingUpdate` or `Recreate`):
/// the pair for watching how a rollout's generations overlap. Returns (OLD, NEW).
///
/// # Panics
/// If the files cannot be written.
pub fn write_rollout(dir: &Path, id: &str, strategy: &str) -> (PathBuf, PathBuf) {
    let [old_files, new_files] = rollout_files(id, strategy);
    let old = dir.join("old");
    let new = dir.join("new");
    payload(&old, OLD_VERSION, None, old_files);
    payload(&new, NEW_VERSION, Some(OLD_VERSION), new_files);
    (old, new)
}

/// Writes OLD and NEW (`old/`, `new/` under `dir`) of the clean-up OpenShift payloads do at
/// run-level 90: operator `id`'s old pods mount ConfigMap `config`, NEW's pods mount
/// `config-v2`, and NEW deletes `config` at run-level 90, after ClusterOperator `id` reported
/// the new version — while an old pod may still be terminating. A correct order: it harms
/// nobody (the `live-pods-keep-access` false positive of issue 32). Returns (OLD, NEW).
///
/// # Panics
/// If the files cannot be written.
pub fn write_cleanup_after_report(
    dir: &Path,
    id: &str,
    standin: Option<&Standin>,
) -> (PathBuf, PathBuf) {
    let [old_files, new_files] = cleanup_files(id, standin);
    let old = dir.join("old");
    let new = dir.join("new");
    payload(&old, OLD_VERSION, None, old_files);
    payload(&new, NEW_VERSION, Some(OLD_VERSION), new_files);
    (old, new)
}
