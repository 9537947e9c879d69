//! The upgrade plan in Graphviz DOT: NEW's graph with every task prefixed by its change,
//! nodes with changes filled, and one extra box listing what NEW leaves behind.

use std::fmt::Write as _;

use super::{Change, UpgradePlan};

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn color(change: Change) -> &'static str {
    match change {
        Change::Created => "palegreen",
        Change::Updated => "lightyellow",
        Change::Deleted | Change::Orphaned => "lightpink",
        Change::Unchanged | Change::TombstoneDropped => "white",
    }
}

/// The DOT text.
#[must_use]
pub fn dot(up: &UpgradePlan) -> String {
    let plan = &up.plan;
    let mut change_of = vec![Change::Unchanged; plan.tasks.len()];
    for e in &up.entries {
        if let Some(p) = &e.placement {
            change_of[p.task] = e.change;
        }
    }
    let mut out = String::from(
        "digraph upgrade {\n  rankdir=TB;\n  node [shape=box fontname=\"monospace\" style=filled fillcolor=white];\n",
    );
    for (i, node) in plan.graph.nodes.iter().enumerate() {
        if node.tasks.is_empty() {
            let _ = writeln!(out, "  n{i} [shape=point label=\"\"];");
            continue;
        }
        let first = &plan.tasks[node.tasks[0]];
        let head = match (&first.run_level, &first.component) {
            (Some(l), Some(c)) => format!("{l} {c}"),
            _ => "unleveled".to_string(),
        };
        let mut label = escape(&head);
        let mut fill = "white";
        for &t in &node.tasks {
            let task = &plan.tasks[t];
            let c = change_of[t];
            if c != Change::Unchanged && fill == "white" {
                fill = color(c);
            }
            let _ = write!(
                label,
                "\\l{} {} {}",
                c.name(),
                task.action,
                escape(&task.manifest.id.to_string())
            );
        }
        label.push_str("\\l");
        let _ = writeln!(out, "  n{i} [label=\"{label}\" fillcolor={fill}];");
    }
    for [a, b] in plan.graph.edges() {
        let _ = writeln!(out, "  n{a} -> n{b};");
    }
    let left: Vec<String> = up
        .entries
        .iter()
        .filter(|e| e.placement.is_none())
        .map(|e| format!("{} {}", e.change.name(), escape(&e.id.to_string())))
        .collect();
    if !left.is_empty() {
        let _ = writeln!(
            out,
            "  left [label=\"not in NEW\\l{}\\l\" fillcolor=lightpink];",
            left.join("\\l")
        );
    }
    out.push_str("}\n");
    out
}
