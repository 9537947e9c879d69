//! Deleting an object that pods still use: the machine-config bug (OCPBUGS-16905).
//!
//! During an update the CVO runs a delete manifest at its place in the graph and does not wait
//! for anything else. The pods of the previous release keep running until their workload is
//! updated *and* rolled out, and the CVO does not wait for rollouts: the first point where the
//! new pods are known to be in charge is the ClusterOperator wait of the workload's component.
//! So an object used by a workload of the previous payload must be deleted after that
//! workload's update and after its component's ClusterOperator wait. Two rules:
//!
//! - `delete-before-last-user` (needs `--previous`): a workload of the previous payload uses the
//!   object (see [`references`](crate::analysis::references): ServiceAccount, bindings naming
//!   it and their roles, ConfigMap and Secret volumes, `env`, `envFrom`, image pull Secrets),
//!   and the delete can run before or in parallel with the workload's update, or before its
//!   component's ClusterOperator wait. When the new payload drops the workload without
//!   deleting it (its pods keep running forever) or deletes it after the object, a warning.
//! - `deleted-but-used`: a workload of this payload itself still references the object
//!   directly, so after the delete its pods cannot start (bindings are left out here: a
//!   payload that removes a binding means to take the permissions away).

use std::collections::{BTreeMap, BTreeSet};

use super::{Context, Finding, Location, Rule, Severity, Side, applies};
use crate::analysis::references::{Use, binding_uses, direct_uses, is_binding, is_workload};
use crate::manifest::{Manifest, ObjectId};
use crate::plan::{Action, Task};

/// Why a delete is too early for a user from the previous payload.
enum Hazard {
    /// The delete can run before or in parallel with the update of the workload (task).
    BeforeUpdate(usize),
    /// The delete can run before the ClusterOperator wait (task) of the workload's component.
    BeforeWait(usize),
    /// The workload is deleted too, but maybe after the object (task of its delete).
    BeforeUserDeleted(usize),
    /// The new payload neither applies nor deletes the workload: its pods keep running.
    UserOrphaned,
}

/// Runs both rules.
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let mut deletes: BTreeMap<&ObjectId, Vec<usize>> = BTreeMap::new();
    for t in &cx.plan.tasks {
        if t.action == Action::Delete {
            deletes.entry(&t.manifest.id).or_default().push(t.id);
        }
    }
    if deletes.is_empty() {
        return Vec::new();
    }
    let mut findings = Vec::new();
    let mut dangling = BTreeSet::new();
    for t in cx
        .plan
        .tasks
        .iter()
        .filter(|t| applies(t) && is_workload(&t.manifest))
    {
        for (d, uses) in users_of_deletes(&deletes, direct_uses(&t.manifest)) {
            dangling.insert((d, t.manifest.id.clone()));
            findings.push(still_used(cx, d, t, &uses));
        }
    }
    match cx.previous {
        None => findings.push(Finding {
            rule: Rule::DeleteBeforeLastUser,
            severity: Severity::Info,
            location: None,
            message: format!(
                "no previous payload: {} delete(s) checked only against this payload's own workloads",
                deletes.values().map(Vec::len).sum::<usize>()
            ),
            hint: Some(
                "pass --previous OLD to check them against the pods of the release being updated"
                    .into(),
            ),
            related: Vec::new(),
        }),
        Some(prev) => {
            // Bindings the old pods may hold: those the previous payload applies, and those
            // this payload deletes (they may come from an even older release).
            let mut bindings: Vec<&Manifest> = prev
                .plan
                .tasks
                .iter()
                .filter(|t| applies(t) && is_binding(&t.manifest))
                .map(|t| &t.manifest)
                .collect();
            let old_ids: BTreeSet<&ObjectId> = bindings.iter().map(|m| &m.id).collect();
            bindings.extend(
                cx.plan
                    .tasks
                    .iter()
                    .filter(|t| t.action == Action::Delete && is_binding(&t.manifest))
                    .filter(|t| !old_ids.contains(&t.manifest.id))
                    .map(|t| &t.manifest),
            );
            let workloads = prev
                .plan
                .tasks
                .iter()
                .filter(|t| applies(t) && is_workload(&t.manifest));
            for w in workloads {
                let mut uses = direct_uses(&w.manifest);
                uses.extend(binding_uses(&w.manifest, bindings.iter().copied()));
                for (d, uses) in users_of_deletes(&deletes, uses) {
                    if dangling.contains(&(d, w.manifest.id.clone())) {
                        continue;
                    }
                    if let Some(hazard) = hazard(cx, d, &w.manifest.id) {
                        findings.push(too_early(cx, d, &w.manifest, &uses, &hazard));
                    }
                }
            }
        }
    }
    findings
}

/// For each delete task among `uses`' targets, the uses that hit it, in order.
fn users_of_deletes(
    deletes: &BTreeMap<&ObjectId, Vec<usize>>,
    uses: Vec<Use>,
) -> BTreeMap<usize, Vec<Use>> {
    let mut hit: BTreeMap<usize, Vec<Use>> = BTreeMap::new();
    for u in uses {
        if let Some(ds) = deletes.get(&u.target) {
            for &d in ds {
                hit.entry(d).or_default().push(u.clone());
            }
        }
    }
    hit
}

fn hazard(cx: &Context, d: usize, workload: &ObjectId) -> Option<Hazard> {
    let tasks: Vec<&Task> = cx
        .plan
        .tasks
        .iter()
        .filter(|t| &t.manifest.id == workload)
        .collect();
    let updates: Vec<usize> = tasks.iter().filter(|t| applies(t)).map(|t| t.id).collect();
    if let Some(&u) = updates.iter().find(|&&u| !cx.runs_before(u, d)) {
        return Some(Hazard::BeforeUpdate(u));
    }
    if let Some(&u) = updates.first() {
        let component = cx.plan.tasks[u].component.as_ref()?;
        return cx
            .plan
            .tasks
            .iter()
            .filter(|t| t.action == Action::Wait && t.component.as_ref() == Some(component))
            .find(|t| !cx.runs_before(t.id, d))
            .map(|t| Hazard::BeforeWait(t.id));
    }
    let deleted: Vec<usize> = tasks
        .iter()
        .filter(|t| t.action == Action::Delete)
        .map(|t| t.id)
        .collect();
    if deleted.is_empty() {
        return Some(Hazard::UserOrphaned);
    }
    deleted
        .into_iter()
        .find(|&x| !cx.runs_before(x, d))
        .map(Hazard::BeforeUserDeleted)
}

/// The severity for a set of uses: a warning when every reference is optional.
fn severity(uses: &[Use], base: Severity) -> Severity {
    if uses.iter().all(|u| u.optional) {
        Severity::Warning.min(base)
    } else {
        base
    }
}

fn uses_text(uses: &[Use]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for u in uses {
        let s = u.to_string();
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    seen.join("; ")
}

fn still_used(cx: &Context, d: usize, user: &Task, uses: &[Use]) -> Finding {
    let w = &user.manifest;
    Finding::at(
        Rule::DeletedButUsed,
        severity(uses, Severity::Error),
        cx.location(d),
        format!(
            "deleted, but {} of this payload still uses it: its pods {}",
            w.id,
            uses_text(uses)
        ),
    )
    .hint(format!(
        "drop the reference from {} before deleting the object, or keep the object",
        w.id
    ))
    .related("user", cx.location(user.id))
}

fn later_level_hint(cx: &Context, wait: Option<usize>) -> String {
    match wait {
        Some(c) => {
            let co = &cx.plan.tasks[c];
            let component = co.component.as_deref().unwrap_or("component");
            format!(
                "move the delete manifest to a run-level after ClusterOperator {} (run-level {}), e.g. 0000_90_{component}_90_deletion.yaml, so it runs once the new pods are in charge",
                co.manifest.id.name,
                co.run_level.as_deref().unwrap_or("-")
            )
        }
        None => "move the delete manifest after the workload's update, and after the ClusterOperator that reports its rollout".into(),
    }
}

fn too_early(cx: &Context, d: usize, w: &Manifest, uses: &[Use], hazard: &Hazard) -> Finding {
    let used = uses_text(uses);
    let old_user = Location::of(w, Side::Previous);
    let (base, message, hint, related) = match *hazard {
        Hazard::BeforeUpdate(u) => (
            Severity::Error,
            format!(
                "deleted {} the update of {}, whose pods from the previous payload {used}",
                cx.before_or_parallel(d, u),
                w.id
            ),
            later_level_hint(cx, cx.wait_of(u)),
            Some(("update", u)),
        ),
        Hazard::BeforeWait(c) => (
            Severity::Error,
            format!(
                "deleted {} ClusterOperator {} reports the new version, while pods of {} from the previous payload may still run (the CVO does not wait for rollouts): they {used}",
                cx.before_or_parallel(d, c),
                cx.plan.tasks[c].manifest.id.name,
                w.id
            ),
            later_level_hint(cx, Some(c)),
            Some(("wait", c)),
        ),
        Hazard::BeforeUserDeleted(x) => (
            Severity::Warning,
            format!(
                "deleted {} {} itself is deleted, whose pods from the previous payload {used}",
                cx.before_or_parallel(d, x),
                w.id
            ),
            format!("delete {} first, in an earlier task", w.id),
            Some(("user delete", x)),
        ),
        Hazard::UserOrphaned => (
            Severity::Warning,
            format!(
                "deleted, but {} from the previous payload is left behind by this payload (neither applied nor deleted) and its pods {used}",
                w.id
            ),
            format!(
                "add a delete manifest for {} before this one, or keep the object",
                w.id
            ),
            None,
        ),
    };
    let mut f = Finding::at(
        Rule::DeleteBeforeLastUser,
        severity(uses, base),
        cx.location(d),
        message,
    )
    .hint(hint)
    .related("user", old_user);
    if let Some((role, t)) = related {
        f = f.related(role, cx.location(t));
    }
    f
}

#[cfg(test)]
mod tests;
