//! Real pods (`e2e upgrade --real-pods`, a cluster with nodes: kind, or the test plane with a
//! node): instead of simulating the payloads' pods, watch the ones the cluster runs and report
//! what they suffered through the same observer as the pod simulator, so the harness names
//! the cause ([`super::harm::attribute`]) and runs `live-pods-keep-access` alike.
//!
//! Harm, once per pod and message, as the ServiceAccount the pod runs as (`signals.rs` reads
//! them):
//!
//! - `refused`: a container of a payload workload's pod ended with a denial: a non-zero exit
//!   whose termination message says the API server refused a request (`denied:`, as the
//!   stand-in operator of `hack/tools/standin` writes it, or `forbidden`/`Unauthorized`);
//! - `dependency-missing`: a container ended because a file or variable it reads was gone
//!   (the stand-in's `missing:`);
//! - `started-without`: a pod could not start because a ConfigMap, Secret or ServiceAccount it
//!   needs was deleted during the run (the kubelet's `FailedMount` or
//!   `CreateContainerConfigError`, the ReplicaSet's `FailedCreate`). One that was never seen
//!   is not harm: the kubelet waits for it, as during an install.
//!
//! `starts.rs` follows what pods need and which pods cannot start. Other restarts are counted,
//! not judged. Pods that exist when the watch starts belong to an
//! earlier run and are ignored.
//!
//! **The kubelet's sync.** A kubelet sets up a running pod's ConfigMap and Secret volumes
//! again when it syncs the pod, about once a minute: that is when it would find a deleted
//! object (it keeps the files). So that the verdict does not depend on whether a sync fell
//! within the run, when such an object is deleted the harness annotates the running pods
//! that mount it (`minicvo.openshift.io/resync`), which makes the kubelet sync them at once;
//! the refused set-ups that follow (`FailedMount` of a pod that ran) are counted in the note.
//!
//! The Leases in the same namespaces are watched too: their leaderless times
//! (`lease_gaps.rs`) are reported as the simulator reports its own, for the workload of the
//! pod that held the lease before the gap.

mod signals;
mod starts;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret, ServiceAccount};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::lease_gaps::LeaseGaps;
use crate::manifest::ObjectId;
use crate::simulate::pods::lease::now_us;
use crate::simulate::pods::{HarmKind, Identity, LeaseGap, PodHarm};
use crate::simulate::{SimEvent, SimEventKind, SimObserver};
use signals::{core, is_denial, is_missing, missing_object, not_found, ran, workload_of};
use starts::{Blocked, objects};

/// What the watch saw, when it stops.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RealPodSummary {
    /// Pods of the payloads' workloads seen during the run.
    pub pods: usize,
    /// Container restarts of those pods.
    pub restarts: u32,
    /// Denials reported as harm.
    pub denials: usize,
    /// Containers that ended for want of a file or variable (harm).
    pub missing: usize,
    /// Pods that could not start without a deleted object (harm).
    pub started_without: usize,
    /// Set-ups of a deleted ConfigMap or Secret the kubelet refused for a pod that ran: it
    /// kept the files (no harm).
    pub kept_volumes: usize,
    /// Leaderless times of the Leases the workloads' pods held.
    pub lease_gaps: Vec<LeaseGap>,
}

/// One item of the merged watches.
enum Watched {
    Pod(Box<watcher::Event<Pod>>),
    Lease(Box<watcher::Event<Lease>>),
    Event(Box<watcher::Event<Event>>),
    /// A ConfigMap, Secret or ServiceAccount seen or deleted.
    Object(watcher::Event<ObjectId>),
}

fn lease_value(l: &Lease) -> serde_json::Value {
    serde_json::to_value(l).unwrap_or_default()
}

/// The running watch; [`RealPods::stop`] ends it.
#[derive(Debug)]
pub struct RealPods {
    cancel: CancellationToken,
    handle: JoinHandle<RealPodSummary>,
}

impl RealPods {
    /// Watches the pods of `workloads` (Deployments and DaemonSets of either payload) in
    /// their namespaces and reports each denial to `observer`. Returns once every watch has
    /// listed the pods that already exist, so that those are told apart from this run's.
    pub async fn start(
        client: kube::Client,
        workloads: Vec<ObjectId>,
        observer: Arc<dyn SimObserver>,
    ) -> Self {
        let cancel = CancellationToken::new();
        let namespaces: HashSet<String> = workloads
            .iter()
            .filter_map(|w| w.namespace.clone())
            .collect();
        let wanted: HashSet<ObjectId> = workloads.into_iter().collect();
        let mut streams: Vec<BoxStream<'static, Result<Watched, watcher::Error>>> = Vec::new();
        for ns in namespaces {
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
            streams.push(
                watcher(pods, watcher::Config::default())
                    .default_backoff()
                    .map(|r| r.map(|e| Watched::Pod(Box::new(e))))
                    .boxed(),
            );
            streams.push(
                watcher(leases, watcher::Config::default())
                    .default_backoff()
                    .map(|r| r.map(|e| Watched::Lease(Box::new(e))))
                    .boxed(),
            );
            let events: Api<Event> = Api::namespaced(client.clone(), &ns);
            streams.push(
                watcher(events, watcher::Config::default())
                    .default_backoff()
                    .map(|r| r.map(|e| Watched::Event(Box::new(e))))
                    .boxed(),
            );
            streams.push(objects::<ConfigMap>(&client, &ns));
            streams.push(objects::<Secret>(&client, &ns));
            streams.push(objects::<ServiceAccount>(&client, &ns));
        }
        let mut all = futures::stream::select_all(streams);
        let mut state = State {
            client,
            wanted,
            earlier: HashSet::new(),
            owners: HashMap::new(),
            seen: HashMap::new(),
            reported: HashSet::new(),
            leases: LeaseGaps::default(),
            summary: RealPodSummary::default(),
            observer,
            pods: HashMap::new(),
            ran: HashSet::new(),
            present: HashSet::new(),
            deleted: HashSet::new(),
            pending: Vec::new(),
        };
        // Until every stream has listed, its pods are an earlier run's and its leases the
        // state the run starts from.
        let mut listing = all.len();
        while listing > 0 {
            match all.next().await {
                Some(Ok(Watched::Pod(e))) => match *e {
                    watcher::Event::InitApply(p) => {
                        state.earlier.insert(key(&p));
                    }
                    watcher::Event::InitDone => listing -= 1,
                    _ => {}
                },
                Some(Ok(Watched::Lease(e))) => match *e {
                    watcher::Event::InitApply(l) => state.leases.baseline(&lease_value(&l)),
                    watcher::Event::InitDone => listing -= 1,
                    _ => {}
                },
                // Events of an earlier run are not this run's.
                Some(Ok(Watched::Event(e))) => {
                    if let watcher::Event::InitDone = *e {
                        listing -= 1;
                    }
                }
                Some(Ok(Watched::Object(e))) => match e {
                    watcher::Event::InitApply(id) => {
                        state.present.insert(id);
                    }
                    watcher::Event::InitDone => listing -= 1,
                    _ => {}
                },
                Some(Err(e)) => tracing::warn!("real pods: watch failed, retrying: {e}"),
                None => break,
            }
        }
        // Lease times are wall-clock times; gaps are reported on the run's clock.
        let base = (now_us(), tokio::time::Instant::now());
        let stop = cancel.clone();
        let handle = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    item = all.next() => match item {
                        Some(Ok(Watched::Pod(e))) => {
                            if let watcher::Event::Apply(p) | watcher::Event::Delete(p) = *e {
                                state.pod(&p);
                            }
                        }
                        Some(Ok(Watched::Lease(e))) => {
                            if let watcher::Event::Apply(l) = *e {
                                state.leases.observe(&lease_value(&l));
                            }
                        }
                        Some(Ok(Watched::Event(e))) => {
                            if let watcher::Event::Apply(ev) = *e {
                                state.event(&ev);
                            }
                        }
                        Some(Ok(Watched::Object(e))) => match e {
                            watcher::Event::Apply(id) | watcher::Event::InitApply(id) => {
                                state.object(id, true);
                            }
                            watcher::Event::Delete(id) => state.object(id, false),
                            _ => {}
                        },
                        Some(Err(e)) => tracing::warn!("real pods: watch failed, retrying: {e}"),
                        None => break,
                    },
                }
            }
            state.finish(base)
        });
        RealPods { cancel, handle }
    }

    /// Stops the watch and returns what it saw.
    pub async fn stop(self) -> RealPodSummary {
        self.cancel.cancel();
        self.handle.await.unwrap_or_default()
    }
}

fn key(p: &Pod) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

struct State {
    client: kube::Client,
    wanted: HashSet<ObjectId>,
    earlier: HashSet<(String, String)>,
    /// The workload of every pod of this run (lease holders name their pod): a gap after an
    /// earlier run's holder is not this run's.
    owners: HashMap<(String, String), ObjectId>,
    /// Restart count per pod of this run.
    seen: HashMap<(String, String), u32>,
    reported: HashSet<(String, String, String)>,
    leases: LeaseGaps,
    summary: RealPodSummary,
    observer: Arc<dyn SimObserver>,
    /// The pods of this run as last seen.
    pods: HashMap<(String, String), Pod>,
    /// Pods of this run a container of which ran.
    ran: HashSet<(String, String)>,
    /// ConfigMaps, Secrets and ServiceAccounts of the namespaces that exist.
    present: HashSet<ObjectId>,
    /// Those that existed during the run and were deleted (and are not back).
    deleted: HashSet<ObjectId>,
    /// Pods that could not start for want of an object not (yet) seen deleted.
    pending: Vec<Blocked>,
}

impl State {
    /// Records the workload of `p` when it is one of the payloads'.
    fn owner(&mut self, p: &Pod) -> Option<ObjectId> {
        let workload = workload_of(p).filter(|w| self.wanted.contains(w))?;
        self.owners.insert(key(p), workload.clone());
        Some(workload)
    }

    /// The summary, with the lease gaps of the payloads' pods on the run's clock; `base` is
    /// one moment as a wall-clock time and as an instant.
    fn finish(mut self, base: (i64, tokio::time::Instant)) -> RealPodSummary {
        let instant = |us: i64| {
            let d = std::time::Duration::from_micros(us.abs_diff(base.0));
            if us >= base.0 {
                base.1 + d
            } else {
                base.1.checked_sub(d).unwrap_or(base.1)
            }
        };
        let leases = std::mem::take(&mut self.leases);
        for g in leases.finish(now_us()) {
            let Some(workload) = self.owners.get(&(g.namespace.clone(), g.pod.clone())) else {
                continue;
            };
            self.summary.lease_gaps.push(LeaseGap {
                workload: workload.clone(),
                pod: g.pod,
                from: instant(g.from_us),
                to: g.to_us.map(instant),
            });
        }
        self.summary
    }

    fn harm(&self, harm: PodHarm) {
        self.observer.on_sim_event(&SimEvent {
            at: std::time::SystemTime::now(),
            instant: tokio::time::Instant::now(),
            kind: SimEventKind::Harm(harm),
        });
    }

    fn pod(&mut self, p: &Pod) {
        let k = key(p);
        if self.earlier.contains(&k) {
            return;
        }
        let Some(workload) = self.owner(p) else {
            return;
        };
        self.pods.insert(k.clone(), p.clone());
        if ran(p) {
            self.ran.insert(k.clone());
        }
        let statuses: Vec<_> = p
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .collect();
        let restarts: u32 = statuses
            .iter()
            .map(|c| u32::try_from(c.restart_count).unwrap_or(0))
            .sum();
        let before = self.seen.insert(k.clone(), restarts);
        match before {
            None => self.summary.pods += 1,
            Some(b) if restarts > b => self.summary.restarts += restarts - b,
            Some(_) => {}
        }
        let identity = identity_of(p);
        for c in &statuses {
            // A container that cannot be created: its environment names a deleted object.
            if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref())
                && w.reason.as_deref() == Some("CreateContainerConfigError")
                && let Some((kind, name)) = not_found(w.message.as_deref().unwrap_or_default())
            {
                let object = core(kind, &k.0, &name);
                let what = format!(
                    "{object} was deleted: the kubelet cannot create container {}                      (CreateContainerConfigError: {})",
                    c.name,
                    w.message.as_deref().unwrap_or_default()
                );
                self.blocked(Blocked {
                    workload: workload.clone(),
                    pod: k.1.clone(),
                    identity: identity.clone(),
                    object,
                    what,
                });
            }
            let ended = [c.state.as_ref(), c.last_state.as_ref()];
            for t in ended
                .into_iter()
                .flatten()
                .filter_map(|s| s.terminated.as_ref())
            {
                let message = t.message.as_deref().unwrap_or_default().trim();
                let (kind, object) = if is_denial(message) {
                    (HarmKind::Refused, None)
                } else if is_missing(message) {
                    (HarmKind::DependencyMissing, missing_object(p, message))
                } else {
                    continue;
                };
                if t.exit_code == 0
                    || !self
                        .reported
                        .insert((k.0.clone(), k.1.clone(), message.to_string()))
                {
                    continue;
                }
                if kind == HarmKind::Refused {
                    self.summary.denials += 1;
                } else {
                    self.summary.missing += 1;
                }
                tracing::warn!(
                    "real pod {}/{} ({identity}): container {} exited {}: {message}",
                    k.0,
                    k.1,
                    c.name,
                    t.exit_code
                );
                self.harm(PodHarm {
                    workload: workload.clone(),
                    pod: k.1.clone(),
                    identity: identity.clone(),
                    kind,
                    what: message.to_string(),
                    object,
                });
            }
        }
    }
}

/// The ServiceAccount `p` runs as.
fn identity_of(p: &Pod) -> Identity {
    Identity {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".to_string()),
    }
}
