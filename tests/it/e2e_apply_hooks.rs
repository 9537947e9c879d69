//! What real payloads need from `apply` beyond the samples, found by the e2e harness: in
//! initializing mode a custom resource may run before its CRD and a namespaced object before
//! its Namespace (the CVO retries; minicvo waits for the parallel task), and a Deployment that
//! switches to `strategy: Recreate` cannot be server-side applied over the defaulted
//! `rollingUpdate`. Unique names: these run in parallel with everything else.

use crate::support;
use crate::support::cli as cli_support;

use std::path::Path;

const INCLUDE: &str =
    "annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"";

fn write(dir: &Path, files: &[(&str, String)]) -> String {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    for (name, text) in files {
        std::fs::write(rm.join(name), text).unwrap();
    }
    dir.display().to_string()
}

fn kubeconfig() -> String {
    std::env::var(support::KUBECONFIG_ENV).expect("MINICVO_TEST_KUBECONFIG is not set")
}

#[tokio::test]
async fn initializing_mode_waits_for_a_parallel_crd_and_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let ns = support::unique_name("early");
    let group = format!("{ns}.example.com");
    // Component "early" (run-level 05) uses what component "late" (run-level 10) creates,
    // second in its node: in initializing mode both nodes start at once.
    let payload = write(
        dir.path(),
        &[
            (
                "0000_05_early_00_cr.yaml",
                format!(
                    "apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g\n  {INCLUDE}\nspec:\n  size: 1\n"
                ),
            ),
            (
                "0000_05_early_01_cm.yaml",
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: {ns}\n  {INCLUDE}\n"
                ),
            ),
            (
                "0000_10_late_00_other.crd.yaml",
                crd(&format!("other{group}"), "Other", "others"),
            ),
            (
                "0000_10_late_01_gadget.crd.yaml",
                crd(&group, "Gadget", "gadgets"),
            ),
            (
                "0000_10_late_02_ns.yaml",
                format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  {INCLUDE}\n"),
            ),
        ],
    );
    let kc = kubeconfig();
    let run = cli_support::minicvo(&[
        "apply",
        &payload,
        "--kubeconfig",
        &kc,
        "--no-progress",
        "--release-version",
        "1.0.0",
        "--mode",
        "initializing",
        "--no-cluster-version",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("5 created"), "{}", run.stdout);

    // In updating mode a CRD ordered after its custom resource cannot come in time: the task
    // fails at once, naming the CRD, instead of waiting.
    let client = support::admin_client().await;
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(client.clone());
    let gadgets = format!("gadgets.{group}");
    let uid = crds.get(&gadgets).await.unwrap().metadata.uid.unwrap();
    for n in [gadgets.clone(), format!("others.other{group}")] {
        support::delete_quietly(&crds, &n).await;
    }
    // Wait for the watch to see it gone.
    let gone = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        kube::runtime::wait::await_condition(
            crds.clone(),
            &gadgets,
            kube::runtime::wait::conditions::is_deleted(&uid),
        ),
    )
    .await;
    assert!(gone.is_ok_and(|r| r.is_ok()), "CRD not deleted");
    let started = std::time::Instant::now();
    let run = cli_support::minicvo(&[
        "apply",
        &payload,
        "--kubeconfig",
        &kc,
        "--no-progress",
        "--release-version",
        "1.0.0",
        "--no-cluster-version",
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("its CRD is in this payload")
            && run
                .stdout
                .contains("has not been established before this task"),
        "{}",
        run.stdout
    );
    assert!(
        started.elapsed().as_secs() < 20,
        "it waited for a CRD that could not come"
    );
    support::delete_namespace(&client, &ns).await;
    for n in [format!("gadgets.{group}"), format!("others.other{group}")] {
        support::delete_quietly(&crds, &n).await;
    }
}

fn crd(group: &str, kind: &str, plural: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
         name: {plural}.{group}\n  {INCLUDE}\nspec:\n  group: {group}\n  names:\n    kind: {kind}\n    \
         plural: {plural}\n  scope: Cluster\n  versions:\n  - name: v1\n    served: true\n    \
         storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        \
         x-kubernetes-preserve-unknown-fields: true\n"
    )
}

fn deployment(ns: &str, strategy: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: {ns}\n  {INCLUDE}\n\
         spec:\n{strategy}  selector: {{matchLabels: {{app: op}}}}\n  template:\n    metadata: {{labels: {{app: op}}}}\n    \
         spec:\n      containers:\n      - name: op\n        image: example.invalid/op:0.0.1-snapshot\n"
    )
}

#[tokio::test]
async fn a_deployment_switches_to_the_recreate_strategy() {
    let client = support::admin_client().await;
    let ns = support::test_namespace(&client, "recreate").await;
    let kc = kubeconfig();
    let old = tempfile::tempdir().unwrap();
    let old = write(
        old.path(),
        &[("0000_50_op_04_deployment.yaml", deployment(&ns, ""))],
    );
    let new = tempfile::tempdir().unwrap();
    let new = write(
        new.path(),
        &[(
            "0000_50_op_04_deployment.yaml",
            deployment(&ns, "  strategy:\n    type: Recreate\n"),
        )],
    );
    for (payload, version, outcome) in [
        (&old, "1.0.0", "1 created"),
        (&new, "2.0.0", "1 configured"),
    ] {
        let run = cli_support::minicvo(&[
            "apply",
            payload,
            "--kubeconfig",
            &kc,
            "--no-progress",
            "--release-version",
            version,
            "--no-cluster-version",
        ]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(outcome), "{}", run.stdout);
    }
    let d: k8s_openapi::api::apps::v1::Deployment = kube::Api::namespaced(client.clone(), &ns)
        .get("op")
        .await
        .unwrap();
    let strategy = d.spec.strategy.unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("Recreate"));
    assert!(strategy.rolling_update.is_none());
    support::delete_namespace(&client, &ns).await;
}
