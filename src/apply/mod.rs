//! The execute stage: roll a [`Plan`] onto a cluster the way the CVO's sync worker does, with
//! the CVO's graph, parallelism and per-mode rules, and report it.
//!
//! ```text
//! preflight ──► engine (RunGraph) ──► actions: apply │ create-only │ delete │ operator wait │ CRD wait
//!                   │                          └─ all through crate::cluster (HTTP)
//!                   └─ events ──► report, ClusterVersion recorder, the caller's observer
//! ```
//!
//! - [`preflight`] (run first by [`run`]): before anything is
//!   written, every kind the plan uses must be served (or come from a CRD of the plan) and
//!   every namespace it uses must exist (or be created by the plan); otherwise the run is
//!   refused with the full list, or, when allowed ([`ApplyOptions::preflight`]), stand-in CRDs
//!   and namespaces are installed.
//! - [`engine`]: the CVO's `RunGraph` on tokio (ready nodes lowest index first, bounded
//!   parallelism, a failure blocks only dependents, Ctrl-C stops starting work).
//! - [`actions`]: one task against the cluster. [`actions::ClusterRunner`] (the engine's
//!   `TaskRunner`) holds the [`actions::handle`] every action reads and one self-contained
//!   value per action, each in its own module and owning its state: [`actions::apply`]
//!   (server-side apply, create-only), [`actions::cvo`] (the default apply: GET, merge,
//!   UPDATE), [`actions::delete`] (deletes and the deletions still in progress). The waits:
//!   [`actions::crd_wait`] (a written CRD until `Established`), [`actions::operator_wait`]
//!   (ClusterOperators, with precreation), [`actions::namespace_wait`] (a namespace this plan
//!   is still creating), and, in the handle, a kind whose CRD this plan is still establishing.
//! - [`events`]: the observer interface and the event list; [`report`] and [`clusterversion`]
//!   are observers (progress rendering is the CLI's).
//!
//! HTTP, retries, watches and discovery live in [`crate::cluster`]; the ClusterOperator health
//! rule, shared with the simulator, in [`crate::clusteroperator`].
//!
//! # Where minicvo deliberately differs from the CVO
//!
//! - **The CVO's write, the default** ([`ApplyStrategy::Cvo`], [`actions::cvo`]): GET, the
//!   CVO's per-kind merge ([`crate::merge`]), UPDATE only when it changed something; a no-op
//!   re-apply costs one GET per object. The ClusterVersion owner reference comes from
//!   ClusterVersion `version` as it is before the run; the proxy variables and the TLS
//!   profile from Proxy and APIServer `cluster`, read again right before each object that
//!   needs them ([`actions::cvo::read_cluster_config`]). A typed object is merged again right
//!   after it is created and updated when that changes something (the CVO's next pass).
//!   Deployments, DaemonSets and Jobs get no health check. A 409 re-reads and merges again
//!   at once, at most 5 times.
//! - **Server-side apply, the alternative** ([`ApplyStrategy::ServerSide`]): one forced
//!   PATCH per object with our field manager; fields we stop setting are removed. Created /
//!   configured / unchanged come from the PATCH response alone: 201 means created; otherwise a
//!   resourceVersion newer than the cluster's at the start *and* an `Apply` managed-fields
//!   time at or after the start mean this run changed the object ([`actions::Baseline`]).
//! - **Watches instead of re-walking the graph** (cvo.md §7, §11 #560, #818). A ClusterOperator
//!   wait watches the operator and the next run-level starts the moment it is done, instead
//!   of failing the pass and re-walking it after a backoff. The wait gives its worker back
//!   while it waits ([`engine`]), so the rest of the run-level is applied in the same walk,
//!   as in the CVO's first pass. A CRD is waited on until
//!   `Established` (the CVO's #771 check), then its kinds are served at once.
//! - **Precreation with server-side apply.** A missing ClusterOperator (and ClusterVersion) is
//!   created with an apply, not the CVO's CREATE: the API server holds every POST to a CRD
//!   established less than 2 s ago for 2 s, which would stall the node right after the CRDs.
//! - **Timeouts.** `--wait-timeout` (default 30m) ends a ClusterOperator wait with a failure
//!   naming the operator and what it lacks (the CVO waits forever and only changes its
//!   reporting after 30/40 minutes); `--timeout` bounds the run; every request has a timeout.
//! - **Retries** are per request, fast and bounded (about 6 s, `Retry-After` honoured), and
//!   permanent errors (invalid, forbidden, unknown kind) fail at once; the CVO retries every
//!   error twice, 10 s apart.
//! - **Deletion tracking.** Deletes are issued, like the CVO's, only in updating mode and
//!   without waiting; deletions still held by finalizers are checked again at the end of the
//!   run and reported (`--wait-deletes` waits for them); the CVO only notices on a later pass.
//! - **Dry run.** `--dry-run=server` sends every write with `dryRun=All` and reports what would
//!   change, down to field paths; a custom resource whose CRD only this plan creates is
//!   reported "not served yet" instead of failing. The CVO has no dry run.
//! - **Progress reaches 100%.** Apply-time skips count as done, and ClusterVersion's
//!   `Progressing` keeps the final count ("Cluster version is V: M of M done (100%
//!   complete)"); see [`clusterversion`].
//! - **One pass.** There is no reconcile loop: minicvo runs the graph once and exits.
//! - **Workloads available, when asked** ([`available`], `apply --wait-available`): after a
//!   successful run, every Deployment and DaemonSet applied is watched until rolled out and
//!   available. The CVO never waits for workloads.
//!
//! [`Plan`]: crate::plan::Plan

pub mod actions;
pub mod available;
pub mod clusterversion;
pub mod engine;
pub mod events;
pub mod preflight;
pub mod report;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use crate::cluster::{Connection, RequestCounter, connect, connect_with};
pub use actions::{ApplyStrategy, RunnerOptions};
pub use events::{ApplyEvent, ApplyObserver, EventKind, EventLog, Outcome, StopReason, TaskRef};
pub use report::ApplyReport;

use self::actions::{ClusterHandle, ClusterRunner};
use self::clusterversion::{ClusterVersionRecorder, Final, RecorderOptions};
use self::events::{Emitter, Observers};
use self::report::{ReportBuilder, RunFacts};
use crate::cluster::discovery::Discovery;
use crate::cluster::request::RequestError;
use crate::cluster::retry;
use crate::plan::Plan;
use crate::stub_crds::{StandIns, StubError, StubReport};

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Per-task settings (the mode is taken from the plan).
    pub runner: RunnerOptions,
    /// Nodes at once; `None` means the CVO's default for the mode.
    pub parallelism: Option<usize>,
    /// Bound on the whole run.
    pub timeout: Option<Duration>,
    /// Wait (up to the wait timeout) for deletions held by finalizers.
    pub wait_deletes: bool,
    /// Record the run in ClusterVersion `version` when the kind is served.
    pub record_cluster_version: bool,
    /// Release image pull spec, for the ClusterVersion history.
    pub release_image: String,
    /// The run's capabilities (enabled, known, implicitly enabled) for the ClusterVersion
    /// status ([`crate::cvo::capabilities::for_run`]); `None`: every known one enabled.
    pub capabilities: Option<crate::cvo::capabilities::CapabilityStatus>,
    /// The preflight before anything is written ([`preflight::ensure`]): missing kinds
    /// and namespaces are an error, or get the stand-ins allowed here. `None` skips it, for a
    /// caller that already checked (the e2e harness checks both payloads at once).
    pub preflight: Option<StandIns>,
    /// What the operator's checks of the release found, for the ClusterVersion status
    /// (`history[0].verified`, `acceptedRisks`, `Upgradeable`); default: nothing checked.
    pub checks: crate::cvo::status::ReleaseChecks,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            runner: RunnerOptions::default(),
            parallelism: None,
            timeout: None,
            wait_deletes: false,
            record_cluster_version: true,
            release_image: String::new(),
            capabilities: None,
            preflight: Some(StandIns::default()),
            checks: crate::cvo::status::ReleaseChecks::default(),
        }
    }
}

/// A run that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Discovery, the first request, failed.
    #[error(
        "cannot reach the API server {server}: {source}\nhint: check --kubeconfig and --context, \
         and that the cluster is up"
    )]
    Unreachable {
        /// The API server URL.
        server: String,
        /// The error.
        #[source]
        source: RequestError,
    },
    /// The preflight refused the run (kinds or namespaces missing) or could not install the
    /// stand-ins; nothing was written by the plan.
    #[error(transparent)]
    Preflight(Box<StubError>),
    /// Stand-ins (CRDs, namespaces) asked for in a dry run, which must not write.
    #[error(
        "stand-ins (--stub-missing-crds, --create-missing-namespaces) are written, which --dry-run=server does not allow"
    )]
    DryRunStandIns,
    /// A cluster config object the cvo strategy reads (ClusterVersion, Proxy, APIServer)
    /// could not be read.
    #[error(transparent)]
    ClusterConfig(actions::cvo::ClusterConfigError),
}

/// Applies `plan` to the cluster behind `conn`, delivering events to `observer`, until done,
/// `cancel` fires (Ctrl-C: no new work starts, requests in flight finish) or the timeout.
///
/// First the preflight of [`ApplyOptions::preflight`] checks that every kind the plan uses is
/// served and every namespace it uses exists (or is created by the plan), before anything is
/// written.
///
/// # Errors
/// [`ApplyError`] when the preflight refuses the run or the cluster cannot be reached at all.
/// Task failures are not errors: they are in the report.
pub async fn run(
    conn: &Connection,
    plan: Arc<Plan>,
    options: &ApplyOptions,
    observer: Arc<dyn ApplyObserver>,
    cancel: CancellationToken,
) -> Result<ApplyReport, ApplyError> {
    let preflight = match options.preflight {
        Some(stand_ins) => {
            if options.runner.dry_run && (stand_ins.crds || stand_ins.namespaces) {
                return Err(ApplyError::DryRunStandIns);
            }
            preflight::ensure(
                &conn.client,
                &[&plan],
                stand_ins,
                options.runner.crd_timeout,
            )
            .await
            .map_err(|e| ApplyError::Preflight(Box::new(e)))?
        }
        None => StubReport::default(),
    };
    let started = tokio::time::Instant::now();
    let requests_before = conn.requests.get();
    let mut runner_options = options.runner.clone();
    runner_options.mode = plan.mode;
    let dry_run = runner_options.dry_run;

    let discovery = Arc::new(Discovery::new(
        conn.client.clone(),
        runner_options.request_timeout,
    ));
    retry::retry(
        &runner_options.retry,
        &cancel,
        |_, _| false,
        |_, _, _| {},
        || discovery.prime(),
    )
    .await
    .map_err(|x| ApplyError::Unreachable {
        server: conn.server.clone(),
        source: x.error,
    })?;
    // The baseline classifies server-side apply responses; the cvo strategy compares
    // resourceVersions instead and reads what its pre-merge steps need.
    let cvo = runner_options.strategy == ApplyStrategy::Cvo;
    let baseline = if cvo {
        actions::Baseline::default()
    } else {
        actions::baseline(&conn.client, runner_options.request_timeout).await
    };
    // The CVO writes nothing before its ClusterVersion exists (clusterversion::bootstrap).
    if cvo
        && options.record_cluster_version
        && !dry_run
        && let Some(version) = &plan.version
        && let Err(e) = clusterversion::bootstrap::ensure(
            &conn.client,
            &discovery,
            &plan,
            version,
            &runner_options.field_manager,
            runner_options.request_timeout,
            runner_options.crd_timeout,
        )
        .await
    {
        // The recorder reports what it cannot record; the run goes on without the owner
        // reference, as on a cluster without ClusterVersion.
        tracing::warn!("ClusterVersion {}: {e}", clusterversion::NAME);
    }
    let given = &runner_options.cluster_config;
    if cvo && given.cluster_version.is_none() && given.proxy.is_none() && given.apiserver.is_none()
    {
        runner_options.cluster_config = actions::cvo::read_cluster_config(
            &conn.client,
            &discovery,
            &plan,
            options.record_cluster_version,
            runner_options.request_timeout,
        )
        .await
        .map_err(ApplyError::ClusterConfig)?;
    }

    let report = Arc::new(ReportBuilder::default());
    let mut observers: Vec<Arc<dyn ApplyObserver>> = vec![report.clone(), observer];
    let recorder = match (&plan.version, options.record_cluster_version && !dry_run) {
        (Some(version), true) => {
            let r = Arc::new(ClusterVersionRecorder::start(
                conn.client.clone(),
                discovery.clone(),
                RecorderOptions {
                    version: version.clone(),
                    image: options.release_image.clone(),
                    total: plan.tasks.len(),
                    field_manager: runner_options.field_manager.clone(),
                    request_timeout: runner_options.request_timeout,
                    version_hash: crate::cvo::version_hash::version_hash(
                        plan.tasks.iter().map(|t| &t.manifest),
                    ),
                    capabilities: options
                        .capabilities
                        .clone()
                        .unwrap_or_else(crate::cvo::capabilities::CapabilityStatus::all),
                    checks: options.checks.clone(),
                },
            ));
            observers.push(r.clone());
            Some(r)
        }
        _ => None,
    };
    let emitter = Emitter::new(Arc::new(Observers(observers)));
    let parallelism = options
        .parallelism
        .unwrap_or_else(|| plan.mode.default_parallelism(plan.graph.nodes.len()))
        .max(1);
    emitter.emit(EventKind::RunStarted {
        version: plan.version.clone(),
        mode: plan.mode,
        tasks: plan.tasks.len(),
        nodes: plan.graph.nodes.len(),
        parallelism,
        dry_run,
    });

    // Ctrl-C (the caller's token) or the timeout stop the graph with a reason.
    let stop = CancellationToken::new();
    let reason: Arc<Mutex<Option<StopReason>>> = Arc::new(Mutex::new(None));
    let watchdog = {
        let (stop, reason, emitter, cancel) = (
            stop.clone(),
            reason.clone(),
            emitter.clone(),
            cancel.clone(),
        );
        let timeout = options.timeout;
        tokio::spawn(async move {
            let why = tokio::select! {
                () = cancel.cancelled() => StopReason::Interrupted,
                () = async {
                    match timeout {
                        Some(t) => tokio::time::sleep(t).await,
                        None => std::future::pending().await,
                    }
                } => StopReason::TimedOut,
            };
            *reason.lock().expect("stop lock") = Some(why);
            emitter.emit(EventKind::Stopping { reason: why });
            stop.cancel();
        })
    };

    let runner = Arc::new(ClusterRunner::new(ClusterHandle::new(
        conn.client.clone(),
        plan.clone(),
        discovery,
        emitter.clone(),
        runner_options.clone(),
        baseline,
    )));
    let outcome = engine::run_graph(
        plan.clone(),
        runner.clone(),
        parallelism,
        emitter.clone(),
        stop.clone(),
    )
    .await;

    let stopped = *reason.lock().expect("stop lock");
    let deadline = {
        let mut d = tokio::time::Instant::now() + runner_options.wait_timeout;
        if let Some(t) = options.timeout {
            d = d.min(started + t);
        }
        d
    };
    let deletes_in_progress = runner
        .finish_deletes(options.wait_deletes && stopped.is_none(), deadline, &stop)
        .await;
    watchdog.abort();

    let not_run: Vec<TaskRef> = {
        let node_of = plan.node_of_task();
        outcome
            .not_run
            .iter()
            .map(|&t| TaskRef::new(&plan, t, node_of[t]))
            .collect()
    };
    // Failures as the report will list them, for the ClusterVersion's Failing condition.
    let partial = report.finish(RunFacts {
        version: plan.version.clone(),
        mode: plan.mode,
        dry_run,
        stopped,
        elapsed: started.elapsed(),
        not_run: not_run.clone(),
        not_run_nodes: outcome.not_run_nodes().len(),
        deletes_in_progress: deletes_in_progress.clone(),
        requests: 0,
        cluster_version: None,
    });
    let cluster_version = match &recorder {
        Some(r) => Some(
            r.finish(if !partial.errors.is_empty() {
                Final::Failed(partial.errors.clone())
            } else if stopped.is_some() || !outcome.all_succeeded() {
                Final::Stopped
            } else {
                Final::Completed
            })
            .await,
        ),
        None => None,
    };
    let requests = conn.requests.get() - requests_before;
    // A status the server rejects fails the run.
    let ok = partial.ok
        && cluster_version
            .as_deref()
            .is_none_or(|c| c == "recorded" || c == "not served");
    emitter.emit(EventKind::RunFinished { ok, requests });
    Ok(ApplyReport {
        ok,
        requests,
        cluster_version,
        seconds: started.elapsed().as_secs_f64(),
        preflight,
        ..partial
    })
}
