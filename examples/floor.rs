//! The install floor for `hack/bench.sh floor`: the time the writes of a payload's install take
//! on a live cluster (`$KUBECONFIG`) when nothing waits but the server, measured with the
//! minicvo library and the same counted client as `minicvo apply`.
//!
//! ```text
//! floor PAYLOAD --release-version V [--parallelism N]
//! ```
//!
//! The payload is loaded and planned as `minicvo e2e upgrade` plans its install (initializing
//! mode, the release version given, capabilities as the CVO enables them). The cluster is
//! first brought to the state the e2e install starts from, untimed: everything of the plan
//! removed (`--clean`), stand-in CRDs and missing namespaces installed
//! (`--stub-missing-crds --create-missing-namespaces`). Then, timed, every object the install
//! writes is written as the `cvo` strategy creates it — a GET (404) and a POST — in two waves:
//!
//! 1. every Namespace and CustomResourceDefinition at once (N in flight), then the watch until
//!    every CRD is `Established`: the server's own work, which no install can skip;
//! 2. every other object, each graph node's objects in the node's order, N nodes at a time.
//!
//! So no write waits for anything but the server and its own node's previous write: the order
//! of dependencies (namespace and CRD before what lives in them, a node's order) with the
//! run's parallelism, and no retry or in-task wait. Prints one `floor_ms=… requests=…
//! objects=… failed=…` line (failed: POSTs the server refused, named on stderr). A benchmark
//! tool, not a test.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, stream};
use kube::Client;
use kube::core::Request;
use minicvo::apply::preflight;
use minicvo::cluster::client;
use minicvo::cluster::discovery::Discovery;
use minicvo::cluster::list_watch::{CollectionEvent, list_watch};
use minicvo::cluster::request;
use minicvo::stub_crds::StandIns;
use minicvo::{Action, LoadOptions, Mode, Plan, Task};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(60);
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

type Failures = Arc<std::sync::Mutex<Vec<String>>>;

/// GET then POST of `task`'s object, as the `cvo` strategy creates an absent one.
async fn write(client: &Client, discovery: &Discovery, task: &Task, failed: &Failures) {
    let m = &task.manifest;
    let fail = |why: String| failed.lock().unwrap().push(format!("{}: {why}", m.id));
    let resolved = match discovery
        .resolve(&m.id.group, m.version(), &m.id.kind)
        .await
    {
        Ok(Some(r)) => r,
        Ok(None) => return fail("not served".into()),
        Err(e) => return fail(e.to_string()),
    };
    let ns = resolved
        .namespaced
        .then(|| m.id.namespace.clone().unwrap_or_else(|| "default".into()));
    let collection = resolved.url_path(ns.as_deref());
    let get = http::Request::get(format!("{collection}/{}", m.id.name)).body(Vec::new());
    if let Ok(get) = get {
        let _ = request::send(client, get, TIMEOUT).await;
    }
    let body = serde_json::to_vec(&*m.object).expect("a manifest serializes");
    let post = Request::new(&collection)
        .create(&kube::api::PostParams::default(), body)
        .expect("a POST builds");
    if let Err(e) = request::send(client, post, TIMEOUT).await {
        fail(e.to_string());
    }
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

fn writes(t: &Task) -> bool {
    matches!(t.action, Action::Apply | Action::CreateOnly | Action::Wait)
}

async fn replay(
    client: &Client,
    plan: &Plan,
    parallelism: usize,
) -> (Duration, usize, Vec<String>) {
    let failed: Failures = Arc::default();
    let started = Instant::now();
    let discovery = Discovery::new(client.clone(), TIMEOUT);
    discovery.prime().await.expect("discovery");
    let first: Vec<&Task> = plan
        .tasks
        .iter()
        .filter(|t| writes(t) && is_wave_one(t))
        .collect();
    stream::iter(&first)
        .for_each_concurrent(parallelism, |t| write(client, &discovery, t, &failed))
        .await;
    let crds: BTreeSet<String> = first
        .iter()
        .filter(|t| t.manifest.is_crd())
        .map(|t| t.manifest.id.name.clone())
        .collect();
    established(client, &crds).await;
    // The new kinds are served: discovery again.
    let discovery = Discovery::new(client.clone(), TIMEOUT);
    discovery.prime().await.expect("discovery");
    stream::iter(&plan.graph.nodes)
        .for_each_concurrent(parallelism, |node| {
            let (discovery, failed) = (&discovery, &failed);
            async move {
                for &t in &node.tasks {
                    let task = &plan.tasks[t];
                    if writes(task) && !is_wave_one(task) {
                        write(client, discovery, task, failed).await;
                    }
                }
            }
        })
        .await;
    let objects = plan.tasks.iter().filter(|t| writes(t)).count();
    let failed = failed.lock().unwrap().clone();
    (started.elapsed(), objects, failed)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut payload = None;
    let mut version = None;
    let mut parallelism = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--release-version" => version = args.next(),
            "--parallelism" => parallelism = args.next().and_then(|p| p.parse().ok()),
            _ => payload = Some(PathBuf::from(a)),
        }
    }
    let payload = payload.expect("usage: floor PAYLOAD --release-version V [--parallelism N]");
    let options = LoadOptions {
        release_version: version.clone(),
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    let loaded = minicvo::load(&payload, &options).expect("the payload loads");
    let (filters, _, _) =
        minicvo::cvo::capabilities::for_run(&options.filters, None, &loaded.manifests, None);
    let mut plan = minicvo::plan::from_payload(loaded, &filters, Mode::Initializing, 0);
    plan.version = version;
    let parallelism = parallelism
        .unwrap_or_else(|| Mode::Initializing.default_parallelism(plan.graph.nodes.len()));

    let conn = client::connect(None, None)
        .await
        .expect("a cluster ($KUBECONFIG)");
    let c = &conn.client;
    minicvo::e2e::cleanup::clean(c, &[&plan], Duration::from_secs(300))
        .await
        .expect("clean");
    let stand_ins = StandIns {
        crds: true,
        namespaces: true,
    };
    preflight::ensure(c, &[&plan], stand_ins, TIMEOUT)
        .await
        .expect("stand-ins");

    let before = conn.requests.get();
    let (took, objects, failed) = replay(c, &plan, parallelism).await;
    let requests = conn.requests.get() - before;
    for f in &failed {
        eprintln!("floor: refused: {f}");
    }
    println!(
        "floor_ms={} requests={requests} objects={objects} failed={} parallelism={parallelism}",
        took.as_millis(),
        failed.len()
    );
}
