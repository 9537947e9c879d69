//! Release images as payloads: resolve an argument to a directory or an image, pull the image
//! (registry, OCI layout, OCI or docker archive), and extract `release-manifests/` and
//! `manifests/` into a payload directory that [`crate::payload::load`] reads as any other.
//!
//! This is the only module that does network I/O outside the execute stage; the pure stages
//! only ever see the extracted directory. Layers are streamed (never held in memory), each
//! blob's size and digest verified, each tar entry checked as untrusted input, and the
//! result cached by manifest digest ([`cache`]).

mod auth;
pub mod cache;
mod error;
mod extract;
mod local;
pub mod manifest;
mod reference;
mod registry;

use std::path::{Path, PathBuf};

pub use auth::{AuthFiles, Credentials};
pub use cache::CacheOptions;
pub use error::{EntryProblem, ImageError};
pub use extract::Limits;
pub use reference::{Platform, Source};

use cache::{EntryMeta, Staging};
use extract::Extractor;
use manifest::Descriptor;

/// How to fetch images.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// `--registry-config`: the only auth file to read when set.
    pub registry_config: Option<PathBuf>,
    /// The platform to pick from a manifest list (default: the machine's, then linux/amd64).
    pub platform: Option<Platform>,
    /// Registries (`HOST` or `HOST:PORT`) reached over plain HTTP. Loopback registries
    /// (`localhost`, `127.0.0.0/8`, `[::1]`) always are.
    pub insecure_registries: Vec<String>,
    /// The cache.
    pub cache: CacheOptions,
    /// Size bounds.
    pub limits: Limits,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            registry_config: None,
            platform: None,
            insecure_registries: Vec::new(),
            cache: CacheOptions::user_default(),
            limits: Limits::default(),
        }
    }
}

/// What was fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The image as given.
    pub image: String,
    /// The image pinned by digest: `REGISTRY/REPO@sha256:…` for a registry image, the
    /// argument with `@sha256:…` for a layout or archive.
    pub pinned: String,
    /// The digest of what the reference names (a manifest list's, for a multi-arch image).
    pub digest: String,
    /// The image manifest's digest.
    pub manifest_digest: String,
    /// The platform picked from a manifest list.
    pub platform: Option<String>,
    /// Served from the cache.
    pub cached: bool,
}

/// An extracted payload directory, and the image it came from. Without the cache the
/// directory is deleted when this is dropped.
#[derive(Debug)]
pub struct Fetched {
    /// The payload root (holds `release-manifests/` and maybe `manifests/`).
    pub dir: PathBuf,
    /// The image.
    pub info: ImageInfo,
    _staging: Option<Staging>,
}

/// Fetches an image source into a payload directory (a directory source is returned as is).
///
/// # Errors
/// Any [`ImageError`]: registry, auth, a manifest that is not an image, a digest or size
/// mismatch, a refused tar entry, no `release-manifests/`, cache I/O.
pub async fn fetch(source: &Source, options: &FetchOptions) -> Result<Fetched, ImageError> {
    match source {
        Source::Registry(r) => registry::fetch(r, options).await,
        _ => fetch_local(source, options).expect("only a registry is not local"),
    }
}

/// [`fetch`] of a source on this machine (a directory, an OCI layout or archive, a docker
/// archive), which needs no runtime; `None` for a registry.
fn fetch_local(source: &Source, options: &FetchOptions) -> Option<Result<Fetched, ImageError>> {
    Some(match source {
        Source::Directory(dir) => Ok(Fetched {
            dir: dir.clone(),
            info: ImageInfo {
                image: dir.display().to_string(),
                pinned: dir.display().to_string(),
                digest: String::new(),
                manifest_digest: String::new(),
                platform: None,
                cached: false,
            },
            _staging: None,
        }),
        Source::Registry(_) => return None,
        Source::OciLayout { dir, tag } => {
            let name = source.to_string();
            local::Layout::open(&name, dir, tag.as_deref(), options)
                .and_then(|layout| layout.fetch(&name, options))
        }
        Source::OciArchive(file) => local::fetch_oci_archive(&source.to_string(), file, options),
        Source::DockerArchive(file) => {
            local::fetch_docker_archive(&source.to_string(), file, options)
        }
    })
}

/// [`fetch`] from synchronous code. A registry is fetched on its own thread with its own
/// runtime, so it works inside and outside a tokio runtime; other sources need neither.
///
/// # Errors
/// As [`fetch`].
pub fn fetch_blocking(source: &Source, options: &FetchOptions) -> Result<Fetched, ImageError> {
    if let Some(local) = fetch_local(source, options) {
        return local;
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| ImageError::Cache {
                    path: PathBuf::from("(runtime)"),
                    source: e,
                })?;
            rt.block_on(fetch(source, options))
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Whether a registry host is loopback (reached over plain HTTP by default).
#[must_use]
pub fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        registry.rsplit_once(':').map_or(registry, |(h, _)| h)
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A cache hit as a [`Fetched`].
fn from_cache(image: &str, pinned: String, dir: PathBuf, meta: EntryMeta) -> Fetched {
    tracing::debug!("image {image}: cached payload {}", dir.display());
    Fetched {
        dir,
        info: ImageInfo {
            image: image.to_string(),
            pinned,
            digest: meta.digest,
            manifest_digest: meta.manifest_digest,
            platform: meta.platform,
            cached: true,
        },
        _staging: None,
    }
}

/// Checks the extracted payload and commits it to the cache (or keeps the staging directory
/// alive for this run with `--no-cache`).
fn finish(
    image: &str,
    pinned: String,
    staging: Staging,
    meta: EntryMeta,
    options: &FetchOptions,
) -> Result<Fetched, ImageError> {
    let payload = staging.path().join(cache::PAYLOAD_DIR);
    if !payload.join("release-manifests").is_dir() {
        return Err(ImageError::NoReleaseManifests {
            image: image.to_string(),
        });
    }
    let meta = EntryMeta {
        bytes: cache::du(&payload),
        ..meta
    };
    let info = ImageInfo {
        image: image.to_string(),
        pinned,
        digest: meta.digest.clone(),
        manifest_digest: meta.manifest_digest.clone(),
        platform: meta.platform.clone(),
        cached: false,
    };
    if options.cache.enabled {
        let dir = cache::commit(&options.cache, staging, &meta)?;
        Ok(Fetched {
            dir,
            info,
            _staging: None,
        })
    } else {
        Ok(Fetched {
            dir: payload,
            info,
            _staging: Some(staging),
        })
    }
}

/// A manifest size bound check.
fn check_manifest_size(
    image: &str,
    what: &str,
    size: u64,
    limits: &Limits,
) -> Result<(), ImageError> {
    if size > limits.manifest_bytes {
        return Err(ImageError::TooLarge {
            image: image.to_string(),
            what: what.to_string(),
            size,
            limit: limits.manifest_bytes,
        });
    }
    Ok(())
}

/// Verifies manifest bytes against their digest.
fn verify_manifest(image: &str, digest: &str, bytes: &[u8]) -> Result<(), ImageError> {
    let actual = manifest::sha256_digest(bytes);
    if actual != digest {
        return Err(ImageError::DigestMismatch {
            image: image.to_string(),
            digest: digest.to_string(),
            actual,
        });
    }
    Ok(())
}

/// The staging payload root for an extractor.
fn extractor(staging: &Staging, image: &str, limits: Limits) -> Extractor {
    Extractor::new(staging.path().join(cache::PAYLOAD_DIR), image, limits)
}

/// `path` for messages.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Descriptor list helper for the local and remote paths.
type Layers = Vec<Descriptor>;
