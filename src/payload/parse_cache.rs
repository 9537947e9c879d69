//! Parsed files kept for the next load: a command that loads two payloads (or one payload
//! under several profiles) parses each distinct file once.
//!
//! Parsing is a function of the file's directory, name, text (after templating and the
//! version placeholder) and the [`ObjectDetail`]; the manifests it gives do not depend on
//! the payload's root or on the filters, which run after it. An entry is used only when all
//! of these are equal, so a load through the cache returns exactly what a load without it
//! returns. The text is equal when it is byte for byte, or when it is the very file read
//! before, unchanged since, rendered from the same inputs (see [`Stamp`]): such a file is
//! not read again. The objects are shared (`Arc`), not copied.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt as _;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::ObjectDetail;
use super::template::TemplateData;
use crate::manifest::{Manifest, Source};

/// What stands for a file's text without reading it: its device, inode, size and
/// modification and change times. Any write changes the change time, and the kernel's file
/// clock is coarse (a few milliseconds), so a file changed shortly before it was first read
/// could be changed again with the same times: like Git's "racily clean" entries, a file
/// changed less than [`SETTLED`] before its load started gets no stamp, and is compared by
/// its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// How long before a load a file must have last changed for its [`Stamp`] to be trusted.
const SETTLED: Duration = Duration::from_secs(2);

impl Stamp {
    /// The stamp of a file whose metadata is `meta`, read by a load that started at
    /// `started`; `None` when it changed too recently (or in the future) to be trusted.
    pub(crate) fn of(meta: &Metadata, started: SystemTime) -> Option<Stamp> {
        let limit = started
            .checked_sub(SETTLED)?
            .duration_since(UNIX_EPOCH)
            .ok()?;
        let limit = (
            i64::try_from(limit.as_secs()).ok()?,
            i64::from(limit.subsec_nanos()),
        );
        let mtime = (meta.mtime(), meta.mtime_nsec());
        let ctime = (meta.ctime(), meta.ctime_nsec());
        (mtime < limit && ctime < limit).then_some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime,
            ctime,
        })
    }
}

/// Where a file's text came from: the file, by its stamp if it has one, and what the text
/// was rendered from (an id of [`ParseCache::inputs_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) stamp: Option<Stamp>,
    pub(crate) inputs: usize,
}

/// What a file's text is rendered from besides the file: the template data (files of
/// `manifests/`) and the value of the version placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextInputs {
    pub(crate) template: Option<TemplateData>,
    pub(crate) version: Option<String>,
}

/// One parsed file.
#[derive(Debug)]
struct Entry {
    detail: ObjectDetail,
    text: String,
    origin: Origin,
    manifests: Vec<Manifest>,
}

/// Files parsed by earlier loads, by directory and name (see the module docs). Give the
/// same cache to several loads through [`super::LoadOptions::parse_cache`]. Only files
/// that parsed are kept; the last parse of a name replaces an earlier one.
#[derive(Debug, Default)]
pub struct ParseCache {
    /// By directory, then name (looked up by `&str`, with no key to build).
    files: Mutex<HashMap<Source, HashMap<String, Entry>>>,
    /// Every distinct [`TextInputs`] of the loads so far.
    inputs: Mutex<Vec<TextInputs>>,
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

    /// The manifests of a file parsed before with the same detail, when it is the same file
    /// unchanged since (the same stamp) and its text was rendered from the same inputs: its
    /// text is then the same without reading it. `None` for an `origin` without a stamp.
    pub(crate) fn get_unchanged(
        &self,
        source: Source,
        name: &str,
        origin: &Origin,
        detail: ObjectDetail,
    ) -> Option<Vec<Manifest>> {
        origin.stamp?;
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let entry = files.get(&source)?.get(name)?;
        (entry.detail == detail && entry.origin == *origin).then(|| entry.manifests.clone())
    }

    /// The index of `inputs` among those of earlier loads (added when new), for
    /// an [`Origin`].
    pub(crate) fn inputs_id(&self, inputs: TextInputs) -> usize {
        let mut all = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = all.iter().position(|known| *known == inputs) {
            return i;
        }
        all.push(inputs);
        all.len() - 1
    }

    /// Whether the cache holds a file of this directory and name (of any text and detail).
    pub(crate) fn has(&self, source: Source, name: &str) -> bool {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.get(&source).is_some_and(|f| f.contains_key(name))
    }

    /// Keeps the manifests a file's text, of this origin, parsed into.
    pub(crate) fn put(
        &self,
        source: Source,
        name: &str,
        text: String,
        origin: Origin,
        detail: ObjectDetail,
        manifests: &[Manifest],
    ) {
        let entry = Entry {
            detail,
            text,
            origin,
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::payload::{LoadOptions, Payload, load_at};

    const FILE: &str = "0000_50_a_01_config.yaml";

    fn config(name: &str) -> String {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: a\n")
    }

    fn payload(root: &Path, text: &str) {
        let dir = root.join("release-manifests");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), text).unwrap();
    }

    /// Every manifest of `p`, the excluded ones too.
    fn all(p: &Payload) -> Vec<&Manifest> {
        let excluded = p.excluded.iter().map(|e| &e.manifest);
        p.manifests.iter().chain(excluded).collect()
    }

    fn names(p: &Payload) -> Vec<String> {
        all(p).iter().map(|m| m.id.name.clone()).collect()
    }

    #[test]
    fn a_file_changed_shortly_before_its_load_has_no_stamp() {
        let dir = tempfile::tempdir().unwrap();
        payload(dir.path(), &config("one"));
        let meta = std::fs::metadata(dir.path().join("release-manifests").join(FILE)).unwrap();
        assert_eq!(Stamp::of(&meta, SystemTime::now()), None);
        let later = SystemTime::now() + Duration::from_secs(60);
        let stamp = Stamp::of(&meta, later).expect("settled a minute later");
        assert_eq!(Stamp::of(&meta, later), Some(stamp));
    }

    #[test]
    fn an_unchanged_file_is_shared_and_a_changed_one_read_again() {
        let dir = tempfile::tempdir().unwrap();
        payload(dir.path(), &config("one"));
        let cache = Arc::new(ParseCache::new());
        let options = LoadOptions {
            parse_cache: Some(cache.clone()),
            ..LoadOptions::default()
        };
        // Loads a minute from now: the file counts as settled and gets a stamp.
        let later = || SystemTime::now() + Duration::from_secs(60);
        let first = load_at(dir.path(), &options, later()).unwrap();
        let again = load_at(dir.path(), &options, later()).unwrap();
        assert!(Arc::ptr_eq(&all(&first)[0].object, &all(&again)[0].object));

        // A longer text: another size.
        payload(dir.path(), &config("three"));
        let longer = load_at(dir.path(), &options, later()).unwrap();
        assert_eq!(names(&longer), ["three"]);
        // The same size, with the old modification time put back: the change time differs.
        let path = dir.path().join("release-manifests").join(FILE);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        payload(dir.path(), &config("other"));
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(mtime).unwrap();
        drop(file);
        let same_size = load_at(dir.path(), &options, later()).unwrap();
        assert_eq!(names(&same_size), ["other"]);
    }

    #[test]
    fn unchanged_needs_the_same_stamp_inputs_and_detail() {
        let dir = tempfile::tempdir().unwrap();
        payload(dir.path(), &config("one"));
        let path = dir.path().join("release-manifests").join(FILE);
        let later = SystemTime::now() + Duration::from_secs(60);
        let stamp = Stamp::of(&std::fs::metadata(&path).unwrap(), later);
        assert!(stamp.is_some());
        let cache = ParseCache::new();
        let plain = cache.inputs_id(TextInputs {
            template: None,
            version: None,
        });
        let versioned = cache.inputs_id(TextInputs {
            template: None,
            version: Some("4.14.1".into()),
        });
        assert_ne!(plain, versioned);
        let again = cache.inputs_id(TextInputs {
            template: None,
            version: None,
        });
        assert_eq!(plain, again);
        let origin = Origin {
            stamp,
            inputs: plain,
        };
        let s = Source::ReleaseManifests;
        cache.put(s, FILE, config("one"), origin, ObjectDetail::Whole, &[]);
        let get = |origin: &Origin, detail| cache.get_unchanged(s, FILE, origin, detail);
        assert!(get(&origin, ObjectDetail::Whole).is_some());
        assert!(get(&origin, ObjectDetail::Headers).is_none());
        let other_inputs = Origin {
            inputs: versioned,
            ..origin
        };
        assert!(get(&other_inputs, ObjectDetail::Whole).is_none());
        let unstamped = Origin {
            stamp: None,
            ..origin
        };
        assert!(get(&unstamped, ObjectDetail::Whole).is_none());
        // An entry kept without a stamp is never taken as unchanged.
        cache.put(s, FILE, config("one"), unstamped, ObjectDetail::Whole, &[]);
        assert!(get(&origin, ObjectDetail::Whole).is_none());
    }
}
