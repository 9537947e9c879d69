//! Property tests: for random payloads, every pair of tasks the plan orders (or leaves
//! unordered) agrees with the CVO's rules, written here independently of the planner, and the
//! graph is acyclic.

use minicvo::Filters;
use minicvo::manifest::{Manifest, ObjectId, Source};
use minicvo::plan::{self, Mode, Plan};
use proptest::prelude::*;

/// One generated task: (run-level, component) or an unmatched name, and whether it is a Job.
#[derive(Debug, Clone)]
struct Spec {
    key: Option<(String, String)>,
    job: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    let level = prop_oneof![Just("00"), Just("05"), Just("10"), Just("100"), Just("5")];
    let comp = prop_oneof![Just("a"), Just("b"), Just("c-d"), Just("e")];
    (
        proptest::option::weighted(0.85, (level, comp)),
        proptest::bool::weighted(0.08),
    )
        .prop_map(|(key, job)| Spec {
            key: key.map(|(l, c)| (l.to_string(), c.to_string())),
            job,
        })
}

fn manifests(specs: &[Spec]) -> Vec<Manifest> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let file = match &s.key {
                Some((l, c)) => format!("0000_{l}_{c}_{i:03}.yaml"),
                None => format!("x{i:03}.yaml"),
            };
            let (api, kind) = if s.job {
                ("batch/v1", "Job")
            } else {
                ("v1", "ConfigMap")
            };
            let group = api.rsplit_once('/').map_or("", |(g, _)| g).to_string();
            Manifest {
                source: Source::ReleaseManifests,
                file,
                document: 0,
                line: 1,
                api_version: api.to_string(),
                id: ObjectId {
                    group,
                    kind: kind.into(),
                    namespace: Some("n".into()),
                    name: format!("t{i}"),
                },
                object: serde_json::json!({}).into(),
            }
        })
        .collect()
}

/// Whether a Job lies in the closed range [a, b].
fn job_between(specs: &[Spec], a: usize, b: usize) -> bool {
    specs[a..=b].iter().any(|s| s.job)
}

/// Block id: maximal runs of adjacent matched tasks with the same key, cut by Jobs.
fn blocks(specs: &[Spec]) -> Vec<usize> {
    let mut ids = Vec::with_capacity(specs.len());
    let mut id = 0;
    for (i, s) in specs.iter().enumerate() {
        if i > 0 {
            let p = &specs[i - 1];
            let same = !s.job && !p.job && s.key.is_some() && s.key == p.key;
            if !same {
                id += 1;
            }
        }
        ids.push(id);
    }
    ids
}

/// Step id (updating mode): maximal runs of adjacent matched tasks with the same run-level,
/// cut by Jobs; a step holding one block is "single-component".
fn steps(specs: &[Spec]) -> Vec<usize> {
    let mut ids = Vec::with_capacity(specs.len());
    let mut id = 0;
    for (i, s) in specs.iter().enumerate() {
        if i > 0 {
            let p = &specs[i - 1];
            let same =
                !s.job && !p.job && matches!((&s.key, &p.key), (Some(a), Some(b)) if a.0 == b.0);
            if !same {
                id += 1;
            }
        }
        ids.push(id);
    }
    ids
}

fn check(specs: &[Spec], p: &Plan, mode: Mode) -> Result<(), TestCaseError> {
    prop_assert!(p.graph.is_acyclic());
    let node_of = p.node_of_task();
    prop_assert!(
        node_of.iter().all(|&n| n != usize::MAX),
        "every task placed"
    );
    let blk = blocks(specs);
    let stp = steps(specs);
    let n = specs.len();
    for a in 0..n {
        for b in a + 1..n {
            let fwd = p.runs_before(a, b);
            let back = p.runs_before(b, a);
            prop_assert!(!back, "{mode}: task {b} runs before earlier task {a}");
            let expected = if job_between(specs, a, b) || blk[a] == blk[b] {
                true
            } else {
                match mode {
                    // Unordered only inside one multi-component run-level step.
                    Mode::Updating => stp[a] != stp[b],
                    Mode::Initializing | Mode::Reconciling => false,
                }
            };
            prop_assert_eq!(
                fwd,
                expected,
                "{} tasks {} and {}: {:?} / {:?}",
                mode,
                a,
                b,
                specs[a],
                specs[b]
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn plans_agree_with_the_cvo_rules(specs in proptest::collection::vec(spec(), 0..40), attempt in 0usize..20) {
        let ms = manifests(&specs);
        for mode in [Mode::Updating, Mode::Initializing, Mode::Reconciling] {
            let p = plan::build_from(None, ms.clone(), &Filters::default(), mode, attempt);
            check(&specs, &p, mode)?;
        }
    }
}
