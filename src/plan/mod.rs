//! The CVO's task graph for a loaded payload: task order is load order, Jobs split the
//! sequence into barriers, and the mode's break function cuts it into parallel nodes.
//!
//! | mode | break function | default parallelism |
//! |---|---|---|
//! | updating | by number and component: run-levels are barriers | 16 |
//! | initializing | flattened: every component block in parallel | number of nodes |
//! | reconciling | flattened, permuted with Go's `math/rand` seeded by `attempt / 8`, rotated by `attempt % 8` | 2 |

pub mod breaks;
mod go_rand;
mod go_rand_table;
pub mod graph;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

pub use graph::{Node, TaskGraph};

use crate::filter::Filters;
use crate::manifest::Manifest;
use crate::payload::Payload;

/// How the CVO walks the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// An update to a new payload: run-levels in order, components in parallel.
    #[default]
    Updating,
    /// The first install: everything flattened and parallel.
    Initializing,
    /// Re-applying the current payload: flattened and permuted by the attempt number.
    Reconciling,
}

impl Mode {
    /// The CVO's number of parallel workers for this mode.
    #[must_use]
    pub fn default_parallelism(self, nodes: usize) -> usize {
        match self {
            Mode::Updating => 16,
            Mode::Initializing => nodes.max(1),
            Mode::Reconciling => 2,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Updating => "updating",
            Mode::Initializing => "initializing",
            Mode::Reconciling => "reconciling",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "updating" => Ok(Mode::Updating),
            "initializing" => Ok(Mode::Initializing),
            "reconciling" => Ok(Mode::Reconciling),
            other => Err(format!(
                "unknown mode {other:?}, expected updating, initializing or reconciling"
            )),
        }
    }
}

/// What a task does with its object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Server-side apply.
    Apply,
    /// Create when absent, leave alone otherwise.
    CreateOnly,
    /// Delete (the delete annotation). Issued only in updating mode.
    Delete,
    /// A ClusterOperator: precreated when missing, then waited on until it reports the
    /// manifest's versions.
    Wait,
    /// Excluded at apply time (capability or override): counted, never run.
    Skip,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Apply => "apply",
            Action::CreateOnly => "create-only",
            Action::Delete => "delete",
            Action::Wait => "wait",
            Action::Skip => "skip",
        })
    }
}

/// One task: a manifest, where it sits, and what to do.
#[derive(Debug, Clone)]
pub struct Task {
    /// Index in load order, from 0.
    pub id: usize,
    /// The manifest.
    pub manifest: Manifest,
    /// Run-level from the file name, as a string (`None` when the name does not match).
    pub run_level: Option<String>,
    /// Component from the file name.
    pub component: Option<String>,
    /// What the task does.
    pub action: Action,
    /// Why an apply-time filter skips it.
    pub skip_reason: Option<String>,
}

/// A computed plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Release version, when known.
    pub version: Option<String>,
    /// Mode the graph was built for.
    pub mode: Mode,
    /// Attempt number (reconciling mode's permutation input).
    pub attempt: usize,
    /// Cluster profile.
    pub profile: String,
    /// Feature set in force.
    pub feature_set: String,
    /// Tasks in load order.
    pub tasks: Vec<Task>,
    /// The graph over task indices.
    pub graph: TaskGraph,
    /// Where each task runs and which nodes precede which, built once on first use (the
    /// graph must not change after that).
    index: std::sync::OnceLock<PlanIndex>,
}

/// The plan's precedence index: node and position of every task, and the ancestors of every
/// node (a bitset per node).
#[derive(Debug, Clone)]
struct PlanIndex {
    node_of: Vec<usize>,
    position: Vec<usize>,
    ancestors: Vec<Vec<u64>>,
}

/// The action a manifest gets, before apply-time filters.
#[must_use]
pub fn action_for(m: &Manifest) -> Action {
    if m.is_cluster_operator() {
        Action::Wait
    } else if m.is_delete() {
        Action::Delete
    } else if m.is_create_only() {
        Action::CreateOnly
    } else {
        Action::Apply
    }
}

/// Builds the plan of a payload's included manifests, consuming the payload (no copies).
#[must_use]
pub fn from_payload(payload: Payload, filters: &Filters, mode: Mode, attempt: usize) -> Plan {
    let version = payload.version();
    build_from(version, payload.manifests, filters, mode, attempt)
}

/// Builds the plan of a payload's included manifests (clones them, the objects shared, not
/// copied; [`from_payload`] takes them over).
#[must_use]
pub fn build(payload: &Payload, filters: &Filters, mode: Mode, attempt: usize) -> Plan {
    build_from(
        payload.version(),
        payload.manifests.clone(),
        filters,
        mode,
        attempt,
    )
}

/// Builds a plan from manifests already in load order.
#[must_use]
pub fn build_from(
    version: Option<String>,
    manifests: Vec<Manifest>,
    filters: &Filters,
    mode: Mode,
    attempt: usize,
) -> Plan {
    let tasks: Vec<Task> = manifests
        .into_iter()
        .enumerate()
        .map(|(id, manifest)| {
            let key = breaks::level_and_component(&manifest.file);
            let (action, skip_reason) = match filters.include_at_apply(&manifest) {
                Ok(()) => (action_for(&manifest), None),
                Err(reason) => (Action::Skip, Some(reason)),
            };
            Task {
                id,
                run_level: key.as_ref().map(|k| k.0.clone()),
                component: key.map(|k| k.1),
                manifest,
                action,
                skip_reason,
            }
        })
        .collect();
    let graph = build_graph_keyed(&tasks, mode, attempt);
    Plan {
        version,
        mode,
        attempt,
        profile: filters.profile.clone(),
        feature_set: filters.effective_feature_set().to_string(),
        tasks,
        graph,
        index: std::sync::OnceLock::new(),
    }
}

/// The graph alone, for tasks in load order.
#[must_use]
pub fn build_graph(tasks: &[Task], mode: Mode, attempt: usize) -> TaskGraph {
    build_graph_keyed(tasks, mode, attempt)
}

fn build_graph_keyed(tasks: &[Task], mode: Mode, attempt: usize) -> TaskGraph {
    let key: Vec<Option<(String, String)>> = tasks
        .iter()
        .map(|t| t.run_level.clone().zip(t.component.clone()))
        .collect();
    let mut graph = TaskGraph::new((0..tasks.len()).collect());
    graph.split(|t| tasks[t].manifest.is_job());
    match mode {
        Mode::Updating => graph.parallelize(|ts| breaks::by_number_and_component(ts, &key)),
        Mode::Initializing => {
            graph.parallelize(|ts| breaks::flatten_by_number_and_component(ts, &key));
        }
        Mode::Reconciling => {
            #[allow(clippy::cast_possible_wrap)]
            let mut rng = go_rand::GoRand::new((attempt / 8) as i64);
            graph.parallelize(|ts| {
                let mut steps = breaks::flatten_by_number_and_component(ts, &key);
                breaks::permute_order(&mut steps, &mut rng);
                breaks::shift_order(&mut steps, attempt % 8, 8);
                steps
            });
        }
    }
    graph
}

impl Plan {
    fn index(&self) -> &PlanIndex {
        self.index.get_or_init(|| {
            let mut node_of = vec![usize::MAX; self.tasks.len()];
            let mut position = vec![0; self.tasks.len()];
            for (n, node) in self.graph.nodes.iter().enumerate() {
                for (p, &t) in node.tasks.iter().enumerate() {
                    node_of[t] = n;
                    position[t] = p;
                }
            }
            PlanIndex {
                node_of,
                position,
                ancestors: self.graph.ancestors(),
            }
        })
    }

    /// For every task, the node that runs it (`usize::MAX` for a task in no node).
    #[must_use]
    pub fn node_of_task(&self) -> &[usize] {
        &self.index().node_of
    }

    /// For every task, its position inside its node (tasks of one node run in this order).
    #[must_use]
    pub fn position_of_task(&self) -> &[usize] {
        &self.index().position
    }

    /// Whether task `a` always finishes before task `b` starts (same node and earlier, or
    /// `a`'s node is an ancestor of `b`'s). The index behind it is built once per plan.
    #[must_use]
    pub fn runs_before(&self, a: usize, b: usize) -> bool {
        let ix = self.index();
        let (na, nb) = (ix.node_of[a], ix.node_of[b]);
        if na == usize::MAX || nb == usize::MAX {
            return false;
        }
        if na == nb {
            return ix.position[a] < ix.position[b];
        }
        ix.ancestors[nb][na / 64] & (1 << (na % 64)) != 0
    }

    /// Counts of tasks per action.
    #[must_use]
    pub fn action_counts(&self) -> std::collections::BTreeMap<String, usize> {
        let mut c = std::collections::BTreeMap::new();
        for t in &self.tasks {
            *c.entry(t.action.to_string()).or_insert(0) += 1;
        }
        c
    }
}

#[cfg(test)]
mod tests;
