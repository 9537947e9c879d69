//! The CVO's `RunGraph` (cvo.md §4.2) on tokio.
//!
//! - A node becomes ready when every predecessor succeeded. Ready nodes start lowest index
//!   first (the CVO's priority), at most `parallelism` at a time.
//! - A ClusterOperator wait ([`Action::Wait`]) gives its worker back while it waits and takes
//!   one again before the node's next task. The CVO's check fails at once and its pass walks
//!   the rest of the graph, so every node of a run-level gets its manifests applied in the
//!   first pass however many operators are not done; here the same happens in one walk, with
//!   the wait still watching its operator. A node (and so the next run-level) finishes only
//!   once its waits are over.
//! - Consecutive CustomResourceDefinition tasks of a node are pipelined: the next CRD is
//!   written as soon as the previous one's write is done ([`TaskContext::written`]), while
//!   the previous one waits for `Established`; their results are taken in order before the
//!   node's next task, so a node still goes on only once each CRD is established. The CVO
//!   writes the next CRD only after the previous one passed its check (cvo.md §4.3): the one
//!   difference is that when a CRD fails, the CRDs after it in the same run were already
//!   written (they are waited for and reported, and the node fails at the first).
//! - A node runs its tasks in order; the first failed task ends the node. A failed node never
//!   releases its dependents, but independent nodes (siblings in the run-level included) run
//!   to the end.
//! - Stopping (Ctrl-C, timeout) starts no new node and no new task; the tasks in flight
//!   finish (waits end at once, requests run to their end).
//! - The result lists, per node, whether it succeeded, failed, or never ran.
//!
//! Tasks are run by a [`TaskRunner`] (declared with [`Done`] and [`TaskError`] in `task.rs`):
//! the cluster runner in production, a fake in `tests.rs`. Tasks excluded at apply time ([`Action::Skip`]) are counted here, never run.

mod task;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::events::{Emitter, EventKind, Outcome, TaskRef};
use crate::plan::{Action, Plan};

pub use self::task::{Done, TaskContext, TaskError, TaskResult, TaskRunner};

/// How one node ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    /// Never started (blocked by a failed predecessor, or the run stopped first).
    NotRun,
    /// Every task succeeded.
    Succeeded,
    /// A task failed (its index is given); the rest of the node did not run.
    Failed(usize),
    /// The run stopped while the node was running.
    Interrupted,
}

/// The outcome of a whole graph run.
#[derive(Debug, Clone)]
pub struct GraphOutcome {
    /// Per node, in node order.
    pub nodes: Vec<NodeState>,
    /// Tasks that never started (in nodes that did not run, or after a failure in a node).
    pub not_run: Vec<usize>,
}

impl GraphOutcome {
    /// Whether every node succeeded.
    #[must_use]
    pub fn all_succeeded(&self) -> bool {
        self.nodes.iter().all(|n| *n == NodeState::Succeeded)
    }

    /// Nodes that never started.
    #[must_use]
    pub fn not_run_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i] == NodeState::NotRun)
            .collect()
    }
}

/// Runs `plan`'s graph with at most `parallelism` nodes at once, until done or `stop` fires.
pub async fn run_graph<R: TaskRunner>(
    plan: Arc<Plan>,
    runner: Arc<R>,
    parallelism: usize,
    emitter: Emitter,
    stop: CancellationToken,
) -> GraphOutcome {
    let nodes = &plan.graph.nodes;
    let n = nodes.len();
    let parallelism = parallelism.max(1);
    // Predecessor counts and dependents from `ins` (deduplicated), so a node is ready exactly
    // when all its predecessors succeeded.
    let mut waiting = vec![0usize; n];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        let ins: BTreeSet<usize> = node.ins.iter().copied().filter(|&p| p < n).collect();
        waiting[i] = ins.len();
        for p in ins {
            dependents[p].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut states = vec![NodeState::NotRun; n];
    let mut not_run: Vec<usize> = Vec::new();
    let mut running: JoinSet<(usize, NodeState, Vec<usize>)> = JoinSet::new();
    let mut ids = std::collections::HashMap::new();
    // The workers: a running node holds one, except while a ClusterOperator wait of it waits.
    let workers = Arc::new(Semaphore::new(parallelism));
    let spawn = |i: usize,
                 permit: OwnedSemaphorePermit,
                 running: &mut JoinSet<(usize, NodeState, Vec<usize>)>| {
        running
            .spawn(run_node(
                plan.clone(),
                runner.clone(),
                i,
                emitter.clone(),
                stop.clone(),
                Worker {
                    pool: workers.clone(),
                    permit: Some(permit),
                },
            ))
            .id()
    };

    loop {
        while !stop.is_cancelled() && !ready.is_empty() {
            let Ok(permit) = workers.clone().try_acquire_owned() else {
                break;
            };
            let i = ready.pop_first().expect("ready is not empty");
            ids.insert(spawn(i, permit, &mut running), i);
        }
        if running.is_empty() {
            break;
        }
        let startable = !stop.is_cancelled() && !ready.is_empty();
        let next = tokio::select! {
            j = running.join_next_with_id() => Next::Joined(j),
            p = workers.clone().acquire_owned(), if startable => Next::Worker(p),
        };
        let joined = match next {
            // Stopped while waiting for a worker: start nothing new.
            Next::Worker(_) if stop.is_cancelled() => continue,
            Next::Worker(p) => {
                let permit = p.expect("the worker pool is never closed");
                let i = ready.pop_first().expect("ready is not empty");
                ids.insert(spawn(i, permit, &mut running), i);
                continue;
            }
            Next::Joined(None) => break,
            Next::Joined(Some(j)) => j,
        };
        let (i, state, skipped) = match joined {
            Ok((_, result)) => result,
            Err(e) => {
                // A panicking runner fails its node, like any other failure.
                let i = ids[&e.id()];
                tracing::error!("node {i} panicked: {e}");
                (i, NodeState::Failed(usize::MAX), Vec::new())
            }
        };
        not_run.extend(skipped);
        if state == NodeState::Succeeded {
            for &d in &dependents[i] {
                waiting[d] -= 1;
                if waiting[d] == 0 {
                    ready.insert(d);
                }
            }
        }
        states[i] = state;
    }
    for (i, s) in states.iter().enumerate() {
        if *s == NodeState::NotRun {
            not_run.extend(&nodes[i].tasks);
        }
    }
    not_run.sort_unstable();
    GraphOutcome {
        nodes: states,
        not_run,
    }
}

/// What the scheduler woke up for.
enum Next<J> {
    /// A node finished (`None`: none is running).
    Joined(Option<J>),
    /// A worker is free for the next ready node.
    Worker(Result<OwnedSemaphorePermit, tokio::sync::AcquireError>),
}

/// A node's hold on a worker of the pool.
struct Worker {
    pool: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Worker {
    /// Gives the worker back (while a ClusterOperator wait waits).
    fn release(&mut self) {
        self.permit = None;
    }

    /// Takes a worker again before the node's next task.
    async fn reacquire(&mut self) {
        if self.permit.is_none() {
            self.permit = Some(
                self.pool
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the worker pool is never closed"),
            );
        }
    }
}

async fn run_node<R: TaskRunner>(
    plan: Arc<Plan>,
    runner: Arc<R>,
    i: usize,
    emitter: Emitter,
    stop: CancellationToken,
    mut worker: Worker,
) -> (usize, NodeState, Vec<usize>) {
    let tasks = &plan.graph.nodes[i].tasks;
    let run_level = tasks.first().and_then(|&t| plan.tasks[t].run_level.clone());
    let mut components: Vec<String> = Vec::new();
    for &t in tasks {
        if let Some(c) = &plan.tasks[t].component
            && components.last() != Some(c)
        {
            components.push(c.clone());
        }
    }
    let started = tokio::time::Instant::now();
    emitter.emit(EventKind::NodeStarted {
        node: i,
        run_level: run_level.clone(),
        components,
        tasks: tasks.len(),
    });
    let runnable: Vec<usize> = tasks
        .iter()
        .copied()
        .filter(|&t| plan.tasks[t].action != Action::Skip)
        .collect();
    if !runnable.is_empty() && !stop.is_cancelled() {
        runner.start_node(i, &runnable).await;
    }
    let mut state = NodeState::Succeeded;
    let mut skipped = Vec::new();
    // CRD tasks of this node that are written and may still wait for `Established`, in order.
    let mut pipelined: Vec<(TaskRef, Pipelined)> = Vec::new();
    for (pos, &t) in tasks.iter().enumerate() {
        worker.reacquire().await;
        if stop.is_cancelled() {
            // Pipelined CRDs are written: their ends are reported before the node stops.
            let s = finish_pipelined(&emitter, std::mem::take(&mut pipelined)).await;
            state = if s == NodeState::Succeeded {
                NodeState::Interrupted
            } else {
                s
            };
            skipped.extend(&tasks[pos..]);
            break;
        }
        let task = TaskRef::new(&plan, t, i);
        let task_started = tokio::time::Instant::now();
        if writes_crd(&plan, t) {
            // A CRD: the node's next CRD is written as soon as this one's write is done;
            // the results are taken in order once the run of CRDs ends.
            emitter.emit(EventKind::TaskStarted { task: task.clone() });
            let ctx = TaskContext::new(task.clone(), stop.clone());
            let written = ctx.written.clone();
            let r = runner.clone();
            let mut handle = tokio::spawn(async move {
                let result = r.run_task(ctx).await;
                (result, task_started.elapsed())
            });
            let next_is_crd = tasks.get(pos + 1).is_some_and(|&n| writes_crd(&plan, n));
            let entry = if next_is_crd {
                tokio::select! {
                    () = written.notified() => Pipelined::Running(handle),
                    j = &mut handle => Pipelined::Ended(joined(j)),
                }
            } else {
                Pipelined::Running(handle)
            };
            let failed_early = matches!(&entry, Pipelined::Ended((Err(_), _)));
            pipelined.push((task, entry));
            if next_is_crd && !failed_early && !stop.is_cancelled() {
                continue;
            }
            state = finish_pipelined(&emitter, std::mem::take(&mut pipelined)).await;
            if state != NodeState::Succeeded {
                skipped.extend(&tasks[pos + 1..]);
                break;
            }
            continue;
        }
        emitter.emit(EventKind::TaskStarted { task: task.clone() });
        let result = if plan.tasks[t].action == Action::Skip {
            let mut d = Done::new(Outcome::Skipped).attempts(0);
            d.detail.clone_from(&plan.tasks[t].skip_reason);
            Ok(d)
        } else if plan.tasks[t].action == Action::Wait {
            // The wait gives its worker back; the node takes one again before going on.
            worker.release();
            runner
                .run_task(TaskContext::new(task.clone(), stop.clone()))
                .await
        } else {
            runner
                .run_task(TaskContext::new(task.clone(), stop.clone()))
                .await
        };
        let ok = task_finished(&emitter, task, t, result, task_started.elapsed());
        if ok != NodeState::Succeeded {
            state = ok;
            skipped.extend(&tasks[pos + 1..]);
            break;
        }
    }
    emitter.emit(EventKind::NodeFinished {
        node: i,
        run_level,
        ok: state == NodeState::Succeeded,
        duration: started.elapsed(),
    });
    (i, state, skipped)
}

/// Whether task `t` writes a CustomResourceDefinition (consecutive ones of a node are
/// pipelined: see [`run_node`]).
fn writes_crd(plan: &Plan, t: usize) -> bool {
    let task = &plan.tasks[t];
    matches!(task.action, Action::Apply | Action::CreateOnly) && task.manifest.is_crd()
}

/// A pipelined CRD task: still running (its `Established` wait), or ended.
enum Pipelined {
    Running(tokio::task::JoinHandle<(TaskResult, Duration)>),
    Ended((TaskResult, Duration)),
}

/// A spawned task's result; a panic fails the task.
fn joined(j: Result<(TaskResult, Duration), tokio::task::JoinError>) -> (TaskResult, Duration) {
    j.unwrap_or_else(|e| {
        (
            Err(TaskError::failed(format!("the task panicked: {e}"), 0)),
            Duration::ZERO,
        )
    })
}

/// Takes the results of a run of pipelined CRD tasks in order, emitting each one's end; the
/// node's state is set by the first that did not succeed (the later ones, already written,
/// are still waited for and reported).
async fn finish_pipelined(emitter: &Emitter, pipelined: Vec<(TaskRef, Pipelined)>) -> NodeState {
    let mut state = NodeState::Succeeded;
    for (task, p) in pipelined {
        let (result, duration) = match p {
            Pipelined::Running(h) => joined(h.await),
            Pipelined::Ended(r) => r,
        };
        let id = task.id;
        let s = task_finished(emitter, task, id, result, duration);
        if state == NodeState::Succeeded {
            state = s;
        }
    }
    state
}

/// Emits the end of task `t` and says how it leaves its node.
fn task_finished(
    emitter: &Emitter,
    task: TaskRef,
    t: usize,
    result: TaskResult,
    duration: Duration,
) -> NodeState {
    match result {
        Ok(done) => {
            emitter.emit(EventKind::TaskFinished {
                task,
                outcome: done.outcome,
                detail: done.detail,
                error: None,
                attempts: done.attempts,
                duration,
            });
            NodeState::Succeeded
        }
        Err(e) => {
            emitter.emit(EventKind::TaskFinished {
                task,
                outcome: if e.interrupted {
                    Outcome::Interrupted
                } else {
                    Outcome::Failed
                },
                detail: None,
                error: Some(e.message.clone()),
                attempts: e.attempts,
                duration,
            });
            if e.interrupted {
                NodeState::Interrupted
            } else {
                NodeState::Failed(t)
            }
        }
    }
}

/// Convenience for runners: sleeps `d` unless `cancel` fires first (then `false`).
pub async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        () = cancel.cancelled() => false,
    }
}
