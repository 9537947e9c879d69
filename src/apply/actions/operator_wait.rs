//! The ClusterOperator wait ([`OperatorWait`]): precreation when a node starts, then a watch
//! until the operator is done by the CVO's rule ([`crate::clusteroperator::health`]). The
//! states read by precreation are the action's own [`OperatorSnapshots`].
//!
//! - Precreation (cvo.md §4.3): when a node starts, each ClusterOperator of the node that does
//!   not exist is created from its manifest without `status`, then the manifest's
//!   `status.relatedObjects` is written to the new object's status (cvo-apply.md §6), so that
//!   it shows up (and must-gather finds its objects) before the operator runs. Errors are
//!   only logged, as in the CVO. The
//!   state read here is kept and reused by the wait when no task of the node changed anything
//!   in between, so an operator that is already done costs one request.
//! - The wait watches the operator (no polling) and ends the moment it is done, where the CVO
//!   fails the pass and re-walks the graph later (minutes of dead time, cvo.md §11 #818).
//!   `--wait-timeout` turns a wait that never ends into a failure that names the operator and
//!   what it lacks; the CVO waits forever.
//! - While it waits, the events carry the CVO's error for the operator's state
//!   ([`crate::cvo::health::check_operator`]: not available, degraded, updating versions; a
//!   missing operator is `Could not update clusteroperator "X" (N of M): resource may have
//!   been deleted`), which the ClusterVersion recorder turns into Failing and Progressing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::core::Request;
use serde_json::Value;

use super::handle::{ClusterHandle, Served, not_served_yet};
use super::operator_workloads;
use crate::apply::engine::{Done, TaskContext, TaskError, TaskResult};
use crate::apply::events::{EventKind, Outcome};
use crate::cluster::body;
use crate::cluster::discovery::Resolved;
use crate::cluster::request::{self, RequestError};
use crate::cluster::watch::{self, WatchEnd};
use crate::clusteroperator as operator;
use crate::cvo;
use crate::cvo::error::{ApiErrorClass, UpdateError};
use crate::merge;
use crate::plan::{Action, Mode, Task};

const GROUP: &str = "config.openshift.io";

/// When a blocked wait first looks at the operator's workloads, and how often after that.
const HINT_FIRST: Duration = Duration::from_secs(3);
const HINT_EVERY: Duration = Duration::from_secs(10);

/// What a blocked wait shows: the operator's state, the CVO's error for it, and the hint
/// about its workloads.
struct Shown {
    blocking: Vec<String>,
    error: Option<UpdateError>,
    hint: Option<String>,
}

impl Shown {
    fn with_hint(&self) -> Vec<String> {
        let mut v = self.blocking.clone();
        v.extend(self.hint.clone());
        v
    }
}

/// A duration as `--wait-timeout` is usually written (`30m`, `1h30m`, `8.0s`).
pub(super) fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(60) {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// ClusterOperator states read by the precreation pass, per node and task, for the node's waits
/// to start from; dropped when a later task of the node changes something (the operator may
/// react to it). Owned by the wait action.
#[derive(Debug, Default)]
pub struct OperatorSnapshots {
    by_node: std::sync::Mutex<HashMap<usize, HashMap<usize, Option<Value>>>>,
}

impl OperatorSnapshots {
    fn put(&self, node: usize, task: usize, state: Option<Value>) {
        self.by_node
            .lock()
            .expect("snapshot lock")
            .entry(node)
            .or_default()
            .insert(task, state);
    }

    /// The state read for `task` of `node`, once (`None`: none, or dropped as stale).
    fn take(&self, node: usize, task: usize) -> Option<Option<Value>> {
        self.by_node
            .lock()
            .expect("snapshot lock")
            .get_mut(&node)
            .and_then(|m| m.remove(&task))
    }

    /// A task of `node` changed the cluster: its snapshots are stale.
    pub(crate) fn invalidate(&self, node: usize) {
        self.by_node.lock().expect("snapshot lock").remove(&node);
    }
}

/// The ClusterOperator wait action, its precreation pass and the states that pass read.
pub struct OperatorWait {
    cluster: Arc<ClusterHandle>,
    snapshots: OperatorSnapshots,
}

impl OperatorWait {
    /// The action, over `cluster`, with no state read yet.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        OperatorWait {
            cluster,
            snapshots: OperatorSnapshots::default(),
        }
    }

    /// A task of `node` changed the cluster: the states precreation read for the node's
    /// waits are stale.
    pub(crate) fn node_changed(&self, node: usize) {
        self.snapshots.invalidate(node);
    }

    async fn operator_kind(&self, task: &Task) -> Option<Resolved> {
        match self
            .cluster
            .served_kind(GROUP, task.manifest.version(), "ClusterOperator")
            .await
        {
            Ok(Served::Yes(r)) => Some(r),
            _ => None,
        }
    }

    /// Creates the operator from its manifest without status; returns the created object.
    ///
    /// This is a server-side apply, not a POST: the API server holds every POST to a custom
    /// resource whose CRD was established less than 2 s ago for 2 s (apiextensions-apiserver
    /// `customresource_handler.go`), which would stall the first node after the CRD.
    async fn create_operator(
        &self,
        task: &Task,
        resolved: &Resolved,
    ) -> Result<Value, RequestError> {
        // The CVO's owner-reference step runs before precreation, as for every manifest.
        let created = cvo::precreate::created_object(&task.manifest.object);
        let created = merge::prepare(&created, &self.cluster.options.cluster_config)
            .map_err(|e| RequestError::Build(e.to_string()))?;
        let body = body::request_body(&created, None);
        let mut params = PatchParams::apply(&self.cluster.options.field_manager).force();
        if self.cluster.options.dry_run {
            params = params.dry_run();
        }
        let req = Request::new(resolved.url_path(None))
            .patch(&task.manifest.id.name, &params, &Patch::Apply(&body))
            .map_err(|e| RequestError::Build(e.to_string()))?;
        Ok(request::send(
            &self.cluster.client,
            req,
            self.cluster.options.request_timeout,
        )
        .await?
        .body)
    }

    /// In reconciling mode the CVO merges the manifest's ObjectMeta (labels, annotations,
    /// the ClusterVersion owner reference) into an existing operator and UPDATEs it when that
    /// changed something; status is never written. A failure is only logged. Returns the
    /// operator as it now is.
    async fn reconcile_meta(&self, task: &Task, resolved: &Resolved, live: Value) -> Value {
        let name = &task.manifest.id.name;
        let c = &self.cluster;
        let required = match merge::prepare(&task.manifest.object, &c.options.cluster_config) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("clusteroperator {name}: {e}");
                return live;
            }
        };
        let Some(merged) = merge::merge_cluster_operator(&live, &required) else {
            return live;
        };
        let merged = super::cvo::update_body(&merged);
        let params = kube::api::PostParams {
            dry_run: c.options.dry_run,
            field_manager: Some(c.options.field_manager.clone()),
        };
        let sent = match serde_json::to_vec(&merged) {
            Ok(bytes) => Request::new(resolved.url_path(None))
                .replace(name, &params, bytes)
                .map_err(|e| RequestError::Build(e.to_string())),
            Err(e) => Err(RequestError::Build(e.to_string())),
        };
        let sent = match sent {
            Ok(req) => request::send(&c.client, req, c.options.request_timeout).await,
            Err(e) => Err(e),
        };
        match sent {
            Ok(r) if !c.options.dry_run => r.body,
            Ok(_) => live,
            Err(e) => {
                tracing::warn!("updating the metadata of clusteroperator {name}: {e}");
                live
            }
        }
    }

    /// After a real create, the CVO copies the manifest's `status.relatedObjects` into the new
    /// object's status; a failure is only logged. Returns the object as it now is.
    async fn write_related_objects(
        &self,
        task: &Task,
        resolved: &Resolved,
        created: Value,
    ) -> Value {
        let Some(status) = cvo::precreate::related_objects_status(&task.manifest.object) else {
            return created;
        };
        let name = &task.manifest.id.name;
        let params = PatchParams {
            field_manager: Some(self.cluster.options.field_manager.clone()),
            ..PatchParams::default()
        };
        let patch = serde_json::json!({ "status": status });
        let req = Request::new(resolved.url_path(None))
            .patch_subresource("status", name, &params, &Patch::Merge(&patch))
            .map_err(|e| RequestError::Build(e.to_string()));
        let sent = match req {
            Ok(req) => {
                request::send(
                    &self.cluster.client,
                    req,
                    self.cluster.options.request_timeout,
                )
                .await
            }
            Err(e) => Err(e),
        };
        match sent {
            Ok(r) => r.body,
            Err(e) => {
                tracing::warn!("writing the relatedObjects of clusteroperator {name}: {e}");
                created
            }
        }
    }

    /// The CVO's error for the operator's state (`None`: healthy, or only reported).
    fn cvo_error(
        &self,
        ctx: &TaskContext,
        task: &Task,
        live: Option<&Value>,
    ) -> Option<UpdateError> {
        let name = &task.manifest.id.name;
        let Some(live) = live else {
            let label = cvo::error::task_label(
                "ClusterOperator",
                None,
                name,
                &task.manifest.path(),
                ctx.task.id + 1,
                self.cluster.plan.tasks.len(),
            );
            let mut e = cvo::error::task_error(&label, ApiErrorClass::NotFound, "not found");
            e.name.clone_from(name);
            return Some(e);
        };
        let expected = cvo::health::versions(&task.manifest.object);
        cvo::health::check_operator(name, &expected, live, self.cluster.options.mode).filter(|e| {
            !(self.cluster.options.mode == Mode::Initializing
                && e.effect == Some(cvo::error::Effect::Report))
        })
    }

    /// The precreation pass of a node.
    pub(crate) async fn precreate(&self, node: usize, tasks: &[usize]) {
        for &t in tasks {
            let task = &self.cluster.plan.tasks[t];
            if task.action != Action::Wait {
                continue;
            }
            let Some(resolved) = self.operator_kind(task).await else {
                continue;
            };
            let name = &task.manifest.id.name;
            let state = match watch::get(
                &self.cluster.client,
                &resolved.url_path(None),
                name,
                self.cluster.options.request_timeout,
            )
            .await
            {
                Ok(Some(live)) if self.cluster.options.mode == Mode::Reconciling => {
                    Some(self.reconcile_meta(task, &resolved, live).await)
                }
                Ok(Some(live)) => Some(live),
                Ok(None) if self.cluster.options.dry_run => None,
                Ok(None) => match self.create_operator(task, &resolved).await {
                    Ok(created) => Some(self.write_related_objects(task, &resolved, created).await),
                    Err(e) => {
                        tracing::warn!("precreating clusteroperator {name}: {e}");
                        continue;
                    }
                },
                Err(e) => {
                    tracing::warn!("reading clusteroperator {name}: {e}");
                    continue;
                }
            };
            self.snapshots.put(node, t, state);
        }
    }

    /// The wait action.
    pub(crate) async fn wait(&self, ctx: &TaskContext, task: &Task) -> TaskResult {
        let name = task.manifest.id.name.as_str();
        let want = operator::wanted_versions(&task.manifest.object);
        if want.is_empty() {
            return Err(TaskError::failed(
                format!(
                    "{} (status.versions is empty in the manifest)",
                    cvo::health::no_versions(name).message
                ),
                0,
            ));
        }
        let resolved = match self
            .cluster
            .served_for(
                task,
                GROUP,
                task.manifest.version(),
                "ClusterOperator",
                &ctx.cancel,
            )
            .await
        {
            Ok(Served::Yes(r)) => Some(r),
            _ => None,
        };
        let Some(resolved) = resolved else {
            let crd_task = self.cluster.crd_task(GROUP, "ClusterOperator");
            if self.cluster.options.dry_run && crd_task.is_some() {
                return Ok(not_served_yet().attempts(0));
            }
            return Err(self.cluster.not_served_error(task, crd_task));
        };
        let collection = resolved.url_path(None);
        let snapshot = self.snapshots.take(ctx.task.node, ctx.task.id);
        let (initial, attempts) = match snapshot {
            Some(s) => (s, 0),
            None => {
                let (live, attempts) = self.cluster.get_live(ctx, false, &collection, name).await?;
                let live = match live {
                    Some(l) => Some(l),
                    // Deleted since precreation (or precreation failed): create it again.
                    None if !self.cluster.options.dry_run => {
                        self.create_operator(task, &resolved).await.ok()
                    }
                    None => None,
                };
                (live, attempts)
            }
        };
        let mode = self.cluster.options.mode;
        let first = operator::health(initial.as_ref(), &want, mode);
        if first.done {
            let mut done = Done::new(Outcome::Waited).attempts(attempts);
            if !first.reported.is_empty() {
                done = done.detail(format!(
                    "reported, not blocking: {}",
                    first.reported.join("; ")
                ));
            }
            return Ok(done);
        }
        if self.cluster.options.dry_run {
            return Ok(Done::new(Outcome::WouldWait)
                .attempts(attempts)
                .detail(format!("would wait: {}", first.blocking.join("; "))));
        }
        let started = tokio::time::Instant::now();
        let last_error = self.cvo_error(ctx, task, initial.as_ref());
        self.cluster.emitter.emit(EventKind::WaitStarted {
            task: ctx.task.clone(),
            operator: name.to_string(),
            blocking: first.blocking.clone(),
            error: last_error.clone(),
        });
        // What the progress shows: the operator's state, and the workload hint once there is
        // one (operator_workloads). Both the watch and the hint loop update it.
        let shown = std::sync::Mutex::new(Shown {
            blocking: first.blocking.clone(),
            error: last_error,
            hint: None,
        });
        let emit = |s: &Shown| {
            self.cluster.emitter.emit(EventKind::WaitProgress {
                task: ctx.task.clone(),
                operator: name.to_string(),
                blocking: s.with_hint(),
                error: s.error.clone(),
            });
        };
        let watching = watch::watch_until(
            &self.cluster.client,
            &collection,
            name,
            initial,
            started + self.cluster.options.wait_timeout,
            &ctx.cancel,
            |live| {
                let h = operator::health(live, &want, mode);
                if h.done {
                    return Some(h);
                }
                let error = self.cvo_error(ctx, task, live);
                let mut s = shown.lock().expect("wait state lock");
                if h.blocking != s.blocking || error != s.error {
                    s.blocking = h.blocking;
                    s.error = error;
                    emit(&s);
                }
                None
            },
        );
        let workloads = operator_workloads::workloads_of(&self.cluster.plan, task);
        let hinting = async {
            if workloads.is_empty() {
                return std::future::pending::<()>().await;
            }
            let mut delay = HINT_FIRST;
            loop {
                tokio::time::sleep(delay).await;
                delay = HINT_EVERY;
                let hint = operator_workloads::hint(
                    &self.cluster.client,
                    name,
                    &workloads,
                    self.cluster.options.simulated_pods.as_deref(),
                    self.cluster.options.wait_timeout,
                    self.cluster.options.request_timeout,
                )
                .await;
                let mut s = shown.lock().expect("wait state lock");
                if hint != s.hint {
                    s.hint = hint;
                    emit(&s);
                }
            }
        };
        let end = tokio::select! {
            end = watching => end,
            () = hinting => unreachable!("the hint loop never ends"),
        };
        let shown = shown.into_inner().expect("wait state lock");
        match end {
            WatchEnd::Done(h) => {
                let waited = started.elapsed();
                self.cluster.emitter.emit(EventKind::WaitDone {
                    task: ctx.task.clone(),
                    operator: name.to_string(),
                    waited,
                });
                let mut detail = format!("waited {}", format_duration(waited));
                if !h.reported.is_empty() {
                    detail.push_str(&format!(
                        "; reported, not blocking: {}",
                        h.reported.join("; ")
                    ));
                }
                Ok(Done::new(Outcome::Waited).attempts(attempts).detail(detail))
            }
            WatchEnd::TimedOut(state) => {
                let h = operator::health(state.as_ref(), &want, mode);
                let mut why = h.blocking;
                why.extend(shown.hint);
                Err(TaskError::failed(
                    format!(
                        "clusteroperator {name} is not done after --wait-timeout {}: {}",
                        format_duration(self.cluster.options.wait_timeout),
                        why.join("; ")
                    ),
                    attempts,
                ))
            }
            WatchEnd::Cancelled => Err(TaskError::interrupted(format!(
                "stopped while waiting for clusteroperator {name}: {}",
                shown.with_hint().join("; ")
            ))),
            WatchEnd::Failed(e) => Err(TaskError::failed(
                format!("cannot watch clusteroperator {name}: {e}"),
                attempts,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_flags() {
        assert_eq!(format_duration(Duration::from_secs(1800)), "30m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }
}
