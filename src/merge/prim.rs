//! The CVO's merge helpers on JSON objects: each one compares one field of the required object
//! with the existing one, copies it over when the rule says so, and raises the shared
//! `modified` flag (never lowers it).
//!
//! A JSON object cannot tell a nil Go pointer from a pointer to a zero value, nor a nil slice
//! from an absent one. The helpers follow one convention: an absent field and `null` are the
//! same; for the semantic comparison ([`sem_eq`]) an empty list, an empty map, `false`, `0` and
//! `""` also equal an absent field (what Go's semantic equality does for slices, maps and value
//! fields). The pointer rules ([`Merger::set_ptr`]) look at presence only, as the CVO does.

use serde_json::{Map, Value};

/// A JSON object.
pub(crate) type Obj = Map<String, Value>;

/// The field, or `None` when it is absent or `null`.
pub(crate) fn get<'a>(m: &'a Obj, key: &str) -> Option<&'a Value> {
    m.get(key).filter(|v| !v.is_null())
}

/// The string field, `""` when absent or not a string.
pub(crate) fn get_str<'a>(m: &'a Obj, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The field as an object, when it is one.
pub(crate) fn get_obj<'a>(m: &'a Obj, key: &str) -> Option<&'a Obj> {
    m.get(key).and_then(Value::as_object)
}

/// The field as a list, empty when absent or not a list.
pub(crate) fn get_list<'a>(m: &'a Obj, key: &str) -> &'a [Value] {
    m.get(key)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

/// A Go zero value or an empty collection, which semantic equality treats as absent.
fn is_zero(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
    }
}

/// Kubernetes' semantic equality on JSON: absent, `null`, zero values and empty collections
/// are equal; numbers compare by value; list order matters.
pub(crate) fn sem_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        // Each key is compared once: visiting the shared keys from both sides would double
        // the work at every level, 2^depth on a deep CRD schema.
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.iter().all(|(k, v)| sem_eq(Some(v), y.get(k)))
                && y.iter()
                    .filter(|(k, _)| !x.contains_key(*k))
                    .all(|(_, v)| is_zero(Some(v)))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| sem_eq(Some(p), Some(q)))
        }
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        _ if is_zero(a) && is_zero(b) => true,
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The numeric value of a Kubernetes quantity (`100m`, `1Gi`, `2e3`), `None` when it does not
/// parse.
pub(crate) fn quantity(v: &Value) -> Option<f64> {
    if let Some(n) = v.as_f64() {
        return Some(n);
    }
    let s = v.as_str()?.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let base: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(base * mult)
}

/// Semantic equality of two resource lists (`limits`, `requests`): same names, quantities
/// equal by value; absent equals empty.
pub(crate) fn resource_list_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    let empty = Obj::new();
    let a = a.and_then(Value::as_object).unwrap_or(&empty);
    let b = b.and_then(Value::as_object).unwrap_or(&empty);
    a.len() == b.len()
        && a.iter().all(|(k, v)| {
            b.get(k).is_some_and(|w| match (quantity(v), quantity(w)) {
                (Some(x), Some(y)) => x == y,
                _ => v == w,
            })
        })
}

/// Sets `key` to `v`, or removes it when `v` is `None`.
pub(crate) fn put(m: &mut Obj, key: &str, v: Option<Value>) {
    match v {
        Some(v) if !v.is_null() => {
            m.insert(key.to_owned(), v);
        }
        _ => {
            m.remove(key);
        }
    }
}

/// The object under `key`, created empty when absent or not an object.
pub(crate) fn obj_mut<'a>(m: &'a mut Obj, key: &str) -> &'a mut Obj {
    let slot = m
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Obj::new()));
    if !slot.is_object() {
        *slot = Value::Object(Obj::new());
    }
    slot.as_object_mut().expect("just made an object")
}

/// Runs `f` on the list under `key` (empty when absent) and stores the result; an empty
/// result is stored only when the key was there before.
pub(crate) fn with_list<R>(m: &mut Obj, key: &str, f: impl FnOnce(&mut Vec<Value>) -> R) -> R {
    let had = m.contains_key(key);
    let mut list = match m.remove(key) {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    let r = f(&mut list);
    if had || !list.is_empty() {
        m.insert(key.to_owned(), Value::Array(list));
    }
    r
}

/// The shared `modified` flag and the helpers that raise it.
#[derive(Debug, Default)]
pub(crate) struct Merger {
    /// Whether any rule changed the existing object.
    pub modified: bool,
}

impl Merger {
    /// set-if-non-empty: a non-empty required string that differs is copied.
    pub fn set_if_non_empty(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        let r = get_str(req, key);
        if !r.is_empty() && get_str(ex, key) != r {
            ex.insert(key.to_owned(), Value::String(r.to_owned()));
            self.modified = true;
        }
    }

    /// set scalar: the required value (absent is the zero value) is enforced.
    pub fn set_scalar(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        if !sem_eq(get(ex, key), get(req, key)) {
            put(ex, key, get(req, key).cloned());
            self.modified = true;
        }
    }

    /// set pointer: presence decides; a field the manifest leaves out clears the live value.
    pub fn set_ptr(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        match (get(ex, key), get(req, key)) {
            (None, None) => {}
            (Some(e), Some(r)) if sem_eq(Some(e), Some(r)) => {}
            (_, r) => {
                put(ex, key, r.cloned());
                self.modified = true;
            }
        }
    }

    /// Only when required is set and differs (`revisionHistoryLimit`).
    pub fn set_if_required(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        if let Some(r) = get(req, key)
            && !sem_eq(get(ex, key), Some(r))
        {
            ex.insert(key.to_owned(), r.clone());
            self.modified = true;
        }
    }

    /// replace-if-different (semantic equality).
    pub fn replace(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        if !sem_eq(get(ex, key), get(req, key)) {
            put(ex, key, get(req, key).cloned());
            self.modified = true;
        }
    }

    /// string-slice set: strict equality, so `[]` and absent differ.
    pub fn set_string_slice(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        if get(ex, key) != get(req, key) {
            put(ex, key, get(req, key).cloned());
            self.modified = true;
        }
    }

    /// string-map merge: keys of required are added or changed, live-only keys kept.
    pub fn merge_map(&mut self, ex: &mut Obj, req: &Obj, key: &str) {
        let Some(r) = get_obj(req, key) else { return };
        if r.is_empty() {
            return;
        }
        let e = obj_mut(ex, key);
        for (k, v) in r {
            if e.get(k) != Some(v) {
                e.insert(k.clone(), v.clone());
                self.modified = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sem_eq_treats_absent_and_empty_alike_but_not_order() {
        assert!(sem_eq(None, Some(&json!([]))));
        assert!(sem_eq(Some(&json!({"a": null})), Some(&json!({}))));
        assert!(sem_eq(Some(&json!({"a": 1})), Some(&json!({"a": 1.0}))));
        assert!(!sem_eq(Some(&json!([1, 2])), Some(&json!([2, 1]))));
        assert!(!sem_eq(Some(&json!("a")), None));
    }

    #[test]
    fn sem_eq_is_linear_in_depth() {
        // A CRD schema nests 30 and more levels deep; comparing shared keys twice per level
        // would never finish here.
        let mut a = json!({"leaf": 1});
        for i in 0..64 {
            a = json!({"x": a, "y": i});
        }
        let mut b = a.clone();
        assert!(sem_eq(Some(&a), Some(&b)));
        *b.pointer_mut("/x/x/x/y").unwrap() = json!(-1);
        assert!(!sem_eq(Some(&a), Some(&b)));
    }

    #[test]
    fn quantities_compare_by_value() {
        assert!(resource_list_eq(
            Some(&json!({"cpu": "100m", "memory": "1Gi"})),
            Some(&json!({"cpu": "0.1", "memory": "1073741824"}))
        ));
        assert!(!resource_list_eq(
            Some(&json!({"cpu": "100m"})),
            Some(&json!({"cpu": "1"}))
        ));
        assert!(resource_list_eq(None, Some(&json!({}))));
    }

    #[test]
    fn set_ptr_clears_a_value_the_manifest_leaves_out() {
        let mut m = Merger::default();
        let mut ex = json!({"a": 3}).as_object().cloned().unwrap();
        m.set_ptr(&mut ex, &Obj::new(), "a");
        assert!(m.modified);
        assert!(ex.is_empty());
    }

    #[test]
    fn merge_map_keeps_live_keys() {
        let mut m = Merger::default();
        let mut ex = json!({"l": {"a": "1", "b": "2"}})
            .as_object()
            .cloned()
            .unwrap();
        let req = json!({"l": {"a": "1"}}).as_object().cloned().unwrap();
        m.merge_map(&mut ex, &req, "l");
        assert!(!m.modified);
        assert_eq!(ex["l"], json!({"a": "1", "b": "2"}));
    }
}
