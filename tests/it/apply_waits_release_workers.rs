//! ClusterOperator waits give their worker back: with parallelism 2 and four operators of one
//! run-level that are not done, every node of the run-level gets its manifests applied before
//! any operator reports, and the next run-level starts only once all four are done. Meanwhile
//! ClusterVersion shows what the CVO shows: Failing while the operators are not available,
//! "waiting on …" progress while they update their versions. Precreation writes the
//! manifest's relatedObjects.
//!
//! Runs on a private test plane with the REAL ClusterOperator and ClusterVersion CRDs of
//! openshift-multi (both cluster-wide, and ClusterVersion `version` is a fixed name).

use crate::support;
use crate::support::apply as apply_util;
use crate::support::fault::plane;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use minicvo::Mode;
use minicvo::apply::{self, EventKind};
use serde_json::{Value, json};

const NS: &str = "waits-release";
const OPERATORS: [&str; 4] = ["a-op", "b-op", "c-op", "d-op"];

fn operator_manifest(name: &str) -> String {
    format!(
        "{}  relatedObjects:\n  - group: \"\"\n    resource: namespaces\n    name: {NS}\n",
        apply_util::cluster_operator(name, "2.0.0")
    )
}

fn payload(dir: &std::path::Path) -> std::path::PathBuf {
    let mut files = vec![(
        "0000_05_ns_00_namespace.yaml".to_string(),
        apply_util::namespace(NS),
    )];
    for (c, op) in ["a", "b", "c", "d"].iter().zip(OPERATORS) {
        files.push((
            format!("0000_10_{c}_00_config.yaml"),
            apply_util::config_map(NS, &format!("{c}-config"), "1", &[]),
        ));
        files.push((
            format!("0000_10_{c}_01_clusteroperator.yaml"),
            operator_manifest(op),
        ));
    }
    files.push((
        "0000_20_z_00_after.yaml".to_string(),
        apply_util::config_map(NS, "after", "1", &[]),
    ));
    apply_util::write_payload(dir, "2.0.0", &files)
}

/// Sets an operator's status: Available, not Degraded, at `version`.
async fn report(api: &Api<DynamicObject>, name: &str, version: &str) {
    let t = "2025-01-01T00:00:00Z";
    let status = json!({"status": {
        "versions": [{"name": "operator", "version": version}],
        "conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": t},
            {"type": "Degraded", "status": "False", "lastTransitionTime": t},
            {"type": "Progressing", "status": "False", "lastTransitionTime": t},
        ],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("status of clusteroperator {name}: {e}"));
}

fn condition(cv: &DynamicObject, kind: &str) -> (String, String, String) {
    let c = cv.data["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null);
    let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (f("status"), f("reason"), f("message"))
}

/// Waits (bounded, on a watch) until ClusterVersion `version` has the Failing and
/// Progressing conditions given.
async fn await_cv(
    api: &Api<DynamicObject>,
    what: &str,
    failing: (&str, &str, &str),
    progressing: (&str, &str, &str),
) {
    let want = |c: &(String, String, String), w: (&str, &str, &str)| {
        c.0 == w.0 && c.1 == w.1 && c.2 == w.2
    };
    let matched = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), "version", |cv: Option<&DynamicObject>| {
            cv.is_some_and(|cv| {
                want(&condition(cv, "Failing"), failing)
                    && want(&condition(cv, "Progressing"), progressing)
            })
        }),
    )
    .await;
    if matched.is_err() {
        let cv = api.get("version").await.unwrap();
        panic!(
            "{what}: clusterversion never showed Failing {failing:?} and Progressing \
             {progressing:?}; it shows Failing {:?}, Progressing {:?}",
            condition(&cv, "Failing"),
            condition(&cv, "Progressing")
        );
    }
}

#[tokio::test]
async fn every_node_of_a_run_level_is_applied_before_the_first_operator_reports() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    for crd in [
        "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    ] {
        support::install_corpus_crd(&client, crd).await;
    }
    let tmp = tempfile::tempdir().unwrap();
    let plan = apply_util::plan(&payload(tmp.path()), Mode::Updating);
    let conn = apply::connect(Some(plane.kubeconfig().as_path()), None)
        .await
        .unwrap();
    let mut options = apply_util::options();
    options.parallelism = Some(2);
    options.record_cluster_version = true;

    let operators = apply_util::operators(&client);
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let versions: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);

    let kubectl = {
        let (bin, kubeconfig) = (plane.kubectl(), plane.kubeconfig());
        move || crate::support::openshift::clusterversion_line(&bin, &kubeconfig)
    };
    let watched = apply_util::Watched::new();
    let player = {
        let watched = watched.clone();
        let kubectl = kubectl.clone();
        let (operators, versions, config_maps) =
            (operators.clone(), versions.clone(), config_maps.clone());
        tokio::spawn(async move {
            watched
                .wait_for("all four waits started", |_| {
                    let started = watched
                        .events()
                        .iter()
                        .filter(|e| matches!(e.kind, EventKind::WaitStarted { .. }))
                        .count();
                    started == OPERATORS.len()
                })
                .await;
            // Every node's ConfigMap is there, the next run-level's is not.
            for c in ["a", "b", "c", "d"] {
                assert!(
                    config_maps
                        .get_opt(&format!("{c}-config"))
                        .await
                        .unwrap()
                        .is_some(),
                    "{c}-config was not applied while the operators were waited on"
                );
            }
            assert!(config_maps.get_opt("after").await.unwrap().is_none());
            // Precreation copied the manifest's relatedObjects.
            let op = operators.get("a-op").await.unwrap();
            assert_eq!(
                op.data["status"]["relatedObjects"],
                json!([{"group": "", "resource": "namespaces", "name": NS}])
            );
            // Not available: the CVO fails at once, the four condensed into one error.
            await_cv(
                &versions,
                "operators not available",
                (
                    "True",
                    "ClusterOperatorsNotAvailable",
                    "Cluster operators a-op, b-op, c-op, d-op are not available",
                ),
                (
                    "True",
                    "ClusterOperatorsNotAvailable",
                    "Unable to apply 2.0.0: some cluster operators are not available",
                ),
            )
            .await;
            // Available at the old version: progress, waiting on them.
            for op in OPERATORS {
                report(&operators, op, "1.0.0").await;
            }
            await_cv(
                &versions,
                "operators updating",
                ("False", "", ""),
                (
                    "True",
                    "ClusterOperatorsUpdating",
                    "Working towards 2.0.0: 5 of 10 done (50% complete), waiting on a-op, b-op, c-op, d-op",
                ),
            )
            .await;
            // `kubectl get clusterversion`: no completed version yet (VERSION is empty),
            // AVAILABLE False, PROGRESSING True, the CVO's message.
            let line = kubectl();
            let cols: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(&cols[..3], ["version", "False", "True"], "{line}");
            assert!(
                line.ends_with(
                    "Working towards 2.0.0: 5 of 10 done (50% complete), waiting on a-op, b-op, c-op, d-op"
                ),
                "{line}"
            );
            for op in OPERATORS {
                report(&operators, op, "2.0.0").await;
            }
        })
    };
    let report = apply_util::run_watched(&conn, plan, &options, watched.clone()).await;
    player.await.unwrap();
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.waited, 4);
    assert_eq!(report.cluster_version.as_deref(), Some("recorded"));

    // From the events: every ConfigMap of run-level 10 finished before the first wait ended,
    // and run-level 20 started after the last one.
    let events = watched.events();
    let position = |f: &dyn Fn(&EventKind) -> bool| {
        events
            .iter()
            .enumerate()
            .filter(|(_, e)| f(&e.kind))
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    let first_done = *position(&|k| matches!(k, EventKind::WaitDone { .. }))
        .first()
        .unwrap();
    let last_done = *position(&|k| matches!(k, EventKind::WaitDone { .. }))
        .last()
        .unwrap();
    for c in ["a", "b", "c", "d"] {
        let name = format!("{c}-config");
        let applied = position(
            &|k| matches!(k, EventKind::TaskFinished { task, .. } if task.object.name == name),
        );
        assert!(applied[0] < first_done, "{name} applied after a wait ended");
    }
    let after =
        position(&|k| matches!(k, EventKind::TaskStarted { task } if task.object.name == "after"));
    assert!(
        after[0] > last_done,
        "run-level 20 started before the waits ended"
    );

    // `kubectl get clusterversion` as the CVO shows a completed update.
    let line = kubectl();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[..4], ["version", "2.0.0", "True", "False"], "{line}");
    assert!(line.ends_with("Cluster version is 2.0.0"), "{line}");
}
