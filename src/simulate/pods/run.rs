//! The pod loop: follow the workloads and what their pods need, run each generation's life,
//! and act as each live pod.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use futures::StreamExt as _;
use futures::stream::{BoxStream, SelectAll};
use kube::Client;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::identity::{Identity, Rights};
use super::lease::{self, Step};
use super::workload::{self, Dependency, Rollout};
use super::{
    Acting, HarmKind, LeaseGap, PodBoard, PodHarm, PodOptions, PodSummary, RBAC_SETTLE, Timing,
};
use crate::cluster::list_watch::{CollectionEvent, list_watch};
use crate::cluster::request::RequestError;
use crate::manifest::ObjectId;
use crate::rbac::{Right, describe, lost};
use crate::simulate::{SimEvent, SimEventKind, SimObserver};

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
        let l = Loop {
            client,
            options,
            observer,
            board: board.clone(),
            interesting: workloads.into_iter().collect(),
            pods: HashMap::new(),
            present: HashSet::new(),
            rbac_due: None,
            summary: PodSummary::default(),
        };
        let handle = tokio::spawn(l.run(cancel.clone()));
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Watched {
    Deployment,
    DaemonSet,
    ConfigMap,
    Secret,
    ServiceAccount,
    Rbac,
}

impl Watched {
    fn kind(self) -> &'static str {
        match self {
            Watched::Deployment => "Deployment",
            Watched::DaemonSet => "DaemonSet",
            Watched::ConfigMap => "ConfigMap",
            Watched::Secret => "Secret",
            Watched::ServiceAccount => "ServiceAccount",
            Watched::Rbac => "RBAC",
        }
    }
}

type Item = (Watched, CollectionEvent);

fn follow(client: &Client, which: Watched, path: &str) -> BoxStream<'static, Item> {
    list_watch(client.clone(), path.to_string())
        .map(move |e| (which, e))
        .boxed()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Starting,
    Running,
    Available,
    Stopping,
}

struct Generation {
    pod: String,
    hash: u64,
    identity: Identity,
    deps: Vec<Dependency>,
    state: State,
    /// When it starts running (Starting) or becomes available (Running).
    due: Instant,
    rights: Option<Rights>,
    /// Dependencies seen present while it ran.
    seen: HashSet<ObjectId>,
    /// Harms already reported (one event per refused request or lost right set).
    reported: HashSet<String>,
    elects: bool,
    leader: bool,
    lease: Option<Value>,
    last_renew: Option<Instant>,
    next_lease: Instant,
}

impl Generation {
    fn live(&self) -> bool {
        matches!(self.state, State::Running | State::Available)
    }
}

struct Pods {
    id: ObjectId,
    rollout: Rollout,
    timing: Timing,
    hash: Option<u64>,
    generations: Vec<Generation>,
    count: u32,
    /// The rules the newest started generation had at start.
    last_rules: Option<(String, Rights)>,
    /// An open leaderless time: the leader that failed to renew and since when.
    gap: Option<(String, Instant)>,
    /// The workload as last seen.
    live: Value,
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
    rbac_due: Option<Instant>,
    summary: PodSummary,
}

fn id_of(kind: &str, o: &Value) -> ObjectId {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    ObjectId {
        group: if matches!(kind, "Deployment" | "DaemonSet") {
            "apps".into()
        } else {
            String::new()
        },
        kind: kind.into(),
        namespace: s("/metadata/namespace"),
        name: s("/metadata/name").unwrap_or_default(),
    }
}

fn forbidden(e: &RequestError) -> bool {
    e.is(403)
}

impl Loop {
    fn emit(&self, kind: SimEventKind) {
        if let Some(o) = &self.observer {
            o.on_sim_event(&SimEvent {
                at: SystemTime::now(),
                instant: Instant::now(),
                kind,
            });
        }
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
        let mut streams: SelectAll<BoxStream<'static, Item>> = SelectAll::new();
        let kinds: HashSet<&str> = self.interesting.iter().map(|i| i.kind.as_str()).collect();
        if kinds.contains("Deployment") {
            streams.push(follow(
                &self.client,
                Watched::Deployment,
                "/apis/apps/v1/deployments",
            ));
        }
        if kinds.contains("DaemonSet") {
            streams.push(follow(
                &self.client,
                Watched::DaemonSet,
                "/apis/apps/v1/daemonsets",
            ));
        }
        for (w, path) in [
            (Watched::ConfigMap, "/api/v1/configmaps"),
            (Watched::Secret, "/api/v1/secrets"),
            (Watched::ServiceAccount, "/api/v1/serviceaccounts"),
            (Watched::Rbac, "/apis/rbac.authorization.k8s.io/v1/roles"),
            (
                Watched::Rbac,
                "/apis/rbac.authorization.k8s.io/v1/rolebindings",
            ),
            (
                Watched::Rbac,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            ),
            (
                Watched::Rbac,
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            ),
        ] {
            streams.push(follow(&self.client, w, path));
        }
        let mut next: Option<Instant> = None;
        loop {
            let sleep = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                item = streams.next() => match item {
                    Some(item) => self.handle(item),
                    None => break,
                },
                () = sleep => {}
            }
            while let Some(Some(item)) = futures::FutureExt::now_or_never(streams.next()) {
                self.handle(item);
            }
            next = self.step(Instant::now()).await;
        }
        // Graceful stop: every pod ends, leaders release their leases.
        let ids: Vec<ObjectId> = self.pods.keys().cloned().collect();
        for id in ids {
            if let Some(p) = self.pods.get_mut(&id) {
                for g in &mut p.generations {
                    g.state = State::Stopping;
                }
            }
            self.stop_marked(&id).await;
        }
        let now = Instant::now();
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
        let _ = now;
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
                    let listed: HashSet<ObjectId> =
                        items.iter().map(|o| id_of(which.kind(), o)).collect();
                    let gone: Vec<ObjectId> = self
                        .pods
                        .keys()
                        .filter(|id| id.kind == which.kind() && !listed.contains(*id))
                        .cloned()
                        .collect();
                    for id in gone {
                        self.workload_gone(&id);
                    }
                    for o in items {
                        self.workload(which.kind(), &o);
                    }
                }
                _ => {
                    let listed: HashSet<ObjectId> =
                        items.iter().map(|o| id_of(which.kind(), o)).collect();
                    let gone: Vec<ObjectId> = self
                        .present
                        .iter()
                        .filter(|id| id.kind == which.kind() && !listed.contains(*id))
                        .cloned()
                        .collect();
                    for id in gone {
                        self.dependency_gone(&id);
                    }
                    for id in listed {
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

    fn dependency_present(&mut self, id: ObjectId) {
        for p in self.pods.values_mut() {
            for g in p.generations.iter_mut().filter(|g| g.live()) {
                if g.deps.iter().any(|d| d.id() == id) {
                    g.seen.insert(id.clone());
                }
            }
        }
        self.present.insert(id);
    }

    fn dependency_gone(&mut self, id: &ObjectId) {
        if !self.present.remove(id) {
            return;
        }
        let mut harms = Vec::new();
        for p in self.pods.values_mut() {
            for g in p.generations.iter_mut().filter(|g| g.live()) {
                if !g.seen.remove(id) {
                    continue;
                }
                let Some(dep) = g.deps.iter().find(|d| &d.id() == id) else {
                    continue;
                };
                harms.push(PodHarm {
                    workload: p.id.clone(),
                    pod: g.pod.clone(),
                    identity: g.identity.clone(),
                    kind: HarmKind::DependencyMissing,
                    what: format!("{} {}/{} ({})", dep.kind, dep.namespace, dep.name, dep.via),
                    object: Some(id.clone()),
                });
            }
        }
        for h in harms {
            self.harm(h);
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
        });
        p.rollout = workload::rollout(kind, live);
        p.live = live.clone();
        if p.hash == Some(hash) {
            return;
        }
        p.hash = Some(hash);
        p.count += 1;
        if p.rollout == Rollout::StopFirst {
            for g in &mut p.generations {
                g.state = State::Stopping;
            }
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
            leader: false,
            lease: None,
            last_renew: None,
            next_lease: now,
        });
    }

    fn workload_gone(&mut self, id: &ObjectId) {
        if let Some(p) = self.pods.get_mut(id) {
            p.hash = None;
            for g in &mut p.generations {
                g.state = State::Stopping;
            }
        }
    }

    fn lease_path(id: &ObjectId, name: Option<&str>) -> String {
        let ns = id.namespace.as_deref().unwrap_or("default");
        match name {
            Some(n) => format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{n}"),
            None => format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
        }
    }

    /// Stops the generations marked `Stopping`: leaders release their lease (a refusal there
    /// was already counted when renewing failed).
    async fn stop_marked(&mut self, id: &ObjectId) {
        let Some(p) = self.pods.get_mut(id) else {
            return;
        };
        let (stopping, kept): (Vec<Generation>, Vec<Generation>) =
            std::mem::take(&mut p.generations)
                .into_iter()
                .partition(|g| g.state == State::Stopping);
        p.generations = kept;
        if stopping.is_empty() {
            return;
        }
        // A released lease is free at once: the candidates try now.
        let now = Instant::now();
        for g in &mut p.generations {
            if g.elects {
                g.next_lease = g.next_lease.min(now);
            }
        }
        let workload = p.id.clone();
        for g in stopping {
            if g.leader
                && let Some(l) = &g.lease
            {
                let body = lease::released(l, lease::now_us());
                let path = Self::lease_path(&workload, Some(&workload.name));
                let sent = g
                    .identity
                    .send(&self.client, http::Method::PUT, &path, Some(&body))
                    .await;
                if let Err(e) = sent {
                    // The lease stays with a pod that is gone until it expires.
                    if let Some(p) = self.pods.get_mut(&workload)
                        && p.gap.is_none()
                    {
                        p.gap = Some((g.pod.clone(), Instant::now()));
                    }
                    if e.is(403) {
                        self.harm(PodHarm {
                            workload: workload.clone(),
                            pod: g.pod.clone(),
                            identity: g.identity.clone(),
                            kind: HarmKind::Refused,
                            what: format!(
                                "update leases.coordination.k8s.io {}/{} (releasing it on stop)",
                                workload.namespace.as_deref().unwrap_or_default(),
                                workload.name
                            ),
                            object: None,
                        });
                    }
                }
            }
            if g.state != State::Starting {
                self.pod_event(&workload, &g.pod, format!("pod {} stopped", g.pod));
            }
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
            self.stop_marked(id).await;
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
                    State::Starting => due(g.due),
                    State::Running if !self.options.follow_rollout => due(g.due),
                    State::Running => {}
                    State::Stopping => due(now),
                    State::Available => {}
                }
                if g.live() && g.elects {
                    due(g.next_lease);
                }
            }
        }
        next
    }

    async fn start_due(&mut self, id: &ObjectId, now: Instant) {
        let Some(p) = self.pods.get(id) else { return };
        // A generation waits while an older one is stopping (Recreate).
        if p.generations.iter().any(|g| g.state == State::Stopping) {
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
            let identity = self.pods[id].generations[i].identity.clone();
            let rights = match identity.rights(&self.client).await {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!("simulated pod of {id}: rules review as {identity}: {e}");
                    None
                }
            };
            let present = self.present.clone();
            let lease_right = |verb: &str| Right::Resource {
                verb: verb.into(),
                group: "coordination.k8s.io".into(),
                resource: "leases".into(),
                name: Some(id.name.clone()),
            };
            let p = self.pods.get_mut(id).expect("known workload");
            let timing = p.timing;
            let previous = p.last_rules.clone();
            let g = &mut p.generations[i];
            g.state = State::Running;
            g.due = now + timing.ready;
            g.seen = g
                .deps
                .iter()
                .map(Dependency::id)
                .filter(|d| present.contains(d))
                .collect();
            g.elects = rights.as_ref().is_some_and(|r| {
                ["get", "update"]
                    .iter()
                    .all(|v| r.rules.iter().any(|rule| rule.grants(&lease_right(v))))
            });
            g.next_lease = now;
            g.rights.clone_from(&rights);
            let pod = g.pod.clone();
            let started = format!("pod {pod} started (ServiceAccount {identity})");
            if let Some(r) = &rights {
                p.last_rules = Some((pod.clone(), r.clone()));
            }
            self.summary.pods_started += 1;
            self.pod_event(id, &pod, started);
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
            for g in &mut p.generations[..n] {
                g.state = State::Stopping;
            }
        }
        for pod in events {
            self.pod_event(id, &pod, format!("pod {pod} available"));
        }
        self.stop_marked(id).await;
    }

    async fn leases_due(&mut self, id: &ObjectId, now: Instant) {
        let period = self.options.lease_duration / 3;
        let duration = self.options.lease_duration;
        let Some(count) = self.pods.get(id).map(|p| p.generations.len()) else {
            return;
        };
        for i in 0..count {
            let (identity, pod, leader, current) = {
                let g = &self.pods[id].generations[i];
                if !(g.live() && g.elects && g.next_lease <= now) {
                    continue;
                }
                (g.identity.clone(), g.pod.clone(), g.leader, g.lease.clone())
            };
            let path = Self::lease_path(id, Some(&id.name));
            let namespace = id.namespace.clone().unwrap_or_default();
            let read = if leader && current.is_some() {
                Ok(current)
            } else {
                match identity
                    .send(&self.client, http::Method::GET, &path, None)
                    .await
                {
                    Ok(r) => Ok(Some(r.body)),
                    Err(e) if e.is(404) => Ok(None),
                    Err(e) => Err(("get", e)),
                }
            };
            let result = match read {
                Err(e) => Err(e),
                Ok(lease_now) => {
                    match lease::decide(
                        lease_now.as_ref(),
                        &namespace,
                        &id.name,
                        &pod,
                        duration,
                        lease::now_us(),
                    ) {
                        Step::Wait { until_us, .. } => Ok((None, Some(until_us))),
                        Step::Create(body) => identity
                            .send(
                                &self.client,
                                http::Method::POST,
                                &Self::lease_path(id, None),
                                Some(&body),
                            )
                            .await
                            .map(|r| (Some(r.body), None))
                            .map_err(|e| ("create", e)),
                        Step::Take(body) => identity
                            .send(&self.client, http::Method::PUT, &path, Some(&body))
                            .await
                            .map(|r| (Some(r.body), None))
                            .map_err(|e| ("update", e)),
                    }
                }
            };
            let p = self.pods.get_mut(id).expect("known workload");
            let g = &mut p.generations[i];
            g.next_lease = now + period;
            match result {
                Ok((Some(held), _)) => {
                    g.lease = Some(held);
                    g.last_renew = Some(now);
                    if !g.leader {
                        g.leader = true;
                        let gap = p.gap.take();
                        if let Some((failed, from)) = gap {
                            self.summary.lease_gaps.push(LeaseGap {
                                workload: id.clone(),
                                pod: failed,
                                from,
                                to: Some(now),
                            });
                        }
                        self.pod_event(id, &pod, format!("pod {pod} leads"));
                    }
                }
                Ok((None, until)) => {
                    g.leader = false;
                    g.lease = None;
                    if let Some(until_us) = until {
                        let wait_us = (until_us - lease::now_us()).max(0);
                        let wait =
                            std::time::Duration::from_micros(u64::try_from(wait_us).unwrap_or(0));
                        g.next_lease = (now + wait).min(now + period);
                    }
                }
                Err((verb, e)) => {
                    if e.is(409) {
                        // Someone wrote the lease since it was read: read it again.
                        g.lease = None;
                        g.next_lease = now;
                        continue;
                    }
                    let was_leader = g.leader;
                    if was_leader
                        && g.last_renew
                            .is_some_and(|t| now.duration_since(t) > duration)
                    {
                        g.leader = false;
                        g.lease = None;
                    }
                    if was_leader && p.gap.is_none() {
                        p.gap = Some((pod.clone(), now));
                    }
                    let key = format!("refused {verb} lease");
                    let first = forbidden(&e) && g.reported.insert(key);
                    let lost_lead = was_leader && !g.leader;
                    if first {
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
                                namespace: Some(namespace.clone()),
                                name: id.name.clone(),
                            }),
                        });
                    } else if !forbidden(&e) {
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
            let renew = Right::Resource {
                verb: "update".into(),
                group: "coordination.k8s.io".into(),
                resource: "leases".into(),
                name: Some(id.name.clone()),
            };
            if g.leader && !now.rules.iter().any(|r| r.grants(&renew)) {
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
                harms.push(PodHarm {
                    workload: id.clone(),
                    pod: g.pod.clone(),
                    identity: identity.clone(),
                    kind: HarmKind::RightLost,
                    what: describe(&missing),
                    object: None,
                });
            }
        }
        for h in harms {
            self.harm(h);
        }
    }

    fn publish(&self, id: &ObjectId) {
        let acting = self.pods.get(id).and_then(|p| {
            let live: Vec<&Generation> = p.generations.iter().filter(|g| g.live()).collect();
            let chosen = live.iter().find(|g| g.leader).copied().or_else(|| {
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
        });
        self.board.set(id, acting);
    }
}
