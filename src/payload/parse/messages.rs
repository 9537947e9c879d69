//! Parser error messages: serde_json's and serde-saphyr's messages and budget breaches made
//! into the loader's wording (never quoting a scalar), and the document a line belongs to.

use std::borrow::Cow;

use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{DefaultMessageFormatter, MessageFormatter};

use super::{MAX_DEPTH, MAX_EVENTS, MAX_NODES};

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
pub(super) fn budget_message(breach: &BudgetBreach) -> (String, &'static str) {
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
pub(super) fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Index of the (non-empty) document that contains `line`, counting `---` separators the way
/// the YAML stream does: chunks with nothing but blanks and comments, or only `null`, are not
/// documents (the loader skips them, so they take no index).
pub(super) fn document_at_line(text: &str, line: usize) -> usize {
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
