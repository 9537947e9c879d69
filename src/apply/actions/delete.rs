//! Deleting objects (`release.openshift.io/delete: "true"`) and tracking the deletions.
//!
//! As in the CVO (cvo.md §6), deletes are issued only in updating mode, with background
//! propagation, at the task's place in the graph; an absent object (or a kind the server
//! does not serve) counts as done, and the task does not wait for finalizers. Unlike the CVO,
//! which only notices on a later pass, minicvo keeps every deletion that was still in
//! progress and checks it again at the end of the run (`--wait-deletes` waits for it, bounded
//! by `--wait-timeout`); the report lists the ones still in progress.

use kube::api::DeleteParams;
use kube::core::Request;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ClusterRunner, Served};
use crate::apply::engine::{Done, TaskContext, TaskResult};
use crate::apply::events::{EventKind, Outcome, TaskRef};
use crate::cluster::body;
use crate::cluster::request::RequestError;
use crate::cluster::watch::{self, WatchEnd};
use crate::plan::{Mode, Task};

/// A deletion that was accepted while the object still existed (finalizers, foreground
/// dependents).
#[derive(Debug, Clone)]
pub struct PendingDelete {
    /// The delete task.
    pub task: TaskRef,
    /// Collection URL.
    pub collection: String,
    /// The object's uid when the delete was accepted (a new object of the same name is not
    /// the one we deleted).
    pub uid: Option<String>,
}

impl ClusterRunner {
    /// The delete action.
    pub(crate) async fn delete(&self, ctx: &TaskContext, task: &Task) -> TaskResult {
        if self.options.mode != Mode::Updating {
            return Ok(Done::new(Outcome::DeleteSkipped)
                .attempts(0)
                .detail(format!(
                    "deletes are issued only in updating mode, not {}",
                    self.options.mode
                )));
        }
        let served = self.call_with(ctx, false, || self.served(task)).await?.0;
        let resolved = match served {
            Served::Yes(r) => r,
            Served::No { .. } => {
                return Ok(Done::new(Outcome::AlreadyAbsent)
                    .attempts(0)
                    .detail("its type is not served"));
            }
        };
        let ns = self.namespace_for(task, &resolved);
        let collection = resolved.url_path(ns.as_deref());
        let name = task.manifest.id.name.as_str();
        let mut params = DeleteParams::background();
        if self.options.dry_run {
            params = params.dry_run();
        }
        let (deleted, attempts) = self
            .call_with(ctx, false, || {
                let req = Request::new(&collection)
                    .delete(name, &params)
                    .map_err(|e| RequestError::Build(e.to_string()));
                async move {
                    match crate::cluster::request::send(
                        &self.client,
                        req?,
                        self.options.request_timeout,
                    )
                    .await
                    {
                        Ok(r) => Ok(Some(r)),
                        Err(e) if e.is(404) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        let Some(response) = deleted else {
            return Ok(Done::new(Outcome::AlreadyAbsent).attempts(attempts));
        };
        self.warnings(ctx, &response);
        if self.options.dry_run {
            return Ok(Done::new(Outcome::Deleted)
                .detail("would delete")
                .attempts(attempts));
        }
        // A `Status` body means the object is gone; the object itself means it is still
        // there, marked for deletion.
        let gone = response.body.get("kind").and_then(Value::as_str) == Some("Status");
        self.emitter.emit(EventKind::DeleteRequested {
            task: ctx.task.clone(),
            gone,
        });
        if gone {
            self.emitter.emit(EventKind::DeleteConfirmed {
                task: ctx.task.clone(),
            });
            return Ok(Done::new(Outcome::Deleted).attempts(attempts));
        }
        let finalizers: Vec<&str> = response
            .body
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        self.pending_deletes
            .lock()
            .expect("delete lock")
            .push(PendingDelete {
                task: ctx.task.clone(),
                collection,
                uid: body::uid(&response.body).map(str::to_owned),
            });
        let detail = if finalizers.is_empty() {
            "deletion in progress".to_string()
        } else {
            format!(
                "deletion in progress (finalizers: {})",
                finalizers.join(", ")
            )
        };
        Ok(Done::new(Outcome::Deleted)
            .attempts(attempts)
            .detail(detail))
    }

    /// Checks the deletions still in progress: waits for each (bounded by `deadline`) when
    /// `wait` is set, else looks once. Returns the ones that are still there.
    pub async fn finish_deletes(
        &self,
        wait: bool,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Vec<TaskRef> {
        let pending: Vec<PendingDelete> =
            std::mem::take(&mut *self.pending_deletes.lock().expect("delete lock"));
        let mut still = Vec::new();
        for p in pending {
            let gone = |o: Option<&Value>| match o {
                None => Some(()),
                Some(o) if p.uid.is_some() && body::uid(o) != p.uid.as_deref() => Some(()),
                Some(_) => None,
            };
            let current = match watch::get(
                &self.client,
                &p.collection,
                &p.task.object.name,
                self.options.request_timeout,
            )
            .await
            {
                Ok(o) => o,
                Err(_) => {
                    still.push(p.task);
                    continue;
                }
            };
            let done = if wait {
                matches!(
                    watch::watch_until(
                        &self.client,
                        &p.collection,
                        &p.task.object.name,
                        current,
                        deadline,
                        cancel,
                        gone,
                    )
                    .await,
                    WatchEnd::Done(())
                )
            } else {
                gone(current.as_ref()).is_some()
            };
            if done {
                self.emitter
                    .emit(EventKind::DeleteConfirmed { task: p.task });
            } else {
                still.push(p.task);
            }
        }
        still
    }
}
