//! Payload analysis without a cluster: what an update from one payload to another does to
//! every object ([`upgrade_plan`]), and ordering hazards the CVO would run into ([`lint`]).
//!
//! Both work on loaded payloads and their updating-mode [`Plan`](crate::plan::Plan)s, and
//! decide "can this task run before that one" with the plan's graph
//! ([`Plan::runs_before`](crate::plan::Plan::runs_before)). The building blocks are
//! [`objects`] (object identity, content comparison and diffs), [`references`] (what a
//! workload's pods use) and [`placement`] (where a task sits in a plan).

pub mod lint;
pub mod objects;
pub mod placement;
pub mod references;
pub mod upgrade_plan;

use std::collections::BTreeSet;

use crate::manifest::Manifest;
use crate::payload::Payload;

/// The annotation prefix that names the profiles a manifest belongs to.
pub const INCLUDE_PREFIX: &str = "include.release.openshift.io/";

/// Every profile named by an `include.release.openshift.io/<profile>` annotation of any
/// document of the payload, included or excluded, sorted.
#[must_use]
pub fn profiles_seen(payload: &Payload) -> BTreeSet<String> {
    all_manifests(payload)
        .filter_map(Manifest::annotations)
        .flat_map(|a| a.keys())
        .filter_map(|k| k.strip_prefix(INCLUDE_PREFIX))
        .map(str::to_string)
        .collect()
}

/// The included manifests followed by the excluded ones.
pub fn all_manifests(payload: &Payload) -> impl Iterator<Item = &Manifest> {
    payload
        .manifests
        .iter()
        .chain(payload.excluded.iter().map(|e| &e.manifest))
}
