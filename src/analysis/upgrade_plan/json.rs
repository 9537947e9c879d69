//! The upgrade plan as the `UpgradePlan` JSON document (documented in `docs/analysis.md`).

use serde_json::{Value, json};

use super::{Entry, UpgradePlan};
use crate::output::API_VERSION;

fn entry(up: &UpgradePlan, e: &Entry, diff: bool) -> Value {
    let new = e.placement.as_ref().map(|p| {
        let t = &up.plan.tasks[p.task];
        json!({
            "task": p.task,
            "file": t.manifest.path(),
            "document": t.manifest.document,
            "action": t.action.to_string(),
            "runLevel": p.run_level,
            "component": p.component,
            "stage": p.stage,
            "node": p.node,
            "position": p.position,
        })
    });
    let old = e.old.as_ref().map(|o| {
        let key = crate::plan::breaks::level_and_component(&o.file);
        json!({
            "file": o.path(),
            "document": o.document,
            "action": crate::plan::action_for(o).to_string(),
            "runLevel": key.as_ref().map(|k| k.0.clone()),
            "component": key.map(|k| k.1),
        })
    });
    let mut v = json!({
        "change": e.change.name(),
        "group": e.id.group,
        "kind": e.id.kind,
        "namespace": e.id.namespace,
        "name": e.id.name,
        "new": new,
        "old": old,
    });
    if !e.not_rolled_out.is_empty() {
        v["notRolledOut"] = e
            .not_rolled_out
            .iter()
            .map(|k| json!({"path": k.path, "rule": k.rule}))
            .collect();
    }
    if diff {
        let d = up.diff(e);
        if !d.is_empty() {
            v["diff"] = json!(d);
        }
    }
    v
}

/// The JSON document. `diff` adds a `diff` field (unified diff of the YAML) to updated objects.
#[must_use]
pub fn json(up: &UpgradePlan, diff: bool) -> Value {
    let summary: serde_json::Map<String, Value> = up
        .counts()
        .into_iter()
        .map(|(c, n)| (c.name().to_string(), json!(n)))
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "UpgradePlan",
        "old": {"path": up.old_root, "version": up.old_version},
        "new": {"path": up.new_root, "version": up.plan.version},
        "mode": up.plan.mode.to_string(),
        "profile": up.plan.profile,
        "featureSet": up.plan.feature_set,
        "summary": summary,
        "objects": up.entries.iter().map(|e| entry(up, e, diff)).collect::<Vec<_>>(),
        "nodes": crate::output::json::nodes(&up.plan),
        "edges": up.plan.graph.edges(),
    })
}
