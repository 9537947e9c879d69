//! The plan's graph in Graphviz DOT: one box per node with its run-level, component and tasks.

use std::fmt::Write as _;

use crate::plan::Plan;

/// The DOT text of the plan's graph. Empty spacer nodes are drawn as points.
#[must_use]
pub fn plan(plan: &Plan) -> String {
    let mut out =
        String::from("digraph plan {\n  rankdir=TB;\n  node [shape=box fontname=\"monospace\"];\n");
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
        let mut label = format!("{} ({} tasks)", escape(&head), node.tasks.len());
        for &t in &node.tasks {
            let task = &plan.tasks[t];
            let _ = write!(
                label,
                "\\l{} {} {}",
                task.action,
                escape(&task.manifest.id.to_string()),
                escape(&task.manifest.file)
            );
        }
        label.push_str("\\l");
        let _ = writeln!(out, "  n{i} [label=\"{label}\"];");
    }
    for [a, b] in plan.graph.edges() {
        let _ = writeln!(out, "  n{a} -> n{b};");
    }
    out.push_str("}\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
