//! Writing what the update graph owns into ClusterVersion `version`'s status: read the object,
//! change its status, PUT it to the `status` subresource (the CVO's write: the whole object,
//! with its `resourceVersion`); a conflict with another writer reads again.

use std::time::Duration;

use kube::Client;
use kube::api::PostParams;
use kube::core::Request;
use serde_json::Value;

use crate::apply::clusterversion::NAME;
use crate::cluster::request::{self, RequestError};
use crate::cluster::watch;
use crate::operator::follow::COLLECTION;

const TIMEOUT: Duration = Duration::from_secs(10);
const CONFLICT_RETRIES: usize = 5;

/// Applies `change` to the status of ClusterVersion `version` and writes it when it changed.
/// A ClusterVersion without `status.desired` is left alone (the real CRD requires the rest of
/// the status with anything written). `Ok(true)`: written.
///
/// # Errors
/// The request error (a conflict after five reads).
pub async fn update_status(
    client: &Client,
    change: impl Fn(&Value) -> Value,
) -> Result<bool, RequestError> {
    let mut attempt = 0;
    loop {
        let Some(mut cv) = watch::get(client, COLLECTION, NAME, TIMEOUT).await? else {
            return Ok(false);
        };
        let Some(status) = cv.get("status").filter(|s| s.get("desired").is_some()) else {
            return Ok(false);
        };
        let next = change(status);
        if &next == status {
            return Ok(false);
        }
        cv["status"] = next;
        let body = serde_json::to_vec(&cv).map_err(|e| RequestError::Build(e.to_string()))?;
        let req = Request::new(COLLECTION)
            .replace_subresource("status", NAME, &PostParams::default(), body)
            .map_err(|e| RequestError::Build(e.to_string()))?;
        match request::send(client, req, TIMEOUT).await {
            Ok(_) => return Ok(true),
            Err(e) if e.is(409) && attempt < CONFLICT_RETRIES => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}
