//! Live simulated pods on the test control plane: the e2e run sees the harm an update does to
//! pods that still run, with no assertion given, by the kubelet's rules. For each shape of
//! [`crate::support::harm`], OLD → HARMFUL fails the `live-pods-keep-access` check with a
//! `harm` event for the harmed pods' ServiceAccount that names the object the payload took
//! away — except where it deletes a ConfigMap or Secret only the old pods use: they keep it,
//! so there is no harm, only a danger window (a warning) until the Deployment is updated — and
//! OLD → FIXED passes it with no harm. A clean-up at run-level 90, after the ClusterOperator
//! reported, of what only the still-terminating old pod mounts harms nobody (issue 32). The
//! bundled machine-config story shows the same harm and a leader-lease gap before the fix and
//! neither after, and a rollout's generations overlap under `RollingUpdate` and not under
//! `Recreate`.
//!
//! The shape payloads use names unique to each test (namespace, ClusterOperator, ClusterRoles),
//! so those tests run in parallel; the bundled samples use fixed names and run on a plane of
//! the fixed-names pool ([`support::fixed_names_plane`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use minicvo::e2e::{
    self, Clients, Harm, Phase, TimelineAction, TimelineEvent, UpgradeOptions, UpgradeReport,
};

use crate::support::harm::{self, Fixture, Shape};
use crate::support::{self, NamespaceGuard};
use minicvo::simulate::pods::HarmKind;

/// The check that fails on every harm.
const LIVE_PODS: &str = e2e::LIVE_PODS_CHECK;

async fn clients() -> Clients {
    support::apply::e2e_clients().await
}

/// Install `from`, update to `to`, clean before and after; waits time out after `wait`.
fn options_waiting(from: &Path, to: &Path, wait: Duration) -> UpgradeOptions {
    let mut o = UpgradeOptions {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        clean: true,
        clean_after: true,
        ..UpgradeOptions::default()
    };
    o.apply.runner.wait_timeout = wait;
    o
}

/// [`options_waiting`] 20 s: runs that must pass.
fn options(from: &Path, to: &Path) -> UpgradeOptions {
    options_waiting(from, to, Duration::from_secs(20))
}

/// Runs the e2e upgrade on the shared plane (real ClusterOperator CRD) and returns its report.
async fn run(options: &UpgradeOptions) -> UpgradeReport {
    let admin = support::openshift::shared_plane_crds().await;
    run_with(&admin, &clients().await, options).await
}

/// Runs the e2e upgrade of a payload with fixed names on a plane of the fixed-names pool,
/// held for the run.
async fn run_fixed_names(options: &UpgradeOptions) -> UpgradeReport {
    let plane = support::fixed_names_plane().await;
    let admin = plane.real_crds().await;
    run_with(&admin, &plane.e2e_clients().await, options).await
}

async fn run_with(
    admin: &kube::Client,
    clients: &Clients,
    options: &UpgradeOptions,
) -> UpgradeReport {
    let report = support::apply::e2e_upgrade(clients, options).await;
    eprintln!("{}", report.text());
    support::openshift::assert_real_crds(admin, "Default").await;
    report
}

fn live_pods_check(report: &UpgradeReport) -> &e2e::Check {
    report
        .checks
        .iter()
        .find(|c| c.name == LIVE_PODS)
        .unwrap_or_else(|| panic!("no {LIVE_PODS} check in {:?}", check_names(report)))
}

fn check_names(report: &UpgradeReport) -> Vec<&str> {
    report.checks.iter().map(|c| c.name.as_str()).collect()
}

/// Every harm event of the run, with its harm.
fn harms(report: &UpgradeReport) -> Vec<(&TimelineEvent, &Harm)> {
    report
        .timeline
        .events
        .iter()
        .filter(|e| e.action == TimelineAction::Harm)
        .map(|e| {
            let h = e
                .harm
                .as_ref()
                .unwrap_or_else(|| panic!("harm event without harm: {e:?}"));
            (e, h)
        })
        .collect()
}

fn describe(harms: &[(&TimelineEvent, &Harm)]) -> Vec<String> {
    harms
        .iter()
        .map(|(e, h)| {
            format!(
                "t={} {} {}: {} {} ({:?}), cause {:?}",
                e.t, e.phase, h.pod, h.service_account, h.what, h.kind, h.cause
            )
        })
        .collect()
}

fn assert_no_harm(report: &UpgradeReport) {
    let check = live_pods_check(report);
    assert!(
        check.passed(),
        "{LIVE_PODS} failed: {:?}\n{}",
        check.failures,
        report.text()
    );
    let found = harms(report);
    assert!(found.is_empty(), "harm: {:#?}", describe(&found));
}

/// OLD → HARMFUL: the check fails, and a harm of the harmed pod's account names the shape's
/// object as its cause. When the new pods start without a right
/// ([`Shape::BindingAfterNewAccount`]) the binding comes only later, so no earlier task
/// caused it: the cause, when named, is the binding or the Deployment's update. When they
/// cannot start without a deleted object, the harm is `started-without` that object.
async fn harmful(shape: Shape) {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = support::unique_name(&format!("harm-{}", shape.tag()));
    let fx: Fixture = harm::write(shape, dir.path(), &id);
    assert!(fx.harms, "{}: the harmful twin harms nobody", shape.tag());
    let _ns = NamespaceGuard::adopt(fx.namespace.clone());
    // A harmful update may leave a ClusterOperator wait that never ends (new pods that cannot
    // lead): a shorter timeout keeps the test fast.
    let report = run(&options_waiting(
        &fx.old,
        &fx.harmful,
        Duration::from_secs(10),
    ))
    .await;

    let check = live_pods_check(&report);
    assert!(
        !check.passed(),
        "{}: {LIVE_PODS} passed\n{}",
        shape.tag(),
        report.text()
    );
    let found = harms(&report);
    assert!(
        !found.is_empty(),
        "{}: no harm event, but {LIVE_PODS} found {:?}",
        shape.tag(),
        check.failures
    );
    let matching = found.iter().any(|(e, h)| {
        e.phase == Phase::Upgrade
            && h.service_account == fx.harmed_account
            && h.pod == fx.harmed_pod
            && match (shape, h.cause.as_deref()) {
                (Shape::BindingAfterNewAccount, None) => true,
                (Shape::BindingAfterNewAccount, Some(c)) => {
                    fx.cause_names_object(c)
                        || (c.contains("Deployment") && c.contains(&fx.workload))
                }
                (_, Some(c)) => fx.cause_names_object(c),
                (_, None) => false,
            }
            && (!matches!(
                shape,
                Shape::ConfigMapStillMounted | Shape::EnvStillReferenced
            ) || h.kind == HarmKind::StartedWithout)
    });
    assert!(
        matching,
        "{}: no harm of {} ({}) caused by {} {}: {:#?}",
        shape.tag(),
        fx.harmed_pod,
        fx.harmed_account,
        fx.cause_kind,
        fx.cause_name,
        describe(&found)
    );
    assert!(!report.ok(), "{}: the run passed", shape.tag());
}

/// OLD → HARMFUL where it deletes a ConfigMap or Secret only the old pods use, before their
/// Deployment is updated: by the kubelet's rules the running old pod keeps its volume files
/// and its environment, so `live-pods-keep-access` passes with no harm. What the payload did is
/// a danger window — no pod of the old template could have started again between the delete
/// and the Deployment's update — reported as a warning, caused by the delete; and the
/// plan-position check still reports the delete before the update, so the run fails on that.
async fn danger_only(shape: Shape) {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = support::unique_name(&format!("danger-{}", shape.tag()));
    let fx: Fixture = harm::write(shape, dir.path(), &id);
    assert!(!fx.harms, "{}: the harmful twin harms", shape.tag());
    let _ns = NamespaceGuard::adopt(fx.namespace.clone());
    let report = run(&options(&fx.old, &fx.harmful)).await;
    assert!(report.completed(), "{}: {}", shape.tag(), report.text());
    assert_no_harm(&report);
    let old_pod = format!("{}#1", fx.workload);
    let window = report
        .danger_windows
        .iter()
        .find(|w| w.pod == old_pod)
        .unwrap_or_else(|| {
            panic!(
                "{}: no danger window of {old_pod}: {:#?}",
                shape.tag(),
                report.danger_windows
            )
        });
    let object = format!("{} {}/{} ", fx.cause_kind, fx.namespace, fx.cause_name);
    assert!(window.what.starts_with(&object), "{window:?}");
    assert!(
        window
            .cause
            .as_deref()
            .is_some_and(|c| c.starts_with("delete ") && fx.cause_names_object(c)),
        "{window:?}"
    );
    assert!(
        window.to.is_some()
            && window
                .closed_by
                .as_deref()
                .is_some_and(|c| c.contains(&fx.workload) && c.contains("new template")),
        "the Deployment's update closes it: {window:?}"
    );
    assert!(
        report
            .text()
            .contains("warning: danger window of Deployment"),
        "{}",
        report.text()
    );
    assert_eq!(report.json()["dangerWindows"][0]["pod"], old_pod.as_str());
    let story = report.story_findings();
    assert!(
        story.iter().any(|f| f.starts_with(&format!(
            "{} {}/{} was deleted",
            fx.cause_kind, fx.namespace, fx.cause_name
        ))),
        "{}: the delete before the update is still a plan-position finding: {story:#?}",
        shape.tag()
    );
    assert!(!report.ok(), "{}: {}", shape.tag(), report.text());
}

/// OLD → FIXED: the check passes and nothing is harmed.
async fn fixed(shape: Shape) {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = support::unique_name(&format!("fixed-{}", shape.tag()));
    let fx = harm::write(shape, dir.path(), &id);
    let _ns = NamespaceGuard::adopt(fx.namespace.clone());
    let report = run(&options(&fx.old, &fx.fixed)).await;
    assert!(report.completed(), "{}: {}", shape.tag(), report.text());
    assert_no_harm(&report);
    assert!(report.ok(), "{}: {}", shape.tag(), report.text());
}

#[tokio::test]
async fn rolebinding_deleted_before_update_harms_old_pods() {
    harmful(Shape::RoleBindingDeleted).await;
}

#[tokio::test]
async fn rolebinding_deleted_after_wait_harms_nobody() {
    fixed(Shape::RoleBindingDeleted).await;
}

#[tokio::test]
async fn role_deleted_before_update_harms_old_pods() {
    harmful(Shape::RoleDeleted).await;
}

#[tokio::test]
async fn role_deleted_after_wait_harms_nobody() {
    fixed(Shape::RoleDeleted).await;
}

#[tokio::test]
async fn clusterrole_narrowed_before_update_harms_old_pods() {
    harmful(Shape::ClusterRoleNarrowed).await;
}

#[tokio::test]
async fn clusterrole_narrowed_after_wait_harms_nobody() {
    fixed(Shape::ClusterRoleNarrowed).await;
}

/// Was `mounted_configmap_deleted_before_update_harms_old_pods`: a running pod keeps the files
/// of a deleted ConfigMap (the kubelet's rule, issue 32).
#[tokio::test]
async fn mounted_configmap_deleted_before_update_leaves_a_danger_window_not_harm() {
    danger_only(Shape::ConfigMapDeleted).await;
}

#[tokio::test]
async fn mounted_configmap_deleted_after_wait_harms_nobody() {
    fixed(Shape::ConfigMapDeleted).await;
}

/// Was `secret_deleted_before_update_harms_old_pods`: a running container keeps the
/// environment it was created with (the kubelet's rule, issue 32).
#[tokio::test]
async fn env_secret_deleted_before_update_leaves_a_danger_window_not_harm() {
    danger_only(Shape::SecretDeleted).await;
}

#[tokio::test]
async fn secret_deleted_after_wait_harms_nobody() {
    fixed(Shape::SecretDeleted).await;
}

#[tokio::test]
async fn configmap_new_pods_mount_deleted_before_update_new_pod_started_without() {
    harmful(Shape::ConfigMapStillMounted).await;
}

#[tokio::test]
async fn configmap_new_pods_mount_moved_and_deleted_after_wait_harms_nobody() {
    fixed(Shape::ConfigMapStillMounted).await;
}

#[tokio::test]
async fn env_configmap_new_pods_reference_deleted_before_update_new_pod_started_without() {
    harmful(Shape::EnvStillReferenced).await;
}

#[tokio::test]
async fn env_configmap_new_pods_reference_moved_and_deleted_after_wait_harms_nobody() {
    fixed(Shape::EnvStillReferenced).await;
}

#[tokio::test]
async fn serviceaccount_deleted_before_update_harms_old_pods() {
    harmful(Shape::ServiceAccountDeleted).await;
}

#[tokio::test]
async fn serviceaccount_deleted_after_wait_harms_nobody() {
    fixed(Shape::ServiceAccountDeleted).await;
}

#[tokio::test]
async fn new_account_bound_after_update_harms_new_pods() {
    harmful(Shape::BindingAfterNewAccount).await;
}

#[tokio::test]
async fn new_account_bound_before_update_harms_nobody() {
    fixed(Shape::BindingAfterNewAccount).await;
}

/// Issue 32: a payload deletes, at run-level 90, the ConfigMap the OLD Deployment mounted, after
/// the component's ClusterOperator reported the new version — while the old pod, replaced
/// under a `RollingUpdate`, is still terminating (a `stop` time of 10 s: it released its lease,
/// so the new pod leads and reports). `live-pods-keep-access` reported `dependency-missing
/// ConfigMap … (volume config)` for the old pod; a kubelet keeps a running pod's volume files,
/// and no pod of the old template starts again, so the run passes with no harm and no danger
/// window.
#[tokio::test]
async fn configmap_only_old_pods_mounted_deleted_at_run_level_90_after_clusteroperator_reported_is_no_harm()
 {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = support::unique_name("cleanup-90");
    let (old, new) = harm::write_cleanup_after_report(dir.path(), &id, None);
    let _ns = NamespaceGuard::adopt(id.clone());
    let workload = format!("{id}-operator");
    let mut o = options(&old, &new);
    o.pods.timings.add(&format!("{workload}=stop:10s")).unwrap();
    let report = run(&o).await;
    assert!(report.completed(), "{}", report.text());

    // The order is the fixed one: reported, then deleted at run-level 90 ...
    let upgrade = |pred: &dyn Fn(&TimelineEvent) -> bool| {
        report
            .timeline
            .events
            .iter()
            .position(|e| e.phase == Phase::Upgrade && pred(e))
    };
    let reported = upgrade(&|e| {
        e.action == TimelineAction::WaitDone
            && e.object.name == id
            && e.outcome.as_deref() == Some("waited")
    })
    .unwrap_or_else(|| panic!("ClusterOperator {id} was not waited for: {}", report.text()));
    let deleted = upgrade(&|e| {
        e.is_delete_issued() && e.object.kind == "ConfigMap" && e.object.name == "config"
    })
    .unwrap_or_else(|| panic!("ConfigMap config was not deleted: {}", report.text()));
    assert!(reported < deleted, "{}", report.text());
    assert_eq!(
        report.timeline.events[deleted].run_level.as_deref(),
        Some("90")
    );
    // ... while the old pod, which mounted it, still ran (terminating).
    let terminating = pod_event(&report, &workload, 1, "terminating");
    assert!(terminating < deleted, "{}", report.text());
    let stopped = pod_event(&report, &workload, 1, "stopped");
    assert!(
        deleted < stopped,
        "the old pod was gone before the delete: {}",
        report.text()
    );

    assert_no_harm(&report);
    assert!(
        report.danger_windows.is_empty(),
        "{:#?}",
        report.danger_windows
    );
    assert!(report.ok(), "{}", report.text());
}

const MCO_NS: &str = "openshift-machine-config-operator";
const MCO_BINDING: &str = "default-account-openshift-machine-config-operator";
const MCO_WORKLOAD: &str = "Deployment openshift-machine-config-operator/machine-config-operator";

/// The bundled sample `payload/NAME` (without its stand-in CRDs), with fixed names: the caller
/// runs it on a plane of the fixed-names pool.
fn sample(name: &str) -> PathBuf {
    support::openshift::sample(name)
}

/// The lease gap of the machine-config Deployment, in seconds (0 when none is reported).
fn mco_lease_gap(report: &UpgradeReport) -> f64 {
    report
        .lease_gaps
        .iter()
        .filter(|g| g.workload == MCO_WORKLOAD)
        .map(|g| g.seconds)
        .sum()
}

#[tokio::test]
async fn bundled_buggy_payload_harms_the_machine_config_operator_and_leaves_a_lease_gap() {
    let report = run_fixed_names(&options(&sample("old"), &sample("new-buggy"))).await;
    assert!(!live_pods_check(&report).passed(), "{}", report.text());
    let found = harms(&report);
    let account = format!("{MCO_NS}/default");
    assert!(
        found.iter().any(|(_, h)| h.service_account == account
            && h.pod.starts_with("machine-config-operator#")
            && h.cause.as_deref().is_some_and(
                |c| c.split_whitespace().any(|w| w == MCO_BINDING) && c.starts_with("delete ")
            )),
        "no harm of {account} caused by the delete of {MCO_BINDING}: {:#?}",
        describe(&found)
    );
    let gap = mco_lease_gap(&report);
    assert!(
        gap > 0.0,
        "no lease gap for {MCO_WORKLOAD}: {:?}",
        report
            .lease_gaps
            .iter()
            .map(|g| (&g.workload, g.seconds))
            .collect::<Vec<_>>()
    );
    assert!(!report.ok());
}

#[tokio::test]
async fn bundled_fixed_payload_harms_nobody_and_leaves_no_lease_gap() {
    let report = run_fixed_names(&options(&sample("old"), &sample("new"))).await;
    assert!(report.completed(), "{}", report.text());
    assert_no_harm(&report);
    assert!(
        mco_lease_gap(&report) == 0.0,
        "lease gap for {MCO_WORKLOAD}: {}",
        mco_lease_gap(&report)
    );
    assert!(report.ok(), "{}", report.text());
}

/// The position in the upgrade timeline of the observed event `pod <workload>#<n> <what>`.
fn pod_event(report: &UpgradeReport, workload: &str, generation: u32, what: &str) -> usize {
    let want = format!("pod {workload}#{generation} {what}");
    report
        .timeline
        .events
        .iter()
        .position(|e| {
            e.phase == Phase::Upgrade
                && e.action == TimelineAction::Observed
                && e.object.kind == "Deployment"
                && e.object.name == workload
                && e.detail.as_deref().is_some_and(|d| d.starts_with(&want))
        })
        .unwrap_or_else(|| {
            panic!(
                "no upgrade event `{want}` of Deployment {workload}: {:#?}",
                report
                    .timeline
                    .events
                    .iter()
                    .filter(|e| e.object.name == workload)
                    .map(|e| (e.t, e.action, e.detail.clone()))
                    .collect::<Vec<_>>()
            )
        })
}

/// Updates one operator whose NEW Deployment has `strategy`; returns the run's report and the
/// positions of (generation 1 stopped, generation 2 started) in its timeline.
async fn rollout(strategy: &str) -> (UpgradeReport, usize, usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = support::unique_name(&format!("rollout-{}", strategy.to_lowercase()));
    let (old, new) = harm::write_rollout(dir.path(), &id, strategy);
    let _ns = NamespaceGuard::adopt(id.clone());
    let report = run(&options(&old, &new)).await;
    assert!(report.completed(), "{}", report.text());
    assert_no_harm(&report);
    let workload = format!("{id}-operator");
    let stopped = pod_event(&report, &workload, 1, "stopped");
    let started = pod_event(&report, &workload, 2, "started");
    (report, stopped, started)
}

#[tokio::test]
async fn rolling_update_overlaps_the_generations() {
    let (report, stopped, started) = rollout("RollingUpdate").await;
    assert!(
        started < stopped,
        "#2 started (event {started}) after #1 stopped (event {stopped})\n{}",
        report.text()
    );
}

#[tokio::test]
async fn switch_to_recreate_stops_the_old_generation_first() {
    let (report, stopped, started) = rollout("Recreate").await;
    assert!(
        stopped < started,
        "#1 stopped (event {stopped}) after #2 started (event {started})\n{}",
        report.text()
    );
}
