//! Reading one payload file from disk, safely: only regular files (a FIFO would block forever,
//! `/dev/zero` never ends), at most [`MAX_FILE_BYTES`], and UTF-8 only.

use std::fs::File;
use std::io::{self, Read as _};
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use super::LoadError;

/// Largest file the loader reads. The largest file of a real OpenShift payload is under 1 MiB
/// and the kube-apiserver accepts at most 3 MiB per object.
pub(crate) const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// What kind of directory entry `t` is, for errors about non-regular files.
fn describe(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

fn io_error(shown: &str, source: io::Error) -> LoadError {
    LoadError::Io {
        path: PathBuf::from(shown),
        source,
    }
}

/// Reads `path` as UTF-8 text; `shown` is the path used in errors (relative to the payload
/// root).
///
/// # Errors
/// [`LoadError::Io`] when the file cannot be opened or read, is not a regular file, or is
/// larger than [`MAX_FILE_BYTES`]; [`LoadError::NotUtf8`] when it is not UTF-8.
pub(crate) fn read_text(path: &Path, shown: &str) -> Result<String, LoadError> {
    let meta = checked_metadata(path, shown)?;
    let mut bytes = Vec::new();
    read_bytes(path, shown, &meta, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| LoadError::NotUtf8 {
        file: shown.to_string(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// [`read_text`] of a file whose [`checked_metadata`] is `meta`, into `buf`, which is cleared
/// first and can be reused from file to file (no new allocation and page faults for each file).
///
/// # Errors
/// As [`read_text`].
pub(crate) fn read_text_into<'b>(
    path: &Path,
    shown: &str,
    meta: &std::fs::Metadata,
    buf: &'b mut Vec<u8>,
) -> Result<&'b str, LoadError> {
    read_bytes(path, shown, meta, buf)?;
    std::str::from_utf8(buf).map_err(|e| LoadError::NotUtf8 {
        file: shown.to_string(),
        offset: e.valid_up_to(),
    })
}

/// The metadata of `path` (following links), checked before any read: a regular file (opening
/// a FIFO for reading blocks until a writer comes) of at most [`MAX_FILE_BYTES`].
///
/// # Errors
/// [`LoadError::Io`] when there is no such file, or it is not a regular file or too large.
pub(crate) fn checked_metadata(path: &Path, shown: &str) -> Result<std::fs::Metadata, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(shown, e))?;
    if !meta.file_type().is_file() {
        let what = describe(meta.file_type());
        return Err(io_error(
            shown,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a regular file ({what})"),
            ),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(shown));
    }
    Ok(meta)
}

fn too_large(shown: &str) -> LoadError {
    io_error(
        shown,
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "file is larger than {} MiB, the most the loader reads",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        ),
    )
}

/// Reads the bytes of `path`, whose [`checked_metadata`] is `meta`, into `bytes` (cleared
/// first); a file that grew past [`MAX_FILE_BYTES`] since is refused all the same.
fn read_bytes(
    path: &Path,
    shown: &str,
    meta: &std::fs::Metadata,
    bytes: &mut Vec<u8>,
) -> Result<(), LoadError> {
    bytes.clear();
    let file = File::open(path).map_err(|e| io_error(shown, e))?;
    bytes.reserve(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(bytes)
        .map_err(|e| io_error(shown, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(shown));
    }
    Ok(())
}

/// Whether a directory entry exists at `path`, without following a final symbolic link: a
/// dangling `release-metadata` link exists (and fails to read) rather than being absent.
pub(crate) fn entry_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_is_rejected_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.yaml");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let e = read_text(&fifo, "release-manifests/x.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "release-manifests/x.yaml: cannot read: not a regular file (a FIFO)"
        );
    }

    #[test]
    fn endless_device_is_rejected() {
        let e = read_text(Path::new("/dev/zero"), "x.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.yaml: cannot read: not a regular file (a character device)"
        );
    }

    #[test]
    fn file_over_the_limit_is_rejected_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        let f = File::create(&path).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_text(&path, "big.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "big.yaml: cannot read: file is larger than 16 MiB, the most the loader reads"
        );
    }

    #[test]
    fn dangling_link_exists() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("release-metadata");
        std::os::unix::fs::symlink("/nonexistent/x", &link).unwrap();
        assert!(entry_exists(&link));
        assert!(!link.exists());
    }
}
