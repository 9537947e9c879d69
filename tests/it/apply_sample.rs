//! The bundled `payload/new` sample, applied without its stand-in ClusterOperator and
//! ClusterVersion CRDs (the real ones are served, see [`support::openshift`]): it succeeds,
//! ClusterVersion `version` records it the CVO way, and a second apply changes nothing (every
//! resourceVersion stays) and reports every object unchanged.

use crate::support;
use crate::support::apply as apply_util;

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use minicvo::Mode;
use minicvo::apply::{ApplyReport, Outcome};
use serde_json::Value;

/// resourceVersion of every object the plan applies, keyed by `Kind ns/name`.
async fn resource_versions(client: &Client, report: &ApplyReport) -> BTreeMap<String, String> {
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("discovery");
    let mut out = BTreeMap::new();
    for t in &report.tasks {
        if !matches!(
            t.outcome,
            Outcome::Created
                | Outcome::Configured
                | Outcome::Unchanged
                | Outcome::CreateOnlySkipped
        ) {
            continue;
        }
        let (ar, caps) = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(ar, _)| ar.kind == t.object.kind)
            .unwrap_or_else(|| panic!("kind {} not served", t.object.kind));
        let api: Api<DynamicObject> = match (&t.object.namespace, caps.scope) {
            (Some(ns), kube::discovery::Scope::Namespaced) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        let o = api.get(&t.object.name).await.expect("object exists");
        out.insert(
            format!(
                "{} {:?}/{}",
                t.object.kind, t.object.namespace, t.object.name
            ),
            o.metadata.resource_version.expect("resourceVersion"),
        );
    }
    out
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition in {status}"))
}

#[tokio::test]
async fn sample_payload_applies_records_clusterversion_and_reapplies_as_a_no_op() {
    // Fixed names (namespaces, ClusterOperators, ClusterVersion `version`) shared with the
    // e2e tests.
    let _lock = support::fixed_names_lock().await;
    let conn = apply_util::connection(None).await;
    let admin = support::openshift::shared_plane_crds().await;
    let root = support::openshift::sample("new");
    let plan = apply_util::plan(&root, Mode::Updating);
    let mut options = apply_util::options();
    options.record_cluster_version = true;

    // Play the operators: once their ClusterOperators exist, report 4.14.0.
    let operators = {
        let admin = admin.clone();
        tokio::spawn(async move {
            apply_util::finish_operator(&admin, "example", "4.14.0").await;
            apply_util::finish_operator(&admin, "machine-config", "4.14.0").await;
        })
    };
    let (first, _) = apply_util::run(&conn, plan.clone(), &options).await;
    operators.await.unwrap();
    assert!(first.ok, "first apply failed: {:#?}", first.errors);
    assert_eq!(first.counts.failed, 0);
    assert_eq!(first.counts.waited, 2);
    assert_eq!(first.cluster_version.as_deref(), Some("recorded"));
    eprintln!(
        "sample apply: {} requests for {} tasks ({:.2} per task), {}",
        first.requests,
        plan.tasks.len(),
        first.requests as f64 / plan.tasks.len() as f64,
        first.counts_line()
    );

    // ClusterVersion `version` did not exist when the first run started: the next run adds
    // its owner reference to the objects (the cvo strategy's default), the one after is a no-op.
    let (owned, _) = apply_util::run(&conn, plan.clone(), &options).await;
    assert!(
        owned.ok,
        "owner-reference apply failed: {:#?}",
        owned.errors
    );
    assert_eq!(owned.counts.created, 0, "{}", owned.counts_line());

    // ClusterVersion `version`: history entry Completed, Progressing False.
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let cvs: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    let cv = cvs.get("version").await.expect("clusterversion version");
    let status = &cv.data["status"];
    assert_eq!(status["history"][0]["version"], "4.14.0");
    assert_eq!(status["history"][0]["state"], "Completed");
    assert!(status["history"][0]["completionTime"].is_string());
    let progressing = condition(status, "Progressing");
    assert_eq!(progressing["status"], "False");
    let message = progressing["message"].as_str().unwrap();
    // The CVO reconciles after a completed pass: "Cluster version is V".
    assert_eq!(message, "Cluster version is 4.14.0");
    assert_eq!(condition(status, "Available")["status"], "True");
    assert_eq!(condition(status, "Failing")["status"], "False");

    // The second apply changes nothing.
    let before = resource_versions(&admin, &first).await;
    let cv_before = cv.metadata.resource_version.clone();
    let (second, _) = apply_util::run(&conn, plan.clone(), &options).await;
    assert!(second.ok, "second apply failed: {:#?}", second.errors);
    let c = &second.counts;
    assert_eq!(
        (c.created, c.configured, c.deleted, c.failed),
        (0, 0, 0, 0),
        "re-apply changed something: {}",
        second.counts_line()
    );
    // 13 objects, the stand-in CRDs of the bundled sample left out.
    assert_eq!(c.unchanged, 11, "{}", second.counts_line());
    assert_eq!(c.create_only_skipped, 1);
    assert_eq!(c.already_absent, 1);
    assert_eq!(c.waited, 2);
    let after = resource_versions(&admin, &second).await;
    assert_eq!(before, after, "a no-op re-apply bumped resourceVersions");
    let cv_after = cvs.get("version").await.unwrap().metadata.resource_version;
    assert_eq!(
        cv_before, cv_after,
        "a no-op re-apply rewrote ClusterVersion"
    );
    eprintln!(
        "no-op re-apply: {} requests for {} tasks ({:.2} per task)",
        second.requests,
        plan.tasks.len(),
        second.requests as f64 / plan.tasks.len() as f64
    );
    support::openshift::assert_real_crds(&admin, "Default").await;
}
