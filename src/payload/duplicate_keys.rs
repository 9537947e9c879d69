//! Duplicate mapping keys in a YAML stream, found from the parser's events.
//!
//! The CVO's decoder (Go YAML into a map, then JSON) keeps the last value of a key that a
//! mapping repeats, and says nothing. The loader does the same (serde-saphyr's `LastWins`); this
//! scan finds every such key so that `lint` can name file, document and line.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Parser};

/// A key a mapping repeats: the later occurrence, whose value the CVO keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The key.
    pub key: String,
    /// Index of the document in the file, counting only non-empty documents, from 0 (as
    /// [`crate::manifest::Manifest::document`] counts them).
    pub document: usize,
    /// 1-based line of the later occurrence.
    pub line: usize,
    /// 1-based line of the first occurrence.
    pub first_line: usize,
}

/// One open collection: a mapping's keys so far (and whether its next node is a key), or a
/// sequence.
enum Frame<'a> {
    Mapping {
        /// Each key with the line of its first occurrence.
        keys: HashMap<Cow<'a, str>, usize>,
        next_is_key: bool,
    },
    Sequence,
}

/// Every repeated scalar key of every mapping of `text`, in order. Keys compare by their text,
/// as they do once the document is JSON. A stream that does not parse yields the duplicates
/// before the error: the loader reports the error itself.
#[must_use]
pub fn duplicate_keys(text: &str) -> Vec<DuplicateKey> {
    let mut found = Vec::new();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut documents = 0usize;
    let mut document_kept = false;
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else { break };
        let line = span.start.line();
        let starts_node = matches!(
            event,
            Event::Scalar(..)
                | Event::MappingStart(..)
                | Event::SequenceStart(..)
                | Event::Alias(_)
        );
        if starts_node {
            if stack.is_empty() {
                document_kept = !matches!(&event, Event::Scalar(v, style, ..)
                    if *style == serde_saphyr::granit_parser::ScalarStyle::Plain
                        && matches!(v.as_ref(), "" | "~" | "null" | "Null" | "NULL"));
            }
            if let Some(Frame::Mapping { keys, next_is_key }) = stack.last_mut() {
                let is_key = *next_is_key;
                *next_is_key = !is_key;
                if is_key && let Event::Scalar(key, ..) = &event {
                    match keys.get(key) {
                        Some(&first_line) => found.push(DuplicateKey {
                            key: key.to_string(),
                            document: documents,
                            line,
                            first_line,
                        }),
                        None => {
                            keys.insert(key.clone(), line);
                        }
                    }
                }
            }
        }
        match event {
            Event::MappingStart(..) => stack.push(Frame::Mapping {
                keys: HashMap::new(),
                next_is_key: true,
            }),
            Event::SequenceStart(..) => stack.push(Frame::Sequence),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            Event::DocumentEnd => {
                if document_kept {
                    documents += 1;
                }
                document_kept = false;
                stack.clear();
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_repeated_key_with_both_lines() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: x\n  namespace: x\ndata:\n  k: 1\n  k: 2\n";
        let found = duplicate_keys(text);
        assert_eq!(
            found,
            vec![
                DuplicateKey {
                    key: "namespace".into(),
                    document: 0,
                    line: 6,
                    first_line: 5
                },
                DuplicateKey {
                    key: "k".into(),
                    document: 0,
                    line: 9,
                    first_line: 8
                },
            ]
        );
    }

    #[test]
    fn counts_only_non_empty_documents_and_scopes_keys_per_mapping() {
        let text = "---\n---\nnull\n---\na: {b: 1}\nc:\n- b: 1\n- b: 2\n---\nd: 1\nd: 2\n";
        let found = duplicate_keys(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].document, found[0].line), (1, 11));
    }

    #[test]
    fn quoted_and_plain_spellings_are_one_key() {
        let found = duplicate_keys("a: 1\n\"a\": 2\n");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].first_line, 1);
    }

    #[test]
    fn no_duplicates_in_values_or_sequences() {
        assert!(duplicate_keys("a: a\nb: [a, a]\nc: {a: a}\n").is_empty());
    }
}
