//! The sync loop (cvo.md §8.2): from what ClusterVersion asks for, the work (a release, its
//! overrides and capabilities); a pass of the graph in the work's mode; after a success a
//! reconciling pass every interval, after a failure a retry after the backoff. A new desired
//! state whose payload is at hand cancels the pass in flight and starts at once; one without a
//! payload is refused (`ReleaseAccepted=False`) and the current work goes on.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::accept::{self, Refusal};
use super::desired::{self, Desired};
use super::payloads::{PayloadIndex, Source};
use super::record::{self, Event};
use super::{Hooks, OperatorOptions, PassEnd, PassRecord};
use crate::apply::{self, ApplyEvent, ApplyObserver, Connection, EventKind};
use crate::cvo::status::ReleaseChecks;
use crate::cvo::{capabilities, features};
use crate::payload::Payload;
use crate::plan::{self, Mode};

/// One piece of work: a desired state with its payload, and how far it got.
struct Work {
    desired: Desired,
    /// The release's version (from its payload: a desired image names none).
    version: String,
    payload: Arc<Payload>,
    /// The payload the cluster ran before (implicitly enabled capabilities).
    previous: Option<Arc<Payload>>,
    /// The mode of passes until one succeeds.
    mode: Mode,
    /// A pass succeeded: the work is reconciled from now on.
    completed: bool,
    /// Failed passes since the last success (the reconciling order's seed).
    attempt: usize,
    /// When the next pass may start (`None`: now).
    next_at: Option<Instant>,
    /// What the checks of the release found (verified, accepted risks).
    checks: ReleaseChecks,
}

pub(super) struct SyncLoop {
    pub conn: Connection,
    pub index: Arc<Mutex<PayloadIndex>>,
    pub options: OperatorOptions,
    pub hooks: Hooks,
    pub cluster_version: watch::Receiver<Option<Value>>,
    pub identity: String,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl SyncLoop {
    pub async fn run(&mut self, cancel: &CancellationToken) {
        let mut work: Option<Work> = None;
        // Never reset by a success, as in the CVO.
        let mut failures = 0u32;
        // A refused desired state, and when it is tried again (the CVO retries on every
        // ClusterVersion sync; here every interval).
        let mut refused: Option<(Desired, Instant, Refusal)> = None;
        loop {
            if cancel.is_cancelled() {
                return;
            }
            self.hooks.health.mark_alive();
            let cv = self.cluster_version.borrow_and_update().clone();
            let wanted = match desired::from_cluster_version(cv.as_ref(), &self.options.release) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("clusterversion: {e}");
                    self.wait(None, cancel).await;
                    continue;
                }
            };
            let differs = work.as_ref().is_none_or(|w| !w.desired.same_work(&wanted));
            if let Some(w) = work.as_ref().filter(|_| !differs)
                && refused.take().is_some()
            {
                // Asked for the release at hand again after a refusal.
                self.accepted(w).await;
            }
            let retry = refused
                .as_ref()
                .is_none_or(|(d, at, _)| *d != wanted || Instant::now() >= *at);
            if differs && retry {
                match self.prepare(&wanted, cv.as_ref(), work.as_ref()).await {
                    Ok(next) => {
                        if refused.take().is_some() {
                            self.accepted(&next).await;
                        }
                        if let Some(w) = &work {
                            tracing::info!(
                                "new work: {} (was {})",
                                wanted.shown(),
                                w.desired.shown()
                            );
                        } else {
                            tracing::info!("work: {} in {} mode", wanted.shown(), next.mode);
                        }
                        self.hooks.metrics.set_cluster_version(
                            "desired",
                            &next.version,
                            &wanted.image,
                            "",
                            unix_now(),
                        );
                        work = Some(next);
                    }
                    Err(r) => {
                        tracing::warn!("refused {}: {}", wanted.shown(), r.message);
                        self.refuse(&r).await;
                        let retry_at = Instant::now() + self.options.schedule.interval;
                        refused = Some((wanted, retry_at, r));
                    }
                }
            }
            let retry_at = refused.as_ref().map(|(_, at, _)| *at);
            let Some(w) = work.as_mut() else {
                self.wait(retry_at, cancel).await;
                continue;
            };
            if let Some(t) = w.next_at
                && Instant::now() < t
            {
                self.wait(Some(retry_at.map_or(t, |r| r.min(t))), cancel)
                    .await;
                continue;
            }
            // While a desired release stands refused, the passes of the current one say so
            // (an invalid spec is the `Invalid` condition's, not ReleaseAccepted's).
            let standing = refused
                .as_ref()
                .filter(|(_, _, r)| r.reason != INVALID)
                .map(|(_, _, r)| (r.reason.to_string(), r.message.clone()));
            match self.pass(w, standing, cancel).await {
                PassEnd::Completed => {
                    w.completed = true;
                    w.attempt = 0;
                    w.next_at = Some(Instant::now() + self.options.schedule.interval);
                }
                PassEnd::Failed => {
                    failures += 1;
                    w.attempt += 1;
                    let delay = self.options.schedule.backoff_jittered(failures);
                    tracing::info!("pass failed ({failures} so far); next in {delay:.1?}");
                    w.next_at = Some(Instant::now() + delay);
                }
                PassEnd::Superseded => {}
                PassEnd::Stopped => return,
            }
        }
    }

    /// Sleeps until `until` (`None`: no timer), a ClusterVersion change or `cancel`.
    async fn wait(&mut self, until: Option<Instant>, cancel: &CancellationToken) {
        let rx = &mut self.cluster_version;
        tokio::select! {
            () = cancel.cancelled() => {}
            () = async {
                match until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {}
            r = rx.changed() => {
                if r.is_err() {
                    // The follower is gone: fall back to the timer.
                    match until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => cancel.cancelled().await,
                    }
                }
            }
        }
    }

    /// Finds and loads the payload of `wanted`.
    async fn prepare(
        &self,
        wanted: &Desired,
        cv: Option<&Value>,
        current: Option<&Work>,
    ) -> Result<Work, Refusal> {
        // The checks run for a new release only (cvo.md §9), not for the operator's own one
        // nor the one accepted before.
        let same = current.filter(|w| w.desired.same_release(wanted));
        let own = accept::Own {
            version: &self.options.release,
            image: &self.options.release_image,
        };
        let checked = same.is_none() && !accept::is_exempt(cv, wanted, own);
        let mut checks = same.map(|w| w.checks.clone()).unwrap_or_default();
        let (mut risks, mut warnings) = (Vec::new(), Vec::new());
        if checked && !wanted.image.is_empty() {
            // Verified before it is pulled, with the running release's verifier.
            let running = match current {
                Some(w) => w.payload.manifests.clone(),
                None => {
                    let own_release = Desired {
                        version: self.options.release.clone(),
                        ..Desired::default()
                    };
                    find_and_load(&self.index, &self.options, &own_release, None)
                        .await
                        .map(|p| p.manifests.clone())
                        .unwrap_or_default()
                }
            };
            checks.verified = accept::verify_image(
                &self.conn.client,
                &running,
                wanted,
                self.options.verify_timeout,
                &mut risks,
                &mut warnings,
            )
            .await?;
        }
        let asked_by_version = wanted.image.is_empty()
            && cv
                .and_then(|cv| cv.pointer("/spec/desiredUpdate/version"))
                .and_then(Value::as_str)
                == Some(wanted.version.as_str());
        let mut payload = find_and_load(&self.index, &self.options, wanted, None)
            .await
            .map_err(|r| match r.reason {
                // Neither an available update nor a payload at hand: the CVO's refusal.
                "RetrievePayload" if asked_by_version => {
                    tracing::info!("{}", r.message);
                    Refusal {
                        reason: INVALID,
                        message: crate::update_graph::status::not_available_message(
                            &wanted.version,
                        ),
                        event: None,
                    }
                }
                _ => r,
            })?;
        let explicit = self.options.explicit_features;
        if !explicit.all() {
            let timeout = self.options.apply.runner.request_timeout;
            let retry = &self.options.apply.runner.retry;
            let fg =
                crate::apply::actions::cvo::read_feature_gate(&self.conn.client, timeout, retry)
                    .await
                    .map_err(|e| Refusal {
                        reason: "RetrievePayload",
                        message: e.to_string(),
                        event: None,
                    })?;
            let version = payload.version().unwrap_or_default();
            let filters = &self.options.load.filters;
            let features = features::for_run(filters, explicit, fg.as_ref(), &version);
            tracing::info!("features: {features}");
            if features.feature_set != filters.feature_set
                || features.gates != filters.feature_gates
            {
                payload =
                    find_and_load(&self.index, &self.options, wanted, Some(&features)).await?;
            }
        }
        let version = payload.version().unwrap_or_default();
        if checked {
            // `Upgradeable` as the running release has it (before any work: the release
            // taken up).
            let (running, manifests) = match current {
                Some(w) => (w.version.as_str(), &w.payload.manifests),
                None => (
                    cv.and_then(|cv| cv.pointer("/status/desired/version"))
                        .and_then(Value::as_str)
                        .filter(|v| !v.is_empty())
                        .unwrap_or(&self.options.release),
                    &payload.manifests,
                ),
            };
            let ships = super::admin_acks::ships_gates(manifests);
            let sources = accept::sources(&self.conn.client, running, ships).await;
            accept::check_preconditions(cv, &sources, wanted, &version, &mut risks, &mut warnings)?;
            checks.accepted_risks = Some(risks.join("\n"));
        }
        for (reason, message) in warnings {
            self.event(true, reason, message).await;
        }
        // The same release with other overrides or capabilities: an update pass, unless the
        // cluster is still being installed (cvo.md §8.2 `calculateNext`).
        let mode = match current {
            Some(w) if w.desired.same_release(wanted) => match w.mode {
                Mode::Initializing if !w.completed => Mode::Initializing,
                _ => Mode::Updating,
            },
            _ => crate::cvo::mode::from_cluster_version(cv, &version, &wanted.image).mode,
        };
        let previous_version = cv
            .and_then(|cv| cv.pointer("/status/history"))
            .and_then(Value::as_array)
            .and_then(|h| h.iter().find(|e| e["state"] == "Completed"))
            .and_then(|e| e["version"].as_str())
            .filter(|v| *v != version);
        let previous = match previous_version {
            Some(v) => {
                let d = Desired {
                    version: v.to_string(),
                    ..Desired::default()
                };
                find_and_load(&self.index, &self.options, &d, None)
                    .await
                    .ok()
            }
            None => None,
        };
        Ok(Work {
            desired: wanted.clone(),
            version,
            payload,
            previous,
            mode,
            completed: false,
            attempt: 0,
            next_at: None,
            checks,
        })
    }

    async fn refuse(&self, r: &Refusal) {
        if r.reason == INVALID {
            if let Err(e) = set_invalid(&self.conn.client, Some(&r.message)).await {
                tracing::warn!("recording Invalid=True: {e}");
            }
        } else if let Err(e) =
            record::release_accepted(&self.conn.client, false, r.reason, &r.message).await
        {
            tracing::warn!("recording ReleaseAccepted=False: {e}");
        }
        let message = r.event.clone().unwrap_or_else(|| r.message.clone());
        self.event(true, "ReleaseRejected", message).await;
    }

    async fn accepted(&self, w: &Work) {
        if let Err(e) = set_invalid(&self.conn.client, None).await {
            tracing::warn!("removing Invalid: {e}");
        }
        let message = format!(
            "Payload loaded version=\"{}\" image=\"{}\" architecture=\"{}\"",
            w.version,
            w.desired.image,
            crate::cvo::status::go_arch()
        );
        if let Err(e) =
            record::release_accepted(&self.conn.client, true, "PayloadLoaded", &message).await
        {
            tracing::warn!("recording ReleaseAccepted=True: {e}");
        }
    }

    async fn event(&self, warning: bool, reason: &str, message: String) {
        let e = Event {
            warning,
            reason,
            message,
        };
        if let Err(err) = record::event(
            &self.conn.client,
            &self.options.namespace,
            &self.identity,
            e,
        )
        .await
        {
            tracing::warn!("recording event {reason}: {err}");
        }
    }

    /// One pass of the graph for `w`.
    async fn pass(
        &mut self,
        w: &Work,
        refusal: Option<(String, String)>,
        cancel: &CancellationToken,
    ) -> PassEnd {
        let mode = if w.completed {
            Mode::Reconciling
        } else {
            w.mode
        };
        let cv = self.cluster_version.borrow().clone();
        let prior: Option<BTreeSet<String>> = cv
            .as_ref()
            .and_then(|cv| cv.pointer("/status/capabilities/enabledCapabilities"))
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            });
        let (filters, status, _why) = capabilities::for_run(
            &w.desired.filters(&self.options.load.filters),
            prior.as_ref(),
            &w.payload.manifests,
            w.previous.as_ref().map(|p| p.manifests.as_slice()),
        );
        let plan = Arc::new(plan::build(&w.payload, &filters, mode, w.attempt));
        let mut options = self.options.apply.clone();
        options.runner.mode = mode;
        options.capabilities = Some(status);
        options.timeout = Some(self.options.schedule.pass_timeout(mode));
        options.checks = ReleaseChecks {
            risks: accept::risks(
                cv.as_ref(),
                &accept::sources(
                    &self.conn.client,
                    &w.version,
                    super::admin_acks::ships_gates(&w.payload.manifests),
                )
                .await,
            ),
            refusal,
            ..w.checks.clone()
        };
        if !w.desired.image.is_empty() {
            options.release_image.clone_from(&w.desired.image);
        }
        let version = w.version.clone();
        let update = mode != Mode::Reconciling && w.attempt == 0;
        if update {
            self.event(
                false,
                "UpdateStarted",
                format!("{mode} to {version} started"),
            )
            .await;
        }

        // A new desired state with a payload at hand cancels this pass.
        let pass_cancel = cancel.child_token();
        let superseded = Arc::new(AtomicBool::new(false));
        let supersede = {
            let mut rx = self.cluster_version.clone();
            let (index, opts, me) = (self.index.clone(), self.options.clone(), w.desired.clone());
            let (token, flag) = (pass_cancel.clone(), superseded.clone());
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    let cv = rx.borrow_and_update().clone();
                    let Ok(d) = desired::from_cluster_version(cv.as_ref(), &opts.release) else {
                        continue;
                    };
                    // An image is pulled by the new work itself (a failure is refused there).
                    if !d.same_work(&me)
                        && (!d.image.is_empty()
                            || index.lock().expect("index lock").find(&d.version).is_some())
                    {
                        flag.store(true, Ordering::SeqCst);
                        token.cancel();
                        return;
                    }
                }
            })
        };
        let total = plan.tasks.len();
        self.hooks.metrics.set_payload(&version, 0, total);
        let observer: Arc<dyn ApplyObserver> = Arc::new(PassObserver {
            hooks: self.hooks.clone(),
            version: version.clone(),
            total,
            done: AtomicUsize::new(0),
        });
        if mode != Mode::Reconciling {
            self.hooks.metrics.set_cluster_version(
                "updating",
                &version,
                &w.desired.image,
                "",
                unix_now(),
            );
        }
        let started = Instant::now();
        let result = apply::run(&self.conn, plan, &options, observer, pass_cancel).await;
        supersede.abort();
        let seconds = started.elapsed().as_secs_f64();
        self.hooks.metrics.clear_cluster_version("updating");
        self.hooks.metrics.set_requests(self.conn.requests.get());
        let end = match &result {
            _ if superseded.load(Ordering::SeqCst) => PassEnd::Superseded,
            _ if cancel.is_cancelled() => PassEnd::Stopped,
            Ok(r) if r.ok => PassEnd::Completed,
            _ => PassEnd::Failed,
        };
        let requests = result.as_ref().map_or(0, |r| r.requests);
        tracing::info!(
            "{mode} pass of {version} {} in {seconds:.2}s ({requests} requests)",
            match end {
                PassEnd::Completed => "completed",
                PassEnd::Failed => "failed",
                PassEnd::Superseded => "superseded",
                PassEnd::Stopped => "stopped",
            }
        );
        if matches!(end, PassEnd::Completed | PassEnd::Failed) {
            self.hooks
                .metrics
                .observe_pass(&mode.to_string(), seconds, end == PassEnd::Completed);
        }
        match (&result, end) {
            (Ok(_), PassEnd::Completed) => {
                let now = unix_now();
                self.hooks.metrics.clear_cluster_version("failure");
                self.hooks.metrics.set_cluster_version(
                    "completed",
                    &version,
                    &w.desired.image,
                    "",
                    now,
                );
                self.hooks.metrics.set_cluster_version(
                    "current",
                    &version,
                    &w.desired.image,
                    "",
                    now,
                );
                if update {
                    self.event(
                        false,
                        "UpdateCompleted",
                        format!("{mode} to {version} completed in {seconds:.1}s"),
                    )
                    .await;
                }
            }
            (r, PassEnd::Failed) => {
                let why = match r {
                    Ok(report) => report
                        .errors
                        .first()
                        .map_or_else(|| "stopped (pass timeout)".to_string(), ToString::to_string),
                    Err(e) => e.to_string(),
                };
                tracing::warn!("{mode} pass of {version} failed: {why}");
                self.hooks.metrics.payload_error(&version);
                self.hooks.metrics.set_cluster_version(
                    "failure",
                    &version,
                    &w.desired.image,
                    "",
                    unix_now(),
                );
                self.event(
                    true,
                    "UpdateFailed",
                    format!("{mode} pass of {version} failed: {why}"),
                )
                .await;
            }
            _ => {}
        }
        self.operators().await;
        if let Some(tx) = &self.hooks.passes {
            let _ = tx.send(PassRecord {
                version,
                mode,
                end,
                seconds,
                report: result.ok(),
            });
        }
        end
    }

    /// Refreshes the ClusterOperator metrics.
    async fn operators(&self) {
        let url = "/apis/config.openshift.io/v1/clusteroperators";
        let req = match kube::core::Request::new(url).list(&kube::api::ListParams::default()) {
            Ok(r) => r,
            Err(_) => return,
        };
        if let Ok(r) =
            crate::cluster::request::send(&self.conn.client, req, Duration::from_secs(10)).await
            && let Some(items) = r.body.get("items").and_then(Value::as_array)
        {
            self.hooks.metrics.set_operators(items);
        }
    }
}

/// The reason of a refusal recorded as the CVO's `Invalid` condition, not `ReleaseAccepted`.
const INVALID: &str = "InvalidClusterVersion";

/// Sets `Invalid=True` with `message`, or removes `Invalid` (`None`), as the CVO does for a
/// `spec` that does not validate.
async fn set_invalid(
    client: &kube::Client,
    message: Option<&str>,
) -> Result<bool, crate::cluster::request::RequestError> {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    super::updates::write::update_status(client, |status| {
        let mut s = status.clone();
        if let Some(Value::Array(list)) = s.get_mut("conditions") {
            match message {
                Some(m) => crate::cvo::status::set(list, &now, "Invalid", "True", INVALID, m),
                None => list.retain(|c| c["type"] != "Invalid"),
            }
        }
        s
    })
    .await
}

/// The payload of `wanted`, loaded, or why not: its image when it names one (pulled once,
/// as the CVO pulls `desiredUpdate.image`), else its version from the index.
/// `features`, when given, replace the feature set and gates of `options.load`.
async fn find_and_load(
    index: &Mutex<PayloadIndex>,
    options: &OperatorOptions,
    wanted: &Desired,
    features: Option<&features::Features>,
) -> Result<Arc<Payload>, Refusal> {
    let retrieve = |failure: String| Refusal {
        reason: "RetrievePayload",
        message: format!(
            "Retrieving payload failed version=\"{}\" image=\"{}\" failure={failure}",
            wanted.version, wanted.image
        ),
        event: None,
    };
    let source = if wanted.image.is_empty() {
        by_version(index, &wanted.version).map_err(retrieve)?
    } else {
        let (known, fetch) = {
            let index = index.lock().expect("index lock");
            (index.pulled(&wanted.image), index.image_options().cloned())
        };
        match (known, fetch) {
            (Some(s), _) => s,
            (None, Some(fetch)) => {
                tracing::info!("pulling release image {}", wanted.image);
                let fetched = super::payloads::pull(&wanted.image, &fetch)
                    .await
                    .map_err(retrieve)?;
                tracing::info!("pulled {} ({})", wanted.image, fetched.info.pinned);
                index
                    .lock()
                    .expect("index lock")
                    .add_pulled(&wanted.image, fetched)
            }
            (None, None) => {
                return Err(retrieve(
                    "this operator does not pull release images".to_string(),
                ));
            }
        }
    };
    let mut load = options.load.clone();
    load.filters = wanted.filters(&options.load.filters);
    if let Some(f) = features {
        load.filters = f.apply_to(&load.filters);
    }
    if !wanted.image.is_empty() {
        // `{{.ReleaseImage}}` is the image asked for, as the CVO renders it.
        load.release_image.clone_from(&wanted.image);
    }
    let payload = source.load(&load).map_err(|e| Refusal {
        reason: "LoadPayload",
        message: format!(
            "Loading payload failed version=\"{}\" image=\"{}\" failure={e}",
            wanted.version, wanted.image
        ),
        event: None,
    })?;
    let got = payload.version().unwrap_or_default();
    if got.is_empty() || (!wanted.version.is_empty() && got != wanted.version) {
        return Err(Refusal {
            reason: "VerifyPayloadVersion",
            message: format!(
                "Verifying payload failed version=\"{}\" image=\"{}\" failure=release-metadata says {}",
                wanted.version,
                wanted.image,
                if got.is_empty() {
                    "no version"
                } else {
                    got.as_str()
                }
            ),
            event: None,
        });
    }
    Ok(payload)
}

/// The payload directory of `version` from the index, or why not.
fn by_version(index: &Mutex<PayloadIndex>, version: &str) -> Result<Source, String> {
    let mut index = index.lock().expect("index lock");
    if let Some(s) = index.find(version) {
        return Ok(s);
    }
    let known = index.versions();
    let roots: Vec<String> = index
        .roots()
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    Err(format!(
        "no payload for version {version} in {} (available: {})",
        if roots.is_empty() {
            "the payloads given".to_string()
        } else {
            roots.join(", ")
        },
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        },
    ))
}

/// Counts the pass's progress into the metrics and forwards events to the embedder.
struct PassObserver {
    hooks: Hooks,
    version: String,
    total: usize,
    done: AtomicUsize,
}

impl ApplyObserver for PassObserver {
    fn on_event(&self, event: &ApplyEvent) {
        // Progress is life: a long pass keeps /healthz green.
        self.hooks.health.mark_alive();
        if let EventKind::TaskFinished { outcome, .. } = &event.kind
            && outcome.is_success()
        {
            let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
            self.hooks
                .metrics
                .set_payload(&self.version, done, self.total.saturating_sub(done));
        }
        if let Some(o) = &self.hooks.observer {
            o.on_event(event);
        }
    }
}
