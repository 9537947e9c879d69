//! Showing a plan without a cluster: text for people, JSON for tools, DOT for Graphviz, and the
//! rendered objects themselves.

pub mod dot;
pub mod json;
pub mod render;
pub mod text;

/// The `apiVersion` of every JSON document minicvo prints.
pub const API_VERSION: &str = "minicvo/v1alpha1";
