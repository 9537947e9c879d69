//! `status.versionHash`: the CVO's fingerprint of a payload. A 64-bit FNV-1 hash (not FNV-1a)
//! over every included manifest in load order, each as the compact JSON with sorted keys that
//! Go's YAML-to-JSON conversion produces, the 8-byte big-endian digest in URL-safe base64 with
//! padding (12 characters).

use std::fmt::Write as _;

use serde_json::Value;

use crate::manifest::Manifest;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The FNV-1 64-bit hash of some bytes, continuing from `state`.
#[must_use]
pub fn fnv1_64(mut state: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        state = state.wrapping_mul(PRIME);
        state ^= u64::from(*b);
    }
    state
}

/// URL-safe base64 with `=` padding.
#[must_use]
pub fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The JSON Go's `encoding/json` writes for a value: compact, object keys sorted, `<`, `>`
/// and `&` escaped as `\u003c`, `\u003e`, `\u0026`.
#[must_use]
pub fn go_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, v);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, &map[k]);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
        // Go prints whole floats below 1e21 without a fraction.
        if f.fract() == 0.0 && f.abs() < 1e21 {
            let _ = write!(out, "{f:.0}");
            return;
        }
    }
    out.push_str(&n.to_string());
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The `versionHash` of a payload's included manifests, in load order.
#[must_use]
pub fn version_hash<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> String {
    let mut h = OFFSET;
    for m in manifests {
        h = fnv1_64(h, go_json(&m.object).as_bytes());
    }
    base64_url(&h.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fnv1_matches_the_reference_vectors() {
        // FNV-1 (not 1a) 64-bit reference values.
        assert_eq!(fnv1_64(OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1_64(OFFSET, b"a"), 0xaf63_bd4c_8601_b7be);
        assert_eq!(fnv1_64(OFFSET, b"foobar"), 0x340d_8765_a4dd_a9c2);
    }

    #[test]
    fn base64_is_url_safe_and_padded() {
        assert_eq!(base64_url(&[0xfb, 0xff, 0xbf]), "-_-_");
        assert_eq!(base64_url(b"f"), "Zg==");
        assert_eq!(base64_url(&[0u8; 8]), "AAAAAAAAAAA=");
        assert_eq!(base64_url(&0x1234_u64.to_be_bytes()).len(), 12);
    }

    #[test]
    fn json_is_compact_sorted_and_html_escaped() {
        let v = json!({"b": [1, 2.0, 2.5, true, null], "a": "<x>&\"\n\u{1}"});
        assert_eq!(
            go_json(&v),
            r#"{"a":"\u003cx\u003e\u0026\"\n\u0001","b":[1,2,2.5,true,null]}"#
        );
    }

    #[test]
    fn the_hash_depends_on_content_and_order() {
        use crate::manifest::{ObjectId, Source};
        let m = |name: &str| Manifest {
            source: Source::ReleaseManifests,
            file: "f.yaml".into(),
            document: 0,
            line: 1,
            api_version: "v1".into(),
            id: ObjectId {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: None,
                name: name.into(),
            },
            object: json!({"kind": "ConfigMap", "metadata": {"name": name}}).into(),
        };
        let ab = version_hash(&[m("a"), m("b")]);
        assert_eq!(ab.len(), 12);
        assert!(ab.ends_with('='));
        assert_ne!(ab, version_hash(&[m("b"), m("a")]));
        assert_eq!(ab, version_hash(&[m("a"), m("b")]));
        // Bytes: FNV-1 over the two JSON documents one after the other.
        let mut h = fnv1_64(OFFSET, br#"{"kind":"ConfigMap","metadata":{"name":"a"}}"#);
        h = fnv1_64(h, br#"{"kind":"ConfigMap","metadata":{"name":"b"}}"#);
        assert_eq!(ab, base64_url(&h.to_be_bytes()));
    }
}
