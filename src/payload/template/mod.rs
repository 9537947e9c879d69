//! Rendering of `manifests/` files as the Cluster Version Operator renders them: each file is a
//! Go `text/template` named `manifest`, parsed with no options and no extra functions
//! (`template.New("manifest").Parse(text)`), executed with the CVO's `manifestRenderConfig`
//! (`.ReleaseImage`, `.ClusterProfile`, and here `.Images`, the image references).
//!
//! The whole action language is supported: constants (strings, raw strings, characters,
//! numbers in every Go base with `_` separators, `true`, `false`, `nil`), pipelines, variables
//! (`$`, `$x := ...`, `$x = ...`), `if`/`else if`/`with`/`else with`/`range` (over the image
//! map in key order, and over an int) with `break`/`continue`, `define`/`template`/`block`,
//! comments, trim markers, parentheses and field chains, and every built-in function (`and or
//! not len index slice print printf println eq ne lt le gt ge html js urlquery call`) with
//! Go's `fmt` verbs, flags and bad-call reports. Errors carry Go's text, line and column
//! (`template: manifest:2:8: executing "manifest" at <.FutureField>: can't evaluate field
//! FutureField in type payload.manifestRenderConfig`). `tests/it/template_go.rs` checks every
//! case of `tests/template_cases/` against Go's own output.
//!
//! Deliberate gaps, each an error here where Go renders something: complex constants (`1i`),
//! a string escape above `\x7f` or a `slice` that cuts a UTF-8 sequence (Go would emit bytes
//! that are not UTF-8); `%p` prints a bad-verb report for the image map instead of an
//! address. Identifiers (`unicode.IsLetter`, `IsDigit`) and `strconv.IsPrint` (`%q`, `js`)
//! use Unicode 15.0.0, as Go 1.21 to 1.26 do.
//!
//! Why hand-written (STYLE asks for a measured reason): the maintained crate for Go templates,
//! `gtmpl` 0.7.1, was run on the same case table as Go: it agreed with Go on 41 of 254 cases
//! (41 of the 118 that Go renders, and none of Go's 136 error texts; 12 of those it rendered
//! instead of failing, which would apply a file the CVO skips). It has no `break`/`continue`,
//! `else with`, `slice` or `range` over an int, and its `printf` is not Go's `fmt` (`%v` of a
//! float and `%T` fail).
//! On the CVO's Deployment manifest it took 43 to 85 µs a render against 2.6 to 3.1 µs for this
//! port. Since a template's failure decides whether the CVO applies a file at all, minicvo
//! keeps its own port of Go's lexer, parser and executor, checked case by case against Go.
//! Files without `{{` are returned as they are, without being parsed.

mod ast;
mod call;
mod exec;
mod float;
mod fmt;
mod funcs;
mod item;
mod lex;
mod literal;
mod operand;
mod parse;
mod printf;
mod quote;
mod value;

use std::collections::BTreeMap;

/// The name the CVO gives every manifest template.
const NAME: &str = "manifest";

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

/// Why a template could not be rendered: Go's error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateError {
    /// 1-based line Go reports (of the item the parser stopped at, or of the node that failed
    /// to execute).
    pub line: usize,
    /// Go's message, `template: manifest:LINE[:COLUMN]: ...`.
    pub message: String,
}

/// Renders `text` with `data` as Go's `text/template` does for the CVO.
///
/// # Errors
/// A parse or execution error, with Go's message and line.
pub fn render(text: &str, data: &TemplateData) -> Result<String, TemplateError> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let trees = parse::parse(NAME, text).map_err(|e| TemplateError {
        line: e.line,
        message: e.message,
    })?;
    exec::execute(&trees, NAME, text, value::Value::Struct(data), text.len()).map_err(|e| {
        TemplateError {
            line: e.line,
            message: e.message,
        }
    })
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
    fn missing_image_is_empty_through_index_and_no_value_as_a_field() {
        assert_eq!(render("{{index .Images \"nope\"}}", &data()).unwrap(), "");
        assert_eq!(render("{{.Images.nope}}", &data()).unwrap(), "<no value>");
    }

    #[test]
    fn unknown_field_is_goes_error() {
        let e = render("x\n{{index .FutureField \"k\"}}", &data()).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(
            e.message,
            "template: manifest:2:8: executing \"manifest\" at <.FutureField>: can't evaluate field FutureField in type payload.manifestRenderConfig"
        );
    }

    #[test]
    fn unclosed_action_is_a_parse_error() {
        let e = render("{{ .ReleaseImage", &data()).unwrap_err();
        assert_eq!(e.message, "template: manifest:1: unclosed action");
    }

    #[test]
    fn quoted_braces_and_printf_render() {
        let t = "{{ \"{{ $labels.risk }}\" }} {{ .ReleaseImage | printf \"%q\" }} {{ if eq .ClusterProfile \"single-node-developer\" }}sno{{ end }}";
        assert_eq!(
            render(t, &data()).unwrap(),
            "{{ $labels.risk }} \"quay.io/r:1\" sno"
        );
    }

    #[test]
    fn text_without_actions_is_returned_as_is() {
        assert_eq!(render("a: }} b", &data()).unwrap(), "a: }} b");
    }
}
