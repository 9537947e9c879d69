//! The namespace wait: a task whose namespace does not exist yet, while a Namespace task of
//! this plan that is not ordered after it will create it (initializing mode runs every
//! run-level in parallel), is tried again once that Namespace task has finished. The CVO gets
//! there by retrying the task (cvo.md §4.3).

use std::collections::HashSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::handle::ClusterHandle;
use crate::apply::engine::TaskError;
use crate::cluster::request::RequestError;
use crate::plan::{Action, Task};

/// Which tasks have finished, and the wait for a Namespace task.
pub struct NamespaceWait {
    cluster: Arc<ClusterHandle>,
    finished: tokio::sync::watch::Sender<HashSet<usize>>,
}

impl NamespaceWait {
    /// The wait, over `cluster`, with no task finished yet.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        NamespaceWait {
            cluster,
            finished: tokio::sync::watch::Sender::new(HashSet::new()),
        }
    }

    /// Records that task `id` has finished.
    pub(crate) fn finished(&self, id: usize) {
        self.finished.send_modify(|done| {
            done.insert(id);
        });
    }

    /// When `error` says (in the server's `Status` details) that the task's namespace does
    /// not exist and a Namespace task of this plan creates it without being ordered after the
    /// task, that Namespace task: the task is worth trying again once it has finished.
    pub(crate) fn coming(&self, task: &Task, error: &TaskError) -> Option<usize> {
        let ns = task.manifest.id.namespace.as_deref()?;
        let missing = error
            .cause
            .as_ref()
            .and_then(RequestError::missing_namespace);
        if self.cluster.options.dry_run || missing != Some(ns) {
            return None;
        }
        let plan = &self.cluster.plan;
        plan.tasks
            .iter()
            .find(|t| {
                t.id != task.id
                    && matches!(t.action, Action::Apply | Action::CreateOnly)
                    && t.manifest.id.group.is_empty()
                    && t.manifest.id.kind == "Namespace"
                    && t.manifest.id.name == ns
                    && !plan.runs_before(task.id, t.id)
            })
            .map(|t| t.id)
    }

    /// Waits until task `id` has finished (bounded by the CRD timeout); `false` when it did
    /// not in time or the run stops.
    pub(crate) async fn wait_finished(&self, id: usize, cancel: &CancellationToken) -> bool {
        let mut rx = self.finished.subscribe();
        let deadline = tokio::time::Instant::now() + self.cluster.options.crd_timeout;
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
