//! Reliability of `minicvo apply` against a real kube-apiserver: faults injected by a proxy,
//! the API server restarted mid-apply, minicvo killed at random points, and broken payloads.
//! Every scenario ends with the cluster compared to the plan: every object exists with the
//! payload's content, deletes are done, nothing is duplicated, and no task the run reported
//! done is not.
//!
//! These tests run on private test planes (`fault_support::plane`), one per scenario: they
//! restart its API server and apply the sample payload's fixed names, which would disturb the
//! suite's shared plane, and with a plane each they run at the same time. The planes serve
//! the real ClusterOperator and ClusterVersion CRDs (the sample is applied without its
//! stand-ins, see `support::openshift`). Run with `--nocapture` to see the tables.

mod bad_payloads;
mod kill;
mod restart;

use crate::support::bad_cases;
use crate::support::fault as fault_support;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fault_support::plane::Plane;
use fault_support::proxy::{Counts, FaultMix, FaultProxy, HookAction};
use fault_support::{OperatorPlayer, Run};
use rand::{Rng as _, SeedableRng as _};

/// The scenarios that run at the same time, each on a private plane of its own.
#[derive(Clone, Copy)]
enum Scenario {
    /// The fault mixes (and the broken payloads, which send nothing).
    Faults,
    /// minicvo killed at random points.
    Kill,
    /// The API server restarted mid-apply.
    Restart,
}

/// The private plane of `s`, started on first use. Each scenario has its own, so they run
/// in parallel: the sample's fixed names and the API server restarts stay within one plane.
fn plane(s: Scenario) -> &'static Plane {
    static PLANES: [OnceLock<Plane>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    PLANES[s as usize].get_or_init(Plane::start)
}

/// A proxy in front of the private plane and a kubeconfig that points at it.
async fn proxy(p: &'static Plane, mix: FaultMix, dir: &Path) -> (FaultProxy, std::path::PathBuf) {
    let (ca, cert, key) = p.pki();
    let proxy = FaultProxy::start(&p.server, &ca, &cert, &key, mix).await;
    let kc = p.kubeconfig_for(&proxy.url(), dir);
    (proxy, kc)
}

async fn apply_async(payload: &Path, kubeconfig: &Path, extra: &[&str]) -> Run {
    let payload = payload.to_path_buf();
    let kubeconfig = kubeconfig.to_path_buf();
    let extra: Vec<String> = extra.iter().map(ToString::to_string).collect();
    tokio::task::spawn_blocking(move || {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        fault_support::apply(&payload, &kubeconfig, &extra)
    })
    .await
    .unwrap()
}

/// `minicvo diff PAYLOAD` straight against the plane: exit 0 means nothing would change.
async fn diff_is_clean(p: &'static Plane, payload: &Path, extra: &[&str]) -> (bool, String) {
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    let payload = payload.to_path_buf();
    let kc = p.kubeconfig();
    tokio::task::spawn_blocking(move || {
        let out = crate::support::cli::command(&[])
            .arg("diff")
            .arg(&payload)
            .arg("--kubeconfig")
            .arg(&kc)
            .args(&extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code() == Some(0),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    })
    .await
    .unwrap()
}

/// The fault mixes. Failure rates stay below the engine's retry budget (6 tries per request),
/// so a run is expected to succeed, not just a rerun.
fn mixes() -> Vec<FaultMix> {
    let base = FaultMix::none();
    vec![
        FaultMix {
            name: "none",
            seed: 11,
            ..base.clone()
        },
        FaultMix {
            name: "500s",
            error_500: 0.08,
            error_500_after: 0.05,
            seed: 12,
            ..base.clone()
        },
        FaultMix {
            name: "429 Retry-After",
            throttle_429: 0.12,
            seed: 13,
            ..base.clone()
        },
        FaultMix {
            name: "connection resets",
            reset: 0.06,
            reset_after: 0.05,
            seed: 14,
            ..base.clone()
        },
        FaultMix {
            name: "slow responses",
            slow: 0.3,
            slow_delay: Duration::from_millis(200)..Duration::from_millis(2500),
            seed: 15,
            ..base.clone()
        },
        FaultMix {
            name: "dropped watches",
            drop_watch: 1.0,
            watch_life: Duration::from_millis(50)..Duration::from_millis(700),
            seed: 16,
            ..base.clone()
        },
        FaultMix {
            name: "everything",
            error_500: 0.03,
            error_500_after: 0.02,
            throttle_429: 0.03,
            reset: 0.02,
            reset_after: 0.02,
            slow: 0.1,
            slow_delay: Duration::from_millis(100)..Duration::from_millis(1500),
            drop_watch: 0.5,
            watch_life: Duration::from_millis(100)..Duration::from_millis(2000),
            seed: 17,
        },
    ]
}

/// Applies `old` cleanly, then `new` under `mix`, with the operators played; returns the run
/// and the proxy's counts during the faulted run.
async fn upgrade_sample_under(p: &'static Plane, mix: &FaultMix, tmp: &Path) -> (Run, Counts) {
    let client = p.client().await;
    let (proxy, kc) = proxy(p, FaultMix::none(), tmp).await;
    let old = fault_support::sample("old");
    let old_plan = fault_support::plan(&old);
    let player = OperatorPlayer::start(client.clone(), &old_plan, Duration::ZERO);
    let first = apply_async(&old, &kc, &[]).await;
    player.stop().await;
    assert!(
        first.ok(),
        "old sample: {:?}\n{}",
        first.errors(),
        first.stderr
    );

    let new = fault_support::sample("new");
    let new_plan = fault_support::plan(&new);
    proxy.set_mix(mix.clone());
    let before = proxy.stats.counts();
    // The operators take 3 s to finish, so minicvo watches them (and dropped watches count).
    let player = OperatorPlayer::start(client.clone(), &new_plan, Duration::from_secs(3));
    let run = apply_async(&new, &kc, &[]).await;
    player.stop().await;
    let counts = proxy.stats.counts().since(&before);
    (run, counts)
}

/// What one payload of one fault mix gave.
struct MixRun {
    mix: FaultMix,
    payload: &'static str,
    run: Run,
    counts: Counts,
    problems: Vec<String>,
}

/// The sample, as an upgrade from old under `mix`: applies, deletes and waits.
async fn sample_under(p: &'static Plane, client: &kube::Client, mix: FaultMix) -> MixRun {
    let tmp = tempfile::tempdir().unwrap();
    let (run, counts) = upgrade_sample_under(p, &mix, tmp.path()).await;
    let new = fault_support::sample("new");
    let plan = fault_support::plan(&new);
    let mut problems = fault_support::verify(client, &plan, run.report.as_ref()).await;
    let (clean, diff) = diff_is_clean(p, &new, &[]).await;
    if !clean {
        problems.push(format!("minicvo diff is not clean:\n{diff}"));
    }
    MixRun {
        mix,
        payload: "sample 4.13→4.14",
        run,
        counts,
        problems,
    }
}

/// 500 objects in fresh namespaces of their own (`rel-mix<i>`), with tombstones for seeded
/// objects, applied under `mix`.
async fn synthetic_under(
    p: &'static Plane,
    client: &kube::Client,
    i: usize,
    mix: FaultMix,
) -> MixRun {
    let prefix = format!("rel-mix{i}");
    let dir = tempfile::tempdir().unwrap();
    let payload = fault_support::write_synthetic(dir.path(), &prefix, "1.0.0");
    fault_support::seed_synthetic(client, &prefix).await;
    let (proxy, kc) = proxy(p, mix.clone(), dir.path()).await;
    let run = apply_async(&payload, &kc, &["--no-cluster-version"]).await;
    let counts = proxy.stats.counts();
    let plan = fault_support::plan(&payload);
    assert_eq!(plan.tasks.len(), 500, "the synthetic payload has 500 tasks");
    let mut problems = fault_support::verify(client, &plan, run.report.as_ref()).await;
    problems.extend(fault_support::verify_no_extras(client, &plan, &prefix).await);
    // The apply did not record ClusterVersion: compare as that apply writes.
    let (clean, diff) = diff_is_clean(p, &payload, &["--no-cluster-version"]).await;
    if !clean {
        problems.push(format!("minicvo diff is not clean:\n{diff:.2000}"));
    }
    cleanup_namespaces(client, &prefix).await;
    MixRun {
        mix,
        payload: "synthetic 500",
        run,
        counts,
        problems,
    }
}

/// How many synthetic payloads are applied at once, beside the sample's upgrades.
const SYNTHETIC_AT_ONCE: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_mix_converges_for_the_sample_and_a_500_object_payload() {
    use futures::StreamExt as _;
    let p = plane(Scenario::Faults);
    let client = p.client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    // The sample's fixed names take one mix after another; the synthetic payloads, each in
    // namespaces of its own and through a proxy of its own, run beside them.
    let samples = async {
        let mut runs = Vec::new();
        for mix in mixes() {
            runs.push(sample_under(p, &client, mix).await);
        }
        runs
    };
    // The mixes with slow responses take longest: they start first.
    let mut order: Vec<(usize, FaultMix)> = mixes().into_iter().enumerate().collect();
    order.sort_by_key(|(_, mix)| mix.slow == 0.0);
    let c = &client;
    let synthetics = futures::stream::iter(order)
        .map(|(i, mix)| async move { (i, synthetic_under(p, c, i, mix).await) })
        .buffer_unordered(SYNTHETIC_AT_ONCE)
        .collect::<Vec<_>>();
    let (samples, mut synthetics) = tokio::join!(samples, synthetics);
    synthetics.sort_by_key(|(i, _)| *i);
    let synthetics = synthetics.into_iter().map(|(_, run)| run);
    let mut table = vec![
        "| fault mix | payload | outcome | faults injected | retries | requests (report / proxy) | time |".to_string(),
        "|---|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = Vec::new();
    for (sample, synthetic) in samples.into_iter().zip(synthetics) {
        record(&mut table, &mut failures, sample);
        record(&mut table, &mut failures, synthetic);
    }
    eprintln!("\n{}\n", table.join("\n"));
    crate::support::openshift::assert_real_crds(&client, "Default").await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn record(table: &mut Vec<String>, failures: &mut Vec<String>, r: MixRun) {
    let MixRun {
        mix,
        payload,
        run,
        counts,
        problems,
    } = r;
    let outcome = match (run.code, run.ok(), problems.is_empty()) {
        (Some(0), true, true) => "converged".to_string(),
        (code, ok, clean) => format!("exit {code:?}, ok {ok}, converged {clean}"),
    };
    // A connection the API server closed under the proxy reaches the client as a reset too.
    let upstream = match counts.upstream_errors {
        0 => String::new(),
        n => format!(" + {n} upstream errors"),
    };
    let row = format!(
        "| {} | {payload} | {outcome} | {} ({}){upstream} | {} | {} / {} | {:.1}s |",
        mix.name,
        counts.faults(),
        counts.faults_line(),
        run.retries(),
        run.requests(),
        counts.requests,
        run.elapsed.as_secs_f64()
    );
    eprintln!("{row}");
    table.push(row);
    if run.code != Some(0) || !run.ok() || !problems.is_empty() {
        failures.push(format!(
            "{} / {payload}: exit {:?}, errors {:#?}, problems {problems:#?}\nstderr:\n{}",
            mix.name,
            run.code,
            run.errors(),
            tail(&run.stderr, 3000)
        ));
    }
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

async fn cleanup_namespaces(client: &kube::Client, prefix: &str) {
    use kube::api::{Api, DeleteParams};
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in fault_support::synthetic_namespaces(prefix) {
        let _ = api.delete(&ns, &DeleteParams::background()).await;
    }
}
