//! The pure part of the live diff: what is compared (an object without the fields the server
//! owns), and the unified diff shown, with Secret values masked.

use serde_json::Value;

use crate::analysis::objects::{is_secret, mask_secret_pair, unified_diff};
use crate::cluster::body::without_server_owned;

/// An annotation kubectl writes with the whole last applied object (for a Secret, its data).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The object without `status` and the metadata the server owns
/// ([`without_server_owned`], the same normalisation dry-run apply uses): the fields minicvo
/// manages, plus the server's defaults (the same on both sides of a diff).
#[must_use]
pub fn normalize(object: &Value) -> Value {
    without_server_owned(object)
}

/// Whether two objects are the same once normalized.
#[must_use]
pub fn same(live: &Value, result: &Value) -> bool {
    normalize(live) == normalize(result)
}

fn mask_last_applied(object: &mut Value) {
    if let Some(a) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        && let Some(v) = a.get_mut(LAST_APPLIED)
    {
        *v = Value::String(crate::analysis::objects::MASK.to_string());
    }
}

/// The unified diff of the live object (`None`: absent) and the object after the change
/// (`None`: deleted), both normalized. Secret `data` and `stringData` values are masked
/// (`***`, or `*** (before)` / `*** (after)` when they change), and so is a Secret's
/// last-applied-configuration annotation: no Secret value is ever printed.
#[must_use]
pub fn render(live: Option<&Value>, after: Option<&Value>, label: &str) -> String {
    let live = live.map(normalize);
    let mut after = after.map(normalize);
    if let (Some(l), Some(a)) = (&live, &mut after) {
        align_key_order(l, a);
    }
    let (mut live, mut after) = mask_secret_pair(live.as_ref(), after.as_ref());
    for side in [&mut live, &mut after].into_iter().flatten() {
        if is_secret(side) {
            mask_last_applied(side);
        }
    }
    unified_diff(
        live.as_ref(),
        after.as_ref(),
        &format!("live/{label}"),
        &format!("payload/{label}"),
    )
}

/// Reorders the keys of every object in `after` to follow `live` where both have them (keys
/// only `after` has come last, in their order), so that a different key order, which means
/// nothing in JSON, never shows as a change in the text diff.
fn align_key_order(live: &Value, after: &mut Value) {
    match (live, after) {
        (Value::Object(l), Value::Object(a)) => {
            let mut old = std::mem::take(a);
            for (k, lv) in l {
                if let Some(mut av) = old.remove(k) {
                    align_key_order(lv, &mut av);
                    a.insert(k.clone(), av);
                }
            }
            a.extend(old);
        }
        (Value::Array(l), Value::Array(a)) => {
            for (lv, av) in l.iter().zip(a.iter_mut()) {
                align_key_order(lv, av);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_different_key_order_is_no_change() {
        let live = json!({"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"},
                          "data": {"x": "1", "y": "2"}});
        let after = json!({"data": {"y": "2", "x": "1"}, "kind": "ConfigMap",
                           "metadata": {"namespace": "ns", "name": "a"}});
        assert_eq!(render(Some(&live), Some(&after), "ConfigMap ns/a"), "");
    }

    #[test]
    fn server_owned_fields_and_status_do_not_count() {
        let live = json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "1",
            "resourceVersion": "5", "managedFields": [{}], "creationTimestamp": "t",
            "generation": 2}, "data": {"k": "v"}, "status": {"x": 1}});
        let result = json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "1",
            "resourceVersion": "6", "managedFields": [{}, {}]}, "data": {"k": "v"}});
        assert!(same(&live, &result));
        let changed = json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "w"}});
        assert!(!same(&live, &changed));
    }

    #[test]
    fn diff_of_a_change_shows_only_managed_fields() {
        let live = json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "1"},
            "data": {"k": "v"}});
        let after = json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "1"},
            "data": {"k": "w"}});
        let d = render(Some(&live), Some(&after), "ConfigMap ns/a");
        assert!(
            d.starts_with("--- live/ConfigMap ns/a\n+++ payload/ConfigMap ns/a\n"),
            "{d}"
        );
        assert!(d.contains("-  k: v\n+  k: w\n"), "{d}");
        assert!(!d.contains("uid"), "{d}");
    }

    #[test]
    fn secret_values_never_appear_in_a_diff() {
        let live = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "annotations": {LAST_APPLIED: "{\"data\":{\"p\":\"c2VjcmV0\"}}"}},
            "data": {"p": "c2VjcmV0"}});
        let after = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "annotations": {LAST_APPLIED: "{\"data\":{\"p\":\"bmV3\"}}"}},
            "data": {"p": "bmV3"}});
        for d in [
            render(Some(&live), Some(&after), "s"),
            render(None, Some(&after), "s"),
            render(Some(&live), None, "s"),
        ] {
            assert!(!d.contains("c2VjcmV0") && !d.contains("bmV3"), "{d}");
        }
        let d = render(Some(&live), Some(&after), "s");
        assert!(
            d.contains("*** (before)") && d.contains("*** (after)"),
            "{d}"
        );
    }
}
