//! OCI image layouts written by hand: layers from explicit tar entries (also ones `tar`
//! builders refuse, such as `..` paths), images, indexes and `index.json`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// `sha256:<hex>`.
pub fn digest(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// A layer tar under construction.
#[derive(Default)]
pub struct Layer {
    builder: Option<tar::Builder<Vec<u8>>>,
}

impl Layer {
    /// An empty layer.
    pub fn new() -> Self {
        Self {
            builder: Some(tar::Builder::new(Vec::new())),
        }
    }

    fn header(path: &str, kind: tar::EntryType, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        // Written byte for byte: the tar crate would refuse `..` and absolute paths. Longer
        // names go through the builder's GNU long-name entries (see `push`).
        if path.len() <= 100 {
            let name = &mut h.as_old_mut().name;
            name.fill(0);
            name[..path.len()].copy_from_slice(path.as_bytes());
        }
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(if kind == tar::EntryType::Directory {
            0o755
        } else {
            0o644
        });
        h.set_mtime(0);
        h
    }

    fn push(&mut self, path: &str, mut h: tar::Header, data: &[u8]) -> &mut Self {
        let builder = self.builder.as_mut().unwrap();
        if path.len() <= 100 {
            h.set_cksum();
            builder.append(&h, data).unwrap();
        } else {
            builder.append_data(&mut h, path, data).unwrap();
        }
        self
    }

    /// A regular file.
    pub fn file(&mut self, path: &str, data: &[u8]) -> &mut Self {
        let h = Self::header(path, tar::EntryType::Regular, data.len() as u64);
        self.push(path, h, data)
    }

    /// A directory.
    pub fn dir(&mut self, path: &str) -> &mut Self {
        let h = Self::header(path, tar::EntryType::Directory, 0);
        self.push(path, h, &[])
    }

    /// A symbolic or hard link.
    pub fn link(&mut self, path: &str, target: &str, hard: bool) -> &mut Self {
        let kind = if hard {
            tar::EntryType::Link
        } else {
            tar::EntryType::Symlink
        };
        let mut h = Self::header(path, kind, 0);
        h.set_link_name(target).unwrap();
        self.push(path, h, &[])
    }

    /// A special file (character device, FIFO).
    pub fn special(&mut self, path: &str, kind: tar::EntryType) -> &mut Self {
        let h = Self::header(path, kind, 0);
        self.push(path, h, &[])
    }

    /// Every file of `dir` (flat) under `prefix/`.
    pub fn tree(&mut self, prefix: &str, dir: &Path) -> &mut Self {
        self.dir(&format!("{prefix}/"));
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        names.sort();
        for p in names {
            let data = std::fs::read(&p).unwrap();
            let name = format!("{prefix}/{}", p.file_name().unwrap().to_string_lossy());
            self.file(&name, &data);
        }
        self
    }

    /// The tar bytes.
    pub fn tar(&mut self) -> Vec<u8> {
        self.builder.take().unwrap().into_inner().unwrap()
    }

    /// The gzip-compressed tar bytes.
    pub fn tar_gz(&mut self) -> Vec<u8> {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&self.tar()).unwrap();
        gz.finish().unwrap()
    }
}

/// An OCI image layout directory being written.
pub struct Layout {
    /// The layout directory.
    pub dir: PathBuf,
    entries: Vec<Value>,
}

impl Layout {
    /// A new layout in `dir` (created).
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        Self {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
        }
    }

    /// Writes a blob; returns its descriptor.
    pub fn blob(&self, media_type: &str, bytes: &[u8]) -> Value {
        let d = digest(bytes);
        std::fs::write(self.blob_path(&d), bytes).unwrap();
        json!({"mediaType": media_type, "digest": d, "size": bytes.len()})
    }

    /// The file of a blob.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        self.dir
            .join("blobs/sha256")
            .join(digest.strip_prefix("sha256:").unwrap())
    }

    /// An image of gzip layers for `platform` (`os/arch`); returns the manifest descriptor.
    pub fn image(&self, layers: &[Vec<u8>], platform: &str) -> Value {
        let descs: Vec<Value> = layers
            .iter()
            .map(|l| self.blob("application/vnd.oci.image.layer.v1.tar+gzip", l))
            .collect();
        self.image_with(descs, platform)
    }

    /// An image of the given layer descriptors.
    pub fn image_with(&self, layers: Vec<Value>, platform: &str) -> Value {
        let (os, arch) = platform.split_once('/').unwrap();
        // The digests of the uncompressed layers, as a real image config lists them (what
        // `crane pull --format=legacy` and docker archives are checked against).
        let diff_ids: Vec<String> = layers
            .iter()
            .map(|l| {
                let blob = std::fs::read(self.blob_path(l["digest"].as_str().unwrap()))
                    .unwrap_or_default();
                if blob.starts_with(&[0x1f, 0x8b]) {
                    let mut raw = Vec::new();
                    std::io::Read::read_to_end(
                        &mut flate2::read::GzDecoder::new(&blob[..]),
                        &mut raw,
                    )
                    .map_or_else(|_| digest(&blob), |_| digest(&raw))
                } else {
                    digest(&blob)
                }
            })
            .collect();
        let config = json!({"architecture": arch, "os": os, "rootfs": {"type": "layers", "diff_ids": diff_ids}});
        let config = self.blob(
            "application/vnd.oci.image.config.v1+json",
            config.to_string().as_bytes(),
        );
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config,
            "layers": layers,
        });
        let mut d = self.blob(
            "application/vnd.oci.image.manifest.v1+json",
            manifest.to_string().as_bytes(),
        );
        d["platform"] = json!({"os": os, "architecture": arch});
        d
    }

    /// Adds a descriptor to `index.json`, optionally tagged.
    pub fn add(&mut self, mut desc: Value, tag: Option<&str>) -> &mut Self {
        if let Some(t) = tag {
            desc["annotations"] = json!({"org.opencontainers.image.ref.name": t});
        }
        self.entries.push(desc);
        self.write_index();
        self
    }

    fn write_index(&self) {
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": self.entries,
        });
        std::fs::write(self.dir.join("index.json"), index.to_string()).unwrap();
    }

    /// `oci:DIR`.
    pub fn reference(&self) -> String {
        format!("oci:{}", self.dir.display())
    }
}
