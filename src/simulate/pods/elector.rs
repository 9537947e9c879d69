//! One pod's side of leader election: it reads the Lease named after its workload as itself,
//! takes it when it is free, expired or its own, renews it while it leads, and releases it
//! when it stops. The decisions are [`super::lease`]'s; this sends them.

use std::time::Duration;

use kube::Client;
use serde_json::Value;
use tokio::time::Instant;

use super::identity::Identity;
use super::lease::{self, Step};
use crate::cluster::request::RequestError;
use crate::manifest::ObjectId;

/// What one election step ended with.
#[derive(Debug)]
pub(super) enum Tick {
    /// The pod holds the lease (`first`: it has just taken it).
    Leads {
        /// Taken now rather than renewed.
        first: bool,
    },
    /// Another pod holds a lease that has not expired.
    Waits,
    /// A request failed; `lost_lead`: the pod led and its lease has now run out.
    Failed {
        /// `get`, `create` or `update`.
        verb: &'static str,
        /// The error.
        error: RequestError,
        /// The pod was the leader before this step.
        was_leader: bool,
        /// The pod is no longer the leader.
        lost_lead: bool,
    },
}

/// A pod's election state.
pub(super) struct Elector {
    /// It holds the lease.
    pub leader: bool,
    /// The lease as last written or read.
    lease: Option<Value>,
    /// The last successful renewal.
    last_renew: Option<Instant>,
    /// When it acts next.
    pub next: Instant,
}

/// The path of lease `name` (or of the collection) in the workload's namespace.
pub(super) fn path(workload: &ObjectId, name: Option<&str>) -> String {
    let ns = workload.namespace.as_deref().unwrap_or("default");
    match name {
        Some(n) => format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{n}"),
        None => format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
    }
}

impl Elector {
    /// A candidate that acts at once.
    pub fn new(now: Instant) -> Self {
        Elector {
            leader: false,
            lease: None,
            last_renew: None,
            next: now,
        }
    }

    /// One step for pod `pod` as `identity`: renew, take, or wait for the lease of `workload`.
    /// Holders renew and candidates retry every third of `duration`, or when the holder's
    /// lease runs out if that is sooner.
    pub async fn tick(
        &mut self,
        client: &Client,
        identity: &Identity,
        workload: &ObjectId,
        pod: &str,
        duration: Duration,
        now: Instant,
    ) -> Tick {
        let period = duration / 3;
        let at = path(workload, Some(&workload.name));
        let namespace = workload.namespace.clone().unwrap_or_default();
        self.next = now + period;
        let read = if self.leader && self.lease.is_some() {
            Ok(self.lease.clone())
        } else {
            match identity.send(client, http::Method::GET, &at, None).await {
                Ok(r) => Ok(Some(r.body)),
                Err(e) if e.is(404) => Ok(None),
                Err(e) => Err(("get", e)),
            }
        };
        let written = match read {
            Err(e) => Err(e),
            Ok(current) => match lease::decide(
                current.as_ref(),
                &namespace,
                &workload.name,
                pod,
                duration,
                lease::now_us(),
            ) {
                Step::Wait { until_us, .. } => {
                    self.leader = false;
                    self.lease = None;
                    let wait_us = u64::try_from((until_us - lease::now_us()).max(0)).unwrap_or(0);
                    self.next = (now + Duration::from_micros(wait_us)).min(now + period);
                    return Tick::Waits;
                }
                Step::Create(body) => identity
                    .send(
                        client,
                        http::Method::POST,
                        &path(workload, None),
                        Some(&body),
                    )
                    .await
                    .map_err(|e| ("create", e)),
                Step::Take(body) => identity
                    .send(client, http::Method::PUT, &at, Some(&body))
                    .await
                    .map_err(|e| ("update", e)),
            },
        };
        match written {
            Ok(answer) => {
                self.lease = Some(answer.body);
                self.last_renew = Some(now);
                let first = !self.leader;
                self.leader = true;
                Tick::Leads { first }
            }
            Err((verb, error)) => {
                let was_leader = self.leader;
                if error.is(409) {
                    // Written by someone since it was read: read it again at once.
                    self.lease = None;
                    self.next = now;
                } else if was_leader && self.last_renew.is_some_and(|t| now - t > duration) {
                    self.leader = false;
                    self.lease = None;
                }
                Tick::Failed {
                    verb,
                    error,
                    was_leader,
                    lost_lead: was_leader && !self.leader,
                }
            }
        }
    }

    /// Releases the lease when it holds it (a pod stopping gracefully).
    ///
    /// # Errors
    /// The [`RequestError`] of the update (403 once the pod lost its rights).
    pub async fn release(
        &self,
        client: &Client,
        identity: &Identity,
        workload: &ObjectId,
    ) -> Result<(), RequestError> {
        let (true, Some(held)) = (self.leader, &self.lease) else {
            return Ok(());
        };
        let body = lease::released(held, lease::now_us());
        identity
            .send(
                client,
                http::Method::PUT,
                &path(workload, Some(&workload.name)),
                Some(&body),
            )
            .await
            .map(|_| ())
    }
}
