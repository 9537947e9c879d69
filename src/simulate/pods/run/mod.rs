//! The pod loop: follow the workloads and what their pods need, run each generation's life,
//! and act as each live pod. What a deleted dependency does is [`dependencies`]'.

mod dependencies;
mod stop;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Client;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::elector::{Elector, Tick};
use super::follow::{self, Item, Watched, id_of};
use super::generation::{Generation, Pods, State, may_lease};
use super::identity::{Identity, Rights};
use super::workload::{self, Dependency, Rollout, Use};
use super::{HarmKind, LeaseGap, PodBoard, PodHarm, PodOptions, PodSummary, RBAC_SETTLE};
use crate::cluster::list_watch::CollectionEvent;
use crate::cluster::request::RequestError;
use crate::manifest::ObjectId;
use crate::rbac::{Right, describe, lost};
use crate::simulate::events::notify;
use crate::simulate::wake::{Wake, wake};
use crate::simulate::{SimEventKind, SimObserver};

/// Starts the pod loop for `workloads` (see [`PodSimulator::start`]); it runs until `cancel`.
pub(super) fn spawn(
    client: Client,
    workloads: Vec<ObjectId>,
    options: PodOptions,
    observer: Option<Arc<dyn SimObserver>>,
    board: Arc<PodBoard>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<PodSummary> {
    let l = Loop {
        client,
        options,
        observer,
        board,
        interesting: workloads.into_iter().collect(),
        pods: HashMap::new(),
        present: HashSet::new(),
        deleted: HashSet::new(),
        rbac_due: None,
        summary: PodSummary::default(),
    };
    tokio::spawn(l.run(cancel))
}

struct Loop {
    client: Client,
    options: PodOptions,
    observer: Option<Arc<dyn SimObserver>>,
    board: Arc<PodBoard>,
    interesting: HashSet<ObjectId>,
    pods: HashMap<ObjectId, Pods>,
    /// ConfigMaps, Secrets and ServiceAccounts that exist.
    present: HashSet<ObjectId>,
    /// Those that existed during the run and were deleted (and are not back): a pod that needs
    /// one cannot start. One never seen is not here: a kubelet waits for it, and outside the
    /// payload something else may create it.
    deleted: HashSet<ObjectId>,
    rbac_due: Option<Instant>,
    summary: PodSummary,
}

fn forbidden(e: &RequestError) -> bool {
    e.is(403)
}

impl Loop {
    fn emit(&self, kind: SimEventKind) {
        notify(self.observer.as_ref(), kind);
    }

    fn pod_event(&self, workload: &ObjectId, pod: &str, change: String) {
        self.emit(SimEventKind::Pod {
            workload: workload.clone(),
            pod: pod.to_string(),
            change,
        });
    }

    fn harm(&mut self, harm: PodHarm) {
        self.summary.harms += 1;
        tracing::warn!(
            "simulated pod {} ({}): {} {}",
            harm.pod,
            harm.identity,
            harm.kind,
            harm.what
        );
        self.emit(SimEventKind::Harm(harm));
    }

    async fn run(mut self, cancel: CancellationToken) -> PodSummary {
        let mut streams = follow::streams(&self.client, &self.interesting);
        let mut next: Option<Instant> = None;
        loop {
            match wake(&mut streams, next, std::future::pending(), &cancel).await {
                Wake::Stop => break,
                Wake::Events(items) => items.into_iter().for_each(|item| self.handle(item)),
            }
            next = self.step(Instant::now()).await;
        }
        // Graceful stop: every pod ends at once, leaders release their leases.
        let ids: Vec<ObjectId> = self.pods.keys().cloned().collect();
        for id in ids {
            if let Some(p) = self.pods.get_mut(&id) {
                for g in &mut p.generations {
                    g.state = State::Stopping;
                }
            }
            self.stop_marked(&id, false).await;
        }
        // Danger windows still open at the end.
        for p in self.pods.values_mut() {
            for d in std::mem::take(&mut p.dangers) {
                let w = p.window(d, None);
                self.summary.danger_windows.push(w);
            }
        }
        // Gaps still open at the end: nobody led again before the run ended.
        for p in self.pods.values_mut() {
            if let Some((pod, from)) = p.gap.take() {
                self.summary.lease_gaps.push(LeaseGap {
                    workload: p.id.clone(),
                    pod,
                    from,
                    to: None,
                });
            }
        }
        self.summary
    }

    fn handle(&mut self, (which, event): Item) {
        match event {
            CollectionEvent::Failed(e) => {
                self.emit(SimEventKind::WatchFailed {
                    kind: which.kind().into(),
                    error: e.to_string(),
                });
            }
            CollectionEvent::Listed(items) => match which {
                Watched::Rbac => self.rbac_changed(),
                Watched::Deployment | Watched::DaemonSet => {
                    for id in follow::gone(self.pods.keys(), which, &items) {
                        self.workload_gone(&id);
                    }
                    for o in items {
                        self.workload(which.kind(), &o);
                    }
                }
                _ => {
                    for id in follow::gone(self.present.iter(), which, &items) {
                        self.dependency_gone(&id);
                    }
                    for id in items.iter().map(|o| id_of(which.kind(), o)) {
                        self.dependency_present(id);
                    }
                }
            },
            CollectionEvent::Applied(o) => match which {
                Watched::Rbac => self.rbac_changed(),
                Watched::Deployment | Watched::DaemonSet => self.workload(which.kind(), &o),
                _ => self.dependency_present(id_of(which.kind(), &o)),
            },
            CollectionEvent::Deleted(o) => match which {
                Watched::Rbac => self.rbac_changed(),
                Watched::Deployment | Watched::DaemonSet => {
                    self.workload_gone(&id_of(which.kind(), &o));
                }
                _ => self.dependency_gone(&id_of(which.kind(), &o)),
            },
        }
    }

    fn rbac_changed(&mut self) {
        if self.rbac_due.is_none() {
            self.rbac_due = Some(Instant::now() + RBAC_SETTLE);
        }
    }

    fn workload(&mut self, kind: &str, live: &Value) {
        let id = id_of(kind, live);
        if !self.interesting.contains(&id) {
            return;
        }
        let Some(template) = workload::template(live) else {
            return;
        };
        let hash = workload::template_hash(template);
        let namespace = id.namespace.clone().unwrap_or_default();
        let timing = self.options.timings.of(&id);
        let p = self.pods.entry(id.clone()).or_insert_with(|| Pods {
            id: id.clone(),
            rollout: Rollout::Overlap,
            timing,
            hash: None,
            generations: Vec::new(),
            count: 0,
            last_rules: None,
            gap: None,
            live: Value::Null,
            dangers: Vec::new(),
        });
        p.rollout = workload::rollout(kind, live);
        p.live = live.clone();
        if p.hash == Some(hash) {
            return;
        }
        p.hash = Some(hash);
        p.count += 1;
        // No pod of the old template starts again.
        let closed = p.close_dangers(
            None,
            Instant::now(),
            &format!("{id} moved to a new template"),
        );
        if p.rollout == Rollout::StopFirst {
            p.generations.iter_mut().for_each(Generation::stop);
        }
        let now = Instant::now();
        p.generations.push(Generation {
            pod: format!("{}#{}", id.name, p.count),
            hash,
            identity: Identity {
                namespace: namespace.clone(),
                name: workload::service_account(template),
            },
            deps: workload::dependencies(template, &namespace),
            state: State::Starting,
            due: now + p.timing.start,
            rights: None,
            seen: HashSet::new(),
            reported: HashSet::new(),
            elects: false,
            elector: Elector::new(now),
            blocked: false,
            ran: false,
        });
        self.windows_closed(closed);
    }

    fn workload_gone(&mut self, id: &ObjectId) {
        if let Some(p) = self.pods.get_mut(id) {
            p.hash = None;
            p.generations.iter_mut().for_each(Generation::stop);
            let closed = p.close_dangers(None, Instant::now(), &format!("{id} was deleted"));
            self.windows_closed(closed);
        }
    }

    /// Advances every pod; returns when something is due next.
    async fn step(&mut self, now: Instant) -> Option<Instant> {
        let ids: Vec<ObjectId> = self.pods.keys().cloned().collect();
        // RBAC changed and a pod is about to stop: review before it goes, so that what it
        // lost while it ran is seen however short the rest of its life.
        let stopping = self
            .pods
            .values()
            .flat_map(|p| &p.generations)
            .any(|g| g.state == State::Stopping || (g.state == State::Running && g.due <= now));
        if self.rbac_due.is_some_and(|t| t <= now || stopping) {
            self.rbac_due = None;
            self.review_rights().await;
        }
        for id in &ids {
            self.stop_marked(id, true).await;
            self.start_due(id, now).await;
            self.available_due(id, now).await;
            self.leases_due(id, now).await;
        }
        if self.rbac_due.is_some_and(|t| t <= now) {
            self.rbac_due = None;
            self.review_rights().await;
        }
        for id in &ids {
            self.publish(id);
        }
        self.pods
            .retain(|_, p| p.hash.is_some() || !p.generations.is_empty());
        let mut next = self.rbac_due;
        let mut due = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        for p in self.pods.values() {
            for g in &p.generations {
                match g.state {
                    // A blocked pod waits for its object: the watch that sees it wakes the loop.
                    State::Starting if g.blocked => {}
                    State::Starting => due(g.due),
                    State::Running if !self.options.follow_rollout => due(g.due),
                    State::Running => {}
                    State::Stopping => due(now),
                    State::Terminating => due(g.due),
                    State::Available => {}
                }
                if g.live() && g.elects {
                    due(g.elector.next);
                }
            }
        }
        next
    }

    async fn start_due(&mut self, id: &ObjectId, now: Instant) {
        let Some(p) = self.pods.get(id) else { return };
        // A generation waits while an older one is stopping, and under Recreate until the old
        // pods have terminated.
        let recreate = p.rollout == Rollout::StopFirst;
        if p.generations
            .iter()
            .any(|g| g.state == State::Stopping || (recreate && g.state == State::Terminating))
        {
            return;
        }
        let due: Vec<usize> = p
            .generations
            .iter()
            .enumerate()
            .filter(|(_, g)| g.state == State::Starting && g.due <= now)
            .map(|(i, _)| i)
            .collect();
        for i in due {
            if self.blocked(id, i) {
                continue;
            }
            let identity = self.pods[id].generations[i].identity.clone();
            let rights = match identity.rights(&self.client).await {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!("simulated pod of {id}: rules review as {identity}: {e}");
                    None
                }
            };
            let seen: HashSet<ObjectId> = self.pods[id].generations[i]
                .deps
                .iter()
                .map(Dependency::id)
                .filter(|d| self.present.contains(d))
                .collect();
            // Started without a pull secret: it runs, but its template is in danger.
            let unsafe_pull: Vec<ObjectId> = self.pods[id].generations[i]
                .deps
                .iter()
                .filter(|d| d.used == Use::PullSecret)
                .map(Dependency::id)
                .filter(|d| self.deleted.contains(d))
                .collect();
            let p = self.pods.get_mut(id).expect("known workload");
            let timing = p.timing;
            let min_ready = workload::min_ready(&p.live);
            let previous = p.last_rules.clone();
            let g = &mut p.generations[i];
            g.state = State::Running;
            g.ran = true;
            g.due = now + timing.ready + min_ready;
            g.seen = seen;
            g.elects = rights
                .as_ref()
                .is_some_and(|r| may_lease(r, &id.name, &["get", "update"]));
            g.elector.next = now;
            g.rights.clone_from(&rights);
            let pod = g.pod.clone();
            let started = format!("pod {pod} started (ServiceAccount {identity})");
            if let Some(r) = &rights {
                p.last_rules = Some((pod.clone(), r.clone()));
            }
            self.summary.pods_started += 1;
            self.pod_event(id, &pod, started);
            for d in &unsafe_pull {
                self.open_dangers(d);
            }
            if let (Some((before, old)), Some(new)) = (previous, rights) {
                let missing = lost(&old.rules, &new.rules);
                if !missing.is_empty() {
                    self.harm(PodHarm {
                        workload: id.clone(),
                        pod,
                        identity,
                        kind: HarmKind::StartedWithout,
                        what: format!("{} (which {before} had)", describe(&missing)),
                        object: Some(id.clone()),
                    });
                }
            }
        }
    }

    async fn available_due(&mut self, id: &ObjectId, now: Instant) {
        let Some(p) = self.pods.get_mut(id) else {
            return;
        };
        let mut newest_available: Option<usize> = None;
        let mut events = Vec::new();
        for (i, g) in p.generations.iter_mut().enumerate() {
            if g.state == State::Running && g.due <= now {
                g.state = State::Available;
                events.push(g.pod.clone());
            }
            if g.state == State::Available {
                newest_available = Some(i);
            }
        }
        // Old pods go once the newest generation is available.
        if let Some(n) = newest_available
            && n + 1 == p.generations.len()
        {
            p.generations[..n].iter_mut().for_each(Generation::stop);
        }
        for pod in events {
            self.pod_event(id, &pod, format!("pod {pod} available"));
        }
        self.stop_marked(id, true).await;
    }

    async fn leases_due(&mut self, id: &ObjectId, now: Instant) {
        let duration = self.options.lease_duration;
        let Some(count) = self.pods.get(id).map(|p| p.generations.len()) else {
            return;
        };
        for i in 0..count {
            let g = &mut self.pods.get_mut(id).expect("known workload").generations[i];
            if !(g.live() && g.elects && g.elector.next <= now) {
                continue;
            }
            let (identity, pod) = (g.identity.clone(), g.pod.clone());
            let tick = g
                .elector
                .tick(&self.client, &identity, id, &pod, duration, now)
                .await;
            match tick {
                Tick::Waits | Tick::Leads { first: false } => {}
                Tick::Leads { first: true } => {
                    let p = self.pods.get_mut(id).expect("known workload");
                    if let Some((failed, from)) = p.gap.take() {
                        self.summary.lease_gaps.push(LeaseGap {
                            workload: id.clone(),
                            pod: failed,
                            from,
                            to: Some(now),
                        });
                    }
                    self.pod_event(id, &pod, format!("pod {pod} leads"));
                }
                Tick::Failed { error, .. } if error.is(409) => {}
                Tick::Failed {
                    verb,
                    error,
                    was_leader,
                    lost_lead,
                } => {
                    let p = self.pods.get_mut(id).expect("known workload");
                    if was_leader && p.gap.is_none() {
                        p.gap = Some((pod.clone(), now));
                    }
                    let first = forbidden(&error)
                        && p.generations[i]
                            .reported
                            .insert(format!("refused {verb} lease"));
                    if first {
                        let namespace = id.namespace.clone().unwrap_or_default();
                        self.harm(PodHarm {
                            workload: id.clone(),
                            pod: pod.clone(),
                            identity: identity.clone(),
                            kind: HarmKind::Refused,
                            what: format!(
                                "{verb} leases.coordination.k8s.io {namespace}/{}",
                                id.name
                            ),
                            object: Some(ObjectId {
                                group: "coordination.k8s.io".into(),
                                kind: "Lease".into(),
                                namespace: Some(namespace),
                                name: id.name.clone(),
                            }),
                        });
                    } else if !forbidden(&error) {
                        tracing::debug!("simulated pod {pod}: lease {verb}: {error}");
                    }
                    if lost_lead {
                        self.pod_event(id, &pod, format!("pod {pod} lost the lease"));
                    }
                }
            }
        }
    }

    async fn review_rights(&mut self) {
        let mut todo: Vec<(ObjectId, usize, Identity)> = Vec::new();
        for p in self.pods.values() {
            for (i, g) in p.generations.iter().enumerate() {
                if g.live() && g.rights.is_some() {
                    todo.push((p.id.clone(), i, g.identity.clone()));
                }
            }
        }
        // One review per identity and namespace, shared by its pods.
        let mut answers: HashMap<Identity, Option<Rights>> = HashMap::new();
        for (_, _, identity) in &todo {
            if !answers.contains_key(identity) {
                let r = identity.rights(&self.client).await.ok();
                answers.insert(identity.clone(), r);
            }
        }
        let mut harms = Vec::new();
        for (id, i, identity) in todo {
            let Some(Some(now)) = answers.get(&identity) else {
                continue;
            };
            let Some(g) = self
                .pods
                .get_mut(&id)
                .and_then(|p| p.generations.get_mut(i))
            else {
                continue;
            };
            let Some(start) = &g.rights else { continue };
            let missing: Vec<Right> = lost(&start.rules, &now.rules)
                .into_iter()
                .filter(|r| g.reported.insert(format!("lost {r:?}")))
                .collect();
            if g.elector.leader && !may_lease(now, &id.name, &["update"]) {
                // The leader can no longer renew: nobody leads once its lease runs out.
                let pod = g.pod.clone();
                if let Some(p) = self.pods.get_mut(&id)
                    && p.gap.is_none()
                {
                    p.gap = Some((pod, Instant::now()));
                }
            }
            let Some(g) = self
                .pods
                .get_mut(&id)
                .and_then(|p| p.generations.get_mut(i))
            else {
                continue;
            };
            if !missing.is_empty() {
                harms.push(g.harm(&id, HarmKind::RightLost, describe(&missing), None));
            }
        }
        for h in harms {
            self.harm(h);
        }
    }

    fn publish(&self, id: &ObjectId) {
        let acting = self.pods.get(id).and_then(Pods::acting);
        self.board.set(id, acting);
    }
}
