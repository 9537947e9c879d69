//! The extracted-payload cache: one directory per manifest digest (and platform, for a
//! manifest list) under the user cache directory, written to a staging directory and renamed
//! into place only when complete, so a failed or interrupted pull leaves no entry behind.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{ImageError, Platform};

/// Name of the file that marks a complete entry and records what it holds.
const ENTRY_FILE: &str = "entry.json";
/// The payload directory inside an entry.
pub const PAYLOAD_DIR: &str = "payload";

/// Where and how much to cache.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// The cache directory.
    pub dir: PathBuf,
    /// Keep extracted payloads (`--no-cache` turns this off: extract, use, delete).
    pub enabled: bool,
    /// Size bound of all entries; the least recently used ones go first.
    pub max_bytes: u64,
}

impl CacheOptions {
    /// `$XDG_CACHE_HOME/minicvo/images`, else `~/.cache/minicvo/images`, else a directory
    /// under the system temporary directory; 2 GiB.
    #[must_use]
    pub fn user_default() -> Self {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let base = env("XDG_CACHE_HOME")
            .or_else(|| env("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        Self {
            dir: base.join("minicvo").join("images"),
            enabled: true,
            max_bytes: 2 << 30,
        }
    }
}

/// What a cache entry records.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EntryMeta {
    /// The digest the entry is keyed by (the reference's manifest or manifest list).
    pub digest: String,
    /// The image manifest's digest (differs from `digest` for a manifest list).
    pub manifest_digest: String,
    /// The platform picked from a manifest list.
    pub platform: Option<String>,
    /// Bytes of the extracted payload.
    pub bytes: u64,
}

/// A staging directory inside the cache, removed on drop unless committed.
#[derive(Debug)]
pub struct Staging {
    path: Option<PathBuf>,
}

impl Staging {
    /// The staging directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = fs::remove_dir_all(p);
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Cache {
        path: path.to_path_buf(),
        source,
    }
}

fn key(digest: &str, platform: Option<&str>) -> String {
    let base = digest.replace(':', "-");
    match platform {
        Some(p) => format!("{base}@{}", p.replace('/', "-")),
        None => base,
    }
}

/// Looks up a complete entry for `digest`: a single image, or the platform of a list.
pub fn lookup(
    options: &CacheOptions,
    digest: &str,
    wanted: Option<&Platform>,
) -> Option<(PathBuf, EntryMeta)> {
    if !options.enabled {
        return None;
    }
    let platforms: Vec<Option<String>> = match wanted {
        Some(p) => vec![None, Some(p.to_string())],
        None => vec![
            None,
            Some(Platform::host().to_string()),
            Some(Platform::linux_amd64().to_string()),
        ],
    };
    for p in platforms {
        let dir = options.dir.join(key(digest, p.as_deref()));
        let meta_path = dir.join(ENTRY_FILE);
        let Ok(text) = fs::read_to_string(&meta_path) else {
            continue;
        };
        let Ok(meta) = serde_json::from_str::<EntryMeta>(&text) else {
            continue;
        };
        if meta.digest == digest {
            // Mark as recently used for the size bound.
            if let Ok(f) = fs::File::options().append(true).open(&meta_path) {
                let _ = f.set_modified(SystemTime::now());
            }
            return Some((dir.join(PAYLOAD_DIR), meta));
        }
    }
    None
}

/// A new staging directory inside the cache directory (created if missing).
///
/// # Errors
/// [`ImageError::Cache`] when the directory cannot be created.
pub fn stage(options: &CacheOptions) -> Result<Staging, ImageError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    fs::create_dir_all(&options.dir).map_err(io_err(&options.dir))?;
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = options.dir.join(format!(
        ".staging-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir(&path).map_err(io_err(&path))?;
    let payload = path.join(PAYLOAD_DIR);
    fs::create_dir(&payload).map_err(io_err(&payload))?;
    Ok(Staging { path: Some(path) })
}

/// Commits a complete staging directory as the entry for `meta`, then trims the cache to
/// its bound. Returns the entry's payload directory.
///
/// # Errors
/// [`ImageError::Cache`] when the entry cannot be written.
pub fn commit(
    options: &CacheOptions,
    mut staging: Staging,
    meta: &EntryMeta,
) -> Result<PathBuf, ImageError> {
    let path = staging.path().to_path_buf();
    let meta_path = path.join(ENTRY_FILE);
    let text = serde_json::to_string_pretty(meta).unwrap_or_default();
    fs::write(&meta_path, text).map_err(io_err(&meta_path))?;
    let dest = options
        .dir
        .join(key(&meta.digest, meta.platform.as_deref()));
    match fs::rename(&path, &dest) {
        Ok(()) => {
            staging.path = None;
        }
        // Another run committed the same digest first: use its entry.
        Err(_) if dest.join(ENTRY_FILE).is_file() => drop(staging),
        Err(e) => return Err(io_err(&dest)(e)),
    }
    trim(options, &dest);
    Ok(dest.join(PAYLOAD_DIR))
}

/// Removes the least recently used entries (never `keep`) until the cache fits its bound.
fn trim(options: &CacheOptions, keep: &Path) {
    let Ok(list) = fs::read_dir(&options.dir) else {
        return;
    };
    let mut entries: Vec<(SystemTime, u64, PathBuf)> = list
        .filter_map(Result::ok)
        .filter_map(|e| {
            let meta_path = e.path().join(ENTRY_FILE);
            let used = fs::metadata(&meta_path).and_then(|m| m.modified()).ok()?;
            let meta: EntryMeta =
                serde_json::from_str(&fs::read_to_string(&meta_path).ok()?).ok()?;
            Some((used, meta.bytes, e.path()))
        })
        .collect();
    let mut total: u64 = entries.iter().map(|e| e.1).sum();
    entries.sort();
    for (_, bytes, path) in entries {
        if total <= options.max_bytes {
            break;
        }
        if path != keep && fs::remove_dir_all(&path).is_ok() {
            total -= bytes;
        }
    }
}

/// Bytes of regular files below `dir`.
#[must_use]
pub fn du(dir: &Path) -> u64 {
    let Ok(list) = fs::read_dir(dir) else {
        return 0;
    };
    list.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => du(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
