//! Conformance over the real OpenShift payloads in `../shared/payloads/` (read by path).

use std::path::PathBuf;

use minicvo::plan::{self, Action, Mode, Plan};
use minicvo::{Filters, LoadOptions, load};

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/payloads")
        .join(name)
}

fn plan_of(name: &str, mode: Mode) -> Plan {
    let options = LoadOptions::default();
    let payload =
        load(&corpus(name), &options).unwrap_or_else(|e| panic!("{name} does not load: {e}"));
    plan::build(&payload, &Filters::default(), mode, 0)
}

fn find(plan: &Plan, kind: &str, name: &str, action: &Action) -> usize {
    plan.tasks
        .iter()
        .position(|t| {
            t.manifest.id.kind == kind && t.manifest.id.name == name && &t.action == action
        })
        .unwrap_or_else(|| panic!("no {action} task for {kind} {name}"))
}

#[test]
fn every_corpus_payload_loads_and_plans_acyclically() {
    for name in [
        "openshift-multi",
        "mco-before-fix",
        "mco-after-fix",
        "mco-4.13",
        "mco-4.14",
        "mco-4.13-backport-conflict",
    ] {
        for mode in [Mode::Updating, Mode::Initializing, Mode::Reconciling] {
            let p = plan_of(name, mode);
            assert!(!p.tasks.is_empty(), "{name}");
            assert!(p.graph.is_acyclic(), "{name} {mode}");
            let mut seen = vec![0usize; p.tasks.len()];
            for n in &p.graph.nodes {
                for &t in &n.tasks {
                    seen[t] += 1;
                }
            }
            assert!(
                seen.iter().all(|&c| c == 1),
                "{name} {mode}: every task in exactly one node"
            );
        }
    }
}

#[test]
fn openshift_multi_includes_496_manifests_for_the_default_profile() {
    let p = plan_of("openshift-multi", Mode::Updating);
    assert_eq!(p.tasks.len(), 496);
}

#[test]
fn openshift_multi_counts_per_profile() {
    let count = |profile: &str| {
        let options = LoadOptions {
            filters: Filters {
                profile: profile.into(),
                ..Filters::default()
            },
            ..LoadOptions::default()
        };
        load(&corpus("openshift-multi"), &options)
            .unwrap()
            .manifests
            .len()
    };
    assert_eq!(count("single-node-developer"), 323);
    assert_eq!(count("hypershift"), 151);
}

#[test]
fn openshift_multi_service_ca_namespace_without_annotations_is_excluded() {
    let payload = load(&corpus("openshift-multi"), &LoadOptions::default()).unwrap();
    let e = payload
        .excluded
        .iter()
        .find(|e| e.manifest.id.kind == "Namespace" && e.manifest.id.name == "openshift-service-ca")
        .expect("excluded");
    assert_eq!(
        e.reason,
        "include.release.openshift.io/self-managed-high-availability unset"
    );
}

#[test]
fn mco_before_fix_deletes_the_binding_before_the_deployment_update() {
    let p = plan_of("mco-before-fix", Mode::Updating);
    let del = find(
        &p,
        "ClusterRoleBinding",
        "default-account-openshift-machine-config-operator",
        &Action::Delete,
    );
    let dep = find(&p, "Deployment", "machine-config-operator", &Action::Apply);
    assert!(
        p.runs_before(del, dep),
        "delete must run before the Deployment"
    );
    assert_eq!(p.tasks[del].run_level.as_deref(), Some("80"));
}

#[test]
fn mco_after_fix_deletes_the_binding_after_the_cluster_operator_wait() {
    let p = plan_of("mco-after-fix", Mode::Updating);
    let del = find(
        &p,
        "ClusterRoleBinding",
        "default-account-openshift-machine-config-operator",
        &Action::Delete,
    );
    let dep = find(&p, "Deployment", "machine-config-operator", &Action::Apply);
    let co = find(&p, "ClusterOperator", "machine-config", &Action::Wait);
    assert!(p.runs_before(dep, del));
    assert!(
        p.runs_before(co, del),
        "delete must wait for the ClusterOperator"
    );
    assert_eq!(p.tasks[del].run_level.as_deref(), Some("90"));
}

#[test]
fn openshift_multi_updating_keeps_run_levels_as_barriers() {
    let p = plan_of("openshift-multi", Mode::Updating);
    // Any two tasks at different run-levels, both matched, are ordered by load order.
    let leveled: Vec<usize> = (0..p.tasks.len())
        .filter(|&t| p.tasks[t].run_level.is_some())
        .collect();
    for w in leveled.windows(2) {
        let (a, b) = (w[0], w[1]);
        if p.tasks[a].run_level != p.tasks[b].run_level {
            assert!(
                p.runs_before(a, b),
                "{} before {}",
                p.tasks[a].manifest.file,
                p.tasks[b].manifest.file
            );
        }
    }
}

#[test]
fn openshift_multi_initializing_runs_components_in_parallel() {
    let p = plan_of("openshift-multi", Mode::Initializing);
    let busy = p.graph.nodes.iter().filter(|n| !n.tasks.is_empty()).count();
    // One node per contiguous (run-level, component) block, all in one parallel step.
    let mut blocks = 0;
    let mut prev = None;
    for t in &p.tasks {
        let key = (t.run_level.clone(), t.component.clone());
        if prev.as_ref() != Some(&key) {
            blocks += 1;
        }
        prev = Some(key);
    }
    assert_eq!(busy, blocks);
    assert_eq!(
        p.graph.nodes[0].outs.len(),
        blocks,
        "all blocks start together"
    );
    assert_eq!(
        Mode::Initializing.default_parallelism(p.graph.nodes.len()),
        p.graph.nodes.len()
    );
}
