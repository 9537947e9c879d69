//! The CRD wait: after a CustomResourceDefinition is written, watch it until `Established`
//! (the CVO's #771 check), then serve its kinds for the rest of the run.

use std::sync::Arc;

use serde_json::Value;

use super::handle::ClusterHandle;
use crate::apply::engine::{TaskContext, TaskError};
use crate::apply::events::EventKind;
use crate::cluster::watch::{self, WatchEnd};

/// Why a CRD's names were not accepted, or `Ok(established)`.
pub(crate) fn crd_state(crd: &Value) -> Result<bool, String> {
    let conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let get = |t: &str| {
        conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
    };
    if let Some(c) = get("NamesAccepted")
        && c.get("status").and_then(Value::as_str) == Some("False")
    {
        return Err(format!(
            "names not accepted: {}",
            c.get("message").and_then(Value::as_str).unwrap_or_default()
        ));
    }
    Ok(get("Established").and_then(|c| c.get("status").and_then(Value::as_str)) == Some("True"))
}

/// Waits for written CRDs to be `Established`; used by the apply and create-only actions.
pub struct CrdWait {
    cluster: Arc<ClusterHandle>,
}

impl CrdWait {
    /// The wait, over `cluster`.
    #[must_use]
    pub fn new(cluster: Arc<ClusterHandle>) -> Self {
        CrdWait { cluster }
    }

    /// Waits until the CRD `name` (as `applied` returned it) is Established, then serves its
    /// kinds; bounded by the CRD timeout.
    pub(crate) async fn established(
        &self,
        ctx: &TaskContext,
        name: &str,
        collection: &str,
        applied: Value,
    ) -> Result<(), TaskError> {
        let c = &self.cluster;
        let started = tokio::time::Instant::now();
        let deadline = started + c.options.crd_timeout;
        let mut problem = None;
        let end = watch::watch_until(
            &c.client,
            collection,
            name,
            Some(applied),
            deadline,
            &ctx.cancel,
            |crd| match crd.map(crd_state) {
                Some(Ok(true)) => Some(Ok(crd.cloned().unwrap_or_default())),
                Some(Err(e)) => Some(Err(e)),
                Some(Ok(false)) => None,
                None => {
                    problem = Some("the CRD was deleted while waiting for it".to_string());
                    None
                }
            },
        )
        .await;
        match end {
            WatchEnd::Done(Ok(crd)) => {
                c.discovery.insert_crd(&crd);
                c.emitter.emit(EventKind::CrdEstablished {
                    task: ctx.task.clone(),
                    name: name.to_string(),
                    waited: started.elapsed(),
                });
                Ok(())
            }
            WatchEnd::Done(Err(e)) => Err(TaskError::failed(
                format!("CustomResourceDefinition {name}: {e}"),
                1,
            )),
            WatchEnd::TimedOut(_) => Err(TaskError::failed(
                format!(
                    "CustomResourceDefinition {name} not Established after {:?}{}",
                    c.options.crd_timeout,
                    problem.map(|p| format!(": {p}")).unwrap_or_default()
                ),
                1,
            )),
            WatchEnd::Cancelled => Err(TaskError::interrupted(format!(
                "stopped while waiting for CustomResourceDefinition {name} to be Established"
            ))),
            WatchEnd::Failed(e) => Err(TaskError::failed(
                format!("cannot watch CustomResourceDefinition {name}: {e}"),
                1,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn crd_states() {
        assert_eq!(crd_state(&json!({})), Ok(false));
        assert_eq!(
            crd_state(
                &json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}})
            ),
            Ok(true)
        );
        assert!(
            crd_state(&json!({"status": {"conditions": [
                {"type": "NamesAccepted", "status": "False", "message": "plural taken"}]}}))
            .unwrap_err()
            .contains("plural taken")
        );
    }
}
