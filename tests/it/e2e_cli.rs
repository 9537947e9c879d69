//! `minicvo e2e upgrade`, `minicvo apply --stub-missing-crds` and `minicvo simulate` as
//! commands on the test control plane: exit codes, the timeline, Chrome trace and JUnit
//! files, and the missing-kinds error.

use crate::support;
use crate::support::cli as cli_support;

use std::path::Path;

use serde_json::Value;

fn kubeconfig() -> String {
    std::env::var(support::KUBECONFIG_ENV).expect("MINICVO_TEST_KUBECONFIG is not set")
}

#[tokio::test]
async fn e2e_upgrade_writes_timeline_trace_and_junit_and_exits_1_on_the_buggy_order() {
    let plane = support::fixed_names_plane().await;
    let dir = tempfile::tempdir().unwrap();
    let file = |n: &str| dir.path().join(n).display().to_string();
    let (timeline, trace, junit) = (file("timeline.json"), file("trace.json"), file("junit.xml"));
    let kc = plane.kubeconfig_arg();
    let admin = plane.real_crds().await;
    let (old, new) = (
        support::openshift::sample("old").display().to_string(),
        support::openshift::sample("new-buggy")
            .display()
            .to_string(),
    );
    let args = [
        "e2e",
        "upgrade",
        "--from",
        &old,
        "--to",
        &new,
        "--kubeconfig",
        &kc,
        "--clean",
        "--cleanup",
        "--no-progress",
        "-q",
        "--timeline",
        &timeline,
        "--trace",
        &trace,
        "--junit",
        &junit,
        "-o",
        "json",
    ];
    let run = cli_support::minicvo(&args);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let summary: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(summary["kind"], "E2eUpgradeResult");
    assert_eq!(summary["completed"], true);
    assert_eq!(summary["ok"], false);

    let tl: Value = serde_json::from_str(&std::fs::read_to_string(&timeline).unwrap()).unwrap();
    let events = tl["events"].as_array().unwrap();
    let ts: Vec<f64> = events.iter().map(|e| e["t"].as_f64().unwrap()).collect();
    assert!(
        ts.windows(2).all(|w| w[0] <= w[1]),
        "timeline not ordered by t"
    );
    for e in events {
        for key in [
            "t",
            "phase",
            "action",
            "group",
            "kind",
            "namespace",
            "name",
            "runLevel",
            "node",
        ] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
    }
    let delete = events
        .iter()
        .find(|e| e["action"] == "delete" && e["phase"] == "upgrade")
        .expect("a delete in the upgrade");
    assert_eq!(delete["kind"], "ClusterRoleBinding");
    assert_eq!(delete["group"], "rbac.authorization.k8s.io");
    assert_eq!(delete["runLevel"], "80");
    for action in ["apply", "wait-start", "wait-done", "observed"] {
        assert!(events.iter().any(|e| e["action"] == action), "no {action}");
    }

    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let tev = trace["traceEvents"].as_array().unwrap();
    assert!(tev.iter().any(|e| e["ph"] == "X"
        && e["name"]
            == "delete ClusterRoleBinding default-account-openshift-machine-config-operator"));
    assert!(tev.iter().any(|e| e["ph"] == "i"));

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(
        xml.contains(
            "<testcase classname=\"minicvo.e2e.upgrade\" name=\"delete-before-workload-update\""
        ),
        "{xml}"
    );
    assert!(xml.contains("<failure message=\"1 finding: ClusterRoleBinding default-account-openshift-machine-config-operator was deleted"), "{xml}");
    assert!(xml.contains("name=\"install completed\""), "{xml}");
    support::openshift::assert_real_crds(&admin, "Default").await;
}

#[tokio::test]
async fn e2e_rejects_a_payload_without_version_and_a_bad_spec() {
    let kc = kubeconfig();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/payloads/mco-4.13");
    let corpus = corpus.display().to_string();
    let run = cli_support::minicvo(&[
        "e2e",
        "upgrade",
        "--from",
        &corpus,
        "--to",
        &corpus,
        "--kubeconfig",
        &kc,
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("has no release-metadata"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("hint: pass --from-version V"),
        "{}",
        run.stderr
    );
    let run = cli_support::minicvo(&[
        "e2e",
        "upgrade",
        "--from",
        "payload/old",
        "--to",
        "payload/new",
        "--simulate",
        "machine-config=sometimes",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("unknown item \"sometimes\""),
        "{}",
        run.stderr
    );
    let run = cli_support::minicvo(&[
        "e2e",
        "upgrade",
        "--from",
        "payload/old",
        "--to",
        "payload/new",
        "--assert",
        "delete:ClusterRoleBinding/x during wait-done:ClusterOperator/y",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("expected after or before"),
        "{}",
        run.stderr
    );
}

/// A payload of two kinds nobody serves, in a group unique to this test.
fn unserved_payload(dir: &Path, group: &str) {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    let ns = support::unique_name("stubs");
    let text = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n    \
         include.release.openshift.io/self-managed-high-availability: \"true\"\n---\n\
         apiVersion: {group}/v1\nkind: Gizmo\nmetadata:\n  name: one\n  namespace: {ns}\n  \
         annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n\
         spec:\n  size: 3\n---\n\
         apiVersion: {group}/v1beta1\nkind: Proxy\nmetadata:\n  name: cluster\n  annotations:\n    \
         include.release.openshift.io/self-managed-high-availability: \"true\"\n\
         spec:\n  anything: [1, 2]\n"
    );
    std::fs::write(rm.join("0000_50_stubs_00.yaml"), text).unwrap();
}

#[tokio::test]
async fn apply_lists_every_unserved_kind_and_stubs_them_with_the_flag() {
    // `e2e upgrade --clean` (other tests) deletes every stub CRD on the cluster.
    let plane = support::fixed_names_plane().await;
    let dir = tempfile::tempdir().unwrap();
    let group = format!("{}.example.com", support::unique_name("stubs"));
    unserved_payload(dir.path(), &group);
    let payload = dir.path().display().to_string();
    let kc = plane.kubeconfig_arg();

    let args = [
        "apply",
        &payload,
        "--kubeconfig",
        &kc,
        "--no-progress",
        "--mode",
        "updating",
        "--release-version",
        "1.0.0",
    ];
    let run = cli_support::minicvo(&args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("does not serve 2 kinds"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&format!("{group}/v1 Gizmo (1 manifest")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("{group}/v1beta1 Proxy")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--stub-missing-crds"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "nothing was applied: {}", run.stdout);

    let mut args = args.to_vec();
    args.push("--stub-missing-crds");
    let run = cli_support::minicvo(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains(&format!("stub CRD gizmos.{group} installed")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&format!("stub CRD proxies.{group} installed")),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("3 created"), "{}", run.stdout);

    // The stub is permissive, namespaced where the manifests are, with a status subresource.
    let client = plane.admin_client().await;
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(client.clone());
    let gizmos = crds.get(&format!("gizmos.{group}")).await.unwrap();
    assert_eq!(gizmos.spec.scope, "Namespaced");
    assert!(
        gizmos.spec.versions[0]
            .subresources
            .as_ref()
            .unwrap()
            .status
            .is_some()
    );
    let proxies = crds.get(&format!("proxies.{group}")).await.unwrap();
    assert_eq!(proxies.spec.scope, "Cluster");
    assert_eq!(proxies.spec.versions[0].name, "v1beta1");

    // Again: nothing missing any more, nothing changes.
    let run = cli_support::minicvo(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("stub CRD"), "{}", run.stderr);
    assert!(run.stdout.contains("0 created"), "{}", run.stdout);

    for n in [format!("gizmos.{group}"), format!("proxies.{group}")] {
        support::delete_quietly(&crds, &n).await;
    }
}

#[tokio::test]
async fn simulate_reports_a_clusteroperator_once_its_deployment_carries_the_payload() {
    // It records ClusterVersion `version`, shared with the fixed-name tests.
    let plane = support::fixed_names_plane().await;
    let client = plane.real_crds().await;
    // A one-operator payload with unique names: namespace, Deployment, ClusterOperator.
    let dir = tempfile::tempdir().unwrap();
    let name = support::unique_name("simop");
    let rm = dir.path().join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    let inc =
        "annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"";
    std::fs::write(
        rm.join(format!("0000_50_{name}_00_ns.yaml")),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  {inc}\n"),
    )
    .unwrap();
    std::fs::write(
        rm.join(format!("0000_50_{name}_04_deployment.yaml")),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: {name}\n  {inc}\n\
             spec:\n  selector: {{matchLabels: {{app: op}}}}\n  template:\n    metadata: {{labels: {{app: op}}}}\n    \
             spec:\n      containers:\n      - name: op\n        image: example.invalid/op:0.0.1-snapshot\n"
        ),
    )
    .unwrap();
    std::fs::write(
        rm.join(format!("0000_50_{name}_06_co.yaml")),
        format!(
            "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: {name}\n  {inc}\n\
             spec: {{}}\nstatus:\n  versions:\n  - name: operator\n    version: 0.0.1-snapshot\n"
        ),
    )
    .unwrap();
    let payload = dir.path().display().to_string();
    let kc = plane.kubeconfig_arg();
    // The simulator runs in the background; apply waits until it reports 2.0.0.
    let mut sim = cli_support::command(&[
        "simulate",
        &payload,
        "--kubeconfig",
        &kc,
        "--release-version",
        "2.0.0",
    ])
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let run = cli_support::minicvo(&[
        "apply",
        &payload,
        "--kubeconfig",
        &kc,
        "--no-progress",
        "--mode",
        "updating",
        "--release-version",
        "2.0.0",
        "--wait-timeout",
        "30s",
    ]);
    let _ = sim.kill();
    let out = sim.wait_with_output().unwrap();
    let sim_log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        run.code, 0,
        "{}\n{}\nsimulator:\n{sim_log}",
        run.stdout, run.stderr
    );
    assert!(run.stdout.contains("1 waited"), "{}", run.stdout);
    assert!(
        sim_log.contains(&format!(
            "clusteroperator {name}: reported operator=2.0.0 Available=True"
        )),
        "{sim_log}"
    );
    support::delete_namespace(&client, &name).await;
    let co = kube::api::ApiResource {
        group: "config.openshift.io".into(),
        version: "v1".into(),
        api_version: "config.openshift.io/v1".into(),
        kind: "ClusterOperator".into(),
        plural: "clusteroperators".into(),
    };
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &co);
    support::delete_quietly(&api, &name).await;
    support::openshift::assert_real_crds(&client, "Default").await;
}
