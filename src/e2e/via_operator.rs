//! `e2e upgrade --via-operator`: the install and the update are driven through a running
//! operator ([`crate::operator`], in this process) the way a cluster admin drives the CVO: the
//! operator installs its own release, and the update starts when the harness sets
//! ClusterVersion `spec.desiredUpdate` (what `oc adm upgrade --to` does). Each phase is the
//! operator's first pass that ends (completed or failed) for the phase's release; its events
//! feed the same timeline and checks as a direct run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::core::Request;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::harness::E2eError;
use crate::apply::{ApplyEvent, ApplyObserver, ApplyOptions, ApplyReport, Connection};
use crate::cluster::request;
use crate::operator::{self, Hooks, OperatorOptions, PassEnd, PassRecord, PayloadIndex, Schedule};
use crate::payload::{LoadOptions, Payload};

/// Forwards the operator's events to the current phase's observer.
#[derive(Default)]
struct Current(Mutex<Option<Arc<dyn ApplyObserver>>>);

impl ApplyObserver for Current {
    fn on_event(&self, event: &ApplyEvent) {
        let o = self.0.lock().expect("observer lock").clone();
        if let Some(o) = o {
            o.on_event(event);
        }
    }
}

/// The operator the harness drives.
pub(super) struct Driver {
    conn: Connection,
    current: Arc<Current>,
    passes: mpsc::UnboundedReceiver<PassRecord>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), operator::OperatorError>>,
}

impl Driver {
    /// Starts the operator on `conn` with the two payloads; it installs `from` at once.
    pub fn start(
        conn: &Connection,
        payloads: [(String, Arc<Payload>); 2],
        from: &str,
        load: &LoadOptions,
        apply: &ApplyOptions,
        first: Arc<dyn ApplyObserver>,
    ) -> Self {
        let current = Arc::new(Current(Mutex::new(Some(first))));
        let (tx, passes) = mpsc::unbounded_channel();
        let hooks = Hooks {
            observer: Some(current.clone() as Arc<dyn ApplyObserver>),
            passes: Some(tx),
            ..Hooks::default()
        };
        let options = OperatorOptions {
            release: from.to_string(),
            release_image: String::new(),
            update_service: String::new(),
            load: load.clone(),
            // The harness's payloads are loaded already, with its filters.
            explicit_features: crate::cvo::features::Explicit {
                feature_set: true,
                gates: true,
            },
            apply: apply.clone(),
            // No reconcile pass between the phases: the harness's run ends with the update.
            schedule: Schedule::new(Duration::from_secs(24 * 3600), false, None),
            leader: None,
            namespace: "openshift-cluster-version".into(),
            verify_timeout: operator::DEFAULT_VERIFY_TIMEOUT,
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(operator::run(
            conn.clone(),
            PayloadIndex::of_loaded(payloads),
            options,
            hooks,
            cancel.clone(),
        ));
        Driver {
            conn: conn.clone(),
            current,
            passes,
            cancel,
            task,
        }
    }

    /// Sends the next phase's events to `observer`.
    pub fn observe(&self, observer: Arc<dyn ApplyObserver>) {
        *self.current.0.lock().expect("observer lock") = Some(observer);
    }

    /// Asks for `version` as an admin does: a merge patch of `spec.desiredUpdate`.
    pub async fn request(&self, version: &str) -> Result<(), E2eError> {
        let patch = json!({"spec": {"desiredUpdate": {"version": version}}});
        let req = Request::new("/apis/config.openshift.io/v1/clusterversions")
            .patch(
                crate::apply::clusterversion::NAME,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .map_err(|e| E2eError::Operator(e.to_string()))?;
        request::send(&self.conn.client, req, Duration::from_secs(30))
            .await
            .map(|_| ())
            .map_err(|e| E2eError::Operator(format!("setting spec.desiredUpdate: {e}")))
    }

    /// The report of the operator's first pass of `version` that completes or fails.
    pub async fn pass_of(
        &mut self,
        version: &str,
        cancel: &CancellationToken,
    ) -> Result<ApplyReport, E2eError> {
        loop {
            let record = tokio::select! {
                r = self.passes.recv() => r,
                () = cancel.cancelled() => None,
            };
            let Some(record) = record else {
                return Err(E2eError::Operator(format!(
                    "the operator stopped before a pass of {version} ended"
                )));
            };
            tracing::info!(
                "operator: {} pass of {} {:?} in {:.1}s",
                record.mode,
                record.version,
                record.end,
                record.seconds
            );
            if record.version != version || record.end == PassEnd::Superseded {
                continue;
            }
            return record.report.ok_or_else(|| {
                E2eError::Operator(format!("the operator's pass of {version} could not start"))
            });
        }
    }

    /// Stops the operator.
    pub async fn stop(self) {
        self.cancel.cancel();
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("operator: {e}"),
            Err(e) => tracing::warn!("operator task: {e}"),
        }
    }
}

/// Deletes ClusterVersion `version` (absent or not served is fine), so that the operator
/// starts on a cluster with no completed update: an install, in initializing mode.
pub(super) async fn forget_cluster_version(conn: &Connection) -> Result<(), E2eError> {
    let req = Request::new("/apis/config.openshift.io/v1/clusterversions")
        .delete(
            crate::apply::clusterversion::NAME,
            &kube::api::DeleteParams::default(),
        )
        .map_err(|e| E2eError::Operator(e.to_string()))?;
    match request::send(&conn.client, req, Duration::from_secs(30)).await {
        Ok(_) => Ok(()),
        Err(e) if e.is(404) => Ok(()),
        Err(e) => Err(E2eError::Operator(format!(
            "deleting clusterversion {}: {e}",
            crate::apply::clusterversion::NAME
        ))),
    }
}
