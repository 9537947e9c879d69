//! The plan's graph in Graphviz DOT: one box per node with its run-level, component and tasks.
//! [`graph`] is the one DOT writer; `plan` and `upgrade-plan` differ only in their boxes.

use std::fmt::Write as _;

use crate::plan::Plan;

/// The DOT text of the plan's graph. Empty spacer nodes are drawn as points.
#[must_use]
pub fn plan(plan: &Plan) -> String {
    graph(
        plan,
        "digraph plan {\n  rankdir=TB;\n  node [shape=box fontname=\"monospace\"];\n",
        |_, tasks| {
            let mut label = format!("{} ({} tasks)", escape(&head(plan, tasks)), tasks.len());
            for &t in tasks {
                let task = &plan.tasks[t];
                let _ = write!(
                    label,
                    "\\l{} {} {}",
                    task.action,
                    escape(&task.manifest.id.to_string()),
                    escape(&task.manifest.file)
                );
            }
            format!("label=\"{label}\\l\"")
        },
        "",
    )
}

/// The DOT text of a plan's graph: `preamble` (the `digraph` line and defaults), one line per
/// node (a point for an empty spacer node, else `[attributes]` from `node_box`, given the
/// node index and its tasks), the edges in the graph's order, `extra` lines, and the end.
#[must_use]
pub fn graph(
    plan: &Plan,
    preamble: &str,
    mut node_box: impl FnMut(usize, &[usize]) -> String,
    extra: &str,
) -> String {
    let mut out = String::from(preamble);
    for (i, node) in plan.graph.nodes.iter().enumerate() {
        if node.tasks.is_empty() {
            let _ = writeln!(out, "  n{i} [shape=point label=\"\"];");
        } else {
            let _ = writeln!(out, "  n{i} [{}];", node_box(i, &node.tasks));
        }
    }
    for [a, b] in plan.graph.edges() {
        let _ = writeln!(out, "  n{a} -> n{b};");
    }
    out.push_str(extra);
    out.push_str("}\n");
    out
}

/// The head of a node's box: the run-level and component of its first task, or `unleveled`.
#[must_use]
pub fn head(plan: &Plan, tasks: &[usize]) -> String {
    let first = &plan.tasks[tasks[0]];
    match (&first.run_level, &first.component) {
        (Some(l), Some(c)) => format!("{l} {c}"),
        _ => "unleveled".to_string(),
    }
}

/// `s` escaped for a double-quoted DOT string.
#[must_use]
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
