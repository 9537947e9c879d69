//! The payloads an operator can apply, found by their `release-metadata` version: each
//! `--payloads` path is a payload root (it has `release-manifests/`) or a directory of them.
//! A version asked for that is not known yet makes the directories be read again, so a
//! payload copied in while the operator runs is found without a restart. A desired update
//! that names a release image is pulled ([`pull`]) and remembered by image and by version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::image::{self as release_image, FetchOptions, Fetched};
use crate::payload::{self, LoadError, LoadOptions, Payload};

/// Where a release comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A payload directory, loaded when its version is asked for.
    Directory(PathBuf),
    /// A payload already loaded (the e2e harness hands over the payloads it checked).
    Loaded(Arc<Payload>),
}

/// A payload that could not be read while looking for versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The directory.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// Release versions and where their payloads are.
#[derive(Debug, Clone, Default)]
pub struct PayloadIndex {
    roots: Vec<PathBuf>,
    loaded: BTreeMap<String, Arc<Payload>>,
    found: BTreeMap<String, PathBuf>,
    unreadable: Vec<Unreadable>,
    /// How release images are pulled; `None`: images are refused.
    fetch: Option<FetchOptions>,
    /// Images pulled, by the reference asked for.
    images: BTreeMap<String, Arc<Fetched>>,
    /// The versions of the images pulled.
    pulled: BTreeMap<String, PathBuf>,
}

impl PayloadIndex {
    /// An index over `roots`, read at once.
    #[must_use]
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let mut index = PayloadIndex {
            roots,
            ..PayloadIndex::default()
        };
        index.rescan();
        index
    }

    /// An index of payloads already loaded, by their version.
    #[must_use]
    pub fn of_loaded(payloads: impl IntoIterator<Item = (String, Arc<Payload>)>) -> Self {
        PayloadIndex {
            loaded: payloads.into_iter().collect(),
            ..PayloadIndex::default()
        }
    }

    /// Pulls release images that a desired update names, with `options`.
    #[must_use]
    pub fn with_images(mut self, options: FetchOptions) -> Self {
        self.fetch = Some(options);
        self
    }

    /// How images are pulled (`None`: they are not).
    #[must_use]
    pub fn image_options(&self) -> Option<&FetchOptions> {
        self.fetch.as_ref()
    }

    /// The payload of an image pulled before.
    #[must_use]
    pub fn pulled(&self, image: &str) -> Option<Source> {
        self.images
            .get(image)
            .map(|f| Source::Directory(f.dir.clone()))
    }

    /// Remembers a pulled image (by its reference and its payload's version) and returns its
    /// payload.
    pub fn add_pulled(&mut self, image: &str, fetched: Fetched) -> Source {
        let dir = fetched.dir.clone();
        if let Ok(v) = version_of(&dir) {
            self.pulled.insert(v, dir.clone());
        }
        self.images.insert(image.to_string(), Arc::new(fetched));
        Source::Directory(dir)
    }

    /// Reads the directories again.
    pub fn rescan(&mut self) {
        self.found.clear();
        self.unreadable.clear();
        for root in self.roots.clone() {
            if is_payload(&root) {
                self.add(&root);
            } else {
                let mut children: Vec<PathBuf> = std::fs::read_dir(&root)
                    .map(|d| d.flatten().map(|e| e.path()).collect())
                    .unwrap_or_default();
                children.sort();
                for child in children.iter().filter(|c| is_payload(c)) {
                    self.add(child);
                }
            }
        }
    }

    fn add(&mut self, dir: &Path) {
        match version_of(dir) {
            Ok(v) => {
                // The first path given wins, as on a PATH.
                self.found.entry(v).or_insert_with(|| dir.to_path_buf());
            }
            Err(reason) => self.unreadable.push(Unreadable {
                path: dir.to_path_buf(),
                reason,
            }),
        }
    }

    /// Where `version` comes from; reads the directories again when it is not known.
    pub fn find(&mut self, version: &str) -> Option<Source> {
        if let Some(p) = self.lookup(version) {
            return Some(p);
        }
        self.rescan();
        self.lookup(version)
    }

    fn lookup(&self, version: &str) -> Option<Source> {
        if let Some(p) = self.loaded.get(version) {
            return Some(Source::Loaded(p.clone()));
        }
        self.found
            .get(version)
            .or_else(|| self.pulled.get(version))
            .map(|d| Source::Directory(d.clone()))
    }

    /// Every known version, lowest first by SemVer.
    #[must_use]
    pub fn versions(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .loaded
            .keys()
            .chain(self.found.keys())
            .chain(self.pulled.keys())
            .cloned()
            .collect();
        all.sort_by(
            |a, b| match (semver::Version::parse(a), semver::Version::parse(b)) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                _ => a.cmp(b),
            },
        );
        all.dedup();
        all
    }

    /// Payload directories whose version could not be read.
    #[must_use]
    pub fn unreadable(&self) -> &[Unreadable] {
        &self.unreadable
    }

    /// The paths given.
    #[must_use]
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }
}

impl Source {
    /// The loaded payload.
    ///
    /// # Errors
    /// The payload's [`LoadError`]: nothing of a payload that fails to load is applied.
    pub fn load(&self, options: &LoadOptions) -> Result<Arc<Payload>, LoadError> {
        match self {
            Source::Loaded(p) => Ok(p.clone()),
            Source::Directory(d) => payload::load(d, options).map(Arc::new),
        }
    }
}

/// Pulls the release image `image` (a registry reference, `oci:DIR[:TAG]`, `oci-archive:FILE`
/// or `docker-archive:FILE`) and extracts its payload.
///
/// # Errors
/// Why, for ReleaseAccepted: not an image reference, or the pull failed.
pub async fn pull(image: &str, options: &FetchOptions) -> Result<Fetched, String> {
    let source = release_image::Source::resolve(image).map_err(|e| e.to_string())?;
    if !source.is_image() {
        return Err(format!("{image:?} is not an image reference"));
    }
    release_image::fetch(&source, options)
        .await
        .map_err(|e| e.to_string())
}

fn is_payload(dir: &Path) -> bool {
    dir.join("release-manifests").is_dir()
}

/// The `release-metadata` version of a payload root.
fn version_of(dir: &Path) -> Result<String, String> {
    let file = dir
        .join("release-manifests")
        .join(payload::RELEASE_METADATA);
    let shown = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{shown}: {e}"))?;
    payload::metadata::parse_release_metadata(&shown, &text)
        .map(|m| m.version.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(dir: &Path, version: &str) {
        std::fs::create_dir_all(dir.join("release-manifests")).unwrap();
        std::fs::write(
            dir.join("release-manifests/release-metadata"),
            format!(r#"{{"kind":"cincinnati-metadata-v0","version":"{version}"}}"#),
        )
        .unwrap();
    }

    #[test]
    fn roots_and_directories_of_roots_are_indexed_by_version() {
        let tmp = tempfile::tempdir().unwrap();
        payload(&tmp.path().join("all/b"), "4.14.0");
        payload(&tmp.path().join("all/a"), "4.13.0");
        payload(&tmp.path().join("one"), "4.9.1");
        std::fs::create_dir_all(tmp.path().join("all/bad/release-manifests")).unwrap();
        let mut index = PayloadIndex::new(vec![tmp.path().join("all"), tmp.path().join("one")]);
        assert_eq!(index.versions(), ["4.9.1", "4.13.0", "4.14.0"]);
        assert_eq!(index.unreadable().len(), 1);
        assert!(matches!(index.find("4.13.0"), Some(Source::Directory(d)) if d.ends_with("all/a")));
        assert!(index.find("4.15.0").is_none());
        // A payload added later is found on the next lookup.
        payload(&tmp.path().join("all/c"), "4.15.0");
        assert!(index.find("4.15.0").is_some());
    }
}
