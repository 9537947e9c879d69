//! Where a task sits in a plan (stage, node, position in the node) and which tasks are
//! guaranteed to finish before others start.

use serde::Serialize;

use crate::output::text::stages;
use crate::plan::Plan;

/// A task's place in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Task index in load order.
    pub task: usize,
    /// Run-level parsed from the file name.
    pub run_level: Option<String>,
    /// Component parsed from the file name.
    pub component: Option<String>,
    /// Stage (1-based), as `minicvo plan` numbers them: nodes grouped by how many non-empty
    /// nodes must finish before them.
    pub stage: usize,
    /// Graph node running the task.
    pub node: usize,
    /// Position of the task inside its node (0-based); tasks of one node run in this order.
    pub position: usize,
}

/// Precomputed placement and ordering facts of one plan.
#[derive(Debug, Clone)]
pub struct Placements {
    stage_of_node: Vec<usize>,
}

impl Placements {
    /// Computes the facts for a plan.
    #[must_use]
    pub fn new(plan: &Plan) -> Self {
        let mut stage_of_node = vec![0; plan.graph.nodes.len()];
        for (s, nodes) in stages(plan).iter().enumerate() {
            for &n in nodes {
                stage_of_node[n] = s + 1;
            }
        }
        Placements { stage_of_node }
    }

    /// The placement of task `task` of `plan`.
    #[must_use]
    pub fn of(&self, plan: &Plan, task: usize) -> Placement {
        let t = &plan.tasks[task];
        let node = plan.node_of_task()[task];
        Placement {
            task,
            run_level: t.run_level.clone(),
            component: t.component.clone(),
            stage: self.stage_of_node.get(node).copied().unwrap_or(0),
            node,
            position: plan.position_of_task()[task],
        }
    }

    /// Whether task `a` always finishes before task `b` starts. When it does not, `a` can run
    /// after `b` or at the same time.
    #[must_use]
    pub fn runs_before(&self, plan: &Plan, a: usize, b: usize) -> bool {
        plan.runs_before(a, b)
    }

    /// Whether `a` and `b` can run at the same time (neither always finishes first).
    #[must_use]
    pub fn parallel(&self, plan: &Plan, a: usize, b: usize) -> bool {
        !self.runs_before(plan, a, b) && !self.runs_before(plan, b, a)
    }
}
