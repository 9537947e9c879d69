//! Real pods (`e2e upgrade --real-pods`, a cluster with nodes: kind, or the test plane with a
//! node): instead of simulating the payloads' pods, watch the ones the cluster runs and report
//! what they suffered through the same observer as the pod simulator, so the harness names
//! the cause ([`super::harm::attribute`]) and runs `live-pods-keep-access` alike.
//!
//! A harm is a container of a payload workload's pod that ended with a denial: a non-zero
//! exit whose termination message says the API server refused a request (`denied:`, as the
//! stand-in operator of `hack/tools/standin` writes it, or `forbidden`/`Unauthorized`). It is
//! reported as `refused`, once per pod and message, as the ServiceAccount the pod runs as.
//! Other restarts are counted, not judged. Pods that exist when the watch starts belong to an
//! earlier run and are ignored.
//!
//! The Leases in the same namespaces are watched too: their leaderless times
//! (`lease_gaps.rs`) are reported as the simulator reports its own, for the workload of the
//! pod that held the lease before the gap.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::lease_gaps::LeaseGaps;
use crate::manifest::ObjectId;
use crate::simulate::pods::lease::now_us;
use crate::simulate::pods::{HarmKind, Identity, LeaseGap, PodHarm};
use crate::simulate::{SimEvent, SimEventKind, SimObserver};

/// What the watch saw, when it stops.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RealPodSummary {
    /// Pods of the payloads' workloads seen during the run.
    pub pods: usize,
    /// Container restarts of those pods.
    pub restarts: u32,
    /// Denials reported as harm.
    pub denials: usize,
    /// Leaderless times of the Leases the workloads' pods held.
    pub lease_gaps: Vec<LeaseGap>,
}

/// One item of the merged watches.
enum Watched {
    Pod(Box<watcher::Event<Pod>>),
    Lease(Box<watcher::Event<Lease>>),
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
        }
        let mut all = futures::stream::select_all(streams);
        let mut state = State {
            wanted,
            earlier: HashSet::new(),
            owners: HashMap::new(),
            seen: HashMap::new(),
            reported: HashSet::new(),
            leases: LeaseGaps::default(),
            summary: RealPodSummary::default(),
            observer,
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

    fn pod(&mut self, p: &Pod) {
        let k = key(p);
        if self.earlier.contains(&k) {
            return;
        }
        let Some(workload) = self.owner(p) else {
            return;
        };
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
        let identity = Identity {
            namespace: k.0.clone(),
            name: p
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".to_string()),
        };
        for c in &statuses {
            let ended = [c.state.as_ref(), c.last_state.as_ref()];
            for t in ended
                .into_iter()
                .flatten()
                .filter_map(|s| s.terminated.as_ref())
            {
                let message = t.message.as_deref().unwrap_or_default().trim();
                if t.exit_code == 0 || !is_denial(message) {
                    continue;
                }
                if !self
                    .reported
                    .insert((k.0.clone(), k.1.clone(), message.to_string()))
                {
                    continue;
                }
                self.summary.denials += 1;
                tracing::warn!(
                    "real pod {}/{} ({identity}): container {} exited {}: {message}",
                    k.0,
                    k.1,
                    c.name,
                    t.exit_code
                );
                self.observer.on_sim_event(&SimEvent {
                    at: std::time::SystemTime::now(),
                    instant: tokio::time::Instant::now(),
                    kind: SimEventKind::Harm(PodHarm {
                        workload: workload.clone(),
                        pod: k.1.clone(),
                        identity: identity.clone(),
                        kind: HarmKind::Refused,
                        what: message.to_string(),
                        object: None,
                    }),
                });
            }
        }
    }
}

/// A termination message that reports a refused request.
fn is_denial(message: &str) -> bool {
    message.starts_with("denied:")
        || message.contains(" is forbidden: ")
        || message.contains("Unauthorized")
}

/// The Deployment (through its ReplicaSet, named `<deployment>-<hash>`) or DaemonSet that owns
/// `p`.
fn workload_of(p: &Pod) -> Option<ObjectId> {
    let owner = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    let (kind, name) = match owner.kind.as_str() {
        "ReplicaSet" => ("Deployment", owner.name.rsplit_once('-')?.0.to_string()),
        "DaemonSet" => ("DaemonSet", owner.name.clone()),
        _ => return None,
    };
    Some(ObjectId {
        group: "apps".to_string(),
        kind: kind.to_string(),
        namespace: p.metadata.namespace.clone(),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner_kind: &str, owner: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": "u", "controller": true}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_belongs_to_the_deployment_of_its_replicaset_or_to_its_daemonset() {
        let d = workload_of(&pod("ReplicaSet", "machine-config-operator-6f6bdd76c9")).unwrap();
        assert_eq!(
            (d.kind.as_str(), d.name.as_str()),
            ("Deployment", "machine-config-operator")
        );
        let ds = workload_of(&pod("DaemonSet", "node-agent")).unwrap();
        assert_eq!(
            (ds.kind.as_str(), ds.name.as_str()),
            ("DaemonSet", "node-agent")
        );
        assert!(workload_of(&pod("Job", "j")).is_none());
    }

    #[test]
    fn denials_are_the_refusals_of_the_api_server() {
        assert!(is_denial("denied: GET /apis/x: 403: leases is forbidden"));
        assert!(is_denial(
            r#"leases.coordination.k8s.io "x" is forbidden: User "u" cannot get"#
        ));
        assert!(is_denial("Unauthorized"));
        assert!(!is_denial("panic: nil pointer"));
        assert!(!is_denial(""));
    }
}
