//! Recording the run in ClusterVersion `version`, the way the CVO reports it (cvo.md §8.3),
//! when the cluster serves `clusterversions.config.openshift.io` (from the start, or from the
//! moment this run establishes the CRD).
//!
//! - `status.history`: a new desired version closes the previous entry and adds a `Partial`
//!   one at the front; success marks it `Completed` with a `completionTime` (sticky).
//! - `Failing` and `Progressing` follow the run as the CVO's passes would show it, written
//!   the moment they change: a task that failed ("Could not update configmap "ns/a" (3 of
//!   10): CAUSE") and the CVO's error for each ClusterOperator being waited on (not
//!   available, degraded, updating versions), condensed per reason and summarised
//!   (`MultipleErrors`) as the CVO does ([`crate::cvo::error::summarize`]). An operator
//!   updating its versions is progress ("Working towards V: N of M done (P% complete),
//!   waiting on X"), a degraded one too for 40 minutes ("waiting up to 40 minutes on X"),
//!   one that is not available fails at once (Failing `True`, "Unable to apply V: the
//!   cluster operator X is not available"); the 30/40/90-minute limits are checked while
//!   waits last. On success Progressing is `False`, "Cluster version is V". `Available`:
//!   `True` "Done applying V" once a run completes.
//! - `capabilities` and ImplicitlyEnabledCapabilities from the run's capability status
//!   ([`RecorderOptions::capabilities`]).
//! - The object is created when missing (spec: a random `clusterID` and `desiredUpdate`).
//!
//! Differences from the CVO: progress counts every task of the plan, apply-time skips
//! included, so a complete run reaches 100% (the CVO's total includes skipped manifests and
//! never does); Failing is set when a task fails or an operator's state says so, not at the
//! end of a pass (the CVO's pass ends soon after, its waits failing fast); a Degraded operator
//! while initializing (a Report-effect error) is not shown; writes are throttled to one every
//! 2 s (the CVO: one per 15 s), except when a failure appears or goes away; re-applying the
//! version the history already shows as Completed writes nothing unless the outcome changed
//! (the CVO's reconciling mode). Status is written as the CVO writes it: the whole object PUT
//! to the `status` subresource; a rejected write fails the run.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kube::Client;
use kube::api::PostParams;
use kube::core::Request;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

pub mod bootstrap;
mod status;

use self::status::{
    condition, final_status, progressing, set_condition, start_history, task_failure,
};
use super::events::{ApplyEvent, ApplyObserver, EventKind, Outcome};
use super::report::TaskFailure;
use crate::cluster::discovery::Discovery;
use crate::cluster::request::{self, RequestError};
use crate::cluster::retry::{RetryPolicy, retry};
use crate::cluster::watch;
use crate::cvo::capabilities::CapabilityStatus;
use crate::cvo::error::UpdateError;

/// The CRD that makes a cluster serve ClusterVersions.
pub const CRD_NAME: &str = "clusterversions.config.openshift.io";
/// The ClusterVersion the CVO maintains.
pub const NAME: &str = "version";
const MIN_INTERVAL: Duration = Duration::from_secs(2);
/// While operators are waited on, the status is recomputed this often (the 30/40/90-minute
/// limits of the CVO's messages); a status that did not change is not written.
const WAIT_TICK: Duration = Duration::from_secs(30);

/// The errors of the run so far, as the CVO would report them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Errors {
    /// Failed tasks and operators being waited on, in task order.
    pub failures: Vec<UpdateError>,
    /// When each operator being waited on was first found not done.
    pub waits: BTreeMap<String, Instant>,
}

/// What the observer side tracks to build [`Errors`].
#[derive(Default)]
struct ErrorState {
    failed: BTreeMap<usize, UpdateError>,
    /// Task → (operator, the CVO's error for it).
    waiting: BTreeMap<usize, (String, Option<UpdateError>)>,
    started: BTreeMap<String, Instant>,
}

impl ErrorState {
    fn errors(&self) -> Errors {
        let mut all: BTreeMap<usize, UpdateError> = self.failed.clone();
        for (id, (_, e)) in &self.waiting {
            if let Some(e) = e {
                all.insert(*id, e.clone());
            }
        }
        Errors {
            failures: all.into_values().collect(),
            waits: self.started.clone(),
        }
    }
}

enum Msg {
    Progress(usize),
    Errors(Errors),
    Established,
    Finish {
        outcome: Final,
        reply: oneshot::Sender<String>,
    },
}

/// How the run ended, for the final status.
#[derive(Debug, Clone)]
pub enum Final {
    /// Every task succeeded.
    Completed,
    /// Tasks failed.
    Failed(Vec<TaskFailure>),
    /// Stopped early (Ctrl-C, timeout): progress stays as it was.
    Stopped,
}

/// Settings of the recorder.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Release version (nothing is recorded without one).
    pub version: String,
    /// Release image pull spec, for `history[].image` and `desired.image`.
    pub image: String,
    /// Tasks in the plan.
    pub total: usize,
    /// Field manager for the writes.
    pub field_manager: String,
    /// Longest time for one request.
    pub request_timeout: Duration,
    /// The payload's `versionHash` ([`crate::cvo::version_hash::version_hash`]).
    pub version_hash: String,
    /// Enabled, known and implicitly enabled capabilities of the run.
    pub capabilities: CapabilityStatus,
    /// What the operator's checks of the release found (verified, accepted risks,
    /// Upgradeable risks).
    pub checks: crate::cvo::status::ReleaseChecks,
}

/// The recorder: an [`ApplyObserver`] that hands progress to a background task.
pub struct ClusterVersionRecorder {
    tx: mpsc::UnboundedSender<Msg>,
    done: AtomicUsize,
    total: usize,
    errors: Mutex<ErrorState>,
    handle: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ClusterVersionRecorder {
    /// Starts the background task.
    #[must_use]
    pub fn start(
        client: Client,
        discovery: std::sync::Arc<Discovery>,
        options: RecorderOptions,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let total = options.total;
        let handle = tokio::spawn(run(client, discovery, options, rx));
        ClusterVersionRecorder {
            tx,
            done: AtomicUsize::new(0),
            total,
            errors: Mutex::new(ErrorState::default()),
            handle: Mutex::new(Some(handle)),
        }
    }

    /// Writes the final status and returns what happened (`recorded`, `not served`, an error).
    pub async fn finish(&self, outcome: Final) -> String {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Finish { outcome, reply }).is_err() {
            return "recorder stopped".into();
        }
        let result = rx.await.unwrap_or_else(|_| "recorder stopped".into());
        let handle = self.handle.lock().expect("recorder lock").take();
        if let Some(h) = handle {
            let _ = h.await;
        }
        result
    }
}

impl ClusterVersionRecorder {
    fn errors_changed(&self, f: impl FnOnce(&mut ErrorState) -> bool) {
        let mut state = self.errors.lock().expect("recorder lock");
        if f(&mut state) {
            let _ = self.tx.send(Msg::Errors(state.errors()));
        }
    }
}

impl ApplyObserver for ClusterVersionRecorder {
    fn on_event(&self, event: &ApplyEvent) {
        match &event.kind {
            EventKind::TaskFinished {
                task,
                outcome,
                error,
                ..
            } => {
                let total = self.total;
                self.errors_changed(|s| {
                    let wait = s.waiting.remove(&task.id);
                    if *outcome != Outcome::Failed {
                        return wait.is_some();
                    }
                    // A wait that gave up keeps the CVO's error for the operator's state.
                    let e = wait.and_then(|(_, e)| e).unwrap_or_else(|| {
                        task_failure(task, total, error.as_deref().unwrap_or_default())
                    });
                    s.failed.insert(task.id, e);
                    true
                });
                if outcome.is_success() {
                    let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
                    let _ = self.tx.send(Msg::Progress(n));
                }
            }
            EventKind::WaitStarted {
                task,
                operator,
                error,
                ..
            }
            | EventKind::WaitProgress {
                task,
                operator,
                error,
                ..
            } => {
                self.errors_changed(|s| {
                    s.started
                        .entry(operator.clone())
                        .or_insert_with(|| event.instant);
                    s.waiting
                        .insert(task.id, (operator.clone(), error.clone()))
                        .is_none_or(|(_, old)| old != *error)
                });
            }
            EventKind::WaitDone { task, operator, .. } => {
                self.errors_changed(|s| {
                    // The CVO forgets an operator's start time once it is healthy.
                    s.started.remove(operator);
                    s.waiting.remove(&task.id).is_some()
                });
            }
            EventKind::CrdEstablished { name, .. } if name == CRD_NAME => {
                let _ = self.tx.send(Msg::Established);
            }
            _ => {}
        }
    }
}

struct Recording {
    url: String,
    status: Value,
    generation: Option<i64>,
    /// Re-applying the version history already shows as Completed.
    reconciling: bool,
    last_write: Option<Instant>,
}

async fn run(
    client: Client,
    discovery: std::sync::Arc<Discovery>,
    o: RecorderOptions,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut rec: Option<Recording> = None;
    let mut error: Option<String> = None;
    let mut done = 0usize;
    let mut errors = Errors::default();
    // Progress not yet written (held back by the write interval).
    let mut dirty = false;
    if let Some(url) = served(&discovery).await {
        match retrying(|| begin(&client, &url, &o)).await {
            Ok(r) => rec = Some(r),
            Err(e) => error = Some(e.to_string()),
        }
    }
    loop {
        let flush_at = rec
            .as_ref()
            .filter(|r| !r.reconciling && dirty)
            .and_then(|r| r.last_write)
            .map(|t| t + MIN_INTERVAL);
        let tick_at = (!errors.waits.is_empty()).then(|| Instant::now() + WAIT_TICK);
        let wake_at = match (flush_at, tick_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let msg = tokio::select! {
            m = rx.recv() => m,
            () = async {
                match wake_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => Some(Msg::Progress(done)),
        };
        // The CVO writes at once when a failure appears or goes away.
        let mut urgent = false;
        let Some(msg) = msg else { return };
        match msg {
            Msg::Progress(n) => {
                done = n;
                dirty = true;
            }
            Msg::Errors(e) => {
                let failing =
                    |e: &Errors| crate::cvo::error::summarize(e.failures.clone()).is_some();
                urgent = failing(&e) != failing(&errors);
                errors = e;
                dirty = true;
            }
            Msg::Established => {
                if rec.is_none()
                    && let Some(url) = served(&discovery).await
                {
                    match retrying(|| begin(&client, &url, &o)).await {
                        Ok(r) => {
                            rec = Some(r);
                            error = None;
                            dirty = true;
                        }
                        Err(e) => error = Some(e.to_string()),
                    }
                }
            }
            Msg::Finish { outcome, reply } => {
                let result = match (rec.as_mut(), error) {
                    (Some(r), _) => {
                        let status = final_status(&r.status, &o, &outcome, done, &errors);
                        match write(&client, r, status, &o).await {
                            Ok(()) => "recorded".to_string(),
                            Err(e) => format!("cannot write status: {e}"),
                        }
                    }
                    (None, Some(e)) => format!("cannot record: {e}"),
                    (None, None) => "not served".to_string(),
                };
                let _ = reply.send(result);
                return;
            }
        }
        if let Some(r) = rec.as_mut()
            && dirty
            && !r.reconciling
            && (urgent
                || done >= o.total
                || r.last_write.is_none_or(|t| t.elapsed() >= MIN_INTERVAL))
        {
            dirty = false;
            let mut status = r.status.clone();
            progressing(&mut status, &o, done, &errors);
            if let Err(e) = write(&client, r, status, &o).await {
                tracing::warn!("recording progress in clusterversion {NAME}: {e}");
            }
        }
    }
}

/// Runs `op` again on a transient error (5xx, 429, timeouts, broken connections) with the
/// run's default backoff, as every other request of a run is retried; a permanent error (a
/// 422 from a CRD that refuses the status, a 403) is returned at once.
async fn retrying<T, Fut>(op: impl FnMut() -> Fut) -> Result<T, RequestError>
where
    Fut: std::future::Future<Output = Result<T, RequestError>>,
{
    let never = tokio_util::sync::CancellationToken::new();
    retry(
        &RetryPolicy::default(),
        &never,
        |_, _| false,
        |n, delay, e| tracing::debug!("clusterversion {NAME}: retry {n} in {delay:?}: {e}"),
        op,
    )
    .await
    .map(|(v, _)| v)
    .map_err(|x| x.error)
}

/// The ClusterVersion collection URL when the kind is served.
async fn served(discovery: &Discovery) -> Option<String> {
    match discovery
        .resolve("config.openshift.io", "v1", "ClusterVersion")
        .await
    {
        Ok(Some(r)) => Some(r.url_path(None)),
        _ => None,
    }
}

/// Reads (or creates) the object and writes the start of the run.
async fn begin(client: &Client, url: &str, o: &RecorderOptions) -> Result<Recording, RequestError> {
    let current = match watch::get(client, url, NAME, o.request_timeout).await? {
        Some(cv) => cv,
        None => {
            bootstrap::create(client, url, &o.version, &o.field_manager, o.request_timeout).await?
        }
    };
    let mut status = current.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let generation = current
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let reconciling = status
        .pointer("/history/0")
        .is_some_and(|h| h["version"] == o.version.as_str() && h["state"] == "Completed");
    let mut rec = Recording {
        url: url.to_string(),
        status,
        generation,
        reconciling,
        last_write: None,
    };
    if !reconciling {
        let mut s = rec.status.clone();
        start_history(&mut s, o);
        progressing(&mut s, o, 0, &Errors::default());
        set_condition(&mut s, "Failing", "False", "", "");
        if condition(&s, "Available").is_none() {
            set_condition(&mut s, "Available", "False", "", "");
        }
        write(client, &mut rec, s, o).await?;
    }
    Ok(rec)
}

async fn write(
    client: &Client,
    rec: &mut Recording,
    mut status: Value,
    o: &RecorderOptions,
) -> Result<(), RequestError> {
    if let (Some(g), Some(obj)) = (rec.generation, status.as_object_mut()) {
        obj.insert("observedGeneration".into(), json!(g));
    }
    if status == rec.status {
        return Ok(());
    }
    // The CVO's write: the whole object PUT to `/status` (a merge patch cannot carry the
    // `null`s the CRD requires). A conflict or a transient error reads again and retries.
    let params = PostParams {
        field_manager: Some(o.field_manager.clone()),
        ..PostParams::default()
    };
    let url = rec.url.clone();
    retrying(|| put_status(client, &url, &params, &status, o)).await?;
    rec.status = status;
    rec.last_write = Some(Instant::now());
    Ok(())
}

/// One read of the object and one PUT of `status` into it (a 409 from a concurrent writer is
/// transient, so [`retrying`] reads again).
async fn put_status(
    client: &Client,
    url: &str,
    params: &PostParams,
    status: &Value,
    o: &RecorderOptions,
) -> Result<(), RequestError> {
    let Some(mut object) = watch::get(client, url, NAME, o.request_timeout).await? else {
        return Err(RequestError::Build(format!(
            "clusterversion {NAME} disappeared during the run"
        )));
    };
    // The update graph's fields and conditions are the operator's, written beside the run:
    // kept as the object has them now.
    let mut status = status.clone();
    crate::update_graph::status::carry_over(&object["status"], &mut status);
    object["status"] = status;
    let body = serde_json::to_vec(&object).map_err(|e| RequestError::Build(e.to_string()))?;
    let build = |sub: bool| {
        let r = Request::new(url);
        if sub {
            r.replace_subresource("status", NAME, params, body.clone())
        } else {
            r.replace(NAME, params, body.clone())
        }
        .map_err(|e| RequestError::Build(e.to_string()))
    };
    let result = match request::send(client, build(true)?, o.request_timeout).await {
        // No status subresource: the status is part of the object.
        Err(e) if e.is(404) => request::send(client, build(false)?, o.request_timeout).await,
        r => r,
    };
    result.map(|_| ())
}
