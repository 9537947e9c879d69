//! Splits one manifest file into object documents, the way the CVO's parser does: a JSON stream
//! when the text starts with `{`, otherwise multi-document YAML with YAML 1.1 scalars (kubectl's
//! `0644` is 420). Empty and `null` documents are skipped; every kept document must be an object
//! with `apiVersion`, `kind` and `metadata.name`, and no object may appear twice in one file.

use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::Spanned;

use super::LoadError;
use crate::manifest::{Manifest, ObjectId, Source};

/// Largest nesting depth accepted in one document.
const MAX_DEPTH: usize = 512;

/// YAML options: YAML 1.1 octal numbers as kubectl reads them, budgets that fit the largest
/// CRDs and payload files while still stopping alias bombs.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        legacy_octal_numbers: true,
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: 100_000,
            max_nodes: 20_000_000,
            max_events: 50_000_000,
            max_depth: MAX_DEPTH,
        },
    }
}

/// A document before it is checked: its line and its value.
struct RawDocument {
    line: usize,
    value: Value,
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
                });
            }
            Some(Err(e)) => {
                return Err(LoadError::Syntax {
                    file: file.to_string(),
                    document: docs.len(),
                    line: e.line(),
                    message: format!("invalid JSON: {e}"),
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
            .map(|(line, value)| RawDocument { line, value })
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
            .map(|(line, value)| RawDocument { line, value })
            .collect()),
        Err(e) => {
            let line = e
                .location()
                .map_or(0, |l| usize::try_from(l.line()).unwrap_or(0));
            let line = if line == 0 { 1 } else { line };
            let message = first_line(&e.to_string());
            Err(LoadError::Syntax {
                file: file.to_string(),
                document: document_at_line(text, line),
                line,
                message: format!("invalid YAML: {message}"),
            })
        }
    }
}

/// The first line of a possibly multi-line parser message, without a trailing location.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or("").trim().to_string()
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
/// the YAML stream does: chunks with nothing but blanks and comments are not documents.
fn document_at_line(text: &str, line: usize) -> usize {
    let mut index = 0usize;
    let mut current_has_content = false;
    for (i, l) in text.lines().enumerate() {
        if i + 1 >= line {
            break;
        }
        let is_separator =
            l.starts_with("---") && l[3..].chars().next().is_none_or(char::is_whitespace);
        if is_separator {
            if current_has_content {
                index += 1;
            }
            current_has_content = !l[3..].trim().is_empty() && !l[3..].trim().starts_with('#');
            continue;
        }
        let t = l.trim();
        if !t.is_empty() && !t.starts_with('#') {
            current_has_content = true;
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
    let RawDocument { line, value } = doc;
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
}
