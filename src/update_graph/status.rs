//! What the update graph writes into ClusterVersion `status`, as the CVO's available-updates
//! loop writes it (`pkg/cvo/availableupdates.go`): `availableUpdates` (`null` when there are
//! none), `conditionalUpdates` (left out when there are none), the `RetrievedUpdates`
//! condition and the missing `url` and `channels` of `status.desired` (`mergeReleaseMetadata`);
//! how `spec.desiredUpdate.version` without an image is resolved through them
//! (`pkg/cvo/updatepayload.go findUpdateFromConfig`), and the `Invalid` message when it is not
//! (`lib/validation`).

use serde_json::{Value, json};

use super::cincinnati::{GraphError, Release};
use super::risks::{self, Evaluated};

/// The fields of `status` the update graph owns; every other writer keeps them as it finds
/// them ([`carry_over`]).
pub const OWNED_FIELDS: [&str; 2] = ["availableUpdates", "conditionalUpdates"];
/// The conditions of `status` the update graph and the spec check own.
pub const OWNED_CONDITIONS: [&str; 2] = ["RetrievedUpdates", "Invalid"];

/// The CVO's default update service, asked when neither `--update-service` nor
/// `spec.upstream` names one.
pub const DEFAULT_UPDATE_SERVICE: &str = "https://api.openshift.com/api/upgrades_info/v1/graph";

/// What to ask the update service, read from ClusterVersion (the CVO's
/// `calculateAvailableUpdatesStatus` checks, in its order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The update service: `--update-service`, else `spec.upstream`, else
    /// [`DEFAULT_UPDATE_SERVICE`].
    pub upstream: String,
    /// `spec.channel`.
    pub channel: String,
    /// `spec.clusterID`.
    pub id: String,
    /// `arch=`: the Go name of the architecture, or `multi`.
    pub arch: String,
    /// The cluster's version.
    pub version: semver::Version,
    /// Asked to move a single-architecture cluster to `Multi`: the only update is the current
    /// version's multi-architecture release.
    pub to_multi: bool,
}

/// `RetrievedUpdates=False` before any request: (reason, message).
pub type Unqueried = (&'static str, String);

/// The query `cluster_version` calls for, or why none can be made. `version` is the
/// cluster's version (`status.desired.version`, else the operator's own release);
/// `update_service` the operator's `--update-service` (empty: none), which overrides
/// `spec.upstream`; with neither, the CVO's [`DEFAULT_UPDATE_SERVICE`] is asked.
///
/// # Errors
/// The CVO's reasons and messages: `InvalidURI`, `InvalidID`, `NoCurrentVersion`, `NoChannel`,
/// `InvalidCurrentVersion`. (The CVO's `NoUpstream` cannot happen: there is always a
/// service.)
pub fn query(
    cluster_version: &Value,
    version: &str,
    update_service: &str,
) -> Result<Query, Unqueried> {
    let text = |p: &str| {
        cluster_version
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let upstream = match (update_service, text("/spec/upstream")) {
        ("", u) if u.is_empty() => DEFAULT_UPDATE_SERVICE.to_string(),
        ("", u) => u,
        (flag, _) => flag.to_string(),
    };
    if let Err(e) = reqwest::Url::parse(&upstream) {
        return Err((
            "InvalidURI",
            format!("failed to parse update service URL: {e}"),
        ));
    }
    let id = text("/spec/clusterID");
    if let Err(e) = check_uuid(&id) {
        return Err(("InvalidID", format!("invalid cluster ID: {e}")));
    }
    if version.is_empty() {
        return Err((
            "NoCurrentVersion",
            "The cluster version does not have a semantic version assigned and cannot calculate valid upgrades."
                .into(),
        ));
    }
    let channel = text("/spec/channel");
    if channel.is_empty() {
        return Err((
            "NoChannel",
            "The update channel has not been configured.".into(),
        ));
    }
    let Ok(parsed) = semver::Version::parse(version) else {
        return Err((
            "InvalidCurrentVersion",
            "The current cluster version is not a valid semantic version and cannot be used to calculate upgrades."
                .into(),
        ));
    };
    let current_multi = text("/status/desired/architecture") == "Multi";
    let desired_multi = match text("/spec/desiredUpdate/architecture").as_str() {
        "" => current_multi,
        a => a == "Multi",
    };
    Ok(Query {
        upstream,
        channel,
        id,
        arch: if desired_multi {
            "multi".into()
        } else {
            crate::cvo::status::go_arch().into()
        },
        version: parsed,
        to_multi: desired_multi && !current_multi,
    })
}

/// Go's `uuid.Parse`: the 36-character form (also in braces or after `urn:uuid:`) or 32 hex
/// digits.
fn check_uuid(id: &str) -> Result<(), String> {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let body = match id.len() {
        36 => id,
        38 if id.starts_with('{') && id.ends_with('}') => &id[1..37],
        45 if id
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("urn:uuid:")) =>
        {
            &id[9..]
        }
        45 => {
            return Err(format!(
                "invalid urn prefix: {:?}",
                id.get(..9).unwrap_or(id)
            ));
        }
        32 if hex(id) => return Ok(()),
        32 => return Err("invalid UUID format".into()),
        n => return Err(format!("invalid UUID length: {n}")),
    };
    let b = body.as_bytes();
    let dashes = [8, 13, 18, 23].iter().all(|&i| b.get(i) == Some(&b'-'));
    if dashes && hex(&body.replace('-', "")) && body.len() == 36 {
        Ok(())
    } else {
        Err("invalid UUID format".into())
    }
}

/// The outcome of one attempt to retrieve updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retrieved {
    /// `RetrievedUpdates`: `True` with no reason and message, or `False` with the CVO's.
    pub condition: (&'static str, &'static str, String),
    /// Recommended updates, conditional ones that are recommended included, highest first.
    pub updates: Vec<Release>,
    /// Conditional updates with their `Recommended` conditions.
    pub conditional: Vec<Evaluated>,
    /// The graph's node of the cluster's version (its `url` and `channels` fill
    /// `status.desired`'s missing ones).
    pub current: Option<Release>,
}

impl Retrieved {
    /// Updates retrieved.
    #[must_use]
    pub fn success(updates: &super::cincinnati::Updates, to_multi: bool) -> Retrieved {
        if to_multi {
            return Retrieved {
                condition: ("True", "", String::new()),
                updates: vec![updates.current.clone()],
                conditional: Vec::new(),
                current: Some(updates.current.clone()),
            };
        }
        let conditional = risks::evaluate(&updates.conditional);
        Retrieved {
            condition: ("True", "", String::new()),
            updates: risks::recommended(&updates.updates, &conditional),
            conditional,
            current: Some(updates.current.clone()),
        }
    }

    /// No query could be made.
    #[must_use]
    pub fn unqueried((reason, message): Unqueried) -> Retrieved {
        Retrieved {
            condition: ("False", reason, message),
            updates: Vec::new(),
            conditional: Vec::new(),
            current: None,
        }
    }

    /// The service failed; `keep` (a previous success) keeps its updates, as the CVO keeps its
    /// cache through a failed periodic refresh.
    #[must_use]
    pub fn failed(e: &GraphError, keep: Option<&Retrieved>) -> Retrieved {
        let condition = (
            "False",
            e.reason,
            format!("Unable to retrieve available updates: {}", e.message),
        );
        match keep {
            Some(k) => Retrieved {
                condition,
                ..k.clone()
            },
            None => Retrieved {
                condition,
                updates: Vec::new(),
                conditional: Vec::new(),
                current: None,
            },
        }
    }

    /// Whether the service answered with a graph.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.condition.0 == "True"
    }
}

/// `status` with the retrieved updates and `RetrievedUpdates` set; `now` is the time of a
/// condition that changes (RFC 3339).
#[must_use]
pub fn with_updates(status: &Value, retrieved: &Retrieved, now: &str) -> Value {
    let mut status = status.clone();
    let Some(obj) = status.as_object_mut() else {
        return status;
    };
    obj.insert(
        "availableUpdates".into(),
        if retrieved.updates.is_empty() {
            Value::Null
        } else {
            json!(retrieved.updates)
        },
    );
    let entries = risks::status_entries(&retrieved.conditional, obj.get("conditionalUpdates"), now);
    if entries.is_empty() {
        obj.remove("conditionalUpdates");
    } else {
        obj.insert("conditionalUpdates".into(), Value::Array(entries));
    }
    if let (Some(current), Some(Value::Object(desired))) =
        (&retrieved.current, obj.get_mut("desired"))
    {
        fill_metadata(desired, current);
    }
    let list = obj.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Value::Array(list) = list {
        let (s, reason, message) = &retrieved.condition;
        crate::cvo::status::set(list, now, "RetrievedUpdates", s, reason, message);
    }
    status
}

/// The CVO's `mergeReleaseMetadata`: `status.desired`'s missing `url` and `channels` from the
/// graph's node of the same version.
fn fill_metadata(desired: &mut serde_json::Map<String, Value>, current: &Release) {
    if desired.get("version").and_then(Value::as_str) != Some(current.version.as_str()) {
        return;
    }
    let missing = |d: &serde_json::Map<String, Value>, k: &str| match d.get(k) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    if missing(desired, "url") && !current.url.is_empty() {
        desired.insert("url".into(), json!(current.url));
    }
    if missing(desired, "channels") && !current.channels.is_empty() {
        desired.insert("channels".into(), json!(current.channels));
    }
}

/// Copies what the update graph owns ([`OWNED_FIELDS`], [`OWNED_CONDITIONS`]) from `fresh`
/// (the status just read) into `status` (the one another writer is about to write), so that
/// a writer working from an older copy does not undo the graph's writes.
pub fn carry_over(fresh: &Value, status: &mut Value) {
    let Some(obj) = status.as_object_mut() else {
        return;
    };
    for field in OWNED_FIELDS {
        match fresh.get(field) {
            Some(v) => {
                obj.insert(field.into(), v.clone());
            }
            // `availableUpdates` is required (nullable): keep the writer's when the object
            // has none.
            None if field == "availableUpdates" => {}
            None => {
                obj.remove(field);
            }
        }
    }
    // `desired`'s metadata from the graph, while the writer means the same release.
    if let (Some(Value::Object(from)), Some(Value::Object(to))) =
        (fresh.get("desired"), obj.get_mut("desired"))
        && from.get("version") == to.get("version")
        && from.get("image") == to.get("image")
    {
        for key in ["url", "channels"] {
            if let (Some(v), None) = (from.get(key), to.get(key)) {
                to.insert(key.into(), v.clone());
            }
        }
    }
    let theirs: Vec<Value> = fresh
        .get("conditions")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter(|c| OWNED_CONDITIONS.iter().any(|t| c["type"] == *t))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(list)) = obj.get_mut("conditions") {
        for kind in OWNED_CONDITIONS {
            let fresh_one = theirs.iter().find(|c| c["type"] == kind);
            match (list.iter().position(|c| c["type"] == kind), fresh_one) {
                (Some(i), Some(c)) => list[i] = c.clone(),
                (Some(i), None) if kind == "Invalid" => {
                    list.remove(i);
                }
                (None, Some(c)) => list.push(c.clone()),
                _ => {}
            }
        }
    }
}

/// The image of `version` for a `spec.desiredUpdate` that names only a version: the
/// `status.availableUpdates` entry of that version, else `status.desired` when it is that
/// version (the release the cluster runs, which the CVO falls back to as its own release, so
/// that a completed update stays put once the graph no longer offers its version).
#[must_use]
pub fn resolve_version(cluster_version: &Value, version: &str) -> Option<String> {
    let status = cluster_version.get("status")?;
    let with_image =
        |r: &&Value| r["version"] == version && r["image"].as_str().is_some_and(|i| !i.is_empty());
    status
        .get("availableUpdates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(with_image)
        .or_else(|| status.get("desired").filter(with_image))
        .and_then(|r| r["image"].as_str())
        .map(str::to_string)
}

/// The CVO's `Invalid` condition message for a `spec.desiredUpdate.version` without an image
/// that is not an available update.
#[must_use]
pub fn not_available_message(version: &str) -> String {
    format!(
        "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: {version:?}: when image is empty the update must be an available update"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update_graph::cincinnati;

    const ID: &str = "1d3c4a27-6a4f-4b2b-9c1e-2b3f5d1c0a9e";

    fn cv(spec: &Value) -> Value {
        json!({"spec": spec, "status": {"desired": {"version": "4.13.0", "image": ""}}})
    }

    #[test]
    fn the_cvo_checks_come_in_its_order() {
        let reason = |spec: Value, version: &str| query(&cv(&spec), version, "").unwrap_err().0;
        assert_eq!(reason(json!({"clusterID": ID}), "4.13.0"), "NoChannel");
        assert_eq!(
            reason(json!({"upstream": "::", "channel": "c"}), "4.13.0"),
            "InvalidURI"
        );
        let up = "http://127.0.0.1:1/graph";
        assert_eq!(
            reason(json!({"upstream": up, "clusterID": "x"}), "4.13.0"),
            "InvalidID"
        );
        assert_eq!(
            reason(json!({"upstream": up, "clusterID": ID}), ""),
            "NoCurrentVersion"
        );
        assert_eq!(
            reason(json!({"upstream": up, "clusterID": ID}), "4.13.0"),
            "NoChannel"
        );
        let spec = json!({"upstream": up, "clusterID": ID, "channel": "c"});
        assert_eq!(reason(spec.clone(), "4.13"), "InvalidCurrentVersion");
        let q = query(&cv(&spec), "4.13.0", "").unwrap();
        assert_eq!(q.channel, "c");
        assert_eq!(q.upstream, up);
        assert!(!q.to_multi);
        assert_eq!(
            query(&cv(&json!({"clusterID": ID})), "4.13.0", "").unwrap_err(),
            (
                "NoChannel",
                "The update channel has not been configured.".to_string()
            )
        );
    }

    #[test]
    fn the_update_service_is_the_flag_then_the_upstream_then_the_default() {
        let spec = json!({"clusterID": ID, "channel": "stable-4.14"});
        let q = query(&cv(&spec), "4.13.0", "").unwrap();
        assert_eq!(
            q.upstream,
            "https://api.openshift.com/api/upgrades_info/v1/graph"
        );
        let mut with_upstream = spec.clone();
        with_upstream["upstream"] = json!("https://updates.example/graph");
        let q = query(&cv(&with_upstream), "4.13.0", "").unwrap();
        assert_eq!(q.upstream, "https://updates.example/graph");
        let flag = "http://127.0.0.1:8080/graph";
        assert_eq!(
            query(&cv(&with_upstream), "4.13.0", flag).unwrap().upstream,
            flag
        );
        assert_eq!(query(&cv(&spec), "4.13.0", flag).unwrap().upstream, flag);
        // The flag is checked as an upstream is.
        assert_eq!(
            query(&cv(&with_upstream), "4.13.0", "::").unwrap_err().0,
            "InvalidURI"
        );
    }

    #[test]
    fn cluster_ids_parse_as_go_parses_them() {
        assert!(check_uuid(ID).is_ok());
        assert!(check_uuid(&format!("{{{ID}}}")).is_ok());
        assert!(check_uuid(&format!("urn:uuid:{ID}")).is_ok());
        assert!(check_uuid(&ID.replace('-', "")).is_ok());
        assert_eq!(check_uuid("abc").unwrap_err(), "invalid UUID length: 3");
        assert_eq!(
            check_uuid(&ID.replace('-', "x")).unwrap_err(),
            "invalid UUID format"
        );
    }

    #[test]
    fn updates_and_the_condition_are_written_and_carried_over() {
        let graph = json!({"nodes": [
            {"version": "4.13.0", "payload": "img:4.13.0"},
            {"version": "4.14.0", "payload": "img:4.14.0"},
            {"version": "4.14.1", "payload": "img:4.14.1"}],
            "edges": [[0, 1]],
            "conditionalEdges": [{"edges": [{"from": "4.13.0", "to": "4.14.1"}],
              "risks": [{"name": "R", "message": "m", "url": "https://x", "matchingRules": [{"type": "PromQL", "promql": {"promql": "1"}}]}]}]});
        let u = cincinnati::updates(
            &serde_json::to_vec(&graph).unwrap(),
            &semver::Version::new(4, 13, 0),
            "c",
        )
        .unwrap();
        let r = Retrieved::success(&u, false);
        let s = with_updates(
            &json!({"conditions": [], "desired": {"version": "4.13.0", "image": ""}}),
            &r,
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(
            s["desired"],
            json!({"version": "4.13.0", "image": ""}),
            "the node has no metadata"
        );
        assert_eq!(
            s["availableUpdates"],
            json!([{"version": "4.14.0", "image": "img:4.14.0"}])
        );
        assert_eq!(
            s["conditionalUpdates"][0]["conditions"][0]["status"],
            "Unknown"
        );
        assert_eq!(s["conditions"][0]["type"], "RetrievedUpdates");
        assert!(s["conditions"][0].get("reason").is_none());
        let cvo = json!({"status": s});
        assert_eq!(
            resolve_version(&cvo, "4.14.0").as_deref(),
            Some("img:4.14.0")
        );
        assert_eq!(resolve_version(&cvo, "4.14.1"), None, "not recommended");

        // A failure keeps a previous success's updates only when asked to.
        let e = GraphError::new("RemoteFailed", "down");
        let kept = with_updates(&s, &Retrieved::failed(&e, Some(&r)), "2026-01-02T00:00:00Z");
        assert_eq!(kept["availableUpdates"], s["availableUpdates"]);
        let cleared = with_updates(&s, &Retrieved::failed(&e, None), "2026-01-02T00:00:00Z");
        assert!(cleared["availableUpdates"].is_null());
        assert!(cleared.get("conditionalUpdates").is_none());
        let c = &cleared["conditions"][0];
        assert_eq!(c["message"], "Unable to retrieve available updates: down");
        assert_eq!(c["lastTransitionTime"], "2026-01-02T00:00:00Z");

        // Another writer's older copy does not undo the graph's fields.
        let mut other = json!({"availableUpdates": null, "desired": {"version": "4.13.0", "image": ""}, "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "RetrievedUpdates", "status": "False"},
            {"type": "Invalid", "status": "True"}]});
        carry_over(&s, &mut other);
        assert_eq!(other["availableUpdates"], s["availableUpdates"]);
        assert_eq!(other["conditionalUpdates"], s["conditionalUpdates"]);
        let types: Vec<&str> = other["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Available", "RetrievedUpdates"]);
        assert_eq!(other["conditions"][1]["status"], "True");
    }

    #[test]
    fn a_move_to_multi_offers_only_the_current_version() {
        let graph = json!({"nodes": [{"version": "4.13.0", "payload": "multi:4.13.0",
            "metadata": {"release.openshift.io/architecture": "multi"}},
            {"version": "4.14.0", "payload": "multi:4.14.0"}], "edges": [[0, 1]]});
        let u = cincinnati::updates(
            &serde_json::to_vec(&graph).unwrap(),
            &semver::Version::new(4, 13, 0),
            "c",
        )
        .unwrap();
        let r = Retrieved::success(&u, true);
        assert_eq!(r.updates.len(), 1);
        assert_eq!(r.updates[0].image, "multi:4.13.0");
        let spec = json!({"upstream": "http://x/graph", "clusterID": ID, "channel": "c",
                          "desiredUpdate": {"architecture": "Multi"}});
        let q = query(&cv(&spec), "4.13.0", "").unwrap();
        assert_eq!((q.arch.as_str(), q.to_multi), ("multi", true));
    }

    #[test]
    fn the_invalid_message_is_the_cvos() {
        assert_eq!(
            not_available_message("4.99.0"),
            "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"4.99.0\": when image is empty the update must be an available update"
        );
    }
}

#[cfg(test)]
mod metadata_tests {
    use super::*;

    #[test]
    fn desired_takes_url_and_channels_from_the_graph_node_of_its_version() {
        let node = Release {
            version: "4.13.0".into(),
            image: "img".into(),
            url: "https://errata.example/4.13.0".into(),
            channels: vec!["fast-4.14".into(), "stable-4.14".into()],
        };
        let r = Retrieved {
            condition: ("True", "", String::new()),
            updates: Vec::new(),
            conditional: Vec::new(),
            current: Some(node),
        };
        let s = with_updates(
            &json!({"desired": {"version": "4.13.0", "image": ""}}),
            &r,
            "t",
        );
        assert_eq!(
            s["desired"]["channels"],
            json!(["fast-4.14", "stable-4.14"])
        );
        assert_eq!(s["desired"]["url"], "https://errata.example/4.13.0");
        let other = with_updates(
            &json!({"desired": {"version": "4.14.0", "image": ""}}),
            &r,
            "t",
        );
        assert!(other["desired"].get("channels").is_none());
        // A writer of the same release keeps them; one of another release does not get them.
        let mut same = json!({"desired": {"version": "4.13.0", "image": ""}});
        carry_over(&s, &mut same);
        assert_eq!(same["desired"], s["desired"]);
        let mut next = json!({"desired": {"version": "4.14.0", "image": "x"}});
        carry_over(&s, &mut next);
        assert_eq!(next["desired"], json!({"version": "4.14.0", "image": "x"}));
    }
}
