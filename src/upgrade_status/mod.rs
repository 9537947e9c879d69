//! What `oc adm upgrade` (no arguments) shows of ClusterVersion `version`, for clusters
//! without `oc` (`minicvo status`): a pure function of the object.
//!
//! - [`text()`]: `oc adm upgrade`'s output, line for line (openshift/oc
//!   `pkg/cli/admin/upgrade/upgrade.go`, the default case of `Run`): the `Failing` condition
//!   when it is not `False`, the `Progressing` message, `Upgradeable=False` and a
//!   `ReleaseAccepted` that is not `True`, upstream and channel, the recommended updates as a
//!   table, and the conditional updates that are not recommended (with
//!   `--include-not-recommended`). What oc writes to stderr (warnings) goes to [`Shown::stderr`].
//! - [`json()`]: the same facts as one JSON document (`-o json`).

pub mod json;
pub mod text;

use serde_json::Value;

pub use self::json::json;
pub use self::text::text;

/// Output for stdout and for stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    /// The data.
    pub stdout: String,
    /// Warnings, as oc writes them to stderr.
    pub stderr: String,
}

/// Condition `kind` of `status.conditions`.
fn condition<'a>(cv: &'a Value, kind: &str) -> Option<&'a Value> {
    cv.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The `Recommended` condition of a conditional update.
fn recommended(update: &Value) -> Option<&Value> {
    update["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Recommended")
}

fn text_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A list of `status`, sorted as oc sorts it: highest semantic version first, versions that
/// do not parse after them in reverse lexical order. `version` reads an item's version.
fn sorted(items: Option<&Value>, version: impl Fn(&Value) -> &str) -> Vec<&Value> {
    let mut list: Vec<&Value> = items
        .and_then(Value::as_array)
        .map(|l| l.iter().collect())
        .unwrap_or_default();
    crate::update_graph::risks::sort_by_version(&mut list, |v| version(v));
    list
}
