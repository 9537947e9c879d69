//! Running `minicvo operator` as a process against the test plane, scraping its metrics and
//! reading ClusterVersion, for the operator tests.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use minicvo::simulate::{Scripts, Simulator, SimulatorOptions};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

use crate::support::{self, apply as apply_util};

/// The bundled samples (without their stand-in CRDs) the operator gets as `--payloads`.
pub fn payloads(names: &[&str]) -> Vec<PathBuf> {
    names
        .iter()
        .map(|n| support::openshift::sample(n))
        .collect()
}

/// A free port on 127.0.0.1 (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `minicvo operator` process.
pub struct Operator {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

/// Lease timings of the HA tests: 4 s lease, 3 s renew deadline, 500 ms retry.
pub const LEASE: Duration = Duration::from_secs(4);
pub const RETRY: Duration = Duration::from_millis(500);

impl Operator {
    /// Starts `minicvo operator` with the samples `payloads`, release 4.13.0, a 1 s resync
    /// interval, short lease timings and metrics on a free port; `extra` flags are added.
    pub fn start(identity: &str, payloads: &[PathBuf], extra: &[&str]) -> Operator {
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "{}.log",
            support::unique_name(&format!("operator-{identity}"))
        ));
        let mut c = crate::support::cli::command(&["-v", "operator", "--release", "4.13.0"]);
        for p in payloads {
            c.arg("--payloads").arg(p);
        }
        c.args([
            "--resync-interval",
            "1s",
            "--no-resync-jitter",
            "--pass-timeout",
            "3m",
            "--wait-timeout",
            "60s",
            "--stub-missing-crds",
            "--create-missing-namespaces",
            "--lease-duration",
            "4s",
            "--renew-deadline",
            "3s",
            "--retry-period",
            "500ms",
            "--identity",
            identity,
            // Plain HTTP on loopback: these tests read the figures, not who may
            // (metrics_access.rs does that over HTTPS).
            "--metrics-plain-http",
            "--metrics-addr",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .args(extra)
        .arg("--kubeconfig")
        .arg(apply_util::kubeconfig())
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        let child = c.spawn().expect("operator starts");
        Operator { child, port, log }
    }

    /// Sends a signal (`TERM`, `KILL`).
    pub fn signal(&self, signal: &str) {
        let ok = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    /// Waits for the process to exit (at most `limit`) and returns its exit code.
    pub async fn exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s.code().unwrap_or(-1));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// The operator's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `/metrics`, parsed (`None` while the server does not answer).
    pub async fn metrics(&self) -> Option<prometheus_parse::Scrape> {
        let body = get(self.port, "/metrics").await?;
        let (status, text) = body;
        if status != 200 {
            return None;
        }
        Some(
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
                .expect("/metrics parses as Prometheus text"),
        )
    }

    /// The value of `minicvo_leader` (`None`: no answer).
    pub async fn leads(&self) -> Option<bool> {
        let m = self.metrics().await?;
        Some(sample(&m, "minicvo_leader", &[]) == Some(1.0))
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        end_log(&self.log);
    }
}

/// Removes an operator's log when its test passes; a failing test keeps it and names it.
pub fn end_log(log: &std::path::Path) {
    if std::thread::panicking() {
        eprintln!("the operator's log is kept: {}", log.display());
    } else {
        let _ = std::fs::remove_file(log);
    }
}

/// One HTTP GET on 127.0.0.1:`port`: status and body.
pub async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let go = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), go)
        .await
        .ok()
        .flatten()
}

/// The value of sample `name` with these labels.
pub fn sample(m: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    m.samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

/// The ClusterVersion API.
pub fn cluster_versions(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    )
}

/// ClusterVersion `version` as JSON (`None`: absent).
pub async fn cluster_version(client: &Client) -> Option<Value> {
    cluster_versions(client)
        .get_opt("version")
        .await
        .ok()
        .flatten()
        .map(|o| serde_json::to_value(o).unwrap())
}

/// Polls ClusterVersion until `f` holds (panics after `limit`, naming `what`).
pub async fn wait_cv(
    client: &Client,
    what: &str,
    limit: Duration,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(cv) = cluster_version(client).await
            && f(&cv)
        {
            return cv;
        }
        assert!(
            Instant::now() < deadline,
            "ClusterVersion never showed {what} within {limit:?}: {:#}",
            cluster_version(client).await.unwrap_or_default()["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// History entry `i` is `version` in `state`.
pub fn history_is(cv: &Value, i: usize, version: &str, state: &str) -> bool {
    let h = &cv["status"]["history"][i];
    h["version"] == version && h["state"] == state
}

/// Condition `kind` of ClusterVersion: (status, reason, message).
pub fn condition(cv: &Value, kind: &str) -> (String, String, String) {
    let c = cv["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("reason"), s("message"))
}

/// Simulated operators for a sample payload (they report once their Deployments carry the
/// payload's template).
pub async fn simulator(sample: &str) -> Simulator {
    simulator_delayed(sample, Duration::ZERO).await
}

/// [`simulator`] whose operators report `delay` after their Deployments carry the template.
pub async fn simulator_delayed(sample: &str, delay: Duration) -> Simulator {
    simulator_scripted(sample, &[], delay).await
}

/// [`simulator_delayed`] with simulator scripts (`--simulate` specs, e.g.
/// `machine-config=never`).
pub async fn simulator_scripted(sample: &str, specs: &[&str], delay: Duration) -> Simulator {
    let specs: Vec<minicvo::simulate::Spec> = specs
        .iter()
        .map(|s| s.parse().unwrap_or_else(|e| panic!("spec {s}: {e}")))
        .collect();
    let plan = apply_util::plan(&support::openshift::sample(sample), minicvo::Mode::Updating);
    let client = support::admin_client().await;
    Simulator::start(
        client,
        minicvo::simulate::operators(&plan),
        SimulatorOptions {
            scripts: Scripts::all(&specs, delay),
            wait_available: false,
            pods: None,
        },
        None,
    )
}

/// Deletes both samples' objects and ClusterVersion `version`: a cluster the operator installs.
pub async fn fresh_cluster(client: &Client, samples: &[&str]) {
    let plans: Vec<Arc<minicvo::Plan>> = samples
        .iter()
        .map(|s| apply_util::plan(&support::openshift::sample(s), minicvo::Mode::Updating))
        .collect();
    let refs: Vec<&minicvo::Plan> = plans.iter().map(AsRef::as_ref).collect();
    minicvo::e2e::cleanup::clean(client, &refs, Duration::from_secs(120))
        .await
        .expect("clean");
    let api = cluster_versions(client);
    let _ = api.delete("version", &Default::default()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster_version(client).await.is_some() {
        assert!(
            Instant::now() < deadline,
            "ClusterVersion version is not deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `kubectl ARGS` on the plane; panics on failure.
pub fn kubectl(args: &[&str]) -> String {
    let bin =
        PathBuf::from(std::env::var_os("TESTPLANE_BIN").expect("TESTPLANE_BIN")).join("kubectl");
    let out = std::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(apply_util::kubeconfig())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl patch clusterversion version --type merge -p BODY`: what an admin runs.
pub fn patch_cv(body: &str) {
    kubectl(&[
        "patch",
        "clusterversion",
        "version",
        "--type",
        "merge",
        "-p",
        body,
    ]);
}

/// Waits (at most `limit`) for `ReleaseAccepted=False`; returns ClusterVersion.
pub async fn wait_refused(client: &Client, limit: Duration) -> Value {
    wait_cv(client, "ReleaseAccepted=False", limit, |cv| {
        condition(cv, "ReleaseAccepted").0 == "False"
    })
    .await
}
