//! The plan as a stable JSON document (`kind: Plan`, documented in the README).

use serde_json::{Value, json};

use super::API_VERSION;
use crate::plan::Plan;

/// The plan's JSON form.
#[must_use]
pub fn plan(plan: &Plan) -> Value {
    let tasks: Vec<Value> = plan
        .tasks
        .iter()
        .map(|t| {
            let m = &t.manifest;
            let mut v = json!({
                "id": t.id,
                "file": m.file,
                "document": m.document,
                "runLevel": t.run_level,
                "component": t.component,
                "apiVersion": m.api_version,
                "group": m.id.group,
                "kind": m.id.kind,
                "namespace": m.id.namespace,
                "name": m.id.name,
                "action": t.action.to_string(),
            });
            if let Some(r) = &t.skip_reason {
                v["skipReason"] = json!(r);
            }
            v
        })
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "Plan",
        "version": plan.version,
        "mode": plan.mode.to_string(),
        "profile": plan.profile,
        "featureSet": plan.feature_set,
        "tasks": tasks,
        "nodes": nodes(plan),
        "edges": plan.graph.edges(),
    })
}

/// The `nodes` of a plan's JSON form (`plan` and `upgrade-plan`): each node's index and tasks.
#[must_use]
pub fn nodes(plan: &Plan) -> Vec<Value> {
    plan.graph
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"id": i, "tasks": n.tasks}))
        .collect()
}
