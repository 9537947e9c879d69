//! The harm differential: every harm shape of [`crate::support::harm`] (both twins) and the
//! run-level-90 clean-up of issue 32, run twice with the same payloads — with simulated pods on
//! the shared plane, and with real pods on the plane with a node (`--real-pods
//! --wait-available`, the Deployment on the stand-in operator image, made to use what the
//! shape takes away: its lease and status rights, its mounted file, its environment) — and the
//! two verdicts of `live-pods-keep-access` must agree: the same ServiceAccounts harmed, or no
//! harm in both. Each verdict must also be the one the kubelet's rules give
//! ([`harm::Fixture::harms`]).
//!
//! Every case has its own operator (namespace, ClusterOperator, ClusterRoles), so the cases run
//! in parallel, a few at a time, on both planes. The table (shape × simulated × real) is printed
//! on stderr; docs/e2e.md has it. The machine-config story (a leader's lease lost) is the
//! differential of `node_mco_story`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use minicvo::e2e::{self, Clients, TimelineAction, UpgradeOptions, UpgradeReport};
use tokio_util::sync::CancellationToken;

use crate::support::harm::{self, Shape, Standin};
use crate::support::{self, node};

/// How many cases run at once (each runs both of its upgrades at once).
const PARALLEL: usize = 8;

/// How the NEW payload of a case is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// A shape's harmful twin.
    Harmful(Shape),
    /// A shape's fixed twin.
    Fixed(Shape),
    /// The clean-up at run-level 90 after the ClusterOperator reported, while the old pod is
    /// terminating ([`harm::write_cleanup_after_report`]).
    CleanupAfterReport,
}

/// One row of the table.
#[derive(Debug, Clone)]
struct Case {
    payload: Payload,
    /// Seconds a replaced pod keeps running (the stand-in's termination delay; the simulated
    /// pods' `stop` time).
    linger: u32,
}

impl Case {
    fn tag(&self) -> String {
        match self.payload {
            Payload::Harmful(s) => format!("{}-h", s.tag()),
            Payload::Fixed(s) => format!("{}-f", s.tag()),
            Payload::CleanupAfterReport => "cleanup-90".into(),
        }
    }

    /// What the upgrade does, for the table.
    fn label(&self) -> String {
        let shape = |s: Shape, harmful: bool| -> &'static str {
            match (s, harmful) {
                (Shape::RoleBindingDeleted, true) => {
                    "RoleBinding of the old pods' lease rights deleted before the update"
                }
                (Shape::RoleBindingDeleted, false) => {
                    "that RoleBinding deleted after the ClusterOperator wait"
                }
                (Shape::RoleDeleted, true) => {
                    "Role of the old pods' lease rights deleted before the update"
                }
                (Shape::RoleDeleted, false) => "that Role deleted after the wait",
                (Shape::ClusterRoleNarrowed, true) => {
                    "ClusterRole of the old pods' lease rights narrowed before the update"
                }
                (Shape::ClusterRoleNarrowed, false) => "that ClusterRole narrowed after the wait",
                (Shape::ConfigMapDeleted, true) => {
                    "ConfigMap only the old pods mount deleted before the update"
                }
                (Shape::ConfigMapDeleted, false) => "that ConfigMap deleted after the wait",
                (Shape::SecretDeleted, true) => {
                    "Secret only the old pods' envFrom names deleted before the update"
                }
                (Shape::SecretDeleted, false) => "that Secret deleted after the wait",
                (Shape::ConfigMapStillMounted, true) => {
                    "ConfigMap the new pods still mount deleted before the update"
                }
                (Shape::ConfigMapStillMounted, false) => {
                    "new pods mount a -v2 ConfigMap; the old one deleted after the wait"
                }
                (Shape::EnvStillReferenced, true) => {
                    "ConfigMap of the new pods' env valueFrom deleted before the update"
                }
                (Shape::EnvStillReferenced, false) => {
                    "new pods' env from a -v2 ConfigMap; the old one deleted after the wait"
                }
                (Shape::ServiceAccountDeleted, true) => {
                    "the old pods' ServiceAccount deleted before the update"
                }
                (Shape::ServiceAccountDeleted, false) => {
                    "that ServiceAccount deleted after the wait"
                }
                (Shape::BindingAfterNewAccount, true) => {
                    "new ServiceAccount bound a run-level after the Deployment (late-bound account)"
                }
                (Shape::BindingAfterNewAccount, false) => {
                    "new ServiceAccount bound before the Deployment"
                }
            }
        };
        match self.payload {
            Payload::Harmful(s) => shape(s, true).into(),
            Payload::Fixed(s) => shape(s, false).into(),
            Payload::CleanupAfterReport => "ConfigMap only the old pods mount deleted at run-level 90 after the ClusterOperator reported, the old pod terminating (issue 32)".into(),
        }
    }

    /// Writes OLD and NEW under `dir` for operator `id`; returns them and whether the upgrade
    /// harms a pod, by the kubelet's rules.
    fn write(&self, dir: &Path, id: &str, standin: &Standin) -> (PathBuf, PathBuf, bool) {
        match self.payload {
            Payload::Harmful(s) => {
                let fx = harm::write_with(s, dir, id, Some(standin));
                (fx.old, fx.harmful, fx.harms)
            }
            Payload::Fixed(s) => {
                let fx = harm::write_with(s, dir, id, Some(standin));
                (fx.old, fx.fixed, false)
            }
            Payload::CleanupAfterReport => {
                let (old, new) = harm::write_cleanup_after_report(dir, id, Some(standin));
                (old, new, false)
            }
        }
    }
}

/// Every shape, both twins, and the clean-up after the report.
fn all_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Shape::ALL
        .iter()
        .flat_map(|s| [Payload::Harmful(*s), Payload::Fixed(*s)])
        .map(|payload| Case { payload, linger: 0 })
        .collect();
    cases.push(Case {
        payload: Payload::CleanupAfterReport,
        linger: 8,
    });
    cases
}

/// A verdict of `live-pods-keep-access`: the harmed ServiceAccounts, and the kinds of harm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Verdict {
    accounts: BTreeSet<String>,
    kinds: BTreeSet<String>,
    /// The check's verdict.
    passed: bool,
    /// Danger windows (simulated pods only).
    windows: usize,
}

impl Verdict {
    fn of(report: &UpgradeReport) -> Self {
        let mut v = Verdict {
            passed: report
                .checks
                .iter()
                .find(|c| c.name == e2e::LIVE_PODS_CHECK)
                .is_some_and(e2e::Check::passed),
            windows: report.danger_windows.len(),
            ..Verdict::default()
        };
        for h in report
            .timeline
            .events
            .iter()
            .filter(|e| e.action == TimelineAction::Harm)
            .filter_map(|e| e.harm.as_ref())
        {
            v.accounts.insert(h.service_account.clone());
            v.kinds.insert(h.kind.to_string());
        }
        v
    }

    fn harm(&self) -> bool {
        !self.accounts.is_empty()
    }

    /// The same harm (ServiceAccounts) or the same absence of harm, and the check agrees.
    fn agrees(&self, other: &Verdict) -> bool {
        self.accounts == other.accounts && self.passed == other.passed
    }

    /// A table cell; ServiceAccounts by name only (the namespace is the case's).
    fn cell(&self) -> String {
        if !self.harm() {
            return if self.windows > 0 {
                "no harm (danger window: warning)".into()
            } else {
                "no harm".into()
            };
        }
        let accounts: Vec<&str> = self
            .accounts
            .iter()
            .map(|a| a.rsplit('/').next().unwrap_or(a))
            .collect();
        format!(
            "harm: {} of `{}`",
            self.kinds.iter().cloned().collect::<Vec<_>>().join(", "),
            accounts.join("`, `")
        )
    }
}

/// The node plane's ClusterOperator and ClusterVersion CRDs, installed once per test process.
async fn node_plane_crds() {
    static ONCE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    ONCE.get_or_init(|| async {
        support::openshift::install_both(&node::client().await, "Default").await;
    })
    .await;
}

async fn node_clients() -> Clients {
    let path = node::kubeconfig();
    let connect = || async {
        minicvo::apply::connect(Some(&path), None)
            .await
            .expect("connect to the plane with a node")
    };
    Clients {
        apply: connect().await,
        simulator: connect().await,
    }
}

/// Install `old`, update to `new`, clean before and after; a ClusterOperator that never
/// reports (a new pod that cannot start or lead) ends the run after `wait`.
fn options(old: &Path, new: &Path, wait: u64) -> UpgradeOptions {
    let mut o = UpgradeOptions {
        from: old.to_path_buf(),
        to: new.to_path_buf(),
        clean: true,
        clean_after: true,
        ..UpgradeOptions::default()
    };
    o.apply.runner.wait_timeout = Duration::from_secs(wait);
    // The cases run in parallel and the ClusterVersion is one object per plane: none of them
    // records it (concurrent status writes would fail one another's runs).
    o.apply.record_cluster_version = false;
    o
}

/// The upgrade with simulated pods on the shared plane.
async fn simulated(old: &Path, new: &Path, workload: &str, linger: u32) -> UpgradeReport {
    support::openshift::shared_plane_crds().await;
    let mut o = options(old, new, 20);
    o.pods
        .timings
        .add(&format!("{workload}=stop:{linger}s"))
        .expect("timing");
    e2e::upgrade(
        &support::apply::e2e_clients().await,
        &o,
        None,
        CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("simulated e2e could not run: {e}"))
}

/// The same upgrade with real pods on the plane with a node; the stand-in reports the
/// ClusterOperator itself.
async fn real(old: &Path, new: &Path, operator: &str) -> UpgradeReport {
    node_plane_crds().await;
    // Long enough for real pods to start and to outlive a replacement's minReadySeconds.
    let mut o = options(old, new, 30);
    o.wait_available = true;
    o.real_pods = true;
    o.live_pods = false;
    o.specs = vec![format!("{operator}=never").parse().expect("spec")];
    e2e::upgrade(&node_clients().await, &o, None, CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("real-pod e2e could not run: {e}"))
}

/// When the stand-in pods of `ns` on the node plane that report `version` last read their
/// files, in seconds since the epoch, from their termination messages (`ok: … (unix S.US)`).
/// Returns once the watch has listed the pods that exist.
async fn last_checks(
    ns: &str,
    version: &'static str,
) -> (Arc<Mutex<Vec<f64>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api: Api<Pod> = Api::namespaced(node::client().await, ns);
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let log = seen.clone();
    let task = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let p = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::Delete(p)) => p,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                _ => continue,
            };
            let reports = p.spec.iter().flat_map(|s| &s.containers).any(|c| {
                c.env
                    .iter()
                    .flatten()
                    .any(|e| e.name == "RELEASE_VERSION" && e.value.as_deref() == Some(version))
            });
            let ends = p
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .filter_map(|c| c.state.as_ref()?.terminated.as_ref());
            for t in ends.filter(|_| reports) {
                let at = t
                    .message
                    .as_deref()
                    .filter(|m| m.starts_with("ok: "))
                    .and_then(|m| m.trim().strip_suffix(')')?.rsplit_once("(unix "))
                    .and_then(|(_, n)| n.parse::<f64>().ok());
                if let Some(at) = at {
                    log.lock().unwrap().push(at);
                }
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), listed)
        .await
        .expect("the pod watch listed within 30 s")
        .expect("the pod watch runs");
    (seen, task)
}

/// When the real run deleted ConfigMap `config` at run-level 90, in seconds since the epoch
/// (`begun`: the epoch time the run began).
fn config_deleted_at(report: &UpgradeReport, begun: f64) -> f64 {
    let e = report
        .timeline
        .events
        .iter()
        .find(|e| e.is_delete_issued() && e.object.kind == "ConfigMap" && e.object.name == "config")
        .unwrap_or_else(|| panic!("ConfigMap config was not deleted: {}", report.text()));
    assert_eq!(e.run_level.as_deref(), Some("90"), "{e:?}");
    begun + e.t
}

fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// What one case gave.
struct Row {
    case: Case,
    expected_harm: bool,
    simulated: Verdict,
    real: Verdict,
    /// The real run's note of `live-pods-keep-access`.
    real_note: String,
    /// Both reports, for a failure message.
    texts: String,
    seconds: f64,
}

async fn run_case(case: Case) -> Row {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let id = support::unique_name(&format!("df-{}", case.tag()));
    let standin = Standin {
        image: node::standin_image(),
        api: Some(format!("127.0.0.1:{}", node::api_port())),
        linger: case.linger,
    };
    let (old, new, expected_harm) = case.write(dir.path(), &id, &standin);
    let workload = format!("{id}-operator");
    let cleanup = case.payload == Payload::CleanupAfterReport;
    let watch = if cleanup {
        Some(last_checks(&id, harm::OLD_VERSION).await)
    } else {
        None
    };
    let begun = epoch_now();
    let (sim, real) = tokio::join!(
        simulated(&old, &new, &workload, case.linger),
        real(&old, &new, &id)
    );
    if let Some((checks, task)) = watch {
        task.abort();
        // The old real pod, terminating, still read the file of the ConfigMap after its
        // delete, and found it.
        let deleted = config_deleted_at(&real, begun);
        let last = checks
            .lock()
            .unwrap()
            .iter()
            .copied()
            .fold(f64::NAN, f64::max);
        assert!(
            last > deleted,
            "the old pod's last read of its file ({last}) is not after the delete of its \
             ConfigMap ({deleted}): its exit was not seen, or it stopped before\n{}",
            real.text()
        );
        eprintln!(
            "{}: the old real pod read its mounted file {:.2}s after the ConfigMap's delete",
            case.tag(),
            last - deleted
        );
    }
    let real_note = real
        .checks
        .iter()
        .find(|c| c.name == e2e::LIVE_PODS_CHECK)
        .map(|c| c.notes.join("; "))
        .unwrap_or_default();
    Row {
        expected_harm,
        simulated: Verdict::of(&sim),
        real: Verdict::of(&real),
        real_note,
        texts: format!("--- simulated:\n{}\n--- real:\n{}", sim.text(), real.text()),
        seconds: started.elapsed().as_secs_f64(),
        case,
    }
}

/// The markdown table of `rows`.
fn table(rows: &[Row]) -> String {
    let mut out = String::from("| upgrade | simulated pods | real pods |\n|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            r.case.label(),
            r.simulated.cell(),
            r.real.cell()
        ));
    }
    out
}

/// Runs `cases` a few at a time and asserts that every simulated verdict agrees with the real
/// one and with the kubelet's rules.
async fn differential(cases: Vec<Case>) -> Vec<Row> {
    let started = Instant::now();
    let rows: Vec<Row> = futures::stream::iter(cases)
        .map(run_case)
        .buffered(PARALLEL)
        .collect()
        .await;
    eprintln!(
        "harm differential, {} cases in {:.1}s:\n{}",
        rows.len(),
        started.elapsed().as_secs_f64(),
        table(&rows)
    );
    let mut wrong = Vec::new();
    for r in &rows {
        eprintln!(
            "{} ({:.1}s): real pods: {}",
            r.case.tag(),
            r.seconds,
            r.real_note
        );
        if !r.simulated.agrees(&r.real) || r.simulated.harm() != r.expected_harm {
            wrong.push(format!(
                "{}: simulated {:?}, real {:?}, expected harm: {}\n{}",
                r.case.label(),
                r.simulated,
                r.real,
                r.expected_harm,
                r.texts
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    rows
}

/// The cases to run: all of them, or those whose tags `MINICVO_HARM_DIFFERENTIAL` lists
/// (comma-separated, e.g. `configmap-h,cleanup-90`).
fn selected_cases() -> Vec<Case> {
    let all = all_cases();
    let Ok(only) = std::env::var("MINICVO_HARM_DIFFERENTIAL") else {
        return all;
    };
    let tags: Vec<&str> = only.split(',').map(str::trim).collect();
    let cases: Vec<Case> = all
        .into_iter()
        .filter(|c| tags.contains(&c.tag().as_str()))
        .collect();
    assert!(
        !cases.is_empty(),
        "MINICVO_HARM_DIFFERENTIAL={only} names no case"
    );
    cases
}

/// The number before `what` in a note (`… 1 volume set-ups of …`).
fn count_in(note: &str, what: &str) -> Option<u32> {
    let before = note.split(what).next()?;
    before.split_whitespace().last()?.parse().ok()
}

#[tokio::test]
async fn harm_verdicts_of_simulated_and_real_pods_agree() {
    // Its real-pod cases load the node plane's kubelet: the stories whose harm depends on an
    // old pod's timing (node_mco_story) do not run beside them.
    let _lock = node::fixed_names_lock().await;
    let rows = differential(selected_cases()).await;
    for r in &rows {
        if r.case.payload == Payload::Harmful(Shape::ConfigMapDeleted) {
            // The danger window is the simulated pods' warning of what the real pods kept.
            assert!(r.simulated.windows > 0, "no danger window: {}", r.texts);
            // The real kubelet did meet the delete while the old pod ran (and kept its files:
            // the pod, reading them every second, did not miss them).
            let kept = count_in(&r.real_note, " volume set-ups of a deleted object");
            assert!(
                kept.is_some_and(|n| n > 0),
                "the kubelet did not set the old pod's volume up again: {}\n{}",
                r.real_note,
                r.texts
            );
        }
    }
}
