//! The floors for `hack/bench.sh floor`: the time the writes of a payload's install, and of
//! its upgrade, take on a live cluster (`$KUBECONFIG`) when nothing waits but the server,
//! measured with the minicvo library and the same counted client as `minicvo apply`.
//!
//! ```text
//! floor PAYLOAD --release-version V [--to-release-version V2] [--parallelism N] [--cpu-pid PID]...
//! ```
//!
//! The payload is loaded and planned as `minicvo e2e upgrade` plans it: the install in
//! initializing mode with version V, and, with `--to-release-version`, the upgrade in updating
//! mode with version V2 (the install's capabilities kept). The cluster is first brought to
//! the state the e2e install starts from, untimed: everything of the plans removed
//! (`--clean`), stand-in CRDs and missing namespaces installed (`--stub-missing-crds
//! --create-missing-namespaces`). Every object is written as the `cvo` strategy writes it
//! (a GET, then the CVO's merge of the prepared manifest: a POST when absent, a PUT when the
//! merge changed it, nothing otherwise; a missing ClusterOperator precreated with a
//! server-side apply), with no retry and no wait:
//!
//! - **install**: ClusterVersion `version` created as a recorded run creates it before its
//!   first write (its CRD first, waited for until `Established`, when the cluster does not
//!   serve it); then two waves: every Namespace and CustomResourceDefinition at once (N in
//!   flight), then the watch until every CRD is `Established` (the server's own work, which no
//!   install can skip); then every other object, each graph node's objects in the node's
//!   order, N nodes at a time;
//! - **upgrade**, from the install's state: the updating graph, a node starting when the
//!   nodes it follows are done (the run-level barriers), N at a time, each node's tasks in
//!   order; a ClusterOperator is read and its metadata merged, a delete is a GET and a DELETE.
//!
//! In both phases a ClusterOperator's task is followed by the write that ends its wait in a
//! run: its status as the simulated operator reports it (`status.versions` of the manifest,
//! Available), one merge PATCH of `/status`, written at once (the operator's own time —
//! pods starting, leases — is the simulator's, not part of the floor).
//!
//! Prints one line of `key=value` fields per phase (`phase=install ms=… requests=… objects=…
//! failed=… cpu_s=…`); failed counts the writes the server refused (named on stderr), cpu_s
//! the user + system CPU seconds of the `--cpu-pid` processes (kube-apiserver and etcd)
//! during the phase. A benchmark tool, not a test.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{StreamExt as _, stream};
use kube::Client;
use kube::core::Request;
use minicvo::apply::actions::cvo::read_cluster_config;
use minicvo::apply::preflight;
use minicvo::cluster::client;
use minicvo::cluster::discovery::Discovery;
use minicvo::cluster::list_watch::{CollectionEvent, list_watch};
use minicvo::cluster::request::{self, RequestError};
use minicvo::merge::{ClusterConfig, Outcome};
use minicvo::simulate::Report;
use minicvo::simulate::status::status_for;
use minicvo::stub_crds::StandIns;
use minicvo::{Action, LoadOptions, Mode, Plan, Task};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(60);
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

type Failures = Arc<std::sync::Mutex<Vec<String>>>;

/// What one phase's writes need.
struct Writer<'a> {
    client: &'a Client,
    discovery: Discovery,
    config: ClusterConfig,
    failed: Failures,
    /// The status each ClusterOperator task's operator reports, by task id.
    reports: HashMap<usize, Value>,
}

impl Writer<'_> {
    fn fail(&self, task: &Task, why: impl std::fmt::Display) {
        self.failed
            .lock()
            .unwrap()
            .push(format!("{}: {why}", task.manifest.id));
    }

    /// The object's URL (and its collection's), or `None` when its kind is not served.
    async fn urls(&self, task: &Task) -> Option<(String, String)> {
        let m = &task.manifest;
        match self
            .discovery
            .resolve(&m.id.group, m.version(), &m.id.kind)
            .await
        {
            Ok(Some(r)) => {
                let ns = r
                    .namespaced
                    .then(|| m.id.namespace.clone().unwrap_or_else(|| "default".into()));
                let collection = r.url_path(ns.as_deref());
                Some((format!("{collection}/{}", m.id.name), collection))
            }
            Ok(None) => {
                self.fail(task, "not served");
                None
            }
            Err(e) => {
                self.fail(task, e);
                None
            }
        }
    }

    async fn get(&self, url: &str) -> Result<Option<Value>, RequestError> {
        let get = http::Request::get(url)
            .body(Vec::new())
            .expect("a GET builds");
        match request::send(self.client, get, TIMEOUT).await {
            Ok(r) => Ok(Some(r.body)),
            Err(e) if e.is(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One task as the `cvo` strategy runs it, without its retries and waits.
    async fn run(&self, task: &Task) {
        let Some((url, collection)) = self.urls(task).await else {
            return;
        };
        let live = match self.get(&url).await {
            Ok(live) => live,
            Err(e) => return self.fail(task, e),
        };
        let m = &task.manifest;
        let write = match (&task.action, live) {
            (Action::Skip, _) | (Action::CreateOnly, Some(_)) | (Action::Delete, None) => None,
            (Action::Delete, Some(_)) => Some(http::Request::delete(&url).body(Vec::new())),
            (Action::Wait, None) => {
                // Precreated with a server-side apply, as the install does.
                let created = minicvo::cvo::precreate::created_object(&m.object);
                let created = match minicvo::merge::prepare(&created, &self.config) {
                    Ok(c) => c,
                    Err(e) => return self.fail(task, e),
                };
                let body = minicvo::cluster::body::request_body(&created, None);
                let params = kube::api::PatchParams::apply("minicvo").force();
                Some(Ok(Request::new(&collection)
                    .patch(&m.id.name, &params, &kube::api::Patch::Apply(&body))
                    .expect("a PATCH builds")))
            }
            (Action::Wait, Some(live)) => {
                let required = match minicvo::merge::prepare(&m.object, &self.config) {
                    Ok(r) => r,
                    Err(e) => return self.fail(task, e),
                };
                minicvo::merge::merge_cluster_operator(&live, &required).map(|o| put(&url, &o))
            }
            (Action::Apply | Action::CreateOnly, live) => {
                match minicvo::merge::merge(live.as_ref(), &m.object, &self.config) {
                    Ok(Outcome::Create(o)) => Some(post(&collection, &o)),
                    Ok(Outcome::Update(o)) => Some(put(&url, &o)),
                    Ok(Outcome::Unchanged) => None,
                    Err(e) => return self.fail(task, e),
                }
            }
        };
        match write.map(|w| w.map_err(|e| e.to_string())) {
            None => {}
            Some(Err(e)) => return self.fail(task, e),
            Some(Ok(w)) => {
                if let Err(e) = request::send(self.client, w, TIMEOUT).await {
                    return self.fail(task, e);
                }
            }
        }
        if let Some(status) = self.reports.get(&task.id) {
            self.report(task, &url, status).await;
        }
    }

    /// The operator's report that ends a ClusterOperator wait: a merge PATCH of its status.
    async fn report(&self, task: &Task, url: &str, status: &Value) {
        let body = serde_json::to_vec(&serde_json::json!({ "status": status }))
            .expect("a status serializes");
        let patch = http::Request::patch(format!("{url}/status"))
            .header("content-type", "application/merge-patch+json")
            .body(body)
            .expect("a PATCH builds");
        if let Err(e) = request::send(self.client, patch, TIMEOUT).await {
            self.fail(task, format!("status: {e}"));
        }
    }
}

fn post(collection: &str, object: &Value) -> Result<http::Request<Vec<u8>>, http::Error> {
    let body = serde_json::to_vec(object).expect("an object serializes");
    Ok(Request::new(collection)
        .create(&kube::api::PostParams::default(), body)
        .expect("a POST builds"))
}

/// A PUT of the merged object, without `status` and `managedFields` (the server keeps them).
fn put(url: &str, merged: &Value) -> Result<http::Request<Vec<u8>>, http::Error> {
    let mut body = merged.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    http::Request::put(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("an object serializes"))
}

/// Waits until every CRD in `names` is `Established`.
async fn established(client: &Client, names: &BTreeSet<String>) {
    let is_established = |o: &Value| {
        o.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Established")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
    };
    let name = |o: &Value| {
        o.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut left = names.clone();
    let mut events = list_watch(client.clone(), CRDS.to_string());
    while !left.is_empty() {
        match events.next().await {
            Some(CollectionEvent::Listed(items)) => {
                for o in items.iter().filter(|o| is_established(o)) {
                    left.remove(&name(o));
                }
            }
            Some(CollectionEvent::Applied(o)) if is_established(&o) => {
                left.remove(&name(&o));
            }
            Some(_) => {}
            None => break,
        }
    }
}

fn is_wave_one(t: &Task) -> bool {
    t.manifest.is_crd() || (t.manifest.id.group.is_empty() && t.manifest.id.kind == "Namespace")
}

fn runs(t: &Task) -> bool {
    t.action != Action::Skip
}

async fn writer<'a>(client: &'a Client, plan: &Plan, failed: &Failures) -> Writer<'a> {
    let discovery = Discovery::new(client.clone(), TIMEOUT);
    discovery.prime().await.expect("discovery");
    let mut config = read_cluster_config(client, &discovery, plan, true, TIMEOUT)
        .await
        .expect("the cluster config");
    // Read once: the floor does not re-read it before each object.
    config.follow = false;
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let reports = minicvo::simulate::operators(plan)
        .iter()
        .filter_map(|op| {
            let status = status_for(op, &Report::Normal, true, &now)?;
            Some((op.task, status))
        })
        .collect();
    Writer {
        client,
        discovery,
        config,
        failed: failed.clone(),
        reports,
    }
}

/// The install's writes: namespaces and CRDs, the CRDs established, then every node.
async fn install(client: &Client, plan: &Plan, parallelism: usize, failed: &Failures) {
    let w = writer(client, plan, failed).await;
    let first: Vec<&Task> = plan
        .tasks
        .iter()
        .filter(|t| runs(t) && is_wave_one(t))
        .collect();
    stream::iter(&first)
        .for_each_concurrent(parallelism, |t| w.run(t))
        .await;
    let crds: BTreeSet<String> = first
        .iter()
        .filter(|t| t.manifest.is_crd())
        .map(|t| t.manifest.id.name.clone())
        .collect();
    established(client, &crds).await;
    // The new kinds are served: discovery again.
    let w = writer(client, plan, failed).await;
    stream::iter(&plan.graph.nodes)
        .for_each_concurrent(parallelism, |node| {
            let w = &w;
            async move {
                for &t in &node.tasks {
                    let task = &plan.tasks[t];
                    if runs(task) && !is_wave_one(task) {
                        w.run(task).await;
                    }
                }
            }
        })
        .await;
}

/// The upgrade's writes: the graph's nodes as their edges allow, `parallelism` at a time.
async fn upgrade(client: &Client, plan: &Plan, parallelism: usize, failed: &Failures) {
    let w = writer(client, plan, failed).await;
    let nodes = &plan.graph.nodes;
    let mut waiting: Vec<usize> = nodes.iter().map(|n| n.ins.len()).collect();
    let mut ready: std::collections::VecDeque<usize> =
        (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
    let mut running = FuturesUnordered::new();
    let run_node = |i: usize| {
        let w = &w;
        async move {
            for &t in &nodes[i].tasks {
                let task = &plan.tasks[t];
                if runs(task) {
                    w.run(task).await;
                }
            }
            i
        }
    };
    loop {
        while running.len() < parallelism
            && let Some(i) = ready.pop_front()
        {
            running.push(run_node(i));
        }
        let Some(done) = running.next().await else {
            break;
        };
        for &o in &nodes[done].outs {
            waiting[o] -= 1;
            if waiting[o] == 0 {
                ready.push_back(o);
            }
        }
    }
}

/// ClusterVersion `version`, as a recorded run creates it before its first write (its CRD
/// first when the cluster lacks it): the objects carry its owner reference.
async fn bootstrap(client: &Client, plan: &Plan) {
    let discovery = Discovery::new(client.clone(), TIMEOUT);
    discovery.prime().await.expect("discovery");
    let version = plan.version.clone().unwrap_or_default();
    minicvo::apply::clusterversion::bootstrap::ensure(
        client, &discovery, plan, &version, "minicvo", TIMEOUT, TIMEOUT,
    )
    .await
    .expect("ClusterVersion version");
}

/// User + system CPU seconds of `pids` so far.
fn cpu_s(pids: &[u32]) -> f64 {
    let hz = 100.0; // USER_HZ on Linux
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|s| {
            // The fields after the command name, which may hold spaces.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?)
        })
        .sum::<f64>()
        / hz
}

fn load(payload: &Path, version: &str) -> (minicvo::Payload, LoadOptions) {
    let options = LoadOptions {
        release_version: Some(version.to_string()),
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    let loaded = minicvo::load(payload, &options).expect("the payload loads");
    (loaded, options)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut payload, mut version, mut to_version, mut parallelism) = (None, None, None, None);
    let mut pids: Vec<u32> = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--release-version" => version = args.next(),
            "--to-release-version" => to_version = args.next(),
            "--parallelism" => parallelism = args.next().and_then(|p| p.parse().ok()),
            "--cpu-pid" => pids.extend(args.next().and_then(|p| p.parse::<u32>().ok())),
            _ => payload = Some(PathBuf::from(a)),
        }
    }
    let usage = "usage: floor PAYLOAD --release-version V [--to-release-version V2] \
                 [--parallelism N] [--cpu-pid PID]...";
    let payload = payload.expect(usage);
    let version = version.expect(usage);

    let (old, options) = load(&payload, &version);
    let (filters, caps, _) =
        minicvo::cvo::capabilities::for_run(&options.filters, None, &old.manifests, None);
    let old_manifests = old.manifests.clone();
    let mut install_plan = minicvo::plan::from_payload(old, &filters, Mode::Initializing, 0);
    install_plan.version = Some(version);
    let upgrade_plan = to_version.map(|v| {
        let (new, options) = load(&payload, &v);
        let (filters, _, _) = minicvo::cvo::capabilities::for_run(
            &options.filters,
            Some(&caps.enabled),
            &new.manifests,
            Some(&old_manifests),
        );
        let mut plan = minicvo::plan::from_payload(new, &filters, Mode::Updating, 0);
        plan.version = Some(v);
        plan
    });

    let conn = client::connect(None, None)
        .await
        .expect("a cluster ($KUBECONFIG)");
    let c = &conn.client;
    let plans: Vec<&Plan> = std::iter::once(&install_plan)
        .chain(upgrade_plan.as_ref())
        .collect();
    minicvo::e2e::cleanup::clean(c, &plans, Duration::from_secs(300))
        .await
        .expect("clean");
    let stand_ins = StandIns {
        crds: true,
        namespaces: true,
    };
    preflight::ensure(c, &plans, stand_ins, TIMEOUT)
        .await
        .expect("stand-ins");

    let phases = std::iter::once(("install", &install_plan))
        .chain(upgrade_plan.as_ref().map(|p| ("upgrade", p)));
    for (phase, plan) in phases {
        let mode = plan.mode;
        let n = parallelism.unwrap_or_else(|| mode.default_parallelism(plan.graph.nodes.len()));
        let failed: Failures = Arc::default();
        let (requests, cpu) = (conn.requests.get(), cpu_s(&pids));
        let started = Instant::now();
        if mode == Mode::Initializing {
            bootstrap(c, plan).await;
            install(c, plan, n, &failed).await;
        } else {
            upgrade(c, plan, n, &failed).await;
        }
        let took = started.elapsed();
        let (requests, cpu) = (conn.requests.get() - requests, cpu_s(&pids) - cpu);
        let failed = failed.lock().unwrap().clone();
        for f in &failed {
            eprintln!("floor: {phase}: refused: {f}");
        }
        let objects = plan.tasks.iter().filter(|t| runs(t)).count();
        println!(
            "phase={phase} ms={} requests={requests} objects={objects} failed={} parallelism={n} cpu_s={cpu:.2}",
            took.as_millis(),
            failed.len()
        );
    }
}
