//! `minicvo operator`: a running Cluster Version Operator. It owns ClusterVersion `version`
//! and keeps the cluster on the release it asks for:
//!
//! ```text
//! leader election (Lease) ──► sync loop ──► apply::run (one pass of the graph)
//!        │                       ▲   └──► ReleaseAccepted, Events, metrics
//!        └─ renew / release      └── ClusterVersion follower (spec.desiredUpdate, overrides,
//!                                    capabilities)
//! ```
//!
//! - [`payloads`]: the releases at hand, by `release-metadata` version.
//! - [`desired`]: what ClusterVersion asks for (pure).
//! - [`schedule`]: the CVO's reconcile interval, error backoff and pass timeout (pure).
//! - `sync`: the loop (cvo.md §8.2): initializing while no update completed, updating to a
//!   new desired release, then reconciling every interval; a failed pass is retried after the
//!   backoff; a new desired release cancels the pass in flight.
//! - [`leader`]: leader election on a `coordination.k8s.io/v1` Lease.
//! - `accept`: taking up a new release: [`verify`] its image's signature before the pull,
//!   then the [`preconditions`]; refused unless `force`, what was forced is an accepted risk.
//! - [`admin_acks`]: the admin gates not acknowledged, risks behind `Upgradeable`.
//! - [`record`]: ReleaseAccepted and Kubernetes Events.
//! - [`metrics`] and [`http`]: `/metrics`, `/healthz`, `/readyz`.
//! - [`updates`]: the update graph: `availableUpdates`, `conditionalUpdates` and
//!   `RetrievedUpdates` from the update service (`--update-service`, `spec.upstream` or the
//!   CVO's default) and `spec.channel`.
//!
//! Differences from the CVO are listed in docs/operator.md.

mod accept;
pub mod admin_acks;
pub mod desired;
mod follow;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod payloads;
pub mod preconditions;
pub mod record;
pub mod schedule;
mod sync;
pub mod updates;
pub mod verify;

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::apply::{ApplyObserver, ApplyOptions, ApplyReport, Connection};
use crate::cluster::request::RequestError;
use crate::payload::LoadOptions;
use crate::plan::Mode;

pub use self::leader::{Elector, LeaderOptions};
pub use self::payloads::PayloadIndex;
pub use self::schedule::Schedule;

/// Settings of the operator.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// The release the operator runs itself: the work when ClusterVersion asks for nothing.
    pub release: String,
    /// The image of that release (the CVO's `--release-image`; empty: none). A
    /// `spec.desiredUpdate.image` naming it is the operator's own release, exempt from
    /// signature verification and preconditions as the CVO's own image is; every other image
    /// is verified.
    pub release_image: String,
    /// The update service asked instead of `spec.upstream` (the CVO's `--update-service`;
    /// empty: `spec.upstream`, else the CVO's default service).
    pub update_service: String,
    /// The load settings every payload is read with (profile, feature set, exclusions); the
    /// overrides and capabilities come from ClusterVersion.
    pub load: LoadOptions,
    /// Which of `load`'s feature set and gates were given by a flag; the others come from
    /// FeatureGate `cluster`, read when the operator takes up new work
    /// ([`crate::cvo::features`]).
    pub explicit_features: crate::cvo::features::Explicit,
    /// Settings of every pass (the mode, timeout and capabilities are set per pass).
    pub apply: ApplyOptions,
    /// Reconcile interval, backoff and pass timeout.
    pub schedule: Schedule,
    /// Leader election; `None`: run without it (a single replica).
    pub leader: Option<LeaderOptions>,
    /// The operator's namespace (its Lease and Events); created when missing.
    pub namespace: String,
    /// Longest time to read the signatures of a release image ([`verify`]); the CVO's is
    /// half its 4-minute retrieval bound.
    pub verify_timeout: std::time::Duration,
}

/// The CVO's signature verification bound: half of its 4-minute payload retrieval timeout.
pub const DEFAULT_VERIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassEnd {
    /// Every task succeeded.
    Completed,
    /// A task failed or the pass timed out: retried after the backoff.
    Failed,
    /// A new desired state cancelled it.
    Superseded,
    /// The operator is stopping.
    Stopped,
}

/// One pass, for an embedder (the e2e harness) and the logs.
#[derive(Debug)]
pub struct PassRecord {
    /// The release.
    pub version: String,
    /// The mode of the pass.
    pub mode: Mode,
    /// How it ended.
    pub end: PassEnd,
    /// Wall time.
    pub seconds: f64,
    /// The run's report (`None` when it could not start).
    pub report: Option<ApplyReport>,
}

/// What the operator tells the process around it.
#[derive(Clone)]
pub struct Hooks {
    /// Every pass's events.
    pub observer: Option<Arc<dyn ApplyObserver>>,
    /// Every pass's end.
    pub passes: Option<mpsc::UnboundedSender<PassRecord>>,
    /// The metrics registry.
    pub metrics: Arc<metrics::Metrics>,
    /// Liveness and readiness.
    pub health: Arc<http::Health>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            observer: None,
            passes: None,
            metrics: Arc::new(metrics::Metrics::new()),
            health: Arc::new(http::Health::new()),
        }
    }
}

/// Why the operator stopped other than by being asked to.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The leader could not renew its lease (or another candidate took it): it stopped
    /// working at once, and the process should exit so that it restarts as a candidate.
    #[error("lost the leader lease {namespace}/{name}")]
    LostLease {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
    },
    /// ClusterVersion could not be read at start.
    #[error("reading clusterversion {name}: {source}", name = crate::apply::clusterversion::NAME, source = .0)]
    ClusterVersion(#[source] RequestError),
}

/// Runs the operator until `cancel` fires (then the pass in flight stops starting work, the
/// lease is released and `Ok` is returned) or the lease is lost.
///
/// # Errors
/// [`OperatorError`].
pub async fn run(
    conn: Connection,
    index: PayloadIndex,
    options: OperatorOptions,
    hooks: Hooks,
    cancel: CancellationToken,
) -> Result<(), OperatorError> {
    let identity = options
        .leader
        .as_ref()
        .map_or_else(leader::default_identity, |l| l.identity.clone());
    if let Err(e) = record::ensure_namespace(&conn.client, &options.namespace).await {
        tracing::warn!("namespace {}: {e}", options.namespace);
    }
    let work_cancel = cancel.child_token();
    let mut held = None;
    if let Some(lo) = &options.leader {
        let elector = Arc::new(Elector::new(conn.client.clone(), lo.clone()));
        hooks.health.mark_alive();
        let health = hooks.health.clone();
        tracing::info!(
            "{} is a candidate for lease {}/{}",
            lo.identity,
            lo.namespace,
            lo.name
        );
        let leads = elector
            .acquire(&cancel, |holder| {
                health.set_ready(true);
                health.mark_alive();
                tracing::info!("standing by: {holder} leads");
            })
            .await;
        if !leads {
            return Ok(());
        }
        tracing::info!("{} leads", lo.identity);
        hooks.metrics.set_leader(true);
        let stop = CancellationToken::new();
        let lost = CancellationToken::new();
        let renew = elector.clone().hold(stop.clone(), lost.clone());
        {
            // A lost lease stops the work at once and stops saying "leader".
            let (lost, work, metrics) = (lost.clone(), work_cancel.clone(), hooks.metrics.clone());
            tokio::spawn(async move {
                lost.cancelled().await;
                metrics.set_leader(false);
                work.cancel();
            });
        }
        held = Some((elector, stop, lost, renew));
    }
    if held.is_none() {
        // Without election this replica is the one that works.
        hooks.metrics.set_leader(true);
    }
    hooks.health.set_ready(true);
    let initial = match crate::cluster::watch::get(
        &conn.client,
        follow::COLLECTION,
        crate::apply::clusterversion::NAME,
        options.apply.runner.request_timeout,
    )
    .await
    {
        Ok(cv) => cv,
        // Not served yet: the payload brings the CRD.
        Err(e) if e.is(404) => None,
        Err(e) => return Err(OperatorError::ClusterVersion(e)),
    };
    let cluster_version = follow::follow(conn.client.clone(), initial);
    let updates = tokio::spawn(updates::run(
        conn.client.clone(),
        cluster_version.clone(),
        updates::UpdatesOptions {
            interval: options.schedule.interval,
            own_version: options.release.clone(),
            update_service: options.update_service.clone(),
            timeout: updates::FETCH_TIMEOUT,
        },
        work_cancel.clone(),
    ));
    let mut sync = sync::SyncLoop {
        conn,
        index: Arc::new(Mutex::new(index)),
        options: options.clone(),
        hooks: hooks.clone(),
        cluster_version,
        identity,
    };
    sync.run(&work_cancel).await;
    updates.abort();
    if let Some((elector, stop, lost, renew)) = held {
        stop.cancel();
        let _ = renew.await;
        hooks.metrics.set_leader(false);
        if lost.is_cancelled() {
            let o = elector.options();
            return Err(OperatorError::LostLease {
                namespace: o.namespace.clone(),
                name: o.name.clone(),
            });
        }
        match elector.release().await {
            Ok(()) => tracing::info!("released the leader lease"),
            Err(e) => tracing::warn!("releasing the leader lease: {e}"),
        }
    }
    Ok(())
}
