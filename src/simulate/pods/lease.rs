//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's lease lock does it:
//! a candidate takes a lease that is free or expired (`renewTime` + `leaseDurationSeconds` in
//! the past), the holder renews `renewTime`, and a holder that stops gracefully releases it
//! (clears `holderIdentity`). Pure: the requests are sent by the pod loop.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// What a candidate does next with the lease it read.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// No lease yet: create this one.
    Create(Value),
    /// The lease is free, expired or ours: write this (an update with the read
    /// `resourceVersion`).
    Take(Value),
    /// Another holder's lease runs until this time (microseconds since the epoch).
    Wait {
        /// The holder.
        holder: String,
        /// When its lease expires.
        until_us: i64,
    },
}

/// `MicroTime`: RFC 3339 in UTC with exactly six fractional digits.
#[must_use]
pub fn micro_time(us: i64) -> String {
    let seconds = us.div_euclid(1_000_000);
    let fraction = us.rem_euclid(1_000_000);
    let whole = Timestamp::from_second(seconds)
        .map_or_else(|_| "1970-01-01T00:00:00Z".into(), |t| t.to_string());
    format!("{}.{fraction:06}Z", whole.trim_end_matches('Z'))
}

/// Parses a `MicroTime` (or any RFC 3339 time) to microseconds since the epoch.
#[must_use]
pub fn parse_time(s: &str) -> Option<i64> {
    s.parse::<Timestamp>().ok().map(|t| t.as_microsecond())
}

/// Now, in microseconds since the epoch.
#[must_use]
pub fn now_us() -> i64 {
    Timestamp::now().as_microsecond()
}

fn seconds(d: Duration) -> u64 {
    d.as_secs().max(1)
}

/// The holder of `lease` (`None` when free).
#[must_use]
pub fn holder(lease: &Value) -> Option<&str> {
    lease
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
}

/// When `lease` expires (microseconds), from its `renewTime` and duration.
#[must_use]
pub fn expires_us(lease: &Value) -> Option<i64> {
    let renewed = lease
        .pointer("/spec/renewTime")
        .or_else(|| lease.pointer("/spec/acquireTime"))
        .and_then(Value::as_str)
        .and_then(parse_time)?;
    let duration = lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Some(renewed + duration * 1_000_000)
}

/// What candidate `me` does with `lease` (`None`: it does not exist) at `now_us`.
#[must_use]
pub fn decide(
    lease: Option<&Value>,
    namespace: &str,
    name: &str,
    me: &str,
    duration: Duration,
    now_us: i64,
) -> Step {
    let now = micro_time(now_us);
    let Some(lease) = lease else {
        return Step::Create(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "holderIdentity": me,
                "leaseDurationSeconds": seconds(duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }));
    };
    let current = holder(lease);
    if let Some(h) = current
        && h != me
        && let Some(until_us) = expires_us(lease)
        && until_us > now_us
    {
        return Step::Wait {
            holder: h.to_string(),
            until_us,
        };
    }
    let mut taken = lease.clone();
    let spec = &mut taken["spec"];
    if current != Some(me) {
        let transitions = spec
            .get("leaseTransitions")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        spec["leaseTransitions"] = json!(transitions + 1);
        spec["acquireTime"] = json!(now);
    }
    spec["holderIdentity"] = json!(me);
    spec["leaseDurationSeconds"] = json!(seconds(duration));
    spec["renewTime"] = json!(now);
    Step::Take(taken)
}

/// The lease released by its holder: no holder, expiring a second after now.
#[must_use]
pub fn released(lease: &Value, now_us: i64) -> Value {
    let mut out = lease.clone();
    out["spec"]["holderIdentity"] = Value::Null;
    out["spec"]["leaseDurationSeconds"] = json!(1);
    out["spec"]["renewTime"] = json!(micro_time(now_us));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Duration = Duration::from_secs(3);

    #[test]
    fn micro_time_has_six_digits_and_round_trips() {
        let us = 1_764_000_000_123_456;
        let s = micro_time(us);
        assert!(s.ends_with(".123456Z"), "{s}");
        assert_eq!(parse_time(&s), Some(us));
        assert!(micro_time(1_000_000).ends_with("00:00:01.000000Z"));
    }

    #[test]
    fn a_candidate_creates_takes_or_waits() {
        let now = 1_764_000_000_000_000;
        let Step::Create(lease) = decide(None, "ns", "op", "op#1", D, now) else {
            panic!("no lease: create");
        };
        assert_eq!(holder(&lease), Some("op#1"));
        assert_eq!(expires_us(&lease), Some(now + 3_000_000));
        // Held by another and fresh: wait until it expires.
        match decide(Some(&lease), "ns", "op", "op#2", D, now + 1_000_000) {
            Step::Wait { holder, until_us } => {
                assert_eq!(holder, "op#1");
                assert_eq!(until_us, now + 3_000_000);
            }
            other => panic!("{other:?}"),
        }
        // Expired: taken, with one more transition.
        let Step::Take(taken) = decide(Some(&lease), "ns", "op", "op#2", D, now + 4_000_000) else {
            panic!("expired: take");
        };
        assert_eq!(holder(&taken), Some("op#2"));
        assert_eq!(taken["spec"]["leaseTransitions"], 1);
        // The holder renews without a transition.
        let Step::Take(renewed) = decide(Some(&lease), "ns", "op", "op#1", D, now + 1_000_000)
        else {
            panic!("ours: renew");
        };
        assert_eq!(renewed["spec"]["leaseTransitions"], 0);
        assert_eq!(expires_us(&renewed), Some(now + 4_000_000));
        // Released: free at once.
        let free = released(&lease, now + 500_000);
        assert_eq!(holder(&free), None);
        assert!(matches!(
            decide(Some(&free), "ns", "op", "op#2", D, now + 600_000),
            Step::Take(_)
        ));
    }
}
