//! Parsed files kept for the next load: a command that loads two payloads (or one payload
//! under several profiles) parses each distinct file once.
//!
//! Parsing is a function of the file's directory, name, text (after templating and the
//! version placeholder) and the [`ObjectDetail`]; the manifests it gives do not depend on
//! the payload's root or on the filters, which run after it. An entry is used only when all
//! of these are equal, so a load through the cache returns exactly what a load without it
//! returns. The text is equal when it is byte for byte, or when it is the very file read
//! before, unchanged since, rendered from the same inputs (see [`Stamp`]): such a file is
//! not read again. The cache keeps the text only of a file without a stamp; a file with one
//! is read again (and checked unchanged) when a file of the same name and length elsewhere is
//! compared with it. The objects are shared (`Arc`), not copied.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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
        (mtime < limit && ctime < limit).then(|| Stamp::now_of(meta))
    }

    /// The stamp of a file whose metadata is `meta`, however recently it changed: to check
    /// a file against the stamp it had when it was parsed (a change since then gives
    /// another, as that stamp was settled).
    pub(crate) fn now_of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
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

/// A parsed file's text, as the cache keeps it.
#[derive(Debug)]
enum Kept {
    /// The text itself: the file had no stamp.
    Text(String),
    /// Where the file is, and the length of its text. The file had a stamp, so it can be read
    /// again, and known unchanged, when another file is compared with it: the cache holds no
    /// copy of the payload's text (12 MB for OpenShift's).
    File { path: PathBuf, len: usize },
}

/// One parsed file.
#[derive(Debug)]
struct Entry {
    detail: ObjectDetail,
    kept: Kept,
    origin: Origin,
    manifests: Vec<Manifest>,
}

/// What the cache knows of a file's text: see [`ParseCache::get`].
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Parsed before from the same text: its manifests.
    Hit(Vec<Manifest>),
    /// Parsed before from a text of the same length that the cache did not keep: the same
    /// text if the file it came from is still what it was and renders to it.
    Compare(Compare),
    /// Not parsed before, or from another text or with another detail.
    Miss,
}

/// A file to compare a text with (see [`Lookup::Compare`]).
#[derive(Debug)]
pub(crate) struct Compare {
    /// The file the kept manifests were parsed from.
    pub(crate) path: PathBuf,
    /// Its stamp then: if it has another now, it changed, and nothing is known.
    pub(crate) stamp: Stamp,
    /// What its text was rendered from.
    pub(crate) inputs: Arc<TextInputs>,
    /// The manifests its text parsed into.
    pub(crate) manifests: Vec<Manifest>,
}

/// Files parsed by earlier loads, by directory and name (see the module docs). Give the
/// same cache to several loads through [`super::LoadOptions::parse_cache`]. Only files
/// that parsed are kept; the last parse of a name replaces an earlier one.
#[derive(Debug, Default)]
pub struct ParseCache {
    /// By directory, then name (looked up by `&str`, with no key to build).
    files: Mutex<HashMap<Source, HashMap<String, Entry>>>,
    /// Every distinct [`TextInputs`] of the loads so far.
    inputs: Mutex<Vec<Arc<TextInputs>>>,
}

impl ParseCache {
    /// An empty cache.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// What the cache knows of a file of this directory and name whose text (rendered) is
    /// `text`, parsed with `detail`.
    pub(crate) fn get(
        &self,
        source: Source,
        name: &str,
        text: &str,
        detail: ObjectDetail,
    ) -> Lookup {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = files.get(&source).and_then(|f| f.get(name)) else {
            return Lookup::Miss;
        };
        if entry.detail != detail {
            return Lookup::Miss;
        }
        match &entry.kept {
            Kept::Text(kept) if **kept == *text => Lookup::Hit(entry.manifests.clone()),
            Kept::File { path, len } if *len == text.len() => {
                let (Some(stamp), Some(inputs)) =
                    (entry.origin.stamp, self.inputs(entry.origin.inputs))
                else {
                    return Lookup::Miss;
                };
                Lookup::Compare(Compare {
                    path: path.clone(),
                    stamp,
                    inputs,
                    manifests: entry.manifests.clone(),
                })
            }
            _ => Lookup::Miss,
        }
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
        if let Some(i) = all.iter().position(|known| **known == inputs) {
            return i;
        }
        all.push(Arc::new(inputs));
        all.len() - 1
    }

    fn inputs(&self, id: usize) -> Option<Arc<TextInputs>> {
        let all = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        all.get(id).cloned()
    }

    /// Keeps the manifests that a file at `path`, of this origin, whose text (rendered) is
    /// `text`, parsed into. The text is copied only for a file without a stamp.
    pub(crate) fn put(
        &self,
        (source, name, path): (Source, &str, &Path),
        text: &str,
        origin: Origin,
        detail: ObjectDetail,
        manifests: &[Manifest],
    ) {
        let kept = if origin.stamp.is_some() {
            Kept::File {
                path: path.to_owned(),
                len: text.len(),
            }
        } else {
            Kept::Text(text.to_owned())
        };
        let entry = Entry {
            detail,
            kept,
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

    /// Writes `text` to `path` in place and puts its modification time back: only its change
    /// time tells the write.
    fn rewrite_keeping_mtime(path: &Path, text: &str) {
        let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
        std::fs::write(path, text).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(mtime).unwrap();
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
        rewrite_keeping_mtime(&path, &config("other"));
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
        let at = (s, FILE, path.as_path());
        cache.put(at, &config("one"), origin, ObjectDetail::Whole, &[]);
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
        cache.put(at, &config("one"), unstamped, ObjectDetail::Whole, &[]);
        assert!(get(&origin, ObjectDetail::Whole).is_none());
        let text = |t: &str| cache.get(s, FILE, t, ObjectDetail::Whole);
        assert!(matches!(text(&config("one")), Lookup::Hit(_)));
        assert!(matches!(text(&config("two")), Lookup::Miss));
    }

    #[test]
    fn a_copy_elsewhere_shares_the_objects_of_a_file_still_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        payload(&a, &config("one"));
        payload(&b, &config("one"));
        let cache = Arc::new(ParseCache::new());
        let options = LoadOptions {
            parse_cache: Some(cache.clone()),
            ..LoadOptions::default()
        };
        let later = || SystemTime::now() + Duration::from_secs(60);
        let first = load_at(&a, &options, later()).unwrap();
        // The first file's text is not kept: it is read again to compare.
        let files = cache.files.lock().unwrap();
        let kept = &files[&Source::ReleaseManifests][FILE].kept;
        assert!(matches!(kept, Kept::File { .. }), "{kept:?}");
        drop(files);
        let copy = load_at(&b, &options, later()).unwrap();
        assert!(Arc::ptr_eq(&all(&first)[0].object, &all(&copy)[0].object));

        // The first file changed since it was parsed, to the copy's text: the copy is parsed,
        // not given the objects of the first file's old text.
        let c = tmp.path().join("c");
        payload(&c, &config("two"));
        let cache = Arc::new(ParseCache::new());
        let options = LoadOptions {
            parse_cache: Some(cache),
            ..LoadOptions::default()
        };
        let first = load_at(&c, &options, later()).unwrap();
        let path = c.join("release-manifests").join(FILE);
        rewrite_keeping_mtime(&path, &config("six"));
        payload(&b, &config("six"));
        let copy = load_at(&b, &options, later()).unwrap();
        assert!(!Arc::ptr_eq(&all(&first)[0].object, &all(&copy)[0].object));
        assert_eq!(names(&copy), ["six"]);
    }
}
