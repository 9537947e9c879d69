//! The graph engine against a fake runner: order, parallelism, failures, stops.

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
    /// CRD tasks: how long `Established` takes after the write (10 ms); the write is said
    /// done first.
    establish: HashMap<usize, Duration>,
    /// CRD tasks whose write fails (before saying it is done).
    write_fails: Vec<usize>,
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
        if ctx.task.object.kind == "CustomResourceDefinition" {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if self.write_fails.contains(&ctx.task.id) {
                return Err(TaskError::failed("write refused", 1));
            }
            ctx.written();
            let d = self
                .establish
                .get(&ctx.task.id)
                .copied()
                .unwrap_or(Duration::from_millis(10));
            tokio::time::sleep(d).await;
            return if self.fail.contains(&ctx.task.id) {
                Err(TaskError::failed("not Established", 1))
            } else {
                Ok(Done::new(Outcome::Created))
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
                "annotations": {"include.release.openshift.io/self-managed-high-availability": "true"}}})
        .into(),
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

/// One node: CRDs at 0..crds, then a ConfigMap.
fn crd_node(crds: usize) -> Arc<Plan> {
    let mut files: Vec<String> = (0..crds)
        .map(|i| format!("0000_10_a_0{i}.crd.yaml"))
        .collect();
    files.push("0000_10_a_50_configmap.yaml".into());
    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    let mut p = (*plan_of(&names)).clone();
    for t in 0..crds {
        p.tasks[t].manifest.id.group = "apiextensions.k8s.io".into();
        p.tasks[t].manifest.id.kind = "CustomResourceDefinition".into();
        p.tasks[t].manifest.id.namespace = None;
    }
    assert_eq!(p.graph.nodes.len(), 1);
    Arc::new(p)
}

fn finished_order(events: &[ApplyEvent]) -> Vec<(usize, Outcome)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TaskFinished { task, outcome, .. } => Some((task.id, *outcome)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn consecutive_crds_establish_together_and_the_node_goes_on_after_all() {
    let plan = crd_node(4);
    let mut fake = Fake::default();
    for t in 0..4 {
        fake.establish.insert(t, Duration::from_secs(1));
    }
    let started = tokio::time::Instant::now();
    let (out, events, _) = run(&plan, fake, 16, CancellationToken::new()).await;
    assert!(out.all_succeeded(), "{out:?}");
    // Four writes of 10 ms one after the other, then the last one's second: not four seconds.
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1200), "{took:?}");
    let s = spans(&events);
    for t in 1..4 {
        assert!(
            s[&t].0 >= s[&(t - 1)].0 + Duration::from_millis(10),
            "{t} written too early"
        );
        assert!(
            s[&t].0 < s[&(t - 1)].1,
            "{t} waited for {}'s Established",
            t - 1
        );
    }
    for t in 0..4 {
        assert!(
            s[&4].0 >= s[&t].1,
            "the ConfigMap started before CRD {t} was established"
        );
    }
    let order: Vec<usize> = finished_order(&events).iter().map(|(t, _)| *t).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4]);
}

#[tokio::test(start_paused = true)]
async fn a_crd_that_does_not_establish_fails_its_node_at_that_crd() {
    let plan = crd_node(3);
    let mut fake = Fake::default();
    fake.fail.push(1);
    let (out, events, _) = run(&plan, fake, 16, CancellationToken::new()).await;
    assert_eq!(out.nodes, vec![NodeState::Failed(1)]);
    // CRD 2 was already written: it is waited for and reported; the ConfigMap never runs.
    assert_eq!(
        finished_order(&events),
        vec![
            (0, Outcome::Created),
            (1, Outcome::Failed),
            (2, Outcome::Created)
        ]
    );
    assert_eq!(out.not_run, vec![3]);
}

#[tokio::test(start_paused = true)]
async fn a_crd_whose_write_fails_stops_the_pipeline() {
    let plan = crd_node(3);
    let mut fake = Fake::default();
    fake.write_fails.push(1);
    let (out, events, _) = run(&plan, fake, 16, CancellationToken::new()).await;
    assert_eq!(out.nodes, vec![NodeState::Failed(1)]);
    assert_eq!(
        finished_order(&events),
        vec![(0, Outcome::Created), (1, Outcome::Failed)]
    );
    assert_eq!(out.not_run, vec![2, 3]);
}
