//! The checks every kept document passes: an object with `apiVersion`, `kind` and
//! `metadata.name`, no duplicate in its file, and no larger than the kube-apiserver accepts.

use serde_json::Value;

use super::{LoadError, MAX_OBJECT_BYTES, RawDocument};
use crate::manifest::{Manifest, ObjectId, Source};
use crate::payload::json_size;

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
    // Annotations and labels of the wrong shape are left to the filters and the API server,
    // as the CVO leaves them: its `GetAnnotations` reads a map with a value that is not a
    // string as no annotations at all, which excludes the manifest, and labels only matter to
    // the API server, which refuses the object when it is applied.
    if json_len_bound > MAX_OBJECT_BYTES
        && json_size::bound(&value) > MAX_OBJECT_BYTES
        && json_size::exceeds(&value, MAX_OBJECT_BYTES)
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
        object: value.into(),
    })
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
