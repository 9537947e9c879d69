//! minicvo's plan against the plan the real CVO builds, on the real 4.21 and 4.22 releases in
//! `../shared/payloads/`. The expected plans in `tests/fixtures/cvo-plan/` were produced by
//! running the CVO's own code (see the README there): the task list, every node's tasks (in
//! execution order), `in` and `out` lists, and the edges must be identical. Tasks are matched
//! by identity (file, group, kind, namespace, name), so a difference in load order is reported
//! as such and does not hide the graph's differences. No cluster is needed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use minicvo::output::json;
use minicvo::plan::{self, Mode, Plan};
use minicvo::{Filters, LoadOptions, load};
use serde::Deserialize;

use crate::support::corpus;

/// Mismatch lines shown per section before the rest is counted.
const SHOWN: usize = 15;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    source: Source,
    version: String,
    mode: String,
    attempt: usize,
    profile: String,
    #[serde(rename = "featureSet")]
    feature_set: String,
    tasks: Vec<FixtureTask>,
    nodes: Vec<FixtureNode>,
    edges: Vec<[usize; 2]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Source {
    repository: String,
    branch: String,
    commit: String,
}

#[derive(Deserialize, Clone, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
struct FixtureTask {
    file: String,
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

impl std::fmt::Display for FixtureTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = if self.namespace.is_empty() {
            String::new()
        } else {
            format!("{}/", self.namespace)
        };
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        write!(f, "{} {}{group} {ns}{}", self.file, self.kind, self.name)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureNode {
    #[serde(rename = "in")]
    ins: Vec<usize>,
    tasks: Vec<usize>,
    #[serde(rename = "out")]
    outs: Vec<usize>,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cvo-plan")
}

fn read_fixture(name: &str) -> Fixture {
    let path = fixture_dir().join(format!("{name}.json.gz"));
    let gz = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{}: not gzip'd text: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn minicvo_plan(release: &str, mode: Mode, attempt: usize) -> Plan {
    let dir = corpus(release);
    assert!(
        dir.join("release-manifests").is_dir(),
        "the real release {release} is missing: {} has no release-manifests/ (see \
         ../shared/payloads/REAL-4.21-4.22-SOURCES.md)",
        dir.display()
    );
    let payload = load(&dir, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{release} does not load: {e}"));
    plan::build(&payload, &Filters::default(), mode, attempt)
}

/// Identity of minicvo's task `t`, in the fixture's terms.
fn identity(plan: &Plan, t: usize) -> FixtureTask {
    let m = &plan.tasks[t].manifest;
    FixtureTask {
        file: m.file.clone(),
        group: m.id.group.clone(),
        kind: m.id.kind.clone(),
        namespace: m.id.namespace.clone().unwrap_or_default(),
        name: m.id.name.clone(),
    }
}

/// Appends `lines` to `report` under `title`, at most [`SHOWN`] of them.
fn section(report: &mut String, title: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(report, "{title} ({} differences):", lines.len());
    for l in lines.iter().take(SHOWN) {
        let _ = writeln!(report, "  {l}");
    }
    if lines.len() > SHOWN {
        let _ = writeln!(report, "  ... and {} more", lines.len() - SHOWN);
    }
}

/// Every difference between the CVO's plan (`cvo`) and minicvo's (`plan`), empty when equal.
#[allow(clippy::too_many_lines)]
fn differences(cvo: &Fixture, plan: &Plan) -> String {
    let doc = json::plan(plan);
    let mut report = String::new();

    let mut meta = Vec::new();
    if doc["version"] != cvo.version.as_str() {
        meta.push(format!(
            "version: CVO {:?}, minicvo {}",
            cvo.version, doc["version"]
        ));
    }
    if doc["mode"] != cvo.mode.as_str() {
        meta.push(format!("mode: CVO {:?}, minicvo {}", cvo.mode, doc["mode"]));
    }
    if plan.attempt != cvo.attempt {
        meta.push(format!(
            "attempt: CVO {}, minicvo {}",
            cvo.attempt, plan.attempt
        ));
    }
    if doc["profile"] != cvo.profile.as_str() || doc["featureSet"] != cvo.feature_set.as_str() {
        meta.push(format!(
            "profile/feature set: CVO {}/{}, minicvo {}/{}",
            cvo.profile, cvo.feature_set, doc["profile"], doc["featureSet"]
        ));
    }
    section(&mut report, "plan", &meta);

    // Tasks: same identities in the same (load) order.
    let ours: Vec<FixtureTask> = (0..plan.tasks.len()).map(|t| identity(plan, t)).collect();
    let index: HashMap<&FixtureTask, usize> =
        ours.iter().enumerate().map(|(i, t)| (t, i)).collect();
    let theirs: HashMap<&FixtureTask, usize> =
        cvo.tasks.iter().enumerate().map(|(i, t)| (t, i)).collect();
    let mut tasks = Vec::new();
    if ours.len() != cvo.tasks.len() {
        tasks.push(format!(
            "count: CVO {}, minicvo {}",
            cvo.tasks.len(),
            ours.len()
        ));
    }
    for (i, t) in cvo.tasks.iter().enumerate() {
        match index.get(t) {
            None => tasks.push(format!("CVO task {i} not in minicvo's plan: {t}")),
            Some(&j) if j != i => tasks.push(format!("CVO task {i} is minicvo's task {j}: {t}")),
            Some(_) => {}
        }
    }
    for (j, t) in ours.iter().enumerate() {
        if !theirs.contains_key(t) {
            tasks.push(format!("minicvo task {j} not in the CVO's plan: {t}"));
        }
    }
    section(&mut report, "tasks (load order)", &tasks);

    // Nodes: the CVO's task indices translated into minicvo's, then compared as lists.
    let translate = |ts: &[usize]| -> Vec<Option<usize>> {
        ts.iter()
            .map(|&t| index.get(&cvo.tasks[t]).copied())
            .collect()
    };
    let name = |t: Option<usize>| -> String {
        t.map_or("(a task minicvo does not have)".to_string(), |t| {
            format!("task {t} {}", ours[t])
        })
    };
    // Where two task lists first differ.
    let first_difference = |want: &[Option<usize>], have: &[Option<usize>]| -> String {
        let k = want
            .iter()
            .zip(have)
            .position(|(a, b)| a != b)
            .unwrap_or(want.len().min(have.len()));
        let at = |ts: &[Option<usize>]| ts.get(k).map_or("nothing".to_string(), |&t| name(t));
        format!(
            "CVO {} tasks, minicvo {}; first difference at position {k}: CVO {}, minicvo {}",
            want.len(),
            have.len(),
            at(want),
            at(have)
        )
    };
    let mut nodes = Vec::new();
    if plan.graph.nodes.len() != cvo.nodes.len() {
        nodes.push(format!(
            "count: CVO {}, minicvo {}",
            cvo.nodes.len(),
            plan.graph.nodes.len()
        ));
    }
    let doc_nodes = doc["nodes"].as_array().expect("nodes");
    for (i, theirs) in cvo.nodes.iter().enumerate() {
        let Some(node) = plan.graph.nodes.get(i) else {
            nodes.push(format!(
                "node {i} missing in minicvo: CVO has {} tasks",
                theirs.tasks.len()
            ));
            continue;
        };
        let want = translate(&theirs.tasks);
        let have: Vec<Option<usize>> = doc_nodes[i]["tasks"]
            .as_array()
            .expect("node tasks")
            .iter()
            .map(|t| t.as_u64().and_then(|t| usize::try_from(t).ok()))
            .collect();
        if want != have {
            nodes.push(format!(
                "node {i} tasks: {}",
                first_difference(&want, &have)
            ));
        }
        if theirs.ins != node.ins {
            nodes.push(format!(
                "node {i} in: CVO {:?}, minicvo {:?}",
                theirs.ins, node.ins
            ));
        }
        if theirs.outs != node.outs {
            nodes.push(format!(
                "node {i} out: CVO {:?}, minicvo {:?}",
                theirs.outs, node.outs
            ));
        }
    }
    for i in cvo.nodes.len()..plan.graph.nodes.len() {
        nodes.push(format!(
            "node {i} only in minicvo: {} tasks",
            plan.graph.nodes[i].tasks.len()
        ));
    }
    section(&mut report, "nodes", &nodes);

    // Edges, as the plan JSON lists them (node order, then out-edge order).
    let edges: Vec<[usize; 2]> =
        serde_json::from_value(doc["edges"].clone()).expect("edges are pairs");
    let mut lines = Vec::new();
    if edges.len() != cvo.edges.len() {
        lines.push(format!(
            "count: CVO {}, minicvo {}",
            cvo.edges.len(),
            edges.len()
        ));
    }
    for (k, (a, b)) in cvo.edges.iter().zip(&edges).enumerate() {
        if a != b {
            lines.push(format!("edge #{k}: CVO {a:?}, minicvo {b:?}"));
        }
    }
    section(&mut report, "edges", &lines);
    report
}

/// Asserts that minicvo's plan of `release` equals the fixture `<release>-<case>`.
fn check(release: &str, case: &str, mode: Mode, attempt: usize) {
    let name = format!("{release}-{case}");
    let cvo = read_fixture(&name);
    assert_eq!(
        cvo.source.repository, "openshift/cluster-version-operator",
        "{name}: fixture source"
    );
    let plan = minicvo_plan(release, mode, attempt);
    let report = differences(&cvo, &plan);
    assert!(
        report.is_empty(),
        "{name}: minicvo's plan differs from the CVO's ({} {} @ {}: {} tasks, {} nodes, {} \
         edges):\n{report}",
        cvo.source.repository,
        cvo.source.branch,
        cvo.source.commit,
        cvo.tasks.len(),
        cvo.nodes.len(),
        cvo.edges.len()
    );
}

/// Each fixture and the test that checks it.
const CASES: &[(&str, &str, Mode, usize)] = &[
    ("openshift-4.21", "updating", Mode::Updating, 0),
    ("openshift-4.21", "initializing", Mode::Initializing, 0),
    ("openshift-4.21", "reconciling-0", Mode::Reconciling, 0),
    ("openshift-4.21", "reconciling-9", Mode::Reconciling, 9),
    ("openshift-4.22", "updating", Mode::Updating, 0),
    ("openshift-4.22", "initializing", Mode::Initializing, 0),
    ("openshift-4.22", "reconciling-0", Mode::Reconciling, 0),
    ("openshift-4.22", "reconciling-9", Mode::Reconciling, 9),
];

fn case(i: usize) {
    let (release, name, mode, attempt) = CASES[i];
    check(release, name, mode, attempt);
}

#[test]
fn openshift_4_21_updating_equals_the_cvos() {
    case(0);
}

#[test]
fn openshift_4_21_initializing_equals_the_cvos() {
    case(1);
}

#[test]
fn openshift_4_21_reconciling_attempt_0_equals_the_cvos() {
    case(2);
}

#[test]
fn openshift_4_21_reconciling_attempt_9_equals_the_cvos() {
    case(3);
}

#[test]
fn openshift_4_22_updating_equals_the_cvos() {
    case(4);
}

#[test]
fn openshift_4_22_initializing_equals_the_cvos() {
    case(5);
}

#[test]
fn openshift_4_22_reconciling_attempt_0_equals_the_cvos() {
    case(6);
}

#[test]
fn openshift_4_22_reconciling_attempt_9_equals_the_cvos() {
    case(7);
}

#[test]
fn every_fixture_is_checked() {
    let mut on_disk: Vec<String> = std::fs::read_dir(fixture_dir())
        .expect("tests/fixtures/cvo-plan")
        .filter_map(|e| {
            let name = e
                .expect("dir entry")
                .file_name()
                .into_string()
                .expect("utf-8");
            name.strip_suffix(".json.gz").map(str::to_string)
        })
        .collect();
    on_disk.sort();
    let mut checked: Vec<String> = CASES.iter().map(|(r, c, ..)| format!("{r}-{c}")).collect();
    checked.sort();
    assert_eq!(on_disk, checked);
    for (release, name, mode, attempt) in CASES {
        let f = read_fixture(&format!("{release}-{name}"));
        assert_eq!(
            (f.mode.as_str(), f.attempt),
            (&*mode.to_string(), *attempt),
            "{release}-{name}"
        );
    }
}
