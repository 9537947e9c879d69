//! The machine-config story with real pods: the `mco-buggy` and `mco-fixed` scenarios of
//! `hack/scenarios/real-pods.sh` — the same script `hack/kind-e2e.sh real-pods` runs on kind —
//! on the plane with a node: `e2e upgrade --wait-available --real-pods --simulate
//! machine-config=never` of the bundled samples, the machine-config-operator Deployment
//! running the stand-in operator image (`hack/tools/standin`) and every other Deployment the
//! pause image. The simulator reports every ClusterOperator but `machine-config` once its
//! workload is rolled out and available; `machine-config` is reported by the stand-in pod
//! itself, as its own ServiceAccount. The script checks the exit code, the story finding and
//! the harm the harness saw from the real pods (`--real-pods`); this test's own watch of the
//! operator's pods cross-checks it.
//!
//! Before the fix (`payload/new-buggy`), the ClusterRoleBinding of the old pod's
//! ServiceAccount (`default`) is deleted before the Deployment is updated: the old pod's next
//! request — a lease renewal, or at the latest the release of its lease when the `Recreate`
//! rollout stops it — is denied, and it exits 3 with the denial as its termination message.
//! After the fix (`payload/new`), no request of any pod is denied.
//!
//! This is also the "lease lost" row of the harm differential (`node_harm_differential`): the
//! same payload copies are upgraded with simulated pods on a plane without a node, and both verdicts
//! must agree — the same ServiceAccounts harmed (or none), and a leaderless time of the
//! operator's lease in both or in neither.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use minicvo::e2e::{TimelineAction, UpgradeOptions};

use crate::support::{self, node};

const OPERATOR_NS: &str = "openshift-machine-config-operator";

/// A container of a pod in the operator's namespace that ended with an error.
#[derive(Debug, Clone)]
struct Ended {
    pod: String,
    service_account: String,
    exit_code: i32,
    message: String,
}

/// Every container end with a non-zero exit code seen in `ns` (current and last states), and
/// a signal sent once the watch has listed the pods that already exist.
fn watch_ends(
    client: &kube::Client,
    ns: &str,
) -> (
    Arc<Mutex<Vec<Ended>>>,
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Receiver<()>,
) {
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let mut listed_tx = Some(listed_tx);
    let seen = Arc::new(Mutex::new(Vec::<Ended>::new()));
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let log = seen.clone();
    let task = tokio::spawn(async move {
        // Pods that exist when the watch starts belong to an earlier story, which this run's
        // `clean` takes the rights of: they are not this run's.
        let mut earlier = std::collections::HashSet::new();
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let p = match ev {
                Ok(watcher::Event::InitApply(p)) => {
                    earlier.insert(p.metadata.name.clone().unwrap_or_default());
                    continue;
                }
                Ok(watcher::Event::Apply(p) | watcher::Event::Delete(p)) => p,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                _ => continue,
            };
            let pod = p.metadata.name.clone().unwrap_or_default();
            if earlier.contains(&pod) {
                continue;
            }
            let sa = p
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_default();
            for cs in p
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
            {
                let states = [cs.state.as_ref(), cs.last_state.as_ref()];
                for t in states
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.terminated.as_ref())
                {
                    if t.exit_code == 0 {
                        continue;
                    }
                    let e = Ended {
                        pod: pod.clone(),
                        service_account: sa.clone(),
                        exit_code: t.exit_code,
                        message: t.message.clone().unwrap_or_default(),
                    };
                    let mut log = log.lock().unwrap();
                    if !log.iter().any(|x| x.pod == e.pod && x.message == e.message) {
                        log.push(e);
                    }
                }
            }
        }
    });
    (seen, task, listed)
}

/// What one run of a scenario gave.
struct Story {
    code: i32,
    verdict: String,
    ends: Vec<Ended>,
    took: Duration,
    /// The report's `leaseGaps`.
    lease_gaps: Vec<serde_json::Value>,
    /// The ServiceAccounts the harness saw harmed (the timeline's `harm` events).
    harmed: BTreeSet<String>,
    /// The same upgrade of the same payload copies with simulated pods on a plane without a node:
    /// the harmed ServiceAccounts, and whether the operator's lease had a leaderless time.
    simulated: (BTreeSet<String>, bool),
}

/// Runs one scenario of the shared script with the pod watch on.
async fn story(scenario: &str) -> Story {
    let _lock = node::fixed_names_lock().await;
    let client = node::client().await;
    support::openshift::install_both(&client, "Default").await;
    let out = tempfile::tempdir().unwrap();
    let (ends, task, listed) = watch_ends(&client, OPERATOR_NS);
    // The watch has listed the pods that exist now before the run starts.
    tokio::time::timeout(Duration::from_secs(30), listed)
        .await
        .expect("the pod watch listed within 30 s")
        .expect("the pod watch runs");
    let start = Instant::now();
    let (code, verdict) =
        node::real_pods_scenarios(&[scenario], out.path(), Duration::from_secs(300)).await;
    let took = start.elapsed();
    task.abort();
    eprintln!("{verdict}");
    if code != 0 {
        for f in ["json", "log"] {
            let path = out.path().join(format!("{scenario}.{f}"));
            eprintln!(
                "{}:\n{}",
                path.display(),
                std::fs::read_to_string(&path).unwrap_or_default()
            );
        }
    }
    let ends = ends.lock().unwrap().clone();
    let report = std::fs::read_to_string(out.path().join(format!("{scenario}.json")))
        .expect("the scenario wrote its report");
    let report: serde_json::Value = serde_json::from_str(&report).expect("the report is JSON");
    let lease_gaps = report["leaseGaps"].as_array().cloned().unwrap_or_default();
    let timeline = std::fs::read_to_string(out.path().join(format!("{scenario}.timeline.json")))
        .expect("the scenario wrote its timeline");
    let timeline: serde_json::Value =
        serde_json::from_str(&timeline).expect("the timeline is JSON");
    let harmed = timeline["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "harm")
        .filter_map(|e| e["serviceAccount"].as_str().map(str::to_string))
        .collect();
    let to = if scenario == "mco-buggy" {
        "new-buggy"
    } else {
        "new"
    };
    let payloads = out.path().join("payloads");
    let simulated = simulated(&payloads.join("old"), &payloads.join(to)).await;
    Story {
        code,
        verdict,
        ends,
        took,
        lease_gaps,
        harmed,
        simulated,
    }
}

/// The upgrade `old` → `new` (the script's copies) with simulated pods on a plane of the
/// fixed-names pool: the harmed ServiceAccounts, and whether the operator's lease had a leaderless time.
async fn simulated(old: &Path, new: &Path) -> (BTreeSet<String>, bool) {
    let plane = support::fixed_names_plane().await;
    let admin = plane.real_crds().await;
    let mut o = UpgradeOptions {
        from: old.to_path_buf(),
        to: new.to_path_buf(),
        clean: true,
        clean_after: true,
        ..UpgradeOptions::default()
    };
    o.apply.runner.wait_timeout = Duration::from_secs(20);
    let report = support::apply::e2e_upgrade(&plane.e2e_clients().await, &o).await;
    support::openshift::assert_real_crds(&admin, "Default").await;
    eprintln!("simulated pods:\n{}", report.text());
    let harmed = report
        .timeline
        .events
        .iter()
        .filter(|e| e.action == TimelineAction::Harm)
        .filter_map(|e| e.harm.as_ref().map(|h| h.service_account.clone()))
        .collect();
    let workload = format!("Deployment {OPERATOR_NS}/machine-config-operator");
    let gap = report.lease_gaps.iter().any(|g| g.workload == workload);
    (harmed, gap)
}

/// The real and simulated verdicts agree: the same ServiceAccounts harmed, a leaderless time
/// of the operator's lease in both or in neither.
fn assert_verdicts_agree(s: &Story) {
    let real_gap = !operator_lease_gaps(s).is_empty();
    assert_eq!(
        (&s.harmed, real_gap),
        (&s.simulated.0, s.simulated.1),
        "real (harmed, lease gap) vs simulated\n{}",
        s.verdict
    );
}

/// The leaderless times of the operator's lease, seen by the harness from the real pods'
/// Lease.
fn operator_lease_gaps(s: &Story) -> Vec<&serde_json::Value> {
    let workload = format!("Deployment {OPERATOR_NS}/machine-config-operator");
    s.lease_gaps
        .iter()
        .filter(|g| g["workload"] == workload.as_str())
        .collect()
}

/// The one leaderless time of the operator's lease while the `Recreate` rollout replaced the
/// denied pod: closed (the new pod took the lease) and not longer than the run.
fn operator_lease_gap(s: &Story) -> f64 {
    let gaps = operator_lease_gaps(s);
    assert_eq!(
        gaps.len(),
        1,
        "one leaderless time of the operator: {:?}\n{}",
        s.lease_gaps,
        s.verdict
    );
    let g = gaps[0];
    assert!(g["to"].is_f64(), "the new pod took the lease: {g}");
    let seconds = g["seconds"].as_f64().expect("seconds");
    assert!(
        seconds > 0.0 && seconds < s.took.as_secs_f64(),
        "gap of {seconds} s in a run of {:?}: {g}",
        s.took
    );
    seconds
}

#[tokio::test]
async fn buggy_order_denies_the_old_operator_pod_with_real_pods() {
    let s = story("mco-buggy").await;
    let (code, verdict, ends, took) = (s.code, &s.verdict, &s.ends, s.took);
    // The script: exit 1, the story finding, and live-pods-keep-access failing on a `denied:`
    // harm of the old pod's ServiceAccount caused by the binding's delete.
    assert_eq!(code, 0, "{verdict}");
    assert!(verdict.contains("mco-buggy: as expected"), "{verdict}");
    // And the test's own watch agrees: the old pod, running as `default`, was denied;
    // nobody else was.
    let old_sa = format!("system:serviceaccount:{OPERATOR_NS}:default");
    let denied = ends
        .iter()
        .find(|e| e.exit_code == 3 && e.message.starts_with("denied:"))
        .unwrap_or_else(|| panic!("no pod was denied: {ends:?}\n{verdict}"));
    assert!(
        ends.iter().all(|e| e.message.contains(&old_sa)),
        "a pod other than the old one ended with an error: {ends:?}"
    );
    assert!(
        denied.service_account.is_empty() || denied.service_account == "default",
        "the denied pod ran as {}: {denied:?}",
        denied.service_account
    );
    // The denied pod could not release its lease: the new one waited for it to expire.
    let gap = operator_lease_gap(&s);
    // Simulated pods feel the same harm, and their lease has a leaderless time too.
    assert_eq!(
        s.harmed,
        BTreeSet::from([format!("{OPERATOR_NS}/default")]),
        "{verdict}"
    );
    assert_verdicts_agree(&s);
    eprintln!(
        "machine-config story, buggy, real pods: {took:.1?}; lease gap {gap:.2} s; denied: {denied:?}"
    );
}

#[tokio::test]
async fn fixed_order_denies_nothing_with_real_pods() {
    let s = story("mco-fixed").await;
    let (code, verdict, ends, took) = (s.code, &s.verdict, &s.ends, s.took);
    // The script: exit 0, the report ok, real pods watched, no harm.
    assert_eq!(code, 0, "{verdict}");
    assert!(verdict.contains("mco-fixed: as expected"), "{verdict}");
    assert!(ends.is_empty(), "a pod ended with an error: {ends:?}");
    // The old pod released its lease when stopped: the new one could take it at once.
    assert!(
        s.lease_gaps.is_empty(),
        "no leaderless time: {:?}",
        s.lease_gaps
    );
    assert!(s.harmed.is_empty(), "{:?}", s.harmed);
    assert_verdicts_agree(&s);
    eprintln!("machine-config story, fixed, real pods: {took:.1?}; no lease gap");
}
