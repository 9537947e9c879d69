//! The live diff as text for people and as the `LiveDiff` JSON document (documented in
//! `docs/analysis.md`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Change, DiffReport};
use crate::output::API_VERSION;
use crate::plan::Plan;

/// The summary line: every change with its count.
#[must_use]
pub fn summary(report: &DiffReport) -> String {
    let parts: Vec<String> = report
        .counts()
        .into_iter()
        .map(|(c, n)| format!("{n} {}", c.name()))
        .collect();
    format!("{} tasks: {}", report.entries.len(), parts.join(", "))
}

/// The text form: the summary, then one line per task (`change object file#document`, and
/// the note) with its diff indented below. `changed_only` leaves out unchanged and skipped
/// tasks.
#[must_use]
pub fn text(plan: &Plan, report: &DiffReport, changed_only: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", summary(report));
    for e in &report.entries {
        if changed_only && matches!(e.change, Change::Unchanged | Change::Skip) {
            continue;
        }
        let m = &plan.tasks[e.task].manifest;
        let _ = write!(
            out,
            "{:<9} {}  {}#{}",
            e.change.name(),
            m.id,
            m.file,
            m.document
        );
        if let Some(n) = &e.note {
            let _ = write!(out, "  ({n})");
        }
        out.push('\n');
        for line in e.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

/// The `LiveDiff` JSON document.
#[must_use]
pub fn json(plan: &Plan, report: &DiffReport) -> Value {
    let summary: serde_json::Map<String, Value> = report
        .counts()
        .into_iter()
        .map(|(c, n)| (c.name().to_string(), json!(n)))
        .collect();
    let objects: Vec<Value> = report
        .entries
        .iter()
        .map(|e| {
            let t = &plan.tasks[e.task];
            let m = &t.manifest;
            json!({
                "task": e.task,
                "change": e.change.name(),
                "action": t.action.to_string(),
                "file": m.path(),
                "document": m.document,
                "group": m.id.group,
                "kind": m.id.kind,
                "namespace": m.id.namespace,
                "name": m.id.name,
                "note": e.note,
                "diff": e.diff,
            })
        })
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "LiveDiff",
        "version": plan.version,
        "profile": plan.profile,
        "featureSet": plan.feature_set,
        "changes": report.modifies(),
        "summary": summary,
        "objects": objects,
    })
}
