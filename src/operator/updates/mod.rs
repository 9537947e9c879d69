//! The available-updates loop (the CVO's `syncAvailableUpdates`): from ClusterVersion `spec`
//! (`upstream`, unless `--update-service` overrides it, else the CVO's default update service;
//! `channel`, `clusterID`, `desiredUpdate.architecture`) and the cluster's version
//! (`status.desired.version`, else the operator's own release), the graph is fetched from the
//! update service at start, whenever one of them changes, and again once an interval (the
//! sync loop's `M`, as the CVO uses its reconcile interval) has passed since the last attempt.
//! What it offers is written as `status.availableUpdates`, `status.conditionalUpdates` and
//! `RetrievedUpdates` ([`crate::update_graph`]), and written again whenever another writer's status
//! lacks it.
//!
//! A failed periodic refresh (`RemoteFailed`, `ResponseFailed`, `ResponseInvalid`) keeps the
//! updates of the last success for up to 24 hours, as the CVO keeps its cache; a failure after
//! a change of the query clears them.
//!
//! - [`fetch`]: the HTTP request, bounded in time and size.
//! - [`mod@write`]: the status write.

pub mod fetch;
pub mod write;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::update_graph::cincinnati;
use crate::update_graph::status::{self, Query, Retrieved};

/// How long one graph request may take (connecting, answering and sending the body). The CVO
/// allows an hour; a stuck service here only delays the next attempt.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the updates of a success are kept through failed refreshes.
const KEEP_ON_FAILURE: Duration = Duration::from_secs(24 * 3600);

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct UpdatesOptions {
    /// Time between fetches of an unchanged query.
    pub interval: Duration,
    /// The cluster's version while ClusterVersion has no `status.desired.version`.
    pub own_version: String,
    /// `--update-service`: asked instead of `spec.upstream` (empty: none; without either the
    /// CVO's default service is asked).
    pub update_service: String,
    /// Bound on one request.
    pub timeout: Duration,
}

/// The last attempt and what it gave.
struct Cache {
    query: Query,
    attempted: Instant,
    /// The last success for this query, and when.
    good: Option<(Retrieved, Instant)>,
    retrieved: Retrieved,
}

/// Runs the loop until `cancel` fires or the ClusterVersion follower stops.
pub async fn run(
    client: Client,
    mut cluster_version: watch::Receiver<Option<Value>>,
    options: UpdatesOptions,
    cancel: CancellationToken,
) {
    let mut cache: Option<Cache> = None;
    // What was last written, since when, and how often: the same write is made at most
    // three times within an interval, so a status the API server keeps changing back (it
    // should not) cannot make a hot loop.
    let mut last_write: Option<(Retrieved, Instant, u32)> = None;
    loop {
        let cv = cluster_version.borrow_and_update().clone();
        let mut next_fetch = None;
        if let Some(cv) = cv {
            let version = cv
                .pointer("/status/desired/version")
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .unwrap_or(&options.own_version)
                .to_string();
            let retrieved = match status::query(&cv, &version, &options.update_service) {
                Err(why) => {
                    cache = None;
                    Retrieved::unqueried(why)
                }
                Ok(q) => {
                    let c = refresh(cache.take(), q, &options).await;
                    next_fetch = Some(c.attempted + options.interval);
                    let r = c.retrieved.clone();
                    cache = Some(c);
                    r
                }
            };
            let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            let differs = cv
                .get("status")
                .filter(|s| s.get("desired").is_some())
                .is_some_and(|s| status::with_updates(s, &retrieved, &now) != *s);
            let same = last_write
                .as_ref()
                .filter(|(r, at, _)| *r == retrieved && at.elapsed() < options.interval);
            let repeated = same.is_some_and(|(_, _, n)| *n >= 3);
            if differs && !repeated {
                let next = same.map_or((Instant::now(), 1), |(_, at, n)| (*at, n + 1));
                match write::update_status(&client, |s| status::with_updates(s, &retrieved, &now))
                    .await
                {
                    Ok(_) => last_write = Some((retrieved, next.0, next.1)),
                    Err(e) => tracing::warn!("recording available updates: {e}"),
                }
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            r = cluster_version.changed() => if r.is_err() { return },
            () = async {
                match next_fetch {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// The cache for `query`: the one at hand while it is recent, else a new attempt.
async fn refresh(cache: Option<Cache>, query: Query, options: &UpdatesOptions) -> Cache {
    let now = Instant::now();
    let (previous, periodic) = match cache {
        Some(c) if c.query == query => {
            if now < c.attempted + options.interval {
                return c;
            }
            (Some(c), true)
        }
        Some(c) => {
            tracing::info!(
                "retrieving available updates again: the query changed ({} {:?} → {} {:?})",
                c.query.upstream,
                c.query.channel,
                query.upstream,
                query.channel
            );
            (None, false)
        }
        None => (None, false),
    };
    let result = match fetch::fetch(&query, options.timeout).await {
        Ok(f) => {
            let parsed = cincinnati::updates(&f.body, &query.version, &query.channel);
            if let Ok(u) = &parsed {
                tracing::info!(
                    "update graph {}: {} bytes in {:.0} ms; {} recommended and {} conditional updates from {}",
                    f.url,
                    f.body.len(),
                    f.elapsed.as_secs_f64() * 1000.0,
                    u.updates.len(),
                    u.conditional.len(),
                    query.version
                );
                for w in &u.warnings {
                    tracing::warn!("update graph: {w}");
                }
            }
            parsed
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(u) => {
            let retrieved = Retrieved::success(&u, query.to_multi);
            Cache {
                good: Some((retrieved.clone(), now)),
                retrieved,
                query,
                attempted: now,
            }
        }
        Err(e) => {
            tracing::warn!("update graph: {e}");
            let keep = previous.and_then(|p| p.good).filter(|(_, at)| {
                periodic
                    && now.duration_since(*at) < KEEP_ON_FAILURE
                    && matches!(
                        e.reason,
                        "RemoteFailed" | "ResponseFailed" | "ResponseInvalid"
                    )
            });
            Cache {
                retrieved: Retrieved::failed(&e, keep.as_ref().map(|(r, _)| r)),
                good: keep,
                query,
                attempted: now,
            }
        }
    }
}
