//! The sync loop's clock, as the CVO keeps it (cvo.md §8.1): a reconcile interval `M` chosen
//! once per process (the base × U[1, 2)), an error backoff of `E·2ⁿ` with `E = M/16` for the
//! first three consecutive failures and `M` from the fourth on, each with up to +20% jitter,
//! and a pass timeout of `M` while initializing and `2M` otherwise.
//!
//! As in the CVO, the failure count is never reset by a success: once a process has failed four
//! passes, every later failure waits a full interval.

use std::time::Duration;

use rand::Rng as _;

use crate::plan::Mode;

/// The CVO's base reconcile interval (`minimumReconcileInterval` before the jitter).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(120);

/// The loop's timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// `M`: the time between reconcile passes.
    pub interval: Duration,
    /// A fixed pass timeout instead of `M` / `2M`.
    pub pass_timeout: Option<Duration>,
}

impl Schedule {
    /// `base` × U[1, 2), the CVO's per-process choice; `jitter: false` keeps `base` (tests and
    /// people who want a predictable interval).
    #[must_use]
    pub fn new(base: Duration, jitter: bool, pass_timeout: Option<Duration>) -> Self {
        let factor = if jitter {
            rand::rng().random_range(1.0..2.0)
        } else {
            1.0
        };
        Schedule {
            interval: base.mul_f64(factor),
            pass_timeout,
        }
    }

    /// The delay before the next pass after the `failures`-th consecutive failure, before
    /// jitter.
    #[must_use]
    pub fn backoff(&self, failures: u32) -> Duration {
        if failures >= 4 {
            return self.interval;
        }
        (self.interval / 16) * 2u32.pow(failures.max(1))
    }

    /// [`Schedule::backoff`] with up to +20% jitter.
    #[must_use]
    pub fn backoff_jittered(&self, failures: u32) -> Duration {
        self.backoff(failures)
            .mul_f64(1.0 + rand::rng().random_range(0.0..0.2))
    }

    /// How long one pass in `mode` may run.
    #[must_use]
    pub fn pass_timeout(&self, mode: Mode) -> Duration {
        self.pass_timeout.unwrap_or(match mode {
            Mode::Initializing => self.interval,
            Mode::Updating | Mode::Reconciling => self.interval * 2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_three_times_then_waits_an_interval() {
        let s = Schedule::new(Duration::from_secs(160), false, None);
        let b: Vec<u64> = (1..=5).map(|n| s.backoff(n).as_secs()).collect();
        assert_eq!(b, [20, 40, 80, 160, 160]);
        let j = s.backoff_jittered(1);
        assert!(
            j >= Duration::from_secs(20) && j < Duration::from_secs(24),
            "{j:?}"
        );
        assert_eq!(s.pass_timeout(Mode::Initializing), Duration::from_secs(160));
        assert_eq!(s.pass_timeout(Mode::Updating), Duration::from_secs(320));
        let fixed = Schedule::new(Duration::from_secs(1), false, Some(Duration::from_secs(9)));
        assert_eq!(
            fixed.pass_timeout(Mode::Initializing),
            Duration::from_secs(9)
        );
    }

    #[test]
    fn the_interval_is_between_one_and_two_bases() {
        for _ in 0..50 {
            let s = Schedule::new(DEFAULT_RESYNC, true, None);
            assert!(s.interval >= DEFAULT_RESYNC && s.interval < DEFAULT_RESYNC * 2);
        }
    }
}
