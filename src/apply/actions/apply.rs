//! The server-side apply action ([`ServerSideApply`]) and the create-only action
//! ([`CreateOnly`]).
//!
//! - apply (`--apply-strategy server-side`): one server-side apply PATCH (`force`, the run's field manager). 201 means
//!   created; otherwise the response is classified against the run's [`Baseline`] (no extra
//!   request). An unchanged object is not written by the server at all (SSA is a no-op when
//!   nothing changes), so its resourceVersion stays.
//! - create-only: a GET, and a POST only when the object is absent (the CVO's order: an
//!   existing create-only object is never sent to the server, so a manifest the server would
//!   now reject, e.g. against a newer CRD's validation, leaves it alone and succeeds); a 409
//!   AlreadyExists (created between the two) also means "leave it alone".
//! - dry run: the live object is read first, the PATCH is sent with `dryRun=All`, and the
//!   two are compared, so the report says which fields would change.
//! - CustomResourceDefinition: the written object is handed back, for the CRD wait
//!   ([`super::crd_wait`]) the runner runs next.
//!
//! The default strategy's apply is [`super::cvo`]; create-only is the same in both
//! strategies, except that the `cvo` one prepares the object as the CVO does.
//!
//! [`Baseline`]: super::Baseline

use std::sync::Arc;

use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use serde_json::Value;

use super::Baseline;
use super::handle::{ClusterHandle, WriteResult, WriteTarget, dry_run_outcome};
use crate::apply::engine::{Done, TaskContext, TaskError};
use crate::apply::events::Outcome;
use crate::cluster::body;
use crate::cluster::request::RequestError;
use crate::plan::Task;

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

/// The apply action of the `server-side` strategy.
pub struct ServerSideApply {
    cluster: Arc<ClusterHandle>,
}

impl ServerSideApply {
    /// The action, over `cluster`.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        ServerSideApply { cluster }
    }

    /// The apply action: one forced server-side apply of `target`.
    pub(crate) async fn apply(
        &self,
        ctx: &TaskContext,
        task: &Task,
        target: WriteTarget,
    ) -> WriteResult {
        let c = &*self.cluster;
        let WriteTarget {
            fresh_kind,
            collection,
            body,
        } = target;
        let name = task.manifest.id.name.as_str();
        let mut params = PatchParams::apply(&c.options.field_manager).force();
        if c.options.dry_run {
            params = params.dry_run();
        }
        let build = || {
            Request::new(&collection)
                .patch(name, &params, &Patch::Apply(&body))
                .map_err(|e| RequestError::Build(e.to_string()))
        };
        if c.options.dry_run {
            let (live, _) = c.get_live(ctx, fresh_kind, &collection, name).await?;
            let (response, attempts) = c.call(ctx, fresh_kind, build).await?;
            c.warnings(ctx, &response);
            let done = dry_run_outcome(live.as_ref(), &response.body).attempts(attempts);
            return Ok((done, None));
        }
        let (response, attempts) = match c.call(ctx, fresh_kind, build).await {
            Err(e) if strategy_switch(&task.manifest.object, &e.message).is_some() => {
                let attempts = e.attempts
                    + self
                        .clear_rolling_update(ctx, &collection, name, &task.manifest.object)
                        .await?;
                let (r, more) = c.call(ctx, fresh_kind, build).await?;
                (r, attempts + more)
            }
            r => r?,
        };
        c.warnings(ctx, &response);
        let outcome = if response.status == 201 {
            Outcome::Created
        } else {
            classify(&c.baseline, &response.body, &c.options.field_manager)
        };
        Ok((Done::new(outcome).attempts(attempts), Some(response.body)))
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
            field_manager: Some(self.cluster.options.field_manager.clone()),
            ..PatchParams::default()
        };
        let (_, attempts) = self
            .cluster
            .call(ctx, false, || {
                Request::new(collection)
                    .patch(name, &params, &Patch::Merge(&patch))
                    .map_err(|e| RequestError::Build(e.to_string()))
            })
            .await?;
        Ok(attempts)
    }
}

/// The create-only action, in both strategies.
pub struct CreateOnly {
    cluster: Arc<ClusterHandle>,
}

impl CreateOnly {
    /// The action, over `cluster`.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        CreateOnly { cluster }
    }

    /// The create-only action: a GET of `target`, then, when it is absent, one POST; an
    /// existing object (or a 409 AlreadyExists) is left alone.
    pub(crate) async fn create(&self, ctx: &TaskContext, target: WriteTarget) -> WriteResult {
        let c = &*self.cluster;
        let WriteTarget {
            fresh_kind,
            collection,
            body: mut object,
        } = target;
        // The CVO reads first and writes nothing when the object exists (cvo-apply.md §1.8
        // step 5, §1.9): the API server validates a POST before it finds the name taken, so
        // a POST of an object that exists could fail (422) where the CVO succeeds.
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (live, get_tries) = c.get_live(ctx, fresh_kind, &collection, &name).await?;
        if live.is_some() {
            return Ok((
                Done::new(Outcome::CreateOnlySkipped).attempts(get_tries),
                None,
            ));
        }
        // The CVO creates a create-only object as it creates any other: with the
        // ClusterVersion owner reference (not as controller) and the pre-merge mutations.
        if c.options.strategy == super::ApplyStrategy::Cvo {
            let config = c.config_for(ctx, &object).await?;
            object = crate::merge::prepare(&object, &config)
                .map_err(|e| TaskError::failed(e.to_string(), 0))?;
        }
        let body = serde_json::to_vec(&object).map_err(|e| TaskError::failed(e.to_string(), 0))?;
        let params = PostParams {
            dry_run: c.options.dry_run,
            field_manager: Some(c.options.field_manager.clone()),
        };
        let already_exists = |e: &RequestError| matches!(e, RequestError::Api { code: 409, reason, .. } if reason == "AlreadyExists");
        let (created, attempts) = c
            .send_unless(ctx, fresh_kind, already_exists, || {
                Request::new(&collection)
                    .create(&params, body.clone())
                    .map_err(|e| RequestError::Build(e.to_string()))
            })
            .await?;
        let attempts = attempts.max(get_tries);
        let Some(response) = created else {
            return Ok((
                Done::new(Outcome::CreateOnlySkipped).attempts(attempts),
                None,
            ));
        };
        c.warnings(ctx, &response);
        if c.options.dry_run {
            let done = Done::new(Outcome::Created).detail("would create");
            return Ok((done.attempts(attempts), None));
        }
        Ok((
            Done::new(Outcome::Created).attempts(attempts),
            Some(response.body),
        ))
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
}
