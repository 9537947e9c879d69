//! Checks over a recorded timeline. Each check passes or lists its findings.
//!
//! Invariants, per phase (the executor must never break them):
//! - `waits-block-later-tasks`: no task starts before every ClusterOperator wait the plan
//!   orders before it completed (in updating mode: the waits of earlier run-levels).
//! - `deletes-at-plan-position`: every delete ran after all tasks the plan orders before it
//!   finished and before any task the plan orders after it started; no delete is issued
//!   outside updating mode.
//! - `no-apply-and-delete`: no object is both applied and deleted in one run.
//!
//! The story check, on the upgrade (what machine-config-operator's fix 7530ded862b3 is about):
//! - `delete-before-workload-update`: an object that a workload of the OLD payload uses (its
//!   ServiceAccount, a binding naming that account and its role, mounted or referenced
//!   ConfigMaps and Secrets) is deleted before that workload was updated, or before the
//!   ClusterOperator of the workload's component reported the new version. The old pods
//!   still run then, and lose what they use.

use std::collections::{BTreeSet, HashMap};

use super::assertion::Assertion;
use super::timeline::{Phase, Timeline, TimelineAction, TimelineEvent};
use crate::analysis::placement::Placements;
use crate::analysis::references::{binding_uses, direct_uses, is_binding, is_workload};
use crate::manifest::{Manifest, ObjectId};
use crate::plan::{Mode, Plan};
use crate::simulate;

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The phase checked (`None`: the whole run).
    pub phase: Option<Phase>,
    /// Short name, e.g. `waits-block-later-tasks`.
    pub name: String,
    /// What it checks, in one sentence.
    pub description: String,
    /// Findings; empty when the check passed.
    pub failures: Vec<String>,
    /// What was checked (times), for passing checks.
    pub notes: Vec<String>,
}

impl Check {
    pub(crate) fn new(phase: Option<Phase>, name: &str, description: &str) -> Self {
        Check {
            phase,
            name: name.into(),
            description: description.into(),
            failures: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Whether there are no findings.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// `phase: name` or `name`.
    #[must_use]
    pub fn title(&self) -> String {
        match self.phase {
            Some(p) => format!("{p}: {}", self.name),
            None => self.name.clone(),
        }
    }
}

/// The name of the story check.
pub const STORY_CHECK: &str = "delete-before-workload-update";

/// Start and end of one task in a phase.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: f64,
    end: f64,
    ok: bool,
}

fn spans(timeline: &Timeline, phase: Phase) -> HashMap<usize, Span> {
    let mut out: HashMap<usize, Span> = HashMap::new();
    for e in timeline.phase(phase) {
        let Some(task) = e.task else { continue };
        match e.action {
            TimelineAction::Apply | TimelineAction::Delete | TimelineAction::WaitDone => {
                out.insert(
                    task,
                    Span {
                        start: e.start.unwrap_or(e.t),
                        end: e.t,
                        ok: e.succeeded(),
                    },
                );
            }
            TimelineAction::WaitStart | TimelineAction::Observed | TimelineAction::Harm => {}
        }
    }
    out
}

fn label(plan: &Plan, task: usize) -> String {
    let t = &plan.tasks[task];
    let level = t
        .run_level
        .as_deref()
        .map_or_else(String::new, |l| format!(" (run-level {l})"));
    format!("{} {}{level}", t.action, t.manifest.id)
}

/// The three invariants of one phase run with `plan`.
#[must_use]
pub fn invariants(timeline: &Timeline, phase: Phase, plan: &Plan) -> Vec<Check> {
    let spans = spans(timeline, phase);
    let places = Placements::new(plan);
    let mut ran: Vec<usize> = spans.keys().copied().collect();
    ran.sort_unstable();

    let mut waits = Check::new(
        Some(phase),
        "waits-block-later-tasks",
        "no task starts before every ClusterOperator wait ordered before it completed",
    );
    let wait_tasks: Vec<usize> = plan
        .tasks
        .iter()
        .filter(|t| t.action == crate::plan::Action::Wait)
        .map(|t| t.id)
        .collect();
    let mut pairs = 0usize;
    for &w in &wait_tasks {
        for &x in &ran {
            if x == w || !places.runs_before(plan, w, x) {
                continue;
            }
            pairs += 1;
            let sx = spans[&x].start;
            match spans.get(&w) {
                Some(sw) if sw.ok && sw.end <= sx => {}
                Some(sw) if sw.ok => waits.failures.push(format!(
                    "{} started at {sx:.3}s, before {} completed at {:.3}s",
                    label(plan, x),
                    label(plan, w),
                    sw.end
                )),
                _ => waits.failures.push(format!(
                    "{} started at {sx:.3}s, but {} never completed",
                    label(plan, x),
                    label(plan, w)
                )),
            }
        }
    }
    waits.notes.push(format!(
        "{} waits, {pairs} (wait, later task) pairs checked",
        wait_tasks.len()
    ));

    let mut deletes = Check::new(
        Some(phase),
        "deletes-at-plan-position",
        "every delete runs after the tasks ordered before it and before the tasks ordered after it",
    );
    for e in timeline.phase(phase).filter(|e| e.is_delete_issued()) {
        let Some(d) = e.task else { continue };
        if plan.mode != Mode::Updating {
            deletes.failures.push(format!(
                "{} was issued at {:.3}s in {} mode; deletes belong to updating mode only",
                label(plan, d),
                e.t,
                plan.mode
            ));
            continue;
        }
        let sd = spans[&d];
        let mut before = 0;
        let mut after = 0;
        for &x in &ran {
            if x == d {
                continue;
            }
            let sx = spans[&x];
            if places.runs_before(plan, x, d) {
                before += 1;
                if sx.end > sd.start {
                    deletes.failures.push(format!(
                        "{} started at {:.3}s, before {} (ordered before it) finished at {:.3}s",
                        label(plan, d),
                        sd.start,
                        label(plan, x),
                        sx.end
                    ));
                }
            } else if places.runs_before(plan, d, x) {
                after += 1;
                if sx.start < sd.end {
                    deletes.failures.push(format!(
                        "{} was issued at {:.3}s, after {} (ordered after it) started at {:.3}s",
                        label(plan, d),
                        sd.end,
                        label(plan, x),
                        sx.start
                    ));
                }
            }
        }
        deletes.notes.push(format!(
            "{} at {:.3}s: after {before} tasks, before {after} tasks, as planned",
            label(plan, d),
            e.t
        ));
    }

    let mut both = Check::new(
        Some(phase),
        "no-apply-and-delete",
        "no object is both applied and deleted in one run",
    );
    let applied: HashMap<ObjectId, &TimelineEvent> = timeline
        .phase(phase)
        .filter(|e| e.is_apply_done())
        .map(|e| (e.object.clone(), e))
        .collect();
    for e in timeline.phase(phase).filter(|e| e.is_delete_issued()) {
        if let Some(a) = applied.get(&e.object.clone()) {
            both.failures.push(format!(
                "{} was applied at {:.3}s (run-level {}) and deleted at {:.3}s (run-level {})",
                e.object.short(),
                a.t,
                a.run_level.as_deref().unwrap_or("-"),
                e.t,
                e.run_level.as_deref().unwrap_or("-")
            ));
        }
    }
    vec![waits, deletes, both]
}

/// When the ClusterOperator of `op` reported `versions` in the upgrade: the earlier of the
/// first observed status carrying all of them and the end of its wait. The wait ends only once
/// the apply has seen the operator done, so the report came before it, even when the
/// observation of that status was recorded after the apply's next step (the simulator records
/// its write when the answer comes back, the apply's watch can see the write sooner).
fn reported_at(timeline: &Timeline, op: &simulate::OperatorSpec) -> Option<f64> {
    let pairs: Vec<String> = op
        .versions
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let observed = timeline
        .phase(Phase::Upgrade)
        .find(|e| {
            e.action == TimelineAction::Observed
                && e.object.kind == "ClusterOperator"
                && e.object.name == op.name
                && e.detail.as_deref().is_some_and(|d| {
                    let words: BTreeSet<&str> = d.split(' ').collect();
                    pairs.iter().all(|p| words.contains(p.as_str()))
                })
        })
        .map(|e| e.t);
    let waited = timeline
        .phase(Phase::Upgrade)
        .find(|e| e.action == TimelineAction::WaitDone && e.task == Some(op.task) && e.succeeded())
        .map(|e| e.t);
    observed.into_iter().chain(waited).reduce(f64::min)
}

fn applies(t: &crate::plan::Task) -> bool {
    matches!(
        t.action,
        crate::plan::Action::Apply | crate::plan::Action::CreateOnly
    )
}

/// The story check over the upgrade phase: `old` is the plan that installed OLD (its
/// workloads are the ones it applies), `new` the NEW plan.
#[must_use]
pub fn delete_before_workload_update(timeline: &Timeline, old: &Plan, new: &Plan) -> Check {
    let mut check = Check::new(
        Some(Phase::Upgrade),
        STORY_CHECK,
        "no object an OLD workload uses is deleted before that workload is updated and its \
         ClusterOperator reports the new version",
    );
    let bindings: Vec<&Manifest> = old
        .tasks
        .iter()
        .filter(|t| applies(t))
        .chain(new.tasks.iter())
        .map(|t| &t.manifest)
        .filter(|m| is_binding(m))
        .collect();
    let new_bindings: Vec<&Manifest> = new
        .tasks
        .iter()
        .filter(|t| applies(t))
        .map(|t| &t.manifest)
        .filter(|m| is_binding(m))
        .collect();
    let old_workloads: Vec<&Manifest> = old
        .tasks
        .iter()
        .filter(|t| applies(t) && is_workload(&t.manifest))
        .map(|t| &t.manifest)
        .collect();
    let operators = simulate::operators(new);
    for e in timeline
        .phase(Phase::Upgrade)
        .filter(|e| e.is_delete_issued())
    {
        let target = e.object.clone();
        for w in old_workloads.iter().copied() {
            let uses = direct_uses(w)
                .into_iter()
                .chain(binding_uses(w, bindings.iter().copied()));
            let Some(u) = uses.into_iter().find(|u| u.target == target) else {
                continue;
            };
            let what = format!(
                "{} was deleted at {:.3}s (run-level {}, node {})",
                e.object.short(),
                e.t,
                e.run_level.as_deref().unwrap_or("-"),
                e.node.map_or_else(|| "-".into(), |n| n.to_string())
            );
            let user = format!(
                "{} {}",
                w.id.kind,
                w.id.namespace
                    .as_deref()
                    .map_or_else(|| w.id.name.clone(), |ns| format!("{ns}/{}", w.id.name))
            );
            let how = format!("whose OLD pods {u}");
            let mut problems = Vec::new();
            let mut good = Vec::new();
            match timeline
                .phase(Phase::Upgrade)
                .find(|a| a.is_apply_done() && a.object == w.id)
            {
                None => problems.push(format!("{user} was not updated by the upgrade")),
                Some(a) if a.t > e.t => {
                    problems.push(format!("before {user} was updated (at {:.3}s)", a.t))
                }
                Some(a) => good.push(format!("after {user} was updated (at {:.3}s)", a.t)),
            }
            if let Some(op) = operators
                .iter()
                .find(|o| o.workloads.iter().any(|x| x.id == w.id))
            {
                let versions: Vec<String> = op.versions.iter().map(|(_, v)| v.clone()).collect();
                let versions = versions.join(", ");
                match reported_at(timeline, op) {
                    None => problems.push(format!(
                        "ClusterOperator {} never reported {versions}",
                        op.name
                    )),
                    Some(r) if r > e.t => problems.push(format!(
                        "before ClusterOperator {} reported {versions} (at {r:.3}s)",
                        op.name
                    )),
                    Some(r) => good.push(format!(
                        "after ClusterOperator {} reported {versions} (at {r:.3}s)",
                        op.name
                    )),
                }
            }
            if let Some(nw) = new
                .tasks
                .iter()
                .find(|t| applies(t) && t.manifest.id == w.id)
                && direct_uses(&nw.manifest)
                    .into_iter()
                    .chain(binding_uses(&nw.manifest, new_bindings.iter().copied()))
                    .any(|u| u.target == target)
            {
                problems.push(format!("the NEW {user} still uses it"));
            }
            if problems.is_empty() {
                check
                    .notes
                    .push(format!("{what}, {}; {user} {how}", good.join(" and ")));
            } else {
                check
                    .failures
                    .push(format!("{what}, {} ({user} {how})", problems.join(" and ")));
            }
        }
    }
    if check.failures.is_empty() && check.notes.is_empty() {
        check
            .notes
            .push("no delete of the upgrade touched an object an OLD workload uses".into());
    }
    check
}

/// The user assertions, one check each.
#[must_use]
pub fn assertions(timeline: &Timeline, assertions: &[Assertion]) -> Vec<Check> {
    assertions
        .iter()
        .map(|a| {
            let mut c = Check::new(None, &format!("assert {}", a.text), "user assertion");
            match a.check(timeline) {
                Ok(note) => c.notes.push(note),
                Err(why) => c.failures.push(why),
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::filter::Filters;
    use crate::payload::{LoadOptions, load};
    use crate::plan;

    fn plan_of(dir: &str, mode: Mode) -> (Vec<Manifest>, Plan) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let options = LoadOptions {
            substitute_placeholder: true,
            ..LoadOptions::default()
        };
        let p = load(&root, &options).unwrap();
        let ms = p.manifests.clone();
        (ms, plan::from_payload(p, &Filters::default(), mode, 0))
    }

    /// A timeline that runs `plan` task by task in order, 1 s per task, the way a serial
    /// executor would (which respects every ordering of the plan); `delay` shifts tasks.
    fn serial_timeline(plan: &Plan, phase: Phase, order: &[usize]) -> Timeline {
        let node_of = plan.node_of_task();
        let mut events = Vec::new();
        for (i, &id) in order.iter().enumerate() {
            let t = &plan.tasks[id];
            let start = i as f64;
            let base = TimelineEvent {
                t: start + 0.5,
                phase,
                action: TimelineAction::Apply,
                object: ObjectId {
                    group: t.manifest.id.group.clone(),
                    kind: t.manifest.id.kind.clone(),
                    namespace: t.manifest.id.namespace.clone(),
                    name: t.manifest.id.name.clone(),
                },
                run_level: t.run_level.clone(),
                node: Some(node_of[id]),
                task: Some(id),
                start: Some(start),
                outcome: Some("configured".into()),
                detail: None,
                harm: None,
            };
            match t.action {
                crate::plan::Action::Wait => {
                    events.push(TimelineEvent {
                        t: start,
                        action: TimelineAction::WaitStart,
                        outcome: None,
                        ..base.clone()
                    });
                    events.push(TimelineEvent {
                        action: TimelineAction::WaitDone,
                        outcome: Some("waited".into()),
                        ..base
                    });
                }
                crate::plan::Action::Delete => events.push(TimelineEvent {
                    action: TimelineAction::Delete,
                    outcome: Some(
                        if plan.mode == Mode::Updating {
                            "deleted"
                        } else {
                            "delete-skipped"
                        }
                        .into(),
                    ),
                    ..base
                }),
                _ => events.push(base),
            }
        }
        Timeline { events }
    }

    #[test]
    fn the_fixed_payload_passes_every_check_in_load_order() {
        let (_, old) = plan_of("payload/old", Mode::Initializing);
        let (_, new) = plan_of("payload/new", Mode::Updating);
        let order: Vec<usize> = (0..new.tasks.len()).collect();
        let tl = serial_timeline(&new, Phase::Upgrade, &order);
        for c in invariants(&tl, Phase::Upgrade, &new) {
            assert!(c.passed(), "{}: {:?}", c.title(), c.failures);
        }
        let story = delete_before_workload_update(&tl, &old, &new);
        assert!(story.passed(), "{:?}", story.failures);
        assert!(
            story.notes[0].contains("after ClusterOperator machine-config reported 4.14.0"),
            "{:?}",
            story.notes
        );
    }

    #[test]
    fn a_report_recorded_after_the_delete_counts_from_the_end_of_the_wait() {
        let (_, old) = plan_of("payload/old", Mode::Initializing);
        let (_, new) = plan_of("payload/new", Mode::Updating);
        let order: Vec<usize> = (0..new.tasks.len()).collect();
        let mut tl = serial_timeline(&new, Phase::Upgrade, &order);
        // The status that says 4.14.0, as the simulator records it: once its write is
        // answered, which can be after the apply's watch saw it, ended the wait and went on.
        let delete = tl.events.iter().find(|e| e.is_delete_issued()).unwrap().t;
        let wait = tl
            .events
            .iter()
            .find(|e| e.action == TimelineAction::WaitDone && e.object.name == "machine-config")
            .unwrap()
            .clone();
        tl.events.push(TimelineEvent {
            t: delete + 0.003,
            action: TimelineAction::Observed,
            task: None,
            start: None,
            outcome: None,
            detail: Some("operator=4.14.0".into()),
            ..wait.clone()
        });
        let story = delete_before_workload_update(&tl, &old, &new);
        assert!(story.passed(), "{:?}", story.failures);
        assert!(
            story.notes[0].contains(&format!(
                "after ClusterOperator machine-config reported 4.14.0 (at {:.3}s)",
                wait.t
            )),
            "{:?}",
            story.notes
        );
    }

    #[test]
    fn the_buggy_payload_is_a_story_finding() {
        let (_, old) = plan_of("payload/old", Mode::Initializing);
        let (_, new) = plan_of("payload/new-buggy", Mode::Updating);
        let order: Vec<usize> = (0..new.tasks.len()).collect();
        let tl = serial_timeline(&new, Phase::Upgrade, &order);
        let story = delete_before_workload_update(&tl, &old, &new);
        assert_eq!(story.failures.len(), 1, "{:?}", story.failures);
        let f = &story.failures[0];
        assert!(
            f.contains(
                "ClusterRoleBinding default-account-openshift-machine-config-operator was deleted"
            ),
            "{f}"
        );
        assert!(f.contains("before Deployment openshift-machine-config-operator/machine-config-operator was updated"), "{f}");
        assert!(
            f.contains("before ClusterOperator machine-config reported 4.14.0"),
            "{f}"
        );
        // The executor still kept the plan's order: the invariants hold.
        for c in invariants(&tl, Phase::Upgrade, &new) {
            assert!(c.passed(), "{}: {:?}", c.title(), c.failures);
        }
    }

    #[test]
    fn out_of_order_execution_breaks_the_invariants() {
        let (_, new) = plan_of("payload/new", Mode::Updating);
        // Run everything in reverse: level 90's delete first, ahead of level 80's wait.
        let order: Vec<usize> = (0..new.tasks.len()).rev().collect();
        let tl = serial_timeline(&new, Phase::Upgrade, &order);
        let checks = invariants(&tl, Phase::Upgrade, &new);
        assert!(!checks[0].passed());
        assert!(
            checks[0].failures.iter().any(|f| f.contains("before wait ClusterOperator.config.openshift.io machine-config (run-level 80) completed")),
            "{:?}",
            checks[0].failures
        );
        assert!(!checks[1].passed());
        assert!(checks[2].passed());
    }

    #[test]
    fn applying_and_deleting_one_object_is_found() {
        let (_, new) = plan_of("payload/new", Mode::Updating);
        let order: Vec<usize> = (0..new.tasks.len()).collect();
        let mut tl = serial_timeline(&new, Phase::Upgrade, &order);
        let del = tl
            .events
            .iter()
            .find(|e| e.action == TimelineAction::Delete)
            .unwrap()
            .clone();
        tl.events.push(TimelineEvent {
            action: TimelineAction::Apply,
            outcome: Some("created".into()),
            task: None,
            t: 0.1,
            ..del
        });
        let checks = invariants(&tl, Phase::Upgrade, &new);
        assert!(
            checks[2].failures[0].contains("was applied at 0.100s"),
            "{:?}",
            checks[2].failures
        );
    }

    #[test]
    fn deletes_outside_updating_mode_are_findings() {
        let (_, new) = plan_of("payload/new", Mode::Initializing);
        let order: Vec<usize> = (0..new.tasks.len()).collect();
        let mut tl = serial_timeline(&new, Phase::Install, &order);
        for e in &mut tl.events {
            if e.action == TimelineAction::Delete {
                e.outcome = Some("deleted".into());
            }
        }
        let checks = invariants(&tl, Phase::Install, &new);
        assert!(
            checks[1].failures[0].contains("in initializing mode"),
            "{:?}",
            checks[1].failures
        );
    }
}
