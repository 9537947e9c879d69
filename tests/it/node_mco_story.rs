//! The machine-config story with real pods: `e2e upgrade --wait-available` of the bundled
//! samples on the plane with a node, the machine-config-operator Deployment running the
//! stand-in operator image (`hack/tools/standin`) and every other Deployment the pause image.
//! The simulator reports every ClusterOperator but `machine-config` once its workload is
//! rolled out and available; `machine-config` is reported by the stand-in pod itself, as its
//! own ServiceAccount. The harness watches the real pods (`--real-pods`) instead of simulating
//! them, and a test watch of the operator's pods cross-checks what it reports.
//!
//! Before the fix (`payload/new-buggy`), the ClusterRoleBinding of the old pod's
//! ServiceAccount (`default`) is deleted before the Deployment is updated: the old pod's next
//! request — a lease renewal, or at the latest the release of its lease when the `Recreate`
//! rollout stops it — is denied, and it exits 3 with the denial as its termination message.
//! After the fix (`payload/new`), no request of any pod is denied.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use minicvo::e2e::{self, Clients, UpgradeOptions, UpgradeReport};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{self, node};

const OPERATOR_NS: &str = "openshift-machine-config-operator";
const BINDING: &str = "default-account-openshift-machine-config-operator";

/// A copy of sample `name` for real pods: no CRDs (the plane serves the real ones), the
/// machine-config-operator Deployment on the stand-in image, every other Deployment on the
/// pause image.
fn for_real_pods(name: &str, into: &Path) -> PathBuf {
    let src = support::cli::root()
        .join("payload")
        .join(name)
        .join("release-manifests");
    let dst = into.join(name);
    let rm = dst.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    // kubectl reads `0644` as YAML 1.1 octal; a plain YAML parser does not.
    let octal = regex::Regex::new(r"(defaultMode: )0([0-7]+)").unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file.ends_with(".crd.yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let out = if file.ends_with("_deployment.yaml") {
            let text = octal.replace_all(&text, |c: &regex::Captures| {
                format!("{}{}", &c[1], i64::from_str_radix(&c[2], 8).unwrap())
            });
            let mut d: Value = serde_saphyr::from_str(&text).unwrap();
            for_node(&mut d);
            serde_json::to_string_pretty(&d).unwrap()
        } else {
            text
        };
        std::fs::write(rm.join(&file), out).unwrap();
    }
    dst
}

fn for_node(d: &mut Value) {
    let mco = d["metadata"]["name"] == "machine-config-operator";
    let spec = &mut d["spec"]["template"]["spec"];
    spec["terminationGracePeriodSeconds"] = json!(10);
    if mco {
        spec["hostNetwork"] = json!(true);
    }
    for c in spec["containers"].as_array_mut().unwrap() {
        if !mco {
            c["image"] = json!(node::pause_image());
            c.as_object_mut().unwrap().remove("args");
            continue;
        }
        c["image"] = json!(node::standin_image());
        let env = c["env"].as_array_mut().unwrap();
        for (k, v) in [
            ("STANDIN_CLUSTEROPERATOR", "machine-config".to_string()),
            ("STANDIN_LEASE_DURATION", "3".to_string()),
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1".to_string()),
            ("KUBERNETES_SERVICE_PORT", node::api_port().to_string()),
        ] {
            env.push(json!({"name": k, "value": v}));
        }
        env.push(
            json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        );
    }
}

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

async fn story(new: &str) -> (UpgradeReport, Vec<Ended>, Duration) {
    let _lock = node::fixed_names_lock().await;
    let client = node::client().await;
    support::openshift::install_both(&client, "Default").await;
    let dir = tempfile::tempdir().unwrap();
    let mut o = UpgradeOptions {
        from: for_real_pods("old", dir.path()),
        to: for_real_pods(new, dir.path()),
        // The next story's `clean` removes this one's objects: deleting them at the end would
        // take the rights of pods that still run, and the watch would see those denials.
        clean: true,
        clean_after: false,
        wait_available: true,
        real_pods: true,
        specs: vec!["machine-config=never".parse().unwrap()],
        ..UpgradeOptions::default()
    };
    o.apply.runner.wait_timeout = Duration::from_secs(90);
    let connect = || async {
        minicvo::apply::connect(Some(&node::kubeconfig()), None)
            .await
            .expect("connect to the node plane")
    };
    let clients = Clients {
        apply: connect().await,
        simulator: connect().await,
    };
    let (ends, task, listed) = watch_ends(&client, OPERATOR_NS);
    // The watch has listed the pods that exist now before the run starts.
    tokio::time::timeout(Duration::from_secs(30), listed)
        .await
        .expect("the pod watch listed within 30 s")
        .expect("the pod watch runs");
    let start = Instant::now();
    let report = tokio::time::timeout(
        Duration::from_secs(300),
        e2e::upgrade(&clients, &o, None, CancellationToken::new()),
    )
    .await
    .expect("the e2e finished within 300 s")
    .unwrap_or_else(|e| panic!("e2e could not run: {e}"));
    let took = start.elapsed();
    task.abort();
    eprintln!("{}", report.text());
    for run in &report.runs {
        if let Some(f) = run.failure() {
            eprintln!("{:?} failed: {f}: {:?}", run.phase, run.report.errors);
        }
    }
    let ends = ends.lock().unwrap().clone();
    (report, ends, took)
}

#[tokio::test]
async fn buggy_order_denies_the_old_operator_pod_with_real_pods() {
    let (report, ends, took) = story("new-buggy").await;
    assert!(report.completed(), "{}", report.text());
    let findings = report.story_findings();
    assert!(
        findings.iter().any(|f| f.contains(
            "ClusterRoleBinding default-account-openshift-machine-config-operator was deleted"
        )),
        "{findings:?}"
    );
    assert!(!report.ok(), "{}", report.text());
    // The harness saw it from the real pods: live-pods-keep-access fails on the old pod's
    // denial and names the binding's delete as its cause.
    let live = report
        .check(None, e2e::LIVE_PODS_CHECK)
        .expect("live-pods-keep-access ran");
    assert!(!live.passed(), "{}", report.text());
    let (event, harm) = report
        .timeline
        .events
        .iter()
        .filter_map(|e| e.harm.as_ref().map(|h| (e, h)))
        .find(|(_, h)| h.service_account == format!("{OPERATOR_NS}/default"))
        .unwrap_or_else(|| panic!("no harm of the old operator pod: {}", report.text()));
    assert_eq!(event.object.name, "machine-config-operator");
    assert!(harm.what.starts_with("denied:"), "{harm:?}");
    let cause = harm.cause.as_deref().unwrap_or_default();
    assert!(
        cause.starts_with("delete ClusterRoleBinding") && cause.ends_with(BINDING),
        "{cause}"
    );
    // And the test's own watch agrees: the old pod, running as `default`, was denied;
    // nobody else was.
    let old_sa = format!("system:serviceaccount:{OPERATOR_NS}:default");
    let denied = ends
        .iter()
        .find(|e| e.exit_code == 3 && e.message.starts_with("denied:"))
        .unwrap_or_else(|| panic!("no pod was denied: {ends:?}\n{}", report.text()));
    assert!(
        ends.iter().all(|e| e.message.contains(&old_sa)),
        "a pod other than the old one ended with an error: {ends:?}"
    );
    assert!(
        denied.service_account.is_empty() || denied.service_account == "default",
        "the denied pod ran as {}: {denied:?}",
        denied.service_account
    );
    eprintln!("machine-config story, buggy, real pods: {took:.1?}; denied: {denied:?}");
}

#[tokio::test]
async fn fixed_order_denies_nothing_with_real_pods() {
    let (report, ends, took) = story("new").await;
    assert!(report.ok(), "{}", report.text());
    let live = report
        .check(None, e2e::LIVE_PODS_CHECK)
        .expect("live-pods-keep-access ran");
    assert!(
        live.notes.iter().any(|n| n.contains("real pods watched")),
        "{:?}",
        live.notes
    );
    assert!(ends.is_empty(), "a pod ended with an error: {ends:?}");
    eprintln!("machine-config story, fixed, real pods: {took:.1?}");
}
