//! [`ClusterHandle`]: what every action reads, and the requests every action sends.
//!
//! The handle holds the run's fixed facts (the client, the plan and which of its tasks defines
//! which CRD, discovery, the event emitter, the options, the baseline) and no per-action
//! state. Its helpers send one request with the run's retries and events
//! (`call`, `call_with`, `send_unless`,
//! `get_live`) and resolve a task's kind, waiting for a CRD this plan is still
//! establishing (`served_for`, the cross-task CRD wait).

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use kube::Client;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Baseline, RunnerOptions};
use crate::apply::engine::{Done, TaskContext, TaskError};
use crate::apply::events::{Emitter, EventKind, Outcome, TaskRef};
use crate::cluster::body;
use crate::cluster::discovery::{Discovery, Resolved, crd_group_kind};
use crate::cluster::request::{self, RequestError, Response};
use crate::cluster::retry;
use crate::cluster::watch;
use crate::merge::ClusterConfig;
use crate::merge::mutate::{self, ConfigRead};
use crate::plan::{Action, Plan, Task};

/// Whether a kind is served.
pub(crate) enum Served {
    /// Yes.
    Yes(Resolved),
    /// No; `crd_task` is the task of this plan whose CRD defines it, if any.
    No { crd_task: Option<usize> },
}

/// Where a write action sends a task's object, and what.
pub(crate) struct WriteTarget {
    /// The kind was served by a CRD established during this run (a 404 may be transient).
    pub(crate) fresh_kind: bool,
    /// The collection URL.
    pub(crate) collection: String,
    /// The object as sent: the manifest with its namespace.
    pub(crate) body: Value,
}

/// What a write action (apply, create-only) gives back: the task's result and, when the
/// object was written (or found unchanged) for real, the object as the server has it, which
/// the CRD wait starts from.
pub(crate) type WriteResult = Result<(Done, Option<Value>), TaskError>;

/// The actions' shared, read-only view of the run and the cluster.
pub struct ClusterHandle {
    pub(crate) client: Client,
    pub(crate) plan: Arc<Plan>,
    pub(crate) discovery: Arc<Discovery>,
    pub(crate) emitter: Emitter,
    pub(crate) options: RunnerOptions,
    pub(crate) baseline: Baseline,
    /// `(group, kind)` → the CRD task of this plan that defines it.
    crd_tasks: HashMap<(String, String), usize>,
}

impl ClusterHandle {
    /// A handle for `plan`.
    #[must_use]
    pub fn new(
        client: Client,
        plan: Arc<Plan>,
        discovery: Arc<Discovery>,
        emitter: Emitter,
        options: RunnerOptions,
        baseline: Baseline,
    ) -> Self {
        let crd_tasks = plan
            .tasks
            .iter()
            .filter(|t| t.manifest.is_crd() && t.action != Action::Skip)
            .filter_map(|t| crd_group_kind(&t.manifest.object).map(|gk| (gk, t.id)))
            .collect();
        ClusterHandle {
            client,
            plan,
            discovery,
            emitter,
            options,
            baseline,
            crd_tasks,
        }
    }

    /// The cluster config to prepare `manifest` with: the run's, with the proxy or the API
    /// server read again when the run follows its config and the manifest needs one of them
    /// ([`crate::merge::ClusterConfig::follow`]).
    pub(crate) async fn config_for(
        &self,
        ctx: &TaskContext,
        manifest: &Value,
    ) -> Result<Cow<'_, ClusterConfig>, TaskError> {
        let base = &self.options.cluster_config;
        let Some(which) = base.follow.then(|| mutate::reads(manifest)).flatten() else {
            return Ok(Cow::Borrowed(base));
        };
        // Read with the run's retries, as any request of the task.
        let (read, _) = self
            .call_with(ctx, false, || async {
                super::cvo::read_config_object(
                    &self.client,
                    &self.discovery,
                    which,
                    self.options.request_timeout,
                )
                .await
                .map_err(|e| e.source)
            })
            .await?;
        let mut config = base.clone();
        match which {
            ConfigRead::Proxy => config.proxy = read,
            ConfigRead::ApiServer => config.apiserver = read,
        }
        Ok(Cow::Owned(config))
    }

    /// The plan's task behind `t`.
    pub(crate) fn task(&self, t: &TaskRef) -> &Task {
        &self.plan.tasks[t.id]
    }

    /// The CRD task of this plan that defines `group`/`kind`.
    pub(crate) fn crd_task(&self, group: &str, kind: &str) -> Option<usize> {
        self.crd_tasks
            .get(&(group.to_string(), kind.to_string()))
            .copied()
    }

    /// Resolves the kind of a task's manifest.
    pub(crate) async fn served(&self, task: &Task) -> Result<Served, RequestError> {
        let m = &task.manifest;
        self.served_kind(&m.id.group, m.version(), &m.id.kind).await
    }

    /// Resolves a kind.
    pub(crate) async fn served_kind(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Served, RequestError> {
        Ok(match self.discovery.resolve(group, version, kind).await? {
            Some(r) => Served::Yes(r),
            None => Served::No {
                crd_task: self.crd_task(group, kind),
            },
        })
    }

    /// [`ClusterHandle::served_kind`] for `task`, but when the kind's CRD is in this plan and
    /// not ordered after `task` (initializing mode runs every run-level in parallel, and the
    /// components of one run-level are parallel in every mode), wait until that CRD is
    /// established, bounded by the CRD timeout, instead of failing at once. The CVO gets
    /// there by retrying the task (cvo.md §4.3); a CRD that the plan runs only after `task`
    /// cannot come in time, so that still fails at once.
    pub(crate) async fn served_for(
        &self,
        task: &Task,
        group: &str,
        version: &str,
        kind: &str,
        cancel: &CancellationToken,
    ) -> Result<Served, RequestError> {
        let deadline = tokio::time::Instant::now() + self.options.crd_timeout;
        loop {
            let mut changes = self.discovery.changes();
            let served = self.served_kind(group, version, kind).await?;
            let Served::No { crd_task: Some(c) } = served else {
                return Ok(served);
            };
            if self.options.dry_run || self.plan.runs_before(task.id, c) {
                return Ok(served);
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return Ok(served) },
                () = tokio::time::sleep_until(deadline) => return Ok(served),
                () = cancel.cancelled() => return Ok(served),
            }
        }
    }

    /// Where and what a write of `task` sends: its kind resolved (waiting for its CRD as
    /// [`ClusterHandle::served_for`] does), its collection and its request body. `Err(done)`
    /// ends the task early (a dry run's "not served yet" for a kind whose CRD this plan
    /// creates).
    pub(crate) async fn write_target(
        &self,
        ctx: &TaskContext,
        task: &Task,
    ) -> Result<Result<WriteTarget, Done>, TaskError> {
        let m = &task.manifest;
        let served = self
            .call_with(ctx, false, || {
                self.served_for(task, &m.id.group, m.version(), &m.id.kind, &ctx.cancel)
            })
            .await
            .map_err(|e| TaskError::failed(format!("discovery: {}", e.message), e.attempts))?
            .0;
        let resolved = match served {
            Served::Yes(r) => r,
            Served::No { crd_task: Some(_) } if self.options.dry_run => {
                return Ok(Err(not_served_yet()));
            }
            Served::No { crd_task } => return Err(self.not_served_error(task, crd_task)),
        };
        let ns = self.namespace_for(task, &resolved);
        Ok(Ok(WriteTarget {
            fresh_kind: resolved.from_run,
            collection: resolved.url_path(ns.as_deref()),
            body: body::request_body(&m.object, ns.as_deref()),
        }))
    }

    /// The namespace to use for a task's object.
    pub(crate) fn namespace_for(&self, task: &Task, resolved: &Resolved) -> Option<String> {
        resolved.namespace_of(
            task.manifest.id.namespace.as_deref(),
            self.client.default_namespace(),
        )
    }

    /// The error for a kind the server does not serve.
    pub(crate) fn not_served_error(&self, task: &Task, crd_task: Option<usize>) -> TaskError {
        let m = &task.manifest;
        let what = format!("{} {}", m.api_version, m.id.kind);
        let msg = match crd_task {
            Some(c) => format!(
                "the server does not serve {what}; its CRD is in this payload ({}) but has \
                 not been established before this task",
                self.plan.tasks[c].manifest.label()
            ),
            None => format!(
                "the server does not serve {what} (no match for the kind)\nhint: is its \
                 CustomResourceDefinition installed, and its API service available?"
            ),
        };
        TaskError::failed(msg, 1)
    }

    /// Sends a request built by `build` with retries, emitting retry and warning events.
    /// `fresh_kind` makes a 404 transient for a few tries (a kind whose CRD this run just
    /// established may take a moment to be served).
    pub(crate) async fn call(
        &self,
        ctx: &TaskContext,
        fresh_kind: bool,
        build: impl Fn() -> Result<http::Request<Vec<u8>>, RequestError>,
    ) -> Result<(Response, u32), TaskError> {
        self.call_with(ctx, fresh_kind, || {
            let req = build();
            async move { request::send(&self.client, req?, self.options.request_timeout).await }
        })
        .await
    }

    /// [`ClusterHandle::call`], but an error `expected` accepts is an answer, `None`, not a
    /// failure (create-only's 409 AlreadyExists, a delete's 404).
    pub(crate) async fn send_unless(
        &self,
        ctx: &TaskContext,
        fresh_kind: bool,
        expected: impl Fn(&RequestError) -> bool,
        build: impl Fn() -> Result<http::Request<Vec<u8>>, RequestError>,
    ) -> Result<(Option<Response>, u32), TaskError> {
        self.call_with(ctx, fresh_kind, || {
            let req = build();
            let expected = &expected;
            async move {
                match request::send(&self.client, req?, self.options.request_timeout).await {
                    Ok(r) => Ok(Some(r)),
                    Err(e) if expected(&e) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    /// GETs `collection/name` with retries (`None`: it does not exist).
    pub(crate) async fn get_live(
        &self,
        ctx: &TaskContext,
        fresh_kind: bool,
        collection: &str,
        name: &str,
    ) -> Result<(Option<Value>, u32), TaskError> {
        self.call_with(ctx, fresh_kind, || {
            watch::get(&self.client, collection, name, self.options.request_timeout)
        })
        .await
    }

    /// [`ClusterHandle::call`] with any operation.
    pub(crate) async fn call_with<T, F, Fut>(
        &self,
        ctx: &TaskContext,
        fresh_kind: bool,
        op: F,
    ) -> Result<(T, u32), TaskError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RequestError>>,
    {
        let result = retry::retry(
            &self.options.retry,
            &ctx.cancel,
            |e, attempt| fresh_kind && e.is(404) && attempt < 5,
            |n, delay, e| {
                self.emitter.emit(EventKind::Retrying {
                    task: ctx.task.clone(),
                    retry: n,
                    delay,
                    error: e.to_string(),
                });
            },
            op,
        )
        .await;
        result.map_err(|x| {
            if x.cancelled {
                TaskError::interrupted(format!("stopped while retrying: {}", x.error))
            } else if x.attempts > 1 {
                TaskError::from_request(
                    format!("{} (gave up after {} attempts)", x.error, x.attempts),
                    x.attempts,
                    x.error,
                )
            } else {
                TaskError::from_request(x.error.to_string(), x.attempts, x.error)
            }
        })
    }

    /// Emits the response's warnings.
    pub(crate) fn warnings(&self, ctx: &TaskContext, response: &Response) {
        for w in &response.warnings {
            self.emitter.emit(EventKind::Warning {
                task: Some(ctx.task.clone()),
                message: w.clone(),
            });
        }
    }
}

/// A dry run's "not served yet": the kind's CRD is created by this plan.
pub(crate) fn not_served_yet() -> Done {
    Done::new(Outcome::NotServed).detail("type not served yet (CRD created by this plan)")
}

/// A dry-run write's outcome: `live` (before) against the server's dry-run answer.
pub(crate) fn dry_run_outcome(live: Option<&Value>, answer: &Value) -> Done {
    match live {
        None => Done::new(Outcome::Created).detail("would create"),
        Some(live) => {
            let paths = body::changed_paths(live, answer, 8);
            if paths.is_empty() {
                Done::new(Outcome::Unchanged)
            } else {
                Done::new(Outcome::Configured).detail(format!("would change {}", paths.join(", ")))
            }
        }
    }
}
