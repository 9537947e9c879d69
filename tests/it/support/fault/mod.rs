//! Support for the reliability tests (`tests/reliability.rs`): a private test plane
//! ([`plane`]), a fault-injecting proxy ([`proxy`]), a 500-object synthetic payload, running the
//! built `minicvo apply` through the proxy, playing the sample's operators, and the convergence
//! check that compares the cluster with the plan (and with the run's own report).

pub mod plane;
pub mod proxy;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::discovery::{Discovery, Scope};
use minicvo::{Action, Filters, LoadOptions, Mode, Plan};
use serde_json::{Value, json};

/// The annotation every manifest needs to be included with the default profile.
pub const INCLUDE: &str = "include.release.openshift.io/self-managed-high-availability";

/// The bundled sample payload `name`, without its stand-in ClusterOperator and ClusterVersion
/// CRDs (the plane serves the real ones, see [`crate::support::openshift`]).
pub fn sample(name: &str) -> PathBuf {
    crate::support::openshift::sample(name)
}

/// Loads and plans a payload the way `minicvo apply` does (placeholder substituted).
pub fn plan(dir: &Path) -> Plan {
    let options = LoadOptions {
        filters: Filters::default(),
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    let payload = minicvo::load(dir, &options).expect("payload loads");
    minicvo::plan::from_payload(payload, &options.filters, Mode::Updating, 0)
}

/// Namespaces of the synthetic payload named `prefix`.
pub fn synthetic_namespaces(prefix: &str) -> Vec<String> {
    (0..5).map(|i| format!("{prefix}-ns{i}")).collect()
}

/// The ConfigMaps that the synthetic payload deletes (tombstones): create them first.
pub fn synthetic_doomed(prefix: &str) -> Vec<(String, String)> {
    let ns = synthetic_namespaces(prefix);
    (0..20)
        .map(|i| (ns[i % ns.len()].clone(), format!("doomed-{i}")))
        .collect()
}

/// Writes a 500-task payload into `dir`: 5 namespaces, then ConfigMaps, Secrets,
/// ServiceAccounts, Roles and RoleBindings spread over 10 components and two run-levels
/// (parallel nodes), 10 create-only ConfigMaps and 20 tombstones for [`synthetic_doomed`].
pub fn write_synthetic(dir: &Path, prefix: &str, version: &str) -> PathBuf {
    crate::support::apply::write_payload(dir, version, &[]);
    let rm = dir.join("release-manifests");
    let ns = synthetic_namespaces(prefix);
    let mut tasks = 0;
    let mut text = String::new();
    for n in &ns {
        let _ = write!(
            text,
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n  annotations:\n    {INCLUDE}: \"true\"\n"
        );
        tasks += 1;
    }
    std::fs::write(rm.join("0000_10_synth_00_namespaces.yaml"), text).unwrap();
    let ann = format!("  annotations:\n    {INCLUDE}: \"true\"\n");
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut i = 0usize;
    while tasks < 470 {
        let comp = i % 10;
        let level = if i % 20 < 10 { 20 } else { 30 };
        let n = &ns[i % ns.len()];
        let doc = match i % 5 {
            0 | 1 => format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: {n}\n{ann}data:\n  index: \"{i}\"\n  version: \"{version}\"\n"
            ),
            2 => format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-{i}\n  namespace: {n}\n{ann}type: Opaque\ndata:\n  value: c2VjcmV0LXZhbHVl\n"
            ),
            3 => format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-{i}\n  namespace: {n}\n{ann}"
            ),
            _ => format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: role-{i}\n  namespace: {n}\n{ann}rules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: role-{i}\n  namespace: {n}\n{ann}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: role-{i}\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: {n}\n"
            ),
        };
        tasks += if i % 5 == 4 { 2 } else { 1 };
        let file = format!("0000_{level}_synth-c{comp}_01_objects.yaml");
        let entry = files.entry(file).or_default();
        entry.push_str("---\n");
        entry.push_str(&doc);
        i += 1;
    }
    let mut create_only = String::new();
    for k in 0..10 {
        let n = &ns[k % ns.len()];
        let _ = write!(
            create_only,
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: create-only-{k}\n  namespace: {n}\n  annotations:\n    {INCLUDE}: \"true\"\n    release.openshift.io/create-only: \"true\"\ndata:\n  seeded: \"{version}\"\n"
        );
    }
    files.insert("0000_40_synth-late_00_create-only.yaml".into(), create_only);
    let mut tombstones = String::new();
    for (n, name) in synthetic_doomed(prefix) {
        let _ = write!(
            tombstones,
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  annotations:\n    {INCLUDE}: \"true\"\n    release.openshift.io/delete: \"true\"\n"
        );
    }
    files.insert("0000_90_synth-late_00_tombstones.yaml".into(), tombstones);
    for (name, text) in files {
        std::fs::write(rm.join(name), text).unwrap();
    }
    dir.to_path_buf()
}

/// Creates the objects the synthetic payload deletes (and their namespaces).
pub async fn seed_synthetic(client: &Client, prefix: &str) {
    let pp = PatchParams::apply("reliability-seed").force();
    let nss: Api<DynamicObject> = Api::all_with(client.clone(), &ar("", "v1", "Namespace"));
    for n in synthetic_namespaces(prefix) {
        nss.patch(
            &n,
            &pp,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}),
            ),
        )
        .await
        .unwrap();
    }
    for (n, name) in synthetic_doomed(prefix) {
        let cms: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &n, &ar("", "v1", "ConfigMap"));
        cms.patch(
            &name,
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": n}, "data": {"old": "yes"}})),
        )
        .await
        .unwrap();
    }
}

fn ar(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// One run of `minicvo apply`.
#[derive(Debug)]
pub struct Run {
    /// Exit code; `None` when killed.
    pub code: Option<i32>,
    /// The `ApplyResult` JSON, when stdout held one.
    pub report: Option<Value>,
    /// Standard error.
    pub stderr: String,
    /// Wall time.
    pub elapsed: Duration,
}

impl Run {
    /// Retries the run took: the sum of `attempts - 1` over its tasks.
    pub fn retries(&self) -> u64 {
        self.report
            .as_ref()
            .and_then(|r| r["tasks"].as_array())
            .map_or(0, |tasks| {
                tasks
                    .iter()
                    .map(|t| t["attempts"].as_u64().unwrap_or(1).saturating_sub(1))
                    .sum()
            })
    }

    /// Requests the run says it sent.
    pub fn requests(&self) -> u64 {
        self.report
            .as_ref()
            .and_then(|r| r["requests"].as_u64())
            .unwrap_or(0)
    }

    /// Whether the report says ok.
    pub fn ok(&self) -> bool {
        self.report.as_ref().is_some_and(|r| r["ok"] == true)
    }

    /// The report's failures, one line each.
    pub fn errors(&self) -> Vec<String> {
        self.report
            .as_ref()
            .and_then(|r| r["errors"].as_array())
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| {
                        format!(
                            "{} {}/{}: {}",
                            e["kind"].as_str().unwrap_or(""),
                            e["namespace"].as_str().unwrap_or(""),
                            e["name"].as_str().unwrap_or(""),
                            e["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Starts `minicvo apply PAYLOAD --kubeconfig KC -o json --no-progress EXTRA...`.
pub fn spawn_apply(payload: &Path, kubeconfig: &Path, extra: &[&str]) -> Child {
    crate::support::cli::command(&[])
        .arg("apply")
        .arg(payload)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-o", "json", "--no-progress", "--wait-timeout", "90s"])
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("minicvo starts")
}

/// Waits for a spawned apply (at most `timeout`, then kills it) and collects its output.
pub fn finish(child: Child, started: Instant, timeout: Duration) -> Run {
    let pid = child.id();
    // The watchdog kills the child unless told it finished before the timeout.
    let (finished, watchdog) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let left = timeout.saturating_sub(started.elapsed());
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watchdog.recv_timeout(left) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    });
    let out = child.wait_with_output().expect("minicvo finishes");
    let _ = finished.send(());
    Run {
        code: out.status.code(),
        report: serde_json::from_slice(&out.stdout).ok(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Runs `minicvo apply` to the end.
pub fn apply(payload: &Path, kubeconfig: &Path, extra: &[&str]) -> Run {
    let started = Instant::now();
    finish(
        spawn_apply(payload, kubeconfig, extra),
        started,
        Duration::from_secs(600),
    )
}

/// Plays the sample's operators: while running, every ClusterOperator the plan waits on is
/// given a done status at the plan's version once a watch sees it (after `delay`).
pub struct OperatorPlayer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl OperatorPlayer {
    /// Starts playing the operators of `plan`: each is done `delay` after the watch first sees
    /// it (the operator's working time; a delay makes minicvo watch it). An operator seen again
    /// without the version (e.g. recreated) is reported again.
    pub fn start(client: Client, plan: &Plan, delay: Duration) -> Self {
        use futures::StreamExt as _;
        use kube::runtime::WatchStreamExt as _;
        let version = plan.version.clone().unwrap_or_default();
        let names: BTreeSet<String> = plan
            .tasks
            .iter()
            .filter(|t| t.action == Action::Wait)
            .map(|t| t.manifest.id.name.clone())
            .collect();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterOperator");
            let api: Api<DynamicObject> = Api::all_with(
                client,
                &ApiResource::from_gvk_with_plural(&gvk, "clusteroperators"),
            );
            let status = json!({"status": {
                "versions": [{"name": "operator", "version": version}],
                "conditions": [
                    {"type": "Available", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "Degraded", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "Progressing", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                ],
            }});
            let mut events = std::pin::pin!(
                kube::runtime::watcher(api.clone(), kube::runtime::watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
            );
            let mut first_seen: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
            // Reports in flight (dropped, so aborted, when the player stops).
            let mut reports: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
            let pending = Arc::new(std::sync::Mutex::new(BTreeSet::<String>::new()));
            loop {
                let co = tokio::select! {
                    _ = &mut stopped => break,
                    ev = events.next() => match ev {
                        Some(Ok(co)) => co,
                        // The watcher retries with backoff by itself.
                        Some(Err(_)) => continue,
                        None => break,
                    },
                };
                let Some(name) = co.metadata.name.clone() else {
                    continue;
                };
                if !names.contains(&name) || co.data["status"]["versions"][0]["version"] == version
                {
                    continue;
                }
                if !pending.lock().unwrap().insert(name.clone()) {
                    continue;
                }
                let due = *first_seen
                    .entry(name.clone())
                    .or_insert_with(tokio::time::Instant::now)
                    + delay;
                let (api, status, pending) = (api.clone(), status.clone(), pending.clone());
                reports.spawn(async move {
                    // The operator's working time, not a synchronisation.
                    tokio::time::sleep_until(due).await;
                    // A failed write (the API server restarting) is retried with backoff: no
                    // event says the server is back.
                    let mut backoff = Duration::from_millis(50);
                    for _ in 0..20 {
                        let patch = Patch::Merge(&status);
                        if api
                            .patch_status(&name, &PatchParams::default(), &patch)
                            .await
                            .is_ok()
                        {
                            break;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                    pending.lock().unwrap().remove(&name);
                });
            }
        });
        OperatorPlayer {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops playing.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// Whether every field of `want` is in `have` with the same value (lists compared element by
/// element, objects key by key; `have` may hold more, e.g. server defaults).
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(hv, wv)| contains(hv, wv))
        }
        (Value::Number(h), Value::Number(w)) => h.as_f64() == w.as_f64(),
        _ => have == want,
    }
}

/// The API of `kind` in `group` served by the cluster.
async fn api_for(
    client: &Client,
    discovery: &Discovery,
    group: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Option<Api<DynamicObject>> {
    let (ar, caps) = discovery
        .groups()
        .filter(|g| g.name() == group)
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == kind)?;
    Some(match (namespace, caps.scope) {
        (Some(ns), Scope::Namespaced) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    })
}

/// Compares the cluster with `plan` and with the run's report; returns every problem found:
/// an applied object missing or with other content, a deleted object still there, a waited
/// ClusterOperator not at the version, a task the report calls done that is not.
pub async fn verify(client: &Client, plan: &Plan, report: Option<&Value>) -> Vec<String> {
    let discovery = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("discovery");
    let mut problems = Vec::new();
    let version = plan.version.clone().unwrap_or_default();
    for t in &plan.tasks {
        let id = &t.manifest.id;
        let label = id.to_string();
        let Some(api) = api_for(
            client,
            &discovery,
            &id.group,
            &id.kind,
            id.namespace.as_deref(),
        )
        .await
        else {
            problems.push(format!("{label}: kind not served"));
            continue;
        };
        let live = api.get_opt(&id.name).await.expect("get");
        match t.action {
            Action::Apply => match &live {
                None => problems.push(format!("{label}: missing")),
                Some(o) => {
                    let mut want = Value::clone(&t.manifest.object);
                    if let Value::Object(m) = &mut want {
                        m.remove("status");
                    }
                    let have = serde_json::to_value(o).unwrap();
                    if !contains(&have, &want) {
                        problems.push(format!("{label}: content differs from the payload"));
                    }
                }
            },
            Action::CreateOnly => {
                if live.is_none() {
                    problems.push(format!("{label}: create-only object missing"));
                }
            }
            Action::Delete => {
                if let Some(o) = &live {
                    let terminating = o.metadata.deletion_timestamp.is_some();
                    if !(terminating && id.kind == "Namespace") {
                        problems.push(format!("{label}: not deleted"));
                    }
                }
            }
            Action::Wait => {
                let at = live
                    .as_ref()
                    .map(|o| o.data["status"]["versions"][0]["version"].clone());
                if at != Some(Value::String(version.clone())) {
                    problems.push(format!("{label}: not at {version} ({at:?})"));
                }
            }
            Action::Skip => {}
        }
    }
    if let Some(report) = report {
        problems.extend(check_report(client, &discovery, report).await);
    }
    problems
}

/// "No task reported done that was not": each task the report calls created, configured,
/// unchanged or create-only-skipped exists; deleted or already absent is gone.
async fn check_report(client: &Client, discovery: &Discovery, report: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for t in report["tasks"].as_array().into_iter().flatten() {
        let outcome = t["outcome"].as_str().unwrap_or("");
        let kind = t["kind"].as_str().unwrap_or("");
        let name = t["name"].as_str().unwrap_or("");
        let ns = t["namespace"].as_str();
        let should_exist = match outcome {
            "created" | "configured" | "unchanged" | "createOnlySkipped" | "waited" => true,
            "deleted" | "alreadyAbsent" => false,
            _ => continue,
        };
        let api = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(ar, _)| ar.kind == kind)
            .map(|(ar, caps)| match (ns, caps.scope) {
                (Some(ns), Scope::Namespaced) => Api::namespaced_with(client.clone(), ns, &ar),
                _ => Api::all_with(client.clone(), &ar),
            });
        let Some(api) = api else {
            problems.push(format!(
                "report: {kind} {name} {outcome}, but the kind is not served"
            ));
            continue;
        };
        let live: Option<DynamicObject> = api.get_opt(name).await.expect("get");
        // Present and not being deleted; an object whose deletion waits on finalizers counts
        // as deleted.
        let exists = live
            .as_ref()
            .is_some_and(|o| o.metadata.deletion_timestamp.is_none());
        if exists != should_exist {
            problems.push(format!(
                "report says {kind} {}/{name} {outcome}, the cluster disagrees",
                ns.unwrap_or("")
            ));
        }
    }
    problems
}

/// "Nothing duplicated": in each synthetic namespace, the objects of each kind the payload
/// uses are exactly the payload's (plus what Kubernetes makes itself), no more, no fewer.
pub async fn verify_no_extras(client: &Client, plan: &Plan, prefix: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for ns in synthetic_namespaces(prefix) {
        for (group, version, kind, builtin) in [
            ("", "v1", "ConfigMap", &["kube-root-ca.crt"][..]),
            ("", "v1", "Secret", &[][..]),
            ("", "v1", "ServiceAccount", &["default"][..]),
            ("rbac.authorization.k8s.io", "v1", "Role", &[][..]),
            ("rbac.authorization.k8s.io", "v1", "RoleBinding", &[][..]),
        ] {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &ar(group, version, kind));
            let live: BTreeSet<String> = api
                .list(&ListParams::default())
                .await
                .expect("list")
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .filter(|n| !builtin.contains(&n.as_str()))
                .collect();
            let want: BTreeSet<String> = plan
                .tasks
                .iter()
                .filter(|t| {
                    t.manifest.id.kind == kind
                        && t.manifest.id.namespace.as_deref() == Some(ns.as_str())
                        && matches!(t.action, Action::Apply | Action::CreateOnly)
                })
                .map(|t| t.manifest.id.name.clone())
                .collect();
            if live != want {
                let extra: Vec<_> = live.difference(&want).collect();
                let missing: Vec<_> = want.difference(&live).collect();
                problems.push(format!("{ns} {kind}: extra {extra:?}, missing {missing:?}"));
            }
        }
    }
    problems
}
