//! Replays the committed cargo-fuzz corpus (`fuzz/corpus/`) on the stable toolchain, so CI
//! runs every input the fuzzer kept (and any crash added there as a regression) through the
//! same code as the fuzz targets: no input may panic.

use std::path::{Path, PathBuf};

use minicvo::payload::{metadata, parse_manifest_text, template};
use minicvo::{Filters, LoadOptions, Mode, Payload, output, plan};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// What `fuzz/fuzz_targets/parse_manifest.rs` does with one input.
fn parse_manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = metadata::parse_release_metadata("release-metadata", text);
    let _ = metadata::parse_image_references("image-references", text);
    let _ = template::render(text, &template::TemplateData::default());
    let name = if text.trim_start().starts_with('{') {
        "0000_10_fuzz_00_x.json"
    } else {
        "0000_10_fuzz_00_x.yaml"
    };
    let Ok(manifests) = parse_manifest_text(name, text) else {
        return;
    };
    let filters = Filters::default();
    for m in &manifests {
        let _ = filters.include_at_load(m, Some(4));
    }
    for (mode, attempt) in [
        (Mode::Updating, 0),
        (Mode::Initializing, 0),
        (Mode::Reconciling, 13),
    ] {
        let payload = Payload {
            root: "fuzz".into(),
            metadata: None,
            image_references: None,
            manifests: manifests.clone(),
            excluded: Vec::new(),
            warnings: Vec::new(),
            release_version: None,
            detail: minicvo::ObjectDetail::Whole,
        };
        let plan = plan::from_payload(payload, &filters, mode, attempt);
        let _ = output::text::plan(&plan);
        let _ = output::json::plan(&plan);
        let _ = output::dot::plan(&plan);
    }
    let refs: Vec<&minicvo::Manifest> = manifests.iter().collect();
    let _ = output::render::yaml(&refs);
    let _ = output::render::list(&refs);
}

#[test]
fn parse_manifest_corpus_replays_without_panic() {
    let files = corpus("parse_manifest");
    assert!(files.len() > 100, "{} inputs", files.len());
    for (path, data) in &files {
        let r = std::panic::catch_unwind(|| parse_manifest(data));
        assert!(r.is_ok(), "{} panics", path.display());
    }
}

#[test]
fn load_payload_corpus_replays_without_panic() {
    const FILES: [&str; 4] = [
        "release-manifests/release-metadata",
        "release-manifests/image-references",
        "manifests/0000_00_cluster-version-operator_00_x.yaml",
        "release-manifests/0000_10_fuzz_00_x.yaml",
    ];
    let files = corpus("load_payload");
    assert!(files.len() > 50, "{} inputs", files.len());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::create_dir_all(dir.path().join("release-manifests")).unwrap();
    for (path, data) in &files {
        let mut parts = data.splitn(FILES.len(), |&b| b == 0);
        for file in FILES {
            let target = dir.path().join(file);
            match parts.next() {
                Some(bytes) => std::fs::write(&target, bytes).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&target);
                }
            }
        }
        for substitute_placeholder in [false, true] {
            let options = LoadOptions {
                release_image: "quay.io/fuzz/release@sha256:0".into(),
                substitute_placeholder,
                ..LoadOptions::default()
            };
            let r = std::panic::catch_unwind(|| minicvo::load(dir.path(), &options));
            assert!(r.is_ok(), "{} panics", path.display());
        }
    }
}
