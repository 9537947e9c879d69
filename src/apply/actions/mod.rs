//! The actions: what one task does to the cluster. [`ClusterRunner`] is the engine's
//! [`TaskRunner`]: it resolves each manifest's kind, sends requests with retries, and
//! dispatches on the task's action to its module:
//!
//! - [`apply`]: server-side apply, create-only, and the wait for a CRD to be `Established`;
//! - [`cvo`]: the apply action in the default `cvo` strategy (GET, the CVO's merge, UPDATE);
//! - [`delete`]: deletes and the tracking of deletions held by finalizers (its state, the
//!   deletions in progress, is its own `DeleteTracker`);
//! - [`operator_wait`]: the ClusterOperator wait and the precreation pass (its state, the
//!   operators read by precreation, is its own `OperatorSnapshots`).
//!
//! The runner itself holds only what every action reads: the client, the plan, discovery,
//! the event emitter, the options, the baseline and which task defines which CRD.
//!
//! Two cross-task waits live here: a kind whose CRD this plan still has to establish
//! ([`ClusterRunner::served_for`]) and a namespace a Namespace task of this plan still has to
//! create (the retry in `run_task`).

pub mod apply;
pub mod cvo;
pub mod delete;
pub mod operator_wait;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::delete::DeleteTracker;
use self::operator_wait::OperatorSnapshots;
use crate::apply::engine::{Done, TaskContext, TaskError, TaskResult, TaskRunner};
use crate::apply::events::{Emitter, EventKind, Outcome, TaskRef};
use crate::cluster::discovery::{Discovery, Resolved, crd_group_kind};
use crate::cluster::request::{self, RequestError, Response};
use crate::cluster::retry::{self, RetryPolicy};
use crate::plan::{Action, Mode, Plan, Task};

/// Settings of the cluster runner.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Graph mode (deletes only in updating; initializing waits only for Available).
    pub mode: Mode,
    /// Server-side apply field manager.
    pub field_manager: String,
    /// Send every write as a server dry run.
    pub dry_run: bool,
    /// Longest wait for one ClusterOperator.
    pub wait_timeout: Duration,
    /// Longest wait for a CRD to become Established.
    pub crd_timeout: Duration,
    /// Longest time for one HTTP request.
    pub request_timeout: Duration,
    /// Retries of transient errors.
    pub retry: RetryPolicy,
    /// How objects are written: the CVO's GET, merge and UPDATE (the default), or one
    /// server-side apply.
    pub strategy: ApplyStrategy,
    /// What the `cvo` strategy's pre-merge steps read (owner reference, proxy, TLS profile).
    pub cluster_config: crate::merge::ClusterConfig,
}

/// How the apply action writes an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApplyStrategy {
    /// GET, the CVO's per-kind merge, UPDATE only when the merge changed something
    /// ([`cvo`]); the default.
    #[default]
    Cvo,
    /// One forced server-side apply PATCH with the run's field manager, for payloads meant for
    /// plain Kubernetes.
    ServerSide,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions {
            mode: Mode::Updating,
            field_manager: "minicvo".into(),
            dry_run: false,
            wait_timeout: Duration::from_secs(30 * 60),
            crd_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            strategy: ApplyStrategy::default(),
            cluster_config: crate::merge::ClusterConfig::default(),
        }
    }
}

/// What the cluster looked like when the run began: the latest resourceVersion and the
/// server's clock. An object whose apply response has a newer resourceVersion *and* whose
/// `Apply` managed-fields entry is stamped at or after the start was changed by this run;
/// anything else was unchanged. This classifies every apply from its one PATCH response.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    /// The cluster's resourceVersion (etcd revision) at the start, when it could be read.
    pub resource_version: Option<u64>,
    /// The server's `Date` at the start.
    pub server_time: Option<Timestamp>,
}

/// Whether a kind is served.
pub(crate) enum Served {
    /// Yes.
    Yes(Resolved),
    /// No; `crd_task` is the task of this plan whose CRD defines it, if any.
    No { crd_task: Option<usize> },
}

/// The cluster task runner.
pub struct ClusterRunner {
    pub(crate) client: Client,
    pub(crate) plan: Arc<Plan>,
    pub(crate) discovery: Arc<Discovery>,
    pub(crate) emitter: Emitter,
    pub(crate) options: RunnerOptions,
    pub(crate) baseline: Baseline,
    /// `(group, kind)` → the CRD task of this plan that defines it.
    pub(crate) crd_tasks: HashMap<(String, String), usize>,
    /// The wait action's state: ClusterOperators read by the precreation pass.
    snapshots: OperatorSnapshots,
    /// The delete action's state: deletions requested but not yet seen to finish.
    deletes: DeleteTracker,
    /// Tasks that have finished (see [`ClusterRunner::namespace_coming`]).
    finished: tokio::sync::watch::Sender<std::collections::HashSet<usize>>,
}

impl ClusterRunner {
    /// A runner for `plan`.
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
        ClusterRunner {
            client,
            discovery,
            emitter,
            options,
            baseline,
            crd_tasks,
            snapshots: OperatorSnapshots::default(),
            deletes: DeleteTracker::default(),
            finished: tokio::sync::watch::Sender::new(std::collections::HashSet::new()),
            plan,
        }
    }

    pub(crate) fn task(&self, t: &TaskRef) -> &Task {
        &self.plan.tasks[t.id]
    }

    /// Resolves the kind of a task's manifest.
    pub(crate) async fn served(&self, task: &Task) -> Result<Served, RequestError> {
        let m = &task.manifest;
        self.served_kind(&m.id.group, m.version(), &m.id.kind).await
    }

    pub(crate) async fn served_kind(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Served, RequestError> {
        Ok(match self.discovery.resolve(group, version, kind).await? {
            Some(r) => Served::Yes(r),
            None => Served::No {
                crd_task: self
                    .crd_tasks
                    .get(&(group.to_string(), kind.to_string()))
                    .copied(),
            },
        })
    }

    /// [`ClusterRunner::served_kind`] for `task`, but when the kind's CRD is in this plan and
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

    /// The namespace to use for a task's object.
    pub(crate) fn namespace_for(&self, task: &Task, resolved: &Resolved) -> Option<String> {
        resolved.namespaced.then(|| {
            task.manifest
                .id
                .namespace
                .clone()
                .unwrap_or_else(|| self.client.default_namespace().to_string())
        })
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

    /// [`ClusterRunner::call`] with any operation.
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

    /// Records that a task of `node` changed the cluster: the node's ClusterOperator
    /// snapshots are stale from now on.
    pub(crate) fn changed(&self, node: usize, outcome: Outcome) {
        if outcome.changed() {
            self.snapshots.invalidate(node);
        }
    }
}

impl ClusterRunner {
    async fn run_action(&self, ctx: &TaskContext, task: &Task) -> TaskResult {
        // The CVO checks the delete annotation before anything else (ClusterOperators have
        // no delete handling): a value other than "true" fails the task, nothing is applied.
        if task.action != Action::Wait
            && let crate::cvo::deletion::DeleteRequest::Invalid(value) =
                crate::cvo::deletion::request(&task.manifest)
        {
            return Err(TaskError::failed(
                crate::cvo::deletion::invalid_message(&value),
                0,
            ));
        }
        match task.action {
            Action::Apply => self.apply(ctx, task).await,
            Action::CreateOnly => self.create_only(ctx, task).await,
            Action::Delete => self.delete(ctx, task).await,
            Action::Wait => self.wait_operator(ctx, task).await,
            Action::Skip => Ok(Done::new(Outcome::Skipped).attempts(0)),
        }
    }

    /// When `error` says (in the server's `Status` details) that the task's namespace does
    /// not exist and a Namespace task of this plan creates it without being ordered after the
    /// task (initializing mode runs every run-level in parallel), that Namespace task: the
    /// task is worth trying again once it has finished. The CVO gets there by retrying the
    /// task (cvo.md §4.3).
    fn namespace_coming(&self, task: &Task, error: &TaskError) -> Option<usize> {
        let ns = task.manifest.id.namespace.as_deref()?;
        let missing = error
            .cause
            .as_ref()
            .and_then(RequestError::missing_namespace);
        if self.options.dry_run || missing != Some(ns) {
            return None;
        }
        self.plan
            .tasks
            .iter()
            .find(|t| {
                t.id != task.id
                    && matches!(t.action, Action::Apply | Action::CreateOnly)
                    && t.manifest.id.group.is_empty()
                    && t.manifest.id.kind == "Namespace"
                    && t.manifest.id.name == ns
                    && !self.plan.runs_before(task.id, t.id)
            })
            .map(|t| t.id)
    }

    /// Waits until task `id` has finished (bounded by the CRD timeout); `false` when it did
    /// not in time or the run stops.
    async fn wait_finished(&self, id: usize, cancel: &CancellationToken) -> bool {
        let mut rx = self.finished.subscribe();
        let deadline = tokio::time::Instant::now() + self.options.crd_timeout;
        loop {
            if rx.borrow_and_update().contains(&id) {
                return true;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return false },
                () = tokio::time::sleep_until(deadline) => return false,
                () = cancel.cancelled() => return false,
            }
        }
    }
}

impl TaskRunner for ClusterRunner {
    async fn start_node(&self, node: usize, tasks: &[usize]) {
        self.precreate_operators(node, tasks).await;
    }

    async fn run_task(&self, ctx: TaskContext) -> TaskResult {
        let task = self.task(&ctx.task);
        let mut result = self.run_action(&ctx, task).await;
        if let Err(e) = &result
            && let Some(ns_task) = self.namespace_coming(task, e)
            && self.wait_finished(ns_task, &ctx.cancel).await
        {
            let before = e.attempts;
            result = self.run_action(&ctx, task).await.map(|mut d| {
                d.attempts += before;
                d
            });
        }
        self.finished.send_modify(|done| {
            done.insert(ctx.task.id);
        });
        if let Ok(done) = &result {
            self.changed(ctx.task.node, done.outcome);
        }
        result
    }
}

/// Reads the run's [`Baseline`]: one LIST of at most one namespace (its list
/// resourceVersion is the cluster's latest) and the server's `Date`. Without list rights,
/// `/version` still gives the date.
pub async fn baseline(client: &Client, timeout: Duration) -> Baseline {
    let list = http::Request::get("/api/v1/namespaces?limit=1").body(Vec::new());
    let Ok(list) = list else {
        return Baseline::default();
    };
    match request::send(client, list, timeout).await {
        Ok(r) => Baseline {
            resource_version: r
                .body
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
            server_time: r.date,
        },
        Err(_) => {
            let Ok(req) = http::Request::get("/version").body(Vec::new()) else {
                return Baseline::default();
            };
            Baseline {
                resource_version: None,
                server_time: request::send(client, req, timeout)
                    .await
                    .ok()
                    .and_then(|r| r.date),
            }
        }
    }
}
