//! Reading a release payload from disk exactly as the CVO does: `manifests/` (templated) then
//! `release-manifests/`, each sorted bytewise by file name, no recursion, only `.yaml`, `.yml`
//! and `.json`; then the load-time inclusion filters. Files are parsed in parallel, and any
//! parse error rejects the whole payload.
//!
//! Input is untrusted: only regular files up to 16 MiB are read, documents are parsed with
//! depth, size and alias budgets, and parsing runs on threads with a stack large enough for the
//! deepest document allowed, so bad input fails with a [`LoadError`], never a crash or a hang.

pub mod duplicate_keys;
mod error;
mod fast_yaml;
mod json_size;
pub mod metadata;
mod parse;
pub mod parse_cache;
mod read;
pub mod template;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use error::LoadError;
pub use metadata::{ImageReferences, ReleaseMetadata};
pub use parse::parse_manifest_text;
pub use parse_cache::ParseCache;

use crate::filter::Filters;
use crate::manifest::{Manifest, Source};
use parse_cache::{Compare, Lookup, Origin, Stamp, TextInputs};

/// Name of the release metadata file inside `release-manifests/`.
pub const RELEASE_METADATA: &str = "release-metadata";
/// Name of the image references file inside `release-manifests/`.
pub const IMAGE_REFERENCES: &str = "image-references";
/// The version placeholder operator repositories ship and the release tooling replaces.
pub const VERSION_PLACEHOLDER: &str = "0.0.1-snapshot";

/// How to load a payload.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Inclusion filters.
    pub filters: Filters,
    /// Pull spec rendered into `{{.ReleaseImage}}`.
    pub release_image: String,
    /// When set, every `0.0.1-snapshot` in the manifests is replaced by this version before
    /// parsing, as the release tooling does when it builds a release image.
    pub release_version: Option<String>,
    /// Replace the placeholder with the `release-metadata` version when `release_version` is
    /// not set (what `apply`, `render` and the e2e harness do by default).
    pub substitute_placeholder: bool,
    /// How much of each object to keep.
    pub detail: ObjectDetail,
    /// Files parsed by earlier loads that gave it: a file whose text is the same is not
    /// parsed again (its objects are shared). Loads give the same result with or without it.
    pub parse_cache: Option<std::sync::Arc<ParseCache>>,
}

/// How much of each object a load keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ObjectDetail {
    /// The whole object: what apply, render, lint and diff need.
    #[default]
    Whole,
    /// Only `apiVersion`, `kind` and `metadata`: all that planning reads. Every document is
    /// parsed and checked exactly as in a whole load, so the same payloads load, with the same
    /// manifests, and the same ones fail, with the same errors; the rest of each object is
    /// just not kept (most of it is not even built). `plan` loads this way.
    Headers,
}

/// A manifest the filters left out, and why.
#[derive(Debug, Clone)]
pub struct Excluded {
    /// The manifest.
    pub manifest: Manifest,
    /// The first failing check.
    pub reason: String,
}

/// A loaded payload: its included manifests in load order, plus what was left out.
#[derive(Debug, Clone)]
pub struct Payload {
    /// The directory given.
    pub root: PathBuf,
    /// Parsed `release-metadata`, when present.
    pub metadata: Option<ReleaseMetadata>,
    /// Parsed `image-references`, when present.
    pub image_references: Option<ImageReferences>,
    /// Included manifests, in load order (the CVO's task order).
    pub manifests: Vec<Manifest>,
    /// Manifests the load-time filters excluded, in load order.
    pub excluded: Vec<Excluded>,
    /// Non-fatal problems (missing metadata, skipped template files).
    pub warnings: Vec<String>,
    /// `--release-version`, which is the version when `release-metadata` is missing.
    pub release_version: Option<String>,
    /// How much of each object the manifests hold.
    pub detail: ObjectDetail,
}

impl Payload {
    /// The release version from `release-metadata`, or the `--release-version` override.
    #[must_use]
    pub fn version(&self) -> Option<String> {
        self.metadata
            .as_ref()
            .map(|m| m.version.to_string())
            .or_else(|| self.release_version.clone())
    }
}

/// Where a payload's files are: the two manifest directories (either may be absent) and the
/// directory holding `release-metadata` and `image-references`.
#[derive(Debug, Clone)]
struct Layout {
    manifests: Option<PathBuf>,
    release_manifests: PathBuf,
}

fn layout(root: &Path) -> Result<Layout, LoadError> {
    if !root.is_dir() {
        return Err(LoadError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let manifests = root.join("manifests");
    let release = root.join("release-manifests");
    let manifests = manifests.is_dir().then_some(manifests);
    if release.is_dir() || manifests.is_some() {
        Ok(Layout {
            manifests,
            release_manifests: release,
        })
    } else {
        // A bare directory of manifests counts as release-manifests/.
        Ok(Layout {
            manifests: None,
            release_manifests: root.to_path_buf(),
        })
    }
}

/// One file to read: its directory kind, its name and its path.
struct FileEntry {
    source: Source,
    name: String,
    path: PathBuf,
}

fn list_dir(
    layout: &Layout,
    root: &Path,
    dir: &Path,
    source: Source,
) -> Result<Vec<FileEntry>, LoadError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let io = |e| LoadError::Io {
        path: dir.to_path_buf(),
        source: e,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        // The entry's own type needs no system call; only a link is followed to its target.
        let is_dir = match entry.file_type() {
            Ok(t) if !t.is_symlink() => t.is_dir(),
            _ => path.is_dir(),
        };
        if is_dir {
            continue;
        }
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str().map(str::to_string) else {
            // The CVO reads such a file; skipping it would drop manifests silently.
            let lossy = file_name.to_string_lossy();
            let manifest_ext = [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| file_name.as_encoded_bytes().ends_with(ext.as_bytes()));
            if manifest_ext {
                return Err(LoadError::Io {
                    path: PathBuf::from(shown_path(layout, root, source, &lossy)),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "file name is not valid UTF-8\nhint: rename the file",
                    ),
                });
            }
            continue;
        };
        if name == RELEASE_METADATA || name == IMAGE_REFERENCES {
            continue;
        }
        let ext_ok = Path::new(&name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if ext_ok {
            entries.push(FileEntry { source, name, path });
        }
    }
    entries.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(entries)
}

fn shown_path(layout: &Layout, root: &Path, source: Source, name: &str) -> String {
    if source == Source::ReleaseManifests && layout.release_manifests == root {
        name.to_string()
    } else {
        format!("{}/{name}", source.dir_name())
    }
}

/// Result of reading one file: its manifests, each with the verdict of the load-time filters
/// (the reason one is excluded), or a warning when a template file was skipped.
enum FileOutcome {
    Manifests(Vec<(Manifest, Result<(), String>)>),
    Skipped(String),
}

/// Loads a payload.
///
/// # Errors
/// [`LoadError`] for an unreadable directory or file, a file that does not parse, a duplicate
/// object in one file, or bad `release-metadata` / `image-references`. Nothing is returned
/// partially: one bad document rejects the payload.
pub fn load(root: &Path, options: &LoadOptions) -> Result<Payload, LoadError> {
    load_at(root, options, std::time::SystemTime::now())
}

/// [`load`], started at `started`: files changed after it (less a margin) are not trusted to
/// be unchanged by their metadata alone (see `parse_cache::Stamp`).
pub(crate) fn load_at(
    root: &Path,
    options: &LoadOptions,
    started: std::time::SystemTime,
) -> Result<Payload, LoadError> {
    let layout = layout(root)?;
    let mut warnings = Vec::new();

    let meta_dir = &layout.release_manifests;
    let meta_file = meta_dir.join(RELEASE_METADATA);
    let meta_shown = shown_path(&layout, root, Source::ReleaseManifests, RELEASE_METADATA);
    let metadata = if read::entry_exists(&meta_file) {
        let text = read::read_text(&meta_file, &meta_shown)?;
        Some(metadata::parse_release_metadata(&meta_shown, &text)?)
    } else {
        warnings.push(format!(
            "{meta_shown} not found: the release version is unknown"
        ));
        None
    };
    let refs_file = meta_dir.join(IMAGE_REFERENCES);
    let refs_shown = shown_path(&layout, root, Source::ReleaseManifests, IMAGE_REFERENCES);
    let image_references = if read::entry_exists(&refs_file) {
        let text = read::read_text(&refs_file, &refs_shown)?;
        let refs = metadata::parse_image_references(&refs_shown, &text)?;
        if let Some(meta) = &metadata {
            let version = meta.version.to_string();
            let Some(name) = refs.name.clone() else {
                return Err(LoadError::ImageReferences {
                    file: refs_shown,
                    message: format!(
                        "missing metadata.name\nhint: name the ImageStream after the release version, {version}"
                    ),
                });
            };
            if name != version {
                return Err(LoadError::VersionMismatch {
                    file: refs_shown,
                    image_references: name,
                    release_metadata: version,
                });
            }
        }
        Some(refs)
    } else {
        None
    };

    let mut files = Vec::new();
    if let Some(dir) = &layout.manifests {
        files.extend(list_dir(&layout, root, dir, Source::Manifests)?);
    }
    files.extend(list_dir(
        &layout,
        root,
        &layout.release_manifests,
        Source::ReleaseManifests,
    )?);

    let template_data = template::TemplateData {
        release_image: options.release_image.clone(),
        cluster_profile: options.filters.profile.clone(),
        images: image_references
            .as_ref()
            .map(|r| r.images.clone())
            .unwrap_or_default(),
    };
    let placeholder_version = options.release_version.clone().or_else(|| {
        options
            .substitute_placeholder
            .then(|| metadata.as_ref().map(|m| m.version.to_string()))
            .flatten()
    });

    let major = metadata.as_ref().map(|m| m.version.major);
    // The filters run on the parsing threads too.
    let filtered = |ms: Vec<Manifest>| {
        let verdicts = ms.into_iter().map(|m| {
            let verdict = options.filters.include_at_load(&m, major);
            (m, verdict)
        });
        FileOutcome::Manifests(verdicts.collect())
    };
    let cache = options.parse_cache.as_deref();
    // What the text of each directory's files is rendered from, for the cache.
    let inputs = cache.map(|c| {
        let version = placeholder_version.clone();
        let templated = c.inputs_id(TextInputs {
            template: Some(template_data.clone()),
            version: version.clone(),
        });
        let plain = c.inputs_id(TextInputs {
            template: None,
            version,
        });
        (templated, plain)
    });
    let read_one = |f: &FileEntry| {
        let shown = shown_path(&layout, root, f.source, &f.name);
        let meta = read::checked_metadata(&f.path, &shown)?;
        let origin = inputs.map(|(templated, plain)| Origin {
            stamp: Stamp::of(&meta, started),
            inputs: if f.source == Source::Manifests {
                templated
            } else {
                plain
            },
        });
        if let (Some(c), Some(origin)) = (cache, &origin)
            && let Some(ms) = c.get_unchanged(f.source, &f.name, origin, options.detail)
        {
            return Ok(filtered(ms));
        }
        with_read_buffers(|buf, spare| {
            let text = read::read_text_into(&f.path, &shown, &meta, buf)?;
            let template = (f.source == Source::Manifests).then_some(&template_data);
            let text = match rendered(text.into(), template, placeholder_version.as_deref()) {
                Ok(text) => text,
                Err(e) => return Ok(FileOutcome::Skipped(format!("{shown}: skipped: {e}"))),
            };
            if let Some(c) = cache {
                match c.get(f.source, &f.name, &text, options.detail) {
                    Lookup::Hit(ms) => return Ok(filtered(ms)),
                    Lookup::Compare(other) if renders_to(&other, &text, spare) => {
                        return Ok(filtered(other.manifests));
                    }
                    Lookup::Compare(_) | Lookup::Miss => {}
                }
            }
            let ms = parse::parse_file(f.source, &f.name, &shown, &text, options.detail)?;
            if let (Some(c), Some(origin)) = (cache, origin) {
                let at = (f.source, f.name.as_str(), f.path.as_path());
                c.put(at, &text, origin, options.detail, &ms);
            }
            Ok(filtered(ms))
        })
    };
    let outcomes: Vec<Result<FileOutcome, LoadError>> =
        on_parse_threads(|| files.par_iter().map(read_one).collect());

    let mut manifests = Vec::new();
    let mut excluded = Vec::new();
    for outcome in outcomes {
        match outcome? {
            FileOutcome::Skipped(w) => warnings.push(w),
            FileOutcome::Manifests(ms) => {
                for (m, verdict) in ms {
                    match verdict {
                        Ok(()) => manifests.push(m),
                        Err(reason) => excluded.push(Excluded {
                            manifest: m,
                            reason,
                        }),
                    }
                }
            }
        }
    }
    let mut metadata = metadata;
    if let (Some(meta), Some(v)) = (&mut metadata, &options.release_version)
        && let Ok(parsed) = semver::Version::parse(v)
    {
        meta.version = parsed;
    }
    Ok(Payload {
        root: root.to_path_buf(),
        metadata,
        image_references,
        manifests,
        excluded,
        warnings,
        release_version: options.release_version.clone(),
        detail: options.detail,
    })
}

/// Runs `f` with this thread's two buffers for file contents (one for the file read, one
/// for a file it is compared with), kept from file to file (and load to load) unless a large
/// file grew one past [`READ_BUFFER_KEPT`].
fn with_read_buffers<T>(f: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> T) -> T {
    thread_local! {
        static BUFFERS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    BUFFERS.with_borrow_mut(|(buf, spare)| {
        let out = f(buf, spare);
        for b in [buf, spare] {
            if b.capacity() > READ_BUFFER_KEPT {
                *b = Vec::new();
            }
        }
        out
    })
}

/// The text a payload file's contents render to: templated with `template` (given for the
/// files of `manifests/`), then the version placeholder replaced by `version`, if given.
fn rendered<'t>(
    text: Cow<'t, str>,
    template: Option<&template::TemplateData>,
    version: Option<&str>,
) -> Result<Cow<'t, str>, template::TemplateError> {
    let mut text = text;
    if let Some(data) = template {
        text = template::render(&text, data)?.into();
    }
    if let Some(v) = version
        && text.contains(VERSION_PLACEHOLDER)
    {
        text = text.replace(VERSION_PLACEHOLDER, v).into();
    }
    Ok(text)
}

/// Whether the file `other` names is still what it was when it was parsed (its stamp, before
/// and after it is read) and renders to `text`; read into `spare`. A file that cannot be read
/// or rendered any more is not the same.
fn renders_to(other: &Compare, text: &str, spare: &mut Vec<u8>) -> bool {
    let shown = other.path.display().to_string();
    let unchanged = || {
        read::checked_metadata(&other.path, &shown)
            .ok()
            .filter(|meta| Stamp::now_of(meta) == other.stamp)
    };
    let Some(meta) = unchanged() else {
        return false;
    };
    let Ok(raw) = read::read_text_into(&other.path, &shown, &meta, spare) else {
        return false;
    };
    // A write while it was read shows in its stamp now.
    if unchanged().is_none() {
        return false;
    }
    let inputs = &other.inputs;
    rendered(
        raw.into(),
        inputs.template.as_ref(),
        inputs.version.as_deref(),
    )
    .is_ok_and(|theirs| *theirs == *text)
}

/// Capacity of a parsing thread's file buffer past which it is freed after use: larger than
/// the largest file of a real payload (under 1 MiB).
const READ_BUFFER_KEPT: usize = 4 << 20;

/// Stack of each parsing thread. The YAML parser recurses once per nesting level, and in a debug
/// build a level takes several KiB, so the 2 MiB default of a thread overflows before the
/// depth budget stops a document. Only touched pages are committed.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Runs `f` on a thread pool whose threads have [`PARSE_STACK_BYTES`] of stack (built once per
/// process), or on the global pool when such a pool cannot be built.
fn on_parse_threads<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .stack_size(PARSE_STACK_BYTES)
            .thread_name(|i| format!("minicvo-parse-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Loads every document of a payload without filtering (for analysis that looks at all
/// profiles): the same as [`load`] with a filter that keeps everything.
///
/// # Errors
/// As [`load`].
pub fn load_unfiltered(root: &Path, options: &LoadOptions) -> Result<Payload, LoadError> {
    let mut p = load(root, options)?;
    let mut all: Vec<(usize, Manifest)> = Vec::new();
    let order = |m: &Manifest| {
        (
            m.source == Source::ReleaseManifests,
            m.file.clone(),
            m.document,
        )
    };
    all.extend(p.manifests.drain(..).map(|m| (0, m)));
    all.extend(p.excluded.drain(..).map(|e| (0, e.manifest)));
    all.sort_by_key(|(_, m)| order(m));
    p.manifests = all.into_iter().map(|(_, m)| m).collect();
    Ok(p)
}

/// Counts of what a payload holds, for summaries.
#[must_use]
pub fn kind_counts(manifests: &[Manifest]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in manifests {
        *counts.entry(m.id.kind.clone()).or_insert(0) += 1;
    }
    counts
}
