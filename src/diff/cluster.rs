//! The seam between the live diff and a cluster: reading an object and asking the server
//! what an apply or a create would make of it, without writing anything. [`KubeCluster`]
//! does it against an API server with `minicvo apply`'s connection, discovery, requests and
//! retries.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cluster::body::request_body;
use crate::cluster::discovery::{Discovery, Resolved};
use crate::cluster::request::{self, RequestError};
use crate::cluster::retry::{self, RetryPolicy};
use crate::cluster::watch;
use crate::plan::Task;

/// Why an object could not be read or dry-run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    /// The server does not serve the manifest's apiVersion and kind.
    #[error("the server does not serve {0}")]
    NotServed(String),
    /// The object's namespace does not exist.
    #[error("namespace {0} does not exist")]
    NamespaceMissing(String),
    /// Any other failure, as text.
    #[error("{0}")]
    Request(String),
}

/// What the live diff needs from a cluster. Nothing here writes.
pub trait LiveCluster: Sync {
    /// The live object of a task's manifest, `None` when absent.
    fn get(&self, task: &Task) -> impl Future<Output = Result<Option<Value>, LiveError>> + Send;
    /// The object a server-side apply of the manifest would leave (a dry run).
    fn dry_run_apply(&self, task: &Task) -> impl Future<Output = Result<Value, LiveError>> + Send;
    /// The object a create of `object` (the task's manifest as it would be sent) would make
    /// (a dry run).
    fn dry_run_create(
        &self,
        task: &Task,
        object: &Value,
    ) -> impl Future<Output = Result<Value, LiveError>> + Send;
    /// The object an UPDATE with `object` (the CVO's merge of the live object) would leave
    /// (a dry run, so the server's defaulting shows). Without a server: `object` itself.
    fn dry_run_update(
        &self,
        task: &Task,
        object: &Value,
    ) -> impl Future<Output = Result<Value, LiveError>> + Send {
        let _ = task;
        let object = object.clone();
        async move { Ok(object) }
    }
}

/// A [`LiveCluster`] backed by an API server.
pub struct KubeCluster {
    client: Client,
    discovery: Discovery,
    field_manager: String,
    timeout: Duration,
    retry: RetryPolicy,
    cancel: CancellationToken,
}

impl KubeCluster {
    /// A cluster reached through `client`; applies are dry-run as `field_manager`, so fields
    /// that `minicvo apply` owns compare as minicvo would leave them.
    #[must_use]
    pub fn new(client: Client, field_manager: &str, timeout: Duration) -> Self {
        KubeCluster {
            discovery: Discovery::new(client.clone(), timeout),
            client,
            field_manager: field_manager.to_string(),
            timeout,
            retry: RetryPolicy::default(),
            cancel: CancellationToken::new(),
        }
    }

    /// Fills the discovery cache in one go (aggregated discovery), instead of one request per
    /// group-version later.
    ///
    /// # Errors
    /// The discovery request's error.
    pub async fn prime(&self) -> Result<(), LiveError> {
        self.discovery
            .prime()
            .await
            .map_err(|e| LiveError::Request(format!("discovery: {e}")))
    }

    /// The namespace to use (`None` for a cluster-scoped kind) and the collection URL path.
    async fn target(&self, task: &Task) -> Result<(Option<String>, String), LiveError> {
        let m = &task.manifest;
        let resolved = self
            .send(|| self.discovery.resolve(&m.id.group, m.version(), &m.id.kind))
            .await?
            .ok_or_else(|| LiveError::NotServed(format!("{} {}", m.api_version, m.id.kind)))?;
        let ns = self.namespace(task, &resolved);
        let collection = resolved.url_path(ns.as_deref());
        Ok((ns, collection))
    }

    fn namespace(&self, task: &Task, resolved: &Resolved) -> Option<String> {
        resolved.namespace_of(
            task.manifest.id.namespace.as_deref(),
            self.client.default_namespace(),
        )
    }

    /// Runs a request with `minicvo apply`'s retry policy for transient errors.
    async fn send<T, F, Fut>(&self, op: F) -> Result<T, LiveError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RequestError>>,
    {
        retry::retry(&self.retry, &self.cancel, |_, _| false, |_, _, _| {}, op)
            .await
            .map(|(v, _)| v)
            .map_err(|x| classify(&x.error))
    }
}

/// Maps a request error: a 404 whose `Status` details name a namespace is a missing
/// namespace.
fn classify(e: &RequestError) -> LiveError {
    match e.missing_namespace() {
        Some(ns) => LiveError::NamespaceMissing(ns.to_string()),
        None => LiveError::Request(e.to_string()),
    }
}

impl LiveCluster for KubeCluster {
    async fn get(&self, task: &Task) -> Result<Option<Value>, LiveError> {
        let (_, collection) = self.target(task).await?;
        let name = &task.manifest.id.name;
        self.send(|| watch::get(&self.client, &collection, name, self.timeout))
            .await
    }

    async fn dry_run_apply(&self, task: &Task) -> Result<Value, LiveError> {
        let (ns, collection) = self.target(task).await?;
        let body = request_body(&task.manifest.object, ns.as_deref());
        let params = PatchParams::apply(&self.field_manager).force().dry_run();
        let name = &task.manifest.id.name;
        self.send(|| {
            let req = Request::new(&collection)
                .patch(name, &params, &Patch::Apply(&body))
                .map_err(|e| RequestError::Build(e.to_string()));
            async move { request::send(&self.client, req?, self.timeout).await }
        })
        .await
        .map(|r| r.body)
    }

    async fn dry_run_update(&self, task: &Task, object: &Value) -> Result<Value, LiveError> {
        let (_, collection) = self.target(task).await?;
        let mut object = object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        let body = serde_json::to_vec(&object).map_err(|e| LiveError::Request(e.to_string()))?;
        let params = PostParams {
            dry_run: true,
            field_manager: Some(self.field_manager.clone()),
        };
        let name = &task.manifest.id.name;
        self.send(|| {
            let req = Request::new(&collection)
                .replace(name, &params, body.clone())
                .map_err(|e| RequestError::Build(e.to_string()));
            async move { request::send(&self.client, req?, self.timeout).await }
        })
        .await
        .map(|r| r.body)
    }

    async fn dry_run_create(&self, task: &Task, object: &Value) -> Result<Value, LiveError> {
        let (ns, collection) = self.target(task).await?;
        let body = serde_json::to_vec(&request_body(object, ns.as_deref()))
            .map_err(|e| LiveError::Request(e.to_string()))?;
        let params = PostParams {
            dry_run: true,
            field_manager: Some(self.field_manager.clone()),
        };
        self.send(|| {
            let req = Request::new(&collection)
                .create(&params, body.clone())
                .map_err(|e| RequestError::Build(e.to_string()));
            async move { request::send(&self.client, req?, self.timeout).await }
        })
        .await
        .map(|r| r.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_namespace_is_recognised_from_the_status_details() {
        let e = RequestError::Api {
            code: 404,
            reason: "NotFound".into(),
            message: "namespaces \"openshift-foo\" not found".into(),
            retry_after: None,
            details: Some(Box::new(crate::cluster::request::StatusDetails {
                kind: "namespaces".into(),
                group: String::new(),
                name: "openshift-foo".into(),
            })),
        };
        assert_eq!(
            classify(&e),
            LiveError::NamespaceMissing("openshift-foo".into())
        );
        let other = RequestError::Api {
            code: 403,
            reason: "Forbidden".into(),
            message: "no".into(),
            retry_after: None,
            details: None,
        };
        assert!(matches!(classify(&other), LiveError::Request(_)));
    }
}
