//! Splits one manifest file into object documents, the way the CVO's parser does: a JSON stream
//! when the text starts with `{`, otherwise multi-document YAML with YAML 1.1 scalars (kubectl's
//! `0644` is 420). Empty and `null` documents are skipped; every kept document must be an object
//! with `apiVersion`, `kind` and `metadata.name`, and no object may appear twice in one file.
//!
//! Hostile input is bounded: nesting depth, node and event counts and alias expansion are
//! budgeted, an object larger than the kube-apiserver accepts is rejected, and parser messages
//! never quote a scalar value (a broken Secret must not print its data).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{DefaultMessageFormatter, MessageFormatter, Spanned};

use super::LoadError;
use crate::manifest::{Manifest, ObjectId, Source};

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

/// YAML options: YAML 1.1 octal numbers as kubectl reads them, budgets that fit the largest
/// CRDs and payload files while still stopping alias bombs.
pub(crate) fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        legacy_octal_numbers: true,
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
    parse_file(Source::ReleaseManifests, file_name, &shown, text)
}

/// Parses the text of one file into manifests. `file` is the path shown in errors.
pub(crate) fn parse_file(
    source: Source,
    file_name: &str,
    file: &str,
    text: &str,
) -> Result<Vec<Manifest>, LoadError> {
    let docs = if text.trim_start().starts_with('{') {
        parse_json_stream(file, text)?
    } else {
        parse_yaml_stream(file, text)?
    };
    let mut seen: HashMap<ObjectId, (usize, usize)> = HashMap::new();
    let mut out = Vec::with_capacity(docs.len());
    for (document, doc) in docs.into_iter().enumerate() {
        let manifest = check_document(source, file_name, file, document, doc)?;
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
fn parse_yaml_stream(file: &str, text: &str) -> Result<Vec<RawDocument>, LoadError> {
    if let Some(docs) = super::fast_yaml::parse_stream(text) {
        return Ok(docs
            .into_iter()
            .map(|d| RawDocument {
                line: d.line,
                value: d.value,
                json_len_bound: d.source_len.saturating_mul(FAST_PATH_JSON_EXPANSION),
            })
            .collect());
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

/// The JSON parser's message for `e`, with its column instead of its line (the error names the
/// line already).
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(m, _)| m);
    let message = if message == "recursion limit exceeded" {
        "nested too deeply (at most 128 levels)"
    } else {
        message
    };
    let column = if e.column() > 0 {
        format!(" (column {})", e.column())
    } else {
        String::new()
    };
    format!("invalid JSON: {message}{column}")
}

/// The parser's message for `e`, without its location, plus an optional `\nhint: ...`.
/// Messages that would quote a scalar of the document are replaced by ones that do not.
pub(crate) fn yaml_message(e: &serde_saphyr::Error) -> (String, &'static str) {
    use serde_saphyr::Error as E;
    let mut e = e.without_snippet();
    while let E::AliasError { error, .. } | E::WithSnippet { error, .. } = e {
        e = error;
    }
    let message: Cow<'_, str> = match e {
        E::Budget { breach, .. } => return budget_message(breach),
        E::DuplicateMappingKey { key, .. } => {
            let key = key.as_deref().map_or(String::new(), |k| format!(" {k:?}"));
            return (
                format!("duplicate mapping key{key}"),
                "\nhint: the CVO would silently keep the last value; remove the other one",
            );
        }
        E::NonFiniteFloat { .. } => "not a finite number".into(),
        E::InvalidScalar { ty, .. } => {
            let what = match *ty {
                t if t.starts_with('u') || t.starts_with('i') => "integer",
                t if t.starts_with('f') => "floating-point number",
                "bool" => "boolean",
                t => t,
            };
            format!("not a valid {what}").into()
        }
        E::SerdeInvalidType { expected, .. } => format!("invalid type, expected {expected}").into(),
        E::SerdeInvalidValue { expected, .. } => {
            format!("invalid value, expected {expected}").into()
        }
        E::QuotingRequired { .. } => "a value must be quoted".into(),
        E::Message { .. } | E::HookError { .. } => "invalid value".into(),
        other => DefaultMessageFormatter.format_message(other),
    };
    let message = if message == "recursion limit exceeded" {
        format!("nested too deeply (at most {MAX_DEPTH} levels, 255 inside [ ] or {{ }})")
    } else {
        message
            .chars()
            .flat_map(|c| {
                let escaped = c.is_control().then(|| c.escape_default());
                let plain = (!c.is_control()).then_some(c);
                escaped.into_iter().flatten().chain(plain)
            })
            .collect()
    };
    (message, "")
}

/// A plain description of a budget breach.
fn budget_message(breach: &BudgetBreach) -> (String, &'static str) {
    let bomb = "\nhint: YAML aliases (*name) may not expand into a huge document (a YAML bomb)";
    match breach {
        BudgetBreach::Depth { .. } => (format!("nested more than {MAX_DEPTH} levels deep"), ""),
        BudgetBreach::Nodes { .. } => (
            format!("more than {MAX_NODES} values in one file"),
            "\nhint: split the file",
        ),
        BudgetBreach::Events { .. } => (
            format!("more than {MAX_EVENTS} YAML events in one file"),
            "\nhint: split the file",
        ),
        BudgetBreach::Documents { documents } => (
            format!(
                "more than {} documents in one file",
                documents.saturating_sub(1)
            ),
            "\nhint: split the file",
        ),
        BudgetBreach::RecordedAnchorEvents { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
            ("aliases expand to too much data".to_string(), bomb)
        }
        BudgetBreach::Aliases { .. } | BudgetBreach::AliasAnchorRatio { .. } => {
            ("too many aliases".to_string(), bomb)
        }
        other => (format!("input too large ({other:?})"), ""),
    }
}

/// 1-based line of a byte offset.
fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Index of the (non-empty) document that contains `line`, counting `---` separators the way
/// the YAML stream does: chunks with nothing but blanks and comments, or only `null`, are not
/// documents (the loader skips them, so they take no index).
fn document_at_line(text: &str, line: usize) -> usize {
    /// Content lines of the current chunk: none, one `null`, or real content.
    #[derive(PartialEq)]
    enum Chunk {
        Empty,
        Null,
        Content,
    }
    fn add(chunk: Chunk, content: &str) -> Chunk {
        let t = content.trim();
        if t.is_empty() || t.starts_with('#') {
            return chunk;
        }
        let null = matches!(t, "null" | "Null" | "NULL" | "~");
        match chunk {
            Chunk::Empty if null => Chunk::Null,
            _ => Chunk::Content,
        }
    }
    let mut index = 0usize;
    let mut chunk = Chunk::Empty;
    for (i, l) in text.lines().enumerate() {
        let is_separator =
            l.starts_with("---") && l[3..].chars().next().is_none_or(char::is_whitespace);
        if i + 1 >= line {
            // An error on a separator is about the document it starts.
            if is_separator && chunk == Chunk::Content {
                index += 1;
            }
            break;
        }
        if is_separator {
            if chunk == Chunk::Content {
                index += 1;
            }
            chunk = add(Chunk::Empty, &l[3..]);
        } else {
            chunk = add(chunk, l);
        }
    }
    index
}

fn check_document(
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
fn json_size_bound(value: &Value) -> usize {
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
fn exceeds_json_size(value: &Value, limit: usize) -> bool {
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

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Manifest>, LoadError> {
        parse_file(
            Source::ReleaseManifests,
            "f.yaml",
            "release-manifests/f.yaml",
            text,
        )
    }

    #[test]
    fn yaml_1_1_octal_and_booleans_read_like_kubectl() {
        let m = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {}\nmode: 0644\nflag: on\nver: 4.10\n").unwrap();
        assert_eq!(m[0].object["mode"], serde_json::json!(420));
        assert_eq!(m[0].object["flag"], serde_json::json!(true));
        assert_eq!(m[0].object["ver"], serde_json::json!(4.1));
    }

    #[test]
    fn empty_and_null_documents_are_skipped() {
        let text = "# header\n---\n---\nnull\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n\n";
        let m = parse(text).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].document, 0);
        assert_eq!(m[0].line, 6);
    }

    #[test]
    fn json_stream_is_read() {
        let text = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}";
        let m = parse(text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].line, 2);
        assert_eq!(m[1].id.name, "b");
    }

    #[test]
    fn malformed_yaml_names_document_and_line() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [unclosed\n";
        let e = parse(text).unwrap_err();
        let LoadError::Syntax { document, line, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(*document, 1);
        assert!(*line >= 6, "{e}");
        assert!(
            e.to_string()
                .starts_with("release-manifests/f.yaml: document 1 (line "),
            "{e}"
        );
    }

    #[test]
    fn missing_kind_is_rejected_with_exact_text() {
        let e = parse("apiVersion: v1\nmetadata:\n  name: a\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/f.yaml: document 0 (line 1): object has no kind: must contain kubernetes required fields apiVersion, kind and metadata.name"
        );
    }

    #[test]
    fn missing_name_is_rejected_with_exact_text() {
        let e = parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/f.yaml: document 0 (line 1): object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name"
        );
    }

    #[test]
    fn duplicate_object_in_one_file_is_rejected_with_exact_text() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n";
        let e = parse(text).unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/f.yaml: document 1 (line 5): duplicate object ConfigMap ns1/a, first defined in document 0 (line 1)"
        );
    }

    #[test]
    fn duplicate_mapping_key_is_rejected() {
        let e = parse("apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: a}\n")
            .unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 3, .. }), "{e}");
    }

    #[test]
    fn scalar_document_is_rejected() {
        let e = parse("just a string\n").unwrap_err();
        assert!(e.to_string().contains("found a string"), "{e}");
    }

    #[test]
    fn non_string_annotation_is_rejected() {
        let e = parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    release.openshift.io/delete: true\n").unwrap_err();
        assert!(
            e.to_string().contains("must be a string, found a boolean"),
            "{e}"
        );
    }
    #[test]
    fn null_document_does_not_shift_the_document_index() {
        let text = "---\nnull\n---\n# only a comment\n---\napiVersion: v1\nkind: [x\n";
        let e = parse(text).unwrap_err();
        assert!(
            matches!(
                e,
                LoadError::Syntax {
                    document: 0,
                    line: 7,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn error_on_a_separator_names_the_document_it_starts() {
        assert_eq!(document_at_line("a: 1\n---\nb: 2\n", 2), 1);
        assert_eq!(document_at_line("---\n---\nb: 2\n", 2), 0);
    }

    #[test]
    fn duplicate_mapping_key_message_is_for_people_not_library_users() {
        let e = parse("apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: a}\n")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/f.yaml: document 0 (line 3): invalid YAML: duplicate mapping key \"kind\" (column 1)\nhint: the CVO would silently keep the last value; remove the other one"
        );
    }

    #[test]
    fn alias_bomb_is_stopped_and_named() {
        let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n");
        text.push_str("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (prev, cur) in "abcdefghi".chars().zip("bcdefghij".chars()) {
            let refs = vec![format!("*{prev}"); 10].join(", ");
            text.push_str(&format!("{cur}: &{cur} [{refs}]\n"));
        }
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("aliases expand to too much data"), "{e}");
        assert!(e.contains("hint: YAML aliases"), "{e}");
    }

    #[test]
    fn object_larger_than_the_apiserver_accepts_is_rejected() {
        let big = "a".repeat(MAX_OBJECT_BYTES);
        let e = parse(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{x: {big}}}\n"
        ))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/f.yaml: document 0 (line 1): object is larger than 3 MiB as JSON, more than the kube-apiserver accepts in one request"
        );
        let fits = "a".repeat(MAX_OBJECT_BYTES - 200);
        parse(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{x: {fits}}}\n"
        ))
        .unwrap();
    }

    #[test]
    fn non_string_label_is_rejected() {
        let e =
            parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {tier: 1}\n")
                .unwrap_err();
        assert!(
            e.to_string()
                .contains("label \"tier\" must be a string, found a number"),
            "{e}"
        );
    }

    #[test]
    fn deep_json_is_named_for_people() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        let e = parse(&deep).unwrap_err().to_string();
        assert!(
            e.ends_with("invalid JSON: nested too deeply (at most 128 levels) (column 132)"),
            "{e}"
        );
    }
}
