//! Applying and creating objects.
//!
//! - apply: one server-side apply PATCH (`force`, the run's field manager). 201 means
//!   created; otherwise the response is classified against the run's [`Baseline`] (no extra
//!   request). An unchanged object is not written by the server at all (SSA is a no-op when
//!   nothing changes), so its resourceVersion stays.
//! - create-only: one POST; 409 AlreadyExists means "leave it alone".
//! - dry run: the live object is read first, the PATCH is sent with `dryRun=All`, and the
//!   two are compared, so the report says which fields would change.
//! - CustomResourceDefinition: after the apply, wait (watch) until `Established`, then its
//!   kinds are served for the rest of the run.
//!
//! [`Baseline`]: super::Baseline

use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use serde_json::Value;

use super::{Baseline, ClusterRunner, Served};
use crate::apply::engine::{Done, TaskContext, TaskError, TaskResult};
use crate::apply::events::{EventKind, Outcome};
use crate::cluster::body;
use crate::cluster::discovery::Resolved;
use crate::cluster::request::RequestError;
use crate::cluster::watch::{self, WatchEnd};
use crate::plan::Task;

/// Why a CRD's names were not accepted, or `Ok(established)`.
fn crd_state(crd: &Value) -> Result<bool, String> {
    let conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let get = |t: &str| {
        conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
    };
    if let Some(c) = get("NamesAccepted")
        && c.get("status").and_then(Value::as_str) == Some("False")
    {
        return Err(format!(
            "names not accepted: {}",
            c.get("message").and_then(Value::as_str).unwrap_or_default()
        ));
    }
    Ok(get("Established").and_then(|c| c.get("status").and_then(Value::as_str)) == Some("True"))
}

/// A workload whose manifest switches its update strategy away from `RollingUpdate`
/// (Deployment `strategy.type: Recreate`, DaemonSet/StatefulSet `updateStrategy.type:
/// OnDelete`) cannot be server-side applied over a live object that still has the
/// server-defaulted `rollingUpdate`: no manager owns those defaults, so the apply keeps them,
/// and validation rejects the result ("spec.strategy.rollingUpdate: Forbidden: may not be
/// specified when strategy `type` is 'Recreate'"). The CVO's GET-merge-UPDATE replaces the
/// strategy wholesale and never hits this. Returns the strategy field and its type when
/// `object` is such a workload and `error` is that rejection (an empty `error` matches any).
#[must_use]
pub fn strategy_switch<'a>(object: &'a Value, error: &str) -> Option<(&'static str, &'a str)> {
    if !error.is_empty() && !error.contains("rollingUpdate: Forbidden: may not be specified") {
        return None;
    }
    let field = match object.get("kind").and_then(Value::as_str)? {
        "Deployment" => "strategy",
        "DaemonSet" | "StatefulSet" => "updateStrategy",
        _ => return None,
    };
    let spec = object.get("spec")?.get(field)?;
    let kind = spec.get("type").and_then(Value::as_str)?;
    (kind != "RollingUpdate" && spec.get("rollingUpdate").is_none()).then_some((field, kind))
}

/// Configured or unchanged, from a server-side apply response that did not create the
/// object (see [`Baseline`]): changed when its resourceVersion is newer than the cluster's at
/// the start *and* `manager`'s `Apply` managed-fields entry is stamped at or after the start.
/// The resourceVersion alone would count others' writes during the run (a controller's
/// status update); the time alone (second precision) would count our own previous run when
/// it ended in the same second. Without a baseline the object counts as configured.
///
/// [`Baseline`]: super::Baseline
#[must_use]
pub fn classify(baseline: &Baseline, object: &Value, manager: &str) -> Outcome {
    let by_version = match (
        baseline.resource_version,
        body::resource_version(object).and_then(|s| s.parse::<u64>().ok()),
    ) {
        (Some(start), Some(now)) => Some(now > start),
        _ => None,
    };
    let by_time = baseline.server_time.map(|start| {
        body::applied_at(object, manager)
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .is_some_and(|t| t >= start)
    });
    let changed = match (by_version, by_time) {
        (Some(v), Some(t)) => v && t,
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => true,
    };
    if changed {
        Outcome::Configured
    } else {
        Outcome::Unchanged
    }
}

impl ClusterRunner {
    /// Resolves the task's kind; `Err(done)` ends the task early (dry-run "not served yet").
    async fn target(
        &self,
        ctx: &TaskContext,
        task: &Task,
    ) -> Result<Result<Resolved, Done>, TaskError> {
        let served = self
            .call_with(ctx, false, || {
                let m = &task.manifest;
                self.served_for(task, &m.id.group, m.version(), &m.id.kind, &ctx.cancel)
            })
            .await
            .map_err(|e| TaskError::failed(format!("discovery: {}", e.message), e.attempts))?
            .0;
        match served {
            Served::Yes(r) => Ok(Ok(r)),
            Served::No { crd_task: Some(_) } if self.options.dry_run => {
                Ok(Err(Done::new(Outcome::NotServed)
                    .detail("type not served yet (CRD created by this plan)")))
            }
            Served::No { crd_task } => Err(self.not_served_error(task, crd_task)),
        }
    }

    /// The apply action.
    pub(crate) async fn apply(&self, ctx: &TaskContext, task: &Task) -> TaskResult {
        let resolved = match self.target(ctx, task).await? {
            Ok(r) => r,
            Err(done) => return Ok(done),
        };
        if self.options.strategy == super::ApplyStrategy::Cvo {
            return self.apply_cvo(ctx, task, &resolved).await;
        }
        let ns = self.namespace_for(task, &resolved);
        let collection = resolved.url_path(ns.as_deref());
        let name = task.manifest.id.name.as_str();
        let body = body::request_body(&task.manifest.object, ns.as_deref());
        let mut params = PatchParams::apply(&self.options.field_manager).force();
        if self.options.dry_run {
            params = params.dry_run();
        }
        let build = || {
            Request::new(&collection)
                .patch(name, &params, &Patch::Apply(&body))
                .map_err(|e| RequestError::Build(e.to_string()))
        };
        if self.options.dry_run {
            let (live, _) = self
                .call_with(ctx, resolved.from_run, || {
                    watch::get(
                        &self.client,
                        &collection,
                        name,
                        self.options.request_timeout,
                    )
                })
                .await?;
            let (response, attempts) = self.call(ctx, resolved.from_run, build).await?;
            self.warnings(ctx, &response);
            return Ok(match live {
                None => Done::new(Outcome::Created).detail("would create"),
                Some(live) => {
                    let paths = body::changed_paths(&live, &response.body, 8);
                    if paths.is_empty() {
                        Done::new(Outcome::Unchanged)
                    } else {
                        Done::new(Outcome::Configured)
                            .detail(format!("would change {}", paths.join(", ")))
                    }
                }
            }
            .attempts(attempts));
        }
        let (response, attempts) = match self.call(ctx, resolved.from_run, build).await {
            Err(e) if strategy_switch(&task.manifest.object, &e.message).is_some() => {
                let attempts = e.attempts
                    + self
                        .clear_rolling_update(ctx, &collection, name, &task.manifest.object)
                        .await?;
                let (r, more) = self.call(ctx, resolved.from_run, build).await?;
                (r, attempts + more)
            }
            r => r?,
        };
        self.warnings(ctx, &response);
        let outcome = if response.status == 201 {
            Outcome::Created
        } else {
            classify(&self.baseline, &response.body, &self.options.field_manager)
        };
        if task.manifest.is_crd() {
            self.established(ctx, name, &collection, response.body)
                .await?;
        }
        Ok(Done::new(outcome).attempts(attempts))
    }

    /// Switches a workload's update strategy away from `RollingUpdate` with a JSON merge
    /// patch that also drops `rollingUpdate`; see [`strategy_switch`]. Returns the attempts.
    async fn clear_rolling_update(
        &self,
        ctx: &TaskContext,
        collection: &str,
        name: &str,
        object: &Value,
    ) -> Result<u32, TaskError> {
        let Some((field, kind)) = strategy_switch(object, "") else {
            return Ok(0);
        };
        let patch = serde_json::json!({"spec": {field: {"type": kind, "rollingUpdate": null}}});
        let params = PatchParams {
            field_manager: Some(self.options.field_manager.clone()),
            ..PatchParams::default()
        };
        let (_, attempts) = self
            .call(ctx, false, || {
                Request::new(collection)
                    .patch(name, &params, &Patch::Merge(&patch))
                    .map_err(|e| RequestError::Build(e.to_string()))
            })
            .await?;
        Ok(attempts)
    }

    /// The create-only action.
    pub(crate) async fn create_only(&self, ctx: &TaskContext, task: &Task) -> TaskResult {
        let resolved = match self.target(ctx, task).await? {
            Ok(r) => r,
            Err(done) => return Ok(done),
        };
        let ns = self.namespace_for(task, &resolved);
        let collection = resolved.url_path(ns.as_deref());
        let mut object = body::request_body(&task.manifest.object, ns.as_deref());
        // The CVO creates a create-only object as it creates any other: with the
        // ClusterVersion owner reference (not as controller) and the pre-merge mutations.
        if self.options.strategy == super::ApplyStrategy::Cvo {
            object = crate::merge::prepare(&object, &self.options.cluster_config)
                .map_err(|e| TaskError::failed(e.to_string(), 0))?;
        }
        let body = serde_json::to_vec(&object).map_err(|e| TaskError::failed(e.to_string(), 0))?;
        let params = PostParams {
            dry_run: self.options.dry_run,
            field_manager: Some(self.options.field_manager.clone()),
        };
        let (created, attempts) = self
            .call_with(ctx, resolved.from_run, || {
                let req = Request::new(&collection)
                    .create(&params, body.clone())
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
                        Err(RequestError::Api {
                            code: 409, reason, ..
                        }) if reason == "AlreadyExists" => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        let Some(response) = created else {
            return Ok(Done::new(Outcome::CreateOnlySkipped).attempts(attempts));
        };
        self.warnings(ctx, &response);
        if self.options.dry_run {
            return Ok(Done::new(Outcome::Created)
                .detail("would create")
                .attempts(attempts));
        }
        if task.manifest.is_crd() {
            let name = task.manifest.id.name.as_str();
            self.established(ctx, name, &collection, response.body)
                .await?;
        }
        Ok(Done::new(Outcome::Created).attempts(attempts))
    }

    /// Waits until the applied CRD `name` is Established, then serves its kinds.
    pub(super) async fn established(
        &self,
        ctx: &TaskContext,
        name: &str,
        collection: &str,
        applied: Value,
    ) -> Result<(), TaskError> {
        let started = tokio::time::Instant::now();
        let deadline = started + self.options.crd_timeout;
        let mut problem = None;
        let end = watch::watch_until(
            &self.client,
            collection,
            name,
            Some(applied),
            deadline,
            &ctx.cancel,
            |crd| match crd.map(crd_state) {
                Some(Ok(true)) => Some(Ok(crd.cloned().unwrap_or_default())),
                Some(Err(e)) => Some(Err(e)),
                Some(Ok(false)) => None,
                None => {
                    problem = Some("the CRD was deleted while waiting for it".to_string());
                    None
                }
            },
        )
        .await;
        match end {
            WatchEnd::Done(Ok(crd)) => {
                self.discovery.insert_crd(&crd);
                self.emitter.emit(EventKind::CrdEstablished {
                    task: ctx.task.clone(),
                    name: name.to_string(),
                    waited: started.elapsed(),
                });
                Ok(())
            }
            WatchEnd::Done(Err(e)) => Err(TaskError::failed(
                format!("CustomResourceDefinition {name}: {e}"),
                1,
            )),
            WatchEnd::TimedOut(_) => Err(TaskError::failed(
                format!(
                    "CustomResourceDefinition {name} not Established after {:?}{}",
                    self.options.crd_timeout,
                    problem.map(|p| format!(": {p}")).unwrap_or_default()
                ),
                1,
            )),
            WatchEnd::Cancelled => Err(TaskError::interrupted(format!(
                "stopped while waiting for CustomResourceDefinition {name} to be Established"
            ))),
            WatchEnd::Failed(e) => Err(TaskError::failed(
                format!("cannot watch CustomResourceDefinition {name}: {e}"),
                1,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strategy_switches_are_recognised() {
        let d = json!({"kind": "Deployment", "spec": {"strategy": {"type": "Recreate"}}});
        let msg = "Deployment.apps \"x\" is invalid: spec.strategy.rollingUpdate: Forbidden: \
                   may not be specified when strategy `type` is 'Recreate' (422 Invalid)";
        assert_eq!(strategy_switch(&d, msg), Some(("strategy", "Recreate")));
        assert_eq!(strategy_switch(&d, "something else"), None);
        let ds = json!({"kind": "DaemonSet", "spec": {"updateStrategy": {"type": "OnDelete"}}});
        assert_eq!(
            strategy_switch(&ds, ""),
            Some(("updateStrategy", "OnDelete"))
        );
        let rolling =
            json!({"kind": "Deployment", "spec": {"strategy": {"type": "RollingUpdate"}}});
        assert_eq!(strategy_switch(&rolling, msg), None);
    }

    fn applied(rv: &str, time: &str) -> Value {
        json!({"metadata": {"resourceVersion": rv, "managedFields": [
            {"manager": "other", "operation": "Update", "time": "2030-01-01T00:00:00Z"},
            {"manager": "minicvo", "operation": "Apply", "time": time},
        ]}})
    }

    #[test]
    fn classification_needs_a_newer_version_and_our_fresh_stamp() {
        let b = Baseline {
            resource_version: Some(100),
            server_time: Some("2026-01-01T00:00:10Z".parse().unwrap()),
        };
        let c = |rv, t| classify(&b, &applied(rv, t), "minicvo");
        assert_eq!(c("150", "2026-01-01T00:00:11Z"), Outcome::Configured);
        assert_eq!(c("150", "2026-01-01T00:00:10Z"), Outcome::Configured);
        // Someone else wrote (e.g. status) during the run; our fields are as before.
        assert_eq!(c("150", "2026-01-01T00:00:05Z"), Outcome::Unchanged);
        // Our previous run changed it in the same second this run started.
        assert_eq!(c("90", "2026-01-01T00:00:10Z"), Outcome::Unchanged);
        assert_eq!(c("100", "2025-01-01T00:00:00Z"), Outcome::Unchanged);
        // Without the list resourceVersion, the time decides; without anything, configured.
        let time_only = Baseline {
            resource_version: None,
            ..b.clone()
        };
        assert_eq!(
            classify(&time_only, &applied("1", "2026-01-01T00:00:05Z"), "minicvo"),
            Outcome::Unchanged
        );
        assert_eq!(
            classify(
                &Baseline::default(),
                &applied("1", "2026-01-01T00:00:05Z"),
                "minicvo"
            ),
            Outcome::Configured
        );
    }

    #[test]
    fn crd_states() {
        assert_eq!(crd_state(&json!({})), Ok(false));
        assert_eq!(
            crd_state(
                &json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}})
            ),
            Ok(true)
        );
        assert!(
            crd_state(&json!({"status": {"conditions": [
                {"type": "NamesAccepted", "status": "False", "message": "plural taken"}]}}))
            .unwrap_err()
            .contains("plural taken")
        );
    }
}
