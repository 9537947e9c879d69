//! The upgrade e2e harness: install a payload, upgrade to another with simulated operators,
//! and check the order of what happened.
//!
//! ```text
//! load OLD, NEW ──► missing kinds? (stub CRDs) ──► install OLD (initializing) ──► upgrade to NEW (updating)
//!                                                    │  simulator(OLD)              │  simulator(NEW)
//!                                                    └──────── timeline: writes, waits, watch events
//!                                                                  │
//!                                    checks: invariants, the story check, assertions
//!                                                                  │
//!                                           text, JSON, JUnit XML, Chrome trace
//! ```
//!
//! - [`harness`]: the runs ([`upgrade`]).
//! - [`timeline`]: the recorded events and their JSON.
//! - [`cleanup`]: removing both payloads' objects (`--clean`, and between tests).
//! - [`checks`]: invariants over the timeline and the `delete-before-workload-update` check.
//! - [`assertion`]: user assertions "X after Y".
//! - [`report`], [`junit`], [`trace`]: the outputs.

pub mod assertion;
pub mod checks;
pub mod cleanup;
pub mod harness;
pub mod junit;
pub mod report;
pub mod timeline;
pub mod trace;

pub use assertion::Assertion;
pub use checks::{Check, STORY_CHECK};
pub use harness::{Clients, E2eError, UpgradeOptions, upgrade};
pub use report::{PhaseRun, UpgradeReport};
pub use timeline::{Phase, Recorder, Timeline, TimelineAction, TimelineEvent};
