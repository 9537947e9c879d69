//! The timeline of an e2e run: every write minicvo makes (apply, delete), every
//! ClusterOperator wait (start, done) and every relevant watch event (observed), stamped with
//! the time since the run began, the phase, the object, the run-level and the graph node.
//!
//! [`Recorder`] builds it from the apply events ([`ApplyObserver`]) and the simulator's watch
//! events ([`SimObserver`]). JSON shape (`--timeline FILE`), ordered by `t`:
//!
//! ```json
//! {"events": [{"t": 0.412, "phase": "upgrade", "action": "delete",
//!   "group": "rbac.authorization.k8s.io", "kind": "ClusterRoleBinding", "namespace": null,
//!   "name": "default-account-openshift-machine-config-operator", "runLevel": "80", "node": 5,
//!   "task": 14, "start": 0.405, "outcome": "deleted"}]}
//! ```
//!
//! `t` is when the write completed (apply), was accepted (delete), or the event was seen;
//! `start` (writes and waits) is when the task started. `task`, `start`, `outcome` and
//! `detail` are extra fields beyond the documented ones and may be absent. A `harm` event
//! (a live simulated pod suffered, see [`crate::simulate::pods`]) names the pod's workload and
//! adds `serviceAccount`, `pod`, `harm`, `what`, and `cause` / `causeTask` when the payload
//! task behind it is known ([`super::harm::attribute`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::time::Instant;

use crate::apply::{ApplyEvent, ApplyObserver, EventKind, Outcome, TaskRef};
use crate::manifest::ObjectId;
use crate::plan::{Action, Plan};
use crate::simulate::pods::HarmKind;
use crate::simulate::{SimEvent, SimEventKind, SimObserver};

/// The two runs of an upgrade e2e.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The old payload, initializing mode.
    Install,
    /// The new payload, updating mode.
    Upgrade,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Install => "install",
            Phase::Upgrade => "upgrade",
        })
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimelineAction {
    /// An apply (in either strategy) or create-only write finished.
    Apply,
    /// A delete task ran (see `outcome`: deleted, already-absent, delete-skipped).
    Delete,
    /// A ClusterOperator wait task started.
    WaitStart,
    /// A ClusterOperator wait task ended (`outcome` waited, failed or interrupted).
    WaitDone,
    /// A watch event: a workload or ClusterOperator changed, a simulated pod started,
    /// became available, took or lost its lease, or stopped, or a deleted object is gone.
    Observed,
    /// A live simulated pod was harmed (see [`Harm`]).
    Harm,
}

impl std::fmt::Display for TimelineAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimelineAction::Apply => "apply",
            TimelineAction::Delete => "delete",
            TimelineAction::WaitStart => "wait-start",
            TimelineAction::WaitDone => "wait-done",
            TimelineAction::Observed => "observed",
            TimelineAction::Harm => "harm",
        })
    }
}

impl std::str::FromStr for TimelineAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "apply" => TimelineAction::Apply,
            "delete" => TimelineAction::Delete,
            "wait-start" => TimelineAction::WaitStart,
            "wait-done" => TimelineAction::WaitDone,
            "observed" => TimelineAction::Observed,
            "harm" => TimelineAction::Harm,
            other => {
                return Err(format!(
                    "unknown action {other:?} (use apply, delete, wait-start, wait-done, observed \
                     or harm)"
                ));
            }
        })
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEvent {
    /// Seconds since the e2e run started.
    pub t: f64,
    /// Install or upgrade.
    pub phase: Phase,
    /// What happened.
    pub action: TimelineAction,
    /// The object (serialized as `group`, `kind`, `namespace`, `name`).
    #[serde(flatten)]
    pub object: ObjectId,
    /// Run-level of the task (or of the task owning the observed object).
    pub run_level: Option<String>,
    /// Graph node of that task.
    pub node: Option<usize>,
    /// The task index in the phase's plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<usize>,
    /// When the task started (writes and waits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    /// The task's outcome (writes and wait-done).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// More: the error, the observed status, what differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What a live simulated pod suffered (`harm` events only).
    #[serde(flatten)]
    pub harm: Option<Harm>,
}

/// What a live simulated pod suffered; the event's object is the pod's workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Harm {
    /// `namespace/name` of the ServiceAccount the pod runs as.
    pub service_account: String,
    /// `<workload>#<generation>`.
    pub pod: String,
    /// Refused, right lost, dependency missing, or started without a right.
    #[serde(rename = "harm")]
    pub kind: HarmKind,
    /// What was refused, lost or is missing.
    pub what: String,
    /// The payload task that caused it, in words (`delete ClusterRoleBinding.rbac… name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// That task's index in its phase's plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause_task: Option<usize>,
    /// The object refused or missing, when there is one.
    #[serde(skip)]
    pub object: Option<ObjectId>,
}

impl TimelineEvent {
    /// Whether a write or wait task succeeded.
    #[must_use]
    pub fn succeeded(&self) -> bool {
        !matches!(
            self.outcome.as_deref(),
            Some("failed" | "interrupted" | "delete-skipped" | "not-served" | "would-wait")
        )
    }

    /// Whether this is a delete that reached the API server (deleted or already absent).
    #[must_use]
    pub fn is_delete_issued(&self) -> bool {
        self.action == TimelineAction::Delete
            && matches!(self.outcome.as_deref(), Some("deleted" | "already-absent"))
    }

    /// Whether this is an apply that succeeded.
    #[must_use]
    pub fn is_apply_done(&self) -> bool {
        self.action == TimelineAction::Apply && self.succeeded()
    }
}

/// The whole timeline, ordered by time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timeline {
    /// Events, by `t`.
    pub events: Vec<TimelineEvent>,
}

impl Timeline {
    /// The events of one phase.
    pub fn phase(&self, phase: Phase) -> impl Iterator<Item = &TimelineEvent> {
        self.events.iter().filter(move |e| e.phase == phase)
    }

    /// The event of `action` for task `task` in `phase`.
    #[must_use]
    pub fn of_task(
        &self,
        phase: Phase,
        task: usize,
        action: TimelineAction,
    ) -> Option<&TimelineEvent> {
        self.phase(phase)
            .find(|e| e.task == Some(task) && e.action == action)
    }

    /// The JSON document (`{"events": [...]}`).
    ///
    /// # Panics
    /// Never: the events always serialize.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("timeline serializes")
    }
}

fn seconds(start: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(start).as_secs_f64()
}

#[derive(Default)]
struct State {
    phase: Option<(Phase, Arc<Plan>)>,
    /// Where each object's task sits, per phase: object → (task, run-level, node).
    places: HashMap<ObjectId, (usize, Option<String>, usize)>,
    /// Task start times of the current phase.
    starts: HashMap<usize, f64>,
    /// DeleteRequested times of the current phase.
    delete_times: HashMap<usize, f64>,
    events: Vec<TimelineEvent>,
}

/// Records a timeline from apply and simulator events; switch phases with
/// [`Recorder::begin`].
pub struct Recorder {
    start: Instant,
    state: Mutex<State>,
}

impl Recorder {
    /// A recorder whose time 0 is `start`.
    #[must_use]
    pub fn new(start: Instant) -> Self {
        Recorder {
            start,
            state: Mutex::new(State::default()),
        }
    }

    /// Starts recording `phase`, whose tasks come from `plan`.
    ///
    /// # Panics
    /// If a previous observer panicked while holding the lock.
    pub fn begin(&self, phase: Phase, plan: Arc<Plan>) {
        let mut s = self.state.lock().expect("recorder lock");
        let node_of = plan.node_of_task();
        s.places.clear();
        for t in &plan.tasks {
            // The apply (or wait) task is where an object "lives"; a delete task only when
            // nothing applies the object.
            let place = (t.id, t.run_level.clone(), node_of[t.id]);
            match t.action {
                Action::Delete => {
                    s.places.entry(t.manifest.id.clone()).or_insert(place);
                }
                Action::Skip => {}
                _ => {
                    s.places.insert(t.manifest.id.clone(), place);
                }
            }
        }
        s.starts.clear();
        s.delete_times.clear();
        s.phase = Some((phase, plan));
    }

    /// The timeline so far, ordered by time.
    ///
    /// # Panics
    /// If an observer panicked while holding the lock.
    #[must_use]
    pub fn timeline(&self) -> Timeline {
        let mut events = self.state.lock().expect("recorder lock").events.clone();
        events.sort_by(|a, b| a.t.total_cmp(&b.t));
        Timeline { events }
    }

    fn task_event(
        s: &State,
        phase: Phase,
        task: &TaskRef,
        action: TimelineAction,
        t: f64,
    ) -> TimelineEvent {
        let plan = &s.phase.as_ref().expect("phase set").1;
        let group = plan.tasks[task.id].manifest.id.group.clone();
        TimelineEvent {
            t,
            phase,
            action,
            object: ObjectId {
                group,
                ..task.object.clone()
            },
            run_level: task.run_level.clone(),
            node: Some(task.node),
            task: Some(task.id),
            start: s.starts.get(&task.id).copied(),
            outcome: None,
            detail: None,
            harm: None,
        }
    }

    fn observed(&self, s: &mut State, at: Instant, id: ObjectId, detail: String) {
        self.seen(s, at, id, TimelineAction::Observed, Some(detail), None);
    }

    /// A watch-side event (`observed` or `harm`) of object `id`, placed at its task.
    fn seen(
        &self,
        s: &mut State,
        at: Instant,
        id: ObjectId,
        action: TimelineAction,
        detail: Option<String>,
        harm: Option<Harm>,
    ) {
        let Some((phase, _)) = &s.phase else { return };
        let phase = *phase;
        let place = s.places.get(&id).cloned();
        s.events.push(TimelineEvent {
            t: seconds(self.start, at),
            phase,
            action,
            object: id,
            run_level: place.as_ref().and_then(|p| p.1.clone()),
            node: place.as_ref().map(|p| p.2),
            task: place.as_ref().map(|p| p.0),
            start: None,
            outcome: None,
            detail,
            harm,
        });
    }
}

impl ApplyObserver for Recorder {
    fn on_event(&self, event: &ApplyEvent) {
        let mut s = self.state.lock().expect("recorder lock");
        let Some((phase, plan)) = s.phase.clone() else {
            return;
        };
        let t = seconds(self.start, event.instant);
        match &event.kind {
            EventKind::TaskStarted { task } => {
                s.starts.insert(task.id, t);
                if plan.tasks[task.id].action == Action::Wait {
                    let e = Self::task_event(&s, phase, task, TimelineAction::WaitStart, t);
                    s.events.push(e);
                }
            }
            EventKind::DeleteRequested { task, .. } => {
                s.delete_times.insert(task.id, t);
            }
            EventKind::DeleteConfirmed { task } => {
                let id = plan.tasks[task.id].manifest.id.clone();
                self.observed(&mut s, event.instant, id, "deleted object is gone".into());
            }
            EventKind::TaskFinished { .. } => {
                let Some(end) = event.kind.task_end() else {
                    return;
                };
                let (task, outcome) = (end.task, &end.outcome);
                let action = match plan.tasks[task.id].action {
                    Action::Apply | Action::CreateOnly => TimelineAction::Apply,
                    Action::Delete => TimelineAction::Delete,
                    Action::Wait => TimelineAction::WaitDone,
                    Action::Skip => return,
                };
                let at = if action == TimelineAction::Delete {
                    s.delete_times.get(&task.id).copied().unwrap_or(t)
                } else {
                    t
                };
                let mut e = Self::task_event(&s, phase, task, action, at);
                e.outcome = Some(outcome.to_string());
                e.detail = end.message.map(str::to_owned);
                if *outcome == Outcome::Skipped {
                    return;
                }
                s.events.push(e);
            }
            _ => {}
        }
    }
}

impl SimObserver for Recorder {
    fn on_sim_event(&self, event: &SimEvent) {
        let mut s = self.state.lock().expect("recorder lock");
        match &event.kind {
            SimEventKind::Workload {
                id,
                generation,
                updated,
            } => {
                let detail = match updated {
                    Ok(()) => format!("generation {generation}: carries the payload's template"),
                    Err(why) => {
                        format!("generation {generation}: not the payload's template ({why})")
                    }
                };
                self.observed(&mut s, event.instant, id.clone(), detail);
            }
            SimEventKind::WorkloadGone { id } => {
                self.observed(&mut s, event.instant, id.clone(), "deleted".into());
            }
            SimEventKind::Operator { name, status } => {
                let id = ObjectId {
                    group: "config.openshift.io".into(),
                    kind: "ClusterOperator".into(),
                    namespace: None,
                    name: name.clone(),
                };
                self.observed(&mut s, event.instant, id, status.clone());
            }
            SimEventKind::Pod {
                workload, change, ..
            } => {
                self.observed(&mut s, event.instant, workload.clone(), change.clone());
            }
            SimEventKind::Harm(h) => {
                let harm = Harm {
                    service_account: h.identity.to_string(),
                    pod: h.pod.clone(),
                    kind: h.kind,
                    what: h.what.clone(),
                    cause: None,
                    cause_task: None,
                    object: h.object.clone(),
                };
                let id = h.workload.clone();
                self.seen(
                    &mut s,
                    event.instant,
                    id,
                    TimelineAction::Harm,
                    None,
                    Some(harm),
                );
            }
            SimEventKind::Reported { .. }
            | SimEventKind::WriteFailed { .. }
            | SimEventKind::WatchFailed { .. } => {}
        }
    }
}
