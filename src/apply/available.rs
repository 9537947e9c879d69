//! `apply --wait-available`: once a run has applied the payload, wait until every Deployment
//! and DaemonSet it applied is rolled out and available — its generation observed, every
//! replica updated and available (what `kubectl rollout status` waits for). Each workload is
//! watched, never polled, all at once, under one deadline.
//!
//! The CVO does not wait for this: its Deployment and DaemonSet checks only fail a workload
//! that is neither available nor progressing (cvo-apply.md §8.1, §8.2), and its
//! ClusterOperator waits are what hold an update back. This wait is for users and tests that
//! need the workloads running when the command returns.

use std::time::Duration;

use futures::future::join_all;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::Connection;
use crate::cluster::watch::{self, WatchEnd};
use crate::plan::{Action, Plan};
use crate::simulate::operators::rolled_out;

/// One workload that was not available in time, or could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotAvailable {
    /// `Kind namespace/name`.
    pub workload: String,
    /// What it lacked at the deadline (`1 of 2 updated, 0 available`), or the error.
    pub why: String,
}

/// What the wait found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Availability {
    /// Workloads waited for.
    pub workloads: usize,
    /// Those not available by the deadline (empty: all were).
    pub not_available: Vec<NotAvailable>,
    /// How long the wait took.
    pub seconds: f64,
}

impl Availability {
    /// Whether every workload was available.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.not_available.is_empty()
    }
}

/// Waits up to `timeout` for every Deployment and DaemonSet that `plan` applies (created or
/// updated, not skipped or deleted) to be rolled out and available.
pub async fn wait_available(
    conn: &Connection,
    plan: &Plan,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Availability {
    let start = Instant::now();
    let deadline = start + timeout;
    let workloads: Vec<_> = plan
        .tasks
        .iter()
        .filter(|t| matches!(t.action, Action::Apply | Action::CreateOnly))
        .map(|t| &t.manifest.id)
        .filter(|id| id.group == "apps" && matches!(id.kind.as_str(), "Deployment" | "DaemonSet"))
        .collect();
    let waits = workloads.iter().map(|id| async move {
        let namespace = id.namespace.as_deref().unwrap_or("default");
        let collection = format!(
            "/apis/apps/v1/namespaces/{namespace}/{}",
            if id.kind == "Deployment" {
                "deployments"
            } else {
                "daemonsets"
            }
        );
        let label = format!("{} {namespace}/{}", id.kind, id.name);
        let why = |state: Option<&serde_json::Value>| match state {
            Some(live) => rolled_out(&id.kind, live).err(),
            None => Some("not found".to_string()),
        };
        let initial = match watch::get(&conn.client, &collection, &id.name, timeout).await {
            Ok(v) => v,
            Err(e) => return Some((label, e.to_string())),
        };
        let end = watch::watch_until(
            &conn.client,
            &collection,
            &id.name,
            initial,
            deadline,
            cancel,
            |state| why(state).is_none().then_some(()),
        )
        .await;
        match end {
            WatchEnd::Done(()) => None,
            WatchEnd::TimedOut(state) => Some((
                label,
                why(state.as_ref()).unwrap_or_else(|| "not available".to_string()),
            )),
            WatchEnd::Cancelled => Some((label, "interrupted".to_string())),
            WatchEnd::Failed(e) => Some((label, e.to_string())),
        }
    });
    let not_available = join_all(waits)
        .await
        .into_iter()
        .flatten()
        .map(|(workload, why)| NotAvailable { workload, why })
        .collect();
    Availability {
        workloads: workloads.len(),
        not_available,
        seconds: start.elapsed().as_secs_f64(),
    }
}
