//! The manifest, index and descriptor fields minicvo reads, and what makes a manifest an
//! image.

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::{ImageError, Platform};

/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker manifest list.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker image manifest (schema 2).
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

const CONFIG_TYPES: &[&str] = &[
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];
const LAYER_TYPES: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
];

/// A content descriptor.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    #[serde(default)]
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Platform of an index entry.
    #[serde(default)]
    pub platform: Option<DescriptorPlatform>,
    /// Annotations (the OCI layout's `org.opencontainers.image.ref.name`).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// The platform of an index entry.
#[derive(Debug, Clone, Deserialize)]
pub struct DescriptorPlatform {
    /// OS.
    pub os: String,
    /// Architecture.
    pub architecture: String,
    /// Variant.
    #[serde(default)]
    pub variant: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    artifact_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
}

/// A parsed manifest.
#[derive(Debug, Clone)]
pub enum Manifest {
    /// An image: its layers, bottom first.
    Image(Vec<Descriptor>),
    /// An index or manifest list: its entries.
    Index(Vec<Descriptor>),
}

/// `sha256:<hex>` of `bytes`.
#[must_use]
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// Lowercase hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The hex part of a `sha256:` digest, checked (it becomes a file name).
///
/// # Errors
/// [`ImageError::NotAnImage`] for another algorithm or a malformed digest.
pub fn digest_hex<'a>(image: &str, digest: &'a str) -> Result<&'a str, ImageError> {
    match digest.strip_prefix("sha256:") {
        Some(h)
            if h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(h)
        }
        _ => Err(ImageError::NotAnImage {
            image: image.to_string(),
            what: format!("digest {digest:?}"),
            reason: "only sha256:<64 hex digits> digests are supported".into(),
        }),
    }
}

/// Parses and checks a manifest whose bytes were verified against `digest`.
///
/// # Errors
/// [`ImageError::NotAnImage`] for bad JSON, an unknown media type, an artifact, a config or
/// layer that is not an image's, or a bad digest in a descriptor.
pub fn parse(
    image: &str,
    digest: &str,
    bytes: &[u8],
    header_type: Option<&str>,
) -> Result<Manifest, ImageError> {
    let not = |reason: String| ImageError::NotAnImage {
        image: image.to_string(),
        what: format!("manifest {digest}"),
        reason,
    };
    let raw: RawManifest =
        serde_json::from_slice(bytes).map_err(|e| not(format!("not a manifest: {e}")))?;
    let media_type = raw
        .media_type
        .clone()
        .or_else(|| header_type.map(str::to_string))
        .unwrap_or_default();
    let is_index = match media_type.as_str() {
        OCI_INDEX | DOCKER_LIST => true,
        OCI_MANIFEST | DOCKER_MANIFEST => false,
        "" | "application/json" => raw.manifests.is_some(),
        other => return Err(not(format!("media type {other}"))),
    };
    if is_index {
        let entries = raw.manifests.unwrap_or_default();
        for e in &entries {
            digest_hex(image, &e.digest)?;
        }
        return Ok(Manifest::Index(entries));
    }
    if let Some(a) = raw.artifact_type {
        return Err(not(format!("it is an artifact of type {a}")));
    }
    let config = raw.config.ok_or_else(|| not("no config".into()))?;
    if !CONFIG_TYPES.contains(&config.media_type.as_str()) {
        return Err(not(format!("config media type {}", config.media_type)));
    }
    let layers = raw.layers.ok_or_else(|| not("no layers".into()))?;
    for (i, l) in layers.iter().enumerate() {
        if l.media_type.contains("zstd") {
            return Err(not(format!(
                "layer {i} ({}) is zstd-compressed, which minicvo does not read",
                l.digest
            )));
        }
        if !LAYER_TYPES.contains(&l.media_type.as_str()) {
            return Err(not(format!(
                "layer {i} ({}) has media type {}",
                l.digest, l.media_type
            )));
        }
        digest_hex(image, &l.digest)?;
    }
    Ok(Manifest::Image(layers))
}

/// Picks the index entry for `wanted`, else the machine's platform, else linux/amd64.
///
/// # Errors
/// [`ImageError::NoPlatform`] naming what the index has.
pub fn select<'a>(
    image: &str,
    entries: &'a [Descriptor],
    wanted: Option<&Platform>,
) -> Result<(&'a Descriptor, Platform), ImageError> {
    let matches = |e: &Descriptor, p: &Platform| {
        e.platform.as_ref().is_some_and(|ep| {
            ep.os == p.os
                && ep.architecture == p.architecture
                && (p.variant.is_none() || ep.variant == p.variant)
        })
    };
    let candidates: Vec<Platform> = match wanted {
        Some(p) => vec![p.clone()],
        None => vec![Platform::host(), Platform::linux_amd64()],
    };
    for p in &candidates {
        if let Some(e) = entries.iter().find(|e| matches(e, p)) {
            return Ok((e, p.clone()));
        }
    }
    let available: Vec<String> = entries
        .iter()
        .filter_map(|e| e.platform.as_ref())
        .map(|p| match &p.variant {
            Some(v) => format!("{}/{}/{v}", p.os, p.architecture),
            None => format!("{}/{}", p.os, p.architecture),
        })
        .collect();
    Err(ImageError::NoPlatform {
        image: image.to_string(),
        platform: candidates[0].to_string(),
        available: if available.is_empty() {
            "no platforms".into()
        } else {
            available.join(", ")
        },
    })
}
