//! Images on disk: an OCI image layout (`oci:DIR[:TAG]`), a tar of one (`oci-archive:`) and
//! a `docker save` tar (`docker-archive:`). Blobs are read as files and verified like
//! registry blobs; archives are unpacked into a staging directory inside the cache first.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::manifest::{self, Descriptor, Manifest};
use super::{
    FetchOptions, Fetched, ImageError, Layers, Limits, cache, check_manifest_size, extractor,
    finish, from_cache, shown, verify_manifest,
};

const REF_NAME: &str = "org.opencontainers.image.ref.name";

fn local_error(image: &str, path: &str, reason: impl Into<String>) -> ImageError {
    ImageError::Local {
        image: image.to_string(),
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Reads a small regular file, bounded.
fn read_small(image: &str, path: &Path, limit: u64) -> Result<Vec<u8>, ImageError> {
    let meta = fs::metadata(path).map_err(|e| local_error(image, &shown(path), e.to_string()))?;
    if !meta.is_file() {
        return Err(local_error(image, &shown(path), "not a regular file"));
    }
    if meta.len() > limit {
        return Err(ImageError::TooLarge {
            image: image.to_string(),
            what: shown(path),
            size: meta.len(),
            limit,
        });
    }
    fs::read(path).map_err(|e| local_error(image, &shown(path), e.to_string()))
}

/// An OCI image layout and the index entry picked from it.
pub struct Layout {
    dir: PathBuf,
    entry: Descriptor,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

impl Layout {
    /// Opens `dir/index.json` and picks the entry named `tag`, or the only entry.
    pub fn open(
        image: &str,
        dir: &Path,
        tag: Option<&str>,
        options: &FetchOptions,
    ) -> Result<Self, ImageError> {
        let index_path = dir.join("index.json");
        let bytes = read_small(image, &index_path, options.limits.manifest_bytes)?;
        let index: Index = serde_json::from_slice(&bytes)
            .map_err(|e| local_error(image, "index.json", format!("not an OCI index: {e}")))?;
        let entry = match tag {
            Some(t) => index
                .manifests
                .iter()
                .find(|m| m.annotations.get(REF_NAME).is_some_and(|n| n == t)),
            None if index.manifests.len() == 1 => index.manifests.first(),
            None => {
                return Err(local_error(
                    image,
                    "index.json",
                    format!(
                        "the layout holds {} images; name one with oci:DIR:TAG",
                        index.manifests.len()
                    ),
                ));
            }
        };
        let entry = entry.cloned().ok_or_else(|| {
            local_error(
                image,
                "index.json",
                format!("no image tagged {:?}", tag.unwrap_or("")),
            )
        })?;
        manifest::digest_hex(image, &entry.digest)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            entry,
        })
    }

    fn blob(&self, image: &str, digest: &str) -> Result<PathBuf, ImageError> {
        let hex = manifest::digest_hex(image, digest)?;
        Ok(self.dir.join("blobs").join("sha256").join(hex))
    }

    fn manifest(
        &self,
        image: &str,
        desc: &Descriptor,
        limits: &Limits,
    ) -> Result<Manifest, ImageError> {
        check_manifest_size(
            image,
            &format!("manifest {}", desc.digest),
            desc.size,
            limits,
        )?;
        let bytes = read_small(
            image,
            &self.blob(image, &desc.digest)?,
            limits.manifest_bytes,
        )?;
        verify_manifest(image, &desc.digest, &bytes)?;
        manifest::parse(image, &desc.digest, &bytes, Some(&desc.media_type))
    }

    /// Extracts the picked image (or returns the cached payload).
    pub fn fetch(&self, image: &str, options: &FetchOptions) -> Result<Fetched, ImageError> {
        let digest = self.entry.digest.clone();
        let pinned = format!("{image}@{digest}");
        if let Some((dir, meta)) = cache::lookup(&options.cache, &digest, options.platform.as_ref())
        {
            return Ok(from_cache(image, pinned, dir, meta));
        }
        let (layers, manifest_digest, platform): (Layers, String, Option<String>) =
            match self.manifest(image, &self.entry, &options.limits)? {
                Manifest::Image(layers) => (layers, digest.clone(), None),
                Manifest::Index(entries) => {
                    let (e, p) = manifest::select(image, &entries, options.platform.as_ref())?;
                    match self.manifest(image, e, &options.limits)? {
                        Manifest::Image(layers) => (layers, e.digest.clone(), Some(p.to_string())),
                        Manifest::Index(_) => {
                            return Err(ImageError::NotAnImage {
                                image: image.to_string(),
                                what: format!("manifest {}", e.digest),
                                reason: "an index inside an index".into(),
                            });
                        }
                    }
                }
            };
        let staging = cache::stage(&options.cache)?;
        let mut ex = extractor(&staging, image, options.limits);
        for (i, layer) in layers.iter().enumerate() {
            let path = self.blob(image, &layer.digest)?;
            let meta = fs::metadata(&path).map_err(|e| {
                local_error(image, &format!("blob {}", layer.digest), e.to_string())
            })?;
            if !meta.is_file() {
                return Err(local_error(
                    image,
                    &format!("blob {}", layer.digest),
                    "not a regular file",
                ));
            }
            let file = fs::File::open(&path).map_err(|e| {
                local_error(image, &format!("blob {}", layer.digest), e.to_string())
            })?;
            ex.layer(i, layer, file)?;
        }
        let meta = cache::EntryMeta {
            digest,
            manifest_digest,
            platform,
            bytes: 0,
        };
        finish(image, pinned, staging, meta, options)
    }
}

/// Unpacks an archive's regular files and directories into `dest`; links, special files,
/// `..` and absolute paths are refused.
fn unpack(image: &str, file: &Path, dest: &Path, limits: &Limits) -> Result<(), ImageError> {
    let f = fs::File::open(file).map_err(|e| local_error(image, &shown(file), e.to_string()))?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(f));
    let broken = |e: std::io::Error| local_error(image, &shown(file), format!("broken tar: {e}"));
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if name.starts_with('/') || name.split('/').any(|c| c == "..") {
            return Err(local_error(image, &name, "path leaves the archive"));
        }
        let comps: Vec<&str> = name
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        let path = comps.iter().fold(dest.to_path_buf(), |p, c| p.join(c));
        let cache_err = |e: std::io::Error| ImageError::Cache {
            path: path.clone(),
            source: e,
        };
        match entry.header().entry_type() {
            tar::EntryType::Directory => fs::create_dir_all(&path).map_err(cache_err)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if entry.size() > limits.layer_bytes {
                    return Err(ImageError::TooLarge {
                        image: image.to_string(),
                        what: name,
                        size: entry.size(),
                        limit: limits.layer_bytes,
                    });
                }
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent).map_err(cache_err)?;
                }
                let mut out = fs::File::create(&path).map_err(cache_err)?;
                std::io::copy(&mut (&mut entry).take(limits.layer_bytes), &mut out)
                    .map_err(broken)?;
            }
            _ => {
                return Err(local_error(
                    image,
                    &name,
                    "links and special files are not allowed in an image archive",
                ));
            }
        }
    }
    Ok(())
}

/// `oci-archive:FILE`.
pub fn fetch_oci_archive(
    image: &str,
    file: &Path,
    options: &FetchOptions,
) -> Result<Fetched, ImageError> {
    let unpacked = cache::stage(&options.cache)?;
    let dir = unpacked.path().join("archive");
    unpack(image, file, &dir, &options.limits)?;
    let layout = Layout::open(image, &dir, None, options)?;
    layout.fetch(image, options)
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerEntry {
    config: String,
    layers: Vec<String>,
}

/// `docker-archive:FILE` (`docker save`): `manifest.json`, the config, layer tars. Each layer
/// is verified against the digest its file name carries (`blobs/sha256/HEX`, crane's
/// `HEX.tar.gz`), else against the config's `rootfs.diff_ids`.
pub fn fetch_docker_archive(
    image: &str,
    file: &Path,
    options: &FetchOptions,
) -> Result<Fetched, ImageError> {
    let unpacked = cache::stage(&options.cache)?;
    let dir = unpacked.path().join("archive");
    unpack(image, file, &dir, &options.limits)?;
    let limits = &options.limits;
    let bytes = read_small(image, &dir.join("manifest.json"), limits.manifest_bytes)?;
    let entries: Vec<DockerEntry> = serde_json::from_slice(&bytes).map_err(|e| {
        local_error(
            image,
            "manifest.json",
            format!("not a docker archive manifest: {e}"),
        )
    })?;
    let [entry] = entries.as_slice() else {
        return Err(local_error(
            image,
            "manifest.json",
            format!(
                "{} images; minicvo reads archives of one image",
                entries.len()
            ),
        ));
    };
    let safe = |p: &str| {
        if p.starts_with('/') || p.split('/').any(|c| c == "..") {
            Err(local_error(image, p, "path leaves the archive"))
        } else {
            Ok(dir.join(p))
        }
    };
    let config_bytes = read_small(image, &safe(&entry.config)?, limits.manifest_bytes)?;
    let digest = manifest::sha256_digest(&config_bytes);
    let pinned = format!("{image}@{digest}");
    if let Some((d, meta)) = cache::lookup(&options.cache, &digest, None) {
        return Ok(from_cache(image, pinned, d, meta));
    }
    let config: serde_json::Value = serde_json::from_slice(&config_bytes)
        .map_err(|e| local_error(image, &entry.config, format!("not an image config: {e}")))?;
    let diff_ids: Vec<String> = config
        .pointer("/rootfs/diff_ids")
        .and_then(|d| serde_json::from_value(d.clone()).ok())
        .ok_or_else(|| {
            local_error(
                image,
                &entry.config,
                "no rootfs.diff_ids: not an image config",
            )
        })?;
    if diff_ids.len() != entry.layers.len() {
        return Err(local_error(
            image,
            "manifest.json",
            format!(
                "{} layers but the config lists {} diff_ids",
                entry.layers.len(),
                diff_ids.len()
            ),
        ));
    }
    let staging = cache::stage(&options.cache)?;
    let mut ex = extractor(&staging, image, options.limits);
    for (i, (layer, diff_id)) in entry.layers.iter().zip(&diff_ids).enumerate() {
        let path = safe(layer)?;
        let size = fs::metadata(&path)
            .map_err(|e| local_error(image, layer, e.to_string()))?
            .len();
        // The file as stored: `blobs/sha256/HEX` (docker 25+) and `HEX.tar.gz` (crane's
        // tarball, compressed layers) name its digest; `ID/layer.tar` (classic `docker save`)
        // is the uncompressed layer, checked against the config's diff_id.
        let named = layer.strip_prefix("blobs/sha256/").or_else(|| {
            layer
                .strip_suffix(".tar.gz")
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        });
        let digest = named.map_or_else(|| diff_id.clone(), |h| format!("sha256:{h}"));
        manifest::digest_hex(image, &digest)?;
        let desc = Descriptor {
            media_type: String::new(),
            digest,
            size,
            platform: None,
            annotations: std::collections::BTreeMap::new(),
        };
        let f = fs::File::open(&path).map_err(|e| local_error(image, layer, e.to_string()))?;
        ex.layer(i, &desc, f)?;
    }
    drop(unpacked);
    let meta = cache::EntryMeta {
        digest: digest.clone(),
        manifest_digest: digest,
        platform: None,
        bytes: 0,
    };
    finish(image, pinned, staging, meta, options)
}
