//! Simulated pods that live: what stands in for the pods of a payload's Deployments and
//! DaemonSets on a cluster without a kubelet, so that an e2e run feels what a running pod
//! would feel when the payload takes something from it.
//!
//! - [`workload`]: one generation of pods per pod template; a template change rolls out as the
//!   workload's strategy says ([`workload::Rollout`]); what each generation needs to exist.
//! - [`identity`]: requests a pod sends as its ServiceAccount (impersonation), and its rights
//!   (a SelfSubjectRulesReview as itself).
//! - [`lease`]: leader election on a Lease named after the workload (the decisions), and
//!   `elector`: one pod's election steps (the requests).
//! - [`run`](PodSimulator): the loop. It follows the workloads, starts and stops generations
//!   with the [`PodTimings`], records each pod's rights when it starts and reviews them again
//!   whenever an RBAC object or ServiceAccount changes, holds and renews the leases, follows
//!   the ConfigMaps, Secrets and ServiceAccounts the pods need, and publishes who acts for each
//!   workload on the [`PodBoard`] (the operator simulator writes a ClusterOperator's status as
//!   that pod).
//!
//! Harm ([`PodHarm`]) is what a real pod would have suffered, by the kubelet's rules
//! ([`workload::Use`]): a refused request, a right held at start and lost while running, its
//! ServiceAccount deleted while it runs (its token is rejected), a new generation that starts
//! without a right its predecessor had, or a pod that has to start while an object it needs
//! was deleted (it cannot: `started-without`, and it waits for the object). A ConfigMap or
//! Secret deleted while a pod runs does not harm it: the kubelet keeps its volume files and
//! its environment was fixed when its container started. When that pod's template is its
//! workload's current one, no pod of it could start again (a restart on another node, a
//! scale-up): a [`DangerWindow`], reported as a warning, until the object is back or the
//! workload moves to another template.
//!
//! Request budget: one rules review per pod when it starts and one per live pod after each
//! burst of RBAC changes (bursts are gathered for [`RBAC_SETTLE`]); one lease request per
//! electing pod per third of the lease duration; nothing else (dependencies and workloads are
//! followed by four list+watches, not by polling).

mod elector;
mod follow;
mod generation;
pub mod identity;
pub mod lease;
mod run;
pub mod workload;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use identity::Identity;

use super::SimObserver;
use crate::manifest::ObjectId;

/// How long RBAC changes are gathered before the live pods review their rights again.
pub const RBAC_SETTLE: Duration = Duration::from_millis(100);

/// How long a pod takes to start, to become available, and to terminate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// From the template being seen to the pod running.
    pub start: Duration,
    /// From running to available.
    pub ready: Duration,
    /// From being told to stop (it releases its lease at once) to having stopped: the time a
    /// real pod spends terminating (its grace period), still running with its volumes.
    pub stop: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            start: Duration::from_millis(100),
            ready: Duration::from_millis(100),
            stop: Duration::ZERO,
        }
    }
}

/// Pod timings: a default and per-workload ones (`--pods TARGET=start:DUR,ready:DUR`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodTimings {
    /// For workloads without their own.
    pub default: Timing,
    /// By workload name or `namespace/name`.
    pub by_target: Vec<(String, Timing)>,
}

impl PodTimings {
    /// The timing of `workload`.
    #[must_use]
    pub fn of(&self, workload: &ObjectId) -> Timing {
        let full = format!(
            "{}/{}",
            workload.namespace.as_deref().unwrap_or_default(),
            workload.name
        );
        self.by_target
            .iter()
            .rev()
            .find(|(t, _)| *t == workload.name || *t == full)
            .map_or(self.default, |(_, t)| *t)
    }

    /// Adds one `TARGET=ITEM,...` spec (`*` sets the default); items are `start:DURATION`,
    /// `ready:DURATION` and `stop:DURATION`.
    ///
    /// # Errors
    /// A message naming what is wrong in `spec`.
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        let (target, items) = spec.split_once('=').ok_or_else(|| {
            format!("{spec:?}: expected TARGET=start:DURATION,ready:DURATION,stop:DURATION")
        })?;
        let target = target.trim();
        if target.is_empty() {
            return Err(format!(
                "{spec:?}: the target (a workload name, ns/name or *) is empty"
            ));
        }
        let mut timing = if target == "*" {
            self.default
        } else {
            self.by_target
                .iter()
                .rev()
                .find(|(t, _)| t == target)
                .map_or(self.default, |(_, t)| *t)
        };
        for item in items.split(',').map(str::trim) {
            let (key, value) = item.split_once(':').ok_or_else(|| {
                format!("{spec:?}: {item:?} is not start:, ready: or stop:DURATION")
            })?;
            let d = super::script::parse_duration(value).map_err(|e| format!("{spec:?}: {e}"))?;
            match key {
                "start" => timing.start = d,
                "ready" => timing.ready = d,
                "stop" => timing.stop = d,
                other => {
                    return Err(format!(
                        "{spec:?}: unknown item {other:?} (use start:, ready: or stop:DURATION)"
                    ));
                }
            }
        }
        if target == "*" {
            self.default = timing;
        } else {
            self.by_target.push((target.to_string(), timing));
        }
        Ok(())
    }
}

/// Settings of the pod simulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOptions {
    /// Start and ready times.
    pub timings: PodTimings,
    /// `leaseDurationSeconds` of the leader leases; holders renew and candidates retry every
    /// third of it.
    pub lease_duration: Duration,
    /// On a cluster that runs pods (`--wait-available`): a generation becomes available when
    /// its workload's rollout is complete, not after the ready time.
    pub follow_rollout: bool,
}

impl Default for PodOptions {
    fn default() -> Self {
        PodOptions {
            timings: PodTimings::default(),
            lease_duration: Duration::from_secs(3),
            follow_rollout: false,
        }
    }
}

/// A running pod simulator; stop it with [`PodSimulator::stop`].
pub struct PodSimulator {
    cancel: CancellationToken,
    handle: tokio::task::JoinHandle<PodSummary>,
    board: Arc<PodBoard>,
}

impl PodSimulator {
    /// Starts simulating the pods of `workloads` (Deployments and DaemonSets) against the
    /// cluster behind `client`, which must be allowed to impersonate ServiceAccounts.
    #[must_use]
    pub fn start(
        client: Client,
        workloads: Vec<ObjectId>,
        options: PodOptions,
        observer: Option<Arc<dyn SimObserver>>,
    ) -> Self {
        let cancel = CancellationToken::new();
        let board = Arc::new(PodBoard::default());
        let handle = run::spawn(
            client,
            workloads,
            options,
            observer,
            board.clone(),
            cancel.clone(),
        );
        PodSimulator {
            cancel,
            handle,
            board,
        }
    }

    /// Who acts for each workload (read by the operator simulator).
    #[must_use]
    pub fn board(&self) -> Arc<PodBoard> {
        self.board.clone()
    }

    /// Stops every pod (leaders release their leases) and returns what happened.
    pub async fn stop(self) -> PodSummary {
        self.cancel.cancel();
        self.handle.await.unwrap_or_default()
    }
}

/// What a pod suffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HarmKind {
    /// A request of the live pod was refused (403).
    Refused,
    /// A right the pod held when it started is gone while it runs.
    RightLost,
    /// The pod's ServiceAccount existed while it ran and is gone: its token is rejected. (A
    /// deleted ConfigMap or Secret does not harm a running pod: see [`workload::Use`].)
    DependencyMissing,
    /// A new generation started without a right the previous generation had when it started,
    /// or a pod has to start while a ConfigMap, Secret or ServiceAccount it needs is deleted
    /// (it cannot start until the object is back).
    StartedWithout,
}

impl fmt::Display for HarmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HarmKind::Refused => "refused",
            HarmKind::RightLost => "right-lost",
            HarmKind::DependencyMissing => "dependency-missing",
            HarmKind::StartedWithout => "started-without",
        })
    }
}

/// One harm, as the simulator saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodHarm {
    /// The workload of the pod.
    pub workload: ObjectId,
    /// `<workload>#<generation>`.
    pub pod: String,
    /// Who the pod runs as.
    pub identity: Identity,
    /// What kind of harm.
    pub kind: HarmKind,
    /// What was refused, lost or is missing, in words.
    pub what: String,
    /// The object refused or missing, when there is one (for naming the cause).
    pub object: Option<ObjectId>,
}

/// A time during which no generation of a workload could lead: from a leader's first failed
/// renewal to the next acquisition (`to: None`: never, up to the end of the run).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseGap {
    /// The workload.
    pub workload: ObjectId,
    /// The leader that failed to renew.
    pub pod: String,
    /// When its renewal first failed.
    pub from: Instant,
    /// When a generation took the lease again.
    pub to: Option<Instant>,
}

/// A time during which pods of a workload's current template ran but no pod of that template
/// could have started (after a restart on another node, or a scale-up): an object the template
/// needs was deleted. The running pods keep it (see [`workload::Use`]), so this is a warning,
/// not harm.
#[derive(Debug, Clone, PartialEq)]
pub struct DangerWindow {
    /// The workload.
    pub workload: ObjectId,
    /// A running pod of the template, `<workload>#<generation>`.
    pub pod: String,
    /// What is gone, how the template uses it and what it would stop, in words.
    pub what: String,
    /// The deleted object.
    pub object: ObjectId,
    /// When it was deleted (or when the pod started and found it deleted).
    pub from: Instant,
    /// When the window closed (`None`: still open at the end of the run).
    pub to: Option<Instant>,
    /// Why it closed: the object is back, the workload moved to another template, or it was
    /// deleted.
    pub closed_by: Option<String>,
}

/// What a finished pod simulator did.
#[derive(Debug, Clone, Default)]
pub struct PodSummary {
    /// Generations started.
    pub pods_started: usize,
    /// Leaderless times.
    pub lease_gaps: Vec<LeaseGap>,
    /// Harms seen.
    pub harms: usize,
    /// Times during which a workload's current pods could not have been started again.
    pub danger_windows: Vec<DangerWindow>,
}

/// The pod acting for a workload now: its leader, or, when no pod of the workload may hold a
/// lease, its newest running generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Acting {
    /// `<workload>#<generation>`.
    pub pod: String,
    /// Who it runs as.
    pub identity: Identity,
    /// [`workload::template_hash`] of its template.
    pub template_hash: u64,
}

/// Who acts for each workload, shared by the pod simulator (writer) and the operator
/// simulator (reader), with a change counter to wake the reader.
#[derive(Debug)]
pub struct PodBoard {
    acting: Mutex<HashMap<ObjectId, Acting>>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for PodBoard {
    fn default() -> Self {
        PodBoard {
            acting: Mutex::new(HashMap::new()),
            changes: tokio::sync::watch::channel(0).0,
        }
    }
}

impl PodBoard {
    /// The pod acting for `workload`, if one runs.
    ///
    /// # Panics
    /// If a writer panicked while holding the lock.
    #[must_use]
    pub fn acting(&self, workload: &ObjectId) -> Option<Acting> {
        self.acting
            .lock()
            .expect("board lock")
            .get(workload)
            .cloned()
    }

    /// A receiver that changes whenever the board does.
    #[must_use]
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn set(&self, workload: &ObjectId, acting: Option<Acting>) {
        let mut map = self.acting.lock().expect("board lock");
        let changed = match acting {
            Some(a) => map.insert(workload.clone(), a.clone()).as_ref() != Some(&a),
            None => map.remove(workload).is_some(),
        };
        drop(map);
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ns: &str, name: &str) -> ObjectId {
        ObjectId {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some(ns.into()),
            name: name.into(),
        }
    }

    #[test]
    fn timings_parse_per_target_with_a_default() {
        let mut t = PodTimings::default();
        t.add("*=start:1s").unwrap();
        t.add("op=ready:2s").unwrap();
        t.add("ns2/op=start:50ms,ready:0s,stop:3s").unwrap();
        assert_eq!(
            t.of(&id("ns", "op")),
            Timing {
                start: Duration::from_secs(1),
                ready: Duration::from_secs(2),
                stop: Duration::ZERO,
            }
        );
        assert_eq!(
            t.of(&id("ns2", "op")),
            Timing {
                start: Duration::from_millis(50),
                ready: Duration::ZERO,
                stop: Duration::from_secs(3),
            }
        );
        assert_eq!(t.of(&id("ns", "other")).start, Duration::from_secs(1));
        for bad in ["op", "=start:1s", "op=start", "op=halt:1s", "op=start:soon"] {
            assert!(t.add(bad).is_err(), "{bad}");
        }
    }
}
