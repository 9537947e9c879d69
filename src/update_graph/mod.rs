//! The update graph, as the CVO reads it from an update service (Cincinnati) and reports it in
//! ClusterVersion: pure functions, no I/O (the operator fetches, [`crate::operator::updates`]).
//!
//! - [`cincinnati`]: the graph JSON → the updates from the cluster's version (recommended and
//!   conditional), with the limits an untrusted service needs.
//! - [`risks`]: conditional updates → their `Recommended` condition.
//! - [`status`]: the query from ClusterVersion `spec`, `status.availableUpdates`,
//!   `status.conditionalUpdates` and `RetrievedUpdates`, and `spec.desiredUpdate.version`
//!   resolved to an image.

pub mod cincinnati;
pub mod risks;
pub mod status;
