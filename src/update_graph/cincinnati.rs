//! The Cincinnati graph an update service answers (`GET upstream?arch=&channel=&id=&version=`,
//! `Accept: application/json`), read as the CVO reads it (`pkg/cincinnati/cincinnati.go`):
//! `nodes` (`version`, `payload`, `metadata`), `edges` (`[from, to]` node indexes) and
//! `conditionalEdges` (`edges` of `{from, to}` versions sharing `risks`). From the graph and
//! the cluster's version come the recommended updates (the nodes an edge leads to) and the
//! conditional ones (with their risks).
//!
//! The update service is untrusted input. The body is bounded before it is parsed
//! ([`MAX_BODY_BYTES`], by the fetcher), JSON nesting is bounded by `serde_json`'s recursion
//! limit (128), and what reaches the ClusterVersion status is bounded by what its CRD admits
//! ([`MAX_UPDATES`], [`MAX_CONDITIONAL_UPDATES`], [`MAX_RISKS`]). Each violation is a
//! `ResponseInvalid` failure with a message that names it, never a crash: an edge to a node
//! that does not exist (the CVO indexes out of range there and panics) is one of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest graph body read (bytes); a larger one is a `ResponseFailed` failure. Real
/// channels of api.openshift.com are a few MiB at most.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The most recommended updates from one version (each is a `status.availableUpdates` entry,
/// and the status must stay well below etcd's object size limit).
pub const MAX_UPDATES: usize = 1000;
/// The ClusterVersion CRD's `maxItems` of `status.conditionalUpdates`.
pub const MAX_CONDITIONAL_UPDATES: usize = 500;
/// The ClusterVersion CRD's `maxItems` of a conditional update's `risks`.
pub const MAX_RISKS: usize = 200;

/// A failure to get updates from the service: the reason and message of
/// `RetrievedUpdates=False` (the CVO's `cincinnati.Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct GraphError {
    /// `InvalidRequest`, `RemoteFailed`, `ResponseFailed`, `ResponseInvalid` or
    /// `VersionNotFound`.
    pub reason: &'static str,
    /// What went wrong, for people.
    pub message: String,
}

impl GraphError {
    /// A failure with `reason`.
    #[must_use]
    pub fn new(reason: &'static str, message: impl Into<String>) -> GraphError {
        GraphError {
            reason,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> GraphError {
        GraphError::new("ResponseInvalid", message)
    }
}

/// A release as `status.availableUpdates` lists it (openshift/api `Release`; `architecture`
/// is left out, as the CVO leaves it out without its StatusReleaseArchitecture gate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Release {
    /// Semantic version.
    pub version: String,
    /// Release image pull spec.
    pub image: String,
    /// Errata URL (node metadata `url`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// Channels the release is in, sorted (node metadata
    /// `io.openshift.upgrades.graph.release.channels`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

/// A matching rule of a risk (openshift/api `ClusterCondition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchingRule {
    /// `Always` or `PromQL` (others are pruned).
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The query of a `PromQL` rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promql: Option<PromQl>,
}

/// A PromQL rule's query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromQl {
    /// The query; 1 when the risk applies, 0 when not.
    #[serde(default)]
    pub promql: String,
}

/// A known risk of a conditional update (openshift/api `ConditionalUpdateRisk`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Risk {
    /// Where to read about it.
    #[serde(default)]
    pub url: String,
    /// CamelCase name.
    #[serde(default)]
    pub name: String,
    /// For people.
    #[serde(default)]
    pub message: String,
    /// When it applies: the first rule that can be evaluated decides.
    #[serde(rename = "matchingRules", default)]
    pub matching_rules: Vec<MatchingRule>,
}

/// An update that is recommended only when none of its risks apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionalUpdate {
    /// The target release.
    pub release: Release,
    /// Its risks.
    pub risks: Vec<Risk>,
}

/// What the graph offers from one version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Updates {
    /// The node of the version itself.
    pub current: Release,
    /// Recommended updates, in edge order (conditional ones removed).
    pub updates: Vec<Release>,
    /// Conditional updates, with the rules this operator cannot evaluate pruned.
    pub conditional: Vec<ConditionalUpdate>,
    /// What was dropped or pruned on the way, for the log.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Graph {
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    edges: Vec<(usize, usize)>,
    #[serde(rename = "conditionalEdges", default)]
    conditional_edges: Vec<ConditionalEdges>,
}

#[derive(Deserialize)]
struct Node {
    version: semver::Version,
    #[serde(default)]
    payload: String,
    #[serde(default)]
    metadata: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct ConditionalEdges {
    #[serde(default)]
    edges: Vec<ConditionalEdge>,
    #[serde(default)]
    risks: Vec<Risk>,
}

#[derive(Deserialize)]
struct ConditionalEdge {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

/// The updates `body` (a graph) offers from `version` in `channel`.
///
/// # Errors
/// [`GraphError`]: `ResponseInvalid` for a body that is not a graph (bad JSON, wrong types,
/// too deep, an edge to no node, an invalid node, more than the CRD holds),
/// `VersionNotFound` when `version` is not a node.
pub fn updates(
    body: &[u8],
    version: &semver::Version,
    channel: &str,
) -> Result<Updates, GraphError> {
    let graph: Graph =
        serde_json::from_slice(body).map_err(|e| GraphError::invalid(e.to_string()))?;
    let n = graph.nodes.len();
    let Some(current_index) = graph
        .nodes
        .iter()
        .position(|node| node.version.cmp_precedence(version).is_eq())
    else {
        return Err(GraphError::new(
            "VersionNotFound",
            format!(
                "currently reconciling cluster version {version} not found in the {channel:?} channel"
            ),
        ));
    };
    let current = release(&graph.nodes[current_index])
        .map_err(|e| GraphError::invalid(format!("invalid current node: {e}")))?;

    let mut updates = Vec::new();
    for &(from, to) in &graph.edges {
        if from != current_index {
            continue;
        }
        let node = graph.nodes.get(to).ok_or_else(|| {
            GraphError::invalid(format!(
                "edge [{from}, {to}] leads to no node (the graph has {n})"
            ))
        })?;
        if updates.len() == MAX_UPDATES {
            return Err(GraphError::invalid(format!(
                "more than {MAX_UPDATES} recommended updates from {version}"
            )));
        }
        updates.push(
            release(node).map_err(|e| {
                GraphError::invalid(format!("invalid recommended update node: {e}"))
            })?,
        );
    }

    let from = version.to_string();
    let mut conditional: Vec<ConditionalUpdate> = Vec::new();
    for group in &graph.conditional_edges {
        for edge in group.edges.iter().filter(|e| e.from == from) {
            let target = graph
                .nodes
                .iter()
                .find(|node| node.version.to_string() == edge.to)
                .ok_or_else(|| {
                    GraphError::invalid(format!("no node for conditional update {}", edge.to))
                })?;
            let release = release(target).map_err(|e| {
                GraphError::invalid(format!("invalid conditional update node: {e}"))
            })?;
            conditional.push(ConditionalUpdate {
                release,
                risks: group.risks.clone(),
            });
        }
    }

    let mut warnings = Vec::new();
    // An update listed both ways is conditional.
    updates.retain(|u| {
        let both = conditional.iter().any(|c| c.release.image == u.image);
        if both {
            warnings.push(format!(
                "update to {} listed as both a conditional and unconditional update; preferring the conditional update",
                u.version
            ));
        }
        !both
    });
    // Rules this operator does not know are pruned; an update left with a risk without rules
    // is dropped (the CVO's `PruneInvalid`).
    conditional.retain_mut(|c| {
        for risk in &mut c.risks {
            let (kept, errors) = prune(&risk.matching_rules);
            risk.matching_rules = kept;
            if risk.matching_rules.is_empty() {
                warnings.push(format!(
                    "conditional update to {}, risk {:?}, has no valid matchingRules; dropping it ({})",
                    c.release.version,
                    risk.name,
                    errors.join(", ")
                ));
                return false;
            } else if !errors.is_empty() {
                warnings.push(format!(
                    "conditional update to {}, risk {:?}: pruned matchingRules ({})",
                    c.release.version,
                    risk.name,
                    errors.join(", ")
                ));
            }
        }
        true
    });
    // Several conditional updates to one image: all dropped.
    let mut targets: BTreeMap<String, usize> = BTreeMap::new();
    for c in &conditional {
        *targets.entry(c.release.image.clone()).or_default() += 1;
    }
    conditional.retain(|c| {
        let count = targets[&c.release.image];
        if count > 1 {
            warnings.push(format!(
                "upstream declares {count} conditional updates to {}; dropping them all",
                c.release.version
            ));
        }
        count <= 1
    });
    check_crd_limits(&conditional, version)?;
    Ok(Updates {
        current,
        updates,
        conditional,
        warnings,
    })
}

/// What the ClusterVersion CRD would refuse: caught here so that the status write never fails
/// on the service's answer.
fn check_crd_limits(
    conditional: &[ConditionalUpdate],
    version: &semver::Version,
) -> Result<(), GraphError> {
    if conditional.len() > MAX_CONDITIONAL_UPDATES {
        return Err(GraphError::invalid(format!(
            "{} conditional updates from {version}; ClusterVersion holds at most {MAX_CONDITIONAL_UPDATES}",
            conditional.len()
        )));
    }
    for c in conditional {
        let to = &c.release.version;
        if c.risks.is_empty() || c.risks.len() > MAX_RISKS {
            return Err(GraphError::invalid(format!(
                "conditional update to {to} has {} risks; ClusterVersion needs 1 to {MAX_RISKS}",
                c.risks.len()
            )));
        }
        let mut names = std::collections::BTreeSet::new();
        for r in &c.risks {
            if r.name.is_empty() || r.message.is_empty() || r.url.is_empty() {
                return Err(GraphError::invalid(format!(
                    "conditional update to {to}: a risk needs a name, a message and a url ({:?})",
                    r.name
                )));
            }
            if !names.insert(r.name.as_str()) {
                return Err(GraphError::invalid(format!(
                    "conditional update to {to}: risk {:?} is declared twice",
                    r.name
                )));
            }
        }
    }
    Ok(())
}

/// The rules of a known type with valid contents, and why the others were pruned.
fn prune(rules: &[MatchingRule]) -> (Vec<MatchingRule>, Vec<String>) {
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    for rule in rules {
        let error = match (rule.kind.as_str(), &rule.promql) {
            ("Always", None) => None,
            ("Always", Some(_)) => {
                Some("the 'promql' property is not valid for 'type: Always' conditions".into())
            }
            ("PromQL", None) => {
                Some("the 'promql' property is required for 'type: PromQL' conditions".into())
            }
            ("PromQL", Some(q)) if q.promql.is_empty() => Some(
                "the 'promql.promql' query string must be non-empty for 'type: PromQL' conditions"
                    .into(),
            ),
            ("PromQL", Some(_)) => None,
            (other, _) => Some(format!(
                "skipping unrecognized cluster condition type {other:?}"
            )),
        };
        match error {
            None => kept.push(rule.clone()),
            Some(e) => errors.push(e),
        }
    }
    (kept, errors)
}

/// A node as a release (the CVO's `convertRetrievedUpdateToRelease` and `ParseMetadata`).
fn release(node: &Node) -> Result<Release, String> {
    let mut release = Release {
        version: node.version.to_string(),
        image: node.payload.clone(),
        ..Release::default()
    };
    let mut errors = Vec::new();
    match node.metadata.get("url") {
        None => {}
        Some(Value::String(url)) => release.url.clone_from(url),
        Some(other) => errors.push(format!("URL is not a string: {other}")),
    }
    match node.metadata.get("release.openshift.io/architecture") {
        None => {}
        // `Multi`: not shown without the StatusReleaseArchitecture gate.
        Some(Value::String(a)) if a == "multi" => {}
        Some(Value::String(a)) => errors.push(format!(
            "unrecognized release.openshift.io/architecture value {a:?}"
        )),
        Some(other) => errors.push(format!(
            "release.openshift.io/architecture is not a string: {other}"
        )),
    }
    match node
        .metadata
        .get("io.openshift.upgrades.graph.release.channels")
    {
        None => {}
        Some(Value::String(s)) if s.is_empty() => {
            errors.push("io.openshift.upgrades.graph.release.channels is an empty string".into());
        }
        Some(Value::String(s)) => {
            let mut channels: Vec<String> = s
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            if channels.len() != s.split(',').count() {
                errors.push(format!(
                    "io.openshift.upgrades.graph.release.channels has an empty entry: {s:?}"
                ));
            }
            channels.sort();
            release.channels = channels;
        }
        Some(other) => errors.push(format!(
            "io.openshift.upgrades.graph.release.channels is not a string: {other}"
        )),
    }
    if errors.is_empty() {
        Ok(release)
    } else {
        Err(errors.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn v(s: &str) -> semver::Version {
        semver::Version::parse(s).unwrap()
    }

    fn node(version: &str) -> Value {
        json!({"version": version, "payload": format!("quay.example/release@sha256:{version}"),
               "metadata": {"io.openshift.upgrades.graph.release.channels": "stable-4.14,fast-4.14",
                            "url": format!("https://errata.example/{version}")}})
    }

    fn graph(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    #[test]
    fn the_nodes_an_edge_leads_to_are_the_updates() {
        let g = json!({
            "nodes": [node("4.13.0"), node("4.13.1"), node("4.14.0"), node("4.12.0")],
            "edges": [[0, 1], [0, 2], [3, 0], [1, 2]],
        });
        let u = updates(&graph(&g), &v("4.13.0"), "stable-4.14").unwrap();
        assert_eq!(u.current.version, "4.13.0");
        let versions: Vec<&str> = u.updates.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(versions, ["4.13.1", "4.14.0"]);
        assert_eq!(u.updates[0].channels, ["fast-4.14", "stable-4.14"]);
        assert_eq!(u.updates[0].url, "https://errata.example/4.13.1");
        assert!(u.conditional.is_empty());
    }

    #[test]
    fn conditional_edges_win_over_edges_and_unknown_rules_are_pruned() {
        let risk = |name: &str, rules: Value| json!({"name": name, "message": "m", "url": "https://bug.example/1", "matchingRules": rules});
        let g = json!({
            "nodes": [node("4.13.0"), node("4.13.1"), node("4.14.0"), node("4.14.1")],
            "edges": [[0, 1], [0, 2]],
            "conditionalEdges": [
                {"edges": [{"from": "4.13.0", "to": "4.14.0"}],
                 "risks": [risk("A", json!([{"type": "Unknown"}, {"type": "Always"}]))]},
                {"edges": [{"from": "4.13.0", "to": "4.14.1"}],
                 "risks": [risk("B", json!([{"type": "Nope"}]))]},
            ],
        });
        let u = updates(&graph(&g), &v("4.13.0"), "c").unwrap();
        let versions: Vec<&str> = u.updates.iter().map(|r| r.version.as_str()).collect();
        assert_eq!(versions, ["4.13.1"]);
        assert_eq!(u.conditional.len(), 1);
        assert_eq!(u.conditional[0].release.version, "4.14.0");
        assert_eq!(u.conditional[0].risks[0].matching_rules.len(), 1);
        assert_eq!(u.warnings.len(), 3, "{:?}", u.warnings);
    }

    #[test]
    fn failures_have_the_cvo_reasons() {
        let reason = |body: &[u8]| updates(body, &v("4.13.0"), "stable").unwrap_err();
        let e = reason(&graph(&json!({"nodes": [node("4.12.0")]})));
        assert_eq!(e.reason, "VersionNotFound");
        assert_eq!(
            e.message,
            "currently reconciling cluster version 4.13.0 not found in the \"stable\" channel"
        );
        assert_eq!(reason(b"not json").reason, "ResponseInvalid");
        // Wrong types.
        assert_eq!(reason(br#"{"nodes": "many"}"#).reason, "ResponseInvalid");
        assert_eq!(
            reason(br#"{"nodes": [{"version": 4}]}"#).reason,
            "ResponseInvalid"
        );
        assert_eq!(
            reason(br#"{"nodes": [{"version": "4.x"}]}"#).reason,
            "ResponseInvalid"
        );
        let bad_edge = graph(&json!({"nodes": [node("4.13.0")], "edges": [[0, 7]]}));
        let e = reason(&bad_edge);
        assert_eq!(e.message, "edge [0, 7] leads to no node (the graph has 1)");
        let bad_edge = graph(&json!({"nodes": [node("4.13.0")], "edges": [[0, -1]]}));
        assert_eq!(reason(&bad_edge).reason, "ResponseInvalid");
        let mut n = node("4.13.0");
        n["metadata"]["url"] = json!(5);
        let e = reason(&graph(&json!({"nodes": [n]})));
        assert_eq!(e.message, "invalid current node: URL is not a string: 5");
        // Deep nesting: serde_json's recursion limit, an error and no stack overflow.
        let deep = format!(
            r#"{{"nodes": [{{"version": "4.13.0", "metadata": {{"x": {}{}}}}}]}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let e = reason(deep.as_bytes());
        assert!(e.message.contains("recursion limit"), "{e}");
    }

    #[test]
    fn what_the_crd_refuses_is_refused_here() {
        let mut nodes = vec![node("4.13.0")];
        let mut edges = Vec::new();
        for i in 1..=MAX_CONDITIONAL_UPDATES + 1 {
            nodes.push(node(&format!("4.14.{i}")));
            edges.push(json!({"from": "4.13.0", "to": format!("4.14.{i}")}));
        }
        let g = json!({"nodes": nodes, "conditionalEdges": [{"edges": edges,
            "risks": [{"name": "R", "message": "m", "url": "https://x", "matchingRules": [{"type": "Always"}]}]}]});
        let e = updates(&graph(&g), &v("4.13.0"), "c").unwrap_err();
        assert!(e.message.contains("at most 500"), "{e}");
        let g = json!({"nodes": [node("4.13.0"), node("4.14.0")], "conditionalEdges": [{
            "edges": [{"from": "4.13.0", "to": "4.14.0"}],
            "risks": [{"name": "R", "message": "", "url": "https://x", "matchingRules": [{"type": "Always"}]}]}]});
        assert_eq!(
            updates(&graph(&g), &v("4.13.0"), "c").unwrap_err().reason,
            "ResponseInvalid"
        );
    }
}
