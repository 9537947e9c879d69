//! Parsed files kept for the next load: a command that loads two payloads (or one payload
//! under several profiles) parses each distinct file once.
//!
//! Parsing is a function of the file's directory, name, text (after templating and the
//! version placeholder) and the [`ObjectDetail`]; the manifests it gives do not depend on
//! the payload's root or on the filters, which run after it. An entry is used only when all
//! of these are equal, the text byte for byte, so a load through the cache returns exactly
//! what a load without it returns. The objects are shared (`Arc`), not copied.

use std::collections::HashMap;
use std::sync::Mutex;

use super::ObjectDetail;
use crate::manifest::{Manifest, Source};

/// One parsed file.
#[derive(Debug)]
struct Entry {
    detail: ObjectDetail,
    text: String,
    manifests: Vec<Manifest>,
}

/// Files parsed by earlier loads, by directory and name (see the module docs). Give the
/// same cache to several loads through [`super::LoadOptions::parse_cache`]. Only files
/// that parsed are kept; the last parse of a name replaces an earlier one.
#[derive(Debug, Default)]
pub struct ParseCache {
    /// By directory, then name (looked up by `&str`, with no key to build).
    files: Mutex<HashMap<Source, HashMap<String, Entry>>>,
}

impl ParseCache {
    /// An empty cache.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The manifests of a file parsed before with the same text and detail.
    pub(crate) fn get(
        &self,
        source: Source,
        name: &str,
        text: &str,
        detail: ObjectDetail,
    ) -> Option<Vec<Manifest>> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let entry = files.get(&source)?.get(name)?;
        (entry.detail == detail && *entry.text == *text).then(|| entry.manifests.clone())
    }

    /// Whether the cache holds a file of this directory and name (of any text and detail).
    pub(crate) fn has(&self, source: Source, name: &str) -> bool {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.get(&source).is_some_and(|f| f.contains_key(name))
    }

    /// Keeps the manifests a file's text parsed into.
    pub(crate) fn put(
        &self,
        source: Source,
        name: &str,
        text: String,
        detail: ObjectDetail,
        manifests: &[Manifest],
    ) {
        let entry = Entry {
            detail,
            text,
            manifests: manifests.to_vec(),
        };
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(source)
            .or_default()
            .insert(name.to_owned(), entry);
    }

    /// How many files the cache holds.
    #[must_use]
    pub fn len(&self) -> usize {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.values().map(HashMap::len).sum()
    }

    /// Whether the cache holds no file.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
