//! Which request errors are worth retrying, and how long to wait between tries.
//!
//! Transient: 429 (honouring `Retry-After`), 408, 409 (a create race or an optimistic-lock
//! conflict), 5xx (except the server-side-apply "typed patch" 500, which is an invalid
//! object), timeouts and broken connections. Permanent: every other 4xx (400 bad request,
//! 401, 403 forbidden, 404 not found / unknown kind, 405, 415, 422 invalid), and bodies we
//! cannot decode. Permanent errors fail the task at once.
//!
//! Backoff is exponential with "equal jitter" (half fixed, half random) and bounded both in
//! delay and in attempts. The CVO instead makes 2 tries 10 s apart (4 tries over 7 s when
//! initializing), cvo.md §4.3; ours gives up after about 6 s by default but retries faster.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::request::RequestError;

/// Whether an error is worth retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transience {
    /// Retry, after at least `retry_after` when the server asked for it.
    Transient {
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// Fail now.
    Permanent,
}

/// Classifies a request error.
#[must_use]
pub fn classify(err: &RequestError) -> Transience {
    match err {
        RequestError::Api {
            code,
            message,
            retry_after,
            ..
        } => match *code {
            429 => Transience::Transient {
                retry_after: *retry_after,
            },
            408 | 409 => Transience::Transient { retry_after: None },
            500 if message.contains("failed to create typed patch object")
                || message.contains("failed to create typed live object") =>
            {
                Transience::Permanent
            }
            500..=599 => Transience::Transient {
                retry_after: *retry_after,
            },
            _ => Transience::Permanent,
        },
        RequestError::Timeout(_) | RequestError::Transport(_) => {
            Transience::Transient { retry_after: None }
        }
        RequestError::Decode(_) | RequestError::Build(_) => Transience::Permanent,
    }
}

/// Bounded exponential backoff with jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Delay before the first retry (before jitter).
    pub initial: Duration,
    /// Growth per retry.
    pub factor: f64,
    /// Upper bound of one delay.
    pub max_delay: Duration,
    /// Tries in total, the first included (1 means no retries).
    pub max_attempts: u32,
    /// Upper bound for a server's `Retry-After`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_millis(200),
            factor: 2.0,
            max_delay: Duration::from_secs(5),
            max_attempts: 6,
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1 for the first retry), with `jitter` in
    /// `[0, 1)`: half of the exponential step is fixed, the other half scaled by `jitter`.
    /// A server's `retry_after` raises the delay to at least that (capped by
    /// [`RetryPolicy::max_retry_after`]).
    #[must_use]
    pub fn delay(&self, retry: u32, jitter: f64, retry_after: Option<Duration>) -> Duration {
        let exp = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial.as_secs_f64() * self.factor.powi(exp);
        let base = base.min(self.max_delay.as_secs_f64());
        let d = Duration::from_secs_f64(base / 2.0 + base / 2.0 * jitter.clamp(0.0, 1.0));
        match retry_after {
            Some(ra) => d.max(ra.min(self.max_retry_after)),
            None => d,
        }
    }

    /// No retries at all.
    #[must_use]
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }
}

/// A failure after retrying: the last error and how many tries were made.
#[derive(Debug, Clone)]
pub struct Exhausted {
    /// The last error.
    pub error: RequestError,
    /// Tries made.
    pub attempts: u32,
    /// Whether the retries stopped because of cancellation.
    pub cancelled: bool,
}

/// Runs `op` until it succeeds, fails permanently, runs out of attempts or `cancel` fires.
/// `transient` can turn an otherwise permanent error into a transient one (e.g. a 404 for a
/// kind whose CRD was just established); `on_retry(retry, delay, error)` is called before
/// each sleep. Returns the value and the number of tries.
///
/// # Errors
/// [`Exhausted`] with the last error.
pub async fn retry<T, Op, Fut>(
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    mut transient: impl FnMut(&RequestError, u32) -> bool,
    mut on_retry: impl FnMut(u32, Duration, &RequestError),
    mut op: Op,
) -> Result<(T, u32), Exhausted>
where
    Op: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let error = match op().await {
            Ok(v) => return Ok((v, attempt)),
            Err(e) => e,
        };
        let retry_after = match classify(&error) {
            Transience::Transient { retry_after } => retry_after,
            Transience::Permanent if transient(&error, attempt) => None,
            Transience::Permanent => {
                return Err(Exhausted {
                    error,
                    attempts: attempt,
                    cancelled: false,
                });
            }
        };
        if attempt >= policy.max_attempts || cancel.is_cancelled() {
            return Err(Exhausted {
                error,
                attempts: attempt,
                cancelled: cancel.is_cancelled(),
            });
        }
        let delay = policy.delay(attempt, rand::random::<f64>(), retry_after);
        on_retry(attempt, delay, &error);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = cancel.cancelled() => {
                return Err(Exhausted { error, attempts: attempt, cancelled: true });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn api(code: u16, message: &str) -> RequestError {
        RequestError::Api {
            code,
            reason: String::new(),
            message: message.into(),
            retry_after: None,
            details: None,
        }
    }

    #[test]
    fn classification() {
        let transient = Transience::Transient { retry_after: None };
        assert_eq!(classify(&api(409, "AlreadyExists")), transient);
        assert_eq!(classify(&api(500, "etcd leader changed")), transient);
        assert_eq!(classify(&api(503, "")), transient);
        assert_eq!(classify(&api(504, "")), transient);
        assert_eq!(
            classify(&RequestError::Timeout(Duration::from_secs(1))),
            transient
        );
        assert_eq!(
            classify(&RequestError::Transport("connection reset by peer".into())),
            transient
        );
        for code in [400, 401, 403, 404, 405, 415, 422] {
            assert_eq!(classify(&api(code, "")), Transience::Permanent, "{code}");
        }
        assert_eq!(
            classify(&api(
                500,
                "failed to create typed patch object (/v1, Kind=ConfigMap): .data: expected map"
            )),
            Transience::Permanent
        );
        assert_eq!(
            classify(&RequestError::Decode("eof".into())),
            Transience::Permanent
        );
        let throttled = RequestError::Api {
            code: 429,
            reason: "TooManyRequests".into(),
            message: String::new(),
            retry_after: Some(Duration::from_secs(2)),
            details: None,
        };
        assert_eq!(
            classify(&throttled),
            Transience::Transient {
                retry_after: Some(Duration::from_secs(2))
            }
        );
    }

    #[test]
    fn delays_grow_stay_bounded_and_honour_retry_after() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, 0.0, None), Duration::from_millis(100));
        assert_eq!(p.delay(1, 1.0, None), Duration::from_millis(200));
        assert_eq!(p.delay(2, 0.0, None), Duration::from_millis(200));
        assert_eq!(p.delay(3, 1.0, None), Duration::from_millis(800));
        for retry in 1..40 {
            for j in [0.0, 0.5, 0.999] {
                let d = p.delay(retry, j, None);
                assert!(d <= p.max_delay, "{retry} {j} {d:?}");
                assert!(d >= p.delay(retry.saturating_sub(1).max(1), 0.0, None) / 2);
            }
        }
        assert_eq!(
            p.delay(1, 0.0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, 0.0, Some(Duration::from_secs(3600))),
            p.max_retry_after
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_errors_until_success() {
        let calls = Cell::new(0);
        let retries = Cell::new(0);
        let started = tokio::time::Instant::now();
        let (v, attempts) = retry(
            &RetryPolicy::default(),
            &CancellationToken::new(),
            |_, _| false,
            |_, _, _| retries.set(retries.get() + 1),
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n < 3 {
                        Err(api(503, "unavailable"))
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await
        .unwrap();
        assert_eq!((v, attempts, retries.get()), (3, 3, 2));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(200) && waited <= Duration::from_millis(600),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_fail_at_once() {
        let calls = Cell::new(0);
        let err = retry(
            &RetryPolicy::default(),
            &CancellationToken::new(),
            |_, _| false,
            |_, _, _| {},
            || {
                calls.set(calls.get() + 1);
                async { Err::<(), _>(api(422, "invalid")) }
            },
        )
        .await
        .unwrap_err();
        assert_eq!(
            (calls.get(), err.attempts, err.error.code()),
            (1, 1, Some(422))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_and_within_bounds() {
        let policy = RetryPolicy::default();
        let started = tokio::time::Instant::now();
        let err = retry(
            &policy,
            &CancellationToken::new(),
            |_, _| false,
            |_, _, _| {},
            || async { Err::<(), _>(RequestError::Transport("connection refused".into())) },
        )
        .await
        .unwrap_err();
        assert_eq!(err.attempts, policy.max_attempts);
        let max_total: Duration = (1..policy.max_attempts)
            .map(|r| policy.delay(r, 1.0, None))
            .sum();
        assert!(started.elapsed() <= max_total, "{:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_can_make_an_error_transient() {
        let calls = Cell::new(0);
        let (_, attempts) = retry(
            &RetryPolicy::default(),
            &CancellationToken::new(),
            |e, attempt| e.is(404) && attempt < 3,
            |_, _, _| {},
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move { if n < 3 { Err(api(404, "")) } else { Ok(()) } }
            },
        )
        .await
        .unwrap();
        assert_eq!(attempts, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_stops_the_backoff() {
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            c2.cancel();
        });
        let err = retry(
            &RetryPolicy {
                initial: Duration::from_secs(10),
                ..RetryPolicy::default()
            },
            &cancel,
            |_, _| false,
            |_, _, _| {},
            || async { Err::<(), _>(api(503, "")) },
        )
        .await
        .unwrap_err();
        assert!(err.cancelled);
        assert_eq!(err.attempts, 1);
    }
}
