//! The plan for people: stages (sets of nodes that run together), their nodes, and each node's
//! tasks in order, with counts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::plan::Plan;

/// Stages of the plan: node indices grouped by depth (how many non-empty nodes must finish
/// before them), empty spacer nodes left out.
#[must_use]
pub fn stages(plan: &Plan) -> Vec<Vec<usize>> {
    let depths = plan.graph.depths();
    let mut by_depth: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, node) in plan.graph.nodes.iter().enumerate() {
        if !node.tasks.is_empty() {
            by_depth.entry(depths[i]).or_default().push(i);
        }
    }
    by_depth.into_values().collect()
}

/// `level/component` of a node's tasks, in order of first appearance, joined by ` + `.
#[must_use]
pub fn components(plan: &Plan, tasks: &[usize]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for &t in tasks {
        let task = &plan.tasks[t];
        let c = match (&task.run_level, &task.component) {
            (Some(l), Some(c)) => format!("{l}/{c}"),
            _ => "unleveled".to_string(),
        };
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen.join(" + ")
}

/// One task's row (no line end): index right-aligned to `width`, then `change` when given
/// (`upgrade-plan`), action, object, and `file#document`.
#[must_use]
pub fn task_row(plan: &Plan, t: usize, width: usize, change: Option<&str>) -> String {
    let task = &plan.tasks[t];
    let m = &task.manifest;
    let change = change.map(|c| format!("{c:<9} ")).unwrap_or_default();
    format!(
        "    {t:>width$} {change}{:<11} {}  {}#{}",
        task.action.to_string(),
        m.id,
        m.file,
        m.document
    )
}

/// The text form.
#[must_use]
pub fn plan(plan: &Plan) -> String {
    let mut out = String::new();
    let version = plan.version.as_deref().unwrap_or("unknown version");
    let _ = writeln!(
        out,
        "Plan for {version} ({} mode, profile {}, feature set {})",
        plan.mode, plan.profile, plan.feature_set
    );
    let counts = plan
        .action_counts()
        .into_iter()
        .map(|(a, n)| format!("{n} {a}"))
        .collect::<Vec<_>>()
        .join(", ");
    let stages = stages(plan);
    let busy_nodes = plan
        .graph
        .nodes
        .iter()
        .filter(|n| !n.tasks.is_empty())
        .count();
    let _ = writeln!(
        out,
        "{} tasks ({counts}) in {busy_nodes} nodes, {} stages",
        plan.tasks.len(),
        stages.len()
    );
    let width = plan.tasks.len().to_string().len();
    for (s, nodes) in stages.iter().enumerate() {
        let levels: BTreeSet<&str> = nodes
            .iter()
            .flat_map(|&n| plan.graph.nodes[n].tasks.iter())
            .map(|&t| plan.tasks[t].run_level.as_deref().unwrap_or("-"))
            .collect();
        let tasks: usize = nodes.iter().map(|&n| plan.graph.nodes[n].tasks.len()).sum();
        let _ = writeln!(
            out,
            "\nstage {}: run-level {}: {}, {tasks} tasks",
            s + 1,
            levels.into_iter().collect::<Vec<_>>().join(", "),
            if nodes.len() == 1 {
                "1 node".to_string()
            } else {
                format!("{} nodes in parallel", nodes.len())
            },
        );
        for &n in nodes {
            let node = &plan.graph.nodes[n];
            let _ = writeln!(
                out,
                "  node {n}: {} ({} tasks)",
                components(plan, &node.tasks),
                node.tasks.len()
            );
            for &t in &node.tasks {
                let task = &plan.tasks[t];
                out.push_str(&task_row(plan, t, width, None));
                if let Some(r) = &task.skip_reason {
                    let _ = write!(out, "  ({r})");
                }
                out.push('\n');
            }
        }
    }
    out
}
