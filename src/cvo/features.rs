//! The feature set and feature gates a run filters manifests with, taken from the cluster as
//! the CVO takes them (cvo.md §3): FeatureGate `cluster` gives the feature set
//! (`spec.featureSet`, `""` is `Default`) and the enabled gates, those of its
//! `status.featureGates` entry for the version being applied. An entry for another version
//! only, or none, means no gate is enabled (the filter is on and every gate is off); no
//! FeatureGate at all means the CVO's startup default: the `Default` set and no gate filter
//! (gated manifests are kept).
//!
//! `--feature-set` and `--feature-gates` override what the cluster says; [`Features`] records
//! where each came from, so that the choice is printed as the mode is.
//!
//! Without a cluster (`lint`), [`for_payload`] takes the gates from the payload's own
//! FeatureGate manifest for the profile and feature set: the object the cluster-config-operator
//! renders into FeatureGate `cluster`'s `status`, with the same shape.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use crate::filter::Filters;

/// Where a run's feature set or gates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A flag.
    Flag,
    /// FeatureGate `cluster`.
    Cluster,
    /// No FeatureGate `cluster` (or its kind is not served): the CVO's startup default.
    NoFeatureGate,
    /// The payload's own FeatureGate manifest for the profile and feature set (its file).
    Payload(String),
    /// The payload ships no FeatureGate manifest for the profile and feature set: no gate
    /// filter.
    NoPayloadFeatureGate,
}

/// The feature set and gates of a run, and where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// Required feature set; empty means `Default`.
    pub feature_set: String,
    /// Where the feature set comes from.
    pub feature_set_from: Source,
    /// Enabled gates; `None` turns the gate filter off.
    pub gates: Option<BTreeSet<String>>,
    /// Where the gates come from.
    pub gates_from: Source,
    /// The version whose FeatureGate status entry was looked for.
    pub version: String,
    /// Whether FeatureGate `cluster` had an entry for that version.
    pub version_listed: bool,
}

/// The enabled gates of `feature_gate`'s `status.featureGates` entry for `version` (an empty
/// set when there is no such entry), and whether the entry exists.
fn enabled_for(feature_gate: &Value, version: &str) -> (BTreeSet<String>, bool) {
    let entries = feature_gate
        .pointer("/status/featureGates")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let Some(entry) = entries
        .iter()
        .find(|e| e.get("version").and_then(Value::as_str) == Some(version))
    else {
        return (BTreeSet::new(), false);
    };
    let names = entry
        .get("enabled")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|g| g.get("name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    (names, true)
}

/// Which of the feature set and the gates a flag gave (the cluster gives the others).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Explicit {
    /// `--feature-set` was given.
    pub feature_set: bool,
    /// `--feature-gates` was given.
    pub gates: bool,
}

impl Explicit {
    /// Both were given: the cluster has nothing to say.
    #[must_use]
    pub fn all(self) -> bool {
        self.feature_set && self.gates
    }
}

/// The run's features: `filters`' feature set and gates where `explicit` says a flag gave
/// them, the cluster's FeatureGate `cluster` (`feature_gate`, `None` when absent or not
/// served) for `version` otherwise.
#[must_use]
pub fn for_run(
    filters: &Filters,
    explicit: Explicit,
    feature_gate: Option<&Value>,
    version: &str,
) -> Features {
    let (explicit_set, explicit_gates) = (explicit.feature_set, explicit.gates);
    let from_cluster = if feature_gate.is_some() {
        Source::Cluster
    } else {
        Source::NoFeatureGate
    };
    let (feature_set, feature_set_from) = if explicit_set {
        (filters.feature_set.clone(), Source::Flag)
    } else {
        let set = feature_gate
            .and_then(|f| f.pointer("/spec/featureSet"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        (set.to_owned(), from_cluster.clone())
    };
    let mut version_listed = false;
    let (gates, gates_from) = if explicit_gates {
        (filters.feature_gates.clone(), Source::Flag)
    } else if let Some(fg) = feature_gate {
        let (gates, listed) = enabled_for(fg, version);
        version_listed = listed;
        (Some(gates), Source::Cluster)
    } else {
        (None, Source::NoFeatureGate)
    };
    Features {
        feature_set,
        feature_set_from,
        gates,
        gates_from,
        version: version.to_owned(),
        version_listed,
    }
}

/// The run's features without a cluster: the feature set of `filters` (the flag, or
/// `Default`), and the gates of `--feature-gates` when `gates_flag` says it was given, else those
/// the payload's FeatureGate manifest `feature_gate` (its file and object) enables: its
/// `status.featureGates` entry for `version`, else its entry for `""` (the payload's manifests
/// leave the version empty; the cluster-config-operator fills it in). No manifest turns the gate
/// filter off, as no FeatureGate `cluster` does.
#[must_use]
pub fn for_payload(
    filters: &Filters,
    gates_flag: bool,
    feature_gate: Option<(&str, &Value)>,
    version: &str,
) -> Features {
    let mut version_listed = false;
    let mut entry_version = version.to_owned();
    let (gates, gates_from) = if gates_flag {
        (filters.feature_gates.clone(), Source::Flag)
    } else if let Some((file, fg)) = feature_gate {
        let (mut gates, mut listed) = enabled_for(fg, version);
        if !listed {
            (gates, listed) = enabled_for(fg, "");
            if listed {
                entry_version = String::new();
            }
        }
        version_listed = listed;
        (Some(gates), Source::Payload(file.to_owned()))
    } else {
        (None, Source::NoPayloadFeatureGate)
    };
    Features {
        feature_set: filters.feature_set.clone(),
        feature_set_from: Source::Flag,
        gates,
        gates_from,
        version: entry_version,
        version_listed,
    }
}

impl Features {
    /// `filters` with this feature set and these gates.
    #[must_use]
    pub fn apply_to(&self, filters: &Filters) -> Filters {
        Filters {
            feature_set: self.feature_set.clone(),
            feature_gates: self.gates.clone(),
            ..filters.clone()
        }
    }
}

impl fmt::Display for Features {
    /// One line: the feature set and the gates, each with where it came from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = if self.feature_set.is_empty() {
            "Default"
        } else {
            &self.feature_set
        };
        let set_from = match self.feature_set_from {
            Source::Flag if self.feature_set.is_empty() => "default",
            Source::Flag => "--feature-set",
            Source::Cluster => "FeatureGate cluster",
            Source::NoFeatureGate => "no FeatureGate cluster",
            Source::Payload(_) | Source::NoPayloadFeatureGate => "payload",
        };
        write!(f, "feature set {set} ({set_from}); ")?;
        let list = |gates: &BTreeSet<String>| {
            if gates.is_empty() {
                "none enabled".to_owned()
            } else {
                gates.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        match (&self.gates_from, &self.gates) {
            (Source::Flag, Some(g)) => write!(f, "feature gates {} (--feature-gates)", list(g)),
            (Source::Cluster, Some(g)) if self.version_listed => write!(
                f,
                "feature gates {} (FeatureGate cluster, version {})",
                list(g),
                self.version
            ),
            (Source::Cluster, Some(_)) => write!(
                f,
                "feature gates none enabled (FeatureGate cluster lists no version {})",
                self.version
            ),
            // A payload's manifest enables dozens of gates: the count, and where they are.
            (Source::Payload(file), Some(g)) if self.version_listed => {
                let entry = if self.version.is_empty() {
                    String::new()
                } else {
                    format!(", version {}", self.version)
                };
                write!(
                    f,
                    "feature gates of the payload's FeatureGate {file} ({} enabled{entry})",
                    g.len()
                )
            }
            (Source::Payload(file), _) => write!(
                f,
                "feature gates none enabled (the payload's FeatureGate {file} lists neither version {} nor \"\")",
                self.version
            ),
            (Source::NoPayloadFeatureGate, _) => write!(
                f,
                "no feature gate filter, gated manifests kept (the payload ships no FeatureGate for this profile and feature set)"
            ),
            _ => write!(
                f,
                "no feature gate filter, gated manifests kept (no FeatureGate cluster)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fg() -> Value {
        json!({"spec": {"featureSet": "TechPreviewNoUpgrade"}, "status": {"featureGates": [
            {"version": "4.98.0", "enabled": [{"name": "Old"}]},
            {"version": "4.99.0", "enabled": [{"name": "B"}, {"name": "A"}],
             "disabled": [{"name": "C"}]}]}})
    }

    #[test]
    fn the_cluster_gives_the_set_and_the_gates_of_the_version() {
        let f = for_run(
            &Filters::default(),
            Explicit::default(),
            Some(&fg()),
            "4.99.0",
        );
        assert_eq!(f.feature_set, "TechPreviewNoUpgrade");
        assert_eq!(
            f.gates,
            Some(["A".to_string(), "B".to_string()].into_iter().collect())
        );
        assert_eq!(
            f.to_string(),
            "feature set TechPreviewNoUpgrade (FeatureGate cluster); feature gates A, B \
             (FeatureGate cluster, version 4.99.0)"
        );
    }

    #[test]
    fn a_version_not_listed_enables_no_gate() {
        let f = for_run(
            &Filters::default(),
            Explicit::default(),
            Some(&fg()),
            "5.0.0",
        );
        assert_eq!(f.gates, Some(BTreeSet::new()));
        assert!(f.to_string().contains("lists no version 5.0.0"));
    }

    #[test]
    fn no_feature_gate_turns_the_gate_filter_off() {
        let f = for_run(&Filters::default(), Explicit::default(), None, "4.99.0");
        assert_eq!(f.feature_set, "");
        assert_eq!(f.gates, None);
        assert_eq!(
            f.to_string(),
            "feature set Default (no FeatureGate cluster); no feature gate filter, gated \
             manifests kept (no FeatureGate cluster)"
        );
    }

    #[test]
    fn flags_win() {
        let filters = Filters {
            feature_set: "Default".into(),
            feature_gates: Some(["X".to_string()].into_iter().collect()),
            ..Filters::default()
        };
        let both = Explicit {
            feature_set: true,
            gates: true,
        };
        assert!(both.all());
        let f = for_run(&filters, both, Some(&fg()), "4.99.0");
        assert_eq!(f.feature_set, "Default");
        assert_eq!(f.gates, filters.feature_gates);
        assert_eq!(
            f.to_string(),
            "feature set Default (--feature-set); feature gates X (--feature-gates)"
        );
        let applied = f.apply_to(&Filters::default());
        assert_eq!(applied.feature_gates, filters.feature_gates);
    }
}
