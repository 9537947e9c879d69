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
//! - A node runs its tasks in order; the first failed task ends the node. A failed node never
//!   releases its dependents, but independent nodes (siblings in the run-level included) run
//!   to the end.
//! - Stopping (Ctrl-C, timeout) starts no new node and no new task; the tasks in flight
//!   finish (waits end at once, requests run to their end).
//! - The result lists, per node, whether it succeeded, failed, or never ran.
//!
//! Tasks are run by a [`TaskRunner`]: the cluster runner in production, a fake in the tests
//! below. Tasks excluded at apply time ([`Action::Skip`]) are counted here, never run.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::events::{Emitter, EventKind, Outcome, TaskRef};
use crate::cluster::RequestError;
use crate::plan::{Action, Plan};

/// A finished task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// What it did.
    pub outcome: Outcome,
    /// More about it.
    pub detail: Option<String>,
    /// Requests tried for the main call.
    pub attempts: u32,
}

impl Done {
    /// A result with one attempt and no detail.
    #[must_use]
    pub fn new(outcome: Outcome) -> Self {
        Done {
            outcome,
            detail: None,
            attempts: 1,
        }
    }

    /// Adds a detail.
    #[must_use]
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets the attempt count.
    #[must_use]
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }
}

/// A task that did not succeed. `message` is the cause; the object is named by the
/// [`TaskRef`] that travels with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TaskError {
    /// The cause.
    pub message: String,
    /// Whether the run was stopped (Ctrl-C, timeout) rather than the task failing.
    pub interrupted: bool,
    /// Requests tried.
    pub attempts: u32,
    /// The request error behind the failure, when one is (typed: the server's code, reason
    /// and details).
    pub cause: Option<RequestError>,
}

impl TaskError {
    /// A failure.
    #[must_use]
    pub fn failed(message: impl Into<String>, attempts: u32) -> Self {
        TaskError {
            message: message.into(),
            interrupted: false,
            attempts,
            cause: None,
        }
    }

    /// A failure caused by `cause`.
    #[must_use]
    pub fn from_request(message: impl Into<String>, attempts: u32, cause: RequestError) -> Self {
        TaskError {
            cause: Some(cause),
            ..TaskError::failed(message, attempts)
        }
    }

    /// An interruption.
    #[must_use]
    pub fn interrupted(message: impl Into<String>) -> Self {
        TaskError {
            message: message.into(),
            interrupted: true,
            attempts: 0,
            cause: None,
        }
    }
}

/// The result of one task.
pub type TaskResult = Result<Done, TaskError>;

/// What a task runner gets for each task.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The task.
    pub task: TaskRef,
    /// Fires when the run stops; waits must end, requests may finish.
    pub cancel: CancellationToken,
}

/// Runs tasks for the executor.
pub trait TaskRunner: Send + Sync + 'static {
    /// Called when a node starts, before its first task: the CVO's ClusterOperator
    /// precreation pass. `tasks` are the node's task indices.
    fn start_node(&self, node: usize, tasks: &[usize]) -> impl Future<Output = ()> + Send;

    /// Runs one task (never an [`Action::Skip`] one).
    fn run_task(&self, ctx: TaskContext) -> impl Future<Output = TaskResult> + Send;
}

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
    for (pos, &t) in tasks.iter().enumerate() {
        worker.reacquire().await;
        if stop.is_cancelled() {
            state = NodeState::Interrupted;
            skipped.extend(&tasks[pos..]);
            break;
        }
        let task = TaskRef::new(&plan, t, i);
        let task_started = tokio::time::Instant::now();
        emitter.emit(EventKind::TaskStarted { task: task.clone() });
        let result = if plan.tasks[t].action == Action::Skip {
            let mut d = Done::new(Outcome::Skipped).attempts(0);
            d.detail.clone_from(&plan.tasks[t].skip_reason);
            Ok(d)
        } else if plan.tasks[t].action == Action::Wait {
            // The wait gives its worker back; the node takes one again before going on.
            worker.release();
            runner
                .run_task(TaskContext {
                    task: task.clone(),
                    cancel: stop.clone(),
                })
                .await
        } else {
            runner
                .run_task(TaskContext {
                    task: task.clone(),
                    cancel: stop.clone(),
                })
                .await
        };
        let duration = task_started.elapsed();
        match result {
            Ok(done) => emitter.emit(EventKind::TaskFinished {
                task,
                outcome: done.outcome,
                detail: done.detail,
                error: None,
                attempts: done.attempts,
                duration,
            }),
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
                state = if e.interrupted {
                    NodeState::Interrupted
                } else {
                    NodeState::Failed(t)
                };
                skipped.extend(&tasks[pos + 1..]);
                break;
            }
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

/// Convenience for runners: sleeps `d` unless `cancel` fires first (then `false`).
pub async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        () = cancel.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::apply::events::{ApplyEvent, EventLog};
    use crate::filter::Filters;
    use crate::manifest::{Manifest, ObjectId, Source};
    use crate::plan::{self, Mode};

    /// A fake runner: each task sleeps for its configured time, and fails if configured to.
    /// Wait tasks block until `waits_to_release` of them have started (then all end), or fail
    /// after an hour.
    #[derive(Default)]
    struct Fake {
        sleep: HashMap<usize, Duration>,
        fail: Vec<usize>,
        started_nodes: Mutex<Vec<usize>>,
        waits_to_release: usize,
        waits_started: Mutex<usize>,
        release: CancellationToken,
    }

    impl TaskRunner for Fake {
        async fn start_node(&self, node: usize, _tasks: &[usize]) {
            self.started_nodes.lock().unwrap().push(node);
        }

        async fn run_task(&self, ctx: TaskContext) -> TaskResult {
            if ctx.task.action == Action::Wait {
                {
                    let mut n = self.waits_started.lock().unwrap();
                    *n += 1;
                    if *n >= self.waits_to_release {
                        self.release.cancel();
                    }
                }
                return tokio::select! {
                    () = self.release.cancelled() => Ok(Done::new(Outcome::Waited)),
                    () = tokio::time::sleep(Duration::from_secs(3600)) =>
                        Err(TaskError::failed("never released", 1)),
                };
            }
            let d = self
                .sleep
                .get(&ctx.task.id)
                .copied()
                .unwrap_or(Duration::from_millis(10));
            if !sleep_or_cancel(d, &ctx.cancel).await {
                return Err(TaskError::interrupted("interrupted"));
            }
            if self.fail.contains(&ctx.task.id) {
                Err(TaskError::failed("boom", 1))
            } else {
                Ok(Done::new(Outcome::Unchanged))
            }
        }
    }

    fn manifest(file: &str, name: &str) -> Manifest {
        Manifest {
            source: Source::ReleaseManifests,
            file: file.into(),
            document: 0,
            line: 1,
            api_version: "v1".into(),
            id: ObjectId {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: name.into(),
            },
            object: serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns",
                    "annotations": {"include.release.openshift.io/self-managed-high-availability": "true"}}}),
        }
    }

    /// A plan from file names (one ConfigMap each), in updating mode.
    fn plan_of(files: &[&str]) -> Arc<Plan> {
        let ms = files
            .iter()
            .enumerate()
            .map(|(i, f)| manifest(f, &format!("cm{i}")))
            .collect();
        Arc::new(plan::build_from(
            Some("1.0.0".into()),
            ms,
            &Filters::default(),
            Mode::Updating,
            0,
        ))
    }

    async fn run(
        plan: &Arc<Plan>,
        fake: Fake,
        par: usize,
        stop: CancellationToken,
    ) -> (GraphOutcome, Vec<ApplyEvent>, Arc<Fake>) {
        let log = Arc::new(EventLog::new());
        let fake = Arc::new(fake);
        let out = run_graph(
            plan.clone(),
            fake.clone(),
            par,
            Emitter::new(log.clone()),
            stop,
        )
        .await;
        (out, log.events(), fake)
    }

    fn spans(events: &[ApplyEvent]) -> HashMap<usize, (Duration, Duration)> {
        let mut start = HashMap::new();
        let mut spans = HashMap::new();
        for e in events {
            match &e.kind {
                EventKind::TaskStarted { task } => {
                    start.insert(task.id, e.elapsed);
                }
                EventKind::TaskFinished { task, .. } => {
                    spans.insert(task.id, (start[&task.id], e.elapsed));
                }
                _ => {}
            }
        }
        spans
    }

    const LEVELS: &[&str] = &[
        "0000_10_a_00.yaml",
        "0000_20_b_00.yaml",
        "0000_20_c_00.yaml",
        "0000_20_d_00.yaml",
        "0000_30_e_00.yaml",
        "0000_30_f_00.yaml",
    ];

    #[tokio::test(start_paused = true)]
    async fn run_levels_are_barriers_and_components_run_in_parallel() {
        let plan = plan_of(LEVELS);
        let (out, events, _) = run(&plan, Fake::default(), 16, CancellationToken::new()).await;
        assert!(out.all_succeeded(), "{out:?}");
        let s = spans(&events);
        // b, c, d (run-level 20) overlap; all start after a finished; e, f after all of them.
        assert_eq!(s[&1].0, s[&2].0);
        assert_eq!(s[&2].0, s[&3].0);
        assert!(s[&1].0 >= s[&0].1);
        for t in [4, 5] {
            for p in [1, 2, 3] {
                assert!(s[&t].0 >= s[&p].1, "{t} started before {p} finished");
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn parallelism_bounds_running_nodes_and_lowest_index_goes_first() {
        let plan = plan_of(LEVELS);
        let mut fake = Fake::default();
        fake.sleep.insert(2, Duration::from_millis(50));
        let (_, events, fake) = run(&plan, fake, 1, CancellationToken::new()).await;
        let s = spans(&events);
        // With one worker nothing overlaps, and ready nodes start in index order.
        let mut v: Vec<_> = s.values().copied().collect();
        v.sort();
        for w in v.windows(2) {
            assert!(w[1].0 >= w[0].1, "{v:?}");
        }
        let order: Vec<usize> = fake.started_nodes.lock().unwrap().clone();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "nodes did not start lowest index first");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_blocks_dependents_but_siblings_finish() {
        let plan = plan_of(LEVELS);
        let mut fake = Fake::default();
        fake.fail.push(1);
        fake.sleep.insert(3, Duration::from_millis(500));
        let (out, events, _) = run(&plan, fake, 16, CancellationToken::new()).await;
        let s = spans(&events);
        assert!(
            s.contains_key(&2) && s.contains_key(&3),
            "siblings did not run"
        );
        assert!(!s.contains_key(&4) && !s.contains_key(&5), "next level ran");
        assert_eq!(out.not_run, vec![4, 5]);
        assert!(out.nodes.iter().any(|n| matches!(n, NodeState::Failed(1))));
        // The slow sibling (500ms) finished even though task 1 failed at 10ms.
        assert!(s[&3].1 - s[&3].0 >= Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_task_ends_its_node() {
        // One component, two files: one serial node.
        let plan = plan_of(&[
            "0000_10_a_00.yaml",
            "0000_10_a_01.yaml",
            "0000_10_a_02.yaml",
        ]);
        assert_eq!(plan.graph.nodes.len(), 1);
        let mut fake = Fake::default();
        fake.fail.push(1);
        let (out, events, _) = run(&plan, fake, 16, CancellationToken::new()).await;
        assert_eq!(out.not_run, vec![2]);
        assert!(!spans(&events).contains_key(&2));
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_starts_nothing_new_and_lets_running_tasks_end() {
        let plan = plan_of(LEVELS);
        let mut fake = Fake::default();
        fake.sleep.insert(0, Duration::from_secs(3600));
        let stop = CancellationToken::new();
        let s2 = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            s2.cancel();
        });
        let started = tokio::time::Instant::now();
        let (out, events, _) = run(&plan, fake, 16, stop).await;
        assert!(started.elapsed() < Duration::from_secs(6));
        assert_eq!(out.nodes[plan.node_of_task()[0]], NodeState::Interrupted);
        assert_eq!(out.not_run, vec![1, 2, 3, 4, 5]);
        let interrupted = events.iter().any(|e| {
            matches!(
                &e.kind,
                EventKind::TaskFinished {
                    outcome: Outcome::Interrupted,
                    ..
                }
            )
        });
        assert!(interrupted);
    }

    /// Four components of one run-level, each a ConfigMap then a ClusterOperator wait, on two
    /// workers: every ConfigMap is applied before any wait ends, and the next run-level starts
    /// only after all of them.
    #[tokio::test(start_paused = true)]
    async fn waits_give_their_worker_back_and_still_hold_the_next_run_level() {
        let mut files = Vec::new();
        for c in ["a", "b", "c", "d"] {
            files.push(format!("0000_10_{c}_00.yaml"));
            files.push(format!("0000_10_{c}_01.yaml"));
        }
        files.push("0000_20_e_00.yaml".into());
        let names: Vec<&str> = files.iter().map(String::as_str).collect();
        let mut p = (*plan_of(&names)).clone();
        for t in [1, 3, 5, 7] {
            p.tasks[t].action = Action::Wait;
        }
        let plan = Arc::new(p);
        let fake = Fake {
            waits_to_release: 4,
            ..Fake::default()
        };
        let (out, events, _) = run(&plan, fake, 2, CancellationToken::new()).await;
        assert!(out.all_succeeded(), "{out:?}");
        let finished: Vec<usize> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::TaskFinished { task, .. } => Some(task.id),
                _ => None,
            })
            .collect();
        let at = |t: usize| finished.iter().position(|&x| x == t).unwrap();
        let first_wait = [1, 3, 5, 7].map(at).into_iter().min().unwrap();
        let last_wait = [1, 3, 5, 7].map(at).into_iter().max().unwrap();
        for cm in [0, 2, 4, 6] {
            assert!(
                at(cm) < first_wait,
                "{cm} applied after a wait ended: {finished:?}"
            );
        }
        let started = events
            .iter()
            .position(|e| matches!(&e.kind, EventKind::TaskStarted { task } if task.id == 8))
            .unwrap();
        let last_wait_event = events
            .iter()
            .position(|e| matches!(&e.kind, EventKind::TaskFinished { task, .. } if task.id == finished[last_wait]))
            .unwrap();
        assert!(
            started > last_wait_event,
            "run-level 20 started before the waits ended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn skip_tasks_are_counted_not_run() {
        let mut p = (*plan_of(&["0000_10_a_00.yaml", "0000_10_a_01.yaml"])).clone();
        p.tasks[0].action = Action::Skip;
        p.tasks[0].skip_reason = Some("capability Console disabled".into());
        let plan = Arc::new(p);
        let mut fake = Fake::default();
        fake.fail.push(0); // would fail if it ran
        let (out, events, _) = run(&plan, fake, 16, CancellationToken::new()).await;
        assert!(out.all_succeeded());
        let skipped = events.iter().any(|e| {
            matches!(&e.kind, EventKind::TaskFinished { task, outcome: Outcome::Skipped, detail: Some(d), .. }
                if task.id == 0 && d.contains("Console"))
        });
        assert!(skipped);
    }
}
