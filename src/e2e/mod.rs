//! The upgrade e2e harness: install a payload, upgrade to another with simulated operators,
//! and check the order of what happened.
//!
//! ```text
//! load OLD, NEW ──► missing kinds? (stub CRDs) ──► install OLD (initializing) ──► upgrade to NEW (updating)
//!                                                    │  simulator(OLD)              │  simulator(NEW)
//!                                                    │  pods(OLD and NEW, live through both runs)
//!                                                    └──────── timeline: writes, waits, watch events, harm
//!                                                                  │
//!                     checks: invariants, the story check, live-pods-keep-access, assertions
//!                                                                  │
//!                                           text, JSON, JUnit XML, Chrome trace
//! ```
//!
//! - [`harness`]: the runs ([`upgrade`]).
//! - [`timeline`]: the recorded events and their JSON.
//! - [`cleanup`]: removing both payloads' objects (`--clean`, and between tests).
//! - [`checks`]: invariants over the timeline and the `delete-before-workload-update` check.
//! - [`harm`]: what the simulated pods ([`crate::simulate::pods`]) suffered: the cause of each
//!   harm, the `live-pods-keep-access` check and the leaderless times of the leases; and
//!   [`danger`]: the warnings, times during which no pod of a workload's template could have
//!   started.
//! - [`assertion`]: user assertions "X after Y".
//! - [`report`], [`junit`], [`trace`]: the outputs.

pub mod assertion;
pub mod checks;
pub mod cleanup;
pub mod danger;
pub mod harm;
pub mod harness;
pub mod junit;
mod lease_gaps;
pub mod real_pods;
pub mod report;
pub mod timeline;
pub mod trace;
mod via_operator;

pub use assertion::Assertion;
pub use checks::{Check, STORY_CHECK};
pub use danger::DangerWindowReport;
pub use harm::{LIVE_PODS_CHECK, LeaseGapReport};
pub use harness::{Clients, E2eError, UpgradeOptions, upgrade};
pub use report::{PhaseRun, UpgradeReport};
pub use timeline::{Harm, Phase, Recorder, Timeline, TimelineAction, TimelineEvent};
