//! The actions: what one task does to the cluster. [`ClusterRunner`] is the engine's
//! [`TaskRunner`]; it holds the [`ClusterHandle`] and one value per action and per wait, and
//! only dispatches: an apply or create-only task resolves where it writes (in the handle),
//! writes with the strategy's action, and a written CRD then goes through the CRD wait; a
//! delete or wait task goes to its action; a task that failed on a namespace this plan is
//! still creating goes through the namespace wait and is tried once more.
//!
//! - [`handle`]: [`ClusterHandle`], what every action reads (client, plan, discovery, event
//!   emitter, options, baseline, which task defines which CRD) and the request helpers
//!   (retries, warnings, kind resolution with the wait for a CRD this plan still has to
//!   establish);
//! - [`apply`]: [`ServerSideApply`], the apply action of the `server-side` strategy, and
//!   [`CreateOnly`], the create-only action of both strategies;
//! - [`cvo`]: [`CvoApply`], the apply action of the default `cvo` strategy (GET, the CVO's
//!   merge, UPDATE);
//! - [`crd_wait`]: [`CrdWait`], the wait for a written CRD to be `Established`, after which
//!   its kinds are served;
//! - [`delete`]: [`Delete`], deletes and the [`DeleteTracker`] of deletions held by
//!   finalizers, checked at the end of the run;
//! - [`operator_wait`]: [`OperatorWait`], the ClusterOperator wait, the precreation pass when
//!   a node starts, and its [`OperatorSnapshots`];
//! - [`namespace_wait`]: [`NamespaceWait`], the retry of a task whose namespace a Namespace
//!   task of this plan is still creating.
//!
//! [`CrdWait`]: crd_wait::CrdWait
//! [`CreateOnly`]: apply::CreateOnly
//! [`CvoApply`]: cvo::CvoApply
//! [`Delete`]: delete::Delete
//! [`DeleteTracker`]: delete::DeleteTracker
//! [`NamespaceWait`]: namespace_wait::NamespaceWait
//! [`OperatorSnapshots`]: operator_wait::OperatorSnapshots
//! [`OperatorWait`]: operator_wait::OperatorWait
//! [`ServerSideApply`]: apply::ServerSideApply

pub mod apply;
pub mod crd_wait;
pub mod cvo;
pub mod delete;
pub mod handle;
pub mod namespace_wait;
pub mod operator_wait;
mod operator_workloads;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::apply::{CreateOnly, ServerSideApply};
use self::crd_wait::CrdWait;
use self::cvo::CvoApply;
use self::delete::Delete;
pub use self::handle::ClusterHandle;
use self::namespace_wait::NamespaceWait;
use self::operator_wait::OperatorWait;
use crate::apply::engine::{Done, TaskContext, TaskError, TaskResult, TaskRunner};
use crate::apply::events::{Outcome, TaskRef};
use crate::cluster::request;
use crate::cluster::retry::RetryPolicy;
use crate::plan::{Action, Mode, Task};

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
    /// The simulated pods of an e2e run, when they stand in for the workloads' pods: the
    /// workload hint of a blocked ClusterOperator wait asks them who runs, not the cluster's
    /// pods (which never run on a cluster without a kubelet).
    pub simulated_pods: Option<std::sync::Arc<crate::simulate::pods::PodBoard>>,
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
            simulated_pods: None,
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

/// The engine's [`TaskRunner`] against a cluster: the handle and one value per action.
pub struct ClusterRunner {
    cluster: Arc<ClusterHandle>,
    server_side: ServerSideApply,
    cvo: CvoApply,
    create_only: CreateOnly,
    crds: CrdWait,
    delete: Delete,
    operator_wait: OperatorWait,
    namespaces: NamespaceWait,
}

impl ClusterRunner {
    /// A runner over `cluster`, with every action's state empty.
    #[must_use]
    pub fn new(cluster: ClusterHandle) -> Self {
        let cluster = Arc::new(cluster);
        ClusterRunner {
            server_side: ServerSideApply::new(cluster.clone()),
            cvo: CvoApply::new(cluster.clone()),
            create_only: CreateOnly::new(cluster.clone()),
            crds: CrdWait::new(cluster.clone()),
            delete: Delete::new(cluster.clone()),
            operator_wait: OperatorWait::new(cluster.clone()),
            namespaces: NamespaceWait::new(cluster.clone()),
            cluster,
        }
    }

    /// Checks the deletions still in progress at the end of the run (see
    /// [`Delete::finish`]); returns the ones that are still there.
    pub async fn finish_deletes(
        &self,
        wait: bool,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Vec<TaskRef> {
        self.delete.finish(wait, deadline, cancel).await
    }

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
            Action::Apply | Action::CreateOnly => {
                let target = match self.cluster.write_target(ctx, task).await? {
                    Ok(target) => target,
                    Err(done) => return Ok(done),
                };
                let collection = target.collection.clone();
                let (done, written) = match (&task.action, self.cluster.options.strategy) {
                    (Action::CreateOnly, _) => self.create_only.create(ctx, target).await,
                    (_, ApplyStrategy::Cvo) => self.cvo.apply(ctx, task, target).await,
                    (_, ApplyStrategy::ServerSide) => {
                        self.server_side.apply(ctx, task, target).await
                    }
                }?;
                if let Some(crd) = written.filter(|_| task.manifest.is_crd()) {
                    // The node's next CRD may be written while this one is established.
                    ctx.written();
                    let name = &task.manifest.id.name;
                    self.crds.established(ctx, name, &collection, crd).await?;
                }
                Ok(done)
            }
            Action::Delete => self.delete.delete(ctx, task).await,
            Action::Wait => self.operator_wait.wait(ctx, task).await,
            Action::Skip => Ok(Done::new(Outcome::Skipped).attempts(0)),
        }
    }
}

impl TaskRunner for ClusterRunner {
    async fn start_node(&self, node: usize, tasks: &[usize]) {
        self.operator_wait.precreate(node, tasks).await;
    }

    async fn run_task(&self, ctx: TaskContext) -> TaskResult {
        let task = self.cluster.task(&ctx.task);
        let mut result = self.run_action(&ctx, task).await;
        if let Err(e) = &result
            && let Some(ns_task) = self.namespaces.coming(task, e)
            && self.namespaces.wait_finished(ns_task, &ctx.cancel).await
        {
            let before = e.attempts;
            result = self.run_action(&ctx, task).await.map(|mut d| {
                d.attempts += before;
                d
            });
        }
        self.namespaces.finished(ctx.task.id);
        if let Ok(done) = &result
            && done.outcome.changed()
        {
            self.operator_wait.node_changed(ctx.task.node);
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
