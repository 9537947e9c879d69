//! Splits one manifest file into object documents, the way the CVO's parser does: a JSON stream
//! when the text starts with `{`, otherwise multi-document YAML with YAML 1.1 scalars (kubectl's
//! `0644` is 420). Empty and `null` documents are skipped; every kept document must be an object
//! with `apiVersion`, `kind` and `metadata.name`, and no object may appear twice in one file.
//!
//! Hostile input is bounded: nesting depth, node and event counts and alias expansion are
//! budgeted, an object larger than the kube-apiserver accepts is rejected, and parser messages
//! never quote a scalar value (a broken Secret must not print its data).
//!
//! This module splits streams into documents; `check.rs` holds the per-document checks and
//! `messages.rs` the parser error wording.

use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::Spanned;

use self::check::check_document;
use self::messages::{document_at_line, line_of_offset};
pub(crate) use self::messages::{json_message, yaml_message};
use super::fast_yaml::Keep;
use super::{LoadError, ObjectDetail, json_size};
use crate::manifest::{Manifest, ObjectId, Source};

mod check;
mod messages;

/// Largest nesting depth accepted in one YAML document (JSON: `serde_json`'s 128).
pub(crate) const MAX_DEPTH: usize = 512;
/// Largest number of YAML nodes (scalars, sequences, mappings) in one file. The largest file of
/// a real OpenShift payload has about 16,000, the whole payload about 250,000.
const MAX_NODES: usize = 1_000_000;
/// Largest number of parser events in one file.
const MAX_EVENTS: usize = 5_000_000;
/// Largest number of events copied while expanding aliases in one file (stops alias bombs).
const MAX_ALIAS_EVENTS: usize = 250_000;
/// Largest object, as JSON, that a document may hold: the kube-apiserver's request body limit
/// (3 MiB), so an object that could never be applied is rejected when the payload is loaded.
pub(crate) const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;

/// YAML options: YAML 1.1 octal numbers as kubectl reads them, the last value of a repeated
/// mapping key kept as the CVO's decoder keeps it (`lint` reports the repeat), budgets that fit
/// the largest CRDs and payload files while still stopping alias bombs.
pub(crate) fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        legacy_octal_numbers: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: 100_000,
            max_nodes: MAX_NODES,
            max_events: MAX_EVENTS,
            max_depth: MAX_DEPTH,
            max_recorded_anchor_events: MAX_ALIAS_EVENTS,
        },
    }
}

/// A document before it is checked: its line and its value.
struct RawDocument {
    line: usize,
    value: Value,
    /// An upper bound of the object's size as compact JSON known from its source text, or
    /// `usize::MAX` when the source does not bound it (aliases can expand).
    json_len_bound: usize,
}

/// How much larger than its source a document of the YAML fast path can get as compact JSON:
/// at most 4.5 times (`9e15` prints as `9000000000000000.0`; `a:` as `"a":null`), with margin.
pub(super) const FAST_PATH_JSON_EXPANSION: usize = 8;

/// Parses the text of one file of `release-manifests/` (not templated) with the loader's
/// checks: the same documents, the same errors and the same limits as [`crate::load`]. Errors
/// name the file as `release-manifests/{file_name}`. For fuzzing and tools that hold manifests
/// in memory.
///
/// # Errors
/// [`LoadError::Syntax`] for text that is not YAML or JSON, [`LoadError::Invalid`] for a
/// document that is not a Kubernetes object, [`LoadError::Duplicate`] for an object defined
/// twice.
pub fn parse_manifest_text(file_name: &str, text: &str) -> Result<Vec<Manifest>, LoadError> {
    let shown = format!("{}/{file_name}", Source::ReleaseManifests.dir_name());
    parse_file(
        Source::ReleaseManifests,
        file_name,
        &shown,
        text,
        ObjectDetail::Whole,
    )
}

/// Parses the text of one file into manifests. `file` is the path shown in errors.
pub(crate) fn parse_file(
    source: Source,
    file_name: &str,
    file: &str,
    text: &str,
    detail: ObjectDetail,
) -> Result<Vec<Manifest>, LoadError> {
    let docs = if text.trim_start().starts_with('{') {
        parse_json_stream(file, text)?
    } else {
        parse_yaml_stream(file, text, detail)?
    };
    let mut seen: HashMap<ObjectId, (usize, usize)> = HashMap::new();
    let mut out = Vec::with_capacity(docs.len());
    for (document, doc) in docs.into_iter().enumerate() {
        let mut manifest = check_document(source, file_name, file, document, doc)?;
        if detail == ObjectDetail::Headers {
            keep_headers(std::sync::Arc::make_mut(&mut manifest.object));
        }
        if let Some(&(first_document, first_line)) = seen.get(&manifest.id) {
            return Err(LoadError::Duplicate {
                file: file.to_string(),
                document,
                line: manifest.line,
                first_document,
                first_line,
                object: manifest.id.to_string(),
            });
        }
        seen.insert(manifest.id.clone(), (document, manifest.line));
        out.push(manifest);
    }
    Ok(out)
}

/// Drops every root key of an object but [`HEADER_KEYS`](super::fast_yaml::HEADER_KEYS).
fn keep_headers(object: &mut Value) {
    if let Value::Object(map) = object {
        map.retain(|k, _| super::fast_yaml::HEADER_KEYS.contains(&k.as_str()));
    }
}

fn parse_json_stream(file: &str, text: &str) -> Result<Vec<RawDocument>, LoadError> {
    let mut docs = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    loop {
        let start = stream.byte_offset();
        match stream.next() {
            None => break,
            Some(Ok(Value::Null)) => {}
            Some(Ok(value)) => {
                let skipped = text[start..].len() - text[start..].trim_start().len();
                docs.push(RawDocument {
                    line: line_of_offset(text, start + skipped),
                    value,
                    json_len_bound: usize::MAX,
                });
            }
            Some(Err(e)) => {
                return Err(LoadError::Syntax {
                    file: file.to_string(),
                    document: docs.len(),
                    line: e.line().max(1),
                    message: json_message(&e),
                });
            }
        }
    }
    Ok(docs)
}

/// Parses a YAML stream: the fast path for the common subset, serde-saphyr for the rest and
/// for every error (see `fast_yaml`).
fn parse_yaml_stream(
    file: &str,
    text: &str,
    detail: ObjectDetail,
) -> Result<Vec<RawDocument>, LoadError> {
    let keep = match detail {
        ObjectDetail::Whole => Keep::Whole,
        ObjectDetail::Headers => Keep::Headers,
    };
    if let Some(docs) = super::fast_yaml::parse_stream_as(text, keep) {
        let docs: Vec<RawDocument> = docs
            .into_iter()
            .map(|d| RawDocument {
                json_len_bound: match d.skipped_json {
                    Some(skipped) => json_size::bound(&d.value).saturating_add(skipped),
                    None => d.source_len.saturating_mul(FAST_PATH_JSON_EXPANSION),
                },
                line: d.line,
                value: d.value,
            })
            .collect();
        // An object that may be too large needs the exact check, on the whole object.
        if detail == ObjectDetail::Headers
            && docs.iter().any(|d| d.json_len_bound > MAX_OBJECT_BYTES)
        {
            return parse_yaml_stream(file, text, ObjectDetail::Whole);
        }
        return Ok(docs);
    }
    parse_yaml_stream_saphyr(file, text)
}

/// The non-empty documents of a YAML stream as serde-saphyr reads them: start line and value.
pub(super) fn saphyr_documents(text: &str) -> Result<Vec<(usize, Value)>, serde_saphyr::Error> {
    let values: Vec<Spanned<Value>> = serde_saphyr::from_str_multiple_with_options::<
        Spanned<Value>,
        Vec<_>,
    >(text, yaml_options())?;
    Ok(values
        .into_iter()
        .filter(|v| !v.value.is_null())
        .map(|v| {
            let line = usize::try_from(v.referenced.line()).unwrap_or(0).max(1);
            (line, v.value)
        })
        .collect())
}

fn parse_yaml_stream_saphyr(file: &str, text: &str) -> Result<Vec<RawDocument>, LoadError> {
    match saphyr_documents(text) {
        Ok(docs) => Ok(docs
            .into_iter()
            .map(|(line, value)| RawDocument {
                line,
                value,
                json_len_bound: usize::MAX,
            })
            .collect()),
        Err(e) => {
            let location = e.location();
            let line = location.map_or(0, |l| usize::try_from(l.line()).unwrap_or(0));
            let line = line.max(1);
            let column = location
                .map(|l| l.column())
                .filter(|&c| c > 0)
                .map_or(String::new(), |c| format!(" (column {c})"));
            let (message, hint) = yaml_message(&e);
            Err(LoadError::Syntax {
                file: file.to_string(),
                document: document_at_line(text, line),
                line,
                message: format!("invalid YAML: {message}{column}{hint}"),
            })
        }
    }
}

#[cfg(test)]
mod tests;
