//! Following a whole collection: list it, then watch from the list's resourceVersion, and list
//! again when the watch expires (410 Gone). The collection counterpart of [`super::watch`],
//! built on the same request layer and error types, so the simulator and the engine's waits
//! read the cluster the same way.
//!
//! The stream never ends: a failed list or watch is reported as
//! [`CollectionEvent::Failed`] and retried after a bounded backoff (a collection whose CRD does
//! not exist yet starts to be followed as soon as the CRD is served).

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt as _, stream};
use kube::Client;
use kube::api::{DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::Request;
use serde_json::Value;

use super::body;
use super::request::{self, RequestError};

/// Per-request timeout of a list.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// The server-side timeout of one watch stream (it is re-opened from the last resourceVersion).
const WATCH_SECONDS: u32 = 290;

/// What following a collection reports.
#[derive(Debug, Clone)]
pub enum CollectionEvent {
    /// Every object in the collection now: on start and after each re-list. Objects known
    /// before and not listed again are gone.
    Listed(Vec<Value>),
    /// An object was created or changed.
    Applied(Value),
    /// An object was deleted (its last state).
    Deleted(Value),
    /// Listing or watching failed; it is retried after a pause.
    Failed(RequestError),
}

type Events = BoxStream<'static, Result<WatchEvent<DynamicObject>, kube::Error>>;

struct Follow {
    client: Client,
    collection: String,
    /// Where the watch resumes; `None`: list first.
    resource_version: Option<String>,
    events: Option<Events>,
    /// Consecutive failures, for the backoff.
    failures: u32,
}

/// Follows collection `collection` (a URL path such as `/apis/apps/v1/deployments`).
#[must_use]
pub fn list_watch(client: Client, collection: String) -> BoxStream<'static, CollectionEvent> {
    let follow = Follow {
        client,
        collection,
        resource_version: None,
        events: None,
        failures: 0,
    };
    stream::unfold(follow, |mut f| async move {
        let event = f.next().await;
        Some((event, f))
    })
    .boxed()
}

/// Backoff after `failures` consecutive failures: 200 ms, 400 ms, then 500 ms (a collection
/// whose CRD is about to be created is picked up within half a second of it being served).
fn backoff(failures: u32) -> Duration {
    Duration::from_millis((200 * u64::from(failures.max(1))).min(500))
}

impl Follow {
    async fn next(&mut self) -> CollectionEvent {
        if self.failures > 0 && self.events.is_none() {
            tokio::time::sleep(backoff(self.failures)).await;
        }
        loop {
            let Some(rv) = self.resource_version.clone() else {
                return match list(&self.client, &self.collection).await {
                    Ok((items, rv)) => {
                        self.resource_version = Some(rv);
                        self.failures = 0;
                        CollectionEvent::Listed(items)
                    }
                    Err(e) => self.failed(e),
                };
            };
            let events = match &mut self.events {
                Some(events) => events,
                None => match open(&self.client, &self.collection, &rv).await {
                    Ok(events) => self.events.insert(events),
                    Err(e) if e.is(410) => {
                        self.resource_version = None;
                        continue;
                    }
                    Err(e) => return self.failed(e),
                },
            };
            match events.next().await {
                // The server closed the stream (its timeout): re-open from `rv`.
                None => self.events = None,
                Some(Err(e)) => {
                    let e = RequestError::from_kube(e);
                    if e.is(410) {
                        self.events = None;
                        self.resource_version = None;
                        continue;
                    }
                    return self.failed(e);
                }
                Some(Ok(event)) => {
                    if let Some(e) = self.on_event(event) {
                        self.failures = 0;
                        return e;
                    }
                }
            }
        }
    }

    fn failed(&mut self, e: RequestError) -> CollectionEvent {
        self.events = None;
        self.failures = self.failures.saturating_add(1);
        CollectionEvent::Failed(e)
    }

    /// Turns one watch event into what the caller sees (`None`: nothing to report).
    fn on_event(&mut self, event: WatchEvent<DynamicObject>) -> Option<CollectionEvent> {
        match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                self.resource_version = body::resource_version(&v).map(str::to_owned);
                Some(CollectionEvent::Applied(v))
            }
            WatchEvent::Deleted(o) => {
                let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                self.resource_version = body::resource_version(&v).map(str::to_owned);
                Some(CollectionEvent::Deleted(v))
            }
            WatchEvent::Bookmark(b) => {
                self.resource_version = Some(b.metadata.resource_version);
                None
            }
            WatchEvent::Error(s) => {
                self.events = None;
                if s.code == 410 {
                    // Expired: list again.
                    self.resource_version = None;
                    return None;
                }
                Some(self.failed(RequestError::Api {
                    code: s.code,
                    reason: s.reason,
                    message: s.message,
                    retry_after: None,
                    details: None,
                }))
            }
        }
    }
}

/// Lists `collection`: its items and the list's resourceVersion.
async fn list(client: &Client, collection: &str) -> Result<(Vec<Value>, String), RequestError> {
    let req = Request::new(collection)
        .list(&ListParams::default())
        .map_err(|e| RequestError::Build(e.to_string()))?;
    let r = request::send(client, req, LIST_TIMEOUT).await?;
    let rv = r
        .body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let items = match r.body.get("items") {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    Ok((items, rv))
}

/// Opens a watch of `collection` from resourceVersion `rv`.
async fn open(client: &Client, collection: &str, rv: &str) -> Result<Events, RequestError> {
    let params = WatchParams::default().timeout(WATCH_SECONDS);
    let req = Request::new(collection)
        .watch(&params, rv)
        .map_err(|e| RequestError::Build(e.to_string()))?;
    client
        .request_events::<DynamicObject>(req)
        .await
        .map(futures::StreamExt::boxed)
        .map_err(RequestError::from_kube)
}
