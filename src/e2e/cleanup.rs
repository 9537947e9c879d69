//! Removing what payloads put on a cluster, so an e2e starts from a clean slate (`--clean`)
//! and tests that install fixed-name payloads can run one after another.
//!
//! Every object of the plans (whatever its action) is deleted with background propagation,
//! cluster-scoped ones and those in namespaces that stay first, then the CRDs (their custom
//! resources go with them), then the namespaces (kube-controller-manager empties them), then
//! the stand-ins [`crate::stub_crds`] installed. The call returns once every namespace and
//! CRD is gone, so the next install does not meet a terminating namespace.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use kube::Client;
use kube::api::DeleteParams;
use kube::core::Request;
use serde_json::Value;
use tokio::time::Instant;

use crate::cluster::discovery::Discovery;
use crate::cluster::request::{self, RequestError};
use crate::cluster::watch;
use crate::plan::{Action, Plan};
use crate::stub_crds::{STUB_LABEL, STUB_NAMESPACE_LABEL};

/// What [`clean`] removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cleaned {
    /// Objects whose DELETE was accepted.
    pub deleted: usize,
    /// Seconds it took, waits included.
    pub seconds: f64,
}

/// Why cleaning failed.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// A request failed.
    #[error("cleaning up {what}: {source}")]
    Request {
        /// What was being deleted.
        what: String,
        /// The error.
        #[source]
        source: RequestError,
    },
    /// Objects still exist after the timeout.
    #[error("cleaning up: still present after {timeout:?}: {left}")]
    Timeout {
        /// The timeout.
        timeout: Duration,
        /// What is left.
        left: String,
    },
}

async fn delete(
    client: &Client,
    collection: &str,
    name: &str,
    timeout: Duration,
) -> Result<bool, CleanError> {
    let req = Request::new(collection)
        .delete(name, &DeleteParams::background())
        .map_err(|e| CleanError::Request {
            what: name.to_string(),
            source: RequestError::Build(e.to_string()),
        })?;
    match request::send(client, req, timeout).await {
        Ok(_) => Ok(true),
        Err(e) if e.is(404) => Ok(false),
        Err(source) => Err(CleanError::Request {
            what: format!("{collection}/{name}"),
            source,
        }),
    }
}

async fn names_labelled(
    client: &Client,
    collection: &str,
    label: &str,
    timeout: Duration,
) -> Result<Vec<String>, CleanError> {
    let url = format!("{collection}?labelSelector={}", label.replace('/', "%2F"));
    let req = http::Request::get(&url)
        .body(Vec::new())
        .map_err(|e| CleanError::Request {
            what: collection.to_string(),
            source: RequestError::Build(e.to_string()),
        })?;
    let list = request::send(client, req, timeout)
        .await
        .map_err(|source| CleanError::Request {
            what: collection.to_string(),
            source,
        })?;
    Ok(list
        .body
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NAMESPACES: &str = "/api/v1/namespaces";

/// Deletes every object of `plans` and every stand-in, and waits (up to `timeout`) until the
/// namespaces and CRDs are gone.
///
/// # Errors
/// [`CleanError`] for a failed request or what is left after the timeout.
pub async fn clean(
    client: &Client,
    plans: &[&Plan],
    timeout: Duration,
) -> Result<Cleaned, CleanError> {
    let started = Instant::now();
    let request_timeout = Duration::from_secs(30);
    let discovery = Discovery::new(client.clone(), request_timeout);
    discovery
        .prime()
        .await
        .map_err(|source| CleanError::Request {
            what: "discovery".into(),
            source,
        })?;
    let mut namespaces: BTreeSet<String> = BTreeSet::new();
    let mut crds: BTreeSet<String> = BTreeSet::new();
    let mut seen = HashSet::new();
    let mut others = Vec::new();
    for plan in plans {
        for t in plan.tasks.iter().filter(|t| t.action != Action::Skip) {
            let m = &t.manifest;
            if !seen.insert(m.id.clone()) {
                continue;
            }
            if m.id.group.is_empty() && m.id.kind == "Namespace" {
                namespaces.insert(m.id.name.clone());
            } else if m.is_crd() {
                crds.insert(m.id.name.clone());
            } else {
                others.push(m);
            }
        }
    }
    namespaces
        .extend(names_labelled(client, NAMESPACES, STUB_NAMESPACE_LABEL, request_timeout).await?);
    crds.extend(
        names_labelled(client, CRDS, &format!("{STUB_LABEL}=true"), request_timeout).await?,
    );
    let mut deleted = 0;
    for m in others {
        let Ok(Some(r)) = discovery
            .resolve(&m.id.group, m.version(), &m.id.kind)
            .await
        else {
            continue; // not served: nothing to delete
        };
        let ns = if r.namespaced {
            let ns = m.id.namespace.clone().unwrap_or_else(|| "default".into());
            if namespaces.contains(&ns) {
                continue; // goes with its namespace
            }
            Some(ns)
        } else {
            None
        };
        if delete(
            client,
            &r.url_path(ns.as_deref()),
            &m.id.name,
            request_timeout,
        )
        .await?
        {
            deleted += 1;
        }
    }
    for c in &crds {
        if delete(client, CRDS, c, request_timeout).await? {
            deleted += 1;
        }
    }
    for n in &namespaces {
        if delete(client, NAMESPACES, n, request_timeout).await? {
            deleted += 1;
        }
    }
    let deadline = Instant::now() + timeout;
    loop {
        let mut left = Vec::new();
        for (collection, names) in [(NAMESPACES, &namespaces), (CRDS, &crds)] {
            for n in names {
                let live = watch::get(client, collection, n, request_timeout)
                    .await
                    .map_err(|source| CleanError::Request {
                        what: n.clone(),
                        source,
                    })?;
                if live.is_some() {
                    left.push(n.clone());
                }
            }
        }
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(CleanError::Timeout {
                timeout,
                left: left.join(", "),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(Cleaned {
        deleted,
        seconds: started.elapsed().as_secs_f64(),
    })
}
