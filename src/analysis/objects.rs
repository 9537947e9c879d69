//! Object identity and content: matching documents by the CVO's identity (group, kind,
//! namespace, name), comparing their contents, and showing a difference as a unified diff of
//! their YAML, with Secret values masked where asked.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use similar::TextDiff;

use crate::manifest::{Manifest, ObjectId};

/// What replaces a Secret value in a masked object.
pub const MASK: &str = "***";

/// Documents grouped by identity, each group in load order.
#[must_use]
pub fn by_identity<'a>(
    manifests: impl IntoIterator<Item = &'a Manifest>,
) -> BTreeMap<&'a ObjectId, Vec<&'a Manifest>> {
    let mut map: BTreeMap<&ObjectId, Vec<&Manifest>> = BTreeMap::new();
    for m in manifests {
        map.entry(&m.id).or_default().push(m);
    }
    map
}

/// Whether two objects have the same content. Key order does not matter; everything else,
/// annotations included, does.
#[must_use]
pub fn same_content(a: &Value, b: &Value) -> bool {
    a == b
}

/// The YAML text of an object, keys in their original order.
#[must_use]
pub fn to_yaml(object: &Value) -> String {
    match serde_saphyr::to_string(object) {
        Ok(mut s) => {
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s
        }
        // A JSON value always has a YAML form; fall back to JSON rather than lose the diff.
        Err(_) => serde_json::to_string_pretty(object).unwrap_or_default() + "\n",
    }
}

/// A unified diff (3 lines of context) of the YAML of two objects, with `---`/`+++` headers
/// naming them. `None` stands for an absent object (everything added or removed). Empty when
/// the YAML texts are equal.
#[must_use]
pub fn unified_diff(
    old: Option<&Value>,
    new: Option<&Value>,
    old_label: &str,
    new_label: &str,
) -> String {
    let a = old.map(to_yaml).unwrap_or_default();
    let b = new.map(to_yaml).unwrap_or_default();
    if a == b {
        return String::new();
    }
    TextDiff::from_lines(&a, &b)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

/// Whether the object is a core `Secret`.
#[must_use]
pub fn is_secret(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// Masks the `data` and `stringData` values of a pair of Secret versions the way `kubectl diff`
/// does: a value equal on both sides becomes `***`; a changed one becomes `*** (before)` and
/// `*** (after)`, so a diff shows that it changed but never what it is. Objects that are not
/// Secrets come back unchanged.
#[must_use]
pub fn mask_secret_pair(
    old: Option<&Value>,
    new: Option<&Value>,
) -> (Option<Value>, Option<Value>) {
    let secret = old.is_some_and(is_secret) || new.is_some_and(is_secret);
    if !secret {
        return (old.cloned(), new.cloned());
    }
    let mut old = old.cloned();
    let mut new = new.cloned();
    for field in ["data", "stringData"] {
        let before = old
            .as_ref()
            .and_then(|o| o.get(field))
            .and_then(Value::as_object)
            .cloned();
        let after = new
            .as_ref()
            .and_then(|o| o.get(field))
            .and_then(Value::as_object)
            .cloned();
        let mask = |mine: &Map<String, Value>, other: Option<&Map<String, Value>>, tag: &str| {
            mine.iter()
                .map(|(k, v)| {
                    let shown = match other.and_then(|o| o.get(k)) {
                        Some(w) if w == v => MASK.to_string(),
                        Some(_) => format!("{MASK} ({tag})"),
                        None => MASK.to_string(),
                    };
                    (k.clone(), Value::String(shown))
                })
                .collect::<Map<String, Value>>()
        };
        if let (Some(o), Some(b)) = (old.as_mut(), before.as_ref()) {
            o[field] = Value::Object(mask(b, after.as_ref(), "before"));
        }
        if let (Some(n), Some(a)) = (new.as_mut(), after.as_ref()) {
            n[field] = Value::Object(mask(a, before.as_ref(), "after"));
        }
    }
    (old, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_make_objects_differ() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"c":2,"d":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"d":3,"c":2},"a":1}"#).unwrap();
        assert!(same_content(&a, &b));
        assert!(!same_content(&a, &json!({"a": 1})));
    }

    #[test]
    fn unified_diff_shows_changed_lines_only_with_headers() {
        let old = json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}});
        let new = json!({"kind": "ConfigMap", "data": {"a": "1", "b": "3"}});
        let d = unified_diff(Some(&old), Some(&new), "old/x.yaml", "new/x.yaml");
        assert!(d.starts_with("--- old/x.yaml\n+++ new/x.yaml\n"), "{d}");
        assert!(d.contains("-  b: '2'") || d.contains("-  b: \"2\""), "{d}");
        assert!(d.contains("+  b: '3'") || d.contains("+  b: \"3\""), "{d}");
        assert!(unified_diff(Some(&old), Some(&old), "a", "b").is_empty());
    }

    #[test]
    fn diff_against_nothing_adds_every_line() {
        let new = json!({"kind": "ConfigMap"});
        let d = unified_diff(None, Some(&new), "live", "payload");
        assert!(d.contains("+kind: ConfigMap"), "{d}");
    }

    #[test]
    fn secret_values_are_masked_but_changes_stay_visible() {
        let old = json!({"apiVersion": "v1", "kind": "Secret",
            "data": {"same": "c2VjcmV0", "changed": "b2xk", "gone": "eA=="}});
        let new = json!({"apiVersion": "v1", "kind": "Secret",
            "data": {"same": "c2VjcmV0", "changed": "bmV3", "added": "eQ=="}});
        let (o, n) = mask_secret_pair(Some(&old), Some(&new));
        let (o, n) = (o.unwrap(), n.unwrap());
        assert_eq!(o["data"]["same"], "***");
        assert_eq!(o["data"]["changed"], "*** (before)");
        assert_eq!(n["data"]["changed"], "*** (after)");
        assert_eq!(o["data"]["gone"], "***");
        assert_eq!(n["data"]["added"], "***");
        let text = unified_diff(Some(&o), Some(&n), "a", "b");
        for secret in ["c2VjcmV0", "b2xk", "bmV3", "eA==", "eQ=="] {
            assert!(!text.contains(secret), "{text}");
        }
    }

    #[test]
    fn objects_other_than_secrets_are_not_masked() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
        let (o, _) = mask_secret_pair(Some(&cm), None);
        assert_eq!(o.unwrap()["data"]["a"], "1");
    }
}
