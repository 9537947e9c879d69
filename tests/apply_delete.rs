//! Deletes (`release.openshift.io/delete: "true"`): issued in updating mode at their place in
//! the plan, skipped in initializing mode, fine when the object is already absent, and
//! tracked to the end when finalizers hold them.

mod apply_util;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use minicvo::Mode;
use minicvo::apply::{EventKind, Outcome};
use serde_json::json;

const DELETE: (&str, &str) = ("release.openshift.io/delete", "true");

fn files(ns: &str) -> Vec<(String, String)> {
    vec![
        (
            "0000_10_setup_00_namespace.yaml".into(),
            apply_util::namespace(ns),
        ),
        (
            "0000_20_app_00_config.yaml".into(),
            apply_util::config_map(ns, "before", "1", &[]),
        ),
        (
            "0000_20_app_01_old.yaml".into(),
            apply_util::config_map(ns, "old", "1", &[DELETE]),
        ),
        (
            "0000_20_app_02_never.yaml".into(),
            apply_util::config_map(ns, "never-existed", "1", &[DELETE]),
        ),
        (
            "0000_30_app_00_config.yaml".into(),
            apply_util::config_map(ns, "after", "1", &[]),
        ),
    ]
}

#[tokio::test]
async fn deletes_run_at_their_plan_position_in_updating_mode() {
    let conn = apply_util::connection(None).await;
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "del-upd").await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let pp = PatchParams::apply("someone-else").force();
    cms.patch(
        "old",
        &pp,
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}}),
        ),
    )
    .await
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "1.0.0", &files(&ns));
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let (report, events) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.deleted, 1, "{}", report.counts_line());
    assert_eq!(report.counts.already_absent, 1, "{}", report.counts_line());
    assert!(cms.get_opt("old").await.unwrap().is_none(), "not deleted");

    // Position: after the task before it in its file order, before run-level 30 starts.
    let pos = |name: &str, finished: bool| {
        apply_util::find(&events, |e| match &e.kind {
            EventKind::TaskStarted { task } if !finished => task.object.name == name,
            EventKind::TaskFinished { task, .. } if finished => task.object.name == name,
            _ => false,
        })
        .unwrap_or_else(|| panic!("no event for {name}"))
        .0
    };
    assert!(pos("before", true) < pos("old", false));
    assert!(pos("old", true) < pos("after", false));
    let confirmed = apply_util::find(
        &events,
        |e| matches!(&e.kind, EventKind::DeleteConfirmed { task } if task.object.name == "old"),
    );
    assert!(confirmed.is_some());
    assert!(report.deletes_in_progress.is_empty());
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn deletes_are_skipped_in_initializing_mode() {
    let conn = apply_util::connection(None).await;
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "del-init").await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    cms.patch(
        "old",
        &PatchParams::apply("someone-else").force(),
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}}),
        ),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "1.0.0", &files(&ns));
    let plan = apply_util::plan(dir.path(), Mode::Initializing);
    let (report, _) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.deletes_skipped, 2, "{}", report.counts_line());
    assert_eq!(report.counts.deleted, 0);
    let skipped = report
        .tasks
        .iter()
        .find(|t| t.object.name == "old")
        .unwrap();
    assert_eq!(skipped.outcome, Outcome::DeleteSkipped);
    assert!(
        skipped
            .detail
            .as_deref()
            .unwrap()
            .contains("only in updating mode"),
        "{skipped:?}"
    );
    assert!(
        cms.get_opt("old").await.unwrap().is_some(),
        "deleted in initializing mode"
    );
    support::delete_namespace(&admin, &ns).await;
}

#[tokio::test]
async fn a_deletion_held_by_a_finalizer_is_reported_in_progress_then_waited_for() {
    let conn = apply_util::connection(None).await;
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "del-fin").await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let held = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "finalizers": ["minicvo.test/hold"]}})
    };
    let pp = PatchParams::apply("holder").force();
    cms.patch("held", &pp, &Patch::Apply(held("held")))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(
        dir.path(),
        "1.0.0",
        &[(
            "0000_20_app_00_held.yaml".into(),
            apply_util::config_map(&ns, "held", "1", &[DELETE]),
        )],
    );
    let plan = apply_util::plan(dir.path(), Mode::Updating);

    // Without --wait-deletes: reported as still in progress.
    let (report, _) = apply_util::run(&conn, plan.clone(), &apply_util::options()).await;
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.deleted, 1);
    assert_eq!(report.deletes_in_progress.len(), 1);
    assert_eq!(report.deletes_in_progress[0].object.name, "held");
    let task = report
        .tasks
        .iter()
        .find(|t| t.object.name == "held")
        .unwrap();
    assert!(
        task.detail
            .as_deref()
            .unwrap()
            .contains("minicvo.test/hold"),
        "{task:?}"
    );

    // With --wait-deletes: the run waits until the finalizer is released.
    let release = {
        let cms = cms.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(800)).await;
            cms.patch(
                "held",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        })
    };
    let mut options = apply_util::options();
    options.wait_deletes = true;
    let (report, events) = apply_util::run(&conn, plan, &options).await;
    release.await.unwrap();
    assert!(report.ok, "{:#?}", report.errors);
    assert!(
        report.deletes_in_progress.is_empty(),
        "{:?}",
        report.deletes_in_progress
    );
    assert!(
        apply_util::find(&events, |e| matches!(
            e.kind,
            EventKind::DeleteConfirmed { .. }
        ))
        .is_some()
    );
    assert!(cms.get_opt("held").await.unwrap().is_none());
    support::delete_namespace(&admin, &ns).await;
}
