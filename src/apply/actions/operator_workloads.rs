//! Why a waited-on ClusterOperator may never be done: none of its operator's workloads runs.
//!
//! On a plain cluster (kind, the test plane) the payload's operator images often cannot run:
//! they are not pullable there, or the pods cannot be scheduled. Nobody then reports the
//! ClusterOperator and the wait would last until `--wait-timeout`. While a wait blocks, the
//! operator's workloads are looked at: the Deployments and DaemonSets that report it by the
//! simulated operators' rule ([`reporting_workloads`]: same component and run-level as the
//! ClusterOperator's file, `0000_<run-level>_<component>_…`, and applied before its wait, the
//! way OpenShift payloads ship an operator next to its ClusterOperator). When one of them has a
//! ready pod nothing is said (the operator runs and may report later); otherwise the hint names
//! each workload and why its pods are not ready (an image pull failure, a crash loop, an
//! unschedulable pod, no pod at all) and what to do. The CVO has no such hint: it only reports
//! the ClusterOperator's own conditions.
//!
//! In an e2e run the workloads' pods are simulated ([`crate::simulate::pods`]): the cluster
//! never runs them, so the hint asks the simulation who acts for each workload instead of
//! listing pods. When the ClusterOperator's status was last written by `minicvo simulate` (its
//! field manager), the hint says so rather than advising to start one.

use std::time::Duration;

use kube::Client;
use kube::api::ListParams;
use kube::core::Request;
use serde_json::Value;

use crate::cluster::request;
use crate::cluster::watch;
use crate::manifest::ObjectId;
use crate::plan::{Plan, Task};
use crate::simulate::operators::reporting_workloads;
use crate::simulate::pods::PodBoard;

/// A workload of the payload: kind (`Deployment` or `DaemonSet`), namespace, name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Workload {
    kind: &'static str,
    namespace: String,
    name: String,
}

/// The Deployments and DaemonSets that report the ClusterOperator of `task` (a wait): the
/// simulated operators' rule, [`reporting_workloads`].
pub(crate) fn workloads_of(plan: &Plan, task: &Task) -> Vec<Workload> {
    reporting_workloads(plan, task)
        .filter_map(|t| {
            let kind = match t.manifest.id.kind.as_str() {
                "Deployment" => "Deployment",
                "DaemonSet" => "DaemonSet",
                _ => return None,
            };
            Some(Workload {
                kind,
                namespace: t.manifest.id.namespace.clone()?,
                name: t.manifest.id.name.clone(),
            })
        })
        .collect()
}

/// What one workload's pods show.
#[derive(Debug, PartialEq, Eq)]
enum State {
    /// A pod is ready: the operator runs.
    Running,
    /// No pod is ready; why.
    NotRunning(String),
    /// The workload could not be read (it may not exist yet): nothing to say.
    Unknown,
}

/// The hint for `operator` when none of `workloads` has a ready pod (or, with `simulated`, a
/// simulated pod acting for it); `None` when one runs, when there are none, or when they
/// cannot be read.
pub(crate) async fn hint(
    client: &Client,
    operator: &str,
    workloads: &[Workload],
    simulated: Option<&PodBoard>,
    wait_timeout: Duration,
    timeout: Duration,
) -> Option<String> {
    if workloads.is_empty() {
        return None;
    }
    let mut why = Vec::new();
    for w in workloads {
        let state = match simulated {
            Some(board) => simulated_state(board, w),
            None => state(client, w, timeout).await,
        };
        match state {
            State::Running | State::Unknown => return None,
            State::NotRunning(reason) => why.push(format!(
                "{} {}/{}: {reason}",
                w.kind.to_lowercase(),
                w.namespace,
                w.name
            )),
        }
    }
    let bound = super::operator_wait::format_duration(wait_timeout);
    if simulated.is_some() {
        return Some(format!(
            "no simulated pod acts for a workload of its operator ({}), so the simulated \
             operator does not report clusteroperator {operator}; --wait-timeout (now {bound}) \
             bounds the wait",
            why.join("; ")
        ));
    }
    let who = if reported_by_simulator(client, operator, timeout).await {
        format!(
            "`minicvo simulate` writes the status of clusteroperator {operator} (field manager \
             {}): its log says which workload its report waits for",
            crate::simulate::FIELD_MANAGER
        )
    } else {
        "where the payload's operators cannot run, `minicvo simulate PAYLOAD` reports for them"
            .to_string()
    };
    Some(format!(
        "no workload of its operator runs ({}), so nothing may ever report clusteroperator \
         {operator}; {who}, and --wait-timeout (now {bound}) bounds the wait",
        why.join("; ")
    ))
}

/// What the simulated pods say of `w`: a pod acts for it (leads, or runs) or none does.
fn simulated_state(board: &PodBoard, w: &Workload) -> State {
    let id = ObjectId {
        group: "apps".into(),
        kind: w.kind.into(),
        namespace: Some(w.namespace.clone()),
        name: w.name.clone(),
    };
    match board.acting(&id) {
        Some(_) => State::Running,
        None => State::NotRunning("no simulated pod acts for it".into()),
    }
}

/// Whether `minicvo simulate` has written the live ClusterOperator's status.
async fn reported_by_simulator(client: &Client, operator: &str, timeout: Duration) -> bool {
    let collection = "/apis/config.openshift.io/v1/clusteroperators";
    let Ok(Some(live)) = watch::get(client, collection, operator, timeout).await else {
        return false;
    };
    live["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|fields| {
            fields
                .iter()
                .any(|f| f["manager"] == crate::simulate::FIELD_MANAGER)
        })
}

fn collection(w: &Workload) -> String {
    let plural = match w.kind {
        "Deployment" => "deployments",
        _ => "daemonsets",
    };
    format!("/apis/apps/v1/namespaces/{}/{plural}", w.namespace)
}

async fn state(client: &Client, w: &Workload, timeout: Duration) -> State {
    let Ok(Some(live)) = watch::get(client, &collection(w), &w.name, timeout).await else {
        return State::Unknown;
    };
    let Some(selector) = label_selector(&live["spec"]["selector"]) else {
        return State::Unknown;
    };
    let params = ListParams::default().labels(&selector);
    let Ok(req) = Request::new(format!("/api/v1/namespaces/{}/pods", w.namespace)).list(&params)
    else {
        return State::Unknown;
    };
    let Ok(resp) = request::send(client, req, timeout).await else {
        return State::Unknown;
    };
    pods_state(resp.body["items"].as_array().map_or(&[][..], Vec::as_slice))
}

/// `matchLabels` as a label selector string (`None` when the selector has none).
fn label_selector(selector: &Value) -> Option<String> {
    let labels = selector["matchLabels"].as_object()?;
    if labels.is_empty() {
        return None;
    }
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// Whether a pod is ready, else the first reason found among the pods.
fn pods_state(pods: &[Value]) -> State {
    if pods.is_empty() {
        return State::NotRunning("no pod exists".into());
    }
    let mut reasons = Vec::new();
    for pod in pods {
        let conditions = pod["status"]["conditions"].as_array();
        let ready = conditions.is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        if ready {
            return State::Running;
        }
        if let Some(r) = pod_reason(pod)
            && !reasons.contains(&r)
        {
            reasons.push(r);
        }
    }
    let n = pods.len();
    let head = format!("{n} pod{} not ready", if n == 1 { "" } else { "s" });
    if reasons.is_empty() {
        State::NotRunning(head)
    } else {
        State::NotRunning(format!("{head}: {}", reasons.join("; ")))
    }
}

/// A pod's reason for not running: a waiting container's reason with its image (pull
/// failures) or message, or the scheduler's.
fn pod_reason(pod: &Value) -> Option<String> {
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| pod["status"][k].as_array())
        .flatten();
    for c in statuses {
        let waiting = &c["state"]["waiting"];
        let Some(reason) = waiting["reason"].as_str() else {
            continue;
        };
        if reason == "ContainerCreating" || reason == "PodInitializing" {
            continue;
        }
        let image = c["image"].as_str().unwrap_or_default();
        return Some(match reason {
            // One wording for both states of a failing pull, so the hint does not flip.
            "ErrImagePull" | "ImagePullBackOff" => format!("image {image} cannot be pulled"),
            "InvalidImageName" | "ErrImageNeverPull" => format!("{reason} {image}"),
            _ => match waiting["message"].as_str() {
                Some(m) if !m.is_empty() => format!("{reason}: {}", first_line(m)),
                _ => reason.to_string(),
            },
        });
    }
    let conditions = pod["status"]["conditions"].as_array()?;
    conditions
        .iter()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
        .map(|c| {
            let reason = c["reason"].as_str().unwrap_or("Unschedulable");
            match c["message"].as_str() {
                Some(m) if !m.is_empty() => format!("{reason}: {}", first_line(m)),
                _ => reason.to_string(),
            }
        })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_ready_pod_means_running() {
        let pods = [
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        ];
        assert_eq!(pods_state(&pods), State::Running);
    }

    #[test]
    fn image_pull_failures_name_the_image() {
        let pods = [json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"image": "registry.example.invalid/op:1",
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off"}}}]
        }})];
        assert_eq!(
            pods_state(&pods),
            State::NotRunning(
                "1 pod not ready: image registry.example.invalid/op:1 cannot be pulled".into()
            )
        );
    }

    #[test]
    fn unschedulable_and_missing_pods_say_so() {
        let pods = [
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/1 nodes are available\nmore"}]}}),
        ];
        assert_eq!(
            pods_state(&pods),
            State::NotRunning("1 pod not ready: Unschedulable: 0/1 nodes are available".into())
        );
        assert_eq!(pods_state(&[]), State::NotRunning("no pod exists".into()));
    }

    #[test]
    fn selectors_need_match_labels() {
        assert_eq!(
            label_selector(&json!({"matchLabels": {"app": "op", "tier": "x"}})).as_deref(),
            Some("app=op,tier=x")
        );
        assert_eq!(label_selector(&json!({"matchExpressions": []})), None);
    }
}
