//! What `minicvo apply` leaves compared with what the real CVO leaves, on the objects where the
//! two once differed (a side-by-side install of openshift-multi shaped as a release). Each
//! test runs on a private plane bootstrapped as the comparison was: the real ClusterVersion,
//! ClusterOperator, FeatureGate, APIServer, Proxy and Infrastructure CRDs of openshift-multi,
//! Namespace `openshift-cluster-version`, ClusterVersion `version` with a cluster id and
//! FeatureGate `cluster` listing the release version with no gate enabled; these objects are
//! cluster-wide, so no test shares them.
//!
//! - `openshift_multi_as_a_release_ends_as_the_cvo_leaves_it`: the whole payload, version
//!   4.99.0, the CVO's own files in `manifests/`, installed with the simulator reporting the
//!   ClusterOperators; every row of the comparison is checked, then `diff` finds nothing to
//!   change.
//! - the other tests: one row each, on a small payload.

use crate::support::{self, fault::plane};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const VERSION: &str = "4.99.0";
const INCLUDE: &str = "include.release.openshift.io/self-managed-high-availability";
const CLUSTER_ID: &str = "5b2a3c1e-0000-4000-8000-000000000034";
/// The release image `{{.ReleaseImage}}` renders to (the CVO's Deployment runs it).
const RELEASE_IMAGE: &str = "example.invalid/ocp-release@sha256:0000000000000000000000000000000000000000000000000000000000000034";

/// The real CRDs the bootstrap installs.
const BOOT_CRDS: [&str; 6] = [
    "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
    "0000_10_config-operator_01_featuregates.crd.yaml",
    "0000_10_config-operator_01_apiservers-Default.crd.yaml",
    "0000_03_config-operator_01_proxies.crd.yaml",
    "0000_10_config-operator_01_infrastructures-Default.crd.yaml",
];

/// Namespaces that openshift-multi's objects use and no manifest of it creates (their
/// operators create them in a real cluster).
const OPERATOR_NAMESPACES: [&str; 16] = [
    "openshift",
    "openshift-apiserver",
    "openshift-apiserver-operator",
    "openshift-authentication",
    "openshift-authentication-operator",
    "openshift-console",
    "openshift-console-operator",
    "openshift-image-registry",
    "openshift-ingress-operator",
    "openshift-kube-apiserver",
    "openshift-kube-controller-manager",
    "openshift-kube-scheduler",
    "openshift-marketplace",
    "openshift-oauth-apiserver",
    "openshift-service-ca",
    "openshift-service-ca-operator",
];

fn api(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

fn namespaced(
    client: &Client,
    ns: &str,
    (group, version, kind, plural): (&str, &str, &str, &str),
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

async fn create(api: &Api<DynamicObject>, object: Value) -> Value {
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(object).unwrap(),
        )
        .await
        .expect("bootstrap object created");
    serde_json::to_value(created).unwrap()
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

/// The bootstrap of a real cluster before the CVO runs; returns the ClusterVersion's uid.
async fn bootstrap(client: &Client) -> String {
    for crd in BOOT_CRDS {
        support::install_corpus_crd(client, crd).await;
    }
    let namespaces = api(client, "", "v1", "Namespace", "namespaces");
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "openshift-cluster-version"}}),
    )
    .await;
    let cv = create(
        &api(
            client,
            "config.openshift.io",
            "v1",
            "ClusterVersion",
            "clusterversions",
        ),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"}, "spec": {"clusterID": CLUSTER_ID}}),
    )
    .await;
    let gates = api(
        client,
        "config.openshift.io",
        "v1",
        "FeatureGate",
        "featuregates",
    );
    create(
        &gates,
        json!({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
            "metadata": {"name": "cluster"}, "spec": {}}),
    )
    .await;
    gates
        .patch_status(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"featureGates": [
                {"version": VERSION, "enabled": [], "disabled": []}]}})),
        )
        .await
        .expect("FeatureGate status");
    cv["metadata"]["uid"].as_str().unwrap().to_owned()
}

/// The extra objects openshift-multi needs: the operators' namespaces and a permissive
/// StorageVersionMigration CRD (its operator is not in the corpus).
async fn operator_namespaces_and_migrations(client: &Client) {
    let namespaces = api(client, "", "v1", "Namespace", "namespaces");
    for ns in OPERATOR_NAMESPACES {
        create(
            &namespaces,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    create(
        &api(
            client,
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "storageversionmigrations.migration.k8s.io",
                "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/747"}},
            "spec": {"group": "migration.k8s.io", "scope": "Cluster",
                "names": {"kind": "StorageVersionMigration", "plural": "storageversionmigrations",
                    "singular": "storageversionmigration", "listKind": "StorageVersionMigrationList"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )
    .await;
}

/// openshift-multi as a release image holds it: the CVO's own files in `manifests/`, the
/// rest in `release-manifests/`, with release metadata for [`VERSION`].
fn release_shaped(dir: &Path) -> PathBuf {
    let corpus = support::corpus("openshift-multi/release-manifests");
    let manifests = dir.join("manifests");
    let release = dir.join("release-manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::create_dir_all(&release).unwrap();
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".yaml") {
            continue;
        }
        let to = if name.contains("_cluster-version-operator_") {
            &manifests
        } else {
            &release
        };
        std::fs::copy(entry.path(), to.join(&name)).unwrap();
    }
    std::fs::write(
        release.join("release-metadata"),
        json!({"kind": "cincinnati-metadata-v0", "version": VERSION}).to_string(),
    )
    .unwrap();
    std::fs::write(
        release.join("image-references"),
        json!({"kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
            "metadata": {"name": VERSION}, "spec": {"tags": []}})
        .to_string(),
    )
    .unwrap();
    dir.to_path_buf()
}

fn minicvo() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("minicvo"));
    c.env("NO_COLOR", "1");
    c
}

/// `minicvo simulate` reporting the payload's ClusterOperators until it is killed.
struct Simulator(Child);

impl Simulator {
    fn start(payload: &Path, kubeconfig: &Path) -> Simulator {
        let child = minicvo()
            .arg("simulate")
            .arg(payload)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-q", "--release-image", RELEASE_IMAGE])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("minicvo simulate starts");
        Simulator(child)
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `minicvo ARGS`; returns its exit code, stdout and stderr.
fn run(args: &[&str], payload: &Path, kubeconfig: &Path) -> (i32, String, String) {
    let out = minicvo()
        .args(&args[..1])
        .arg(payload)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(&args[1..])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// FeatureGate `cluster` (create-only in the payloads) is as the bootstrap made it: no
/// annotations, no owner reference.
async fn assert_feature_gate_untouched(client: &Client) {
    let gates = api(
        client,
        "config.openshift.io",
        "v1",
        "FeatureGate",
        "featuregates",
    );
    let fg = get(&gates, "cluster").await.unwrap();
    assert!(fg["metadata"].get("annotations").is_none(), "{fg:#}");
    assert!(fg["metadata"].get("ownerReferences").is_none(), "{fg:#}");
}

/// The `hostPort` of the first port of the first container of Deployment `ns/name`.
async fn first_host_port(client: &Client, ns: &str, name: &str) -> Value {
    let deployments = namespaced(client, ns, ("apps", "v1", "Deployment", "deployments"));
    let d = get(&deployments, name).await.unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["hostPort"].clone()
}

fn controller_owner(cv_uid: &str) -> Value {
    json!([{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "name": "version", "uid": cv_uid, "controller": true}])
}

#[tokio::test]
async fn openshift_multi_as_a_release_ends_as_the_cvo_leaves_it() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    let cv_uid = bootstrap(&client).await;
    operator_namespaces_and_migrations(&client).await;
    let tmp = tempfile::tempdir().unwrap();
    let payload = release_shaped(tmp.path());
    let kc = plane.kubeconfig();

    let simulator = Simulator::start(&payload, &kc);
    let (code, apply_out, apply_err) = run(
        &[
            "apply",
            "--no-progress",
            "--wait-timeout",
            "5m",
            "--release-image",
            RELEASE_IMAGE,
        ],
        &payload,
        &kc,
    );
    drop(simulator);
    assert_eq!(code, 0, "{apply_out}\n{apply_err}");
    // The CVO's templated manifests render (none is skipped).
    assert!(!apply_err.contains("skipped"), "{apply_err}");
    assert!(
        apply_err.contains(&format!(
            "features: feature set Default (FeatureGate cluster); feature gates none enabled \
             (FeatureGate cluster, version {VERSION})"
        )),
        "{apply_err}"
    );

    // Every ClusterOperator is owned by the ClusterVersion, as the CVO's precreation leaves it.
    let operators = api(
        &client,
        "config.openshift.io",
        "v1",
        "ClusterOperator",
        "clusteroperators",
    );
    let list = operators.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 14, "ClusterOperators of the payload");
    for co in &list.items {
        let co = serde_json::to_value(co).unwrap();
        assert_eq!(
            co["metadata"]["ownerReferences"],
            controller_owner(&cv_uid),
            "{}",
            co["metadata"]["name"]
        );
    }

    // The TLS profile of APIServer `cluster` (created by the payload during the run) is
    // injected into the operators' configuration.
    for (ns, name) in [
        (
            "openshift-config-operator",
            "openshift-config-operator-config",
        ),
        ("openshift-etcd-operator", "etcd-operator-config"),
        (
            "openshift-kube-apiserver-operator",
            "kube-apiserver-operator-config",
        ),
        (
            "openshift-kube-controller-manager-operator",
            "kube-controller-manager-operator-config",
        ),
        (
            "openshift-kube-scheduler-operator",
            "openshift-kube-scheduler-operator-config",
        ),
    ] {
        let cm = get(
            &namespaced(&client, ns, ("", "v1", "ConfigMap", "configmaps")),
            name,
        )
        .await
        .unwrap_or_else(|| panic!("ConfigMap {ns}/{name}"));
        let config = cm["data"]["config.yaml"].as_str().unwrap_or_default();
        assert!(
            config.contains("minTLSVersion: VersionTLS12") && config.contains("cipherSuites:"),
            "{ns}/{name}: {config}"
        );
    }

    // Gated manifests stay out: no gate is enabled for this version.
    let crds = api(
        &client,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    for gated in [
        "compatibilityrequirements.apiextensions.openshift.io",
        "clusterapis.operator.openshift.io",
    ] {
        assert!(get(&crds, gated).await.is_none(), "{gated} is gated");
    }
    if get(&crds, "criocredentialproviderconfigs.config.openshift.io")
        .await
        .is_some()
    {
        let crio = api(
            &client,
            "config.openshift.io",
            "v1",
            "CRIOCredentialProviderConfig",
            "criocredentialproviderconfigs",
        );
        assert!(get(&crio, "cluster").await.is_none(), "the gated CR");
    }

    // The create-only FeatureGate that existed is left as it was.
    assert_feature_gate_untouched(&client).await;

    // The typed round trips and the CVO's next pass over what it created.
    let sccs = api(
        &client,
        "security.openshift.io",
        "v1",
        "SecurityContextConstraints",
        "securitycontextconstraints",
    );
    let handler = get(&sccs, "machine-api-termination-handler").await.unwrap();
    assert_eq!(handler["allowPrivilegeEscalation"], json!(true));
    let nested = get(&sccs, "nested-container").await.unwrap();
    assert_eq!(nested["fsGroup"]["ranges"], json!([{"max": 65534}]));
    assert_eq!(
        nested["supplementalGroups"]["ranges"],
        json!([{"max": 65534}])
    );
    assert_eq!(
        first_host_port(
            &client,
            "openshift-cluster-version",
            "cluster-version-operator"
        )
        .await,
        json!(9099)
    );

    // `diff` shows what `apply` left: nothing to change.
    let (code, stdout, stderr) = run(
        &["diff", "--changed-only", "--release-image", RELEASE_IMAGE],
        &payload,
        &kc,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");

    // The CVO's templated manifests are applied.
    let monitoring = |kind, plural| {
        namespaced(
            &client,
            "openshift-cluster-version",
            ("monitoring.coreos.com", "v1", kind, plural),
        )
    };
    for (kind, plural) in [
        ("ServiceMonitor", "servicemonitors"),
        ("PrometheusRule", "prometheusrules"),
    ] {
        assert!(
            get(&monitoring(kind, plural), "cluster-version-operator")
                .await
                .is_some(),
            "{kind} cluster-version-operator\n{apply_out}\n{apply_err}"
        );
    }
}

/// A payload of `docs` (run-level, object; each object gets the profile annotation) in
/// `release-manifests/`, version [`VERSION`].
fn small_payload(dir: &Path, docs: &[(&str, Value)]) -> PathBuf {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm).unwrap();
    for (i, (level, d)) in docs.iter().enumerate() {
        let mut d = d.clone();
        d["metadata"]["annotations"][INCLUDE] = json!("true");
        std::fs::write(
            rm.join(format!("0000_{level}_row_{i:02}.yaml")),
            d.to_string(),
        )
        .unwrap();
    }
    std::fs::write(
        rm.join("release-metadata"),
        json!({"kind": "cincinnati-metadata-v0", "version": VERSION}).to_string(),
    )
    .unwrap();
    dir.to_path_buf()
}

#[tokio::test]
async fn rows_end_as_the_cvo_leaves_them_on_small_payloads() {
    let plane = plane::Plane::start();
    let client = plane.client().await;
    let cv_uid = bootstrap(&client).await;
    support::install_corpus_crd(
        &client,
        "0000_03_config-operator_01_securitycontextconstraints.crd.yaml",
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let kc = plane.kubeconfig();
    let ns = "rows";
    let docs = vec![
        (
            "01",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        ),
        // The payload creates APIServer `cluster` with a profile before the ConfigMap.
        (
            "05",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
            "metadata": {"name": "cluster"},
            "spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}}),
        ),
        (
            "20",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "op-config", "namespace": ns,
                "annotations": {"config.openshift.io/inject-tls": "true"}},
            "data": {"config.yaml": "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\n"}}),
        ),
        (
            "30",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "rows"},
            "spec": {}, "status": {"versions": [{"name": "operator", "version": VERSION}]}}),
        ),
        (
            "50",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gated", "namespace": ns,
                "annotations": {"release.openshift.io/feature-gate": "SomeGate"}}}),
        ),
        (
            "50",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
            "metadata": {"name": "cluster",
                "annotations": {"release.openshift.io/create-only": "true"}},
            "spec": {}}),
        ),
        (
            "50",
            json!({"apiVersion": "security.openshift.io/v1", "kind": "SecurityContextConstraints",
            "metadata": {"name": "rows-scc"},
            "allowHostDirVolumePlugin": false, "allowHostIPC": false, "allowHostNetwork": false,
            "allowHostPID": false, "allowHostPorts": false, "allowPrivilegedContainer": false,
            "readOnlyRootFilesystem": false,
            "fsGroup": {"type": "MustRunAs", "ranges": [{"min": 0, "max": 65534}]},
            "runAsUser": {"type": "RunAsAny"}, "seLinuxContext": {"type": "MustRunAs"},
            "supplementalGroups": {"type": "RunAsAny"}, "users": [], "groups": [],
            "volumes": ["configMap"]}),
        ),
        (
            "50",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "host", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "host"}},
                "template": {"metadata": {"labels": {"app": "host"}},
                    "spec": {"hostNetwork": true, "containers": [{"name": "c",
                        "image": "registry.example/host:1",
                        "ports": [{"name": "metrics", "containerPort": 9099}]}]}}}}),
        ),
    ];
    let payload = small_payload(&tmp.path().join("p"), &docs);

    // `diff` first: it shows the objects as `apply` will leave them.
    let (code, stdout, stderr) = run(&["diff", "-o", "json"], &payload, &kc);
    assert_eq!(code, 1, "changes to show\n{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let diff_of = |name: &str| {
        report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {report:#}"))
            .clone()
    };
    let host = diff_of("host");
    assert_eq!(host["change"], "create");
    assert!(
        host["diff"].as_str().unwrap().contains("hostPort: 9099"),
        "{host:#}"
    );
    let scc = diff_of("rows-scc");
    let scc_diff = scc["diff"].as_str().unwrap();
    assert!(
        scc_diff.contains("allowPrivilegeEscalation: true") && !scc_diff.contains("min: 0"),
        "{scc_diff}"
    );
    let co = diff_of("rows");
    assert!(
        co["diff"].as_str().unwrap().contains(&cv_uid),
        "the precreated operator's owner reference: {co:#}"
    );
    assert!(
        report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["name"] != "gated"),
        "the gated ConfigMap is not in the plan"
    );
    assert!(
        stderr.contains("feature gates none enabled (FeatureGate cluster, version 4.99.0)"),
        "{stderr}"
    );

    // Updating mode: run-levels in order, so the APIServer exists before the ConfigMap.
    let operators = api(
        &client,
        "config.openshift.io",
        "v1",
        "ClusterOperator",
        "clusteroperators",
    );
    let reporter = {
        let operators = operators.clone();
        tokio::spawn(async move {
            // Report the operator once precreation made it.
            loop {
                if operators.get_opt("rows").await.unwrap().is_some() {
                    let status = json!({"status": {"versions": [{"name": "operator", "version": VERSION}],
                        "conditions": [
                            {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                            {"type": "Degraded", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                            {"type": "Progressing", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                    operators
                        .patch_status("rows", &PatchParams::default(), &Patch::Merge(status))
                        .await
                        .unwrap();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let (code, stdout, stderr) = tokio::task::spawn_blocking({
        let payload = payload.clone();
        let kc = kc.clone();
        move || {
            run(
                &[
                    "apply",
                    "--no-progress",
                    "--mode",
                    "updating",
                    "--wait-timeout",
                    "2m",
                ],
                &payload,
                &kc,
            )
        }
    })
    .await
    .unwrap();
    reporter.abort();
    assert_eq!(code, 0, "{stdout}\n{stderr}");

    // ClusterOperator precreation carries the owner reference.
    let co = get(&operators, "rows").await.unwrap();
    assert_eq!(co["metadata"]["ownerReferences"], controller_owner(&cv_uid));
    // The TLS profile the payload created during the run (Modern: TLS 1.3).
    let cm = get(
        &namespaced(&client, ns, ("", "v1", "ConfigMap", "configmaps")),
        "op-config",
    )
    .await
    .unwrap();
    let config = cm["data"]["config.yaml"].as_str().unwrap();
    assert!(config.contains("minTLSVersion: VersionTLS13"), "{config}");
    // The gate is not enabled for this version.
    assert!(
        get(
            &namespaced(&client, ns, ("", "v1", "ConfigMap", "configmaps")),
            "gated"
        )
        .await
        .is_none()
    );
    // The create-only FeatureGate is left as it was.
    assert_feature_gate_untouched(&client).await;
    // The Go round trip of an SCC, and the CVO's next pass over it.
    let scc = get(
        &api(
            &client,
            "security.openshift.io",
            "v1",
            "SecurityContextConstraints",
            "securitycontextconstraints",
        ),
        "rows-scc",
    )
    .await
    .unwrap();
    assert_eq!(scc["fsGroup"]["ranges"], json!([{"max": 65534}]));
    assert_eq!(scc["allowPrivilegeEscalation"], json!(true));
    // The hostPort the CVO's merge defaults for a host-network pod.
    assert_eq!(first_host_port(&client, ns, "host").await, json!(9099));

    // Reconciling mode merges the operator's metadata: a lost owner reference comes back.
    operators
        .patch(
            "rows",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
        )
        .await
        .unwrap();
    let (code, stdout, stderr) = tokio::task::spawn_blocking({
        let payload = payload.clone();
        let kc = kc.clone();
        move || {
            run(
                &["apply", "--no-progress", "--mode", "reconciling"],
                &payload,
                &kc,
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let co = get(&operators, "rows").await.unwrap();
    assert_eq!(co["metadata"]["ownerReferences"], controller_owner(&cv_uid));

    // An explicit --feature-gates wins over the cluster's, and says so.
    let (code, stdout, stderr) = tokio::task::spawn_blocking({
        let payload = payload.clone();
        move || {
            run(
                &[
                    "apply",
                    "--no-progress",
                    "--mode",
                    "updating",
                    "--feature-gates",
                    "SomeGate",
                ],
                &payload,
                &kc,
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("feature gates SomeGate (--feature-gates)"),
        "{stderr}"
    );
    let config_maps = namespaced(&client, ns, ("", "v1", "ConfigMap", "configmaps"));
    assert!(get(&config_maps, "gated").await.is_some());

    // The operator takes them from FeatureGate `cluster` too: its pass leaves the gated
    // ConfigMap out.
    config_maps
        .delete("gated", &Default::default())
        .await
        .unwrap();
    let (log, completed) = operator_pass(tmp.path(), &plane.kubeconfig()).await;
    assert!(completed, "{log}");
    assert!(
        log.contains(&format!(
            "features: feature set Default (FeatureGate cluster); feature gates none enabled \
             (FeatureGate cluster, version {VERSION})"
        )),
        "{log}"
    );
    assert!(get(&config_maps, "gated").await.is_none(), "{log}");
}

/// Runs `minicvo operator` on the payloads under `payloads` until its first pass ends (at most
/// 2 minutes); returns its log and whether the pass completed.
async fn operator_pass(payloads: &Path, kubeconfig: &Path) -> (String, bool) {
    use std::io::BufRead;
    let mut child = minicvo()
        .arg("operator")
        .arg("--payloads")
        .arg(payloads)
        .args([
            "-v",
            "--release",
            VERSION,
            "--no-leader-elect",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("minicvo operator starts");
    let stderr = child.stderr.take().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = tokio::task::spawn_blocking({
        let log = log.clone();
        move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
                if line.contains(&format!("pass of {VERSION} ")) {
                    return line.contains("completed");
                }
            }
            false
        }
    });
    let out = tokio::time::timeout(Duration::from_secs(120), reader).await;
    let _ = child.kill();
    let _ = child.wait();
    let log = log.lock().unwrap().clone();
    match out {
        Ok(completed) => (log, completed.unwrap()),
        Err(_) => (
            format!("{log}the operator's first pass did not end within 2 minutes"),
            false,
        ),
    }
}
