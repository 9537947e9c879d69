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
use crate::merge::mutate::ConfigRead;
use crate::merge::{self, Outcome as Merged};
use crate::plan::Task;

/// How often a conflicting write is re-read and merged again before the task fails.
pub const MAX_CONFLICTS: u32 = 5;

/// The body of an UPDATE: the merged live object without `managedFields` (the server keeps
/// them) and without `status` (ignored by the main resource anyway).
pub(crate) fn update_body(merged: &Value) -> Value {
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
        let config = c.config_for(ctx, &manifest).await?;
        let mut attempts = 0;
        for _ in 0..MAX_CONFLICTS {
            let (live, get_tries) = c.get_live(ctx, fresh_kind, &collection, name).await?;
            let merged = merge::merge(live.as_ref(), &manifest, &config)
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
            let Some(mut response) = response else {
                continue;
            };
            if created && !c.options.dry_run {
                let (settled, n) = self
                    .settle(ctx, fresh_kind, &collection, name, &body, response)
                    .await?;
                response = settled;
                attempts += n;
            }
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

    /// The CVO's next pass over an object it just created: its typed merge of the manifest
    /// into the created object, and an UPDATE when that changes something (a `hostPort` the
    /// merge defaults for a host-network pod, an SCC's `allowPrivilegeEscalation`), so that
    /// one run leaves what the CVO leaves once it reconciles. Generic kinds are left as
    /// created: the CVO's rewrite of their spec changes nothing the server keeps. A conflict
    /// (someone else wrote the object first) keeps the created object. Returns the object as
    /// it now is and the attempts spent.
    async fn settle(
        &self,
        ctx: &TaskContext,
        fresh_kind: bool,
        collection: &str,
        name: &str,
        required: &Value,
        created: Response,
    ) -> Result<(Response, u32), TaskError> {
        let c = &*self.cluster;
        let field = |k: &str| required.get(k).and_then(Value::as_str).unwrap_or_default();
        if merge::typed_kind(field("apiVersion"), field("kind")).is_none() {
            return Ok((created, 0));
        }
        let Ok(Some(merged)) = merge::merge_prepared(&created.body, required) else {
            return Ok((created, 0));
        };
        let bytes = serde_json::to_vec(&update_body(&merged))
            .map_err(|e| TaskError::failed(e.to_string(), 0))?;
        let params = PostParams {
            dry_run: false,
            field_manager: Some(c.options.field_manager.clone()),
        };
        let (response, n) = c
            .send_unless(
                ctx,
                fresh_kind,
                |e| e.is(409),
                || {
                    Request::new(collection)
                        .replace(name, &params, bytes.clone())
                        .map_err(|e| RequestError::Build(e.to_string()))
                },
            )
            .await?;
        Ok((response.unwrap_or(created), n))
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

/// One cluster-scoped `config.openshift.io/v1` object as found: `Ok(None)` when the kind is
/// not served, `Ok(Some(None))` when the object does not exist.
async fn config_object(
    client: &kube::Client,
    discovery: &crate::cluster::discovery::Discovery,
    kind: &str,
    plural: &str,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<Option<Value>>, ClusterConfigError> {
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
    let policy = crate::cluster::retry::RetryPolicy::default();
    get_retried(client, &resolved.url_path(None), name, timeout, &policy)
        .await
        .map(Some)
        .map_err(err)
}

/// `watch::get`, with transient errors retried by `policy`.
async fn get_retried(
    client: &kube::Client,
    collection: &str,
    name: &str,
    timeout: std::time::Duration,
    policy: &crate::cluster::retry::RetryPolicy,
) -> Result<Option<Value>, RequestError> {
    let never = tokio_util::sync::CancellationToken::new();
    crate::cluster::retry::retry(
        policy,
        &never,
        |_, _| false,
        |_, _, _| {},
        || watch::get(client, collection, name, timeout),
    )
    .await
    .map(|(found, _)| found)
    .map_err(|x| x.error)
}

/// The cluster config object `which`, as the `cvo` strategy's pre-merge step reads it:
/// `None` when its kind is not served or, for the proxy, when it does not exist; an empty
/// object for a missing API server.
///
/// # Errors
///
/// [`ClusterConfigError`] when a read fails for another reason than 404.
pub async fn read_config_object(
    client: &kube::Client,
    discovery: &crate::cluster::discovery::Discovery,
    which: ConfigRead,
    timeout: std::time::Duration,
) -> Result<Option<Value>, ClusterConfigError> {
    match which {
        ConfigRead::Proxy => Ok(config_object(
            client, discovery, "Proxy", "proxies", "cluster", timeout,
        )
        .await?
        .flatten()),
        // The CVO reads a missing APIServer as an empty one: the Intermediate profile.
        ConfigRead::ApiServer => Ok(config_object(
            client,
            discovery,
            "APIServer",
            "apiservers",
            "cluster",
            timeout,
        )
        .await?
        .map(|found| found.unwrap_or_else(|| serde_json::json!({})))),
    }
}

/// FeatureGate `cluster`, whose feature set and gates filter the payload as the CVO's do
/// ([`crate::cvo::features`]); `None` when it does not exist or its kind is not served.
/// Transient errors are retried with `retry`.
///
/// # Errors
///
/// [`ClusterConfigError`] when the read fails for another reason than 404.
pub async fn read_feature_gate(
    client: &kube::Client,
    timeout: std::time::Duration,
    retry: &crate::cluster::retry::RetryPolicy,
) -> Result<Option<Value>, ClusterConfigError> {
    let collection = "/apis/config.openshift.io/v1/featuregates";
    get_retried(client, collection, "cluster", timeout, retry)
        .await
        .map_err(|source| ClusterConfigError {
            object: "featuregates.config.openshift.io/cluster".into(),
            source,
        })
}

/// What the `cvo` strategy's pre-merge steps read from the cluster before the graph runs:
///
/// - ClusterVersion `version`, for the owner reference every written object carries, when
///   `owner` is set (the run reads and records the ClusterVersion) and the object exists;
/// - `proxies.config.openshift.io/cluster`, only when a Deployment or DaemonSet of the plan
///   asks for proxy injection;
/// - `apiservers.config.openshift.io/cluster`, only when a ConfigMap of the plan asks for TLS
///   injection (an empty object when the kind is served and the object is missing).
///
/// The config it returns is followed ([`merge::ClusterConfig::follow`]): a run reads the proxy
/// and the API server again before each object that needs them. An unserved kind or a
/// missing ClusterVersion leaves its field `None` (no owner reference, no injection); a plan
/// that needs none of them costs no request beyond the ClusterVersion GET.
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
    let needs = |which| {
        plan.tasks
            .iter()
            .any(|t| merge::mutate::reads(&t.manifest.object) == Some(which))
    };
    let mut config = merge::ClusterConfig {
        follow: true,
        ..merge::ClusterConfig::default()
    };
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
        .flatten()
        && let Some(uid) = cv.pointer("/metadata/uid").and_then(Value::as_str)
    {
        config.cluster_version = Some(merge::ClusterVersionRef {
            name: "version".into(),
            uid: uid.to_owned(),
        });
    }
    if needs(ConfigRead::Proxy) {
        config.proxy = read_config_object(client, discovery, ConfigRead::Proxy, timeout).await?;
    }
    if needs(ConfigRead::ApiServer) {
        config.apiserver =
            read_config_object(client, discovery, ConfigRead::ApiServer, timeout).await?;
    }
    Ok(config)
}
