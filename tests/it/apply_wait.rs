//! ClusterOperator waits: the next run-level starts only once the operator reports the
//! manifest's versions, Available and not Degraded (the time from the status write to the next
//! level's first request is printed, not asserted); `--wait-timeout` ends a wait that
//! never finishes with a failure naming the operator and what it lacks.

use crate::support;
use crate::support::apply as apply_util;

use std::time::Duration;

use minicvo::Mode;
use minicvo::apply::EventKind;

#[tokio::test]
async fn a_clusteroperator_wait_blocks_the_next_run_level_until_it_is_done() {
    let conn = apply_util::connection(None).await;
    let admin = support::openshift::shared_plane_crds().await;
    let ns = support::NamespaceGuard::adopt(support::unique_name("co-wait"));
    let co = support::unique_name("op");
    let dir = tempfile::tempdir().unwrap();
    // The payload carries the real ClusterOperator CRD, as a release does: applying it leaves
    // the served CRD as it is (checked at the end).
    apply_util::write_payload(
        dir.path(),
        "2.0.0",
        &[
            apply_util::clusteroperator_crd(),
            (
                "0000_50_op_00_namespace.yaml".into(),
                apply_util::namespace(&ns),
            ),
            (
                "0000_50_op_01_config.yaml".into(),
                apply_util::config_map(&ns, "operator-config", "1", &[]),
            ),
            (
                "0000_50_op_02_clusteroperator.yaml".into(),
                apply_util::cluster_operator(&co, "0.0.1-snapshot"),
            ),
            (
                "0000_60_next_00_config.yaml".into(),
                apply_util::config_map(&ns, "next-level", "1", &[]),
            ),
        ],
    );
    let plan = apply_util::plan(dir.path(), Mode::Updating);

    // The operator first reports the old version (not done) once the wait has started, then
    // the new one once the wait has seen the old one: driven by the run's events, no sleeps.
    let watched = apply_util::Watched::new();
    let operator = {
        let admin = admin.clone();
        let co = co.clone();
        let watched = watched.clone();
        tokio::spawn(async move {
            watched
                .wait_for("the wait started", |e| {
                    matches!(&e.kind, EventKind::WaitStarted { operator, .. } if *operator == co)
                })
                .await;
            apply_util::finish_operator(&admin, &co, "1.0.0").await;
            watched
                .wait_for("the wait saw 1.0.0", |e| match &e.kind {
                    EventKind::WaitStarted {
                        blocking, operator, ..
                    }
                    | EventKind::WaitProgress {
                        blocking, operator, ..
                    } => {
                        *operator == co && blocking.iter().any(|b| b == "operator=1.0.0 want 2.0.0")
                    }
                    _ => false,
                })
                .await;
            apply_util::finish_operator(&admin, &co, "2.0.0").await
        })
    };
    let report =
        apply_util::run_watched(&conn, plan, &apply_util::options(), watched.clone()).await;
    let events = watched.events();
    // When the status write that finishes the operator was sent.
    let status_written = operator.await.unwrap();
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.waited, 1);

    // The wait reported who blocks and why.
    let blocked_on_version = events.iter().any(|e| match &e.kind {
        EventKind::WaitStarted {
            blocking, operator, ..
        }
        | EventKind::WaitProgress {
            blocking, operator, ..
        } => *operator == co && blocking.iter().any(|b| b == "operator=1.0.0 want 2.0.0"),
        _ => false,
    });
    assert!(
        blocked_on_version,
        "no progress naming the version gap: {events:#?}"
    );

    // Nothing of run-level 60 started before the operator was done.
    let (_, done) = apply_util::find(&events, |e| matches!(e.kind, EventKind::WaitDone { .. }))
        .expect("WaitDone");
    let (_, next) = apply_util::find(&events, |e| {
        matches!(&e.kind, EventKind::TaskStarted { task } if task.run_level.as_deref() == Some("60"))
    })
    .expect("run-level 60 started");
    assert!(next.instant >= done.instant);
    assert!(
        next.instant >= status_written,
        "run-level 60 started before the operator reported 2.0.0"
    );
    let latency = next.instant - status_written;
    eprintln!(
        "clusteroperator status write sent -> next run-level's first request: {:.1} ms",
        latency.as_secs_f64() * 1000.0
    );

    let ops = apply_util::operators(&admin);
    support::delete_quietly(&ops, &co).await;
    support::openshift::assert_real_crds(&admin, "Default").await;
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn wait_timeout_fails_cleanly_naming_the_operator() {
    let conn = apply_util::connection(None).await;
    let admin = support::openshift::shared_plane_crds().await;
    let co = support::unique_name("stuck");
    let ns = support::unique_name("co-stuck");
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(
        dir.path(),
        "3.0.0",
        &[
            (
                "0000_50_stuck_00_clusteroperator.yaml".into(),
                apply_util::cluster_operator(&co, "3.0.0"),
            ),
            (
                "0000_60_next_00_namespace.yaml".into(),
                apply_util::namespace(&ns),
            ),
        ],
    );
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let mut options = apply_util::options();
    options.runner.wait_timeout = Duration::from_secs(2);
    let started = tokio::time::Instant::now();
    let (report, _) = apply_util::run(&conn, plan, &options).await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!report.ok);
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    let e = &report.errors[0];
    assert_eq!(
        (e.object.kind.as_str(), e.object.name.as_str()),
        ("ClusterOperator", co.as_str())
    );
    assert!(
        e.message.starts_with(&format!(
            "clusteroperator {co} is not done after --wait-timeout 2.0s: "
        )),
        "{}",
        e.message
    );
    assert!(e.message.contains("not Available"), "{}", e.message);
    assert!(
        e.message.contains("operator=<none> want 3.0.0"),
        "{}",
        e.message
    );
    // The next run-level never started.
    assert_eq!(report.counts.not_run, 1);
    let ops = apply_util::operators(&admin);
    support::delete_quietly(&ops, &co).await;
    support::openshift::assert_real_crds(&admin, "Default").await;
}

/// A wait whose operator's workload cannot run (its image does not exist, and the shared plane
/// has no node) says so within seconds, names the workload and what to do, and the
/// `--wait-timeout` failure carries it too.
#[tokio::test]
async fn a_wait_says_when_no_workload_of_the_operator_runs() {
    let conn = apply_util::connection(None).await;
    let admin = support::openshift::shared_plane_crds().await;
    let co = support::unique_name("idle");
    let ns = support::NamespaceGuard::adopt(support::unique_name("co-idle"));
    let dir = tempfile::tempdir().unwrap();
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: idle-operator\n  namespace: {ns}\n  \
         annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n\
         spec:\n  selector:\n    matchLabels:\n      app: idle-operator\n  template:\n    metadata:\n      \
         labels:\n        app: idle-operator\n    spec:\n      containers:\n      - name: operator\n        \
         image: registry.example.invalid/idle-operator:1\n"
    );
    apply_util::write_payload(
        dir.path(),
        "4.0.0",
        &[
            (
                "0000_50_idle_00_namespace.yaml".into(),
                apply_util::namespace(&ns),
            ),
            ("0000_50_idle_01_deployment.yaml".into(), deployment),
            (
                "0000_50_idle_02_clusteroperator.yaml".into(),
                apply_util::cluster_operator(&co, "4.0.0"),
            ),
        ],
    );
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let mut options = apply_util::options();
    options.runner.wait_timeout = Duration::from_secs(8);
    let (report, events) = apply_util::run(&conn, plan, &options).await;
    let hint_prefix = format!("no workload of its operator runs (deployment {ns}/idle-operator: ");
    let hinted = events.iter().find_map(|e| match &e.kind {
        EventKind::WaitProgress {
            operator, blocking, ..
        } if *operator == co => blocking
            .iter()
            .find(|b| b.starts_with(&hint_prefix))
            .map(|b| (e.elapsed, b.clone())),
        _ => None,
    });
    let (at, hint) = hinted.unwrap_or_else(|| panic!("no workload hint in {events:#?}"));
    assert!(at < Duration::from_secs(8), "the hint came after {at:?}");
    assert!(hint.contains("`minicvo simulate PAYLOAD`"), "{hint}");
    assert!(hint.contains("--wait-timeout (now 8.0s)"), "{hint}");
    assert!(!report.ok);
    let e = &report.errors[0];
    assert!(e.message.contains(&hint_prefix), "{}", e.message);
    let ops = apply_util::operators(&admin);
    support::delete_quietly(&ops, &co).await;
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn the_run_timeout_stops_a_wait_and_reports_it() {
    let conn = apply_util::connection(None).await;
    let admin = support::openshift::shared_plane_crds().await;
    let co = support::unique_name("slow");
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(
        dir.path(),
        "4.0.0",
        &[(
            "0000_50_slow_00_clusteroperator.yaml".into(),
            apply_util::cluster_operator(&co, "4.0.0"),
        )],
    );
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let mut options = apply_util::options();
    options.runner.wait_timeout = Duration::from_secs(600);
    options.timeout = Some(Duration::from_secs(2));
    let started = tokio::time::Instant::now();
    let (report, events) = apply_util::run(&conn, plan, &options).await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!report.ok);
    assert_eq!(report.stopped, Some(minicvo::apply::StopReason::TimedOut));
    assert_eq!(report.counts.interrupted, 1);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::Stopping {
            reason: minicvo::apply::StopReason::TimedOut
        }
    )));
    let ops = apply_util::operators(&admin);
    support::delete_quietly(&ops, &co).await;
    support::openshift::assert_real_crds(&admin, "Default").await;
}
