//! What the operator writes besides the runs' own ClusterVersion status: the ReleaseAccepted
//! condition when a desired release cannot be had (and again when it can), and Kubernetes
//! Events about ClusterVersion `version` for the start, end and failure of an update.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::PostParams;
use kube::core::Request;
use serde_json::{Value, json};

use super::follow::COLLECTION;
use crate::apply::clusterversion::NAME;
use crate::cluster::request::{self, RequestError};
use crate::cluster::watch;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Sets ClusterVersion's `ReleaseAccepted` condition, writing only when it changes. A
/// ClusterVersion with no status yet (nothing was ever installed) is left alone: the real CRD
/// requires the rest of the status with it.
///
/// # Errors
/// The request error.
pub async fn release_accepted(
    client: &Client,
    accepted: bool,
    reason: &str,
    message: &str,
) -> Result<bool, RequestError> {
    let Some(mut cv) = watch::get(client, COLLECTION, NAME, TIMEOUT).await? else {
        return Ok(false);
    };
    let Some(status) = cv.get_mut("status").filter(|s| s.get("desired").is_some()) else {
        return Ok(false);
    };
    let value = if accepted { "True" } else { "False" };
    let conditions = status
        .as_object_mut()
        .map(|o| o.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(list)) = conditions else {
        return Ok(false);
    };
    let same = list.iter().any(|c| {
        c["type"] == "ReleaseAccepted"
            && c["status"] == value
            && c["reason"] == reason
            && c["message"] == message
    });
    if same {
        return Ok(false);
    }
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    crate::cvo::status::set(list, &now, "ReleaseAccepted", value, reason, message);
    let body = serde_json::to_vec(&cv).map_err(|e| RequestError::Build(e.to_string()))?;
    let req = Request::new(COLLECTION)
        .replace_subresource("status", NAME, &PostParams::default(), body)
        .map_err(|e| RequestError::Build(e.to_string()))?;
    request::send(client, req, TIMEOUT).await?;
    Ok(true)
}

/// One Kubernetes Event about ClusterVersion `version`, in `namespace`.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// CamelCase reason, e.g. `UpdateStarted`.
    pub reason: &'a str,
    /// For people.
    pub message: String,
}

/// Records `event` (core/v1 Event, reporting component `minicvo`).
///
/// # Errors
/// The request error.
pub async fn event(
    client: &Client,
    namespace: &str,
    identity: &str,
    event: Event<'_>,
) -> Result<(), RequestError> {
    let now = Timestamp::now();
    let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let body = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "version.", "namespace": namespace},
        // The API server keeps a cluster-scoped object's Events in `default` unless the
        // reference names a namespace; like the CVO, name the operator's.
        "involvedObject": {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "name": NAME, "namespace": namespace},
        "reason": event.reason,
        "message": event.message,
        "type": if event.warning { "Warning" } else { "Normal" },
        "source": {"component": "minicvo"},
        "reportingComponent": "minicvo",
        "reportingInstance": identity,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    });
    let bytes = serde_json::to_vec(&body).map_err(|e| RequestError::Build(e.to_string()))?;
    let req = Request::new(format!("/api/v1/namespaces/{namespace}/events"))
        .create(&PostParams::default(), bytes)
        .map_err(|e| RequestError::Build(e.to_string()))?;
    request::send(client, req, TIMEOUT).await.map(|_| ())
}

/// Creates `namespace` unless it exists.
///
/// # Errors
/// The request error.
pub async fn ensure_namespace(client: &Client, namespace: &str) -> Result<(), RequestError> {
    if watch::get(client, "/api/v1/namespaces", namespace, TIMEOUT)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    let bytes = serde_json::to_vec(&body).map_err(|e| RequestError::Build(e.to_string()))?;
    let req = Request::new("/api/v1/namespaces")
        .create(&PostParams::default(), bytes)
        .map_err(|e| RequestError::Build(e.to_string()))?;
    match request::send(client, req, TIMEOUT).await {
        Err(e) if e.is(409) => Ok(()),
        r => r.map(|_| ()),
    }
}
