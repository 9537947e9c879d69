//! Errors that reject a whole payload.

use std::path::PathBuf;

/// Why a payload could not be loaded. Every variant names the file; document errors also name
/// the document index (from 0) and the line (from 1).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The payload path is not a directory.
    #[error(
        "{path}: not a payload directory\nhint: pass a directory holding release-manifests/ (and optionally manifests/) or a directory of manifests"
    )]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A file or directory could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid UTF-8.
    #[error("{file}: not valid UTF-8 text (byte {offset})")]
    NotUtf8 {
        /// File relative to the payload root.
        file: String,
        /// First invalid byte.
        offset: usize,
    },
    /// A document is not valid YAML or JSON.
    #[error("{file}: document {document} (line {line}): {message}")]
    Syntax {
        /// File relative to the payload root.
        file: String,
        /// Document index, from 0.
        document: usize,
        /// Line, from 1.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A document is not a mapping, or lacks `apiVersion`, `kind` or `metadata.name`.
    #[error("{file}: document {document} (line {line}): {message}")]
    Invalid {
        /// File relative to the payload root.
        file: String,
        /// Document index, from 0.
        document: usize,
        /// Line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The same object appears twice in one file.
    #[error(
        "{file}: document {document} (line {line}): duplicate object {object}, first defined in document {first_document} (line {first_line})"
    )]
    Duplicate {
        /// File relative to the payload root.
        file: String,
        /// Index of the second occurrence.
        document: usize,
        /// Line of the second occurrence.
        line: usize,
        /// Index of the first occurrence.
        first_document: usize,
        /// Line of the first occurrence.
        first_line: usize,
        /// The object, `Kind.group namespace/name`.
        object: String,
    },
    /// `release-metadata` is malformed.
    #[error("{file}: invalid release metadata: {message}")]
    Metadata {
        /// File relative to the payload root.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// `image-references` is malformed.
    #[error("{file}: invalid image references: {message}")]
    ImageReferences {
        /// File relative to the payload root.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// `image-references` names another version than `release-metadata`.
    #[error(
        "{file}: version from image-references ({image_references}) differs from release-metadata ({release_metadata})"
    )]
    VersionMismatch {
        /// The image-references file.
        file: String,
        /// `metadata.name` of the ImageStream.
        image_references: String,
        /// `version` of release-metadata.
        release_metadata: String,
    },
}

impl LoadError {
    /// The file (relative to the payload root) the error is about, when it is about one.
    #[must_use]
    pub fn file(&self) -> Option<&str> {
        match self {
            LoadError::NotADirectory { .. } | LoadError::Io { .. } => None,
            LoadError::NotUtf8 { file, .. }
            | LoadError::Syntax { file, .. }
            | LoadError::Invalid { file, .. }
            | LoadError::Duplicate { file, .. }
            | LoadError::Metadata { file, .. }
            | LoadError::ImageReferences { file, .. }
            | LoadError::VersionMismatch { file, .. } => Some(file),
        }
    }
}
