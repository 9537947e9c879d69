//! Errors of fetching a release image.

use std::path::PathBuf;

/// Why an image entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    /// A path with a `..` component.
    #[error("path has a `..` component")]
    DotDot,
    /// An absolute path.
    #[error("absolute path")]
    Absolute,
    /// A symbolic link whose target leaves the payload.
    #[error("symlink to {0:?} leaves the payload")]
    SymlinkLeaves(String),
    /// A hard link to something outside the payload.
    #[error("hard link to {0:?} leaves the payload")]
    HardLinkLeaves(String),
    /// A hard link to an entry that was not extracted.
    #[error("hard link to {0:?}, which is not a file of the payload")]
    HardLinkMissing(String),
    /// A device, FIFO or other special file.
    #[error("{0} is not allowed in a payload (only files, directories and links)")]
    Special(&'static str),
    /// A file over the size bound.
    #[error("file of {size} bytes is over the {limit}-byte bound")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// The payload grew over its total size bound.
    #[error("the payload grew over the {0}-byte bound")]
    PayloadTooLarge(u64),
    /// More entries than allowed.
    #[error("more than {0} payload entries")]
    TooManyEntries(u64),
    /// An entry below a symbolic link.
    #[error("path goes through a symlink")]
    ThroughSymlink,
    /// A path that is not UTF-8.
    #[error("path is not UTF-8")]
    NotUtf8,
}

/// Errors of resolving, pulling, verifying and extracting a release image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The argument is not a valid image reference.
    #[error("{arg}: not a payload directory nor an image reference: {reason}")]
    BadReference {
        /// The argument.
        arg: String,
        /// Why.
        reason: String,
    },
    /// The registry asked for credentials and none (or bad ones) were sent.
    #[error(
        "image {image}: registry {registry} answered 401 Unauthorized; {credentials}\nhint: log in with `podman login {registry}` or pass --registry-config FILE (a pull secret)"
    )]
    Unauthorized {
        /// The image.
        image: String,
        /// The registry host.
        registry: String,
        /// Which auth files were looked at and what was used.
        credentials: String,
    },
    /// Any other registry failure.
    #[error("image {image}: registry {registry}: {message}")]
    Registry {
        /// The image.
        image: String,
        /// The registry host.
        registry: String,
        /// The client's error.
        message: String,
    },
    /// The manifest is not a container image (an artifact, an unknown media type, bad JSON).
    #[error("image {image}: {what} is not an image: {reason}")]
    NotAnImage {
        /// The image.
        image: String,
        /// Which manifest (its digest).
        what: String,
        /// Why.
        reason: String,
    },
    /// A manifest list without the wanted platform.
    #[error("image {image}: the manifest list has no {platform} image (it has: {available})")]
    NoPlatform {
        /// The image.
        image: String,
        /// The platform asked for.
        platform: String,
        /// The platforms listed.
        available: String,
    },
    /// A blob whose content does not hash to its digest.
    #[error("image {image}: blob {digest}: digest mismatch (content hashes to {actual})")]
    DigestMismatch {
        /// The image.
        image: String,
        /// The expected digest.
        digest: String,
        /// What the content hashes to.
        actual: String,
    },
    /// A blob shorter or longer than its descriptor says.
    #[error("image {image}: blob {digest}: {got} bytes, the manifest says {expected}{truncated}")]
    SizeMismatch {
        /// The image.
        image: String,
        /// The blob digest.
        digest: String,
        /// The size in the descriptor.
        expected: u64,
        /// The bytes read.
        got: u64,
        /// ` (truncated)` when short.
        truncated: &'static str,
    },
    /// A blob or manifest over a size bound.
    #[error("image {image}: {what}: {size} bytes is over the {limit}-byte bound")]
    TooLarge {
        /// The image.
        image: String,
        /// What (a layer or manifest, with its digest).
        what: String,
        /// Its size.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// A tar entry that is refused.
    #[error("image {image}: layer {layer} ({digest}): entry {entry}: {problem}")]
    Entry {
        /// The image.
        image: String,
        /// Layer index, from 0.
        layer: usize,
        /// Layer digest.
        digest: String,
        /// The entry path as in the tar.
        entry: String,
        /// Why.
        problem: EntryProblem,
    },
    /// A layer that is not a readable tar stream.
    #[error("image {image}: layer {layer} ({digest}): {message}")]
    Layer {
        /// The image.
        image: String,
        /// Layer index, from 0.
        layer: usize,
        /// Layer digest.
        digest: String,
        /// The tar, gzip or I/O error.
        message: String,
    },
    /// An image without `release-manifests/`.
    #[error(
        "image {image}: no release-manifests/ in the image; it is not a release image\nhint: a release image holds /release-manifests (and optionally /manifests)"
    )]
    NoReleaseManifests {
        /// The image.
        image: String,
    },
    /// A local layout or archive that is malformed.
    #[error("image {image}: {path}: {reason}")]
    Local {
        /// The image.
        image: String,
        /// The file inside the layout or archive.
        path: String,
        /// Why.
        reason: String,
    },
    /// Reading or writing the cache.
    #[error("image cache {}: {source}", path.display())]
    Cache {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}
