//! Waiting for one object to reach a state, with a watch (never polling), bounded by a
//! deadline and a cancellation token.
//!
//! The watch starts at the resourceVersion of the state the caller already has, so no change
//! in between is missed; an expired resourceVersion (410) or a dropped stream re-opens the
//! watch without losing the deadline. kube's `await_condition` has no timeout and no
//! cancellation (rust-stack.md §2 pitfall 6), hence this helper.

use std::time::Duration;

use futures::StreamExt as _;
use kube::Client;
use kube::api::{DynamicObject, WatchEvent, WatchParams};
use kube::core::Request;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::body;
use super::request::{self, RequestError};
use super::retry::{Transience, classify};

/// How a wait ended.
#[derive(Debug)]
pub enum WatchEnd<T> {
    /// The check returned a value.
    Done(T),
    /// The deadline passed; the last state seen is given.
    TimedOut(Option<Value>),
    /// The token fired.
    Cancelled,
    /// A permanent error (e.g. the watch is forbidden).
    Failed(RequestError),
}

/// Reads one object: `Ok(None)` when it does not exist.
///
/// # Errors
/// The request error (other than 404).
pub async fn get(
    client: &Client,
    collection: &str,
    name: &str,
    timeout: Duration,
) -> Result<Option<Value>, RequestError> {
    let req = Request::new(collection)
        .get(name, &kube::api::GetParams::default())
        .map_err(|e| RequestError::Build(e.to_string()))?;
    match request::send(client, req, timeout).await {
        Ok(r) => Ok(Some(r.body)),
        Err(e) if e.is(404) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Watches object `name` in `collection` until `check` returns `Some`. `initial` is the
/// state the caller has (`None`: absent or unknown); it is checked first, and its
/// resourceVersion is where the watch starts. `check` sees `None` when the object is absent.
#[allow(clippy::too_many_arguments)]
pub async fn watch_until<T>(
    client: &Client,
    collection: &str,
    name: &str,
    initial: Option<Value>,
    deadline: Instant,
    cancel: &CancellationToken,
    mut check: impl FnMut(Option<&Value>) -> Option<T>,
) -> WatchEnd<T> {
    let mut state = initial;
    if let Some(t) = check(state.as_ref()) {
        return WatchEnd::Done(t);
    }
    let mut rv = state
        .as_ref()
        .and_then(body::resource_version)
        .map(str::to_owned);
    let mut failures = 0u32;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return WatchEnd::TimedOut(state);
        }
        // Server-side timeout a little past our deadline (at most ~5 minutes per stream).
        let server_timeout =
            u32::try_from(remaining.as_secs().saturating_add(1).min(290)).unwrap_or(290);
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(server_timeout);
        let req = match Request::new(collection).watch(&params, rv.as_deref().unwrap_or("")) {
            Ok(r) => r,
            Err(e) => return WatchEnd::Failed(RequestError::Build(e.to_string())),
        };
        let opened = tokio::select! {
            r = client.request_events::<DynamicObject>(req) => r,
            () = tokio::time::sleep_until(deadline) => return WatchEnd::TimedOut(state),
            () = cancel.cancelled() => return WatchEnd::Cancelled,
        };
        let mut stream = match opened {
            Ok(s) => s.boxed(),
            Err(e) => {
                let e = RequestError::from_kube(e);
                if e.is(410) {
                    rv = None;
                    continue;
                }
                if classify(&e) == Transience::Permanent {
                    return WatchEnd::Failed(e);
                }
                failures += 1;
                if !pause(failures, deadline, cancel).await {
                    return if cancel.is_cancelled() {
                        WatchEnd::Cancelled
                    } else {
                        WatchEnd::TimedOut(state)
                    };
                }
                continue;
            }
        };
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                () = tokio::time::sleep_until(deadline) => return WatchEnd::TimedOut(state),
                () = cancel.cancelled() => return WatchEnd::Cancelled,
            };
            let event = match next {
                None => break, // server timeout or closed stream: re-open from `rv`
                Some(Err(e)) => {
                    let e = RequestError::from_kube(e);
                    if e.is(410) {
                        rv = None;
                    }
                    failures += 1;
                    if !pause(failures, deadline, cancel).await {
                        return if cancel.is_cancelled() {
                            WatchEnd::Cancelled
                        } else {
                            WatchEnd::TimedOut(state)
                        };
                    }
                    break;
                }
                Some(Ok(ev)) => ev,
            };
            failures = 0;
            match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                    rv = body::resource_version(&v).map(str::to_owned);
                    state = Some(v);
                }
                WatchEvent::Deleted(o) => {
                    rv = o.metadata.resource_version.clone();
                    state = None;
                }
                WatchEvent::Bookmark(b) => {
                    rv = Some(b.metadata.resource_version);
                    continue;
                }
                WatchEvent::Error(s) => {
                    if s.code == 410 {
                        // Expired: start again from the current state.
                        rv = None;
                    }
                    break;
                }
            }
            if let Some(t) = check(state.as_ref()) {
                return WatchEnd::Done(t);
            }
        }
    }
}

/// Backs off after a broken watch (bounded); `false` if the deadline or the token came first.
async fn pause(failures: u32, deadline: Instant, cancel: &CancellationToken) -> bool {
    let d = Duration::from_millis(200 * u64::from(failures.min(10)));
    let until = (Instant::now() + d).min(deadline);
    tokio::select! {
        () = tokio::time::sleep_until(until) => Instant::now() < deadline,
        () = cancel.cancelled() => false,
    }
}
