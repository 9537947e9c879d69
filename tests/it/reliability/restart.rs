//! The API server restarted in the middle of an apply.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apiserver_restart_mid_apply_completes_or_fails_clearly_and_a_rerun_converges() {
    let p = plane(Scenario::Restart);
    let client = p.client().await;
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
        let (proxy, kc) = proxy(p, FaultMix::none(), tmp.path()).await;
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
                        let d = p.restart_apiserver(Duration::from_secs(down_for));
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
