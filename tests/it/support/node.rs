//! The plane with a node, for the tests of real pods (`tests/it/node_*.rs`).
//!
//! `hack/test.sh` starts it next to the shared plane (`hack/testplane.sh start --nodes 1`) and
//! exports `MINICVO_TEST_NODE_KUBECONFIG` (admin), `TESTPLANE_REGISTRY` and
//! `TESTPLANE_STANDIN_IMAGE` (the stand-in operator of `hack/tools/standin`, pushed to the
//! plane's registry). Without them these helpers **panic**: a missing node plane is a failure,
//! never a skip.
//!
//! Pods reach the API server as the stand-in does on any cluster, through
//! `KUBERNETES_SERVICE_HOST`/`PORT` and the pod's ServiceAccount token; the plane has no
//! service proxy, so stand-in pods run on the host network and get the API server's address
//! in those two variables (`REAL_PODS_API` of [`real_pods_scenarios`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The environment variable naming the node plane's kubeconfig.
pub const NODE_KUBECONFIG_ENV: &str = "MINICVO_TEST_NODE_KUBECONFIG";

fn required(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: the tests of real pods need the plane with a node; hint: run them \
             through `hack/test.sh` (it starts one unless TESTPLANE_NODES=0), or \
             `eval \"$(hack/testplane.sh start --nodes 1)\"` and export \
             {NODE_KUBECONFIG_ENV}=$KUBECONFIG"
        )
    })
}

/// The node plane's kubeconfig (admin context current).
pub fn kubeconfig() -> PathBuf {
    PathBuf::from(required(NODE_KUBECONFIG_ENV))
}

/// The stand-in operator image in the plane's registry.
pub fn standin_image() -> String {
    required("TESTPLANE_STANDIN_IMAGE")
}

/// The pause image in the plane's registry (a container that only waits).
pub fn pause_image() -> String {
    format!("{}/minicvo/pause:1", required("TESTPLANE_REGISTRY"))
}

/// An admin client for the node plane.
pub async fn client() -> Client {
    let path = kubeconfig();
    let kc = Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
    Client::try_from(config).expect("client for the node plane")
}

/// The port of the node plane's API server (on 127.0.0.1).
pub fn api_port() -> u16 {
    let path = kubeconfig();
    let text = std::fs::read_to_string(&path).expect("node kubeconfig");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no server https://127.0.0.1:PORT in {}", path.display()))
}

/// `minicvo apply --no-progress -o json [EXTRA] --kubeconfig NODE_PLANE PAYLOAD`.
pub fn apply_command(payload: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = super::cli::command(&["apply", "--no-progress", "-o", "json"]);
    c.args(extra)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .arg(payload)
        .env_remove("KUBECONFIG");
    c
}

/// Runs [`apply_command`] to completion within `limit` (killed after it); returns its exit
/// code, stdout and stderr.
pub async fn apply(payload: &Path, extra: &[&str], limit: Duration) -> (i32, String, String) {
    let mut c = apply_command(payload, extra);
    let shown = payload.display().to_string();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("out"), dir.path().join("err"));
        c.stdout(std::fs::File::create(&out).unwrap());
        let code = run_within(c, &format!("minicvo apply {shown}"), &err, limit);
        (
            code,
            std::fs::read_to_string(&out).unwrap_or_default(),
            std::fs::read_to_string(&err).unwrap_or_default(),
        )
    })
    .await
    .expect("apply task")
}

/// Serializes the node tests that use fixed names (the machine-config sample's namespace,
/// ClusterOperator and cluster-scoped RBAC): an exclusive lock on a file named after the node
/// plane's kubeconfig.
pub async fn fixed_names_lock() -> super::LockGuard {
    super::file_lock("minicvo-node-names", kubeconfig().as_os_str()).await
}

/// A namespace on the node plane, deleted (with its pods) when dropped.
#[derive(Debug)]
pub struct NodeNamespace(pub String);

impl std::ops::Deref for NodeNamespace {
    type Target = String;
    fn deref(&self) -> &String {
        &self.0
    }
}

impl Drop for NodeNamespace {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.0);
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let client = client().await;
                let _ = Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await;
            });
        })
        .join();
    }
}

/// Creates a fresh namespace on the node plane (see [`super::unique_name`]) and waits for its
/// `default` ServiceAccount, which pods need before they are admitted.
pub async fn namespace(client: &Client, prefix: &str) -> NodeNamespace {
    let name = super::unique_name(prefix);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(super::TEST_LABEL.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
    let guard = NodeNamespace(name.clone());
    wait_for_default_sa(client, &name).await;
    guard
}

/// Waits (30 s at most) until `ns/default` exists.
pub async fn wait_for_default_sa(client: &Client, ns: &str) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::runtime::wait::await_condition;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(sas, "default", |o: Option<&ServiceAccount>| o.is_some()),
    )
    .await
    .unwrap_or_else(|_| panic!("no ServiceAccount {ns}/default within 30 s"))
    .unwrap();
}

/// Waits until Deployment `ns/name` is Available with every replica of its latest
/// generation updated and ready; returns how long it took.
pub async fn wait_available(client: &Client, ns: &str, name: &str, limit: Duration) -> Duration {
    use kube::runtime::wait::await_condition;
    let start = std::time::Instant::now();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let done = |d: Option<&Deployment>| {
        let Some(d) = d else { return false };
        let want = d.spec.replicas.unwrap_or(1);
        let Some(st) = d.status.as_ref() else {
            return false;
        };
        st.observed_generation == d.metadata.generation
            && st.updated_replicas.unwrap_or(0) == want
            && st.ready_replicas.unwrap_or(0) == want
            && st.replicas.unwrap_or(0) == want
            && st.conditions.iter().flatten().any(|c| {
                c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")
            })
    };
    if tokio::time::timeout(limit, await_condition(deployments.clone(), name, done))
        .await
        .is_err()
    {
        let d = deployments.get_opt(name).await.ok().flatten();
        let pods = pod_summary(client, ns).await;
        panic!(
            "Deployment {ns}/{name} not available within {limit:?}: status {:?}; pods: {pods}",
            d.and_then(|d| d.status)
        );
    }
    start.elapsed()
}

/// One line per pod of `ns`: name, phase, and each container's state (for failure messages).
pub async fn pod_summary(client: &Client, ns: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return "(cannot list pods)".into();
    };
    list.items
        .iter()
        .map(|p| {
            let st = p.status.as_ref();
            format!(
                "{} {:?} {:?}",
                p.metadata.name.as_deref().unwrap_or("?"),
                st.and_then(|s| s.phase.as_deref()),
                st.and_then(|s| s.container_statuses.as_ref()).map(|cs| cs
                    .iter()
                    .map(|c| (&c.state, c.restart_count))
                    .collect::<Vec<_>>())
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The shared real-pod scenarios (`hack/scenarios/real-pods.sh`, which `hack/kind-e2e.sh
/// real-pods` runs on kind) against the node plane: the plane has no service proxy, so
/// `REAL_PODS_API` is its API server on 127.0.0.1 (the stand-in pods run on the host network),
/// and it serves the real CRDs (`REAL_PODS_CRDS=cluster`; the caller installs them). Results go
/// to `out`. Returns the script's exit code and its stderr (its verdict lines); killed after
/// `limit`.
pub async fn real_pods_scenarios(scenarios: &[&str], out: &Path, limit: Duration) -> (i32, String) {
    let script = super::cli::root().join("hack/scenarios/real-pods.sh");
    let mut c = std::process::Command::new("bash");
    c.arg(&script)
        .args(scenarios)
        .current_dir(super::cli::root())
        .env("KUBECONFIG", kubeconfig())
        .env("MINICVO", env!("CARGO_BIN_EXE_minicvo"))
        .env("STANDIN_IMAGE", standin_image())
        .env("PAUSE_IMAGE", pause_image())
        .env("REAL_PODS_API", format!("127.0.0.1:{}", api_port()))
        .env("REAL_PODS_CRDS", "cluster")
        .env("REAL_PODS_OUT", out)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG");
    if let Ok(bin) = std::env::var("TESTPLANE_BIN") {
        c.env("KUBECTL", Path::new(&bin).join("kubectl"));
    }
    let err = out.join("script.stderr");
    std::fs::create_dir_all(out).unwrap();
    tokio::task::spawn_blocking(move || {
        c.stdout(std::process::Stdio::null());
        let code = run_within(c, &script.display().to_string(), &err, limit);
        (code, std::fs::read_to_string(&err).unwrap_or_default())
    })
    .await
    .expect("scenario task")
}

/// Runs `c` (stderr to the file `err`) to completion within `limit`: its exit code; killed and
/// a panic naming `what` and its stderr after the limit. Blocking.
fn run_within(mut c: std::process::Command, what: &str, err: &Path, limit: Duration) -> i32 {
    let mut child = c
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not finish within {limit:?}: {}",
                std::fs::read_to_string(err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
