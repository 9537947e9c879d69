//! The CVO's own ordering cases (task_graph_test.go), expressed on our graph.

use super::breaks::{by_number_and_component, flatten_by_number_and_component, shift_order};
use super::graph::{Node, Step, TaskGraph};
use super::*;
use crate::manifest::{ObjectId, Source};

fn task(id: usize, file: &str, kind: &str, api: &str) -> Task {
    let group = api.rsplit_once('/').map_or("", |(g, _)| g).to_string();
    let key = breaks::level_and_component(file);
    Task {
        id,
        manifest: Manifest {
            source: Source::ReleaseManifests,
            file: file.into(),
            document: 0,
            line: 1,
            api_version: api.into(),
            id: ObjectId {
                group,
                kind: kind.into(),
                namespace: None,
                name: format!("n{id}"),
            },
            object: serde_json::json!({}).into(),
        },
        run_level: key.as_ref().map(|k| k.0.clone()),
        component: key.map(|k| k.1),
        action: Action::Apply,
        skip_reason: None,
    }
}

fn tasks(files: &[&str]) -> Vec<Task> {
    files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if let Some(f) = f.strip_prefix("job:") {
                task(i, f, "Job", "batch/v1")
            } else {
                task(i, f, "Pod", "v1")
            }
        })
        .collect()
}

fn keys(files: &[&str]) -> Vec<Option<(String, String)>> {
    files
        .iter()
        .map(|f| breaks::level_and_component(f))
        .collect()
}

/// Steps rendered as file names.
fn names(steps: &[Step], files: &[&str]) -> Vec<Vec<Vec<String>>> {
    steps
        .iter()
        .map(|s| {
            s.iter()
                .map(|n| n.tasks.iter().map(|&t| files[t].to_string()).collect())
                .collect()
        })
        .collect()
}

fn v(x: &[&[&[&str]]]) -> Vec<Vec<Vec<String>>> {
    x.iter()
        .map(|s| {
            s.iter()
                .map(|n| n.iter().map(|t| (*t).to_string()).collect())
                .collect()
        })
        .collect()
}

fn by_number(files: &[&str]) -> Vec<Vec<Vec<String>>> {
    let idx: Vec<usize> = (0..files.len()).collect();
    names(&by_number_and_component(&idx, &keys(files)), files)
}

fn flat(files: &[&str]) -> Vec<Vec<Vec<String>>> {
    let idx: Vec<usize> = (0..files.len()).collect();
    names(&flatten_by_number_and_component(&idx, &keys(files)), files)
}

#[test]
fn run_level_and_component_from_names() {
    assert_eq!(
        breaks::level_and_component("0000_50_cluster-ingress-operator_00-namespace.yaml"),
        Some(("50".into(), "cluster-ingress-operator".into()))
    );
    assert_eq!(
        breaks::level_and_component("0000_03_config-operator_01_proxy.crd.yaml"),
        Some(("03".into(), "config-operator".into()))
    );
    assert_eq!(
        breaks::level_and_component("0000_10_openshift_service-ca_00_namespace.yaml"),
        Some(("10".into(), "openshift".into()))
    );
    assert_eq!(
        breaks::level_and_component("0000_30_00-namespace.yaml"),
        None
    );
    assert_eq!(breaks::level_and_component("a.yaml"), None);
}

#[test]
fn by_number_and_component_cvo_cases() {
    assert!(by_number(&[]).is_empty());
    assert!(by_number(&["a"]).is_empty());
    assert_eq!(by_number(&["a", "b", "c"]), v(&[&[&["a", "b", "c"]]]));
    assert!(by_number(&["0000_01_x-y-z_file1"]).is_empty());
    assert_eq!(
        by_number(&["0000_01_x-y-z_file1", "0000_01_x-y-z_file2"]),
        v(&[&[&["0000_01_x-y-z_file1", "0000_01_x-y-z_file2"]]])
    );
    assert_eq!(
        by_number(&["a", "0000_01_x-y-z_file1", "c"]),
        v(&[&[&["a", "0000_01_x-y-z_file1", "c"]]])
    );
    assert_eq!(
        by_number(&["0000_01_a-b-c_file1", "0000_01_x-y-z_file2"]),
        v(&[&[&["0000_01_a-b-c_file1"], &["0000_01_x-y-z_file2"]]])
    );
    assert_eq!(
        by_number(&[
            "0000_01_abc_f1",
            "0000_01_xyz_f1",
            "0000_01_xyz_f2",
            "a",
            "0000_01_xyz_f2",
            "0000_01_xyz_f3"
        ]),
        v(&[
            &[&["0000_01_abc_f1"], &["0000_01_xyz_f1", "0000_01_xyz_f2"]],
            &[&["a", "0000_01_xyz_f2", "0000_01_xyz_f3"]],
        ])
    );
}

#[test]
fn flatten_cvo_cases() {
    assert!(flat(&[]).is_empty());
    assert!(flat(&["a"]).is_empty());
    assert_eq!(flat(&["a", "b", "c"]), v(&[&[&["a"], &["b"], &["c"]]]));
    assert_eq!(
        flat(&["0000_01_xyz_f1", "0000_01_xyz_f2"]),
        v(&[&[&["0000_01_xyz_f1", "0000_01_xyz_f2"]]])
    );
    assert_eq!(
        flat(&["a", "0000_01_xyz_f1", "c"]),
        v(&[&[&["a"], &["0000_01_xyz_f1"], &["c"]]])
    );
    assert_eq!(
        flat(&[
            "0000_01_abc_f1",
            "0000_01_xyz_f1",
            "0000_01_xyz_f2",
            "a",
            "0000_01_xyz_f2",
            "0000_01_xyz_f3"
        ]),
        v(&[&[
            &["0000_01_abc_f1"],
            &["0000_01_xyz_f1", "0000_01_xyz_f2"],
            &["a"],
            &["0000_01_xyz_f2", "0000_01_xyz_f3"]
        ]])
    );
    assert_eq!(
        flat(&[
            "0000_01_abc_f1",
            "0000_01_xyz_f1",
            "0000_01_xyz_f2",
            "0000_02_xyz_f2",
            "0000_02_xyz_f3"
        ]),
        v(&[&[
            &["0000_01_abc_f1"],
            &["0000_01_xyz_f1", "0000_01_xyz_f2"],
            &["0000_02_xyz_f2", "0000_02_xyz_f3"]
        ]])
    );
}

#[test]
fn run_levels_are_strings_and_never_resorted() {
    // 0000_100_ sorts before 0000_20_ and stays there; "5" and "05" are different levels.
    let files = ["0000_100_a_x", "0000_100_b_x", "0000_20_a_x", "0000_20_b_x"];
    assert_eq!(
        by_number(&files),
        v(&[
            &[&["0000_100_a_x"], &["0000_100_b_x"]],
            &[&["0000_20_a_x"], &["0000_20_b_x"]]
        ])
    );
    let files = ["0000_5_a_x", "0000_05_b_x"];
    assert_eq!(by_number(&files), v(&[&[&["0000_5_a_x", "0000_05_b_x"]]]));
}

#[test]
fn groups_form_only_from_adjacent_tasks() {
    let files = ["0000_50_a_1", "0000_50_b_1", "0000_50_a_2"];
    assert_eq!(
        by_number(&files),
        v(&[&[&["0000_50_a_1"], &["0000_50_b_1"], &["0000_50_a_2"]]])
    );
}

#[test]
fn shift_order_cvo_cases() {
    let step = |n: usize| -> Vec<Step> {
        vec![
            (0..n)
                .map(|i| Node {
                    tasks: vec![i],
                    ..Node::default()
                })
                .collect(),
        ]
    };
    let order = |s: &[Step]| -> Vec<usize> { s[0].iter().map(|n| n.tasks[0]).collect() };
    let mut s = step(2);
    shift_order(&mut s, 0, 8);
    assert_eq!(order(&s), [0, 1]);
    let mut s = step(2);
    shift_order(&mut s, 1, 8);
    assert_eq!(order(&s), [1, 0]);
    let mut s = step(2);
    shift_order(&mut s, 2, 8);
    assert_eq!(order(&s), [0, 1]);
    let mut s = step(3);
    shift_order(&mut s, 1, 2);
    assert_eq!(order(&s), [1, 2, 0]);
    let mut s = step(3);
    shift_order(&mut s, 2, 3);
    assert_eq!(order(&s), [2, 0, 1]);
}

fn split_graph(files: &[&str]) -> TaskGraph {
    let ts = tasks(files);
    let mut g = TaskGraph::new((0..ts.len()).collect());
    g.split(|t| ts[t].manifest.is_job());
    g
}

fn n(ins: &[usize], tasks: &[usize], outs: &[usize]) -> Node {
    Node {
        ins: ins.to_vec(),
        tasks: tasks.to_vec(),
        outs: outs.to_vec(),
    }
}

#[test]
fn split_on_jobs_cvo_cases() {
    assert_eq!(
        split_graph(&["job:j", "p"]).nodes,
        vec![n(&[], &[0], &[1]), n(&[0], &[1], &[])]
    );
    assert_eq!(
        split_graph(&["p", "job:j"]).nodes,
        vec![n(&[1], &[1], &[]), n(&[], &[0], &[0])]
    );
    assert_eq!(
        split_graph(&["p", "p", "job:j", "p"]).nodes,
        vec![
            n(&[1], &[2], &[2]),
            n(&[], &[0, 1], &[0]),
            n(&[0], &[3], &[])
        ]
    );
    assert_eq!(
        split_graph(&["p", "p", "job:j", "p", "job:j", "p"]).nodes,
        vec![
            n(&[1], &[2], &[3]),
            n(&[], &[0, 1], &[0]),
            n(&[3], &[4], &[4]),
            n(&[0], &[3], &[2]),
            n(&[2], &[5], &[]),
        ]
    );
    assert_eq!(
        split_graph(&["job:j", "p", "p", "job:j"]).nodes,
        vec![
            n(&[], &[0], &[2]),
            n(&[2], &[3], &[]),
            n(&[0], &[1, 2], &[1])
        ]
    );
}

fn updating(files: &[&str]) -> TaskGraph {
    build_graph(&tasks(files), Mode::Updating, 0)
}

#[test]
fn task_graph_examples_cvo_cases() {
    assert_eq!(
        updating(&["a", "job:0000_50_a_0"]).nodes,
        vec![n(&[1], &[1], &[]), n(&[], &[0], &[0])]
    );
    assert_eq!(
        updating(&["a", "job:0000_50_a_0", "0000_50_a_1", "0000_50_a_2"]).nodes,
        vec![
            n(&[1], &[1], &[2]),
            n(&[], &[0], &[0]),
            n(&[0], &[2, 3], &[])
        ]
    );
    assert_eq!(
        updating(&["job:a", "0000_50_a_0", "0000_50_b_0", "0000_50_b_1"]).nodes,
        vec![
            n(&[], &[0], &[1]),
            n(&[0], &[], &[2, 3]),
            n(&[1], &[1], &[]),
            n(&[1], &[2, 3], &[])
        ]
    );
    assert_eq!(
        updating(&[
            "job:a",
            "0000_50_a_0",
            "0000_50_b_0",
            "0000_50_b_1",
            "0000_50_c_0",
            "job:b"
        ])
        .nodes,
        vec![
            n(&[], &[0], &[2]),
            n(&[6], &[5], &[]),
            n(&[0], &[], &[3, 4, 5]),
            n(&[2], &[1], &[6]),
            n(&[2], &[2, 3], &[6]),
            n(&[2], &[4], &[6]),
            n(&[3, 4, 5], &[], &[1]),
        ]
    );
    assert_eq!(
        updating(&[
            "0000_07_a_0",
            "0000_08_a_0",
            "0000_09_a_0",
            "0000_09_a_1",
            "0000_09_b_0",
            "0000_09_b_1",
            "0000_10_a_0",
            "0000_10_a_1",
            "0000_11_a_0",
            "0000_11_a_1"
        ])
        .nodes,
        vec![
            n(&[], &[], &[1]),
            n(&[0], &[0, 1], &[2, 3]),
            n(&[1], &[2, 3], &[4]),
            n(&[1], &[4, 5], &[4]),
            n(&[2, 3], &[6, 7, 8, 9], &[]),
        ]
    );
}

#[test]
fn updating_two_parallel_levels_get_a_spacer() {
    let g = updating(&["0000_10_a_0", "0000_10_b_0", "0000_20_a_0", "0000_20_b_0"]);
    // node 0 anchor, 1-2 level 10, 3 spacer, 4-5 level 20.
    assert_eq!(g.nodes[3], n(&[1, 2], &[], &[4, 5]));
    assert!(g.is_acyclic());
}

#[test]
fn reconciling_rotates_the_same_permutation_by_attempt() {
    let files = ["0000_10_a_0", "0000_10_b_0", "0000_10_c_0", "0000_10_d_0"];
    let ts = tasks(&files);
    let order = |attempt| -> Vec<usize> {
        let g = build_graph(&ts, Mode::Reconciling, attempt);
        g.nodes[0]
            .outs
            .iter()
            .map(|&o| g.nodes[o].tasks[0])
            .collect()
    };
    let base = order(0);
    let mut sorted = base.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [0, 1, 2, 3]);
    let mut rotated = base.clone();
    rotated.rotate_left(1);
    assert_eq!(order(1), rotated);
    // Attempt 8 reseeds with seed 1: Go's Shuffle of 4 elements.
    let mut r = go_rand::GoRand::new(1);
    let mut expect = vec![0, 1, 2, 3];
    r.shuffle(4, |i, j| expect.swap(i, j));
    assert_eq!(order(8), expect);
}
