//! Enabled, known and implicitly enabled capabilities, the CVO's way: a capability once
//! enabled stays enabled, and an update that moves an object the cluster runs under a
//! capability that is off turns that capability on.

use std::collections::BTreeSet;

use crate::filter::{Capabilities, Filters, KNOWN_CAPABILITIES};
use crate::manifest::Manifest;

/// The annotation naming a manifest's capabilities (`+`-separated).
pub const CAPABILITY_ANNOTATION: &str = "capability.openshift.io/name";

/// The capability status of a piece of work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapabilityStatus {
    /// Enabled capabilities (explicit and implicit).
    pub enabled: BTreeSet<String>,
    /// Capabilities this release knows.
    pub known: BTreeSet<String>,
    /// Capabilities enabled only because they were enabled before or an update needed them.
    pub implicit: BTreeSet<String>,
}

impl CapabilityStatus {
    /// Every known capability enabled, none implicit.
    #[must_use]
    pub fn all() -> Self {
        let known = known();
        CapabilityStatus {
            enabled: known.clone(),
            known,
            implicit: BTreeSet::new(),
        }
    }

    /// `SetCapabilities`: the explicit set plus every previously enabled capability, which
    /// becomes implicit when it is not explicit.
    #[must_use]
    pub fn from_explicit(explicit: &BTreeSet<String>, prior: &BTreeSet<String>) -> Self {
        let implicit: BTreeSet<String> = prior.difference(explicit).cloned().collect();
        CapabilityStatus {
            enabled: explicit.union(prior).cloned().collect(),
            known: known(),
            implicit,
        }
    }

    /// Adds capabilities found by [`implicitly_enabled`] (`SetFromImplicitlyEnabledCapabilities`).
    pub fn add_implicit(&mut self, caps: &BTreeSet<String>) {
        self.implicit.extend(caps.iter().cloned());
        self.enabled.extend(caps.iter().cloned());
    }
}

/// The capabilities a current OpenShift knows.
#[must_use]
pub fn known() -> BTreeSet<String> {
    KNOWN_CAPABILITIES
        .iter()
        .map(|s| (*s).to_string())
        .collect()
}

/// The capabilities a manifest names.
#[must_use]
pub fn of(m: &Manifest) -> BTreeSet<String> {
    m.annotation(CAPABILITY_ANNOTATION)
        .map(|v| {
            v.split('+')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn included(m: &Manifest, enabled: &BTreeSet<String>) -> bool {
    of(m).is_subset(enabled)
}

/// A capability turned on by an update, and the manifest that needed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImplicitCapability {
    /// The capability.
    pub capability: String,
    /// The new payload's manifest that moved under it (`Kind ns/name`).
    pub object: String,
}

/// `GetImplicitlyEnabledCapabilities`: for every manifest of the new payload that the
/// capability status excludes but whose object the current payload ships and includes, the
/// capabilities it newly needs. Returns the work's implicit set extended by them (sorted), and
/// which object caused each new one.
///
/// Both payloads are the load-time-filtered ones, so only the capability check is repeated
/// here (the CVO's other inputs, feature gates and major version, were applied at load).
#[must_use]
pub fn implicitly_enabled(
    new: &[Manifest],
    current: &[Manifest],
    status: &CapabilityStatus,
) -> (BTreeSet<String>, Vec<ImplicitCapability>) {
    let mut result = status.implicit.clone();
    let mut why = Vec::new();
    for u in new {
        if included(u, &status.enabled) {
            continue;
        }
        let caps_u = of(u);
        for p in current.iter().filter(|p| p.id == u.id) {
            if !included(p, &status.enabled) {
                continue;
            }
            let caps_p = of(p);
            let new_caps: BTreeSet<String> = caps_u
                .iter()
                .filter(|c| {
                    !caps_p.contains(*c)
                        && !status.implicit.contains(*c)
                        && !status.enabled.contains(*c)
                })
                .cloned()
                .collect();
            for c in &new_caps {
                if !result.contains(c) {
                    why.push(ImplicitCapability {
                        capability: c.clone(),
                        object: u.id.to_string(),
                    });
                }
            }
            result.extend(new_caps);
        }
    }
    (result, why)
}

/// Filters for applying `new` over a cluster that runs `current`: the enabled capabilities
/// extended by the ones the update implies (the capabilities enabled before are taken to be
/// the enabled ones of `filters`). With every capability enabled nothing changes.
#[must_use]
pub fn with_implicit(
    filters: &Filters,
    new: &[Manifest],
    current: &[Manifest],
) -> (Filters, Vec<ImplicitCapability>) {
    let Capabilities::Enabled(explicit) = &filters.capabilities else {
        return (filters.clone(), Vec::new());
    };
    let status = CapabilityStatus::from_explicit(explicit, explicit);
    let (implicit, why) = implicitly_enabled(new, current, &status);
    let mut out = filters.clone();
    out.capabilities = Capabilities::Enabled(explicit.union(&implicit).cloned().collect());
    (out, why)
}

/// The capabilities of a run and the filters that go with them, the CVO's way:
///
/// - without a capability filter (`--capabilities` unset) every known capability is enabled
///   and none is implicit;
/// - otherwise the explicit set is the filter's; every capability the cluster had enabled
///   before (`prior`, ClusterVersion `status.capabilities.enabledCapabilities`) stays enabled,
///   implicitly when it is not explicit (`SetCapabilities`);
/// - with the previous payload, the capabilities the update implies are added
///   ([`implicitly_enabled`], `SetFromImplicitlyEnabledCapabilities`).
///
/// Returns the filters (enabled = explicit and implicit), the status to record, and why each
/// capability was turned on by the update.
#[must_use]
pub fn for_run(
    filters: &Filters,
    prior: Option<&BTreeSet<String>>,
    new: &[Manifest],
    previous: Option<&[Manifest]>,
) -> (Filters, CapabilityStatus, Vec<ImplicitCapability>) {
    let Capabilities::Enabled(explicit) = &filters.capabilities else {
        return (filters.clone(), CapabilityStatus::all(), Vec::new());
    };
    let prior = prior.cloned().unwrap_or_default();
    let mut status = CapabilityStatus::from_explicit(explicit, &prior);
    let mut why = Vec::new();
    if let Some(previous) = previous {
        let implicit;
        (implicit, why) = implicitly_enabled(new, previous, &status);
        status.add_implicit(&implicit);
    }
    let mut out = filters.clone();
    out.capabilities = Capabilities::Enabled(status.enabled.clone());
    (out, status, why)
}

/// One line per implicitly enabled capability, for people.
#[must_use]
pub fn describe(why: &[ImplicitCapability]) -> Vec<String> {
    why.iter()
        .map(|w| {
            format!(
                "capability {} is implicitly enabled: {} moved under it and the cluster runs it",
                w.capability, w.object
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::manifest::{ObjectId, Source};

    fn manifest(name: &str, caps: Option<&str>) -> Manifest {
        let mut annotations = json!({});
        if let Some(c) = caps {
            annotations[CAPABILITY_ANNOTATION] = json!(c);
        }
        Manifest {
            source: Source::ReleaseManifests,
            file: "0000_50_foo_00.yaml".into(),
            document: 0,
            line: 1,
            api_version: "apps/v1".into(),
            id: ObjectId {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: Some("openshift-foo".into()),
                name: name.into(),
            },
            object: json!({"metadata": {"name": name, "annotations": annotations}}).into(),
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_string()).collect()
    }

    /// The worked example of the CVO's behaviour: installed with no baseline and MachineAPI,
    /// Ingress always enabled, `bar` moves under Console+Insights.
    #[test]
    fn a_moved_manifest_enables_its_new_capabilities() {
        let mut status = CapabilityStatus::from_explicit(
            &set(&["MachineAPI"]),
            &set(&["MachineAPI", "Ingress"]),
        );
        assert_eq!(status.implicit, set(&["Ingress"]));
        let current = vec![manifest("bar", None)];
        let new = vec![manifest("bar", Some("Console+Insights"))];
        let (result, why) = implicitly_enabled(&new, &current, &status);
        assert_eq!(result, set(&["Console", "Ingress", "Insights"]));
        assert_eq!(why.len(), 2);
        assert_eq!(why[0].object, "Deployment.apps openshift-foo/bar");
        status.add_implicit(&result);
        assert_eq!(
            status.enabled,
            set(&["Console", "Ingress", "Insights", "MachineAPI"])
        );
    }

    #[test]
    fn filters_gain_the_implied_capabilities() {
        let filters = Filters {
            capabilities: Capabilities::Enabled(set(&["MachineAPI"])),
            ..Filters::default()
        };
        let current = vec![manifest("bar", None)];
        let new = vec![manifest("bar", Some("Console"))];
        let (f, why) = with_implicit(&filters, &new, &current);
        assert_eq!(
            f.capabilities,
            Capabilities::Enabled(set(&["Console", "MachineAPI"]))
        );
        assert_eq!(
            describe(&why),
            [
                "capability Console is implicitly enabled: Deployment.apps openshift-foo/bar moved under it and the cluster runs it"
            ]
        );
        let (f, why) = with_implicit(&Filters::default(), &new, &current);
        assert_eq!(f.capabilities, Capabilities::All);
        assert!(why.is_empty());
    }

    #[test]
    fn a_run_keeps_what_the_cluster_enabled_and_adds_what_the_update_implies() {
        let filters = Filters {
            capabilities: Capabilities::Enabled(set(&["MachineAPI"])),
            ..Filters::default()
        };
        let current = vec![manifest("bar", None)];
        let new = vec![manifest("bar", Some("Console"))];
        let (f, status, why) = for_run(
            &filters,
            Some(&set(&["MachineAPI", "Insights"])),
            &new,
            Some(&current),
        );
        assert_eq!(
            f.capabilities,
            Capabilities::Enabled(set(&["Console", "Insights", "MachineAPI"]))
        );
        assert_eq!(status.implicit, set(&["Console", "Insights"]));
        assert_eq!(status.enabled, set(&["Console", "Insights", "MachineAPI"]));
        assert_eq!(why.len(), 1);
        // Nothing known before, no previous payload: the explicit set only.
        let (f, status, _) = for_run(&filters, None, &new, None);
        assert_eq!(f.capabilities, filters.capabilities);
        assert!(status.implicit.is_empty());
        // No capability filter: all enabled.
        let (_, status, _) = for_run(&Filters::default(), None, &new, Some(&current));
        assert_eq!(status, CapabilityStatus::all());
    }

    #[test]
    fn new_objects_and_objects_excluded_before_enable_nothing() {
        let status = CapabilityStatus::from_explicit(&set(&["MachineAPI"]), &BTreeSet::new());
        // Only in the new payload.
        let new = vec![manifest("fresh", Some("Console"))];
        assert!(implicitly_enabled(&new, &[], &status).0.is_empty());
        // Excluded in the current payload too.
        let current = vec![manifest("bar", Some("Insights"))];
        let new = vec![manifest("bar", Some("Console"))];
        assert!(implicitly_enabled(&new, &current, &status).0.is_empty());
        // Still included in the new payload.
        let current = vec![manifest("bar", None)];
        let new = vec![manifest("bar", Some("MachineAPI"))];
        assert!(implicitly_enabled(&new, &current, &status).0.is_empty());
    }
}
