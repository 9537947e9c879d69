//! The apply action in the `cvo` strategy ([`CvoApply`]): the CVO's GET, merge and UPDATE.
//! It also reads, once before the run, what the merge's pre-merge steps need
//! ([`read_cluster_config`]).
//!
//! GET the object; absent → CREATE the prepared manifest; present → run the CVO's merge
//! ([`crate::merge`]) and send an UPDATE (a full PUT carrying the GET's resourceVersion) only
//! when the merge reports a change. A 409 (a concurrent writer changed the object, or created
//! it between the GET and the CREATE) reads the object again and merges again, at most
//! [`MAX_CONFLICTS`] times. A no-op re-apply costs one GET per object. With `--dry-run=server`
//! the CREATE or UPDATE is sent with `dryRun=All`, so the report names the fields the server
//! would change after its defaulting.

use std::sync::Arc;

use kube::api::PostParams;
use kube::core::Request;
use serde_json::Value;

use super::handle::{ClusterHandle, WriteResult, WriteTarget, dry_run_outcome};
use crate::apply::engine::{Done, TaskContext, TaskError};
use crate::apply::events::Outcome;
use crate::cluster::body;
use crate::cluster::request::{RequestError, Response};
use crate::cluster::watch;
use crate::merge::{self, Outcome as Merged};
use crate::plan::Task;

/// How often a conflicting write is re-read and merged again before the task fails.
pub const MAX_CONFLICTS: u32 = 5;

/// The body of an UPDATE: the merged live object without `managedFields` (the server keeps
/// them) and without `status` (ignored by the main resource anyway).
fn update_body(merged: &Value) -> Value {
    let mut v = merged.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    v
}

/// The apply action of the `cvo` strategy.
pub struct CvoApply {
    cluster: Arc<ClusterHandle>,
}

impl CvoApply {
    /// The action, over `cluster`.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        CvoApply { cluster }
    }

    /// The apply action in the `cvo` strategy, of `target`.
    pub(crate) async fn apply(
        &self,
        ctx: &TaskContext,
        task: &Task,
        target: WriteTarget,
    ) -> WriteResult {
        let c = &*self.cluster;
        let WriteTarget {
            fresh_kind,
            collection,
            body: manifest,
        } = target;
        let name = task.manifest.id.name.as_str();
        let params = PostParams {
            dry_run: c.options.dry_run,
            field_manager: Some(c.options.field_manager.clone()),
        };
        // Attempts as the report counts them: the tries of the round's slowest request (a GET
        // and a write are one attempt when both go through first time), summed over 409 rounds.
        let mut attempts = 0;
        for _ in 0..MAX_CONFLICTS {
            let (live, get_tries) = c.get_live(ctx, fresh_kind, &collection, name).await?;
            let merged = merge::merge(live.as_ref(), &manifest, &c.options.cluster_config)
                .map_err(|e| TaskError::failed(e.to_string(), attempts + get_tries))?;
            let (body, created) = match merged {
                Merged::Unchanged => {
                    // An unchanged CRD is still waited on, so that its kinds are served to the
                    // custom resources later in the plan.
                    let done = Done::new(Outcome::Unchanged).attempts(attempts + get_tries);
                    return Ok((done, live.filter(|_| !c.options.dry_run)));
                }
                Merged::Create(obj) => (obj, true),
                Merged::Update(obj) => (update_body(&obj), false),
            };
            let bytes = serde_json::to_vec(&body)
                .map_err(|e| TaskError::failed(e.to_string(), attempts))?;
            let (response, n) = c
                .send_unless(
                    ctx,
                    fresh_kind,
                    |e| e.is(409),
                    || {
                        if created {
                            Request::new(&collection).create(&params, bytes.clone())
                        } else {
                            Request::new(&collection).replace(name, &params, bytes.clone())
                        }
                        .map_err(|e| RequestError::Build(e.to_string()))
                    },
                )
                .await?;
            attempts += get_tries.max(n);
            let Some(response) = response else { continue };
            return self
                .written(ctx, live.as_ref(), response, created)
                .map(|(done, object)| (done.attempts(attempts), object));
        }
        Err(TaskError::failed(
            format!(
                "{} {name}: the object kept changing under the update (409 Conflict {MAX_CONFLICTS} times)",
                task.manifest.id.kind
            ),
            attempts,
        ))
    }

    /// Reports a write.
    fn written(
        &self,
        ctx: &TaskContext,
        live: Option<&Value>,
        response: Response,
        created: bool,
    ) -> WriteResult {
        self.cluster.warnings(ctx, &response);
        if self.cluster.options.dry_run {
            return Ok((dry_run_outcome(live, &response.body), None));
        }
        // An UPDATE the server found identical (a merge default it fills in anyway) does not
        // bump the resourceVersion: report it unchanged.
        let same_version = live.is_some()
            && live.and_then(body::resource_version) == body::resource_version(&response.body);
        let outcome = if created {
            Outcome::Created
        } else if same_version {
            Outcome::Unchanged
        } else {
            Outcome::Configured
        };
        Ok((Done::new(outcome), Some(response.body)))
    }
}

/// A cluster config object the `cvo` strategy could not read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {object} for the cvo strategy: {source}")]
pub struct ClusterConfigError {
    /// The object, e.g. `proxies.config.openshift.io/cluster`.
    pub object: String,
    /// The error.
    #[source]
    pub source: RequestError,
}

/// One cluster-scoped `config.openshift.io/v1` object, `None` when the kind is not served or
/// the object does not exist.
async fn config_object(
    client: &kube::Client,
    discovery: &crate::cluster::discovery::Discovery,
    kind: &str,
    plural: &str,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<Value>, ClusterConfigError> {
    let err = |source| ClusterConfigError {
        object: format!("{plural}.config.openshift.io/{name}"),
        source,
    };
    let Some(resolved) = discovery
        .resolve("config.openshift.io", "v1", kind)
        .await
        .map_err(err)?
    else {
        return Ok(None);
    };
    watch::get(client, &resolved.url_path(None), name, timeout)
        .await
        .map_err(err)
}

/// What the `cvo` strategy's pre-merge steps read from the cluster, read once before the
/// graph runs:
///
/// - ClusterVersion `version`, for the owner reference every written object carries, when
///   `owner` is set (the run reads and records the ClusterVersion) and the object exists;
/// - `proxies.config.openshift.io/cluster`, only when a Deployment or DaemonSet of the plan
///   asks for proxy injection;
/// - `apiservers.config.openshift.io/cluster`, only when a ConfigMap of the plan asks for TLS
///   injection.
///
/// An unserved kind or a missing object leaves its field `None` (no owner reference, no
/// injection); a plan that needs none of them costs no request beyond the ClusterVersion GET.
///
/// # Errors
///
/// [`ClusterConfigError`] when a read fails for another reason than 404.
pub async fn read_cluster_config(
    client: &kube::Client,
    discovery: &crate::cluster::discovery::Discovery,
    plan: &crate::plan::Plan,
    owner: bool,
    timeout: std::time::Duration,
) -> Result<merge::ClusterConfig, ClusterConfigError> {
    let annotated = |kinds: &[&str], key: &str, want: Option<&str>| {
        plan.tasks.iter().any(|t| {
            let m = &t.manifest;
            kinds.contains(&m.id.kind.as_str())
                && m.object
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(key))
                    .and_then(Value::as_str)
                    .is_some_and(|v| want.map_or(!v.is_empty(), |w| v == w))
        })
    };
    let mut config = merge::ClusterConfig::default();
    if owner
        && let Some(cv) = config_object(
            client,
            discovery,
            "ClusterVersion",
            "clusterversions",
            "version",
            timeout,
        )
        .await?
        && let Some(uid) = cv.pointer("/metadata/uid").and_then(Value::as_str)
    {
        config.cluster_version = Some(merge::ClusterVersionRef {
            name: "version".into(),
            uid: uid.to_owned(),
        });
    }
    if annotated(
        &["Deployment", "DaemonSet"],
        merge::mutate::INJECT_PROXY,
        None,
    ) {
        config.proxy =
            config_object(client, discovery, "Proxy", "proxies", "cluster", timeout).await?;
    }
    if annotated(&["ConfigMap"], merge::mutate::INJECT_TLS, Some("true")) {
        config.apiserver = config_object(
            client,
            discovery,
            "APIServer",
            "apiservers",
            "cluster",
            timeout,
        )
        .await?;
    }
    Ok(config)
}
