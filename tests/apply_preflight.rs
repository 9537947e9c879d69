//! The preflight of `apply::run`: a namespace the payload uses, creates nowhere and the cluster
//! lacks refuses the run before anything is written, naming every such namespace and
//! `--create-missing-namespaces`; with the stand-in allowed, the namespace is created and the
//! run succeeds.

mod apply_util;
mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::Api;
use minicvo::Mode;
use minicvo::apply::{self, ApplyError};
use minicvo::stub_crds::{STUB_NAMESPACE_LABEL, StandIns, StubError};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn missing_namespaces_refuse_the_run_before_anything_is_written() {
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "preflight").await;
    let lacking = support::unique_name("preflight-lacking");
    let created_by_plan = support::unique_name("preflight-created");
    let files = vec![
        (
            "0000_10_a_00_config.yaml".to_string(),
            apply_util::config_map(&ns, "written-first", "1", &[]),
        ),
        (
            "0000_10_a_01_namespace.yaml".to_string(),
            apply_util::namespace(&created_by_plan),
        ),
        (
            "0000_10_a_02_config.yaml".to_string(),
            apply_util::config_map(&created_by_plan, "in-plan-namespace", "1", &[]),
        ),
        (
            "0000_20_b_00_config.yaml".to_string(),
            apply_util::config_map(&lacking, "in-lacking-namespace", "1", &[]),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "4.99.0", &files);
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let conn = apply_util::connection(None).await;

    let options = apply_util::options();
    let refused = apply::run(
        &conn,
        plan.clone(),
        &options,
        std::sync::Arc::new(minicvo::apply::EventLog::new()),
        CancellationToken::new(),
    )
    .await;
    let Err(ApplyError::Preflight(refusal)) = refused else {
        panic!("expected the preflight to refuse the run, got {refused:?}");
    };
    let text = refusal.to_string();
    let StubError::MissingNamespaces(list) = *refusal else {
        panic!("expected missing namespaces, got {refusal:?}");
    };
    assert_eq!(list, vec![lacking.clone()]);
    assert!(text.contains(&lacking), "{text}");
    assert!(text.contains("--create-missing-namespaces"), "{text}");
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    assert!(
        cms.get_opt("written-first").await.unwrap().is_none(),
        "a refused run wrote an object"
    );
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    assert!(
        namespaces
            .get_opt(&created_by_plan)
            .await
            .unwrap()
            .is_none()
    );

    let mut allowed = apply_util::options();
    allowed.preflight = Some(StandIns {
        crds: false,
        namespaces: true,
    });
    let (report, _) = apply_util::run(&conn, plan, &allowed).await;
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.preflight.namespaces, vec![lacking.clone()]);
    let stand_in = namespaces.get(&lacking).await.unwrap();
    assert_eq!(
        stand_in
            .metadata
            .labels
            .unwrap_or_default()
            .get(STUB_NAMESPACE_LABEL)
            .map(String::as_str),
        Some("true")
    );
    let lacking_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &lacking);
    assert!(
        lacking_cms
            .get_opt("in-lacking-namespace")
            .await
            .unwrap()
            .is_some()
    );

    for n in [&ns, &lacking, &created_by_plan] {
        support::delete_namespace(&admin, n).await;
    }
}
