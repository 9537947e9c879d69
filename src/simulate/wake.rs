//! The wait at the top of the simulators' loops: until cancelled, until the watches deliver
//! something (with everything else already buffered, so one burst is one evaluation), until
//! the next thing is due, or until another signal fires.

use std::future::Future;

use futures::{Stream, StreamExt as _};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a loop woke up.
pub(crate) enum Wake<T> {
    /// Cancelled, or the watches ended: the loop stops.
    Stop,
    /// Watch events (maybe none: a timer or the signal fired).
    Events(Vec<T>),
}

/// Waits for the first of: `cancel`, events of `streams`, `next` (when something is due) and
/// `signal`; returns every event that is ready.
pub(crate) async fn wake<S, T>(
    streams: &mut S,
    next: Option<Instant>,
    signal: impl Future<Output = ()>,
    cancel: &CancellationToken,
) -> Wake<T>
where
    S: Stream<Item = T> + Unpin,
{
    let sleep = async {
        match next {
            Some(t) => tokio::time::sleep_until(t).await,
            None => std::future::pending().await,
        }
    };
    let mut events = Vec::new();
    tokio::select! {
        () = cancel.cancelled() => return Wake::Stop,
        () = signal => {}
        item = streams.next() => match item {
            Some(item) => events.push(item),
            None => return Wake::Stop,
        },
        () = sleep => {}
    }
    while let Some(Some(item)) = futures::FutureExt::now_or_never(streams.next()) {
        events.push(item);
    }
    Wake::Events(events)
}
