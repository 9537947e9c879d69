//! The feature gates a payload is linted with: those its own FeatureGate manifest enables for
//! the profile and feature set, unless `--feature-gates` names them.
//!
//! A release ships one FeatureGate `cluster` per profile and feature set
//! (`release-manifests/0000_50_cluster-config-api_featureGate-<Profile>-<FeatureSet>.yaml`),
//! annotated `include.release.openshift.io/<profile>: "false-except-for-the-config-operator"`
//! and `release.openshift.io/feature-set: <set>`: the CVO never applies it (its profile value is
//! not `"true"`), the cluster-config-operator renders it into FeatureGate `cluster`'s `status`,
//! and the CVO filters gated manifests with that status (cvo.md §3). Lint has no cluster, so it
//! takes the status from the manifest itself, through the same code the apply path uses for the
//! cluster's FeatureGate ([`crate::cvo::features`]).
//!
//! The payload is filtered again with those gates ([`Payload::refiltered`]): a manifest gated on
//! a gate the feature set leaves off (e.g. `ClusterAPIMachineManagement` under `Default`) is
//! never applied, so no rule looks at it.

use serde_json::Value;

use crate::cvo::features::{Features, for_payload};
use crate::filter::Filters;
use crate::manifest::Manifest;
use crate::payload::{Payload, load_order};

/// The payload's FeatureGate manifest for `filters`' profile and feature set: a
/// `config.openshift.io` FeatureGate with a `status.featureGates` list, whose `spec.featureSet`
/// is the feature set, whose `include.release.openshift.io/<profile>` annotation is present (any
/// value), and that passes the other load-time checks (the `release.openshift.io/feature-set`
/// annotation 4.22 adds, the major version). The first in load order.
#[must_use]
pub fn feature_gate_manifest<'a>(payload: &'a Payload, filters: &Filters) -> Option<&'a Manifest> {
    let major = payload.metadata.as_ref().map(|m| m.version.major);
    let probe = Filters {
        feature_gates: None,
        ..filters.clone()
    };
    payload
        .manifests
        .iter()
        .chain(payload.excluded.iter().map(|e| &e.manifest))
        .filter(|m| {
            m.id.group == "config.openshift.io"
                && m.id.kind == "FeatureGate"
                && m.object
                    .pointer("/status/featureGates")
                    .is_some_and(Value::is_array)
                && spec_feature_set(m) == filters.effective_feature_set()
                && probe.include_any_profile_value(m, major).is_ok()
        })
        .min_by(|a, b| load_order(a).cmp(&load_order(b)))
}

/// A FeatureGate's `spec.featureSet`, `Default` when empty or absent (as the CVO reads the
/// cluster's).
fn spec_feature_set(m: &Manifest) -> &str {
    match m.object.pointer("/spec/featureSet").and_then(Value::as_str) {
        None | Some("") => "Default",
        Some(set) => set,
    }
}

/// The payload filtered with the gates it is linted with, those filters, and where the gates come
/// from (printed as `features: …`). `gates_flag`: `--feature-gates` was given, and `filters`
/// holds its gates.
#[must_use]
pub fn resolve(
    payload: Payload,
    filters: &Filters,
    gates_flag: bool,
) -> (Payload, Filters, Features) {
    let version = payload.version().unwrap_or_default();
    let features = {
        let fg = (!gates_flag)
            .then(|| feature_gate_manifest(&payload, filters))
            .flatten()
            .map(|m| (m.path(), m.object.clone()));
        for_payload(
            filters,
            gates_flag,
            fg.as_ref().map(|(file, object)| (file.as_str(), &**object)),
            &version,
        )
    };
    let chosen = features.apply_to(filters);
    if chosen.feature_gates == filters.feature_gates {
        return (payload, chosen, features);
    }
    (payload.refiltered(&chosen), chosen, features)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::analysis::lint::testutil::{obj, write};
    use crate::cvo::features::Source;
    use crate::payload::{LoadOptions, load};

    /// A FeatureGate manifest as the release ships it: for `profile` and `set`, enabling
    /// `enabled` and disabling `disabled` in its entry for version `""`.
    fn feature_gate(profile: &str, set: &str, enabled: &[&str], disabled: &[&str]) -> String {
        let list = |gates: &[&str]| {
            gates
                .iter()
                .map(|g| format!("{{name: {g}}}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nmetadata:\n  name: cluster\n  annotations:\n    include.release.openshift.io/{profile}: false-except-for-the-config-operator\n    release.openshift.io/feature-set: {set}\n    release.openshift.io/major-version: 4,5\nspec: {{{spec}}}\nstatus:\n  featureGates:\n  - version: \"\"\n    enabled: [{}]\n    disabled: [{}]\n",
            list(enabled),
            list(disabled),
            spec = if set == "Default" {
                String::new()
            } else {
                format!("featureSet: {set}")
            }
        )
    }

    /// A ConfigMap gated by `gate` (`release.openshift.io/feature-gate`).
    fn gated(name: &str, gate: &str) -> String {
        obj(
            "v1",
            "ConfigMap",
            "ns",
            name,
            &format!("    release.openshift.io/feature-gate: {gate}\n"),
            "",
        )
    }

    fn payload(dir: &std::path::Path) -> Payload {
        payload_with(dir, &Filters::default())
    }

    /// The payload at `dir`, loaded with `filters`.
    fn payload_with(dir: &std::path::Path, filters: &Filters) -> Payload {
        let options = LoadOptions {
            filters: filters.clone(),
            ..LoadOptions::default()
        };
        load(dir, &options).expect("loads")
    }

    fn fixture() -> tempfile::TempDir {
        let ha = "self-managed-high-availability";
        let crs = format!(
            "{}---\n{}---\n{}",
            gated("capi", "ClusterAPIMachineManagement"),
            gated("ga", "Stable"),
            gated("not-capi", "-ClusterAPIMachineManagement")
        );
        write(&[
            (
                "0000_50_cluster-config-api_featureGate-SelfManagedHA-Default.yaml",
                &feature_gate(ha, "Default", &["Stable"], &["ClusterAPIMachineManagement"]),
            ),
            (
                "0000_50_cluster-config-api_featureGate-SelfManagedHA-TechPreviewNoUpgrade.yaml",
                &feature_gate(
                    ha,
                    "TechPreviewNoUpgrade",
                    &["ClusterAPIMachineManagement", "Stable"],
                    &[],
                ),
            ),
            (
                "0000_50_cluster-config-api_featureGate-Hypershift-Default.yaml",
                &feature_gate("ibm-cloud-managed", "Default", &["Other"], &[]),
            ),
            ("0000_30_capi_01_config.yaml", &crs),
        ])
    }

    fn names(p: &Payload) -> Vec<&str> {
        p.manifests.iter().map(|m| m.id.name.as_str()).collect()
    }

    #[test]
    fn default_takes_the_gates_of_the_payloads_own_feature_gate() {
        let dir = fixture();
        let loaded = payload(dir.path());
        // Without gates the filter is off: every gated manifest is kept.
        assert_eq!(names(&loaded), ["capi", "ga", "not-capi"]);
        let (p, filters, features) = resolve(loaded, &Filters::default(), false);
        assert_eq!(names(&p), ["ga", "not-capi"]);
        assert_eq!(
            filters.feature_gates,
            Some(BTreeSet::from(["Stable".to_string()]))
        );
        let file =
            "release-manifests/0000_50_cluster-config-api_featureGate-SelfManagedHA-Default.yaml";
        assert_eq!(features.gates_from, Source::Payload(file.into()));
        assert_eq!(
            features.to_string(),
            format!(
                "feature set Default (default); feature gates of the payload's FeatureGate {file} (1 enabled)"
            )
        );
        let why = p
            .excluded
            .iter()
            .find(|e| e.manifest.id.name == "capi")
            .map(|e| e.reason.as_str());
        assert_eq!(
            why,
            Some("feature gate ClusterAPIMachineManagement is not enabled")
        );
    }

    #[test]
    fn tech_preview_takes_its_own_feature_gate() {
        let dir = fixture();
        let filters = Filters {
            feature_set: "TechPreviewNoUpgrade".into(),
            ..Filters::default()
        };
        let (p, _, features) = resolve(payload(dir.path()), &filters, false);
        assert_eq!(names(&p), ["capi", "ga"]);
        assert!(
            matches!(&features.gates_from, Source::Payload(f) if f.ends_with("SelfManagedHA-TechPreviewNoUpgrade.yaml")),
            "{features:?}"
        );
    }

    /// 4.21's FeatureGate manifests carry no `release.openshift.io/feature-set` annotation:
    /// their `spec.featureSet` alone says which set they are for.
    #[test]
    fn a_feature_gate_without_the_feature_set_annotation_is_matched_by_its_spec() {
        let ha = "self-managed-high-availability";
        let strip = |text: String, set: &str| {
            text.replace(
                &format!("    release.openshift.io/feature-set: {set}\n"),
                "",
            )
        };
        let dir = write(&[
            (
                "0000_50_cluster-config-api_featureGate-SelfManagedHA-Default.yaml",
                &strip(
                    feature_gate(ha, "Default", &[], &["ClusterAPIMachineManagement"]),
                    "Default",
                ),
            ),
            (
                "0000_50_cluster-config-api_featureGate-SelfManagedHA-TechPreviewNoUpgrade.yaml",
                &strip(
                    feature_gate(
                        ha,
                        "TechPreviewNoUpgrade",
                        &["ClusterAPIMachineManagement"],
                        &[],
                    ),
                    "TechPreviewNoUpgrade",
                ),
            ),
            (
                "0000_30_capi_01_config.yaml",
                &gated("capi", "ClusterAPIMachineManagement"),
            ),
        ]);
        let (p, _, features) = resolve(payload(dir.path()), &Filters::default(), false);
        assert!(names(&p).is_empty(), "{:?}", names(&p));
        assert!(
            matches!(&features.gates_from, Source::Payload(f) if f.ends_with("SelfManagedHA-Default.yaml")),
            "{features:?}"
        );
        let tech = Filters {
            feature_set: "TechPreviewNoUpgrade".into(),
            ..Filters::default()
        };
        let (p, _, _) = resolve(payload(dir.path()), &tech, false);
        assert_eq!(names(&p), ["capi"]);
    }

    #[test]
    fn feature_gates_flag_wins_over_the_payload() {
        let dir = fixture();
        let filters = Filters {
            feature_gates: Some(BTreeSet::from(["ClusterAPIMachineManagement".to_string()])),
            ..Filters::default()
        };
        let loaded = payload_with(dir.path(), &filters);
        let (p, chosen, features) = resolve(loaded, &filters, true);
        assert_eq!(names(&p), ["capi"]);
        assert_eq!(chosen.feature_gates, filters.feature_gates);
        assert_eq!(features.gates_from, Source::Flag);
    }

    #[test]
    fn a_profile_without_a_feature_gate_keeps_the_filter_off() {
        let dir = fixture();
        let filters = Filters {
            profile: "single-node-developer".into(),
            ..Filters::default()
        };
        let loaded = payload_with(dir.path(), &filters);
        let (_, chosen, features) = resolve(loaded, &filters, false);
        assert_eq!(chosen.feature_gates, None);
        assert_eq!(features.gates_from, Source::NoPayloadFeatureGate);
        assert!(features.to_string().contains("no feature gate filter"));
    }
}
