//! Two replicas: exactly one leads at any time (checked every 100 ms), a SIGKILL of the leader
//! in the middle of an update and a SIGTERM, with the takeover times.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::support_op::{
    LEASE, Operator, RETRY, condition, fresh_cluster, history_is, patch_cv, payloads, simulator,
    simulator_scripted, wait_cv,
};
use super::{INSTALL_LIMIT, desired_update};
use crate::support;

/// Leader checks of every replica, every 100 ms: a violation is two leaders at once.
struct Checker {
    violations: Arc<Mutex<Vec<String>>>,
    samples: Arc<Mutex<u64>>,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Checker {
    fn start(ports: Arc<Mutex<Vec<(String, u16)>>>) -> Checker {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let samples = Arc::new(Mutex::new(0u64));
        let stop = tokio_util::sync::CancellationToken::new();
        let task = {
            let (violations, samples, stop) = (violations.clone(), samples.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    let replicas = ports.lock().unwrap().clone();
                    let mut leaders = Vec::new();
                    for (id, port) in replicas {
                        if let Some((200, text)) = super::support_op::get(port, "/metrics").await
                            && text.lines().any(|l| l.trim() == "minicvo_leader 1")
                        {
                            leaders.push(id);
                        }
                    }
                    *samples.lock().unwrap() += 1;
                    if leaders.len() > 1 {
                        violations.lock().unwrap().push(leaders.join(" and "));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Checker {
            violations,
            samples,
            stop,
            task,
        }
    }

    async fn finish(self) -> (Vec<String>, u64) {
        self.stop.cancel();
        self.task.await.unwrap();
        let v = self.violations.lock().unwrap().clone();
        let n = *self.samples.lock().unwrap();
        (v, n)
    }
}

async fn wait_leader(ops: &[&Operator], limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        for (i, op) in ops.iter().enumerate() {
            if op.leads().await == Some(true) {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no leader within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_leader_which_a_standby_replaces_after_sigkill_and_sigterm() {
    let _lock = support::fixed_names_lock().await;
    let client = support::openshift::shared_plane_crds().await;
    fresh_cluster(&client, &["old", "new"]).await;
    let roots = payloads(&["old", "new"]);
    let sim = simulator("old").await;
    let a = Operator::start("a", &roots, &[]);
    let b = Operator::start("b", &roots, &[]);
    let ports = Arc::new(Mutex::new(vec![
        ("a".to_string(), a.port),
        ("b".to_string(), b.port),
    ]));
    let checker = Checker::start(ports.clone());
    wait_cv(&client, "4.13.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.13.0", "Completed")
    })
    .await;
    sim.stop().await;
    let mut ops = vec![a, b];
    let leader = wait_leader(&[&ops[0], &ops[1]], Duration::from_secs(10)).await;
    let standby = 1 - leader;

    // SIGKILL of the leader in the middle of the update: machine-config does not report
    // until the standby has taken over, so the update is in progress when the leader dies
    // (however fast the rest of it goes).
    let holding = simulator_scripted("new", &["machine-config=never"], Duration::ZERO).await;
    patch_cv(&desired_update("4.14.0"));
    wait_cv(
        &client,
        "4.14.0 in progress",
        Duration::from_secs(60),
        |cv| {
            history_is(cv, 0, "4.14.0", "Partial")
                && condition(cv, "Progressing").2.contains(" of ")
                && !condition(cv, "Progressing").2.contains(": 0 of ")
        },
    )
    .await;
    let killed = Instant::now();
    ops[leader].signal("KILL");
    let _ = ops[leader].exit(Duration::from_secs(5)).await;
    let took_over = {
        let deadline = Instant::now() + LEASE + RETRY * 4;
        loop {
            if ops[standby].leads().await == Some(true) {
                break killed.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "no takeover after SIGKILL\n{}",
                ops[standby].log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    eprintln!(
        "takeover after SIGKILL: {:.2}s (lease {LEASE:?}, retry {RETRY:?})",
        took_over.as_secs_f64()
    );
    assert!(took_over <= LEASE + RETRY * 2, "{took_over:?}");
    holding.stop().await;
    let sim = simulator("new").await;
    let cv = wait_cv(&client, "4.14.0 Completed", INSTALL_LIMIT, |cv| {
        history_is(cv, 0, "4.14.0", "Completed")
    })
    .await;
    let resumed = ops[standby]
        .log()
        .lines()
        .find(|l| l.contains("updating pass of 4.14.0 completed"))
        .map(str::to_string)
        .unwrap_or_default();
    eprintln!(
        "update completed {:.2}s after the SIGKILL; the new leader: {}",
        killed.elapsed().as_secs_f64(),
        resumed.trim()
    );
    assert!(
        history_is(&cv, 1, "4.13.0", "Completed"),
        "{:#}",
        cv["status"]["history"]
    );
    sim.stop().await;

    // A new standby; SIGTERM of the leader releases the lease: takeover before expiry.
    let c = Operator::start("c", &roots, &[]);
    ports.lock().unwrap().push(("c".to_string(), c.port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !c.log().contains("standing by") {
        assert!(Instant::now() < deadline, "c never stood by\n{}", c.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let termed = Instant::now();
    ops[standby].signal("TERM");
    let deadline = Instant::now() + LEASE;
    let took_over = loop {
        if c.leads().await == Some(true) {
            break termed.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "no takeover after SIGTERM before the lease expired\n{}",
            c.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let code = ops[standby].exit(Duration::from_secs(10)).await;
    eprintln!(
        "takeover after SIGTERM: {:.2}s; the old leader exited with {code:?}",
        took_over.as_secs_f64()
    );
    assert_eq!(code, Some(0), "{}", ops[standby].log());
    assert!(
        ops[standby].log().contains("released the leader lease"),
        "{}",
        ops[standby].log()
    );
    let (violations, samples) = checker.finish().await;
    assert!(samples > 20, "too few leader checks: {samples}");
    assert!(violations.is_empty(), "two leaders at once: {violations:?}");
    ops.push(c);
    support::openshift::assert_real_crds(&client, "Default").await;
}
