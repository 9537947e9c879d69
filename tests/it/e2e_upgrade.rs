//! The upgrade e2e harness on the test control plane: the machine-config story replayed with
//! the bundled samples and with the real corpus, simulator scripts that make an upgrade fail
//! at the operator's run-level, and a complete install of the multi-operator corpus.
//!
//! These payloads use fixed object names (cluster-scoped CRDs, namespaces, ClusterOperators),
//! so every test runs on a plane of the fixed-names pool ([`support::fixed_names_plane`]),
//! which it holds alone, and starts (and ends) by deleting both payloads' objects.

use crate::support::{self, corpus};

use std::path::PathBuf;
use std::time::Duration;

use minicvo::e2e::{self, Phase, TimelineAction, TimelineEvent, UpgradeOptions, UpgradeReport};

const BINDING: &str = "default-account-openshift-machine-config-operator";
const OPERATOR_NS: &str = "openshift-machine-config-operator";

/// The bundled sample without its stand-in ClusterOperator and ClusterVersion CRDs: the
/// shared plane serves the real ones, and `--clean` would delete a payload's CRDs.
fn sample(name: &str) -> PathBuf {
    support::openshift::sample(name)
}

fn options(from: PathBuf, to: PathBuf) -> UpgradeOptions {
    let mut o = UpgradeOptions {
        from,
        to,
        clean: true,
        clean_after: true,
        ..UpgradeOptions::default()
    };
    o.apply.runner.wait_timeout = Duration::from_secs(60);
    o
}

/// The real corpus has no release-metadata and uses OpenShift kinds and namespaces.
fn corpus_options(from: &str, to: &str) -> UpgradeOptions {
    let mut o = options(corpus(from), corpus(to));
    o.from_version = Some("4.13.0".into());
    o.to_version = Some("4.14.0".into());
    o.stub_missing_crds = true;
    o.create_missing_namespaces = true;
    o
}

async fn run(options: UpgradeOptions) -> UpgradeReport {
    let plane = support::fixed_names_plane().await;
    let admin = plane.real_crds().await;
    let report = support::apply::e2e_upgrade(&plane.e2e_clients().await, &options).await;
    eprintln!("{}", report.text());
    support::openshift::assert_real_crds(&admin, "Default").await;
    report
}

fn first<'a>(
    report: &'a UpgradeReport,
    action: TimelineAction,
    kind: &str,
    name: &str,
) -> &'a TimelineEvent {
    report
        .timeline
        .phase(Phase::Upgrade)
        .find(|e| {
            e.action == action && e.object.kind == kind && e.object.name == name && e.succeeded()
        })
        .unwrap_or_else(|| panic!("no upgrade {action} of {kind} {name} in the timeline"))
}

/// When ClusterOperator `name` was first seen reporting `version`.
fn reported(report: &UpgradeReport, name: &str, version: &str) -> f64 {
    let want = format!("operator={version}");
    report
        .timeline
        .phase(Phase::Upgrade)
        .find(|e| {
            e.action == TimelineAction::Observed
                && e.object.kind == "ClusterOperator"
                && e.object.name == name
                && e.detail
                    .as_deref()
                    .is_some_and(|d| d.split(' ').any(|w| w == want))
        })
        .unwrap_or_else(|| panic!("ClusterOperator {name} never observed at {version}"))
        .t
}

/// The executor's invariants (the story check and `live-pods-keep-access` judge the payload).
fn assert_invariants_hold(report: &UpgradeReport) {
    for c in &report.checks {
        if c.name != e2e::STORY_CHECK && c.name != e2e::LIVE_PODS_CHECK {
            assert!(c.passed(), "{}: {:?}", c.title(), c.failures);
        }
    }
}

/// The buggy order: the binding the old operator pod runs with goes first.
fn assert_binding_deleted_before_operator_update(report: &UpgradeReport) {
    assert!(report.completed(), "{}", report.text());
    assert_invariants_hold(report);
    let deleted = first(
        report,
        TimelineAction::Delete,
        "ClusterRoleBinding",
        BINDING,
    );
    let updated = first(
        report,
        TimelineAction::Apply,
        "Deployment",
        "machine-config-operator",
    );
    assert!(
        deleted.t < updated.t,
        "binding deleted at {}, Deployment updated at {}",
        deleted.t,
        updated.t
    );
    let findings = report.story_findings();
    let finding = findings
        .iter()
        .find(|f| f.contains(&format!("ClusterRoleBinding {BINDING} was deleted")))
        .unwrap_or_else(|| panic!("the harness did not report the binding: {findings:?}"));
    assert!(
        finding.contains(&format!(
            "before Deployment {OPERATOR_NS}/machine-config-operator was updated"
        )),
        "{finding}"
    );
    assert!(
        finding.contains("before ClusterOperator machine-config reported 4.14.0"),
        "{finding}"
    );
    assert_old_pod_harmed(report);
    assert!(!report.ok());
}

/// The live pods felt it: the old operator pod, running as `default`, lost its rights to the
/// binding delete while it led, and nobody led until its lease expired.
fn assert_old_pod_harmed(report: &UpgradeReport) {
    let live = report
        .check(None, e2e::LIVE_PODS_CHECK)
        .expect("live-pods-keep-access ran");
    assert!(!live.passed(), "{}", report.text());
    let harm = report
        .timeline
        .events
        .iter()
        .filter_map(|e| e.harm.as_ref().map(|h| (e, h)))
        .find(|(_, h)| h.service_account == format!("{OPERATOR_NS}/default"))
        .unwrap_or_else(|| panic!("no harm of the old operator pod: {}", report.text()));
    assert_eq!(harm.0.action, TimelineAction::Harm);
    assert_eq!(harm.0.object.name, "machine-config-operator");
    assert!(
        harm.1.pod.starts_with("machine-config-operator#"),
        "{:?}",
        harm.1
    );
    let cause = harm.1.cause.as_deref().unwrap_or_default();
    assert!(
        cause.starts_with("delete ClusterRoleBinding") && cause.ends_with(BINDING),
        "{cause}"
    );
    let gap = report
        .lease_gaps
        .iter()
        .find(|g| g.workload.ends_with("/machine-config-operator"))
        .unwrap_or_else(|| panic!("no lease gap: {}", report.text()));
    assert!(gap.seconds > 0.0, "{gap:?}");
}

/// The live pods felt nothing and every handover was immediate.
fn assert_no_harm(report: &UpgradeReport) {
    let live = report
        .check(None, e2e::LIVE_PODS_CHECK)
        .expect("live-pods-keep-access ran");
    assert!(live.passed(), "{:?}", live.failures);
    assert!(report.lease_gaps.is_empty(), "{:?}", report.lease_gaps);
    assert!(
        !report
            .timeline
            .events
            .iter()
            .any(|e| e.action == TimelineAction::Harm)
    );
}

/// The fixed order: the binding goes only after machine-config reports the new version.
fn assert_binding_deleted_after_operator_reports(report: &UpgradeReport) {
    assert!(report.ok(), "{}", report.text());
    let deleted = first(
        report,
        TimelineAction::Delete,
        "ClusterRoleBinding",
        BINDING,
    );
    let updated = first(
        report,
        TimelineAction::Apply,
        "Deployment",
        "machine-config-operator",
    );
    let waited = first(
        report,
        TimelineAction::WaitDone,
        "ClusterOperator",
        "machine-config",
    );
    let reported = reported(report, "machine-config", "4.14.0");
    assert!(updated.t < reported, "{} !< {reported}", updated.t);
    assert!(
        reported <= deleted.t && waited.t <= deleted.t,
        "binding deleted at {}, machine-config reported 4.14.0 at {reported}, wait done at {}",
        deleted.t,
        waited.t
    );
    assert!(report.story_findings().is_empty());
    assert_no_harm(report);
}

#[tokio::test]
async fn upgrade_to_buggy_payload_deletes_binding_before_operator_update() {
    let report = run(options(sample("old"), sample("new-buggy"))).await;
    assert_binding_deleted_before_operator_update(&report);
}

#[tokio::test]
async fn upgrade_to_fixed_payload_deletes_binding_after_clusteroperator_reports() {
    let mut o = options(sample("old"), sample("new"));
    o.assertions = vec![
        format!("delete:ClusterRoleBinding/{BINDING} after wait-done:ClusterOperator/machine-config")
            .parse()
            .unwrap(),
        "apply:Deployment/openshift-machine-config-operator/machine-config-operator before observed:ClusterOperator/machine-config~operator=4.14.0"
            .parse()
            .unwrap(),
    ];
    let report = run(o).await;
    assert_binding_deleted_after_operator_reports(&report);
    let asserted: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.phase.is_none() && c.name != e2e::LIVE_PODS_CHECK)
        .collect();
    assert_eq!(asserted.len(), 2);
    assert!(asserted.iter().all(|c| c.passed()), "{asserted:?}");
}

#[tokio::test]
async fn mco_upgrade_before_fix_deletes_binding_before_operator_update() {
    let report = run(corpus_options("mco-4.13", "mco-before-fix")).await;
    assert_binding_deleted_before_operator_update(&report);
    let deleted = first(
        &report,
        TimelineAction::Delete,
        "ClusterRoleBinding",
        BINDING,
    );
    assert_eq!(deleted.run_level.as_deref(), Some("80"));
}

#[tokio::test]
async fn mco_upgrade_after_fix_deletes_binding_after_clusteroperator_reports() {
    let report = run(corpus_options("mco-4.13", "mco-after-fix")).await;
    assert_binding_deleted_after_operator_reports(&report);
    let deleted = first(
        &report,
        TimelineAction::Delete,
        "ClusterRoleBinding",
        BINDING,
    );
    assert_eq!(deleted.run_level.as_deref(), Some("90"));
    // A kind plain Kubernetes lacks and no payload defines was stubbed, and said so.
    let stubbed: Vec<&str> = report
        .stubs
        .installed
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert!(
        stubbed.contains(&"storageversionmigrations.migration.k8s.io"),
        "{stubbed:?}"
    );
}

#[tokio::test]
async fn openshift_multi_installs_and_upgrades_completely() {
    // Without its ClusterOperator and ClusterVersion CRDs: the real ones are served already,
    // and `--clean` would delete them under the other tests.
    let multi = support::openshift::without_real_crds(&corpus("openshift-multi"));
    let mut o = options(multi.clone(), multi);
    o.from_version = Some("4.16.0".into());
    o.to_version = Some("4.17.0".into());
    o.stub_missing_crds = true;
    o.create_missing_namespaces = true;
    let report = run(o).await;
    assert!(report.ok(), "{}", report.text());
    // Every workload of the corpus lived as simulated pods, unharmed.
    assert_no_harm(&report);
    let install = report.run(Phase::Install).unwrap();
    assert_eq!(install.report.counts.failed, 0);
    assert_eq!(
        install.report.counts.waited, 14,
        "every ClusterOperator waited on"
    );
    assert!(
        install.report.counts.created > 400,
        "{:?}",
        install.report.counts
    );
    let upgrade = report.run(Phase::Upgrade).unwrap();
    assert_eq!(upgrade.report.counts.waited, 14);
    eprintln!(
        "openshift-multi: install {:.2}s / {} requests, upgrade {:.2}s / {} requests, simulator {} requests, {} danger windows",
        install.report.seconds,
        install.report.requests,
        upgrade.report.seconds,
        upgrade.report.requests,
        report.simulator_requests(),
        report.danger_windows.len()
    );
}

/// The upgrade of the samples with machine-config scripted in the upgrade only.
async fn scripted(spec: &str) -> UpgradeReport {
    let mut o = options(sample("old"), sample("new"));
    o.specs = vec![spec.parse().unwrap()];
    o.apply.runner.wait_timeout = Duration::from_secs(3);
    run(o).await
}

fn assert_failed_at_machine_config(report: &UpgradeReport, why: &str) {
    let install = report.run(Phase::Install).expect("install ran");
    assert!(install.report.ok, "the script must not touch the install");
    let upgrade = report.run(Phase::Upgrade).expect("upgrade ran");
    let failure = upgrade.failure().expect("the upgrade fails");
    assert!(
        failure.starts_with("upgrade failed at run-level 80"),
        "{failure}"
    );
    assert!(
        failure.contains("clusteroperator machine-config is not done after --wait-timeout 3.0s"),
        "{failure}"
    );
    assert!(failure.contains(why), "{failure}");
    // The summary line names the failed run, not just the checks.
    let text = report.text();
    let summary = text.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with("FAIL: upgrade run failed, "),
        "{summary}"
    );
    // Run-level 90 never started; run-level 50's operator finished.
    assert!(
        report
            .timeline
            .phase(Phase::Upgrade)
            .all(|e| e.run_level.as_deref() != Some("90") || e.action == TimelineAction::Observed),
        "run-level 90 ran"
    );
    first(
        report,
        TimelineAction::WaitDone,
        "ClusterOperator",
        "example",
    );
    assert!(report.junit().contains("upgrade failed at run-level 80"));
}

#[tokio::test]
async fn never_reporting_operator_fails_the_upgrade_at_its_run_level() {
    let report = scripted("machine-config=never").await;
    assert_failed_at_machine_config(&report, "operator=4.13.0 want 4.14.0");
}

#[tokio::test]
async fn degraded_operator_fails_the_upgrade_at_its_run_level() {
    let report = scripted("machine-config=degraded").await;
    assert_failed_at_machine_config(&report, "Degraded=True: SimulatedDegraded");
}

#[tokio::test]
async fn wrong_version_operator_fails_the_upgrade_at_its_run_level() {
    let report = scripted("machine-config=wrong-version:4.14.1").await;
    assert_failed_at_machine_config(&report, "operator=4.14.1 want 4.14.0");
}

#[tokio::test]
async fn delayed_and_flapping_operators_still_finish() {
    let mut o = options(sample("old"), sample("new"));
    o.specs = vec![
        "machine-config=delay:1s".parse().unwrap(),
        "example=flap:300ms".parse().unwrap(),
    ];
    let report = run(o).await;
    assert!(report.ok(), "{}", report.text());
    let updated = first(
        &report,
        TimelineAction::Apply,
        "Deployment",
        "machine-config-operator",
    );
    let reported = reported(&report, "machine-config", "4.14.0");
    assert!(
        reported - updated.t >= 0.9,
        "machine-config reported {:.3}s after its Deployment was updated, expected the 1s delay",
        reported - updated.t
    );
    // Flapping: example was seen unavailable before it was seen available at 4.14.0.
    let example: Vec<&str> = report
        .timeline
        .phase(Phase::Upgrade)
        .filter(|e| {
            e.action == TimelineAction::Observed
                && e.object.name == "example"
                && e.object.kind == "ClusterOperator"
        })
        .filter_map(|e| e.detail.as_deref())
        .collect();
    let down = example
        .iter()
        .position(|d| d.contains("operator=4.14.0") && d.contains("Available=False"));
    let up = example
        .iter()
        .position(|d| d.contains("operator=4.14.0") && d.contains("Available=True"));
    assert!(
        matches!((down, up), (Some(a), Some(b)) if a < b),
        "{example:?}"
    );
}
