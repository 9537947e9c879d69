//! The delete action ([`Delete`]): deleting objects (`release.openshift.io/delete: "true"`)
//! and tracking the deletions ([`DeleteTracker`]) until the end of the run.
//!
//! As in the CVO (cvo-apply.md §7):
//!
//! - deletes are issued only in updating mode, at the task's place in the graph, with the
//!   server's default propagation (no `propagationPolicy`: background for most kinds, orphan
//!   for `batch/v1` Jobs);
//! - an absent object counts as done (with the CVO's "not found" wording);
//! - a kind the server does not serve fails the task (`UpdatePayloadResourceTypeMissing`),
//!   except the kinds the CVO deletes through a typed client, whose GET answers 404 and so
//!   count as absent;
//! - a `release.openshift.io/delete` value other than `"true"` fails the task (checked in
//!   [`super::ClusterRunner`]'s dispatch before any action, so nothing is applied either);
//! - the task does not wait for finalizers.
//!
//! Unlike the CVO, which only notices on a later pass, minicvo keeps every deletion that was
//! still in progress and checks it again at the end of the run (`--wait-deletes` waits for
//! it, bounded by `--wait-timeout`); the report lists the ones still in progress.

use std::sync::Arc;

use kube::api::DeleteParams;
use kube::core::Request;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::handle::{ClusterHandle, Served};
use crate::apply::engine::{Done, TaskContext, TaskError, TaskResult};
use crate::apply::events::{EventKind, Outcome, TaskRef};
use crate::cluster::body;
use crate::cluster::request::RequestError;
use crate::cluster::watch::{self, WatchEnd};
use crate::cvo::deletion;
use crate::cvo::error::ApiErrorClass;
use crate::plan::{Mode, Task};

/// The CVO's words for a kind the server does not serve (its REST mapper's error and the cause
/// it gives for `UpdatePayloadResourceTypeMissing`).
#[must_use]
pub fn type_missing_message(api_version: &str, kind: &str) -> String {
    format!(
        "no matches for kind \"{kind}\" in version \"{api_version}\": {}",
        ApiErrorClass::NoKindMatch.reason_and_cause().1
    )
}

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

/// The deletions accepted while their object still existed, until the end of the run checks
/// them ([`Delete::finish`]). Owned by the delete action.
#[derive(Debug, Default)]
pub struct DeleteTracker {
    pending: std::sync::Mutex<Vec<PendingDelete>>,
}

impl DeleteTracker {
    /// Remembers a deletion in progress.
    fn track(&self, pending: PendingDelete) {
        self.pending.lock().expect("delete lock").push(pending);
    }

    /// Takes every deletion still tracked.
    fn take(&self) -> Vec<PendingDelete> {
        std::mem::take(&mut *self.pending.lock().expect("delete lock"))
    }
}

/// The delete action and the deletions it still tracks.
pub struct Delete {
    cluster: Arc<ClusterHandle>,
    tracker: DeleteTracker,
}

impl Delete {
    /// The action, over `cluster`, tracking nothing yet.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        Delete {
            cluster,
            tracker: DeleteTracker::default(),
        }
    }

    /// The delete action.
    pub(crate) async fn delete(&self, ctx: &TaskContext, task: &Task) -> TaskResult {
        let c = &*self.cluster;
        if c.options.mode != Mode::Updating {
            return Ok(Done::new(Outcome::DeleteSkipped)
                .attempts(0)
                .detail(format!(
                    "deletes are issued only in updating mode, not {}",
                    c.options.mode
                )));
        }
        let m = &task.manifest;
        let label = deletion::resource_label(
            &m.id.group,
            &m.id.kind,
            m.id.namespace.as_deref(),
            &m.id.name,
        );
        let served = c.call_with(ctx, false, || c.served(task)).await?.0;
        let resolved = match served {
            Served::Yes(r) => r,
            Served::No { .. } if deletion::is_typed(&m.id.group, &m.id.kind) => {
                return Ok(Done::new(Outcome::AlreadyAbsent)
                    .attempts(0)
                    .detail(deletion::not_found_message(&label)));
            }
            Served::No { .. } => {
                return Err(TaskError::failed(
                    type_missing_message(&m.api_version, &m.id.kind),
                    1,
                ));
            }
        };
        let ns = c.namespace_for(task, &resolved);
        let collection = resolved.url_path(ns.as_deref());
        let name = task.manifest.id.name.as_str();
        // No propagation policy: the server's default for the kind, as the CVO sends it.
        let mut params = DeleteParams::default();
        if c.options.dry_run {
            params = params.dry_run();
        }
        let (deleted, attempts) = c
            .send_unless(
                ctx,
                false,
                |e| e.is(404),
                || {
                    Request::new(&collection)
                        .delete(name, &params)
                        .map_err(|e| RequestError::Build(e.to_string()))
                },
            )
            .await?;
        let Some(response) = deleted else {
            return Ok(Done::new(Outcome::AlreadyAbsent)
                .attempts(attempts)
                .detail(deletion::not_found_message(&label)));
        };
        c.warnings(ctx, &response);
        if c.options.dry_run {
            return Ok(Done::new(Outcome::Deleted)
                .detail("would delete")
                .attempts(attempts));
        }
        // A `Status` body means the object is gone; the object itself means it is still
        // there, marked for deletion.
        let gone = response.body.get("kind").and_then(Value::as_str) == Some("Status");
        c.emitter.emit(EventKind::DeleteRequested {
            task: ctx.task.clone(),
            gone,
        });
        if gone {
            c.emitter.emit(EventKind::DeleteConfirmed {
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
        self.tracker.track(PendingDelete {
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
    pub async fn finish(
        &self,
        wait: bool,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Vec<TaskRef> {
        let c = &*self.cluster;
        let pending = self.tracker.take();
        let mut still = Vec::new();
        for p in pending {
            let gone = |o: Option<&Value>| match o {
                None => Some(()),
                Some(o) if p.uid.is_some() && body::uid(o) != p.uid.as_deref() => Some(()),
                Some(_) => None,
            };
            let current = match watch::get(
                &c.client,
                &p.collection,
                &p.task.object.name,
                c.options.request_timeout,
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
                        &c.client,
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
                c.emitter.emit(EventKind::DeleteConfirmed { task: p.task });
            } else {
                still.push(p.task);
            }
        }
        still
    }
}
