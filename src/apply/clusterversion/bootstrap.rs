//! ClusterVersion `version` before a recorded run's first write.
//!
//! The CVO never applies a payload without its ClusterVersion: the cluster's bootstrap creates
//! the ClusterVersion CRD, and the CVO's sync loop creates `version` (a random `clusterID`,
//! the desired release) before its first pass, so every object it writes carries the owner
//! reference to it from the install on. A minicvo run that records ClusterVersion does the
//! same before its graph: when the kind is not served and the plan carries its CRD, that CRD
//! is created (the bootstrap's part) and waited for until `Established`; then `version` is
//! created when missing. The graph's own task for the CRD later merges it as any other
//! object (adding its owner reference).

use std::time::Duration;

use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::status::cluster_id;
use super::{CRD_NAME, NAME, retrying, served};
use crate::apply::actions::crd_wait::crd_state;
use crate::cluster::discovery::Discovery;
use crate::cluster::request::{self, RequestError};
use crate::cluster::watch::{self, WatchEnd};
use crate::merge::{self, ClusterConfig};
use crate::plan::Plan;
use crate::stub_crds::CRD_COLLECTION as CRDS;

/// Why ClusterVersion `version` could not be made ready before the run.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// A request failed (after the run's retries for transient errors).
    #[error("{what}: {source}")]
    Request {
        /// What the request was for.
        what: &'static str,
        /// The error.
        #[source]
        source: RequestError,
    },
    /// The CRD was created but did not become `Established` in time.
    #[error("CustomResourceDefinition {CRD_NAME} not Established within {0:?}")]
    NotEstablished(Duration),
    /// The server refused the CRD's names.
    #[error("CustomResourceDefinition {CRD_NAME}: {0}")]
    NamesNotAccepted(String),
    /// The payload's CRD manifest could not be prepared.
    #[error("CustomResourceDefinition {CRD_NAME}: {0}")]
    Manifest(#[from] merge::MergeError),
}

fn failed(what: &'static str) -> impl FnOnce(RequestError) -> BootstrapError {
    move |source| BootstrapError::Request { what, source }
}

/// Makes ClusterVersion `version` exist before the run writes anything, as described in the
/// module docs: `Ok(false)` when the cluster cannot serve it (the kind is not served and the
/// plan does not carry its CRD), `Ok(true)` when it exists.
///
/// # Errors
///
/// [`BootstrapError`] when a request fails or the CRD does not become `Established` within
/// `crd_timeout`.
pub async fn ensure(
    client: &Client,
    discovery: &Discovery,
    plan: &Plan,
    version: &str,
    field_manager: &str,
    timeout: Duration,
    crd_timeout: Duration,
) -> Result<bool, BootstrapError> {
    let url = match served(discovery).await {
        Some(url) => url,
        None => {
            let Some(crd) = plan
                .tasks
                .iter()
                .map(|t| &t.manifest)
                .find(|m| m.is_crd() && m.id.name == CRD_NAME)
            else {
                return Ok(false);
            };
            let crd = merge::prepare(&crd.object, &ClusterConfig::default())?;
            let established = create_crd(client, &crd, timeout, crd_timeout).await?;
            discovery.insert_crd(&established);
            let Some(url) = served(discovery).await else {
                return Ok(false);
            };
            url
        }
    };
    let present = retrying(|| watch::get(client, &url, NAME, timeout))
        .await
        .map_err(failed("reading ClusterVersion version"))?;
    if present.is_none() {
        retrying(|| create(client, &url, version, field_manager, timeout))
            .await
            .map_err(failed("creating ClusterVersion version"))?;
    }
    Ok(true)
}

/// Creates the CRD (one that exists already is fine) and returns it once `Established`.
async fn create_crd(
    client: &Client,
    crd: &Value,
    timeout: Duration,
    crd_timeout: Duration,
) -> Result<Value, BootstrapError> {
    let body = serde_json::to_vec(crd).expect("a CRD serializes");
    let post = || async {
        let req = Request::new(CRDS)
            .create(&PostParams::default(), body.clone())
            .map_err(|e| RequestError::Build(e.to_string()))?;
        match request::send(client, req, timeout).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(409) => Ok(()),
            Err(e) => Err(e),
        }
    };
    retrying(post).await.map_err(failed(
        "creating CustomResourceDefinition clusterversions.config.openshift.io",
    ))?;
    // Established (with the CRD), or why its names were refused.
    let is_established = |o: Option<&Value>| {
        let o = o?;
        match crd_state(o) {
            Ok(true) => Some(Ok(o.clone())),
            Ok(false) => None,
            Err(why) => Some(Err(why)),
        }
    };
    let deadline = Instant::now() + crd_timeout;
    let never = CancellationToken::new();
    match watch::watch_until(
        client,
        CRDS,
        CRD_NAME,
        None,
        deadline,
        &never,
        is_established,
    )
    .await
    {
        WatchEnd::Done(Ok(crd)) => Ok(crd),
        WatchEnd::Done(Err(why)) => Err(BootstrapError::NamesNotAccepted(why)),
        WatchEnd::Failed(e) => Err(failed(
            "watching CustomResourceDefinition clusterversions.config.openshift.io",
        )(e)),
        _ => Err(BootstrapError::NotEstablished(crd_timeout)),
    }
}

/// Creates `version` as the CVO does when it finds none: a random `clusterID` and the run's
/// release as `desiredUpdate`. A server-side apply, not a POST (see
/// `operator_wait::create_operator`).
pub(super) async fn create(
    client: &Client,
    url: &str,
    version: &str,
    field_manager: &str,
    timeout: Duration,
) -> Result<Value, RequestError> {
    let cv = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": NAME},
        "spec": {"clusterID": cluster_id(), "desiredUpdate": {"version": version}},
    });
    let params = PatchParams::apply(field_manager);
    let req = Request::new(url)
        .patch(NAME, &params, &Patch::Apply(&cv))
        .map_err(|e| RequestError::Build(e.to_string()))?;
    Ok(request::send(client, req, timeout).await?.body)
}
