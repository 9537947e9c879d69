//! Streaming extraction of the payload directories out of image layers, bottom layer first,
//! with whiteouts honoured, every entry checked and every blob's size and digest verified.

use std::collections::HashSet;
use std::fs;
use std::io::{self, BufRead as _, BufReader, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::manifest::{Descriptor, hex};
use super::{EntryProblem, ImageError};

/// The top-level directories a release image contributes to the payload.
pub const PAYLOAD_DIRS: &[&str] = &["release-manifests", "manifests"];

/// Size bounds for untrusted images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest manifest or index, in bytes.
    pub manifest_bytes: u64,
    /// Largest layer blob (compressed), in bytes.
    pub layer_bytes: u64,
    /// Largest file of the payload (the loader's own bound).
    pub entry_bytes: u64,
    /// Largest payload, all files together.
    pub payload_bytes: u64,
    /// Most payload entries (files, directories, links).
    pub payload_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            manifest_bytes: 4 << 20,
            layer_bytes: 8 << 30,
            entry_bytes: 16 << 20,
            payload_bytes: 1 << 30,
            payload_entries: 200_000,
        }
    }
}

/// Hashes and counts what passes through; reads at most `limit + 1` bytes.
struct Verifying<R> {
    inner: io::Take<R>,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> Read for Verifying<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Extracts layers into `root` (a staging directory inside the cache).
pub struct Extractor {
    root: PathBuf,
    image: String,
    limits: Limits,
    bytes: u64,
    entries: u64,
}

struct Ctx<'a> {
    layer: usize,
    digest: &'a str,
}

impl Extractor {
    /// An extractor writing below `root`, which must exist.
    #[must_use]
    pub fn new(root: PathBuf, image: &str, limits: Limits) -> Self {
        Self {
            root,
            image: image.to_string(),
            limits,
            bytes: 0,
            entries: 0,
        }
    }

    /// Extracts layer `index` described by `desc` from `blob` (the raw blob bytes).
    ///
    /// # Errors
    /// Size or digest mismatch, a refused entry, a broken tar or gzip stream, or a write
    /// error in the staging directory.
    pub fn layer(
        &mut self,
        index: usize,
        desc: &Descriptor,
        blob: impl Read,
    ) -> Result<(), ImageError> {
        if desc.size > self.limits.layer_bytes {
            return Err(ImageError::TooLarge {
                image: self.image.clone(),
                what: format!("layer {index} ({})", desc.digest),
                size: desc.size,
                limit: self.limits.layer_bytes,
            });
        }
        let mut verifying = Verifying {
            inner: blob.take(desc.size + 1),
            hasher: Sha256::new(),
            count: 0,
        };
        let ctx = Ctx {
            layer: index,
            digest: &desc.digest,
        };
        let result = self.untar(&ctx, &mut verifying);
        // Drain what the tar reader left, so the digest covers the whole blob.
        let drained = io::copy(&mut verifying, &mut io::sink());
        self.verify(desc, verifying)?;
        result?;
        drained.map_err(|e| self.layer_error(&ctx, &e.to_string()))?;
        Ok(())
    }

    fn verify<R>(&self, desc: &Descriptor, v: Verifying<R>) -> Result<(), ImageError> {
        if v.count != desc.size {
            return Err(ImageError::SizeMismatch {
                image: self.image.clone(),
                digest: desc.digest.clone(),
                expected: desc.size,
                got: v.count,
                truncated: if v.count < desc.size {
                    " (truncated)"
                } else {
                    ""
                },
            });
        }
        let actual = format!("sha256:{}", hex(&v.hasher.finalize()));
        if actual != desc.digest {
            return Err(ImageError::DigestMismatch {
                image: self.image.clone(),
                digest: desc.digest.clone(),
                actual,
            });
        }
        Ok(())
    }

    fn layer_error(&self, ctx: &Ctx<'_>, message: &str) -> ImageError {
        ImageError::Layer {
            image: self.image.clone(),
            layer: ctx.layer,
            digest: ctx.digest.to_string(),
            message: message.to_string(),
        }
    }

    fn entry_error(&self, ctx: &Ctx<'_>, entry: &str, problem: EntryProblem) -> ImageError {
        ImageError::Entry {
            image: self.image.clone(),
            layer: ctx.layer,
            digest: ctx.digest.to_string(),
            entry: entry.to_string(),
            problem,
        }
    }

    fn untar(&mut self, ctx: &Ctx<'_>, blob: &mut impl Read) -> Result<(), ImageError> {
        let mut buffered = BufReader::with_capacity(256 << 10, blob);
        let head = buffered
            .fill_buf()
            .map_err(|e| self.layer_error(ctx, &format!("cannot read: {e}")))?;
        let stream: Box<dyn Read + '_> = match head {
            [0x1f, 0x8b, ..] => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => {
                return Err(self.layer_error(ctx, "zstd-compressed layers are not supported"));
            }
            _ => Box::new(buffered),
        };
        let mut archive = tar::Archive::new(stream);
        let mut written: HashSet<Vec<String>> = HashSet::new();
        let entries = archive
            .entries()
            .map_err(|e| self.layer_error(ctx, &format!("not a tar stream: {e}")))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| self.layer_error(ctx, &format!("broken tar stream: {e}")))?;
            self.entry(ctx, entry, &mut written)?;
        }
        // Read the rest of the (compressed) stream through the decoder.
        io::copy(&mut archive.into_inner(), &mut io::sink())
            .map_err(|e| self.layer_error(ctx, &format!("broken stream after the tar end: {e}")))?;
        Ok(())
    }

    fn entry<R: Read>(
        &mut self,
        ctx: &Ctx<'_>,
        mut entry: tar::Entry<'_, R>,
        written: &mut HashSet<Vec<String>>,
    ) -> Result<(), ImageError> {
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw).into_owned();
        let comps = components(&name).map_err(|p| self.entry_error(ctx, &name, p))?;
        let Some(first) = comps.first() else {
            return Ok(());
        };
        if !PAYLOAD_DIRS.contains(&first.as_str()) {
            return Ok(());
        }
        if std::str::from_utf8(&raw).is_err() {
            return Err(self.entry_error(ctx, &name, EntryProblem::NotUtf8));
        }
        self.entries += 1;
        if self.entries > self.limits.payload_entries {
            return Err(self.entry_error(
                ctx,
                &name,
                EntryProblem::TooManyEntries(self.limits.payload_entries),
            ));
        }
        let (parent, last) = comps.split_at(comps.len() - 1);
        let last = &last[0];
        if let Some(hidden) = last.strip_prefix(".wh.") {
            self.real_dirs(ctx, &name, parent, false)?;
            if hidden == ".wh..opq" {
                self.opaque(parent, written)
                    .map_err(|e| self.cache_error(&self.path(parent), e))?;
            } else {
                let mut target = parent.to_vec();
                target.push(hidden.to_string());
                remove(&self.path(&target))
                    .map_err(|e| self.cache_error(&self.path(&target), e))?;
            }
            return Ok(());
        }
        let kind = entry.header().entry_type();
        let dest = self.path(&comps);
        match kind {
            tar::EntryType::Directory => {
                self.real_dirs(ctx, &name, &comps, true)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.size();
                if size > self.limits.entry_bytes {
                    return Err(self.entry_error(
                        ctx,
                        &name,
                        EntryProblem::TooLarge {
                            size,
                            limit: self.limits.entry_bytes,
                        },
                    ));
                }
                self.bytes += size;
                if self.bytes > self.limits.payload_bytes {
                    return Err(self.entry_error(
                        ctx,
                        &name,
                        EntryProblem::PayloadTooLarge(self.limits.payload_bytes),
                    ));
                }
                self.real_dirs(ctx, &name, parent, true)?;
                remove(&dest).map_err(|e| self.cache_error(&dest, e))?;
                let mut file =
                    fs::File::create_new(&dest).map_err(|e| self.cache_error(&dest, e))?;
                let copied = io::copy(&mut (&mut entry).take(size), &mut file)
                    .map_err(|e| self.layer_error(ctx, &format!("entry {name}: {e}")))?;
                if copied != size {
                    return Err(self.layer_error(ctx, &format!("entry {name}: truncated")));
                }
            }
            tar::EntryType::Symlink => {
                let target = link_name(&entry);
                if !symlink_stays(parent, &target) {
                    return Err(self.entry_error(ctx, &name, EntryProblem::SymlinkLeaves(target)));
                }
                self.real_dirs(ctx, &name, parent, true)?;
                remove(&dest).map_err(|e| self.cache_error(&dest, e))?;
                symlink(&target, &dest).map_err(|e| self.cache_error(&dest, e))?;
            }
            tar::EntryType::Link => {
                let target = link_name(&entry);
                let tcomps = components(&target)
                    .ok()
                    .filter(|c| {
                        c.first()
                            .is_some_and(|f| PAYLOAD_DIRS.contains(&f.as_str()))
                    })
                    .ok_or_else(|| {
                        self.entry_error(ctx, &name, EntryProblem::HardLinkLeaves(target.clone()))
                    })?;
                self.real_dirs(ctx, &name, &tcomps[..tcomps.len() - 1], false)?;
                let source = self.path(&tcomps);
                if !fs::symlink_metadata(&source).is_ok_and(|m| m.is_file()) {
                    return Err(self.entry_error(
                        ctx,
                        &name,
                        EntryProblem::HardLinkMissing(target),
                    ));
                }
                self.real_dirs(ctx, &name, parent, true)?;
                if source != dest {
                    remove(&dest).map_err(|e| self.cache_error(&dest, e))?;
                    fs::copy(&source, &dest).map_err(|e| self.cache_error(&dest, e))?;
                }
            }
            other => {
                let what = match other {
                    tar::EntryType::Char => "a character device",
                    tar::EntryType::Block => "a block device",
                    tar::EntryType::Fifo => "a FIFO",
                    tar::EntryType::GNUSparse => "a sparse file",
                    _ => "an entry of an unknown type",
                };
                return Err(self.entry_error(ctx, &name, EntryProblem::Special(what)));
            }
        }
        written.insert(comps);
        Ok(())
    }

    fn path(&self, comps: &[String]) -> PathBuf {
        comps.iter().fold(self.root.clone(), |p, c| p.join(c))
    }

    fn cache_error(&self, path: &Path, source: io::Error) -> ImageError {
        ImageError::Cache {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Makes sure every prefix of `comps` is a real directory (never a symlink); creates the
    /// missing ones when `create`.
    fn real_dirs(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        comps: &[String],
        create: bool,
    ) -> Result<(), ImageError> {
        let mut p = self.root.clone();
        for c in comps {
            p.push(c);
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(self.entry_error(ctx, name, EntryProblem::ThroughSymlink));
                }
                Ok(_) if create => {
                    fs::remove_file(&p).map_err(|e| self.cache_error(&p, e))?;
                    fs::create_dir(&p).map_err(|e| self.cache_error(&p, e))?;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                    fs::create_dir(&p).map_err(|e| self.cache_error(&p, e))?;
                }
                _ => return Ok(()),
            }
        }
        Ok(())
    }

    /// An opaque whiteout: removes what lower layers put in `dir`.
    fn opaque(&self, dir: &[String], written: &HashSet<Vec<String>>) -> io::Result<()> {
        let path = self.path(dir);
        let Ok(list) = fs::read_dir(&path) else {
            return Ok(());
        };
        for child in list {
            let child = child?;
            let mut comps = dir.to_vec();
            comps.push(child.file_name().to_string_lossy().into_owned());
            let keep = written.iter().any(|w| w.starts_with(&comps));
            if !keep {
                remove(&child.path())?;
            }
        }
        Ok(())
    }
}

fn link_name<R: Read>(entry: &tar::Entry<'_, R>) -> String {
    entry
        .link_name_bytes()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The normal components of a tar path (`./` and empty parts dropped).
fn components(name: &str) -> Result<Vec<String>, EntryProblem> {
    if name.starts_with('/') {
        return Err(EntryProblem::Absolute);
    }
    let mut out = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(EntryProblem::DotDot),
            c => out.push(c.to_string()),
        }
    }
    Ok(out)
}

/// Whether a symlink in `parent` to `target` resolves inside the payload directories.
fn symlink_stays(parent: &[String], target: &str) -> bool {
    if target.starts_with('/') || target.is_empty() {
        return false;
    }
    let mut at: Vec<&str> = parent.iter().map(String::as_str).collect();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return false;
                }
            }
            c => at.push(c),
        }
    }
    at.first().is_some_and(|f| PAYLOAD_DIRS.contains(f))
}

/// Removes a file, link or directory tree; a missing path is fine.
fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(unix)]
fn symlink(target: &str, dest: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, dest)
}

#[cfg(not(unix))]
fn symlink(_target: &str, _dest: &Path) -> io::Result<()> {
    Err(io::Error::other(
        "symlinks in images are only supported on Unix",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_must_resolve_inside_the_payload_dirs() {
        let rm = vec!["release-manifests".to_string()];
        assert!(symlink_stays(&rm, "a.yaml"));
        assert!(symlink_stays(&rm, "../manifests/a.yaml"));
        assert!(!symlink_stays(&rm, "../etc/passwd"));
        assert!(!symlink_stays(&rm, "../../x"));
        assert!(!symlink_stays(&rm, "/etc/passwd"));
    }

    #[test]
    fn components_refuse_dotdot_and_absolute() {
        assert_eq!(
            components("./release-manifests//a").unwrap(),
            ["release-manifests", "a"]
        );
        assert_eq!(components("a/../b"), Err(EntryProblem::DotDot));
        assert_eq!(components("/etc"), Err(EntryProblem::Absolute));
    }
}
