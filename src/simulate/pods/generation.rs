//! A workload's simulated pods: its generations, their state, and which pod acts for it.

use std::collections::HashSet;

use serde_json::Value;
use tokio::time::Instant;

use super::elector::Elector;
use super::identity::{Identity, Rights};
use super::workload::{Dependency, Rollout};
use super::{Acting, HarmKind, PodHarm, Timing};
use crate::manifest::ObjectId;
use crate::rbac::Right;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Starting,
    Running,
    Available,
    Stopping,
}

pub(super) struct Generation {
    pub(super) pod: String,
    pub(super) hash: u64,
    pub(super) identity: Identity,
    pub(super) deps: Vec<Dependency>,
    pub(super) state: State,
    /// When it starts running (Starting) or becomes available (Running).
    pub(super) due: Instant,
    pub(super) rights: Option<Rights>,
    /// Dependencies seen present while it ran.
    pub(super) seen: HashSet<ObjectId>,
    /// Harms already reported (one event per refused request or lost right set).
    pub(super) reported: HashSet<String>,
    pub(super) elects: bool,
    pub(super) elector: Elector,
}

impl Generation {
    pub(super) fn live(&self) -> bool {
        matches!(self.state, State::Running | State::Available)
    }
}

pub(super) struct Pods {
    pub(super) id: ObjectId,
    pub(super) rollout: Rollout,
    pub(super) timing: Timing,
    pub(super) hash: Option<u64>,
    pub(super) generations: Vec<Generation>,
    pub(super) count: u32,
    /// The rules the newest started generation had at start.
    pub(super) last_rules: Option<(String, Rights)>,
    /// An open leaderless time: the leader that failed to renew and since when.
    pub(super) gap: Option<(String, Instant)>,
    /// The workload as last seen.
    pub(super) live: Value,
}

impl Generation {
    /// A harm this pod suffered.
    pub(super) fn harm(
        &self,
        workload: &ObjectId,
        kind: HarmKind,
        what: String,
        object: Option<ObjectId>,
    ) -> PodHarm {
        PodHarm {
            workload: workload.clone(),
            pod: self.pod.clone(),
            identity: self.identity.clone(),
            kind,
            what,
            object,
        }
    }
}

/// Whether `rights` allow every verb of `verbs` on the Lease `name` of their namespace.
pub(super) fn may_lease(rights: &Rights, name: &str, verbs: &[&str]) -> bool {
    verbs.iter().all(|verb| {
        let right = Right::Resource {
            verb: (*verb).into(),
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            name: Some(name.into()),
        };
        rights.rules.iter().any(|r| r.grants(&right))
    })
}

impl Pods {
    /// `id` exists (again): live pods that need it have now seen it.
    pub(super) fn dependency_present(&mut self, id: &ObjectId) {
        for g in self.generations.iter_mut().filter(|g| g.live()) {
            if g.deps.iter().any(|d| &d.id() == id) {
                g.seen.insert(id.clone());
            }
        }
    }

    /// `id` is gone: the harm of every live pod that needs it and saw it while it ran.
    pub(super) fn dependency_gone(&mut self, id: &ObjectId) -> Vec<PodHarm> {
        let mut harms = Vec::new();
        for g in self.generations.iter_mut().filter(|g| g.live()) {
            if !g.seen.remove(id) {
                continue;
            }
            if let Some(dep) = g.deps.iter().find(|d| &d.id() == id) {
                let what = format!("{} {}/{} ({})", dep.kind, dep.namespace, dep.name, dep.via);
                harms.push(g.harm(
                    &self.id,
                    HarmKind::DependencyMissing,
                    what,
                    Some(id.clone()),
                ));
            }
        }
        harms
    }

    /// The pod acting for the workload: its leader, or, when no live pod may elect, its
    /// newest live pod; `None` while an election is pending or nothing runs.
    pub(super) fn acting(&self) -> Option<Acting> {
        let live: Vec<&Generation> = self.generations.iter().filter(|g| g.live()).collect();
        let chosen = live
            .iter()
            .find(|g| g.elector.leader)
            .copied()
            .or_else(|| {
                if live.iter().any(|g| g.elects) {
                    None
                } else {
                    live.last().copied()
                }
            })?;
        Some(Acting {
            pod: chosen.pod.clone(),
            identity: chosen.identity.clone(),
            template_hash: chosen.hash,
        })
    }
}
