//! The CVO's merge: what the Cluster Version Operator writes when a payload manifest meets the
//! live object, as a pure function (no cluster I/O).
//!
//! [`merge`] takes the live object (or `None` when absent) and the manifest, and returns
//! [`Outcome::Create`] (the object to create), [`Outcome::Update`] (the merged live object to
//! write back with its `resourceVersion`, a full UPDATE) or [`Outcome::Unchanged`]. The steps
//! are the CVO's:
//!
//! 1. the ClusterVersion owner reference ([`ClusterVersionRef`]), when one is given;
//! 2. the pre-merge mutations of [`mutate`]: proxy variables into Deployments and DaemonSets,
//!    the TLS profile into ConfigMaps. They read cluster config objects passed in through
//!    [`ClusterConfig`]: a missing Proxy injects nothing (as the CVO, which treats it as an
//!    empty one), a missing APIServer (given as `{}`) means the Intermediate profile, and a
//!    cluster that does not serve the APIServer kind (`None`) gets **no TLS injection** (the
//!    CVO always has it); then the Go round trip of the typed kinds a plain cluster serves from
//!    a CRD ([`go_json`]);
//! 3. create when absent, nothing when the object exists and the manifest is create-only;
//! 4. the per-kind merge: the typed rules of [`typed_kind`] for the kinds the CVO has a typed
//!    merge for, matched by exact group, version and kind (the merged object round-tripped
//!    again), and the generic rule ([`generic`]) for every other kind.
//!
//! Objects are `serde_json::Value`, not k8s-openapi types: payload objects are dynamic in
//! minicvo (custom resources, OpenShift kinds k8s-openapi does not have, fields newer than the
//! crate), and a round trip through typed structs would drop unknown fields that the CVO's
//! generic path and the API server keep. The price is that JSON cannot tell a nil pointer from
//! a pointer to a zero value; the private `prim` module documents the convention.
//!
//! Where the CVO would crash on a manifest (a Job `spec.selector`, a projected volume with no
//! `defaultMode` and a source that is not a service-account token), [`merge`] returns a
//! [`MergeError`] naming the object and the field.
//!
//! [`rollout`] turns the merge around for payload review: which changes between two versions of
//! a manifest the CVO would not roll out.

pub mod core;
pub mod ext;
pub mod generic;
pub mod go_json;
pub mod meta;
pub mod mutate;
pub mod pod;
pub(crate) mod prim;
pub mod rollout;
pub mod workloads;

#[cfg(test)]
mod tests;

use serde_json::Value;
use thiserror::Error;

pub use meta::ClusterVersionRef;
use prim::{Merger, Obj};

/// A manifest the CVO would crash on or reject before writing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MergeError {
    /// The manifest is not a JSON object.
    #[error("the manifest is not an object")]
    NotAnObject,
    /// The manifest has no `metadata.name`.
    #[error("{object}: invalid object: name cannot be empty")]
    EmptyName {
        /// The object's kind.
        object: String,
    },
    /// A Job or CronJob job template sets `spec.selector`.
    #[error(
        "{object}: {path} is not supported in Job manifests (the CVO crashes on it); hint: remove the selector, the API server generates it"
    )]
    JobSelector {
        /// The object.
        object: String,
        /// The field.
        path: String,
    },
    /// A projected volume without `defaultMode` has a source that is not a service-account
    /// token.
    #[error(
        "{object}: {path}: a projected volume without defaultMode may only have serviceAccountToken sources (the CVO crashes on others); hint: set projected.defaultMode"
    )]
    ProjectedVolumeWithoutDefaultMode {
        /// The object.
        object: String,
        /// The source.
        path: String,
    },
    /// `config.openshift.io/inject-proxy` names a container the pod does not have.
    #[error("{object}: requested injection for non-existent container: {container:?}")]
    ProxyContainerMissing {
        /// The object.
        object: String,
        /// The container name.
        container: String,
    },
}

impl MergeError {
    fn with_object(self, label: String) -> Self {
        match self {
            MergeError::JobSelector { path, .. } => MergeError::JobSelector {
                object: label,
                path,
            },
            MergeError::ProjectedVolumeWithoutDefaultMode { path, .. } => {
                MergeError::ProjectedVolumeWithoutDefaultMode {
                    object: label,
                    path,
                }
            }
            MergeError::ProxyContainerMissing { container, .. } => {
                MergeError::ProxyContainerMissing {
                    object: label,
                    container,
                }
            }
            MergeError::EmptyName { .. } => MergeError::EmptyName { object: label },
            e @ MergeError::NotAnObject => e,
        }
    }
}

/// The cluster objects the CVO reads while preparing a manifest. Each is optional: a cluster
/// without it gets the mutation skipped (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// The ClusterVersion every object is owned by; `None` adds no owner reference.
    pub cluster_version: Option<ClusterVersionRef>,
    /// `proxies.config.openshift.io/cluster`, read for `config.openshift.io/inject-proxy`.
    pub proxy: Option<Value>,
    /// `apiservers.config.openshift.io/cluster`, read for `config.openshift.io/inject-tls`
    /// (`{}` when the kind is served and the object is missing: the CVO then injects the
    /// Intermediate profile).
    pub apiserver: Option<Value>,
    /// Whether a run re-reads `proxy` and `apiserver` right before it prepares an object that
    /// needs them ([`mutate::reads`]), so that a change during the run (the payload creating
    /// APIServer `cluster`) is followed, as the CVO's informers follow it. Set by the reader of
    /// a run's config; a config given whole is used as it is.
    pub follow: bool,
}

/// What the CVO writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The object is absent: create this (the prepared manifest, without merge defaults).
    Create(Value),
    /// The merge changed the live object: UPDATE it with this (live's `resourceVersion` kept).
    Update(Value),
    /// Nothing is written.
    Unchanged,
}

/// The kinds with a typed merge, by exact group/version and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum TypedKind {
    Deployment,
    DaemonSet,
    Job,
    CronJob,
    ConfigMap,
    Namespace,
    Service,
    ServiceAccount,
    Role,
    RoleBinding,
    ClusterRole,
    ClusterRoleBinding,
    CustomResourceDefinition,
    ValidatingWebhookConfiguration,
    ImageStream,
    SecurityContextConstraints,
    OperatorGroup,
}

/// The typed merge of an `apiVersion` and `kind`, `None` for the generic rule. Other versions
/// of the same kinds (`rbac.authorization.k8s.io/v1beta1`) are generic, as in the CVO.
#[must_use]
pub fn typed_kind(api_version: &str, kind: &str) -> Option<TypedKind> {
    use TypedKind as T;
    Some(match (api_version, kind) {
        ("apps/v1", "Deployment") => T::Deployment,
        ("apps/v1", "DaemonSet") => T::DaemonSet,
        ("batch/v1", "Job") => T::Job,
        ("batch/v1", "CronJob") => T::CronJob,
        ("v1", "ConfigMap") => T::ConfigMap,
        ("v1", "Namespace") => T::Namespace,
        ("v1", "Service") => T::Service,
        ("v1", "ServiceAccount") => T::ServiceAccount,
        ("rbac.authorization.k8s.io/v1", "Role") => T::Role,
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => T::RoleBinding,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => T::ClusterRole,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => T::ClusterRoleBinding,
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => T::CustomResourceDefinition,
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            T::ValidatingWebhookConfiguration
        }
        ("image.openshift.io/v1", "ImageStream") => T::ImageStream,
        ("security.openshift.io/v1", "SecurityContextConstraints") => T::SecurityContextConstraints,
        ("operators.coreos.com/v1", "OperatorGroup") => T::OperatorGroup,
        _ => return None,
    })
}

fn label(o: &Obj) -> String {
    let meta = prim::get_obj(o, "metadata");
    let ns = meta.map_or("", |m| prim::get_str(m, "namespace"));
    let name = meta.map_or("", |m| prim::get_str(m, "name"));
    let kind = prim::get_str(o, "kind");
    if ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {ns}/{name}")
    }
}

fn typed_of(o: &Obj) -> Option<TypedKind> {
    typed_kind(prim::get_str(o, "apiVersion"), prim::get_str(o, "kind"))
}

/// The manifest as the CVO writes it before merging: owner reference and pre-merge
/// mutations applied.
///
/// # Errors
///
/// [`MergeError::NotAnObject`], [`MergeError::EmptyName`], or
/// [`MergeError::ProxyContainerMissing`].
pub fn prepare(manifest: &Value, config: &ClusterConfig) -> Result<Value, MergeError> {
    let mut req = manifest
        .as_object()
        .cloned()
        .ok_or(MergeError::NotAnObject)?;
    let name = prim::get_obj(&req, "metadata").map_or("", |m| prim::get_str(m, "name"));
    if name.is_empty() {
        return Err(MergeError::EmptyName {
            object: prim::get_str(&req, "kind").to_owned(),
        });
    }
    if let Some(cv) = &config.cluster_version {
        meta::set_owner_reference(&mut req, cv);
    }
    match typed_of(&req) {
        Some(TypedKind::Deployment | TypedKind::DaemonSet) => {
            mutate::inject_proxy(&mut req, config.proxy.as_ref())
                .map_err(|e| e.with_object(label(&req)))?;
        }
        Some(TypedKind::ConfigMap) => mutate::inject_tls(&mut req, config.apiserver.as_ref()),
        Some(kind) => go_json::round_trip(kind, &mut req),
        None => {}
    }
    Ok(Value::Object(req))
}

/// Merges a prepared manifest (see [`prepare`]) into the live object: the merged object when
/// the CVO would write it, `None` when its merge reports no change. Create-only is not
/// considered here.
///
/// # Errors
///
/// A [`MergeError`] for a manifest the CVO would crash on.
pub fn merge_prepared(live: &Value, required: &Value) -> Result<Option<Value>, MergeError> {
    let req = required.as_object().ok_or(MergeError::NotAnObject)?;
    let Some(live) = live.as_object() else {
        return Ok(Some(required.clone()));
    };
    let Some(kind) = typed_of(req) else {
        return Ok(generic::merge(live, req).map(Value::Object));
    };
    let mut ex = live.clone();
    let mut m = Merger::default();
    use TypedKind as T;
    match kind {
        T::Deployment => workloads::deployment(&mut m, &mut ex, req),
        T::DaemonSet => workloads::daemon_set(&mut m, &mut ex, req),
        T::Job => workloads::job(&mut m, &mut ex, req),
        T::CronJob => workloads::cron_job(&mut m, &mut ex, req),
        other => {
            merge_infallible(other, &mut m, &mut ex, req);
            Ok(())
        }
    }
    .map_err(|e| e.with_object(label(req)))?;
    if !m.modified {
        return Ok(None);
    }
    go_json::round_trip(kind, &mut ex);
    Ok(Some(Value::Object(ex)))
}

/// The CVO's ClusterOperator write in reconciling mode: only the ObjectMeta merge
/// (`EnsureObjectMeta`) of the prepared manifest into the live operator; the merged object when
/// it changed something, `None` otherwise. Status is never written.
#[must_use]
pub fn merge_cluster_operator(live: &Value, required: &Value) -> Option<Value> {
    let (Some(live), Some(req)) = (live.as_object(), required.as_object()) else {
        return None;
    };
    let mut ex = live.clone();
    let mut m = Merger::default();
    meta::ensure_object_meta(&mut m, &mut ex, req);
    m.modified.then_some(Value::Object(ex))
}

/// The typed merges that cannot fail.
fn merge_infallible(kind: TypedKind, m: &mut Merger, ex: &mut Obj, req: &Obj) {
    use TypedKind as T;
    match kind {
        T::ConfigMap => core::config_map(m, ex, req),
        T::Namespace => core::namespace(m, ex, req),
        T::Service => core::service(m, ex, req),
        T::ServiceAccount => core::service_account(m, ex, req),
        T::Role => core::role(m, ex, req),
        T::ClusterRole => core::cluster_role(m, ex, req),
        T::RoleBinding | T::ClusterRoleBinding => core::binding(m, ex, req),
        T::CustomResourceDefinition => ext::crd(m, ex, req),
        T::ValidatingWebhookConfiguration => ext::validating_webhook(m, ex, req),
        T::ImageStream => ext::image_stream(m, ex, req),
        T::SecurityContextConstraints => ext::scc(m, ex, req),
        T::OperatorGroup => ext::operator_group(m, ex, req),
        T::Deployment | T::DaemonSet | T::Job | T::CronJob => {
            unreachable!("fallible kinds are merged by merge_prepared")
        }
    }
}

/// The CVO's write for one manifest: prepare it, then create, merge or leave alone.
///
/// # Errors
///
/// A [`MergeError`] for a manifest the CVO would crash on or reject.
pub fn merge(
    live: Option<&Value>,
    manifest: &Value,
    config: &ClusterConfig,
) -> Result<Outcome, MergeError> {
    let required = prepare(manifest, config)?;
    let Some(live) = live else {
        return Ok(Outcome::Create(required));
    };
    let create_only = meta::annotation(
        required.as_object().expect("prepared"),
        crate::manifest::CREATE_ONLY_ANNOTATION,
    )
    .eq_ignore_ascii_case("true");
    if create_only {
        return Ok(Outcome::Unchanged);
    }
    Ok(match merge_prepared(live, &required)? {
        Some(v) => Outcome::Update(v),
        None => Outcome::Unchanged,
    })
}
