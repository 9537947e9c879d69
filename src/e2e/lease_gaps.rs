//! Leaderless times of real pods (`e2e upgrade --real-pods`), read from the Leases they hold.
//!
//! As for simulated pods, a gap is a time during which no pod *could* lead: the lease is still
//! held by a holder that no longer renews it. The simulator knows when its own leaders fail to
//! renew; from outside a real pod that is not known, so a gap here runs from the old holder's
//! last `renewTime` to the new holder's `acquireTime` (up to one renew period longer than the
//! time the old holder still believed it led). A lease released by its holder (`holderIdentity`
//! cleared) can be taken at once: the time until someone does is no gap. A lease expired with
//! no new holder by the end of the run is an open gap. Times come from the Lease fields,
//! written with the pods' clocks (the same host on kind and on the test plane).

use std::collections::HashMap;

use serde_json::Value;

use crate::simulate::pods::lease::{expires_us, holder, parse_time};

/// A leaderless time of one Lease, in microseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Gap {
    /// The Lease's namespace.
    pub namespace: String,
    /// The holder before the gap (a pod name, as the stand-in operator names itself).
    pub pod: String,
    /// Its last renewal or its release.
    pub from_us: i64,
    /// The next acquisition (`None`: none before the end of the run).
    pub to_us: Option<i64>,
}

/// What the watch knows of one Lease.
#[derive(Debug)]
struct Seen {
    /// The holder (`None`: none, or released).
    holder: Option<String>,
    /// The last `renewTime` (or `acquireTime`).
    renewed_us: i64,
    /// When the lease expires without a renewal.
    expires_us: i64,
}

/// The Leases of a run and their gaps.
#[derive(Debug, Default)]
pub(super) struct LeaseGaps {
    leases: HashMap<(String, String), Seen>,
    gaps: Vec<Gap>,
}

fn renewed_us(lease: &Value) -> Option<i64> {
    lease
        .pointer("/spec/renewTime")
        .or_else(|| lease.pointer("/spec/acquireTime"))
        .and_then(Value::as_str)
        .and_then(parse_time)
}

fn key(lease: &Value) -> (String, String) {
    let field = |p: &str| {
        lease
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("/metadata/namespace"), field("/metadata/name"))
}

impl LeaseGaps {
    /// A Lease as it is when the watch starts: what follows is measured from it.
    pub fn baseline(&mut self, lease: &Value) {
        let Some(renewed) = renewed_us(lease) else {
            return;
        };
        let h = holder(lease).map(str::to_string);
        self.leases.insert(
            key(lease),
            Seen {
                holder: h,
                renewed_us: renewed,
                expires_us: expires_us(lease).unwrap_or(renewed),
            },
        );
    }

    /// A Lease created or changed during the run.
    pub fn observe(&mut self, lease: &Value) {
        let Some(renewed) = renewed_us(lease) else {
            return;
        };
        let k = key(lease);
        let h = holder(lease).map(str::to_string);
        let expires = expires_us(lease).unwrap_or(renewed);
        let Some(seen) = self.leases.get_mut(&k) else {
            // A new lease: its first holder follows nobody.
            self.leases.insert(
                k,
                Seen {
                    holder: h,
                    renewed_us: renewed,
                    expires_us: expires,
                },
            );
            return;
        };
        match h {
            Some(h) => {
                if let Some(prev) = seen.holder.as_ref().filter(|p| **p != h) {
                    let acquired = lease
                        .pointer("/spec/acquireTime")
                        .and_then(Value::as_str)
                        .and_then(parse_time)
                        .unwrap_or(renewed);
                    if acquired > seen.renewed_us {
                        self.gaps.push(Gap {
                            namespace: k.0.clone(),
                            pod: prev.clone(),
                            from_us: seen.renewed_us,
                            to_us: Some(acquired),
                        });
                    }
                }
                seen.holder = Some(h);
            }
            None => {
                // Released: free for anyone at once.
                seen.holder = None;
            }
        }
        seen.renewed_us = renewed;
        seen.expires_us = expires;
    }

    /// The gaps of the run, with those still open at `end_us`: a lease expired and not taken
    /// again.
    pub fn finish(mut self, end_us: i64) -> Vec<Gap> {
        for ((namespace, _), seen) in self.leases {
            let Some(pod) = seen.holder else {
                continue;
            };
            if seen.expires_us < end_us {
                self.gaps.push(Gap {
                    namespace,
                    pod,
                    from_us: seen.renewed_us,
                    to_us: None,
                });
            }
        }
        self.gaps.sort_by_key(|g| g.from_us);
        self.gaps
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::simulate::pods::lease::micro_time;

    const S: i64 = 1_000_000;

    fn lease(holder: &str, acquired: i64, renewed: i64) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "op"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3,
                     "acquireTime": micro_time(acquired), "renewTime": micro_time(renewed)}
        })
    }

    #[test]
    fn a_released_lease_taken_later_is_no_gap() {
        let mut g = LeaseGaps::default();
        g.baseline(&lease("old", 0, 10 * S));
        g.observe(&lease("old", 0, 11 * S));
        g.observe(&lease("", 0, 12 * S));
        g.observe(&lease("new", 20 * S, 20 * S));
        g.observe(&lease("new", 20 * S, 21 * S));
        assert_eq!(g.finish(22 * S), vec![]);
    }

    #[test]
    fn a_holder_that_stops_renewing_leaves_a_gap_until_the_lease_is_taken_over() {
        let mut g = LeaseGaps::default();
        g.observe(&lease("old", S, S));
        g.observe(&lease("old", S, 2 * S));
        // Expired at 5 s; taken over at 6 s.
        g.observe(&lease("new", 6 * S, 6 * S));
        let gaps = g.finish(7 * S);
        assert_eq!(
            gaps,
            vec![Gap {
                namespace: "ns".into(),
                pod: "old".into(),
                from_us: 2 * S,
                to_us: Some(6 * S),
            }]
        );
    }

    #[test]
    fn a_lease_expired_at_the_end_is_an_open_gap_and_a_renewed_or_released_one_is_not() {
        let mut g = LeaseGaps::default();
        g.observe(&lease("a", S, S));
        g.observe(&lease("a", S, 2 * S));
        assert!(LeaseGaps::finish(std::mem::take(&mut g), 4 * S).is_empty());
        g.observe(&lease("a", S, S));
        let open = g.finish(10 * S);
        assert_eq!(open.len(), 1);
        assert_eq!((open[0].pod.as_str(), open[0].to_us), ("a", None));
        let mut r = LeaseGaps::default();
        r.observe(&lease("a", S, S));
        r.observe(&lease("", S, 2 * S));
        assert!(r.finish(30 * S).is_empty());
    }
}
