//! Both apply strategies side by side on the test control plane, one table of cases: every
//! object is applied by an OLD payload, changed by hand and/or by a NEW payload, and the live
//! object is compared field by field with what each strategy's rule says. One case per rule
//! of the CVO's merge that differs from server-side apply, and one per typed kind (plus the
//! generic rule on a Secret). The OpenShift kinds (OperatorGroup, SecurityContextConstraints
//! with their real CRDs from openshift-multi, ImageStream with a permissive stand-in: the
//! corpus has no CRD for it, OpenShift serves it from an aggregated API server) are in a second
//! test that holds the fixed-names lock, because those CRDs are cluster-wide under their real
//! names.
//!
//! The ClusterVersion owner reference is not exercised here: the run reads ClusterVersion
//! `version` only when it records the ClusterVersion, which the shared plane's tests turn off
//! (an owner reference to a cluster-wide object would let its deletion garbage-collect other
//! tests' objects). The merge's unit tests cover the reference itself.
//!
//! The cases are in one module per family of kinds; the table runner and the tests are here.

mod kinds;
mod openshift;
mod workloads;

use crate::support::{self, apply as apply_util};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use minicvo::Mode;
use minicvo::apply::ApplyStrategy;
use serde_json::{Value, json};
use support::objects::api;
use support::{admin_client, test_namespace, unique_name};

/// Expected value at a JSON pointer of the live object, per strategy (`None`: absent).
struct Check {
    path: &'static str,
    cvo: Option<Value>,
    ssa: Option<Value>,
}

fn both(path: &'static str, v: Value) -> Check {
    Check {
        path,
        cvo: Some(v.clone()),
        ssa: Some(v),
    }
}

fn differ(path: &'static str, cvo: Option<Value>, ssa: Option<Value>) -> Check {
    Check { path, cvo, ssa }
}

/// How a hand edit is sent.
enum Edit {
    Merge(Value),
    Strategic(Value),
}

struct Case {
    rule: &'static str,
    old: Value,
    hand: Option<Edit>,
    new: Value,
    checks: Vec<Check>,
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().expect("name")
}

/// Writes the payload of `objects` (with the include annotation) and applies it in `strategy`.
async fn apply(dir: &std::path::Path, version: &str, objects: &[&Value], strategy: ApplyStrategy) {
    let files: Vec<(String, String)> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut o = (*o).clone();
            o["metadata"]["annotations"][apply_util::INCLUDE] = json!("true");
            (format!("0000_50_case_{i:02}.yaml"), o.to_string())
        })
        .collect();
    let _ = std::fs::remove_dir_all(dir);
    let dir = apply_util::write_payload(dir, version, &files);
    let conn = apply_util::connection(None).await;
    let mut options = apply_util::options();
    options.runner.strategy = strategy;
    let (report, _) =
        apply_util::run(&conn, apply_util::plan(&dir, Mode::Updating), &options).await;
    assert_eq!(
        report.counts.failed, 0,
        "{strategy:?} apply of {version} failed: {:?}",
        report.errors
    );
}

/// OLD, the hand edits, NEW, then every check, in one strategy. Returns the mismatches.
async fn run_table(client: &Client, cases: &[Case], strategy: ApplyStrategy) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let old: Vec<&Value> = cases.iter().map(|c| &c.old).collect();
    apply(&tmp.path().join("old"), "1.0.0", &old, strategy).await;
    for c in cases {
        let Some(edit) = &c.hand else { continue };
        let (params, patch) = match edit {
            Edit::Merge(p) => (PatchParams::default(), Patch::Merge(p.clone())),
            Edit::Strategic(p) => (PatchParams::default(), Patch::Strategic(p.clone())),
        };
        api(client, &c.old)
            .patch(name_of(&c.old), &params, &patch)
            .await
            .unwrap_or_else(|e| panic!("{}: hand edit: {e}", c.rule));
    }
    let new: Vec<&Value> = cases.iter().map(|c| &c.new).collect();
    apply(&tmp.path().join("new"), "2.0.0", &new, strategy).await;
    let mut wrong = Vec::new();
    for c in cases {
        let live = api(client, &c.new)
            .get(name_of(&c.new))
            .await
            .unwrap_or_else(|e| panic!("{}: GET: {e}", c.rule));
        let live = serde_json::to_value(live).unwrap();
        for check in &c.checks {
            let want = match strategy {
                ApplyStrategy::Cvo => &check.cvo,
                ApplyStrategy::ServerSide => &check.ssa,
            };
            let got = live.pointer(check.path);
            if got != want.as_ref() {
                wrong.push(format!(
                    "{strategy:?} {}: {} is {got:?}, want {want:?}",
                    c.rule, check.path
                ));
            }
        }
    }
    wrong
}

fn meta(kind: &str, api_version: &str, ns: Option<&str>, name: &str, extra: Value) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let Some(ns) = ns {
        o["metadata"]["namespace"] = json!(ns);
    }
    for (k, v) in extra.as_object().expect("object") {
        if k == "metadata" {
            for (mk, mv) in v.as_object().expect("metadata") {
                o["metadata"][mk] = mv.clone();
            }
        } else {
            o[k] = v.clone();
        }
    }
    o
}

fn pod(containers: Value, extra: Value) -> Value {
    let mut spec = json!({"containers": containers});
    for (k, v) in extra.as_object().expect("object") {
        spec[k] = v.clone();
    }
    spec
}

fn deployment(ns: &str, name: &str, pod_spec: Value, extra_spec: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    });
    for (k, v) in extra_spec.as_object().expect("object") {
        spec[k] = v.clone();
    }
    meta(
        "Deployment",
        "apps/v1",
        Some(ns),
        name,
        json!({"spec": spec}),
    )
}

fn daemon_set(ns: &str, name: &str, pod_spec: Value, extra_spec: Value) -> Value {
    let mut d = deployment(ns, name, pod_spec, extra_spec);
    d["kind"] = json!("DaemonSet");
    d
}

fn c(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": "registry.example/app:1"});
    for (k, v) in extra.as_object().expect("object") {
        c[k] = v.clone();
    }
    c
}

/// The typed kinds and the generic rule, in namespace `ns` (cluster-scoped names get
/// `suffix`).
fn typed_cases(ns: &str, suffix: &str) -> Vec<Case> {
    let mut cases = workloads::cases(ns);
    cases.extend(kinds::cases(ns, suffix));
    cases
}

impl Check {
    /// The same path, expected absent in both strategies.
    fn none(self) -> Check {
        Check {
            path: self.path,
            cvo: None,
            ssa: None,
        }
    }
}

/// Every typed kind of the plane and the generic rule, both strategies at once (each in its
/// own namespace, cluster-scoped objects with their own names).
#[tokio::test]
async fn each_rule_and_typed_kind_in_both_strategies() {
    let client = admin_client().await;
    let mut guards = Vec::new();
    let mut runs = Vec::new();
    for strategy in [ApplyStrategy::Cvo, ApplyStrategy::ServerSide] {
        let ns = test_namespace(&client, "merge-kinds").await;
        let suffix = unique_name("mk");
        let cases = typed_cases(&ns, &suffix);
        guards.push(ns);
        guards.push(support::NamespaceGuard::adopt(format!("mk-ns-{suffix}")));
        runs.push((strategy, cases, suffix));
    }
    let results = futures::future::join_all(
        runs.iter()
            .map(|(strategy, cases, _)| run_table(&client, cases, *strategy)),
    )
    .await;
    for (_, cases, _) in &runs {
        for c in cases {
            let obj = &c.new;
            if obj["metadata"]["namespace"].is_null() && obj["kind"] != "Namespace" {
                support::delete_quietly(&api(&client, obj), name_of(obj)).await;
            }
        }
    }
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// OperatorGroup and SecurityContextConstraints with the real openshift-multi CRDs, ImageStream
/// with a permissive stand-in, in both strategies. Holds the fixed-names lock: the CRDs are
/// cluster-wide under their real names (the typed merge matches the real group).
#[tokio::test]
async fn openshift_kinds_in_both_strategies() {
    let client = admin_client().await;
    let _lock = support::fixed_names_lock().await;
    support::install_corpus_crd(&client, "0000_50_olm_00-operatorgroups.crd.yaml").await;
    support::install_corpus_crd(
        &client,
        "0000_03_config-operator_01_securitycontextconstraints.crd.yaml",
    )
    .await;
    install_image_stream_stand_in(&client).await;
    let mut guards = Vec::new();
    let mut runs = Vec::new();
    for strategy in [ApplyStrategy::Cvo, ApplyStrategy::ServerSide] {
        let ns = test_namespace(&client, "merge-oskinds").await;
        let suffix = unique_name("mk");
        let cases = openshift::cases(&ns, &suffix);
        guards.push(ns);
        runs.push((strategy, cases));
    }
    let results = futures::future::join_all(
        runs.iter()
            .map(|(strategy, cases)| run_table(&client, cases, *strategy)),
    )
    .await;
    for (_, cases) in &runs {
        for c in cases
            .iter()
            .filter(|c| c.new["kind"] == "SecurityContextConstraints")
        {
            support::delete_quietly(&api(&client, &c.new), name_of(&c.new)).await;
        }
    }
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `imagestreams.image.openshift.io`, permissive (OpenShift serves ImageStream from an
/// aggregated API server; the corpus has no CRD for it). Applied identically by every caller.
async fn install_image_stream_stand_in(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::wait::{await_condition, conditions};
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "imagestreams.image.openshift.io"},
        "spec": {"group": "image.openshift.io", "scope": "Namespaced",
            "names": {"plural": "imagestreams", "singular": "imagestream", "kind": "ImageStream", "listKind": "ImageStreamList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "imagestreams.image.openshift.io",
        &PatchParams::apply("minicvo-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("ImageStream stand-in");
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        await_condition(
            crds,
            "imagestreams.image.openshift.io",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("stand-in established within 60 s")
    .unwrap();
}
