//! The CVO's inclusion filters, in the CVO's order. The first failing check excludes a
//! manifest, and the reason is kept so `-v` and the linter can say why.
//!
//! Load-time checks (exclude id, feature set and gates, major version, profile) remove a
//! manifest from the payload. Apply-time checks (capabilities, overrides) keep the task in the
//! graph but skip it, exactly as the CVO does, so the graph shape stays identical.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::manifest::Manifest;

/// Default cluster profile.
pub const DEFAULT_PROFILE: &str = "self-managed-high-availability";
/// Feature sets the CVO knows.
pub const KNOWN_FEATURE_SETS: &[&str] = &[
    "Default",
    "TechPreviewNoUpgrade",
    "DevPreviewNoUpgrade",
    "OKD",
    "CustomNoUpgrade",
];
/// Capabilities a current OpenShift knows.
pub const KNOWN_CAPABILITIES: &[&str] = &[
    "baremetal",
    "marketplace",
    "openshift-samples",
    "Console",
    "Insights",
    "Storage",
    "CSISnapshot",
    "NodeTuning",
    "MachineAPI",
    "Build",
    "DeploymentConfig",
    "ImageRegistry",
    "OperatorLifecycleManager",
    "CloudCredential",
    "Ingress",
    "CloudControllerManager",
    "OperatorLifecycleManagerV1",
];

const FEATURE_SET: &str = "release.openshift.io/feature-set";
const FEATURE_GATE: &str = "release.openshift.io/feature-gate";
const MAJOR_VERSION: &str = "release.openshift.io/major-version";
const CAPABILITY: &str = "capability.openshift.io/name";
const EXCLUDE_PREFIX: &str = "exclude.release.openshift.io/";
const INCLUDE_PREFIX: &str = "include.release.openshift.io/";

/// Which capabilities are enabled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Capabilities {
    /// Every capability is enabled (the default, and `--capabilities +`).
    #[default]
    All,
    /// Only these are enabled.
    Enabled(BTreeSet<String>),
}

/// One `spec.overrides[]` entry of a ClusterVersion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// Kind of the object.
    pub kind: String,
    /// API group of the object (`apps` for a Deployment, empty for the core group).
    #[serde(default)]
    pub group: String,
    /// Namespace; ignored for manifests without one.
    #[serde(default)]
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// `true` excludes the manifest.
    #[serde(default)]
    pub unmanaged: bool,
}

/// All inclusion settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filters {
    /// `exclude.release.openshift.io/<id>`: manifests with this annotation `"true"` are excluded.
    pub exclude: Option<String>,
    /// Required feature set; empty means `Default`.
    pub feature_set: String,
    /// Enabled feature gates. `None` means the cluster's gates are not known: the gate filter
    /// is off and gated manifests are kept (the CVO's "nil disables the filter").
    pub feature_gates: Option<BTreeSet<String>>,
    /// Cluster profile.
    pub profile: String,
    /// Enabled capabilities.
    pub capabilities: Capabilities,
    /// ClusterVersion overrides.
    pub overrides: Vec<Override>,
}

impl Default for Filters {
    fn default() -> Self {
        Filters {
            exclude: None,
            feature_set: String::new(),
            feature_gates: None,
            profile: DEFAULT_PROFILE.to_string(),
            capabilities: Capabilities::All,
            overrides: Vec::new(),
        }
    }
}

impl Filters {
    /// The feature set in force (`Default` when empty).
    #[must_use]
    pub fn effective_feature_set(&self) -> &str {
        if self.feature_set.is_empty() {
            "Default"
        } else {
            &self.feature_set
        }
    }

    /// The load-time checks. `major` is the payload's SemVer major version, when known.
    ///
    /// # Errors
    /// The reason the manifest is excluded.
    pub fn include_at_load(&self, m: &Manifest, major: Option<u64>) -> Result<(), String> {
        let Some(ann) = m.annotations().filter(|a| !a.is_empty()) else {
            return Err("no annotations".to_string());
        };
        if let Some((k, _)) = ann.iter().find(|(_, v)| !v.is_string()) {
            // The CVO reads such a map as no annotations at all.
            return Err(format!(
                "no annotations (the value of {k:?} is not a string)"
            ));
        }
        let get = |k: &str| ann.get(k).and_then(Value::as_str);
        if let Some(id) = &self.exclude
            && get(&format!("{EXCLUDE_PREFIX}{id}")) == Some("true")
        {
            return Err(format!("{EXCLUDE_PREFIX}{id}=true"));
        }
        let fs = get(FEATURE_SET);
        let fg = get(FEATURE_GATE);
        if fs.is_some() && fg.is_some() && self.feature_gates.is_some() {
            return Err(format!("both {FEATURE_SET} and {FEATURE_GATE} are set"));
        }
        if let Some(fs) = fs {
            check_feature_set(fs, self.effective_feature_set())?;
        }
        if let (Some(fg), Some(enabled)) = (fg, &self.feature_gates) {
            check_feature_gates(fg, enabled)?;
        }
        if let Some(mv) = get(MAJOR_VERSION) {
            check_major_version(m, mv, major)?;
        }
        let key = format!("{INCLUDE_PREFIX}{}", self.profile);
        match get(&key) {
            Some("true") => {}
            Some(other) => return Err(format!("unrecognized value {other:?} for {key}")),
            None => return Err(format!("{key} unset")),
        }
        Ok(())
    }

    /// The apply-time checks: capabilities, then overrides.
    ///
    /// # Errors
    /// The reason the task is skipped.
    pub fn include_at_apply(&self, m: &Manifest) -> Result<(), String> {
        if let Some(caps) = m.annotation(CAPABILITY) {
            self.check_capabilities(caps)?;
        }
        if self.override_for(m).is_some_and(|o| o.unmanaged) {
            return Err("overridden (unmanaged)".to_string());
        }
        Ok(())
    }

    /// The override entry matching a manifest, if any.
    #[must_use]
    pub fn override_for(&self, m: &Manifest) -> Option<&Override> {
        self.overrides.iter().find(|o| {
            o.kind == m.id.kind
                && o.group == m.id.group
                && o.name == m.id.name
                && m.id.namespace.as_deref().is_none_or(|ns| ns == o.namespace)
        })
    }

    fn check_capabilities(&self, value: &str) -> Result<(), String> {
        let wanted: Vec<&str> = value.split('+').filter(|c| !c.is_empty()).collect();
        let Capabilities::Enabled(enabled) = &self.capabilities else {
            return Ok(());
        };
        let unknown: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|c| !KNOWN_CAPABILITIES.contains(c) && !enabled.contains(*c))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "unrecognized capability names: {}",
                unknown.join(", ")
            ));
        }
        let disabled: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|c| !enabled.contains(*c))
            .collect();
        if !disabled.is_empty() {
            return Err(format!("disabled capabilities: {}", disabled.join(", ")));
        }
        Ok(())
    }
}

fn check_feature_set(value: &str, required: &str) -> Result<(), String> {
    let listed: Vec<&str> = value.split(',').map(str::trim).collect();
    if let Some(bad) = listed.iter().find(|v| !KNOWN_FEATURE_SETS.contains(v)) {
        return Err(format!("unrecognized value {bad:?} in {FEATURE_SET}"));
    }
    if listed.contains(&required) {
        Ok(())
    } else {
        Err(format!("{FEATURE_SET}={value} does not include {required}"))
    }
}

fn check_feature_gates(value: &str, enabled: &BTreeSet<String>) -> Result<(), String> {
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(gate) = item.strip_prefix('-') {
            if enabled.contains(gate) {
                return Err(format!("feature gate {gate} is enabled"));
            }
        } else if !enabled.contains(item) {
            return Err(format!("feature gate {item} is not enabled"));
        }
    }
    Ok(())
}

fn check_major_version(m: &Manifest, value: &str, major: Option<u64>) -> Result<(), String> {
    let allowed = (m.id.group == "config.openshift.io" && m.id.kind == "FeatureGate") || m.is_crd();
    if !allowed {
        return Err(format!(
            "{MAJOR_VERSION} is only allowed on FeatureGate and CustomResourceDefinition"
        ));
    }
    let mut include = BTreeSet::new();
    let mut exclude = BTreeSet::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (set, number) = match item.strip_prefix('-') {
            Some(n) => (&mut exclude, n),
            None => (&mut include, item),
        };
        let n: u64 = number
            .parse()
            .map_err(|_| format!("invalid {MAJOR_VERSION} value {item:?}"))?;
        set.insert(n);
    }
    if let Some(both) = include.intersection(&exclude).next() {
        return Err(format!("{MAJOR_VERSION} both includes and excludes {both}"));
    }
    let Some(major) = major else {
        return Ok(());
    };
    if !include.is_empty() && !include.contains(&major) {
        return Err(format!("major version {major} not in {value}"));
    }
    if exclude.contains(&major) {
        return Err(format!("major version {major} excluded by {value}"));
    }
    Ok(())
}

/// Parses `--capabilities`: `+` (or empty) means all; otherwise a comma list.
#[must_use]
pub fn parse_capabilities(value: &str) -> Capabilities {
    let v = value.trim();
    if v.is_empty() || v == "+" {
        return Capabilities::All;
    }
    Capabilities::Enabled(
        v.split([',', '+'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// Parses an overrides file: a ClusterVersion (its `spec.overrides`), an object with
/// `overrides`, or a bare list of entries.
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_overrides(text: &str) -> Result<Vec<Override>, String> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let list = match &value {
        Value::Array(_) => value.clone(),
        Value::Object(m) => m
            .get("spec")
            .and_then(|s| s.get("overrides"))
            .or_else(|| m.get("overrides"))
            .cloned()
            .unwrap_or(Value::Array(Vec::new())),
        _ => return Err("expected a ClusterVersion, an object with overrides, or a list".into()),
    };
    serde_json::from_value(list).map_err(|e| format!("invalid overrides: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{ObjectId, Source};
    use serde_json::json;

    fn manifest(kind: &str, api: &str, annotations: Value) -> Manifest {
        let group = api.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        Manifest {
            source: Source::ReleaseManifests,
            file: "0000_50_a_x.yaml".into(),
            document: 0,
            line: 1,
            api_version: api.into(),
            id: ObjectId {
                group,
                kind: kind.into(),
                namespace: Some("ns".into()),
                name: "n".into(),
            },
            object: json!({"apiVersion": api, "kind": kind, "metadata": {"name": "n", "namespace": "ns", "annotations": annotations}})
                .into(),
        }
    }

    const P: &str = "include.release.openshift.io/self-managed-high-availability";

    #[test]
    fn no_annotations_excludes() {
        let f = Filters::default();
        let mut m = manifest("ConfigMap", "v1", json!({}));
        assert_eq!(f.include_at_load(&m, None).unwrap_err(), "no annotations");
        std::sync::Arc::make_mut(&mut m.object)["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        assert_eq!(f.include_at_load(&m, None).unwrap_err(), "no annotations");
    }

    #[test]
    fn profile_must_be_exactly_true() {
        let f = Filters::default();
        assert!(
            f.include_at_load(&manifest("ConfigMap", "v1", json!({P: "true"})), None)
                .is_ok()
        );
        assert_eq!(
            f.include_at_load(&manifest("ConfigMap", "v1", json!({P: "True"})), None)
                .unwrap_err(),
            format!("unrecognized value \"True\" for {P}")
        );
        assert_eq!(
            f.include_at_load(
                &manifest(
                    "ConfigMap",
                    "v1",
                    json!({"include.release.openshift.io/hypershift": "true"})
                ),
                None
            )
            .unwrap_err(),
            format!("{P} unset")
        );
    }

    #[test]
    fn exclude_id_only_when_true() {
        let f = Filters {
            exclude: Some("hosted".into()),
            ..Filters::default()
        };
        let e = "exclude.release.openshift.io/hosted";
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", e: "true"})),
                None
            )
            .is_err()
        );
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", e: "false"})),
                None
            )
            .is_ok()
        );
    }

    #[test]
    fn feature_set_lists_and_unknown_values() {
        let f = Filters::default();
        let fs = "release.openshift.io/feature-set";
        assert!(
            f.include_at_load(
                &manifest(
                    "ConfigMap",
                    "v1",
                    json!({P: "true", fs: "TechPreviewNoUpgrade,Default"})
                ),
                None
            )
            .is_ok()
        );
        assert!(f.include_at_load(&manifest("ConfigMap", "v1", json!({P: "true", fs: "CustomNoUpgrade,DevPreviewNoUpgrade,TechPreviewNoUpgrade"})), None).is_err());
        let tp = Filters {
            feature_set: "TechPreviewNoUpgrade".into(),
            ..Filters::default()
        };
        assert!(tp.include_at_load(&manifest("ConfigMap", "v1", json!({P: "true", fs: "CustomNoUpgrade,DevPreviewNoUpgrade,TechPreviewNoUpgrade"})), None).is_ok());
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", fs: "Default,Bogus"})),
                None
            )
            .unwrap_err()
            .contains("unrecognized value \"Bogus\"")
        );
    }

    #[test]
    fn feature_gates_and_negation() {
        let fg = "release.openshift.io/feature-gate";
        let f = Filters {
            feature_gates: Some(["A".to_string()].into()),
            ..Filters::default()
        };
        assert!(
            Filters::default()
                .include_at_load(
                    &manifest("ConfigMap", "v1", json!({P: "true", fg: "Z"})),
                    None
                )
                .is_ok()
        );
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", fg: "A"})),
                None
            )
            .is_ok()
        );
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", fg: "A,B"})),
                None
            )
            .is_err()
        );
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", fg: "-A"})),
                None
            )
            .is_err()
        );
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", fg: " -B , A "})),
                None
            )
            .is_ok()
        );
        let both = json!({P: "true", fg: "A", "release.openshift.io/feature-set": "Default"});
        assert!(
            f.include_at_load(&manifest("ConfigMap", "v1", both), None)
                .is_err()
        );
    }

    #[test]
    fn major_version_only_on_crds_and_feature_gates() {
        let f = Filters::default();
        let mv = "release.openshift.io/major-version";
        let crd = |v: &str| {
            manifest(
                "CustomResourceDefinition",
                "apiextensions.k8s.io/v1",
                json!({P: "true", mv: v}),
            )
        };
        assert!(f.include_at_load(&crd("5"), Some(5)).is_ok());
        assert!(f.include_at_load(&crd("4,5"), Some(5)).is_ok());
        assert!(f.include_at_load(&crd("4"), Some(5)).is_err());
        assert!(f.include_at_load(&crd("-3"), Some(5)).is_ok());
        assert!(f.include_at_load(&crd("-5"), Some(5)).is_err());
        assert!(f.include_at_load(&crd("5,-5"), Some(5)).is_err());
        assert!(
            f.include_at_load(
                &manifest("ConfigMap", "v1", json!({P: "true", mv: "5"})),
                Some(5)
            )
            .is_err()
        );
    }

    #[test]
    fn capabilities_plus_means_all_and_all_listed_must_be_enabled() {
        let c = "capability.openshift.io/name";
        let m = manifest(
            "ConfigMap",
            "v1",
            json!({P: "true", c: "MachineAPI+CloudCredential"}),
        );
        assert!(
            Filters {
                capabilities: parse_capabilities("+"),
                ..Filters::default()
            }
            .include_at_apply(&m)
            .is_ok()
        );
        let only = Filters {
            capabilities: parse_capabilities("MachineAPI"),
            ..Filters::default()
        };
        assert_eq!(
            only.include_at_apply(&m).unwrap_err(),
            "disabled capabilities: CloudCredential"
        );
        let odd = manifest("ConfigMap", "v1", json!({P: "true", c: "Nope"}));
        assert_eq!(
            only.include_at_apply(&odd).unwrap_err(),
            "unrecognized capability names: Nope"
        );
        let empty = manifest("ConfigMap", "v1", json!({P: "true", c: ""}));
        assert!(only.include_at_apply(&empty).is_ok());
    }

    #[test]
    fn overrides_match_group_kind_namespace_name() {
        let overrides = parse_overrides("spec:\n  overrides:\n  - {kind: ConfigMap, group: '', namespace: ns, name: 'n', unmanaged: true}\n").unwrap();
        let f = Filters {
            overrides,
            ..Filters::default()
        };
        assert_eq!(
            f.include_at_apply(&manifest("ConfigMap", "v1", json!({P: "true"})))
                .unwrap_err(),
            "overridden (unmanaged)"
        );
        assert!(
            f.include_at_apply(&manifest("Secret", "v1", json!({P: "true"})))
                .is_ok()
        );
    }
}
