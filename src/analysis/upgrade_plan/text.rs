//! The upgrade plan for people: a summary, then NEW's plan stage by stage and node by node
//! with each task's change, then the objects OLD had that NEW leaves behind.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{Change, UpgradePlan};
use crate::output::text::{components, stages, task_row};

/// What to show.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Print the unified diff under each updated object.
    pub diff: bool,
    /// Leave unchanged objects out of the listing (they stay in the counts).
    pub changed_only: bool,
}

/// The summary line: every change with its count.
#[must_use]
pub fn summary(up: &UpgradePlan) -> String {
    let parts: Vec<String> = up
        .counts()
        .into_iter()
        .map(|(c, n)| {
            let kept = up
                .entries
                .iter()
                .filter(|e| e.change == c && c == Change::Unchanged && !e.not_rolled_out.is_empty())
                .count();
            if kept > 0 {
                format!("{n} {c} ({kept} not rolled out)")
            } else {
                format!("{n} {c}")
            }
        })
        .collect();
    format!("{} objects: {}", up.entries.len(), parts.join(", "))
}

/// The text form.
#[must_use]
pub fn text(up: &UpgradePlan, options: Options) -> String {
    let plan = &up.plan;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Upgrade plan {} -> {} ({} mode, profile {}, feature set {})",
        up.old_version.as_deref().unwrap_or(&up.old_root),
        plan.version.as_deref().unwrap_or(&up.new_root),
        plan.mode,
        plan.profile,
        plan.feature_set
    );
    let _ = writeln!(out, "{}", summary(up));
    let entry_of_task: Vec<usize> = {
        let mut v = vec![usize::MAX; plan.tasks.len()];
        for (i, e) in up.entries.iter().enumerate() {
            if let Some(p) = &e.placement {
                v[p.task] = i;
            }
        }
        v
    };
    let width = plan.tasks.len().to_string().len();
    let shown = |t: usize| {
        let e = &up.entries[entry_of_task[t]];
        !options.changed_only || e.change != Change::Unchanged || !e.not_rolled_out.is_empty()
    };
    for (s, nodes) in stages(plan).iter().enumerate() {
        let tasks: Vec<usize> = nodes
            .iter()
            .flat_map(|&n| plan.graph.nodes[n].tasks.iter().copied())
            .filter(|&t| shown(t))
            .collect();
        if tasks.is_empty() {
            continue;
        }
        let levels: BTreeSet<&str> = tasks
            .iter()
            .map(|&t| plan.tasks[t].run_level.as_deref().unwrap_or("-"))
            .collect();
        let _ = writeln!(
            out,
            "\nstage {}: run-level {}",
            s + 1,
            levels.into_iter().collect::<Vec<_>>().join(", ")
        );
        for &n in nodes {
            let node_tasks: Vec<usize> = plan.graph.nodes[n]
                .tasks
                .iter()
                .copied()
                .filter(|&t| shown(t))
                .collect();
            if node_tasks.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "  node {n}: {}",
                components(plan, &plan.graph.nodes[n].tasks)
            );
            for t in node_tasks {
                let e = &up.entries[entry_of_task[t]];
                let change = if e.change == Change::Unchanged && !e.not_rolled_out.is_empty() {
                    "unchanged (not rolled out)"
                } else {
                    e.change.name()
                };
                let _ = writeln!(out, "{}", task_row(plan, t, width, Some(change)));
                for k in &e.not_rolled_out {
                    if k.path.is_empty() {
                        let _ = writeln!(out, "        not rolled out: {}", k.rule);
                    } else {
                        let _ = writeln!(out, "        not rolled out: {}: {}", k.path, k.rule);
                    }
                }
                if options.diff && e.change == Change::Updated {
                    for line in up.diff(e).lines() {
                        let _ = writeln!(out, "        {line}");
                    }
                }
            }
        }
    }
    let left: Vec<_> = up
        .entries
        .iter()
        .filter(|e| e.placement.is_none())
        .collect();
    if !left.is_empty() {
        let _ = writeln!(
            out,
            "\nnot in NEW (orphaned: left on the cluster, the CVO never removes it; tombstone-dropped: already deleted):"
        );
        for e in left {
            let Some(o) = &e.old else { continue };
            let level = crate::plan::breaks::level_and_component(&o.file)
                .map_or_else(|| "-".to_string(), |k| k.0);
            let _ = writeln!(
                out,
                "    {:<17} {}  old {}#{} (run-level {level})",
                e.change.name(),
                e.id,
                o.file,
                o.document
            );
        }
    }
    out
}
