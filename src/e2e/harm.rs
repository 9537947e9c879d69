//! What the simulated pods suffered: naming the payload task behind each harm, the
//! `live-pods-keep-access` check, and the leaderless times of the leases.
//!
//! A harm's cause is the latest successful write of either run, before the harm was seen,
//! that touches what the pod lost:
//!
//! - a ServiceAccount deleted while its pod ran, or a ConfigMap, Secret or ServiceAccount a
//!   pod had to start without: the delete of that object;
//! - a refused request or a lost right: a delete of the pod's ServiceAccount, of a binding (of
//!   either payload) whose subjects name the ServiceAccount or one of its groups, or of a role
//!   such a binding refers to; or an apply of such a binding or role that grants less than the
//!   previous payload's (a role that lost a right, a binding that dropped the account or
//!   refers to another role);
//! - a generation that started without a right: the write of its workload (the template that
//!   switched the ServiceAccount or was rolled out before its rights).
//!
//! A ConfigMap or Secret deleted while a pod runs is no harm (the kubelet's rules, see
//! [`crate::simulate::pods::workload::Use`]); the time during which no pod of the template
//! could have started is a warning ([`super::danger`]).

use std::collections::HashSet;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use super::checks::Check;
use super::timeline::{Phase, Timeline, TimelineAction, TimelineEvent};
use crate::manifest::ObjectId;
use crate::plan::Plan;
use crate::simulate::pods::{HarmKind, LeaseGap};

/// The name of the check that fails on any harm of a live pod.
pub const LIVE_PODS_CHECK: &str = "live-pods-keep-access";

const RBAC: &str = "rbac.authorization.k8s.io";

/// A leaderless time, in seconds of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseGapReport {
    /// `Kind namespace/name` of the workload.
    pub workload: String,
    /// The leader before the gap.
    pub pod: String,
    /// When the gap started: the leader's first failed renewal (simulated pods), or its last
    /// renewal or release of the Lease (real pods, seen from outside).
    pub from: f64,
    /// When a generation took the lease again (`None`: not before the end of the run).
    pub to: Option<f64>,
    /// How long no generation could lead.
    pub seconds: f64,
}

impl LeaseGapReport {
    /// The gap of `gap`, with times since `start`; open gaps end at `end`.
    #[must_use]
    pub fn new(gap: &LeaseGap, start: Instant, end: Instant) -> Self {
        let at = |i: Instant| i.saturating_duration_since(start).as_secs_f64();
        let to = gap.to.map(at);
        LeaseGapReport {
            workload: format!(
                "{} {}/{}",
                gap.workload.kind,
                gap.workload.namespace.as_deref().unwrap_or_default(),
                gap.workload.name
            ),
            pod: gap.pod.clone(),
            from: at(gap.from),
            to,
            seconds: to.unwrap_or_else(|| at(end)) - at(gap.from),
        }
    }
}

/// Whether a binding manifest names `sa` (`namespace/name`) among its subjects, directly or by
/// one of the groups every ServiceAccount of its namespace is in.
fn binds(binding: &Value, sa_namespace: &str, sa_name: &str) -> bool {
    let own_ns = binding
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| {
            let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
            match field("kind") {
                "ServiceAccount" => {
                    let ns = match field("namespace") {
                        "" => own_ns,
                        ns => ns,
                    };
                    ns == sa_namespace && field("name") == sa_name
                }
                "Group" => {
                    let g = field("name");
                    g == "system:serviceaccounts"
                        || g == "system:authenticated"
                        || g == format!("system:serviceaccounts:{sa_namespace}")
                }
                _ => false,
            }
        })
}

/// Everything whose write can change the rights of ServiceAccount `namespace/name`, from
/// both plans: the ServiceAccount, the bindings naming it and the roles they refer to.
fn rights_objects(plans: &[&Plan], namespace: &str, name: &str) -> HashSet<ObjectId> {
    let mut out = HashSet::new();
    out.insert(ObjectId {
        group: String::new(),
        kind: "ServiceAccount".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    });
    for plan in plans {
        for t in &plan.tasks {
            let m = &t.manifest;
            if m.id.group != RBAC
                || !matches!(m.id.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
                || !binds(&m.object, namespace, name)
            {
                continue;
            }
            out.insert(m.id.clone());
            let role = |k: &str| {
                m.object
                    .pointer(&format!("/roleRef/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let kind = role("kind");
            out.insert(ObjectId {
                group: RBAC.into(),
                namespace: (kind == "Role").then(|| m.id.namespace.clone()).flatten(),
                kind,
                name: role("name"),
            });
        }
    }
    out
}

/// Whether the successful write `e` can take rights from ServiceAccount `namespace/name`: a
/// delete always can; an apply only when it replaces an object of the previous payload so that
/// it grants less (a role whose rules lost a right, a binding that no longer names the account
/// or refers to another role).
fn takes_rights(e: &TimelineEvent, old: &Plan, new: &Plan, namespace: &str, name: &str) -> bool {
    if e.action == TimelineAction::Delete {
        return true;
    }
    if e.phase != Phase::Upgrade {
        return false;
    }
    let Some(written) = e.task.and_then(|t| new.tasks.get(t)).map(|t| &t.manifest) else {
        return false;
    };
    let Some(before) = old
        .tasks
        .iter()
        .map(|t| &t.manifest)
        .find(|m| m.id == written.id)
    else {
        return false;
    };
    match written.id.kind.as_str() {
        "Role" | "ClusterRole" => !crate::rbac::lost_rights(before, written).is_empty(),
        "RoleBinding" | "ClusterRoleBinding" => {
            (binds(&before.object, namespace, name) && !binds(&written.object, namespace, name))
                || before.object.get("roleRef") != written.object.get("roleRef")
        }
        _ => false,
    }
}

/// Names the cause of every harm event of `timeline` (see the module docs); `old` and `new`
/// are the plans of the install and the upgrade.
pub fn attribute(timeline: &mut Timeline, old: &Plan, new: &Plan) {
    for i in 0..timeline.events.len() {
        let Some(harm) = timeline.events[i].harm.clone() else {
            continue;
        };
        let (namespace, name) = harm
            .service_account
            .split_once('/')
            .unwrap_or(("", harm.service_account.as_str()));
        let by_rights = matches!(harm.kind, HarmKind::Refused | HarmKind::RightLost);
        let touched: HashSet<ObjectId> = if by_rights {
            rights_objects(&[old, new], namespace, name)
        } else {
            harm.object.iter().cloned().collect()
        };
        let at = timeline.events[i].t;
        let cause = timeline.events[..i]
            .iter()
            .rev()
            .filter(|e| e.t <= at && (e.is_delete_issued() || e.is_apply_done()))
            .filter(|e| touched.contains(&e.object))
            .find(|e| !by_rights || takes_rights(e, old, new, namespace, name));
        if let Some(c) = cause {
            let text = format!("{} {}", c.action, c.object);
            let task = c.task;
            let h = timeline.events[i].harm.as_mut().expect("a harm event");
            h.cause = Some(text);
            h.cause_task = task;
        }
    }
}

/// `live-pods-keep-access`: one failure per harm event; passes with a note of how many pods
/// lived, and of the `danger_windows` (warnings, which fail nothing).
#[must_use]
pub fn live_pods_keep_access(
    timeline: &Timeline,
    pods_started: usize,
    danger_windows: usize,
) -> Check {
    let mut check = Check::new(
        None,
        LIVE_PODS_CHECK,
        "no live simulated pod has a request refused, loses a right it started with or the \
         ServiceAccount it runs as, or has to start without a right its predecessor had or \
         without a ConfigMap, Secret or ServiceAccount it needs",
    );
    for e in timeline
        .events
        .iter()
        .filter(|e| e.action == TimelineAction::Harm)
    {
        let Some(h) = &e.harm else { continue };
        let mut line = format!(
            "{phase} {t:.3}s: pod {pod} (ServiceAccount {sa}) of {workload}: {kind} {what}",
            phase = e.phase,
            t = e.t,
            pod = h.pod,
            sa = h.service_account,
            workload = e.object,
            kind = h.kind,
            what = h.what,
        );
        match (&h.cause, h.cause_task) {
            (Some(c), Some(task)) => {
                let _ = write!(line, "; caused by {c} (task {task})");
            }
            (Some(c), None) => {
                let _ = write!(line, "; caused by {c}");
            }
            _ => line.push_str("; no payload task touched it before"),
        }
        check.failures.push(line);
    }
    if check.failures.is_empty() {
        check.notes.push(format!(
            "{pods_started} simulated pods lived through the run unharmed"
        ));
    }
    if danger_windows > 0 {
        check.notes.push(format!(
            "{danger_windows} danger window{} (warnings): running pods kept an object their \
             template needs and that was deleted, so no new pod of it could have started",
            if danger_windows == 1 { "" } else { "s" }
        ));
    }
    check
}

/// `live-pods-keep-access` judged from real pods (`--real-pods`): one failure per harm a pod
/// showed (a denial or a missing file its container ended with, an object it could not start
/// without); passes with a note of how many pods ran and restarted.
#[must_use]
pub fn real_pods_keep_access(
    timeline: &Timeline,
    seen: &super::real_pods::RealPodSummary,
) -> Check {
    let mut check = live_pods_keep_access(timeline, seen.pods, 0);
    check.description = "no real pod of the payloads' workloads has a container end with a \
                         refused request or a missing file or variable, or cannot start for \
                         want of a ConfigMap, Secret or ServiceAccount deleted during the run"
        .to_string();
    check.notes = vec![format!(
        "{} real pods watched, {} container restarts, {} denials, {} missing files or \
         variables, {} pods that could not start, {} volume set-ups of a deleted object the \
         kubelet refused for a running pod (it kept the files)",
        seen.pods,
        seen.restarts,
        seen.denials,
        seen.missing,
        seen.started_without,
        seen.kept_volumes
    )];
    check
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bindings_name_a_service_account_directly_or_by_group() {
        let rb = json!({"metadata": {"namespace": "ns"}, "subjects": [
            {"kind": "ServiceAccount", "name": "op"}]});
        assert!(binds(&rb, "ns", "op"));
        assert!(!binds(&rb, "other", "op"));
        let crb =
            json!({"subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]});
        assert!(binds(&crb, "ns", "op"));
        assert!(!binds(&crb, "ns", "default"));
        let group = json!({"subjects": [{"kind": "Group", "name": "system:serviceaccounts:ns"}]});
        assert!(binds(&group, "ns", "anyone"));
        assert!(!binds(&group, "ns2", "anyone"));
        let user = json!({"subjects": [{"kind": "User", "name": "system:serviceaccount:ns:op"}]});
        assert!(!binds(&user, "ns", "op"));
    }
}
