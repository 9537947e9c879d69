//! The classification, on a fake cluster.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::cluster::{LiveCluster, LiveError};
use super::*;
use crate::filter::Filters;
use crate::manifest::{Manifest, ObjectId, Source};
use crate::plan::{Mode, build_from};

/// Live objects by name; namespaces that exist; kinds served.
#[derive(Default)]
struct Fake {
    live: BTreeMap<String, Value>,
    namespaces: BTreeSet<String>,
    unserved: BTreeSet<String>,
}

impl Fake {
    fn check(&self, task: &Task) -> Result<(), LiveError> {
        let m = &task.manifest;
        if self.unserved.contains(&m.id.kind) {
            return Err(LiveError::NotServed(format!(
                "{} {}",
                m.api_version, m.id.kind
            )));
        }
        Ok(())
    }
    fn ns_exists(&self, task: &Task) -> Result<(), LiveError> {
        match &task.manifest.id.namespace {
            Some(ns) if !self.namespaces.contains(ns) => {
                Err(LiveError::NamespaceMissing(ns.clone()))
            }
            _ => Ok(()),
        }
    }
}

impl LiveCluster for Fake {
    async fn get(&self, task: &Task) -> Result<Option<Value>, LiveError> {
        self.check(task)?;
        Ok(self.live.get(&task.manifest.id.name).cloned())
    }
    async fn dry_run_apply(&self, task: &Task) -> Result<Value, LiveError> {
        self.check(task)?;
        self.ns_exists(task)?;
        let mut v = Value::clone(&task.manifest.object);
        v["metadata"]["uid"] = json!("u");
        v["metadata"]["resourceVersion"] = json!("2");
        Ok(v)
    }
    async fn dry_run_create(&self, task: &Task, object: &Value) -> Result<Value, LiveError> {
        self.check(task)?;
        self.ns_exists(task)?;
        let mut v = object.clone();
        v["metadata"]["uid"] = json!("u");
        v["metadata"]["resourceVersion"] = json!("2");
        Ok(v)
    }
}

fn manifest(file: &str, object: Value) -> Manifest {
    let api = object["apiVersion"].as_str().unwrap().to_string();
    Manifest {
        source: Source::ReleaseManifests,
        file: file.into(),
        document: 0,
        line: 1,
        id: ObjectId {
            group: api.rsplit_once('/').map_or("", |(g, _)| g).to_string(),
            kind: object["kind"].as_str().unwrap().into(),
            namespace: object["metadata"]["namespace"].as_str().map(str::to_string),
            name: object["metadata"]["name"].as_str().unwrap().into(),
        },
        api_version: api,
        object: object.into(),
    }
}

fn cm(name: &str, value: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "data": {"k": value}})
}

fn run(fake: &Fake, manifests: Vec<Manifest>) -> (Plan, DiffReport) {
    let plan = build_from(None, manifests, &Filters::default(), Mode::Updating, 0);
    let report = futures::executor::block_on(diff(fake, &plan, 4));
    (plan, report)
}

fn changes(r: &DiffReport) -> Vec<(Change, Option<String>)> {
    r.entries
        .iter()
        .map(|e| (e.change, e.note.clone()))
        .collect()
}

#[test]
fn apply_is_create_change_or_unchanged_against_the_live_object() {
    let mut fake = Fake::default();
    fake.namespaces.insert("ns".into());
    let same = cm("same", "1", json!({}));
    let mut same_live = same.clone();
    same_live["metadata"]["uid"] = json!("u");
    same_live["metadata"]["managedFields"] = json!([{"manager": "minicvo"}]);
    same_live["status"] = json!({});
    fake.live.insert("same".into(), same_live);
    fake.live
        .insert("changed".into(), cm("changed", "old", json!({})));
    let (plan, r) = run(
        &fake,
        vec![
            manifest("0000_50_a_01.yaml", cm("new", "1", json!({}))),
            manifest("0000_50_a_02.yaml", same),
            manifest("0000_50_a_03.yaml", cm("changed", "new", json!({}))),
        ],
    );
    let c: Vec<Change> = r.entries.iter().map(|e| e.change).collect();
    assert_eq!(c, [Change::Create, Change::Unchanged, Change::Change]);
    assert!(r.entries[0].diff.contains("+  k: '1'") || r.entries[0].diff.contains("+  k: \"1\""));
    assert!(
        r.entries[2].diff.contains("-  k: old\n+  k: new\n"),
        "{}",
        r.entries[2].diff
    );
    assert!(r.entries[1].diff.is_empty());
    assert!(r.modifies());
    let text = report::text(&plan, &r, true);
    assert!(
        text.starts_with("3 tasks: 1 create, 1 change, 1 unchanged, 0 delete, 0 skip, 0 error\n")
    );
    assert!(!text.contains("ConfigMap ns/same"), "{text}");
}

#[test]
fn delete_create_only_and_skip() {
    let mut fake = Fake::default();
    fake.namespaces.insert("ns".into());
    fake.live.insert("gone".into(), cm("gone", "1", json!({})));
    fake.live
        .insert("kept".into(), cm("kept", "live", json!({})));
    let del = json!({"release.openshift.io/delete": "true"});
    let (_, r) = run(
        &fake,
        vec![
            manifest("0000_50_a_01.yaml", cm("gone", "1", del.clone())),
            manifest("0000_50_a_02.yaml", cm("never", "1", del)),
            manifest(
                "0000_50_a_03.yaml",
                cm(
                    "kept",
                    "payload",
                    json!({"release.openshift.io/create-only": "true"}),
                ),
            ),
        ],
    );
    assert_eq!(
        changes(&r),
        [
            (Change::Delete, None),
            (Change::Unchanged, Some("already absent".into())),
            (
                Change::Unchanged,
                Some("create-only: the existing object is left alone".into())
            ),
        ]
    );
    assert!(r.entries[0].diff.contains("-kind: ConfigMap"));
}

#[test]
fn kinds_and_namespaces_created_earlier_by_the_plan_are_creates_with_a_note() {
    let mut fake = Fake::default();
    fake.unserved.insert("Widget".into());
    fake.unserved.insert("Gadget".into());
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "names": {"kind": "Widget"}}});
    let widget =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    let gadget =
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}});
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
    let (_, r) = run(
        &fake,
        vec![
            manifest("0000_50_a_00.yaml", crd),
            manifest("0000_50_a_01.yaml", widget),
            manifest("0000_50_a_02.yaml", gadget),
            manifest("0000_50_a_03.yaml", ns),
            manifest("0000_50_a_04.yaml", cm("c", "1", json!({}))),
        ],
    );
    let c = changes(&r);
    assert_eq!(c[1].0, Change::Create);
    assert!(
        c[1].1
            .as_ref()
            .unwrap()
            .contains("created earlier in this plan")
    );
    assert_eq!(c[2].0, Change::Error);
    assert_eq!(
        c[2].1.as_deref(),
        Some("the server does not serve example.com/v1 Gadget")
    );
    assert_eq!(c[4].0, Change::Create);
    assert!(
        c[4].1
            .as_ref()
            .unwrap()
            .starts_with("namespace ns does not exist yet")
    );
    assert!(r.has_errors());
}

#[test]
fn cluster_operator_notes_the_versions_it_waits_for() {
    let mut fake = Fake::default();
    let co = |v: &str| {
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "op"},
            "status": {"versions": [{"name": "operator", "version": v}]}})
    };
    fake.live.insert("op".into(), co("4.13.0"));
    let (_, r) = run(&fake, vec![manifest("0000_50_a_06.yaml", co("4.14.0"))]);
    assert_eq!(
        changes(&r),
        [(
            Change::Unchanged,
            Some("waits until it reports operator 4.14.0".into())
        )]
    );
    assert!(!r.modifies());
    let (_, r) = run(
        &Fake::default(),
        vec![manifest("0000_50_a_06.yaml", co("4.14.0"))],
    );
    assert_eq!(r.entries[0].change, Change::Create);
}

#[test]
fn cvo_strategy_shows_the_merge_and_names_what_is_not_rolled_out() {
    let mut fake = Fake::default();
    fake.namespaces.insert("ns".into());
    let ds = |strategy: &str, image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "ns"},
               "spec": {"selector": {"matchLabels": {"a": "b"}}, "updateStrategy": {"type": strategy},
                        "template": {"spec": {"containers": [{"name": "c", "image": image}],
                                              "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}}}})
    };
    fake.live.insert("ds".into(), ds("OnDelete", "i"));
    // A live ConfigMap with a key the manifest dropped: the CVO keeps it, so nothing changes.
    fake.live.insert(
        "c".into(),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "1", "old": "x"}}),
    );
    let plan = build_from(
        None,
        vec![
            manifest("0000_50_a_01.yaml", ds("RollingUpdate", "j")),
            manifest("0000_50_a_02.yaml", cm("c", "1", json!({}))),
        ],
        &Filters::default(),
        Mode::Updating,
        0,
    );
    let cvo =
        futures::executor::block_on(diff_with(&fake, &plan, 2, crate::apply::ApplyStrategy::Cvo));
    assert_eq!(cvo.entries[0].change, Change::Change);
    assert!(
        cvo.entries[0]
            .diff
            .contains("-        image: i\n+        image: j\n"),
        "{}",
        cvo.entries[0].diff
    );
    assert!(
        !cvo.entries[0].diff.contains("RollingUpdate"),
        "{}",
        cvo.entries[0].diff
    );
    assert_eq!(
        cvo.entries[0].note.as_deref(),
        Some(
            "not rolled out by the CVO: spec.updateStrategy (the CVO never updates this DaemonSet field)"
        )
    );
    assert_eq!(cvo.entries[1].change, Change::Unchanged);
    // The server-side strategy would remove the key and switch the strategy.
    let ssa = futures::executor::block_on(diff_with(
        &fake,
        &plan,
        2,
        crate::apply::ApplyStrategy::ServerSide,
    ));
    assert_eq!(ssa.entries[1].change, Change::Change);
    assert!(ssa.entries[0].diff.contains("RollingUpdate"));
}
