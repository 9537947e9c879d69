//! What the simulators report: their events ([`SimEvent`], to a [`SimObserver`] such as the
//! e2e timeline) and the operator simulator's [`SimSummary`].

use std::collections::HashMap;
use std::time::SystemTime;

use tokio::time::Instant;

use super::pods::PodHarm;
use crate::manifest::ObjectId;

/// What the simulator saw or did.
#[derive(Debug, Clone, PartialEq)]
pub enum SimEventKind {
    /// A watched workload changed: its generation and whether its template carries the
    /// payload's (`Err` says what differs).
    Workload {
        /// The workload.
        id: ObjectId,
        /// `metadata.generation`.
        generation: i64,
        /// Whether it carries the payload's template.
        updated: Result<(), String>,
    },
    /// A watched workload was deleted.
    WorkloadGone {
        /// The workload.
        id: ObjectId,
    },
    /// A simulated operator's ClusterOperator status changed (as seen by the watch).
    Operator {
        /// The ClusterOperator name.
        name: String,
        /// [`summary`](super::status::summary) of its status.
        status: String,
    },
    /// The simulator wrote an operator's status.
    Reported {
        /// The ClusterOperator name.
        name: String,
        /// [`summary`](super::status::summary) of the status written.
        status: String,
    },
    /// A status write failed (it is tried again).
    WriteFailed {
        /// The ClusterOperator name.
        name: String,
        /// The error.
        error: String,
    },
    /// A simulated pod started, became available, took or lost its lease, or stopped.
    Pod {
        /// Its workload.
        workload: ObjectId,
        /// `<workload>#<generation>`.
        pod: String,
        /// What happened, in words (`pod op#2 started (ServiceAccount ns/sa)`).
        change: String,
    },
    /// A live simulated pod was harmed.
    Harm(PodHarm),
    /// A watch failed (it is re-listed).
    WatchFailed {
        /// The kind watched.
        kind: String,
        /// The error.
        error: String,
    },
}

/// One event, stamped.
#[derive(Debug, Clone)]
pub struct SimEvent {
    /// Wall-clock time.
    pub at: SystemTime,
    /// Monotonic time, comparable with [`crate::apply::ApplyEvent::instant`].
    pub instant: Instant,
    /// What happened.
    pub kind: SimEventKind,
}

/// Receives the simulator's events (called from its loop: be quick).
pub trait SimObserver: Send + Sync {
    /// One event.
    fn on_sim_event(&self, event: &SimEvent);
}

impl<F> SimObserver for F
where
    F: Fn(&SimEvent) + Send + Sync,
{
    fn on_sim_event(&self, event: &SimEvent) {
        self(event);
    }
}

/// Sends `kind`, stamped now, to `observer` when there is one.
pub(crate) fn notify(observer: Option<&std::sync::Arc<dyn SimObserver>>, kind: SimEventKind) {
    if let Some(o) = observer {
        o.on_sim_event(&SimEvent {
            at: SystemTime::now(),
            instant: Instant::now(),
            kind,
        });
    }
}

/// What a finished simulator did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimSummary {
    /// Status writes per operator.
    pub reports: HashMap<String, usize>,
    /// Failed status writes.
    pub write_failures: usize,
}
