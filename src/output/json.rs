//! The plan as a stable JSON document (`kind: Plan`, documented in the README).

use serde::ser::{Serialize, SerializeMap as _, SerializeSeq as _, Serializer};
use serde_json::{Value, json};

use super::API_VERSION;
use crate::plan::{Plan, Task};

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

/// Writes [`plan`]'s JSON, pretty-printed, to `w`: the same bytes as
/// `serde_json::to_writer_pretty(w, &plan(p))`, without building the `Value` tree first (for
/// 10,000 tasks, building and freeing that tree was a quarter of `minicvo plan -o json`).
///
/// # Errors
/// Errors of `w`.
pub fn write_plan<W: std::io::Write>(p: &Plan, w: W) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(w, &PlanDoc(p))
}

/// [`plan`]'s document, serialized field by field in the same order.
struct PlanDoc<'a>(&'a Plan);

impl Serialize for PlanDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut m = s.serialize_map(Some(9))?;
        m.serialize_entry("apiVersion", API_VERSION)?;
        m.serialize_entry("kind", "Plan")?;
        m.serialize_entry("version", &p.version)?;
        m.serialize_entry("mode", &p.mode.to_string())?;
        m.serialize_entry("profile", &p.profile)?;
        m.serialize_entry("featureSet", &p.feature_set)?;
        m.serialize_entry("tasks", &TasksDoc(&p.tasks))?;
        m.serialize_entry("nodes", &nodes(p))?;
        m.serialize_entry("edges", &p.graph.edges())?;
        m.end()
    }
}

struct TasksDoc<'a>(&'a [Task]);

impl Serialize for TasksDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for t in self.0 {
            seq.serialize_element(&TaskDoc(t))?;
        }
        seq.end()
    }
}

struct TaskDoc<'a>(&'a Task);

impl Serialize for TaskDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let m = &t.manifest;
        let mut o = s.serialize_map(None)?;
        o.serialize_entry("id", &t.id)?;
        o.serialize_entry("file", &m.file)?;
        o.serialize_entry("document", &m.document)?;
        o.serialize_entry("runLevel", &t.run_level)?;
        o.serialize_entry("component", &t.component)?;
        o.serialize_entry("apiVersion", &m.api_version)?;
        o.serialize_entry("group", &m.id.group)?;
        o.serialize_entry("kind", &m.id.kind)?;
        o.serialize_entry("namespace", &m.id.namespace)?;
        o.serialize_entry("name", &m.id.name)?;
        o.serialize_entry("action", &t.action.to_string())?;
        if let Some(r) = &t.skip_reason {
            o.serialize_entry("skipReason", r)?;
        }
        o.end()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::payload::{LoadOptions, load};
    use crate::plan::{Mode, from_payload};

    /// The streamed document is byte for byte the `Value` one, in every mode, for payloads
    /// with skipped tasks (skipReason), namespaced and cluster-scoped objects.
    #[test]
    fn write_plan_is_the_value_document() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("payload");
        let mut checked = 0;
        for dir in ["old", "new", "new-buggy"] {
            for mode in [Mode::Updating, Mode::Initializing, Mode::Reconciling] {
                let payload = load(&root.join(dir), &LoadOptions::default()).expect("loads");
                let filters = crate::filter::Filters::default();
                let p = from_payload(payload, &filters, mode, 3);
                assert!(!p.tasks.is_empty());
                let want = serde_json::to_string_pretty(&plan(&p)).expect("serializes");
                let mut got = Vec::new();
                write_plan(&p, &mut got).expect("writes");
                assert_eq!(String::from_utf8(got).expect("utf-8"), want, "{dir} {mode}");
                checked += 1;
            }
        }
        assert_eq!(checked, 9);
    }
}
