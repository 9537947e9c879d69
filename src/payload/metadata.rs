//! `release-metadata` (the Cincinnati metadata of the release) and `image-references` (the
//! ImageStream whose tags feed `{{index .Images "name"}}`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::LoadError;

/// The parsed `release-metadata` file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReleaseMetadata {
    /// SemVer version of the release.
    pub version: semver::Version,
    /// Versions this release may be updated from (informational; the applier ignores them).
    pub previous: Vec<String>,
    /// Free-form metadata map.
    pub metadata: serde_json::Map<String, Value>,
}

/// Parses `release-metadata`: a JSON object with `kind: cincinnati-metadata-v0` and a SemVer
/// `version`.
///
/// # Errors
/// [`LoadError::Metadata`] naming `file` when the text is not that object.
pub fn parse_release_metadata(file: &str, text: &str) -> Result<ReleaseMetadata, LoadError> {
    let bad = |message: String| LoadError::Metadata {
        file: file.to_string(),
        message,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let message = super::parse::json_message(&e);
        let message = message.strip_prefix("invalid JSON: ").unwrap_or(&message);
        bad(format!("not valid JSON at line {}: {message}", e.line()))
    })?;
    let Value::Object(map) = value else {
        return Err(bad("expected a JSON object".to_string()));
    };
    match map.get("kind").and_then(Value::as_str) {
        Some("cincinnati-metadata-v0") => {}
        Some(other) => {
            return Err(bad(format!(
                "unrecognized kind {other:?}, expected \"cincinnati-metadata-v0\""
            )));
        }
        None => {
            return Err(bad(
                "missing kind, expected \"cincinnati-metadata-v0\"".to_string()
            ));
        }
    }
    let version = match map.get("version") {
        Some(Value::String(v)) if !v.is_empty() => semver::Version::parse(v)
            .map_err(|e| bad(format!("version {v:?} is not SemVer: {e}")))?,
        Some(Value::String(_)) | None => return Err(bad("missing version".to_string())),
        Some(other) => return Err(bad(format!("version must be a string, found {other}"))),
    };
    let previous = match map.get("previous") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("previous must be a list of strings".to_string()))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("previous must be a list of strings".to_string())),
    };
    let metadata = match map.get("metadata") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(bad("metadata must be an object".to_string())),
    };
    Ok(ReleaseMetadata {
        version,
        previous,
        metadata,
    })
}

/// The parsed `image-references` ImageStream.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImageReferences {
    /// `metadata.name`, which must equal the release version when that is known.
    pub name: Option<String>,
    /// Tag name → pull spec, for tags whose `from.kind` is `DockerImage` (the empty string for
    /// such a tag without `from.name`, as the CVO keeps it).
    pub images: BTreeMap<String, String>,
}

/// Parses `image-references` (YAML or JSON), which must be an `image.openshift.io/v1`
/// `ImageStream`.
///
/// # Errors
/// [`LoadError::ImageReferences`] naming `file` when it is not such an ImageStream.
pub fn parse_image_references(file: &str, text: &str) -> Result<ImageReferences, LoadError> {
    let bad = |message: String| LoadError::ImageReferences {
        file: file.to_string(),
        message,
    };
    let value: Value = serde_saphyr::from_str_with_options(text, super::parse::yaml_options())
        .map_err(|e| {
            let location = e.location();
            let line = location.map_or(0, |l| l.line()).max(1);
            let column = location.map_or(0, |l| l.column());
            let (message, hint) = super::parse::yaml_message(&e);
            bad(format!(
                "not valid YAML at line {line}: {message} (column {column}){hint}"
            ))
        })?;
    let Value::Object(map) = value else {
        return Err(bad("expected an ImageStream object".to_string()));
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "ImageStream" || !matches!(api_version, "image.openshift.io/v1" | "v1") {
        return Err(bad(format!(
            "expected apiVersion image.openshift.io/v1 kind ImageStream, found {api_version:?} {kind:?}"
        )));
    }
    let name = map
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut images = BTreeMap::new();
    if let Some(tags) = map.get("spec").and_then(|s| s.get("tags")) {
        let Value::Array(tags) = tags else {
            return Err(bad("spec.tags must be a list".to_string()));
        };
        for (i, tag) in tags.iter().enumerate() {
            // The CVO decodes the file into its ImageStream type: a tag without a name is
            // the tag "" (a name that is not a string fails its decoding, and here).
            let tag_name = match tag.get("name") {
                None | Some(Value::Null) => "",
                Some(Value::String(n)) => n.as_str(),
                Some(other) => {
                    return Err(bad(format!(
                        "spec.tags[{i}].name must be a string, found {other}"
                    )));
                }
            };
            // The CVO's `imagesFromImageRef`: a tag whose `from.kind` is `DockerImage` maps to
            // its `from.name`, the empty string when it has none; other tags are left out.
            let Some(from) = tag.get("from").filter(|f| !f.is_null()) else {
                continue;
            };
            if from.get("kind").and_then(Value::as_str) != Some("DockerImage") {
                continue;
            }
            let pull = match from.get("name") {
                None | Some(Value::Null) => "",
                Some(Value::String(pull)) => pull.as_str(),
                Some(other) => {
                    return Err(bad(format!(
                        "spec.tags[{i}].from.name must be a string, found {other}"
                    )));
                }
            };
            images.insert(tag_name.to_string(), pull.to_string());
        }
    }
    Ok(ImageReferences { name, images })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_metadata_parses() {
        let m = parse_release_metadata(
            "release-metadata",
            r#"{"kind":"cincinnati-metadata-v0","version":"4.14.1","previous":["4.14.0"]}"#,
        )
        .unwrap();
        assert_eq!(m.version.to_string(), "4.14.1");
        assert_eq!(m.previous, vec!["4.14.0"]);
    }

    #[test]
    fn release_metadata_errors_have_exact_text() {
        let e = parse_release_metadata(
            "release-manifests/release-metadata",
            r#"{"kind":"x","version":"1.0.0"}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/release-metadata: invalid release metadata: unrecognized kind \"x\", expected \"cincinnati-metadata-v0\""
        );
        let e = parse_release_metadata(
            "release-metadata",
            r#"{"kind":"cincinnati-metadata-v0","version":"4.14"}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "release-metadata: invalid release metadata: version \"4.14\" is not SemVer"
            ),
            "{e}"
        );
        let e = parse_release_metadata("release-metadata", "{").unwrap_err();
        assert!(e.to_string().contains("not valid JSON at line 1"), "{e}");
    }

    #[test]
    fn image_references_collects_docker_images() {
        let r = parse_image_references(
            "image-references",
            "kind: ImageStream\napiVersion: image.openshift.io/v1\nmetadata: {name: 1.0.0}\nspec:\n  tags:\n  - name: a\n    from: {kind: DockerImage, name: q/a}\n  - name: b\n    from: {kind: ImageStreamTag, name: x}\n",
        )
        .unwrap();
        assert_eq!(r.name.as_deref(), Some("1.0.0"));
        assert_eq!(r.images.len(), 1);
        assert_eq!(r.images["a"], "q/a");
    }

    #[test]
    fn image_references_keeps_a_docker_image_tag_without_from_name_as_empty() {
        let r = parse_image_references(
            "image-references",
            "kind: ImageStream\napiVersion: image.openshift.io/v1\nmetadata: {name: 1.0.0}\nspec:\n  tags:\n  - name: a\n    from: {kind: DockerImage}\n  - name: b\n    from: {kind: DockerImage, name: null}\n  - name: c\n  - name: d\n    from: null\n  - name: e\n    from: {name: q/e}\n",
        )
        .unwrap();
        let expected: BTreeMap<String, String> =
            [("a".into(), String::new()), ("b".into(), String::new())].into();
        assert_eq!(r.images, expected);
        let data = crate::payload::template::TemplateData {
            images: r.images,
            ..Default::default()
        };
        assert_eq!(
            crate::payload::template::render("[{{.Images.a}}][{{.Images.c}}]", &data).unwrap(),
            "[][<no value>]"
        );
    }

    #[test]
    fn image_references_tag_errors_name_the_tag() {
        let refs = |tags: &str| {
            parse_image_references(
                "image-references",
                &format!(
                    "kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags:\n{tags}"
                ),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            refs("  - name: 7\n    from: {kind: DockerImage, name: q/x}\n"),
            "image-references: invalid image references: spec.tags[0].name must be a string, found 7"
        );
        let kept = parse_image_references(
            "image-references",
            "kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags:\n  - from: {kind: DockerImage, name: q/x}\n",
        )
        .expect("the CVO takes a tag without a name");
        assert_eq!(kept.images.get(""), Some(&"q/x".to_string()));
        assert_eq!(
            refs(
                "  - name: a\n    from: {kind: DockerImage, name: q/a}\n  - name: b\n    from: {kind: DockerImage, name: [q]}\n"
            ),
            "image-references: invalid image references: spec.tags[1].from.name must be a string, found [\"q\"]"
        );
    }

    #[test]
    fn image_references_must_be_an_image_stream() {
        let e = parse_image_references("image-references", "kind: ConfigMap\napiVersion: v1\n")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("expected apiVersion image.openshift.io/v1 kind ImageStream"),
            "{e}"
        );
    }
}
