//! Rollouts of real pods on the plane with a node, through `minicvo apply`: a `RollingUpdate`
//! (maxSurge 1, maxUnavailable 0) runs the new pod next to the old one, and the switch to
//! `Recreate` — which the CVO's merge writes wholesale — stops the old pod before the new one
//! exists. This is the overlap model of the pod simulator (`simulate::pods::workload::rollout`)
//! checked against a kubelet.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;

use crate::support::apply::{INCLUDE, namespace, write_payload};
use crate::support::node;

/// What the pod watch saw, in the stream's order.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    pod: String,
    /// The pod's ReplicaSet (`pod-template-hash`).
    hash: String,
    /// `ready`, `stopping` (deletion requested or phase terminal), `stopped` (phase terminal:
    /// every container has exited; or deleted) or `gone` (deleted).
    what: &'static str,
}

/// Records, per pod, the first time it was ready, stopping and gone.
fn watch_pods(
    client: &kube::Client,
    ns: &str,
) -> (Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let log = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let (pod, deleted) = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                Ok(watcher::Event::Delete(p)) => (p, true),
                _ => continue,
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            let hash = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-template-hash").cloned())
                .unwrap_or_default();
            let st = pod.status.as_ref();
            let phase = st.and_then(|s| s.phase.as_deref()).unwrap_or("");
            let ready = st
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let terminal = phase == "Succeeded" || phase == "Failed";
            let stopping = pod.metadata.deletion_timestamp.is_some() || terminal;
            let mut log = log.lock().unwrap();
            let mut note = |what: &'static str| {
                if !log.iter().any(|s| s.pod == name && s.what == what) {
                    log.push(Seen {
                        at: Instant::now(),
                        pod: name.clone(),
                        hash: hash.clone(),
                        what,
                    });
                }
            };
            if ready && !stopping && !deleted {
                note("ready");
            }
            if stopping || deleted {
                note("stopping");
            }
            if terminal || deleted {
                note("stopped");
            }
            if deleted {
                note("gone");
            }
        }
    });
    (seen, task)
}

fn deployment(ns: &str, generation: &str, strategy: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n\
         spec:\n  replicas: 1\n  strategy:\n{strategy}  selector:\n    matchLabels:\n      app: app\n  template:\n    metadata:\n      labels:\n        app: app\n\
         \x20     annotations:\n        generation: \"{generation}\"\n    spec:\n      terminationGracePeriodSeconds: 5\n      containers:\n\
         \x20     - name: pause\n        image: {}\n",
        node::pause_image()
    )
}

const ROLLING: &str =
    "    type: RollingUpdate\n    rollingUpdate:\n      maxSurge: 1\n      maxUnavailable: 0\n";
const RECREATE: &str = "    type: Recreate\n";

async fn apply_generation(ns: &str, generation: &str, strategy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let payload = write_payload(
        dir.path(),
        &format!("1.0.{generation}"),
        &[
            (format!("0000_50_{ns}_00_namespace.yaml"), namespace(ns)),
            (
                format!("0000_50_{ns}_04_deployment.yaml"),
                deployment(ns, generation, strategy),
            ),
        ],
    );
    let (code, stdout, stderr) =
        node::apply(&payload, &["--no-cluster-version"], Duration::from_secs(60)).await;
    assert_eq!(
        code, 0,
        "apply of generation {generation} failed: {stderr}\n{stdout}"
    );
}

/// Waits until the rollout is over as the pod watch saw it: the Deployment is available, its
/// pods (listed now) belong to one ReplicaSet, the watch has seen one of them ready and every
/// pod of another ReplicaSet gone. Returns that ReplicaSet's hash and the events so far.
async fn settle(
    client: &kube::Client,
    ns: &str,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> (String, Vec<Seen>) {
    use kube::api::ListParams;
    node::wait_available(client, ns, "app", Duration::from_secs(60)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = pods.list(&ListParams::default()).await.unwrap();
        let hashes: std::collections::BTreeSet<String> = live
            .items
            .iter()
            .filter_map(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get("pod-template-hash")
                    .cloned()
            })
            .collect();
        let log = seen.lock().unwrap().clone();
        if let [current] = hashes.iter().collect::<Vec<_>>()[..] {
            let ready = log.iter().any(|s| &s.hash == current && s.what == "ready");
            let others_gone = log
                .iter()
                .filter(|s| &s.hash != current)
                .all(|o| log.iter().any(|s| s.pod == o.pod && s.what == "gone"));
            if ready && others_gone {
                return (current.clone(), log);
            }
        }
        assert!(
            Instant::now() < deadline,
            "the rollout did not settle within 60 s: {log:#?}\n{}",
            node::pod_summary(client, ns).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// For the rollout to ReplicaSet `new`: how long a `new` pod was ready while an older pod was
/// not yet stopping (positive: overlap), or, without overlap, minus the gap between the last
/// old pod having stopped (every container exited: what `Recreate` waits for, not the pod
/// object's deletion) and the first new pod being ready.
fn overlap(log: &[Seen], new: &str) -> f64 {
    let first_new_ready = log
        .iter()
        .find(|s| s.hash == new && s.what == "ready")
        .expect("a new pod became ready")
        .at;
    let old_pods: Vec<&Seen> = log
        .iter()
        .filter(|s| s.hash != new && s.what == "ready")
        .collect();
    let last_old = |what: &str| {
        old_pods
            .iter()
            .filter_map(|o| {
                log.iter()
                    .find(|s| s.pod == o.pod && s.what == what)
                    .map(|s| s.at)
            })
            .max()
            .expect("the old pod stopped")
    };
    let stopping = last_old("stopping");
    if stopping > first_new_ready {
        (stopping - first_new_ready).as_secs_f64()
    } else {
        let stopped = last_old("stopped");
        if stopped > first_new_ready {
            // Told to stop before, but still running when the new pod was ready.
            (stopped - first_new_ready).as_secs_f64()
        } else {
            -(first_new_ready - stopped).as_secs_f64()
        }
    }
}

#[tokio::test]
async fn rolling_update_overlaps_and_the_switch_to_recreate_stops_the_old_pod_first() {
    let client = node::client().await;
    let ns = node::namespace(&client, "node-rollout").await;
    apply_generation(&ns, "1", ROLLING).await;
    node::wait_available(&client, &ns, "app", Duration::from_secs(60)).await;
    let (seen, task) = watch_pods(&client, &ns);

    // RollingUpdate, maxUnavailable 0: the new pod is ready before the old one is told to stop.
    apply_generation(&ns, "2", ROLLING).await;
    let (second, log) = settle(&client, &ns, &seen).await;
    let rolling = overlap(&log, &second);
    assert!(rolling > 0.0, "no overlap in a RollingUpdate: {log:#?}");

    // The switch to Recreate (the CVO's merge replaces the strategy wholesale; a server-side
    // apply would keep the defaulted rollingUpdate and be refused): the old pod is gone
    // before the new one is even created.
    apply_generation(&ns, "3", RECREATE).await;
    let (third, log) = settle(&client, &ns, &seen).await;
    assert_ne!(second, third);
    let since_second: Vec<Seen> = log
        .iter()
        .filter(|s| s.hash == second || s.hash == third)
        .cloned()
        .collect();
    let recreate = overlap(&since_second, &third);
    assert!(
        recreate < 0.0,
        "pods overlapped in a Recreate rollout: {log:#?}"
    );
    eprintln!(
        "real pods: RollingUpdate overlap {rolling:.2} s; Recreate gap {:.2} s",
        -recreate
    );
    task.abort();
}
