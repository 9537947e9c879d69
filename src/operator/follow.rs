//! ClusterVersion `version` as the cluster has it now, followed with a list+watch (the kind
//! may not be served yet: the payload's own CRD brings it, and the follower picks it up once
//! it is).

use futures::StreamExt as _;
use kube::Client;
use serde_json::Value;
use tokio::sync::watch;

use crate::apply::clusterversion::NAME;
use crate::cluster::list_watch::{CollectionEvent, list_watch};

/// The ClusterVersion collection.
pub const COLLECTION: &str = "/apis/config.openshift.io/v1/clusterversions";

/// Starts following; the receiver holds the latest object (`None`: absent or not served),
/// starting from `initial`. The task ends when every receiver is gone.
pub fn follow(client: Client, initial: Option<Value>) -> watch::Receiver<Option<Value>> {
    let (tx, rx) = watch::channel(initial);
    tokio::spawn(async move {
        let mut events = list_watch(client, COLLECTION.to_string());
        loop {
            let event = tokio::select! {
                () = tx.closed() => return,
                e = events.next() => e,
            };
            let Some(event) = event else { return };
            let named =
                |o: &Value| o.pointer("/metadata/name").and_then(Value::as_str) == Some(NAME);
            let next = match event {
                CollectionEvent::Listed(all) => Some(all.into_iter().find(named)),
                CollectionEvent::Applied(o) if named(&o) => Some(Some(o)),
                CollectionEvent::Deleted(o) if named(&o) => Some(None),
                CollectionEvent::Failed(e) => {
                    tracing::trace!("following clusterversion {NAME}: {e}");
                    None
                }
                _ => None,
            };
            if let Some(next) = next {
                tx.send_if_modified(|cur| {
                    let changed = *cur != next;
                    *cur = next;
                    changed
                });
            }
        }
    });
    rx
}
