//! What ClusterVersion `version` asks for, read the CVO's way: the release
//! (`spec.desiredUpdate`, a version alone resolved to its image through
//! `status.availableUpdates`; else the release the operator itself runs), the overrides
//! (`spec.overrides`) and the capabilities (`spec.capabilities`: a baseline set plus additional
//! ones). A change of any of them is new work.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::filter::{Capabilities, Filters, KNOWN_CAPABILITIES, Override};

/// The work ClusterVersion asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Desired {
    /// Release version; empty when only an image is asked for.
    pub version: String,
    /// Release image pull spec; empty for a version-only request.
    pub image: String,
    /// `spec.desiredUpdate.force`: accept the release even when its signature cannot be
    /// verified or a precondition blocks it, as the CVO does.
    pub force: bool,
    /// `spec.overrides`.
    pub overrides: Vec<Override>,
    /// The explicitly enabled capabilities; `None`: `spec.capabilities` is unset (the CVO's
    /// default baseline, `vCurrent`: every capability).
    pub capabilities: Option<BTreeSet<String>>,
}

/// A `spec` the operator cannot act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// `spec.overrides` does not parse.
    #[error("spec.overrides: {0}")]
    Overrides(String),
    /// An unknown `baselineCapabilitySet`.
    #[error(
        "spec.capabilities.baselineCapabilitySet {0:?} is not a known set (None, v4.11 … v4.18, vCurrent)"
    )]
    Baseline(String),
}

/// Reads what `cluster_version` (`None`: absent or not served) asks for; `own` is the release
/// the operator runs itself (`--release`), the work when nothing else is asked for.
///
/// # Errors
/// [`SpecError`] for overrides or capabilities the operator cannot read.
pub fn from_cluster_version(
    cluster_version: Option<&Value>,
    own: &str,
) -> Result<Desired, SpecError> {
    let spec = cluster_version.and_then(|cv| cv.get("spec"));
    let text = |p: &str| {
        spec.and_then(|s| s.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut version = text("/desiredUpdate/version");
    let mut image = text("/desiredUpdate/image");
    let force = spec
        .and_then(|s| s.pointer("/desiredUpdate/force"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if image.is_empty() && !version.is_empty() {
        // A version alone is resolved through `status.availableUpdates` (the update graph),
        // as the CVO resolves it; unresolved, it is looked for among the payloads at hand.
        if let Some(i) = cluster_version
            .and_then(|cv| crate::update_graph::status::resolve_version(cv, &version))
        {
            image = i;
        }
    }
    if version.is_empty() && image.is_empty() {
        // No request: what the cluster last went to, else the operator's own release.
        version = cluster_version
            .and_then(|cv| cv.pointer("/status/desired/version"))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .unwrap_or(own)
            .to_string();
    }
    let overrides = match spec.and_then(|s| s.get("overrides")) {
        None | Some(Value::Null) => Vec::new(),
        Some(list) => {
            serde_json::from_value(list.clone()).map_err(|e| SpecError::Overrides(e.to_string()))?
        }
    };
    let capabilities = match spec.and_then(|s| s.get("capabilities")) {
        None | Some(Value::Null) => None,
        Some(caps) => Some(enabled_capabilities(caps)?),
    };
    Ok(Desired {
        version,
        image,
        force,
        overrides,
        capabilities,
    })
}

/// The capabilities a baseline set names (openshift/api `ClusterVersionCapabilitySets`).
///
/// # Errors
/// [`SpecError::Baseline`] for an unknown set.
pub fn baseline(set: &str) -> Result<BTreeSet<String>, SpecError> {
    const STEPS: &[(&str, &[&str])] = &[
        ("v4.11", &["baremetal", "marketplace", "openshift-samples"]),
        ("v4.12", &["Console", "Insights", "Storage", "CSISnapshot"]),
        ("v4.13", &["NodeTuning"]),
        (
            "v4.14",
            &["MachineAPI", "Build", "DeploymentConfig", "ImageRegistry"],
        ),
        ("v4.15", &["OperatorLifecycleManager", "CloudCredential"]),
        ("v4.16", &["CloudControllerManager", "Ingress"]),
        ("v4.17", &[]),
        ("v4.18", &["OperatorLifecycleManagerV1"]),
    ];
    match set {
        "None" => return Ok(BTreeSet::new()),
        "vCurrent" => {
            return Ok(KNOWN_CAPABILITIES
                .iter()
                .map(|c| (*c).to_string())
                .collect());
        }
        _ => {}
    }
    let mut out = BTreeSet::new();
    for (name, caps) in STEPS {
        out.extend(caps.iter().map(|c| (*c).to_string()));
        if *name == set {
            return Ok(out);
        }
    }
    Err(SpecError::Baseline(set.to_string()))
}

fn enabled_capabilities(caps: &Value) -> Result<BTreeSet<String>, SpecError> {
    let set = caps
        .get("baselineCapabilitySet")
        .and_then(Value::as_str)
        .unwrap_or("vCurrent");
    let mut enabled = baseline(set)?;
    if let Some(extra) = caps
        .get("additionalEnabledCapabilities")
        .and_then(Value::as_array)
    {
        enabled.extend(extra.iter().filter_map(Value::as_str).map(str::to_string));
    }
    Ok(enabled)
}

impl Desired {
    /// The release as a person reads it: the version, else the image.
    #[must_use]
    pub fn shown(&self) -> &str {
        if self.version.is_empty() {
            &self.image
        } else {
            &self.version
        }
    }

    /// `base` with this work's overrides and capabilities.
    #[must_use]
    pub fn filters(&self, base: &Filters) -> Filters {
        let mut f = base.clone();
        f.overrides.clone_from(&self.overrides);
        f.capabilities = match &self.capabilities {
            Some(c) => Capabilities::Enabled(c.clone()),
            None => Capabilities::All,
        };
        f
    }

    /// The same work as `other`: only `force` may differ, which matters when a release is
    /// taken up, not for the release at hand.
    #[must_use]
    pub fn same_work(&self, other: &Desired) -> bool {
        self.version == other.version
            && self.image == other.image
            && self.overrides == other.overrides
            && self.capabilities == other.capabilities
    }

    /// The same release as `other` (only overrides or capabilities differ).
    #[must_use]
    pub fn same_release(&self, other: &Desired) -> bool {
        self.version == other.version && self.image == other.image
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_request_wins_over_the_last_release_and_the_own_release() {
        assert_eq!(
            from_cluster_version(None, "4.13.0").unwrap().version,
            "4.13.0"
        );
        let cv = json!({"spec": {"clusterID": "x"}, "status": {"desired": {"version": "4.12.0"}}});
        assert_eq!(
            from_cluster_version(Some(&cv), "4.13.0").unwrap().version,
            "4.12.0"
        );
        let cv = json!({"spec": {"desiredUpdate": {"version": "4.14.0"}}});
        let d = from_cluster_version(Some(&cv), "4.13.0").unwrap();
        assert_eq!(
            (d.version.as_str(), d.capabilities.clone(), d.force),
            ("4.14.0", None, false)
        );
        let cv = json!({"spec": {"desiredUpdate": {"version": "4.14.0", "force": true}}});
        let forced = from_cluster_version(Some(&cv), "4.13.0").unwrap();
        assert!(forced.force && forced != d && forced.same_work(&d));
    }

    #[test]
    fn a_version_alone_takes_the_image_of_an_available_update_or_of_the_running_release() {
        let cv = json!({
            "spec": {"desiredUpdate": {"version": "4.14.0"}},
            "status": {
                "availableUpdates": [{"version": "4.14.0", "image": "r@sha256:14"}],
                "desired": {"version": "4.13.0", "image": "r@sha256:13"},
                "history": [
                    {"version": "4.13.0", "image": "r@sha256:13", "state": "Completed"},
                    {"version": "4.12.0", "image": "r@sha256:12", "state": "Completed"},
                ],
            },
        });
        let d = from_cluster_version(Some(&cv), "4.13.0").unwrap();
        assert_eq!(
            (d.version.as_str(), d.image.as_str()),
            ("4.14.0", "r@sha256:14")
        );
        // The release the cluster runs: its image.
        let mut back = cv.clone();
        back["spec"]["desiredUpdate"]["version"] = json!("4.13.0");
        let d = from_cluster_version(Some(&back), "4.13.0").unwrap();
        assert_eq!(d.image, "r@sha256:13");
        // An older one from history is not resolved (the CVO stays on its release).
        back["spec"]["desiredUpdate"]["version"] = json!("4.12.0");
        let d = from_cluster_version(Some(&back), "4.13.0").unwrap();
        assert_eq!(d.image, "");
        // Neither: the version alone (looked for among the payloads at hand).
        let mut other = cv.clone();
        other["spec"]["desiredUpdate"]["version"] = json!("4.99.0");
        assert_eq!(
            from_cluster_version(Some(&other), "4.13.0").unwrap().image,
            ""
        );
        // An image given is used as it is.
        let mut both = cv.clone();
        both["spec"]["desiredUpdate"]["image"] = json!("mine");
        assert_eq!(
            from_cluster_version(Some(&both), "4.13.0").unwrap().image,
            "mine"
        );
    }

    #[test]
    fn overrides_and_capabilities_are_read_from_the_spec() {
        let cv = json!({"spec": {
            "overrides": [{"kind": "ConfigMap", "group": "", "namespace": "ns", "name": "a", "unmanaged": true}],
            "capabilities": {"baselineCapabilitySet": "v4.12", "additionalEnabledCapabilities": ["Build"]},
        }});
        let d = from_cluster_version(Some(&cv), "4.13.0").unwrap();
        assert_eq!(d.overrides.len(), 1);
        let caps = d.capabilities.clone().unwrap();
        assert!(caps.contains("Console") && caps.contains("Build") && !caps.contains("NodeTuning"));
        let f = d.filters(&Filters::default());
        assert_eq!(f.overrides, d.overrides);
        assert!(matches!(f.capabilities, Capabilities::Enabled(_)));
        let bad = json!({"spec": {"capabilities": {"baselineCapabilitySet": "v9"}}});
        assert!(from_cluster_version(Some(&bad), "4.13.0").is_err());
        assert!(baseline("None").unwrap().is_empty());
        assert_eq!(
            baseline("vCurrent").unwrap().len(),
            KNOWN_CAPABILITIES.len()
        );
        assert_eq!(baseline("v4.18").unwrap().len(), KNOWN_CAPABILITIES.len());
    }
}
