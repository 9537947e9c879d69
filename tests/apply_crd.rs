//! A CRD and a custom resource of it in the same run-level (the same node, one after the
//! other) apply on the first attempt: the CRD task waits for Established and the kind is
//! served from the CRD's spec, so the custom resource needs no retry. In a server dry run the
//! custom resource is reported "not served yet" instead of failing.

mod apply_util;
mod support;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use minicvo::Mode;
use minicvo::apply::{EventKind, Outcome};

fn crd(group: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.{group}
  annotations:
    {inc}: "true"
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer}}
"#,
        inc = apply_util::INCLUDE
    )
}

fn gadget(group: &str, ns: &str) -> String {
    format!(
        "apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: {ns}\n  annotations:\n    {}: \"true\"\nspec:\n  size: 3\n",
        apply_util::INCLUDE
    )
}

#[tokio::test]
async fn crd_and_custom_resource_in_one_run_level_apply_on_the_first_attempt() {
    let conn = apply_util::connection(None).await;
    let admin = support::admin_client().await;
    let ns = support::unique_name("crd-cr");
    let group = format!("{}.minicvo.test", support::unique_name("g"));
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(
        dir.path(),
        "1.0.0",
        &[
            (
                "0000_30_gadgets_00_namespace.yaml".into(),
                apply_util::namespace(&ns),
            ),
            ("0000_30_gadgets_01_crd.yaml".into(), crd(&group)),
            ("0000_30_gadgets_02_cr.yaml".into(), gadget(&group, &ns)),
        ],
    );

    // Dry run first: nothing exists yet, so the custom resource's type is not served.
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let mut dry = apply_util::options();
    dry.runner.dry_run = true;
    let (report, _) = apply_util::run(&conn, plan.clone(), &dry).await;
    assert!(report.ok, "dry run failed: {:#?}", report.errors);
    let cr = report
        .tasks
        .iter()
        .find(|t| t.object.kind == "Gadget")
        .unwrap();
    assert_eq!(cr.outcome, Outcome::NotServed);
    assert_eq!(
        cr.detail.as_deref(),
        Some("type not served yet (CRD created by this plan)")
    );
    assert_eq!(report.counts.created, 2, "{}", report.counts_line());

    let (report, events) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(report.ok, "apply failed: {:#?}", report.errors);
    assert_eq!(report.counts.created, 3, "{}", report.counts_line());
    let retries: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Retrying { .. }))
        .collect();
    assert!(retries.is_empty(), "retries happened: {retries:#?}");
    let cr = report
        .tasks
        .iter()
        .find(|t| t.object.kind == "Gadget")
        .unwrap();
    assert_eq!(cr.outcome, Outcome::Created);
    assert_eq!(
        cr.attempts, 1,
        "the custom resource needed more than one attempt"
    );
    let established = apply_util::find(
        &events,
        |e| matches!(&e.kind, EventKind::CrdEstablished { name, .. } if *name == format!("gadgets.{group}")),
    );
    assert!(established.is_some(), "no CrdEstablished event");

    let gvk = GroupVersionKind::gvk(&group, "v1", "Gadget");
    let api: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    );
    assert_eq!(api.get("g1").await.unwrap().data["spec"]["size"], 3);

    support::delete_namespace(&admin, &ns).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(admin.clone());
    support::delete_quietly(&crds, &format!("gadgets.{group}")).await;
}
