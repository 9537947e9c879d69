//! The mode the CVO starts in, from the cluster's ClusterVersion history.

use std::fmt;

use serde_json::Value;

use crate::plan::Mode;

/// The chosen mode and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeChoice {
    /// The mode.
    pub mode: Mode,
    /// One phrase saying why, e.g. `no completed update in the ClusterVersion history`.
    pub why: String,
}

impl fmt::Display for ModeChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            Mode::Initializing => "initializing",
            Mode::Updating => "updating",
            Mode::Reconciling => "reconciling",
        };
        write!(f, "{mode} ({})", self.why)
    }
}

/// The CVO's initial state (`Operator.sync`): initializing while no history entry is
/// `Completed`; reconciling when the newest entry is `Completed` for the release being
/// applied; updating otherwise. `cluster_version` is the live object (`None` when there is
/// none). The release matches on image when both images are known, else on version.
#[must_use]
pub fn from_cluster_version(
    cluster_version: Option<&Value>,
    version: &str,
    image: &str,
) -> ModeChoice {
    let history: &[Value] = cluster_version
        .and_then(|cv| cv.pointer("/status/history"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let choice = |mode, why: String| ModeChoice { mode, why };
    if cluster_version.is_none() {
        return choice(
            Mode::Initializing,
            "no ClusterVersion \"version\" in the cluster".into(),
        );
    }
    if !history.iter().any(|h| h["state"] == "Completed") {
        return choice(
            Mode::Initializing,
            "no completed update in the ClusterVersion history".into(),
        );
    }
    let last = &history[0];
    let last_version = last["version"].as_str().unwrap_or_default();
    let last_image = last["image"].as_str().unwrap_or_default();
    let same = if !image.is_empty() && !last_image.is_empty() {
        image == last_image
    } else {
        !version.is_empty() && version == last_version
    };
    let shown = if last_version.is_empty() {
        last_image
    } else {
        last_version
    };
    if last["state"] == "Completed" && same {
        choice(
            Mode::Reconciling,
            format!("the cluster already runs {shown}"),
        )
    } else if last["state"] == "Completed" {
        choice(Mode::Updating, format!("the cluster runs {shown}"))
    } else {
        choice(
            Mode::Updating,
            format!(
                "the newest history entry, {shown}, is {}",
                last["state"].as_str().unwrap_or("Partial")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cv(history: Value) -> Value {
        json!({"status": {"history": history}})
    }

    #[test]
    fn the_mode_follows_the_history() {
        assert_eq!(
            from_cluster_version(None, "4.2", "").mode,
            Mode::Initializing
        );
        let partial = cv(json!([{"state": "Partial", "version": "4.1", "image": "i1"}]));
        let c = from_cluster_version(Some(&partial), "4.1", "");
        assert_eq!(c.mode, Mode::Initializing);
        assert_eq!(
            c.to_string(),
            "initializing (no completed update in the ClusterVersion history)"
        );
        let done = cv(json!([{"state": "Completed", "version": "4.1", "image": "i1"}]));
        assert_eq!(
            from_cluster_version(Some(&done), "4.1", "").mode,
            Mode::Reconciling
        );
        assert_eq!(
            from_cluster_version(Some(&done), "4.2", "").mode,
            Mode::Updating
        );
        // The image decides when both are known.
        assert_eq!(
            from_cluster_version(Some(&done), "4.1", "i2").mode,
            Mode::Updating
        );
        let abandoned = cv(json!([
            {"state": "Partial", "version": "4.2", "image": "i2"},
            {"state": "Completed", "version": "4.1", "image": "i1"}]));
        let c = from_cluster_version(Some(&abandoned), "4.2", "i2");
        assert_eq!(c.mode, Mode::Updating);
        assert_eq!(c.why, "the newest history entry, 4.2, is Partial");
    }
}
