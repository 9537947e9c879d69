//! `minicvo status -o json`: what the text shows, as data. Fields: `version`, `image`,
//! `channel`, `upstream`, `availableChannels`, `progressing` (`status`, `message`),
//! `conditions` (each `type`, `status`, `reason`, `message`, as the status has them),
//! `history` (`version`, `state`, `startedTime`, `completionTime`), `retrievedUpdates`
//! (the condition, `null` when absent), `recommendedUpdates` (`version`, `image`, `url`,
//! `channels`), `conditionalUpdates` (`version`, `image`, `recommended` with `status`,
//! `reason`, `message`, and `risks` by name and URL). Lists are sorted as the text sorts them.

use serde_json::{Value, json};

use super::{condition, recommended, sorted, text_of};

fn plain_condition(c: &Value) -> Value {
    json!({
        "type": text_of(c, "type"),
        "status": text_of(c, "status"),
        "reason": text_of(c, "reason"),
        "message": text_of(c, "message"),
    })
}

/// The JSON document of `cluster_version`.
#[must_use]
pub fn json(cluster_version: &Value) -> Value {
    let desired = cluster_version
        .pointer("/status/desired")
        .cloned()
        .unwrap_or(Value::Null);
    let spec = &cluster_version["spec"];
    let progressing = condition(cluster_version, "Progressing");
    let conditions: Vec<Value> = cluster_version
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|l| l.iter().map(plain_condition).collect())
        .unwrap_or_default();
    let history: Vec<Value> = cluster_version
        .pointer("/status/history")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|h| {
                    json!({
                        "version": text_of(h, "version"),
                        "image": text_of(h, "image"),
                        "state": text_of(h, "state"),
                        "startedTime": h.get("startedTime").cloned().unwrap_or(Value::Null),
                        "completionTime": h.get("completionTime").cloned().unwrap_or(Value::Null),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let recommended_updates: Vec<Value> =
        sorted(cluster_version.pointer("/status/availableUpdates"), |u| {
            text_of(u, "version")
        })
        .into_iter()
        .map(|u| {
            json!({
                "version": text_of(u, "version"),
                "image": text_of(u, "image"),
                "url": text_of(u, "url"),
                "channels": u.get("channels").cloned().unwrap_or_else(|| json!([])),
            })
        })
        .collect();
    let conditional: Vec<Value> =
        sorted(cluster_version.pointer("/status/conditionalUpdates"), |u| {
            u.pointer("/release/version")
                .and_then(Value::as_str)
                .unwrap_or_default()
        })
        .into_iter()
        .map(|u| {
            let risks: Vec<Value> = u["risks"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .map(|r| json!({"name": text_of(r, "name"), "url": text_of(r, "url")}))
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "version": text_of(&u["release"], "version"),
                "image": text_of(&u["release"], "image"),
                "recommended": recommended(u).map_or(Value::Null, plain_condition),
                "risks": risks,
            })
        })
        .collect();
    json!({
        "version": text_of(&desired, "version"),
        "image": text_of(&desired, "image"),
        "channel": text_of(spec, "channel"),
        "upstream": text_of(spec, "upstream"),
        "availableChannels": desired.get("channels").cloned().unwrap_or_else(|| json!([])),
        "progressing": progressing.map_or(Value::Null, |c| json!({
            "status": text_of(c, "status"),
            "message": text_of(c, "message"),
        })),
        "conditions": conditions,
        "history": history,
        "retrievedUpdates": condition(cluster_version, "RetrievedUpdates").map_or(Value::Null, plain_condition),
        "recommendedUpdates": recommended_updates,
        "conditionalUpdates": conditional,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_names_the_release_and_its_updates() {
        let cv = json!({"spec": {"channel": "c"}, "status": {
            "desired": {"version": "4.13.0", "image": "i"},
            "conditions": [{"type": "RetrievedUpdates", "status": "True", "lastTransitionTime": "t"}],
            "availableUpdates": [{"version": "4.13.1", "image": "a"}, {"version": "4.14.0", "image": "b"}],
            "conditionalUpdates": [{"release": {"version": "4.14.1", "image": "c"},
                "risks": [{"name": "R", "url": "https://x", "message": "m", "matchingRules": [{"type": "Always"}]}],
                "conditions": [{"type": "Recommended", "status": "False", "reason": "R", "message": "m https://x"}]}],
        }});
        let j = json(&cv);
        assert_eq!(j["version"], "4.13.0");
        assert_eq!(j["recommendedUpdates"][0]["version"], "4.14.0");
        assert_eq!(j["conditionalUpdates"][0]["recommended"]["status"], "False");
        assert_eq!(j["conditionalUpdates"][0]["risks"][0]["name"], "R");
        assert_eq!(j["retrievedUpdates"]["status"], "True");
        assert!(j["progressing"].is_null());
    }
}
