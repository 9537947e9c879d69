//! Untrusted release images: each broken image is refused with an error naming the image and
//! the entry, nothing is written outside the cache, and no cache entry is left behind.

use crate::support::image as image_support;

use image_support::layout::{Layer, Layout, digest};
use minicvo::image::{self, FetchOptions, Limits, Source};
use serde_json::json;

const GOOD: &[u8] =
    b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n";

struct Case {
    root: tempfile::TempDir,
    layout: Layout,
}

impl Case {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(&root.path().join("layout"));
        Self { root, layout }
    }

    /// An image of these layers (gzip).
    fn with_layers(mut self, layers: &mut [Layer]) -> Self {
        let tars: Vec<Vec<u8>> = layers.iter_mut().map(Layer::tar_gz).collect();
        let desc = self.layout.image(&tars, "linux/amd64");
        self.layout.add(desc, None);
        self
    }

    fn options(&self, limits: Limits) -> FetchOptions {
        let mut o = FetchOptions {
            limits,
            ..FetchOptions::default()
        };
        o.cache.dir = self.root.path().join("cache");
        o
    }

    /// Fetches with `limits`; returns the error text, after checking that the cache holds
    /// nothing and that nothing appeared next to the layout.
    fn error_with(&self, limits: Limits) -> String {
        let source = Source::resolve(&self.layout.reference()).unwrap();
        let err = image::fetch_blocking(&source, &self.options(limits))
            .expect_err("the image must be refused")
            .to_string();
        let cache = self.root.path().join("cache");
        if cache.exists() {
            let left: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
            assert!(left.is_empty(), "cache entries left behind: {left:?}");
        }
        let mut names: Vec<String> = std::fs::read_dir(self.root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.retain(|n| n != "cache");
        assert_eq!(names, ["layout"], "something was written outside the cache");
        err
    }

    fn error(&self) -> String {
        self.error_with(Limits::default())
    }

    fn name(&self) -> String {
        self.layout.reference()
    }

    fn layer0(&self) -> String {
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.layout.dir.join("index.json")).unwrap())
                .unwrap();
        let m = index["manifests"][0]["digest"].as_str().unwrap();
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.layout.blob_path(m)).unwrap()).unwrap();
        manifest["layers"][0]["digest"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

fn one(build: impl FnOnce(&mut Layer)) -> Case {
    let mut l = Layer::new();
    l.dir("release-manifests/")
        .file("release-manifests/a.yaml", GOOD);
    build(&mut l);
    Case::new().with_layers(&mut [l])
}

fn assert_entry(case: &Case, entry: &str, problem: &str) {
    let err = case.error();
    let want = format!(
        "image {}: layer 0 ({}): entry {entry}: {problem}",
        case.name(),
        case.layer0()
    );
    assert_eq!(err, want);
}

#[test]
fn dotdot_entry_is_refused() {
    let c = one(|l| {
        l.file("release-manifests/../../escaped.yaml", GOOD);
    });
    assert_entry(
        &c,
        "release-manifests/../../escaped.yaml",
        "path has a `..` component",
    );
}

#[test]
fn absolute_entry_is_refused() {
    let c = one(|l| {
        l.file("/release-manifests/b.yaml", GOOD);
    });
    assert_entry(&c, "/release-manifests/b.yaml", "absolute path");
}

#[test]
fn symlink_leaving_the_payload_is_refused() {
    let c = one(|l| {
        l.link(
            "release-manifests/passwd.yaml",
            "../../../etc/passwd",
            false,
        );
    });
    assert_entry(
        &c,
        "release-manifests/passwd.yaml",
        "symlink to \"../../../etc/passwd\" leaves the payload",
    );
}

#[test]
fn absolute_symlink_is_refused() {
    let c = one(|l| {
        l.link("release-manifests/passwd.yaml", "/etc/passwd", false);
    });
    assert_entry(
        &c,
        "release-manifests/passwd.yaml",
        "symlink to \"/etc/passwd\" leaves the payload",
    );
}

#[test]
fn hard_link_leaving_the_payload_is_refused() {
    let c = one(|l| {
        l.file("etc/passwd", b"root:x:0:0\n").link(
            "release-manifests/passwd.yaml",
            "etc/passwd",
            true,
        );
    });
    assert_entry(
        &c,
        "release-manifests/passwd.yaml",
        "hard link to \"etc/passwd\" leaves the payload",
    );
}

#[test]
fn write_through_a_symlink_is_refused() {
    let c = one(|l| {
        l.dir("manifests/")
            .link("release-manifests/d", "../manifests", false)
            .file("release-manifests/d/b.yaml", GOOD);
    });
    assert_entry(
        &c,
        "release-manifests/d/b.yaml",
        "path goes through a symlink",
    );
}

#[test]
fn device_file_is_refused() {
    let c = one(|l| {
        l.special("release-manifests/null", tar::EntryType::Char);
    });
    assert_entry(
        &c,
        "release-manifests/null",
        "a character device is not allowed in a payload (only files, directories and links)",
    );
}

#[test]
fn fifo_is_refused() {
    let c = one(|l| {
        l.special("manifests/pipe.yaml", tar::EntryType::Fifo);
    });
    assert_entry(
        &c,
        "manifests/pipe.yaml",
        "a FIFO is not allowed in a payload (only files, directories and links)",
    );
}

#[test]
fn entry_over_the_size_bound_is_refused() {
    let c = one(|l| {
        l.file("release-manifests/big.yaml", &vec![b'#'; 5000]);
    });
    let err = c.error_with(Limits {
        entry_bytes: 4096,
        ..Limits::default()
    });
    assert_eq!(
        err,
        format!(
            "image {}: layer 0 ({}): entry release-manifests/big.yaml: file of 5000 bytes is over the 4096-byte bound",
            c.name(),
            c.layer0()
        )
    );
}

#[test]
fn payload_over_the_size_bound_is_refused() {
    let c = one(|l| {
        for i in 0..10 {
            l.file(&format!("release-manifests/f{i}.yaml"), &vec![b'#'; 1000]);
        }
    });
    let err = c.error_with(Limits {
        payload_bytes: 4000,
        ..Limits::default()
    });
    assert!(
        err.ends_with("entry release-manifests/f3.yaml: the payload grew over the 4000-byte bound"),
        "{err}"
    );
    assert!(
        err.starts_with(&format!("image {}: layer 0", c.name())),
        "{err}"
    );
}

#[test]
fn layer_over_the_size_bound_is_refused() {
    let c = one(|_| {});
    let err = c.error_with(Limits {
        layer_bytes: 64,
        ..Limits::default()
    });
    assert!(
        err.starts_with(&format!("image {}: layer 0 ({}): ", c.name(), c.layer0()))
            && err.ends_with("bytes is over the 64-byte bound"),
        "{err}"
    );
}

#[test]
fn layer_digest_mismatch_is_refused() {
    let c = one(|_| {});
    let layer = c.layer0();
    let path = c.layout.blob_path(&layer);
    // Same size, other content: an uncompressed tar of the same length.
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    let mut other = Layer::new().tar();
    other.resize(size, 0);
    std::fs::write(&path, &other).unwrap();
    assert_eq!(
        c.error(),
        format!(
            "image {}: blob {layer}: digest mismatch (content hashes to {})",
            c.name(),
            digest(&other)
        )
    );
}

#[test]
fn truncated_layer_is_refused() {
    let c = one(|l| {
        l.file("release-manifests/b.yaml", &vec![b'#'; 20_000]);
    });
    let layer = c.layer0();
    let path = c.layout.blob_path(&layer);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(
        c.error(),
        format!(
            "image {}: blob {layer}: {} bytes, the manifest says {} (truncated)",
            c.name(),
            bytes.len() / 2,
            bytes.len()
        )
    );
}

#[test]
fn manifest_that_is_not_an_image_is_refused() {
    let mut c = Case::new();
    let config = c
        .layout
        .blob("application/vnd.cncf.helm.config.v1+json", b"{}");
    let chart = c.layout.blob(
        "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
        b"chart",
    );
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config,
        "layers": [chart],
    });
    let desc = c.layout.blob(
        "application/vnd.oci.image.manifest.v1+json",
        manifest.to_string().as_bytes(),
    );
    let d = desc["digest"].as_str().unwrap().to_string();
    c.layout.add(desc, None);
    assert_eq!(
        c.error(),
        format!(
            "image {}: manifest {d} is not an image: config media type application/vnd.cncf.helm.config.v1+json",
            c.name()
        )
    );
}

#[test]
fn manifest_digest_mismatch_is_refused() {
    let c = one(|_| {});
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.layout.dir.join("index.json")).unwrap()).unwrap();
    let m = index["manifests"][0]["digest"].as_str().unwrap();
    let path = c.layout.blob_path(m);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"schemaVersion\":2", "\"schemaVersion\": 2");
    std::fs::write(&path, &text).unwrap();
    let err = c.error();
    assert!(
        err.starts_with(&format!("image {}: blob {m}: digest mismatch", c.name())),
        "{err}"
    );
}

#[test]
fn image_without_release_manifests_is_refused() {
    let mut l = Layer::new();
    l.file("etc/os-release", b"ID=rhel\n")
        .file("manifests/a.yaml", GOOD);
    let c = Case::new().with_layers(&mut [l]);
    assert_eq!(
        c.error(),
        format!(
            "image {}: no release-manifests/ in the image; it is not a release image\nhint: a release image holds /release-manifests (and optionally /manifests)",
            c.name()
        )
    );
}

#[test]
fn zstd_layer_is_refused() {
    let mut c = Case::new();
    let layer = c.layout.blob(
        "application/vnd.oci.image.layer.v1.tar+zstd",
        b"\x28\xb5\x2f\xfd",
    );
    let d = layer["digest"].as_str().unwrap().to_string();
    let desc = c.layout.image_with(vec![layer], "linux/amd64");
    let m = desc["digest"].as_str().unwrap().to_string();
    c.layout.add(desc, None);
    assert_eq!(
        c.error(),
        format!(
            "image {}: manifest {m} is not an image: layer 0 ({d}) is zstd-compressed, which minicvo does not read",
            c.name()
        )
    );
}

#[test]
fn good_layout_extracts_into_the_cache_and_hits_it() {
    let c = one(|l| {
        l.link("release-manifests/b.yaml", "a.yaml", false)
            .dir("manifests/")
            .link("manifests/c.yaml", "release-manifests/a.yaml", true);
    });
    let source = Source::resolve(&c.layout.reference()).unwrap();
    let options = c.options(Limits::default());
    let first = image::fetch_blocking(&source, &options).unwrap();
    assert!(!first.info.cached);
    assert!(first.dir.starts_with(c.root.path().join("cache")));
    assert_eq!(
        std::fs::read(first.dir.join("release-manifests/b.yaml")).unwrap(),
        GOOD
    );
    assert_eq!(
        std::fs::read(first.dir.join("manifests/c.yaml")).unwrap(),
        GOOD
    );
    let second = image::fetch_blocking(&source, &options).unwrap();
    assert!(second.info.cached);
    assert_eq!(second.dir, first.dir);
    assert_eq!(second.info.digest, first.info.digest);
}
