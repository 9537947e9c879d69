//! The `cvo` apply strategy: the CVO's GET, merge and UPDATE.
//!
//! GET the object; absent → CREATE the prepared manifest; present → run the CVO's merge
//! ([`crate::merge`]) and send an UPDATE (a full PUT carrying the GET's resourceVersion) only
//! when the merge reports a change. A 409 (a concurrent writer changed the object, or created
//! it between the GET and the CREATE) reads the object again and merges again, at most
//! [`MAX_CONFLICTS`] times. A no-op re-apply costs one GET per object. With `--dry-run=server`
//! the CREATE or UPDATE is sent with `dryRun=All`, so the report names the fields the server
//! would change after its defaulting.

use kube::api::PostParams;
use kube::core::Request;
use serde_json::Value;

use super::ClusterRunner;
use crate::apply::engine::{Done, TaskContext, TaskError, TaskResult};
use crate::apply::events::Outcome;
use crate::cluster::body;
use crate::cluster::discovery::Resolved;
use crate::cluster::request::{self, RequestError, Response};
use crate::cluster::watch;
use crate::merge::{self, Outcome as Merged};
use crate::plan::Task;

/// How often a conflicting write is re-read and merged again before the task fails.
pub const MAX_CONFLICTS: u32 = 5;

/// The body of an UPDATE: the merged live object without `managedFields` (the server keeps
/// them) and without `status` (ignored by the main resource anyway).
fn update_body(merged: &Value) -> Value {
    let mut v = merged.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    v
}

impl ClusterRunner {
    /// The apply action in the `cvo` strategy.
    pub(crate) async fn apply_cvo(
        &self,
        ctx: &TaskContext,
        task: &Task,
        resolved: &Resolved,
    ) -> TaskResult {
        let ns = self.namespace_for(task, resolved);
        let collection = resolved.url_path(ns.as_deref());
        let name = task.manifest.id.name.as_str();
        let manifest = body::request_body(&task.manifest.object, ns.as_deref());
        let params = PostParams {
            dry_run: self.options.dry_run,
            field_manager: Some(self.options.field_manager.clone()),
        };
        // Attempts as the report counts them: the tries of the round's slowest request (a GET
        // and a write are one attempt when both go through first time), summed over 409 rounds.
        let mut attempts = 0;
        for _ in 0..MAX_CONFLICTS {
            let (live, n) = self
                .call_with(ctx, resolved.from_run, || {
                    watch::get(
                        &self.client,
                        &collection,
                        name,
                        self.options.request_timeout,
                    )
                })
                .await?;
            let get_tries = n;
            let merged = merge::merge(live.as_ref(), &manifest, &self.options.cluster_config)
                .map_err(|e| TaskError::failed(e.to_string(), attempts + get_tries))?;
            let (body, created) = match merged {
                Merged::Unchanged => {
                    // An unchanged CRD is still waited on, so that its kinds are served to the
                    // custom resources later in the plan.
                    if task.manifest.is_crd()
                        && !self.options.dry_run
                        && let Some(live) = live
                    {
                        self.established(ctx, name, &collection, live).await?;
                    }
                    return Ok(Done::new(Outcome::Unchanged).attempts(attempts + get_tries));
                }
                Merged::Create(obj) => (obj, true),
                Merged::Update(obj) => (update_body(&obj), false),
            };
            let bytes = serde_json::to_vec(&body)
                .map_err(|e| TaskError::failed(e.to_string(), attempts))?;
            let (response, n) = self
                .call_with(ctx, resolved.from_run, || {
                    let req = if created {
                        Request::new(&collection).create(&params, bytes.clone())
                    } else {
                        Request::new(&collection).replace(name, &params, bytes.clone())
                    }
                    .map_err(|e| RequestError::Build(e.to_string()));
                    async move {
                        match request::send(&self.client, req?, self.options.request_timeout).await
                        {
                            Ok(r) => Ok(Some(r)),
                            Err(e) if e.is(409) => Ok(None),
                            Err(e) => Err(e),
                        }
                    }
                })
                .await?;
            attempts += get_tries.max(n);
            let Some(response) = response else { continue };
            return self
                .cvo_written(ctx, task, &collection, live.as_ref(), response, created)
                .await
                .map(|d| d.attempts(attempts));
        }
        Err(TaskError::failed(
            format!(
                "{} {name}: the object kept changing under the update (409 Conflict {MAX_CONFLICTS} times)",
                task.manifest.id.kind
            ),
            attempts,
        ))
    }

    /// Reports a CVO-strategy write, and waits for a written CRD to be Established.
    async fn cvo_written(
        &self,
        ctx: &TaskContext,
        task: &Task,
        collection: &str,
        live: Option<&Value>,
        response: Response,
        created: bool,
    ) -> TaskResult {
        self.warnings(ctx, &response);
        if self.options.dry_run {
            return Ok(match live {
                None => Done::new(Outcome::Created).detail("would create"),
                Some(live) => {
                    let paths = body::changed_paths(live, &response.body, 8);
                    if paths.is_empty() {
                        Done::new(Outcome::Unchanged)
                    } else {
                        Done::new(Outcome::Configured)
                            .detail(format!("would change {}", paths.join(", ")))
                    }
                }
            });
        }
        // An UPDATE the server found identical (a merge default it fills in anyway) does not
        // bump the resourceVersion: report it unchanged.
        let same_version = live.is_some()
            && live.and_then(body::resource_version) == body::resource_version(&response.body);
        if task.manifest.is_crd() {
            self.established(ctx, &task.manifest.id.name, collection, response.body)
                .await?;
        }
        Ok(Done::new(if created {
            Outcome::Created
        } else if same_version {
            Outcome::Unchanged
        } else {
            Outcome::Configured
        }))
    }
}
