//! The one place that talks HTTP to an API server. Nothing here knows about payloads, plans
//! or the engine: [`crate::apply`], [`crate::diff`], [`crate::simulate`], [`crate::e2e`] and
//! [`crate::stub_crds`] all reach the cluster through these modules.
//!
//! - [`client`]: connection and kubeconfig resolution like kubectl; every request counted.
//! - [`request`]: one request, with the status code, `Date` and `Warning` headers kube's
//!   typed API hides, and typed errors that keep the server's `Status` code, reason and
//!   details (never matched on message text).
//! - [`retry`]: transient vs permanent errors, bounded backoff with jitter.
//! - [`watch`]: wait for one object to reach a state, bounded by a deadline and a
//!   cancellation token.
//! - [`list_watch`]: following a whole collection (list, then watch, re-list on expiry), for
//!   the simulator.
//! - [`discovery`]: kind → resource and scope, cached; CRDs established in the run are served
//!   from their spec.
//! - [`body`]: what is sent for a manifest, and the one normalisation of server-owned fields
//!   shared by dry-run apply and `diff`.

pub mod body;
pub mod client;
pub mod discovery;
pub mod list_watch;
pub mod request;
pub mod retry;
pub mod watch;

pub use client::{Connection, RequestCounter, connect, connect_with};
pub use request::RequestError;
