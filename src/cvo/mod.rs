//! The CVO's own rules as pure functions, for the execute stage and the offline tools: the
//! ClusterVersion status it writes ([`status`], [`version_hash`]), its error reasons and
//! messages ([`error`]), the ClusterOperator health rule ([`health`]), precreation
//! ([`precreate`]), delete annotations ([`deletion`]), implicitly enabled capabilities
//! ([`capabilities`]), the mode it starts in ([`mode`]) and the feature set and gates it
//! filters with ([`features`]). Nothing here talks to a cluster.

pub mod capabilities;
pub mod deletion;
pub mod error;
pub mod features;
pub mod health;
pub mod mode;
pub mod precreate;
pub mod status;
pub mod version_hash;
