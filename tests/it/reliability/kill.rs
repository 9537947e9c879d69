//! minicvo killed at random points of an apply, then run again.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_at_random_points_then_a_rerun_converges() {
    let p = plane(Scenario::Kill);
    let client = p.client().await;
    crate::support::openshift::install_both(&client, "Default").await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(2024);
    let mut table = vec![
        "| # | payload | killed at request | request in flight | in-flight request | rerun |"
            .to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    let (proxy, kc) = proxy(p, FaultMix::none(), tmp.path()).await;

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
