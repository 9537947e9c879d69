//! Rendering of `manifests/` files as Go `text/template`s with the CVO's data:
//! `{{.ReleaseImage}}`, `{{.ClusterProfile}}`, `{{.Images.name}}` and `{{index .Images "name"}}`,
//! with `{{-`/`-}}` trimming and `{{/* comments */}}`. Any other field or construct is an error,
//! and the caller skips the file with a warning, as the CVO does for unknown fields.

use std::collections::BTreeMap;

/// The data a template sees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateData {
    /// Pull spec of the release image.
    pub release_image: String,
    /// Cluster profile in force.
    pub cluster_profile: String,
    /// Image tags from `image-references`.
    pub images: BTreeMap<String, String>,
}

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template: line {line}: {message}")]
pub struct TemplateError {
    /// 1-based line of the action.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Renders `text` with `data`.
///
/// # Errors
/// An unterminated action, an unknown field, or a construct outside the supported subset.
pub fn render(text: &str, data: &TemplateData) -> Result<String, TemplateError> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut consumed = 0usize;
    while let Some(open) = rest.find("{{") {
        let line = text[..consumed + open].matches('\n').count() + 1;
        let mut literal = &rest[..open];
        let mut inner_start = open + 2;
        if rest[inner_start..].starts_with("- ") || rest[inner_start..].starts_with("-\n") {
            literal = literal.trim_end();
            inner_start += 1;
        }
        out.push_str(literal);
        let Some(close_rel) = rest[inner_start..].find("}}") else {
            return Err(TemplateError {
                line,
                message: "unclosed action".to_string(),
            });
        };
        let mut inner = &rest[inner_start..inner_start + close_rel];
        let mut after = inner_start + close_rel + 2;
        let trim_right = inner.ends_with(" -") || inner.ends_with("\n-");
        if trim_right {
            inner = &inner[..inner.len() - 1];
        }
        out.push_str(&eval(inner.trim(), data).map_err(|message| TemplateError { line, message })?);
        consumed += after;
        rest = &rest[after..];
        if trim_right {
            let trimmed = rest.trim_start();
            after = rest.len() - trimmed.len();
            consumed += after;
            rest = trimmed;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn eval(action: &str, data: &TemplateData) -> Result<String, String> {
    if action.starts_with("/*") && action.ends_with("*/") {
        return Ok(String::new());
    }
    let words = split_words(action)?;
    match words.as_slice() {
        [field] if field.starts_with('.') => field_value(field, data),
        [lit] if lit.starts_with('"') => Ok(unquote(lit)),
        [func, map, key] if func == "index" => {
            if map != ".Images" {
                return Err(format!("index of {map} is not supported"));
            }
            if !key.starts_with('"') {
                return Err(format!("index key {key} must be a string literal"));
            }
            Ok(data.images.get(&unquote(key)).cloned().unwrap_or_default())
        }
        _ => Err(format!("unsupported action {{{{{action}}}}}")),
    }
}

fn field_value(field: &str, data: &TemplateData) -> Result<String, String> {
    let path: Vec<&str> = field[1..].split('.').collect();
    match path.as_slice() {
        ["ReleaseImage"] => Ok(data.release_image.clone()),
        ["ClusterProfile"] => Ok(data.cluster_profile.clone()),
        ["Images", key] => Ok(data
            .images
            .get(*key)
            .cloned()
            .unwrap_or_else(|| "<no value>".to_string())),
        [name, ..] => Err(format!(
            "can't evaluate field {name} in type payload.manifestRenderConfig"
        )),
        [] => Err("empty field".to_string()),
    }
}

fn split_words(action: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = action.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' {
            word.push(c);
            chars.next();
            let mut closed = false;
            while let Some(c) = chars.next() {
                word.push(c);
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        word.push(n);
                    }
                } else if c == '"' {
                    closed = true;
                    break;
                }
            }
            if !closed {
                return Err("unterminated string".to_string());
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
    Ok(words)
}

fn unquote(lit: &str) -> String {
    serde_json::from_str::<String>(lit).unwrap_or_else(|_| lit.trim_matches('"').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> TemplateData {
        TemplateData {
            release_image: "quay.io/r:1".into(),
            cluster_profile: "single-node-developer".into(),
            images: [("cli".to_string(), "quay.io/cli@sha".to_string())].into(),
        }
    }

    #[test]
    fn renders_the_cvo_fields() {
        let t = "image: {{.ReleaseImage}}\nprofile: {{ .ClusterProfile }}\ncli: {{index .Images \"cli\"}}\nalso: {{.Images.cli}}\n";
        assert_eq!(
            render(t, &data()).unwrap(),
            "image: quay.io/r:1\nprofile: single-node-developer\ncli: quay.io/cli@sha\nalso: quay.io/cli@sha\n"
        );
    }

    #[test]
    fn trims_and_comments() {
        assert_eq!(render("a  {{- /* c */ -}}  b", &data()).unwrap(), "ab");
    }

    #[test]
    fn missing_image_is_empty_through_index() {
        assert_eq!(render("{{index .Images \"nope\"}}", &data()).unwrap(), "");
    }

    #[test]
    fn unknown_field_is_an_error() {
        let e = render("x\n{{index .FutureField \"k\"}}", &data()).unwrap_err();
        assert_eq!(e.line, 2);
        let e = render("{{.ReleaseVersion}}", &data()).unwrap_err();
        assert!(e.message.contains("ReleaseVersion"));
    }

    #[test]
    fn unclosed_action_is_an_error() {
        assert!(render("{{ .ReleaseImage", &data()).is_err());
    }
}
