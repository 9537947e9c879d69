//! Structured, timestamped events of an apply run, delivered to [`ApplyObserver`]s.
//!
//! Everything that watches a run consumes these: the progress display, the report (counts,
//! per-run-level durations, failures), the ClusterVersion recorder and test harnesses that
//! record a timeline. The sequence for one run is:
//!
//! ```text
//! RunStarted
//!   NodeStarted(n)                       a node's predecessors all succeeded
//!     TaskStarted(t)                     tasks of a node run in order
//!       Retrying(t)*                     a transient error, before the backoff sleep
//!       CrdEstablished(t)?               a CRD this task applied is served
//!       WaitStarted(t) WaitProgress(t)* WaitDone(t)    a ClusterOperator wait that blocked
//!       DeleteRequested(t) DeleteConfirmed(t)?        a delete (confirmation may come later)
//!       Warning*                         an API server warning header
//!     TaskFinished(t, outcome)
//!   NodeFinished(n, ok)
//! Stopping?                              Ctrl-C or --timeout: no new work starts
//! DeleteConfirmed*                       deletions tracked to the end of the run
//! RunFinished
//! ```
//!
//! Every event carries a wall-clock time, a monotonic [`tokio::time::Instant`] (comparable
//! with instants taken by the caller, e.g. a test that measures latency) and the time since
//! the run started.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Serialize, Serializer};

use crate::manifest::ObjectId;
use crate::plan::{Action, Mode, Plan};

/// Receives the events of a run. Called synchronously from the executor's tasks, so
/// implementations must be quick (hand slow work to a channel).
pub trait ApplyObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: &ApplyEvent);
}

impl<F> ApplyObserver for F
where
    F: Fn(&ApplyEvent) + Send + Sync,
{
    fn on_event(&self, event: &ApplyEvent) {
        self(event);
    }
}

/// Forwards every event to several observers, in order.
#[derive(Default, Clone)]
pub struct Observers(pub Vec<Arc<dyn ApplyObserver>>);

impl ApplyObserver for Observers {
    fn on_event(&self, event: &ApplyEvent) {
        for o in &self.0 {
            o.on_event(event);
        }
    }
}

/// Keeps every event (for timelines and tests).
#[derive(Default)]
pub struct EventLog(Mutex<Vec<ApplyEvent>>);

impl EventLog {
    /// An empty log.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events so far.
    ///
    /// # Panics
    /// If an observer panicked while holding the lock.
    #[must_use]
    pub fn events(&self) -> Vec<ApplyEvent> {
        self.0.lock().expect("event log poisoned").clone()
    }
}

impl ApplyObserver for EventLog {
    fn on_event(&self, event: &ApplyEvent) {
        self.0
            .lock()
            .expect("event log poisoned")
            .push(event.clone());
    }
}

/// One event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyEvent {
    /// Wall-clock time (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub at: SystemTime,
    /// Monotonic time, comparable with other instants of this process.
    #[serde(skip)]
    pub instant: tokio::time::Instant,
    /// Time since the run started.
    #[serde(serialize_with = "seconds")]
    pub elapsed: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    match k8s_openapi::jiff::Timestamp::try_from(*t) {
        Ok(ts) => s.serialize_str(&ts.to_string()),
        Err(_) => s.serialize_none(),
    }
}

fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Identity and position of a task, repeated in every task event so that events stand alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    /// Task index in load order.
    pub id: usize,
    /// The graph node running it.
    pub node: usize,
    /// Run-level from the file name.
    pub run_level: Option<String>,
    /// Component from the file name.
    pub component: Option<String>,
    /// Payload-relative file path.
    pub file: String,
    /// Document index inside the file.
    pub document: usize,
    /// `apiVersion`.
    pub api_version: String,
    /// The object (serialized as `kind`, `namespace`, `name`).
    #[serde(flatten, serialize_with = "crate::manifest::serialize_without_group")]
    pub object: ObjectId,
    /// What the task does.
    pub action: Action,
}

impl TaskRef {
    /// The reference of task `id`, run by `node`.
    #[must_use]
    pub fn new(plan: &Plan, id: usize, node: usize) -> Self {
        let t = &plan.tasks[id];
        TaskRef {
            id,
            node,
            run_level: t.run_level.clone(),
            component: t.component.clone(),
            file: t.manifest.path(),
            document: t.manifest.document,
            api_version: t.manifest.api_version.clone(),
            object: t.manifest.id.clone(),
            action: t.action.clone(),
        }
    }

    /// `file#document Kind namespace/name`.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}#{} {}", self.file, self.document, self.object.short())
    }
}

/// What a finished task did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The object did not exist and was created (or would be, in a dry run).
    Created,
    /// The object existed and the apply changed it.
    Configured,
    /// The object existed and the apply changed nothing.
    Unchanged,
    /// A create-only object that already existed was left alone.
    CreateOnlySkipped,
    /// A delete was requested (the object may still be finalizing; see the delete events).
    Deleted,
    /// A delete found the object (or its type) already absent.
    AlreadyAbsent,
    /// A delete outside updating mode: not issued, as the CVO does.
    DeleteSkipped,
    /// A ClusterOperator reached the state the CVO requires.
    Waited,
    /// Excluded at apply time (capability or override): counted, not run.
    Skipped,
    /// Dry run: the type is served only once a CRD of this plan is created.
    NotServed,
    /// Dry run: a ClusterOperator that is not yet done (the real run would wait).
    WouldWait,
    /// The task failed.
    Failed,
    /// Ctrl-C or the run timeout stopped the task.
    Interrupted,
}

impl Outcome {
    /// Whether the task counts as done for progress (and lets its node continue).
    #[must_use]
    pub fn is_success(self) -> bool {
        !matches!(self, Outcome::Failed | Outcome::Interrupted)
    }

    /// Whether the cluster was (or in a dry run would be) changed.
    #[must_use]
    pub fn changed(self) -> bool {
        matches!(
            self,
            Outcome::Created | Outcome::Configured | Outcome::Deleted
        )
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Unchanged => "unchanged",
            Outcome::CreateOnlySkipped => "create-only-skipped",
            Outcome::Deleted => "deleted",
            Outcome::AlreadyAbsent => "already-absent",
            Outcome::DeleteSkipped => "delete-skipped",
            Outcome::Waited => "waited",
            Outcome::Skipped => "skipped",
            Outcome::NotServed => "not-served",
            Outcome::WouldWait => "would-wait",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
        })
    }
}

/// Why a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// Ctrl-C (or the caller's cancellation).
    Interrupted,
    /// The overall `--timeout` passed.
    TimedOut,
}

/// The kinds of events.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "PascalCase")]
pub enum EventKind {
    /// The run begins.
    #[serde(rename_all = "camelCase")]
    RunStarted {
        /// Release version, when known.
        version: Option<String>,
        /// Graph mode.
        mode: Mode,
        /// Tasks in the plan.
        tasks: usize,
        /// Nodes in the graph.
        nodes: usize,
        /// Nodes allowed to run at once.
        parallelism: usize,
        /// Whether writes are server dry runs.
        dry_run: bool,
    },
    /// A node's predecessors all succeeded and it started.
    #[serde(rename_all = "camelCase")]
    NodeStarted {
        /// Node index.
        node: usize,
        /// Run-level of its first task.
        run_level: Option<String>,
        /// Components of its tasks, in order, without repeats.
        components: Vec<String>,
        /// Number of tasks (0 for the CVO's empty spacer nodes).
        tasks: usize,
    },
    /// A node finished; `ok` is false when one of its tasks failed or was interrupted.
    #[serde(rename_all = "camelCase")]
    NodeFinished {
        /// Node index.
        node: usize,
        /// Run-level of its first task.
        run_level: Option<String>,
        /// Whether every task succeeded.
        ok: bool,
        /// How long it ran.
        #[serde(serialize_with = "seconds")]
        duration: Duration,
    },
    /// A task started.
    #[serde(rename_all = "camelCase")]
    TaskStarted {
        /// The task.
        task: TaskRef,
    },
    /// A task finished.
    #[serde(rename_all = "camelCase")]
    TaskFinished {
        /// The task.
        task: TaskRef,
        /// What it did.
        outcome: Outcome,
        /// More about it (dry-run changes, wait time, deletion state).
        detail: Option<String>,
        /// The error, for failed and interrupted tasks.
        error: Option<String>,
        /// HTTP requests tried for the main call (1 when no retry was needed).
        attempts: u32,
        /// How long it ran.
        #[serde(serialize_with = "seconds")]
        duration: Duration,
    },
    /// A transient error; the request is tried again after `delay`.
    #[serde(rename_all = "camelCase")]
    Retrying {
        /// The task.
        task: TaskRef,
        /// Retry number (1 for the first retry).
        retry: u32,
        /// Backoff before the next try.
        #[serde(serialize_with = "seconds")]
        delay: Duration,
        /// The error.
        error: String,
    },
    /// A CRD applied by this task is Established; its kinds are served from now on.
    #[serde(rename_all = "camelCase")]
    CrdEstablished {
        /// The task.
        task: TaskRef,
        /// CRD name.
        name: String,
        /// Time spent waiting for Established (zero if it already was).
        #[serde(serialize_with = "seconds")]
        waited: Duration,
    },
    /// A ClusterOperator is not done yet; the task waits (watching it).
    #[serde(rename_all = "camelCase")]
    WaitStarted {
        /// The task.
        task: TaskRef,
        /// ClusterOperator name.
        operator: String,
        /// Why it is not done, e.g. `operator=4.13.0 want 4.14.0`.
        blocking: Vec<String>,
        /// The CVO's error for the operator's state (`checkOperatorHealth`), which its
        /// ClusterVersion status reports; `None` when there is none.
        error: Option<crate::cvo::error::UpdateError>,
    },
    /// The reasons a waited-on ClusterOperator is not done changed.
    #[serde(rename_all = "camelCase")]
    WaitProgress {
        /// The task.
        task: TaskRef,
        /// ClusterOperator name.
        operator: String,
        /// Why it is not done.
        blocking: Vec<String>,
        /// The CVO's error for the operator's state (`checkOperatorHealth`), which its
        /// ClusterVersion status reports; `None` when there is none.
        error: Option<crate::cvo::error::UpdateError>,
    },
    /// A waited-on ClusterOperator is done.
    #[serde(rename_all = "camelCase")]
    WaitDone {
        /// The task.
        task: TaskRef,
        /// ClusterOperator name.
        operator: String,
        /// Time since [`EventKind::WaitStarted`].
        #[serde(serialize_with = "seconds")]
        waited: Duration,
    },
    /// A DELETE was accepted (or, in a dry run, would be).
    #[serde(rename_all = "camelCase")]
    DeleteRequested {
        /// The task.
        task: TaskRef,
        /// Whether the object is already gone (no finalizers held it).
        gone: bool,
    },
    /// A deleted object is gone.
    #[serde(rename_all = "camelCase")]
    DeleteConfirmed {
        /// The task.
        task: TaskRef,
    },
    /// A `Warning` header from the API server.
    #[serde(rename_all = "camelCase")]
    Warning {
        /// The task whose request got it.
        task: Option<TaskRef>,
        /// The warning text.
        message: String,
    },
    /// Ctrl-C or the timeout: no new work starts; in-flight requests finish.
    #[serde(rename_all = "camelCase")]
    Stopping {
        /// Why.
        reason: StopReason,
    },
    /// The run is over.
    #[serde(rename_all = "camelCase")]
    RunFinished {
        /// Whether every task succeeded and the run was not stopped.
        ok: bool,
        /// HTTP requests sent during the run.
        requests: u64,
    },
}

/// A [`EventKind::TaskFinished`] as observers that show or record it read it.
#[derive(Debug, Clone, Copy)]
pub struct TaskEnd<'a> {
    /// The task.
    pub task: &'a TaskRef,
    /// What it did.
    pub outcome: Outcome,
    /// The error of a failed or interrupted task, else the detail, if any.
    pub message: Option<&'a str>,
}

impl EventKind {
    /// The task's end, when this is a [`EventKind::TaskFinished`].
    #[must_use]
    pub fn task_end(&self) -> Option<TaskEnd<'_>> {
        match self {
            EventKind::TaskFinished {
                task,
                outcome,
                detail,
                error,
                ..
            } => Some(TaskEnd {
                task,
                outcome: *outcome,
                message: error.as_deref().or(detail.as_deref()),
            }),
            _ => None,
        }
    }
}

/// Stamps and delivers events.
#[derive(Clone)]
pub struct Emitter {
    observer: Arc<dyn ApplyObserver>,
    start: tokio::time::Instant,
}

impl Emitter {
    /// An emitter whose run starts now.
    #[must_use]
    pub fn new(observer: Arc<dyn ApplyObserver>) -> Self {
        Emitter {
            observer,
            start: tokio::time::Instant::now(),
        }
    }

    /// When the run started.
    #[must_use]
    pub fn start(&self) -> tokio::time::Instant {
        self.start
    }

    /// Delivers one event, stamped now.
    pub fn emit(&self, kind: EventKind) {
        let instant = tokio::time::Instant::now();
        self.observer.on_event(&ApplyEvent {
            at: SystemTime::now(),
            instant,
            elapsed: instant - self.start,
            kind,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_type_tag() {
        let log = Arc::new(EventLog::new());
        let e = Emitter::new(log.clone());
        e.emit(EventKind::Stopping {
            reason: StopReason::TimedOut,
        });
        let v = serde_json::to_value(&log.events()[0]).unwrap();
        assert_eq!(v["type"], "Stopping");
        assert_eq!(v["reason"], "timed-out");
        assert!(v["at"].as_str().unwrap().ends_with('Z'));
        assert!(v["elapsed"].is_f64());
    }

    #[test]
    fn outcomes_print_kebab_case() {
        assert_eq!(
            Outcome::CreateOnlySkipped.to_string(),
            "create-only-skipped"
        );
        assert_eq!(
            serde_json::to_value(Outcome::AlreadyAbsent).unwrap(),
            "already-absent"
        );
        assert!(Outcome::Unchanged.is_success());
        assert!(!Outcome::Failed.is_success());
    }
}
