//! The checks every kept document passes: an object with `apiVersion`, `kind` and
//! `metadata.name`, no duplicate in its file, and no larger than the kube-apiserver accepts.

use serde_json::Value;

use super::{LoadError, MAX_OBJECT_BYTES, RawDocument};
use crate::manifest::{Manifest, ObjectId, Source};

pub(super) fn check_document(
    source: Source,
    file_name: &str,
    file: &str,
    document: usize,
    doc: RawDocument,
) -> Result<Manifest, LoadError> {
    let RawDocument {
        line,
        value,
        json_len_bound,
    } = doc;
    let invalid = |message: String| LoadError::Invalid {
        file: file.to_string(),
        document,
        line,
        message,
    };
    let Value::Object(map) = &value else {
        return Err(invalid(format!(
            "expected an object with apiVersion, kind and metadata, found {}",
            json_type(&value)
        )));
    };
    let text_field = |v: Option<&Value>, field: &str| -> Result<String, LoadError> {
        match v {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::String(_)) | None | Some(Value::Null) => Err(invalid(format!(
                "object has no {field}: must contain kubernetes required fields apiVersion, kind and metadata.name"
            ))),
            Some(other) => Err(invalid(format!(
                "{field} must be a string, found {}",
                json_type(other)
            ))),
        }
    };
    let api_version = text_field(map.get("apiVersion"), "apiVersion")?;
    let kind = text_field(map.get("kind"), "kind")?;
    let metadata = match map.get("metadata") {
        Some(Value::Object(m)) => m,
        Some(Value::Null) | None => {
            return Err(invalid(
                "object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name".to_string(),
            ));
        }
        Some(other) => {
            return Err(invalid(format!(
                "metadata must be an object, found {}",
                json_type(other)
            )));
        }
    };
    let name = text_field(metadata.get("name"), "metadata.name")?;
    let namespace = match metadata.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(invalid(format!(
                "metadata.namespace must be a string, found {}",
                json_type(other)
            )));
        }
    };
    if let Some(ann) = metadata.get("annotations") {
        match ann {
            Value::Null => {}
            Value::Object(m) => {
                if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_string()) {
                    return Err(invalid(format!(
                        "annotation {k:?} must be a string, found {}\nhint: quote the value, e.g. \"true\"",
                        json_type(v)
                    )));
                }
            }
            other => {
                return Err(invalid(format!(
                    "metadata.annotations must be an object, found {}",
                    json_type(other)
                )));
            }
        }
    }
    if let Some(labels) = metadata.get("labels") {
        match labels {
            Value::Null => {}
            Value::Object(m) => {
                if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_string()) {
                    return Err(invalid(format!(
                        "label {k:?} must be a string, found {}\nhint: quote the value, e.g. \"true\"",
                        json_type(v)
                    )));
                }
            }
            other => {
                return Err(invalid(format!(
                    "metadata.labels must be an object, found {}",
                    json_type(other)
                )));
            }
        }
    }
    if json_len_bound > MAX_OBJECT_BYTES
        && json_size_bound(&value) > MAX_OBJECT_BYTES
        && exceeds_json_size(&value, MAX_OBJECT_BYTES)
    {
        return Err(invalid(format!(
            "object is larger than {} MiB as JSON, more than the kube-apiserver accepts in one request",
            MAX_OBJECT_BYTES / (1024 * 1024)
        )));
    }
    let group = api_version
        .rsplit_once('/')
        .map_or(String::new(), |(g, _)| g.to_string());
    Ok(Manifest {
        source,
        file: file_name.to_string(),
        document,
        line,
        api_version,
        id: ObjectId {
            group,
            kind,
            namespace,
            name,
        },
        object: value,
    })
}

/// An upper bound of the size of `value` as compact JSON, without writing it: strings count
/// their escapes, numbers count as 24 bytes (the longest a number prints as). Several times
/// cheaper than serializing, so only objects near the limit are serialized.
pub(super) fn json_size_bound(value: &Value) -> usize {
    fn string(s: &str) -> usize {
        // `"`, `\` and control characters print escaped, as at most 6 bytes.
        let escaped: usize = s
            .bytes()
            .map(|b| usize::from(b < 0x20 || b == b'"' || b == b'\\'))
            .sum();
        s.len() + 2 + 5 * escaped
    }
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => string(s),
        Value::Array(items) => 2 + items.iter().map(|v| json_size_bound(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| string(k) + 2 + json_size_bound(v))
                .sum::<usize>()
        }
    }
}

/// Whether `value` serialized as compact JSON takes more than `limit` bytes. Stops writing as
/// soon as the limit is passed.
pub(super) fn exceeds_json_size(value: &Value, limit: usize) -> bool {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written += buf.len();
            if self.written > self.limit {
                return Err(std::io::Error::other("limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, value).is_err()
}

pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
