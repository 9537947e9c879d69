//! Reliability of `minicvo apply` against a real kube-apiserver: faults injected by a proxy,
//! the API server restarted mid-apply, minicvo killed at random points, and broken payloads.
//! Every scenario ends with the cluster compared to the plan: every object exists with the
//! payload's content, deletes are done, nothing is duplicated, and no task the run reported
//! done is not.
//!
//! These tests run on a private test plane (`fault_support::plane`): they restart its API
//! server and apply the sample payload's fixed names, which would disturb the suite's shared
//! plane. The plane serves the real ClusterOperator and ClusterVersion CRDs (the sample is
//! applied without its stand-ins, see `support::openshift`). They run one at a time. Run with `--nocapture` to see the tables.

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

fn plane() -> &'static Plane {
    static PLANE: OnceLock<Plane> = OnceLock::new();
    PLANE.get_or_init(Plane::start)
}

/// One scenario at a time: they share the sample's names and the API server.
async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A proxy in front of the private plane and a kubeconfig that points at it.
async fn proxy(mix: FaultMix, dir: &Path) -> (FaultProxy, std::path::PathBuf) {
    let p = plane();
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
async fn diff_is_clean(payload: &Path, extra: &[&str]) -> (bool, String) {
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    let payload = payload.to_path_buf();
    let kc = plane().kubeconfig();
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
async fn upgrade_sample_under(mix: &FaultMix, tmp: &Path) -> (Run, Counts) {
    let client = plane().client().await;
    let (proxy, kc) = proxy(FaultMix::none(), tmp).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_mix_converges_for_the_sample_and_a_500_object_payload() {
    let _one = exclusive().await;
    let client = plane().client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    let mut table = vec![
        "| fault mix | payload | outcome | faults injected | retries | requests (report / proxy) | time |".to_string(),
        "|---|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = Vec::new();
    for (i, mix) in mixes().into_iter().enumerate() {
        // The sample, as an upgrade from old: applies, deletes and waits.
        let tmp = tempfile::tempdir().unwrap();
        let (run, counts) = upgrade_sample_under(&mix, tmp.path()).await;
        let new = fault_support::sample("new");
        let plan = fault_support::plan(&new);
        let mut problems = fault_support::verify(&client, &plan, run.report.as_ref()).await;
        let (clean, diff) = diff_is_clean(&new, &[]).await;
        if !clean {
            problems.push(format!("minicvo diff is not clean:\n{diff}"));
        }
        record(
            &mut table,
            &mut failures,
            &mix,
            "sample 4.13→4.14",
            &run,
            &counts,
            problems,
        );

        // 500 objects in fresh namespaces, with tombstones for seeded objects.
        let prefix = format!("rel-mix{i}");
        let dir = tempfile::tempdir().unwrap();
        let payload = fault_support::write_synthetic(dir.path(), &prefix, "1.0.0");
        fault_support::seed_synthetic(&client, &prefix).await;
        let (proxy, kc) = proxy(mix.clone(), tmp.path()).await;
        let run = apply_async(&payload, &kc, &["--no-cluster-version"]).await;
        let counts = proxy.stats.counts();
        let plan = fault_support::plan(&payload);
        assert_eq!(plan.tasks.len(), 500, "the synthetic payload has 500 tasks");
        let mut problems = fault_support::verify(&client, &plan, run.report.as_ref()).await;
        problems.extend(fault_support::verify_no_extras(&client, &plan, &prefix).await);
        // The apply did not record ClusterVersion: compare as that apply writes.
        let (clean, diff) = diff_is_clean(&payload, &["--no-cluster-version"]).await;
        if !clean {
            problems.push(format!("minicvo diff is not clean:\n{diff:.2000}"));
        }
        record(
            &mut table,
            &mut failures,
            &mix,
            "synthetic 500",
            &run,
            &counts,
            problems,
        );
        cleanup_namespaces(&client, &prefix).await;
    }
    eprintln!("\n{}\n", table.join("\n"));
    crate::support::openshift::assert_real_crds(&client, "Default").await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn record(
    table: &mut Vec<String>,
    failures: &mut Vec<String>,
    mix: &FaultMix,
    payload: &str,
    run: &Run,
    counts: &Counts,
    problems: Vec<String>,
) {
    let outcome = match (run.code, run.ok(), problems.is_empty()) {
        (Some(0), true, true) => "converged".to_string(),
        (code, ok, clean) => format!("exit {code:?}, ok {ok}, converged {clean}"),
    };
    let row = format!(
        "| {} | {payload} | {outcome} | {} ({}) | {} | {} / {} | {:.1}s |",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apiserver_restart_mid_apply_completes_or_fails_clearly_and_a_rerun_converges() {
    let _one = exclusive().await;
    let client = plane().client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    let mut table = vec![
        "| payload | restart at request | API server down | first run | retries | rerun |"
            .to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = Vec::new();
    for (payload_name, restart_at, down_for) in [
        ("synthetic 500", 120u64, 2u64),
        ("synthetic 500", 300, 12),
        ("sample 4.13→4.14", 25, 2),
        ("sample 4.13→4.14", 28, 12),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (proxy, kc) = proxy(FaultMix::none(), tmp.path()).await;
        let (payload, extra, plan, player) = if payload_name.starts_with("synthetic") {
            let prefix = &format!("rel-restart-{restart_at}");
            let payload = fault_support::write_synthetic(tmp.path(), prefix, "1.0.0");
            fault_support::seed_synthetic(&client, prefix).await;
            let plan = fault_support::plan(&payload);
            (payload, vec!["--no-cluster-version"], plan, None)
        } else {
            let old = fault_support::sample("old");
            let old_plan = fault_support::plan(&old);
            let player = OperatorPlayer::start(client.clone(), &old_plan, Duration::ZERO);
            let run = apply_async(&old, &kc, &[]).await;
            player.stop().await;
            assert!(run.ok(), "old sample: {:?}", run.errors());
            let new = fault_support::sample("new");
            let plan = fault_support::plan(&new);
            let player = OperatorPlayer::start(client.clone(), &plan, Duration::from_secs(3));
            (new, vec![], plan, Some(player))
        };
        // The restart thread reports how long the API server was down when it is back.
        let (down_tx, mut down_rx) = tokio::sync::watch::channel(None::<Duration>);
        let down_tx = Arc::new(down_tx);
        let restarted = Arc::new(AtomicU64::new(0));
        let base = proxy.stats.counts().requests;
        {
            let restarted = restarted.clone();
            proxy.set_hook(Some(Box::new(move |n, _, _| {
                if n == base + restart_at && restarted.fetch_add(1, Ordering::SeqCst) == 0 {
                    let down_tx = down_tx.clone();
                    std::thread::spawn(move || {
                        let d = plane().restart_apiserver(Duration::from_secs(down_for));
                        let _ = down_tx.send(Some(d));
                    });
                }
                HookAction::Continue
            })));
        }
        let first = apply_async(&payload, &kc, &extra).await;
        proxy.set_hook(None);
        // Wait for the restart to be over before the rerun.
        if restarted.load(Ordering::SeqCst) > 0 {
            tokio::time::timeout(Duration::from_secs(90), down_rx.wait_for(Option::is_some))
                .await
                .expect("restart never finished")
                .expect("restart thread alive");
        }
        let down = down_rx.borrow().unwrap_or_default();
        let first_outcome = if first.code == Some(0) && first.ok() {
            "completed".to_string()
        } else {
            let mut errors = first.errors();
            // The outage may hit the final ClusterVersion status write instead of a task:
            // that fails the run too, with the write's error in the report.
            if let Some(cv) = first
                .report
                .as_ref()
                .and_then(|r| r["clusterVersion"].as_str())
                .filter(|cv| cv.starts_with("cannot "))
            {
                errors.push(format!("clusterversion version: {cv}"));
            }
            if first.code != Some(1) || errors.is_empty() {
                failures.push(format!(
                    "{payload_name}: the interrupted run neither completed nor failed clearly: exit {:?}\n{}",
                    first.code,
                    tail(&first.stderr, 3000)
                ));
            }
            format!(
                "failed clearly (exit {:?}, {} errors, e.g. {})",
                first.code,
                errors.len(),
                errors.first().map_or("-", String::as_str)
            )
        };
        let rerun = apply_async(&payload, &kc, &extra).await;
        if let Some(player) = player {
            player.stop().await;
        }
        let mut problems = fault_support::verify(&client, &plan, rerun.report.as_ref()).await;
        if !rerun.ok() {
            problems.push(format!("rerun failed: {:?}", rerun.errors()));
        }
        table.push(format!(
            "| {payload_name} | {restart_at} | {:.1}s | {first_outcome} | {} | {} |",
            down.as_secs_f64(),
            first.retries(),
            if problems.is_empty() {
                "converged".to_string()
            } else {
                format!("{} problems", problems.len())
            }
        ));
        eprintln!("{}", table.last().unwrap());
        if !problems.is_empty() {
            failures.push(format!("{payload_name}: {problems:#?}"));
        }
        if payload_name.starts_with("synthetic") {
            cleanup_namespaces(&client, &format!("rel-restart-{restart_at}")).await;
        }
    }
    eprintln!("\n{}\n", table.join("\n"));
    crate::support::openshift::assert_real_crds(&client, "Default").await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_at_random_points_then_a_rerun_converges() {
    let _one = exclusive().await;
    let client = plane().client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(2024);
    let mut table = vec![
        "| # | payload | killed at request | request in flight | in-flight request | rerun |"
            .to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    let (proxy, kc) = proxy(FaultMix::none(), tmp.path()).await;

    // Request counts of whole runs, to spread the kill points over them.
    let (sample_requests, synthetic_requests) = {
        let old = fault_support::sample("old");
        let player =
            OperatorPlayer::start(client.clone(), &fault_support::plan(&old), Duration::ZERO);
        let run = apply_async(&old, &kc, &[]).await;
        player.stop().await;
        assert!(run.ok(), "{:?}", run.errors());
        let sample = run.requests();
        let prefix = "rel-kill-base";
        let dir = tempfile::tempdir().unwrap();
        let payload = fault_support::write_synthetic(dir.path(), prefix, "1.0.0");
        fault_support::seed_synthetic(&client, prefix).await;
        let run = apply_async(&payload, &kc, &["--no-cluster-version"]).await;
        assert!(run.ok(), "{:?}", run.errors());
        cleanup_namespaces(&client, prefix).await;
        (sample, run.requests())
    };
    eprintln!("whole runs: sample {sample_requests} requests, synthetic {synthetic_requests}");

    for point in 0..24 {
        let synthetic = point % 2 == 1;
        // The sample alternates between old and new, so every run has work to do.
        let (payload, extra, prefix, label, total) = if synthetic {
            let prefix = format!("rel-kill{point}");
            let dir = tmp.path().join(format!("synthetic-{point}"));
            let payload = fault_support::write_synthetic(&dir, &prefix, "1.0.0");
            fault_support::seed_synthetic(&client, &prefix).await;
            (
                payload,
                vec!["--no-cluster-version"],
                Some(prefix),
                "synthetic 500".to_string(),
                synthetic_requests,
            )
        } else {
            let version = if point % 4 == 0 { "new" } else { "old" };
            (
                fault_support::sample(version),
                vec![],
                None,
                format!("sample {version}"),
                sample_requests,
            )
        };
        let plan = fault_support::plan(&payload);
        let player = (!synthetic)
            .then(|| OperatorPlayer::start(client.clone(), &plan, Duration::from_secs(1)));
        let kill_at = rng.random_range(1..=total.max(2));
        let hold = rng.random_bool(0.5);
        let base = proxy.stats.counts().requests;
        let started = Instant::now();
        let child = fault_support::spawn_apply(&payload, &kc, &extra);
        let pid = child.id();
        let seen = Arc::new(Mutex::new(String::new()));
        {
            let seen = seen.clone();
            proxy.set_hook(Some(Box::new(move |n, method, path| {
                if n == base + kill_at {
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                    *seen.lock().unwrap() = format!("{method} {path}");
                    if hold {
                        return HookAction::Drop;
                    }
                }
                HookAction::Continue
            })));
        }
        let killed = tokio::task::spawn_blocking(move || {
            fault_support::finish(child, started, Duration::from_secs(300))
        })
        .await
        .unwrap();
        proxy.set_hook(None);
        let in_flight = seen.lock().unwrap().clone();
        let was_killed = killed.code.is_none();
        let rerun = apply_async(&payload, &kc, &extra).await;
        if let Some(p) = player {
            p.stop().await;
        }
        let mut problems = fault_support::verify(&client, &plan, rerun.report.as_ref()).await;
        if let Some(prefix) = &prefix {
            problems.extend(fault_support::verify_no_extras(&client, &plan, prefix).await);
        }
        if !rerun.ok() {
            problems.push(format!("rerun failed: {:?}", rerun.errors()));
        }
        let in_flight_short: String = in_flight
            .split('?')
            .next()
            .unwrap_or("")
            .chars()
            .take(90)
            .collect();
        table.push(format!(
            "| {point} | {label} | {kill_at} of ~{total} ({:.1}s) | {} | {} | {} |",
            killed.elapsed.as_secs_f64(),
            if hold { "dropped" } else { "forwarded" },
            if was_killed {
                in_flight_short
            } else {
                "(finished before the kill point)".to_string()
            },
            if problems.is_empty() {
                "converged".to_string()
            } else {
                format!("{} problems", problems.len())
            }
        ));
        eprintln!("{}", table.last().unwrap());
        if !problems.is_empty() {
            failures.push(format!(
                "kill point {point} ({label}, request {kill_at}): {problems:#?}"
            ));
        }
        if let Some(prefix) = &prefix {
            cleanup_namespaces(&client, prefix).await;
        }
    }
    eprintln!("\n{}\n", table.join("\n"));
    crate::support::openshift::assert_real_crds(&client, "Default").await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_payloads_send_no_request_to_the_api_server() {
    let tmp = tempfile::tempdir().unwrap();
    let (proxy, kc) = proxy(FaultMix::none(), tmp.path()).await;
    let mut failures = Vec::new();
    let mut table = vec![
        "| case | exit | connections | requests |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for case in bad_cases::CASES {
        let (dir, _keep) = bad_cases::materialize(case);
        let before = proxy.stats.counts();
        let kc = kc.clone();
        let out = tokio::task::spawn_blocking(move || {
            bad_cases::run(
                &[
                    "apply",
                    dir.to_str().unwrap(),
                    "--kubeconfig",
                    kc.to_str().unwrap(),
                ],
                &[],
                Duration::from_secs(20),
            )
        })
        .await
        .unwrap();
        let counts = proxy.stats.counts().since(&before);
        table.push(format!(
            "| {} | {:?} | {} | {} |",
            case.name, out.code, counts.connections, counts.requests
        ));
        let expected = format!("error: {}\n", case.message);
        if out.code != Some(1) || out.stderr != expected || counts.connections + counts.requests > 0
        {
            failures.push(format!(
                "{}: exit {:?}, {} connections, {} requests\n  expected {expected:?}\n  actual   {:?}",
                case.name, out.code, counts.connections, counts.requests, out.stderr
            ));
        }
    }
    // The control: a valid payload through the same proxy does reach the server.
    let dir = tempfile::tempdir().unwrap();
    let payload = fault_support::write_synthetic(dir.path(), "rel-control", "1.0.0");
    let before = proxy.stats.counts();
    let run = apply_async(
        &payload,
        &kc,
        &["--dry-run", "server", "--no-cluster-version"],
    )
    .await;
    let counts = proxy.stats.counts().since(&before);
    assert!(
        counts.requests > 0,
        "a valid payload sent no request either: {}",
        run.stderr
    );
    eprintln!("\n{}\n", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
