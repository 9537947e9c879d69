//! The upgrade plan in Graphviz DOT: NEW's graph with every task prefixed by its change,
//! nodes with changes filled, and one extra box listing what NEW leaves behind. Written by the
//! plan's DOT writer ([`crate::output::dot::graph`]).

use std::fmt::Write as _;

use super::{Change, UpgradePlan};
use crate::output::dot::{escape, graph, head};

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
    let left: Vec<String> = up
        .entries
        .iter()
        .filter(|e| e.placement.is_none())
        .map(|e| format!("{} {}", e.change.name(), escape(&e.id.to_string())))
        .collect();
    let extra = if left.is_empty() {
        String::new()
    } else {
        format!(
            "  left [label=\"not in NEW\\l{}\\l\" fillcolor=lightpink];\n",
            left.join("\\l")
        )
    };
    graph(
        plan,
        "digraph upgrade {\n  rankdir=TB;\n  node [shape=box fontname=\"monospace\" style=filled fillcolor=white];\n",
        |_, tasks| {
            let mut label = escape(&head(plan, tasks));
            let mut fill = "white";
            for &t in tasks {
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
            format!("label=\"{label}\\l\" fillcolor={fill}")
        },
        &extra,
    )
}
