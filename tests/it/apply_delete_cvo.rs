//! Deletes as the CVO does them: the server's default propagation (a Job's dependents are
//! orphaned, not deleted), a kind the server does not serve fails the task with the CVO's
//! words (a typed kind counts as absent), and a `release.openshift.io/delete` value other
//! than `"true"` fails the task and applies nothing. Each test in its own namespace.

use crate::support;
use crate::support::apply as apply_util;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use minicvo::Mode;
use minicvo::apply::Outcome;
use serde_json::json;

const DELETE: &str = "release.openshift.io/delete";

fn payload(dir: &std::path::Path, files: &[(&str, String)]) -> std::path::PathBuf {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(n, t)| ((*n).to_string(), t.clone()))
        .collect();
    apply_util::write_payload(dir, "1.0.0", &files)
}

#[tokio::test]
async fn a_delete_uses_the_servers_default_propagation_and_a_job_orphans_its_dependents() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "delete-propagation").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns.as_str());
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "old-job"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "example.invalid/none"}]}}},
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.as_str());
    let dependent: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "dependent", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "old-job",
            "uid": job.metadata.uid.clone().unwrap()}]},
        "data": {"k": "v"},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();

    let manifest = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: old-job\n  namespace: {}\n  annotations:\n    {}: \"true\"\n    {DELETE}: \"true\"\n",
        ns.as_str(),
        apply_util::INCLUDE
    );
    let tmp = tempfile::tempdir().unwrap();
    let plan = apply_util::plan(
        &payload(tmp.path(), &[("0000_50_app_00_job.yaml", manifest)]),
        Mode::Updating,
    );
    let conn = apply_util::connection(None).await;
    let mut options = apply_util::options();
    options.wait_deletes = true;
    let (report, _) = apply_util::run(&conn, plan, &options).await;
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.deleted, 1);
    assert!(
        report.deletes_in_progress.is_empty(),
        "{:?}",
        report.deletes_in_progress
    );
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(jobs.clone(), "old-job", conditions::is_deleted("")),
    )
    .await
    .expect("the job is gone")
    .unwrap();
    // Orphaned (the Job's default), not deleted in the background: the dependent stays,
    // without its owner reference.
    let left = config_maps
        .get_opt("dependent")
        .await
        .unwrap()
        .expect("the dependent was deleted: the delete did not use the Job's default (orphan)");
    assert!(
        left.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty),
        "{:?}",
        left.metadata.owner_references
    );
}

#[tokio::test]
async fn deleting_a_kind_the_server_does_not_serve_fails_with_the_cvos_words() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "delete-unserved").await;
    let widget = format!(
        "apiVersion: example.invalid/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: {}\n  annotations:\n    {}: \"true\"\n    {DELETE}: \"true\"\n",
        ns.as_str(),
        apply_util::INCLUDE
    );
    // A kind the CVO deletes through a typed client: its GET answers 404, so it is absent.
    let stream = format!(
        "apiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata:\n  name: s\n  namespace: {}\n  annotations:\n    {}: \"true\"\n    {DELETE}: \"true\"\n",
        ns.as_str(),
        apply_util::INCLUDE
    );
    let tmp = tempfile::tempdir().unwrap();
    let plan = apply_util::plan(
        &payload(
            tmp.path(),
            &[
                ("0000_50_a_00_widget.yaml", widget),
                ("0000_50_b_00_stream.yaml", stream),
            ],
        ),
        Mode::Updating,
    );
    let conn = apply_util::connection(None).await;
    let (report, _) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(!report.ok);
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    assert_eq!(report.errors[0].object.kind, "Widget");
    assert_eq!(
        report.errors[0].message,
        "no matches for kind \"Widget\" in version \"example.invalid/v1\": the server does not \
         recognize this resource, check extension API servers"
    );
    let stream = report
        .tasks
        .iter()
        .find(|t| t.object.kind == "ImageStream")
        .unwrap();
    assert_eq!(stream.outcome, Outcome::AlreadyAbsent);
    assert_eq!(
        stream.detail.as_deref(),
        Some(
            format!(
                "imagestream \"{}/s\" not found. It either has already been removed or it has never been installed on this cluster.",
                ns.as_str()
            )
            .as_str()
        )
    );
}

#[tokio::test]
async fn a_delete_annotation_other_than_true_fails_and_applies_nothing() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "delete-invalid").await;
    let tmp = tempfile::tempdir().unwrap();
    let plan = apply_util::plan(
        &payload(
            tmp.path(),
            &[(
                "0000_50_app_00_config.yaml",
                apply_util::config_map(ns.as_str(), "maybe", "1", &[(DELETE, "yes")]),
            )],
        ),
        Mode::Updating,
    );
    let conn = apply_util::connection(None).await;
    let (report, _) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(!report.ok);
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    assert_eq!(
        report.errors[0].message,
        "invalid delete annotation \"release.openshift.io/delete\" value: \"yes\""
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.as_str());
    assert!(config_maps.get_opt("maybe").await.unwrap().is_none());
}
