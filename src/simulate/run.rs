//! The simulator loop: watch Deployments, DaemonSets and ClusterOperators, and write each
//! operator's status when its workloads carry the payload's template and its script's delay
//! has passed.
//!
//! One list+watch per kind, cluster-wide (three watches for any number of operators), with
//! [`crate::cluster::list_watch`]. A broken watch is re-listed after a short pause, so a ClusterOperator CRD that does not
//! exist yet (an install that creates it) is picked up within half a second of appearing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::{BoxStream, SelectAll};
use kube::api::{ApiResource, DynamicObject};
use kube::{Client, Resource as _};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::events::{SimEventKind, SimObserver, SimSummary, notify};
use super::operators::{OperatorSpec, rolled_out, template_updated};
use super::pods::{Acting, PodBoard, workload};
use super::script::{Report, Scripts};
use super::status::{already_reported, status_for, summary};
use super::status_writer::StatusWriter;
use super::wake::{Wake, wake};
use crate::cluster::list_watch::{CollectionEvent, list_watch};
use crate::manifest::ObjectId;

/// The field manager of the simulator's status writes.
pub const FIELD_MANAGER: &str = "minicvo-simulator";

/// Pause before writing again after a failed status write.
const WRITE_RETRY: Duration = Duration::from_secs(1);

/// Settings of a simulator.
#[derive(Debug, Clone, Default)]
pub struct SimulatorOptions {
    /// Per-operator scripts and the default delay.
    pub scripts: Scripts,
    /// Report only once the workloads are rolled out and available (needs a scheduler and
    /// kubelets, as on kind; never true on the test control plane).
    pub wait_available: bool,
    /// The simulated pods: with them, an operator reports only once a pod of its workloads'
    /// current template acts for each workload (leads, or runs when it cannot elect), and
    /// writes the status as that pod when the pod could when it started.
    pub pods: Option<Arc<PodBoard>>,
}

/// A running simulator; stop it with [`Simulator::stop`].
pub struct Simulator {
    cancel: CancellationToken,
    handle: tokio::task::JoinHandle<SimSummary>,
}

impl Simulator {
    /// Starts simulating `operators` against the cluster behind `client`.
    #[must_use]
    pub fn start(
        client: Client,
        operators: Vec<OperatorSpec>,
        options: SimulatorOptions,
        observer: Option<Arc<dyn SimObserver>>,
    ) -> Self {
        let cancel = CancellationToken::new();
        let handle = tokio::spawn(run(client, operators, options, observer, cancel.clone()));
        Simulator { cancel, handle }
    }

    /// Stops the loop and returns what it did.
    pub async fn stop(self) -> SimSummary {
        self.cancel.cancel();
        self.handle.await.unwrap_or_default()
    }

    /// Runs until `cancel` fires (for `minicvo simulate`).
    pub async fn run_until(
        client: Client,
        operators: Vec<OperatorSpec>,
        options: SimulatorOptions,
        observer: Option<Arc<dyn SimObserver>>,
        cancel: CancellationToken,
    ) -> SimSummary {
        run(client, operators, options, observer, cancel).await
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The ClusterOperator resource.
#[must_use]
pub fn cluster_operators() -> ApiResource {
    resource(
        "config.openshift.io",
        "v1",
        "ClusterOperator",
        "clusteroperators",
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Watched {
    Deployment,
    DaemonSet,
    ClusterOperator,
}

impl Watched {
    fn name(self) -> &'static str {
        match self {
            Watched::Deployment => "Deployment",
            Watched::DaemonSet => "DaemonSet",
            Watched::ClusterOperator => "ClusterOperator",
        }
    }
}

type Item = (Watched, CollectionEvent);

/// Follows one collection with the cluster layer's list+watch.
fn watch(client: &Client, which: Watched, ar: &ApiResource) -> BoxStream<'static, Item> {
    let collection = DynamicObject::url_path(ar, None);
    list_watch(client.clone(), collection)
        .map(move |e| (which, e))
        .boxed()
}

fn name_of(o: &Value) -> String {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn namespace_of(o: &Value) -> Option<String> {
    o.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn object_id(kind: &str, o: &Value) -> ObjectId {
    ObjectId {
        group: if kind == "ClusterOperator" {
            "config.openshift.io".into()
        } else {
            "apps".into()
        },
        kind: kind.into(),
        namespace: namespace_of(o),
        name: name_of(o),
    }
}

#[derive(Default)]
struct OpState {
    /// When the workloads were first seen updated (reset when they are not).
    ready_since: Option<Instant>,
    /// Flap: the current half-period and when it ends.
    flap_up: bool,
    flap_until: Option<Instant>,
    /// Do not write before this (after a failed write).
    retry_at: Option<Instant>,
}

struct Loop {
    operators: Vec<OperatorSpec>,
    options: SimulatorOptions,
    observer: Option<Arc<dyn SimObserver>>,
    /// Live workloads of interest.
    workloads: HashMap<ObjectId, Value>,
    /// What was last reported per workload (generation, updated) to emit changes only.
    workload_seen: HashMap<ObjectId, (i64, bool)>,
    /// Live ClusterOperators of interest.
    operators_live: HashMap<String, Value>,
    operator_seen: HashMap<String, String>,
    state: Vec<OpState>,
    summary: SimSummary,
    interesting: HashSet<ObjectId>,
    /// Writes the operators' status, as their pods or as the harness.
    writes: StatusWriter,
}

impl Loop {
    fn emit(&self, kind: SimEventKind) {
        notify(self.observer.as_ref(), kind);
    }

    fn want_template(&self, id: &ObjectId) -> Option<&Value> {
        self.operators
            .iter()
            .flat_map(|o| &o.workloads)
            .find(|w| &w.id == id)
            .map(|w| &w.template)
    }

    fn on_workload(&mut self, kind: &str, event: Option<Value>, deleted: Option<ObjectId>) {
        if let Some(id) = deleted {
            if self.workloads.remove(&id).is_some() {
                self.workload_seen.remove(&id);
                self.emit(SimEventKind::WorkloadGone { id });
            }
            return;
        }
        let Some(v) = event else { return };
        let id = object_id(kind, &v);
        if !self.interesting.contains(&id) {
            return;
        }
        let generation = v
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let updated = self
            .want_template(&id)
            .map_or(Ok(()), |t| template_updated(t, &v));
        let key = (generation, updated.is_ok());
        if self.workload_seen.get(&id) != Some(&key) {
            self.workload_seen.insert(id.clone(), key);
            self.emit(SimEventKind::Workload {
                id: id.clone(),
                generation,
                updated,
            });
        }
        self.workloads.insert(id, v);
    }

    fn on_operator(&mut self, event: Option<Value>, deleted: Option<String>) {
        if let Some(name) = deleted {
            self.operators_live.remove(&name);
            self.operator_seen.remove(&name);
            return;
        }
        let Some(v) = event else { return };
        let name = name_of(&v);
        if !self.operators.iter().any(|op| op.name == name) {
            return;
        }
        // Our own write's answer may be newer than a watch event still in flight.
        let rv = |v: &Value| {
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<u64>().ok())
        };
        if let (Some(new), Some(have)) = (rv(&v), self.operators_live.get(&name).and_then(rv))
            && new < have
        {
            return;
        }
        let s = summary(&v);
        if self.operator_seen.get(&name) != Some(&s) {
            self.operator_seen.insert(name.clone(), s.clone());
            self.emit(SimEventKind::Operator {
                name: name.clone(),
                status: s,
            });
        }
        self.operators_live.insert(name, v);
    }

    fn handle(&mut self, (which, event): Item) {
        match event {
            CollectionEvent::Failed(e) => {
                self.emit(SimEventKind::WatchFailed {
                    kind: which.name().into(),
                    error: e.to_string(),
                });
            }
            CollectionEvent::Listed(items) => {
                let key =
                    |o: &Value| format!("{}/{}", namespace_of(o).unwrap_or_default(), name_of(o));
                let listed: HashSet<String> = items.iter().map(key).collect();
                for o in items {
                    self.apply(which, o);
                }
                // Whatever was known but not listed again is gone.
                match which {
                    Watched::ClusterOperator => {
                        let gone: Vec<String> = self
                            .operators_live
                            .keys()
                            .filter(|n| !listed.contains(&format!("/{n}")))
                            .cloned()
                            .collect();
                        for n in gone {
                            self.on_operator(None, Some(n));
                        }
                    }
                    _ => {
                        let gone: Vec<ObjectId> = self
                            .workloads
                            .keys()
                            .filter(|id| id.kind == which.name())
                            .filter(|id| {
                                !listed.contains(&format!(
                                    "{}/{}",
                                    id.namespace.clone().unwrap_or_default(),
                                    id.name
                                ))
                            })
                            .cloned()
                            .collect();
                        for id in gone {
                            self.on_workload(which.name(), None, Some(id));
                        }
                    }
                }
            }
            CollectionEvent::Applied(o) => self.apply(which, o),
            CollectionEvent::Deleted(o) => match which {
                Watched::ClusterOperator => self.on_operator(None, Some(name_of(&o))),
                _ => {
                    let id = object_id(which.name(), &o);
                    self.on_workload(which.name(), None, Some(id));
                }
            },
        }
    }

    fn apply(&mut self, which: Watched, o: Value) {
        match which {
            Watched::ClusterOperator => self.on_operator(Some(o), None),
            _ => self.on_workload(which.name(), Some(o), None),
        }
    }

    /// Whether operator `i`'s workloads carry the payload (and are available if asked).
    fn ready(&self, i: usize) -> bool {
        self.operators[i].workloads.iter().all(|w| {
            self.workloads.get(&w.id).is_some_and(|live| {
                template_updated(&w.template, live).is_ok()
                    && (!self.options.wait_available || rolled_out(&w.id.kind, live).is_ok())
                    && self.acting_current(&w.id, live).is_some()
            })
        })
    }

    /// With simulated pods: the pod acting for workload `id` when it runs `live`'s template
    /// (`Some(None)` without simulated pods: the harness acts).
    fn acting_current(&self, id: &ObjectId, live: &Value) -> Option<Option<Acting>> {
        let Some(board) = &self.options.pods else {
            return Some(None);
        };
        let hash = workload::template(live).map(workload::template_hash)?;
        board
            .acting(id)
            .filter(|a| a.template_hash == hash)
            .map(Some)
    }

    /// Who writes operator `i`'s status: the first acting pod of its workloads that may (see
    /// [`StatusWriter::choose`]), else the harness (`None`).
    async fn writer(&mut self, i: usize) -> Option<(ObjectId, Acting)> {
        let candidates: Vec<(ObjectId, Acting)> = self.operators[i]
            .workloads
            .iter()
            .filter_map(|w| {
                let live = self.workloads.get(&w.id)?;
                Some((w.id.clone(), self.acting_current(&w.id, live)??))
            })
            .collect();
        let name = self.operators[i].name.clone();
        self.writes.choose(&name, candidates).await
    }

    /// Advances every operator; returns the next time something is due.
    async fn step(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let due = |t: Instant, next: &mut Option<Instant>| {
            *next = Some(next.map_or(t, |n: Instant| n.min(t)));
        };
        for i in 0..self.operators.len() {
            let script = self.options.scripts.of(&self.operators[i].name);
            if script.report == Report::Never {
                continue;
            }
            if !self.ready(i) {
                self.state[i].ready_since = None;
                self.state[i].flap_until = None;
                continue;
            }
            let since = *self.state[i].ready_since.get_or_insert(now);
            let at = since + script.delay.unwrap_or_default();
            if now < at {
                due(at, &mut next);
                continue;
            }
            if let Report::Flap(period) = script.report {
                let st = &mut self.state[i];
                match st.flap_until {
                    None => {
                        st.flap_up = false;
                        st.flap_until = Some(now + period);
                    }
                    Some(t) if now >= t => {
                        st.flap_up = !st.flap_up;
                        st.flap_until = Some(now + period);
                    }
                    Some(_) => {}
                }
                due(st.flap_until.expect("set above"), &mut next);
            }
            if let Some(r) = self.state[i].retry_at {
                if now < r {
                    due(r, &mut next);
                    continue;
                }
                self.state[i].retry_at = None;
            }
            let name = self.operators[i].name.clone();
            let Some(live) = self.operators_live.get(&name) else {
                continue; // not created yet: the watch will tell
            };
            let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
            let Some(want) = status_for(
                &self.operators[i],
                &script.report,
                self.state[i].flap_up,
                &stamp,
            ) else {
                continue;
            };
            if already_reported(live, &want) {
                continue;
            }
            let writer = self.writer(i).await;
            match self.writes.write(&name, &want, writer).await {
                Ok(updated) => {
                    // The watch may still deliver older states; the write's answer is the
                    // newest, so a burst of events does not cause a second write.
                    self.operators_live.insert(name.clone(), updated);
                    *self.summary.reports.entry(name.clone()).or_default() += 1;
                    let status = summary(&json!({"status": want}));
                    self.emit(SimEventKind::Reported { name, status });
                }
                Err((error, harm)) => {
                    if let Some(harm) = harm {
                        self.emit(SimEventKind::Harm(harm));
                    }
                    self.summary.write_failures += 1;
                    tracing::warn!(
                        "simulator: writing the status of clusteroperator {name}: {error}"
                    );
                    self.emit(SimEventKind::WriteFailed { name, error });
                    let r = Instant::now() + WRITE_RETRY;
                    self.state[i].retry_at = Some(r);
                    due(r, &mut next);
                }
            }
        }
        next
    }
}

async fn run(
    client: Client,
    operators: Vec<OperatorSpec>,
    options: SimulatorOptions,
    observer: Option<Arc<dyn SimObserver>>,
    cancel: CancellationToken,
) -> SimSummary {
    let interesting: HashSet<ObjectId> = operators
        .iter()
        .flat_map(|o| o.workloads.iter().map(|w| w.id.clone()))
        .collect();
    let kinds: HashSet<&str> = interesting.iter().map(|id| id.kind.as_str()).collect();
    let mut streams: SelectAll<BoxStream<'static, Item>> = SelectAll::new();
    streams.push(watch(
        &client,
        Watched::ClusterOperator,
        &cluster_operators(),
    ));
    if kinds.contains("Deployment") {
        streams.push(watch(
            &client,
            Watched::Deployment,
            &resource("apps", "v1", "Deployment", "deployments"),
        ));
    }
    if kinds.contains("DaemonSet") {
        streams.push(watch(
            &client,
            Watched::DaemonSet,
            &resource("apps", "v1", "DaemonSet", "daemonsets"),
        ));
    }
    let n = operators.len();
    let writes = StatusWriter::new(client.clone());
    let mut l = Loop {
        operators,
        options,
        observer,
        workloads: HashMap::new(),
        workload_seen: HashMap::new(),
        operators_live: HashMap::new(),
        operator_seen: HashMap::new(),
        state: (0..n).map(|_| OpState::default()).collect(),
        summary: SimSummary::default(),
        interesting,
        writes,
    };
    let mut board = l.options.pods.as_ref().map(|b| b.changes());
    let mut next: Option<Instant> = None;
    loop {
        let pods_changed = async {
            match board.as_mut() {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        match wake(&mut streams, next, pods_changed, &cancel).await {
            Wake::Stop => break,
            Wake::Events(items) => items.into_iter().for_each(|item| l.handle(item)),
        }
        next = l.step(Instant::now()).await;
    }
    l.summary
}
