//! The included objects themselves, in task order, as YAML documents or a `v1` `List`.

use serde_json::{Value, json};

use crate::manifest::Manifest;

/// A `v1` `List` whose items are the objects exactly as parsed.
#[must_use]
pub fn list(manifests: &[&Manifest]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": manifests.iter().map(|m| Value::clone(&m.object)).collect::<Vec<_>>(),
    })
}

/// Multi-document YAML, each document headed by a comment naming its file and document.
///
/// # Errors
/// When a value cannot be written as YAML.
pub fn yaml(manifests: &[&Manifest]) -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for m in manifests {
        out.push_str("---\n");
        out.push_str(&format!("# {} document {}\n", m.path(), m.document));
        out.push_str(&serde_saphyr::to_string(&*m.object)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
