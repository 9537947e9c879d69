//! A whole payload directory through `minicvo::load`: the input is split at NUL bytes into
//! `release-metadata`, `image-references`, a templated `manifests/` file and a
//! `release-manifests/` file, written to a temporary directory. Exercises what the per-file
//! target does not: templates with image references, the version check between the metadata
//! files, and placeholder substitution. No input may panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use minicvo::{LoadOptions, load};

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("manifests")).unwrap();
        std::fs::create_dir_all(d.path().join("release-manifests")).unwrap();
        d
    })
}

const FILES: [&str; 4] = [
    "release-manifests/release-metadata",
    "release-manifests/image-references",
    "manifests/0000_00_cluster-version-operator_00_x.yaml",
    "release-manifests/0000_10_fuzz_00_x.yaml",
];

fuzz_target!(|data: &[u8]| {
    let root = dir().path();
    let mut parts = data.splitn(FILES.len(), |&b| b == 0);
    for file in FILES {
        let path = root.join(file);
        match parts.next() {
            Some(bytes) => std::fs::write(&path, bytes).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    for substitute_placeholder in [false, true] {
        let options = LoadOptions {
            release_image: "quay.io/fuzz/release@sha256:0".into(),
            substitute_placeholder,
            ..LoadOptions::default()
        };
        let _ = load(root, &options);
    }
});
