//! Taking rights from running pods without deleting anything: `rights-lost-before-rollout`.
//!
//! The pods of the previous release keep running until their workload is updated and rolled
//! out, and the first point where the new pods are known to be in charge is the ClusterOperator
//! wait of the workload's component (see [`delete_before_user`](super::delete_before_user)).
//! A delete is not the only way to take something from them before then. The CVO replaces a
//! Role's or ClusterRole's `rules` whole and a binding's `subjects` and `roleRef` whole, so an
//! apply can narrow what the old pods' ServiceAccount may do:
//!
//! - an apply of a Role or ClusterRole of the previous payload whose rules no longer cover one of
//!   the previous rules (compared right by right: verb, API group, resource, resource name, or
//!   non-resource URL, with `*` matching as the API server's authorizer does), when a binding of
//!   the previous payload grants that role to the ServiceAccount of a workload of the previous
//!   payload;
//! - an apply of a RoleBinding or ClusterRoleBinding of the previous payload that no longer
//!   names that ServiceAccount among its subjects, or that names another role.
//!
//! Either is reported when it can run before or in parallel with the workload's update, or
//! before its component's ClusterOperator wait: as an error when the pods lose a right they are
//! known to use (leader election on leases, [`known_used_lost`]) or the binding's `roleRef`
//! changes (the API server refuses the apply), as a warning otherwise (nothing is known to
//! break; also when the role is not in the previous payload, so what is lost is unknown). Roles with an `aggregationRule` are left out:
//! their rules belong to the aggregation controller, not to the payload.
//!
//! The new pods can lack a right too: when this payload moves a workload of the previous payload
//! to another ServiceAccount, and the binding that grants the new account a role the old pods
//! held runs only after (or in parallel with) the workload's update, the new pods start without
//! that role. An apply of such a binding is reported as well (an error when the role grants
//! leader election, a warning otherwise), unless a binding of the previous
//! payload, or one of this payload that runs before the update, already grants the role to the
//! new account.

use std::collections::HashMap;

use super::{Context, Finding, Location, Rule, Severity, Side, applies};
use crate::analysis::references::{
    BindingIndex, Use, Via, binding_uses, is_binding, is_workload, role_of,
};
use crate::manifest::{Manifest, ObjectId};
use crate::plan::{Action, Task};
use crate::rbac::{Right, describe, known_used_lost, lost_rights, policy_rules};

const RBAC: &str = "rbac.authorization.k8s.io";

/// The first manifest of each identity in `list`.
fn first_by_id<'m>(list: &[&'m Manifest]) -> HashMap<&'m ObjectId, &'m Manifest> {
    let mut map = HashMap::new();
    for m in list {
        map.entry(&m.id).or_insert(*m);
    }
    map
}

fn is_role(m: &Manifest) -> bool {
    m.id.group == RBAC && (m.id.kind == "Role" || m.id.kind == "ClusterRole")
}

fn aggregated(m: &Manifest) -> bool {
    m.object
        .get("aggregationRule")
        .is_some_and(|v| !v.is_null())
}

/// Where a task that takes rights away is too early for a workload of the previous payload.
#[derive(Clone, Copy)]
enum Late {
    /// It can run before or in parallel with NEW's update of the workload (task).
    Update(usize),
    /// It can run before the ClusterOperator wait (task) of the workload's component.
    Wait(usize),
}

fn too_early(cx: &Context, a: usize, workload: &ObjectId) -> Option<Late> {
    let updates: Vec<usize> = cx
        .plan
        .tasks
        .iter()
        .filter(|t| applies(t) && &t.manifest.id == workload)
        .map(|t| t.id)
        .collect();
    if let Some(&u) = updates.iter().find(|&&u| !cx.runs_before(u, a)) {
        return Some(Late::Update(u));
    }
    let component = cx.plan.tasks[*updates.first()?].component.as_ref()?;
    cx.plan
        .tasks
        .iter()
        .filter(|t| t.action == Action::Wait && t.component.as_ref() == Some(component))
        .find(|t| !cx.runs_before(t.id, a))
        .map(|t| Late::Wait(t.id))
}

/// What the apply takes away from a workload's ServiceAccount.
enum Loss<'a> {
    /// The role is narrowed; the bindings of the previous payload that grant it.
    Narrowed(Vec<&'a Manifest>, Vec<Right>),
    /// The binding no longer names the account.
    SubjectDropped,
    /// The binding names another role (old, new).
    RoleRefChanged(Option<ObjectId>, Option<ObjectId>),
}

/// Runs the rule (only with a previous payload).
#[must_use]
pub fn check(cx: &Context) -> Vec<Finding> {
    let Some(prev) = cx.previous else {
        return Vec::new();
    };
    let old = |keep: fn(&Manifest) -> bool| -> Vec<&Manifest> {
        prev.plan
            .tasks
            .iter()
            .filter(|t| applies(t) && keep(&t.manifest))
            .map(|t| &t.manifest)
            .collect()
    };
    let bindings = old(is_binding);
    let index = BindingIndex::new(bindings.iter().copied());
    let roles = old(is_role);
    // The workloads of the previous payload that some binding grants rights, with those
    // uses and their ServiceAccount, worked out once.
    let users: Vec<(&Manifest, Vec<Use>, String)> = old(is_workload)
        .into_iter()
        .filter_map(|w| {
            let uses = binding_uses(w, index.candidates(w));
            let sa = uses.iter().find_map(|u| match &u.via {
                Via::Binding { service_account } => Some(service_account.clone()),
                _ => None,
            })?;
            Some((w, uses, sa))
        })
        .collect();
    // Lookups by identity (the first of each, as a search in order finds it), and which
    // users reach each role or binding, so that every apply reads only what it touches.
    let roles_by_id = first_by_id(&roles);
    let bindings_by_id = first_by_id(&bindings);
    let mut users_of: HashMap<&ObjectId, Vec<usize>> = HashMap::new();
    for (i, (_, uses, _)) in users.iter().enumerate() {
        for u in uses {
            let list = users_of.entry(&u.target).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }
    let mut findings = Vec::new();
    for t in cx.plan.tasks.iter().filter(|t| t.action == Action::Apply) {
        let m = &t.manifest;
        let change = if is_role(m) {
            roles_by_id
                .get(&m.id)
                .filter(|r| !aggregated(r) && !aggregated(m))
                .map(|r| Change::Role(r, lost_rights(r, m)))
                .filter(|c| !matches!(c, Change::Role(_, lost) if lost.is_empty()))
        } else if is_binding(m) {
            bindings_by_id.get(&m.id).map(|b| Change::Binding(b))
        } else {
            None
        };
        let Some(change) = change else {
            continue;
        };
        let reached = users_of.get(&m.id).map_or(&[][..], Vec::as_slice);
        for (w, uses, service_account) in reached.iter().map(|&i| &users[i]) {
            let loss = match &change {
                Change::Role(_, lost) => {
                    let granting: Vec<&Manifest> = uses
                        .iter()
                        .filter(|u| u.target == m.id)
                        .filter_map(|u| match &u.via {
                            Via::Role { binding, .. } => bindings
                                .iter()
                                .copied()
                                .find(|b| b.id.to_string() == *binding),
                            _ => None,
                        })
                        .collect();
                    if granting.is_empty() {
                        continue;
                    }
                    Loss::Narrowed(granting, lost.clone())
                }
                Change::Binding(old_binding) => {
                    if !uses.iter().any(|u| u.target == m.id) {
                        continue;
                    }
                    if binding_uses(w, [m]).is_empty() {
                        Loss::SubjectDropped
                    } else if role_of(old_binding) != role_of(m) {
                        Loss::RoleRefChanged(role_of(old_binding), role_of(m))
                    } else {
                        continue;
                    }
                }
            };
            if let Some(late) = too_early(cx, t.id, &w.id) {
                let known = match (&change, &loss) {
                    (Change::Role(old_role, _), _) => {
                        Some(known_used_lost(&policy_rules(old_role), &policy_rules(m)))
                    }
                    (Change::Binding(old_binding), _) => role_of(old_binding)
                        .and_then(|id| roles_by_id.get(&id).copied())
                        .map(|r| known_used_lost(&policy_rules(r), &[])),
                };
                findings.push(finding(
                    cx,
                    t.id,
                    (w, service_account),
                    &loss,
                    known.as_deref(),
                    late,
                ));
            }
        }
    }
    findings.extend(late_bindings(
        cx,
        &old(is_workload),
        &bindings,
        &roles_by_id,
    ));
    findings
}

/// How bad losing rights is: an error when `known` (the rights the pods are known to use that
/// they lose, `None` when the rule cannot tell) is not empty, a warning otherwise; and the words
/// that say why.
fn severity_of(known: Option<&[Right]>) -> (Severity, String) {
    match known {
        Some(k) if !k.is_empty() => (
            Severity::Error,
            format!(
                "; leader election needs {}, so the pods can no longer hold their lease",
                describe(k)
            ),
        ),
        Some(_) => (
            Severity::Warning,
            "; none of the lost rights is known to be used by the pods (leader election keeps its rights)".into(),
        ),
        None => (
            Severity::Warning,
            "; the role is not in the previous payload, so whether the pods use what they lose is unknown".into(),
        ),
    }
}

/// The roles among `uses` (granted through a binding), with the account they are granted to.
fn granted_roles(uses: Vec<Use>) -> Vec<(ObjectId, String)> {
    uses.into_iter()
        .filter_map(|u| match u.via {
            Via::Role {
                service_account, ..
            } => Some((u.target, service_account)),
            _ => None,
        })
        .collect()
}

/// Applies of bindings that grant the ServiceAccount of a workload's new pods a role its pods
/// of the previous payload held, and that run only after or in parallel with the workload's
/// update: the new pods start without the role. `old_workloads` and `old_bindings` are the
/// previous payload's.
fn late_bindings(
    cx: &Context,
    old_workloads: &[&Manifest],
    old_bindings: &[&Manifest],
    old_roles: &HashMap<&ObjectId, &Manifest>,
) -> Vec<Finding> {
    let new_bindings: Vec<&Task> = cx
        .plan
        .tasks
        .iter()
        .filter(|t| applies(t) && is_binding(&t.manifest))
        .collect();
    let new_index = BindingIndex::new(new_bindings.iter().map(|t| &t.manifest));
    let old_index = BindingIndex::new(old_bindings.iter().copied());
    // The first workload of each identity, as a search in order would find it.
    let old_by_id = first_by_id(old_workloads);
    let mut seen: Vec<(usize, ObjectId)> = Vec::new();
    let mut findings = Vec::new();
    for u in cx
        .plan
        .tasks
        .iter()
        .filter(|t| applies(t) && is_workload(&t.manifest))
    {
        let Some(old_w) = old_by_id.get(&u.manifest.id).copied() else {
            continue;
        };
        let held: Vec<ObjectId> = granted_roles(binding_uses(old_w, old_index.candidates(old_w)))
            .into_iter()
            .map(|(role, _)| role)
            .collect();
        if held.is_empty() {
            continue;
        }
        // The bindings on the cluster when the update lands: the previous payload's, and this
        // payload's that always run before it.
        // Only the bindings that may name the new pods' account matter (positions in
        // `new_bindings`, in plan order).
        let naming: Vec<&Task> = new_index
            .positions(&u.manifest)
            .into_iter()
            .map(|i| new_bindings[i])
            .collect();
        let early = naming
            .iter()
            .filter(|b| cx.runs_before(b.id, u.id))
            .map(|b| &b.manifest);
        let ready: Vec<ObjectId> = granted_roles(binding_uses(
            &u.manifest,
            old_index.candidates(&u.manifest).into_iter().chain(early),
        ))
        .into_iter()
        .map(|(role, _)| role)
        .collect();
        for b in naming.iter().filter(|b| !cx.runs_before(b.id, u.id)) {
            for (role, account) in granted_roles(binding_uses(&u.manifest, [&b.manifest])) {
                if !held.contains(&role) || ready.contains(&role) {
                    continue;
                }
                if seen.contains(&(b.id, role.clone())) {
                    continue;
                }
                seen.push((b.id, role.clone()));
                // What the new pods start without: the role's rules in this payload, else in
                // the previous one.
                let rules = cx
                    .plan
                    .tasks
                    .iter()
                    .find(|t| applies(t) && is_role(&t.manifest) && t.manifest.id == role)
                    .map(|t| &t.manifest)
                    .or_else(|| old_roles.get(&role).copied())
                    .map(policy_rules);
                let known = rules.map(|r| known_used_lost(&r, &[]));
                findings.push(late_binding(
                    cx,
                    (b.id, u.id),
                    old_w,
                    (&account, &role),
                    known.as_deref(),
                ));
            }
        }
    }
    findings
}

fn late_binding(
    cx: &Context,
    (b, u): (usize, usize),
    old_w: &Manifest,
    (account, role): (&str, &ObjectId),
    known: Option<&[Right]>,
) -> Finding {
    let w = &cx.plan.tasks[u].manifest.id;
    let order = if cx.runs_before(u, b) {
        "after"
    } else {
        "in parallel with"
    };
    let (severity, why) = severity_of(known);
    Finding::at(
        Rule::RightsLostBeforeRollout,
        severity,
        cx.location(b),
        format!(
            "applied {order} the update of {w}, whose new pods run as {account}: they start without {role}, which this binding grants them and which the pods of the previous payload held{why}"
        ),
    )
    .hint(format!(
        "apply {} before the update of {w} (in an earlier file of the same component, or at a lower run-level), so the new pods start with the rights of the old ones",
        cx.plan.tasks[b].manifest.id
    ))
    .related("user", Location::of(old_w, Side::Previous))
    .related("update", cx.location(u))
}

/// How an apply of NEW changes an RBAC object of the previous payload.
enum Change<'a> {
    /// A role (the previous payload's version) loses these rights.
    Role(&'a Manifest, Vec<Right>),
    /// A binding is applied again; the previous payload's version.
    Binding(&'a Manifest),
}

fn name(id: Option<&ObjectId>) -> String {
    id.map_or_else(|| "none".to_string(), ToString::to_string)
}

fn finding(
    cx: &Context,
    a: usize,
    (w, sa): (&Manifest, &str),
    loss: &Loss,
    known: Option<&[Right]>,
    late: Late,
) -> Finding {
    let m = &cx.plan.tasks[a].manifest;
    let what = match loss {
        Loss::Narrowed(granting, lost) => format!(
            "narrows {} (granted to {sa} by {}): the pods lose {}",
            m.id,
            granting
                .iter()
                .map(|b| b.id.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            describe(lost)
        ),
        Loss::SubjectDropped => format!(
            "drops {sa} from the subjects of {}: the pods lose every right it grants",
            m.id
        ),
        Loss::RoleRefChanged(old, new) => format!(
            "changes the roleRef of {} from {} to {} (the API server refuses a roleRef change; the binding must be recreated, and {sa} loses the old role's rights)",
            m.id,
            name(old.as_ref()),
            name(new.as_ref())
        ),
    };
    let (when, related, hint) = match late {
        Late::Update(u) => (
            format!(
                "{} the update of {}, whose pods from the previous payload run as {sa}",
                cx.before_or_parallel(a, u),
                w.id
            ),
            ("update", u),
            later_hint(cx, cx.wait_of(u)),
        ),
        Late::Wait(c) => (
            format!(
                "{} ClusterOperator {} reports the new version, while pods of {} from the previous payload may still run as {sa} (the CVO does not wait for rollouts)",
                cx.before_or_parallel(a, c),
                cx.plan.tasks[c].manifest.id.name,
                w.id
            ),
            ("wait", c),
            later_hint(cx, Some(c)),
        ),
    };
    // A changed roleRef fails the apply itself (the API server refuses it): a break whatever the
    // pods use.
    let (severity, why) = match loss {
        Loss::RoleRefChanged(..) => (Severity::Error, String::new()),
        _ => severity_of(known),
    };
    let mut f = Finding::at(
        Rule::RightsLostBeforeRollout,
        severity,
        cx.location(a),
        format!("applied {when}; it {what}{why}"),
    )
    .hint(hint)
    .related("user", Location::of(w, Side::Previous));
    if let Loss::Narrowed(granting, _) = loss {
        for b in granting {
            f = f.related("binding", Location::of(b, Side::Previous));
        }
    }
    f.related(related.0, cx.location(related.1))
}

fn later_hint(cx: &Context, wait: Option<usize>) -> String {
    match wait {
        Some(c) => {
            let co = &cx.plan.tasks[c];
            format!(
                "keep the old rights until the new pods are in charge: apply the narrower version in a manifest at a run-level after ClusterOperator {} (run-level {}), or in a later release",
                co.manifest.id.name,
                co.run_level.as_deref().unwrap_or("-")
            )
        }
        None => "keep the old rights until the workload is updated and rolled out, and narrow them in a later manifest or release".into(),
    }
}

#[cfg(test)]
mod tests;
