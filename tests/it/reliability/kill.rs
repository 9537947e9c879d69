//! minicvo killed at random points of an apply, then run again.

use super::*;

/// Where one run is killed: after request `kill_at` of its run (counted at its proxy), the
/// request in flight forwarded or dropped.
struct KillPoint {
    point: usize,
    kill_at: u64,
    hold: bool,
}

/// One lane of kill points: the sample (alternating old and new, so every run has work to
/// do) or the synthetic payload (fresh namespaces per point), through a proxy of its own.
struct Lane {
    proxy: FaultProxy,
    kubeconfig: std::path::PathBuf,
    /// The requests of a whole run, to spread the kill points over it.
    total: u64,
    _dir: tempfile::TempDir,
}

impl Lane {
    async fn start(p: &'static Plane) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (proxy, kubeconfig) = proxy(p, FaultMix::none(), dir.path()).await;
        Lane {
            proxy,
            kubeconfig,
            total: 0,
            _dir: dir,
        }
    }
}

/// A whole run of the sample (old), with its operators played: its request count.
async fn sample_requests(client: &kube::Client, lane: &Lane) -> u64 {
    let old = fault_support::sample("old");
    let player = OperatorPlayer::start(client.clone(), &fault_support::plan(&old), Duration::ZERO);
    let run = apply_async(&old, &lane.kubeconfig, &[]).await;
    player.stop().await;
    assert!(run.ok(), "{:?}", run.errors());
    run.requests()
}

/// A whole run of the synthetic payload: its request count.
async fn synthetic_requests(client: &kube::Client, lane: &Lane) -> u64 {
    let prefix = "rel-kill-base";
    let dir = tempfile::tempdir().unwrap();
    let payload = fault_support::write_synthetic(dir.path(), prefix, "1.0.0");
    fault_support::seed_synthetic(client, prefix).await;
    let run = apply_async(&payload, &lane.kubeconfig, &["--no-cluster-version"]).await;
    assert!(run.ok(), "{:?}", run.errors());
    cleanup_namespaces(client, prefix).await;
    run.requests()
}

/// Kills one run at `k`, reruns it and checks the cluster: the table row, and the problems.
async fn kill_and_rerun(
    client: &kube::Client,
    lane: &Lane,
    k: &KillPoint,
) -> (String, Vec<String>) {
    let synthetic = k.point % 2 == 1;
    let dir = tempfile::tempdir().unwrap();
    let (payload, extra, prefix, label) = if synthetic {
        let prefix = format!("rel-kill{}", k.point);
        let payload = fault_support::write_synthetic(dir.path(), &prefix, "1.0.0");
        fault_support::seed_synthetic(client, &prefix).await;
        (
            payload,
            vec!["--no-cluster-version"],
            Some(prefix),
            "synthetic 500".to_string(),
        )
    } else {
        let version = if k.point.is_multiple_of(4) {
            "new"
        } else {
            "old"
        };
        (
            fault_support::sample(version),
            vec![],
            None,
            format!("sample {version}"),
        )
    };
    let plan = fault_support::plan(&payload);
    let player =
        (!synthetic).then(|| OperatorPlayer::start(client.clone(), &plan, Duration::from_secs(1)));
    let base = lane.proxy.stats.counts().requests;
    let started = Instant::now();
    let child = fault_support::spawn_apply(&payload, &lane.kubeconfig, &extra);
    let pid = child.id();
    let seen = Arc::new(Mutex::new(String::new()));
    {
        let seen = seen.clone();
        let (kill_at, hold) = (k.kill_at, k.hold);
        lane.proxy.set_hook(Some(Box::new(move |n, method, path| {
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
    lane.proxy.set_hook(None);
    let in_flight = seen.lock().unwrap().clone();
    let was_killed = killed.code.is_none();
    let rerun = apply_async(&payload, &lane.kubeconfig, &extra).await;
    if let Some(p) = player {
        p.stop().await;
    }
    let mut problems = fault_support::verify(client, &plan, rerun.report.as_ref()).await;
    if let Some(prefix) = &prefix {
        problems.extend(fault_support::verify_no_extras(client, &plan, prefix).await);
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
    let row = format!(
        "| {} | {label} | {} of ~{} ({:.1}s) | {} | {} | {} |",
        k.point,
        k.kill_at,
        lane.total,
        killed.elapsed.as_secs_f64(),
        if k.hold { "dropped" } else { "forwarded" },
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
    );
    eprintln!("{row}");
    if let Some(prefix) = &prefix {
        cleanup_namespaces(client, prefix).await;
    }
    let problems = problems
        .into_iter()
        .map(|p| {
            format!(
                "kill point {} ({label}, request {}): {p}",
                k.point, k.kill_at
            )
        })
        .collect();
    (row, problems)
}

/// The kill points of one lane, one after another.
async fn run_lane(
    client: &kube::Client,
    lane: &Lane,
    points: &[KillPoint],
) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for k in points {
        out.push(kill_and_rerun(client, lane, k).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_at_random_points_then_a_rerun_converges() {
    let p = plane(Scenario::Kill);
    let client = p.client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    // The sample's fixed names take one point after another; the synthetic payload's points
    // (namespaces of their own, a proxy of their own) run beside them.
    let (mut sample, mut synthetic) = tokio::join!(Lane::start(p), Lane::start(p));
    let (s, y) = tokio::join!(
        sample_requests(&client, &sample),
        synthetic_requests(&client, &synthetic)
    );
    (sample.total, synthetic.total) = (s, y);
    eprintln!("whole runs: sample {s} requests, synthetic {y}");

    let mut rng = rand::rngs::StdRng::seed_from_u64(2024);
    let (mut sample_points, mut synthetic_points) = (Vec::new(), Vec::new());
    for point in 0..24 {
        let is_synthetic = point % 2 == 1;
        let total = if is_synthetic { y } else { s };
        let k = KillPoint {
            point,
            kill_at: rng.random_range(1..=total.max(2)),
            hold: rng.random_bool(0.5),
        };
        if is_synthetic {
            synthetic_points.push(k);
        } else {
            sample_points.push(k);
        }
    }
    let (a, b) = tokio::join!(
        run_lane(&client, &sample, &sample_points),
        run_lane(&client, &synthetic, &synthetic_points)
    );
    let mut rows: Vec<(usize, (String, Vec<String>))> = sample_points
        .iter()
        .map(|k| k.point)
        .zip(a)
        .chain(synthetic_points.iter().map(|k| k.point).zip(b))
        .collect();
    rows.sort_by_key(|(point, _)| *point);
    let mut table = vec![
        "| # | payload | killed at request | request in flight | in-flight request | rerun |"
            .to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = Vec::new();
    for (_, (row, problems)) in rows {
        table.push(row);
        failures.extend(problems);
    }
    eprintln!("\n{}\n", table.join("\n"));
    crate::support::openshift::assert_real_crds(&client, "Default").await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
