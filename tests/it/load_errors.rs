//! Bad input: each case gets one clear error naming the file, the document and the line, and
//! the payload is rejected as a whole.

use std::fs;
use std::path::Path;

use minicvo::{LoadError, LoadOptions, load};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: x\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n";

fn payload(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let rm = dir.path().join("release-manifests");
    fs::create_dir_all(&rm).unwrap();
    for (name, text) in files {
        let path = if name.starts_with("manifests/") {
            fs::create_dir_all(dir.path().join("manifests")).unwrap();
            dir.path().join(name)
        } else {
            rm.join(name)
        };
        fs::write(path, text).unwrap();
    }
    dir
}

/// The load error, which a headers-only load (what `plan` uses) must give as well.
fn error(files: &[(&str, &str)]) -> String {
    let dir = payload(files);
    let whole = load(dir.path(), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    let headers = LoadOptions {
        detail: minicvo::ObjectDetail::Headers,
        ..LoadOptions::default()
    };
    let cut = load(dir.path(), &headers).unwrap_err().to_string();
    assert_eq!(whole, cut, "a headers-only load fails differently");
    whole
}

const META: &str = r#"{"kind":"cincinnati-metadata-v0","version":"4.14.0"}"#;

#[test]
fn malformed_yaml() {
    let e = error(&[
        ("0000_10_a_ok.yaml", CM),
        (
            "0000_20_b_bad.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [x\n",
        ),
    ]);
    assert!(
        e.starts_with("release-manifests/0000_20_b_bad.yaml: document 0 (line "),
        "{e}"
    );
    assert!(e.contains("invalid YAML"), "{e}");
}

#[test]
fn missing_kind() {
    let e = error(&[(
        "0000_10_a_x.yaml",
        &format!("{CM}---\napiVersion: v1\nmetadata:\n  name: b\n"),
    )]);
    assert_eq!(
        e,
        "release-manifests/0000_10_a_x.yaml: document 1 (line 9): object has no kind: must contain kubernetes required fields apiVersion, kind and metadata.name"
    );
}

#[test]
fn missing_name() {
    let e = error(&[(
        "0000_10_a_x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: x\n",
    )]);
    assert_eq!(
        e,
        "release-manifests/0000_10_a_x.yaml: document 0 (line 1): object has no metadata.name: must contain kubernetes required fields apiVersion, kind and metadata.name"
    );
}

#[test]
fn duplicate_object_in_one_file() {
    let e = error(&[("0000_10_a_x.yaml", &format!("{CM}---\n{CM}"))]);
    assert_eq!(
        e,
        "release-manifests/0000_10_a_x.yaml: document 1 (line 9): duplicate object ConfigMap x/a, first defined in document 0 (line 1)"
    );
}

#[test]
fn same_object_in_two_files_is_allowed_like_the_cvo() {
    let dir = payload(&[("0000_10_a_x.yaml", CM), ("0000_10_a_y.yaml", CM)]);
    assert_eq!(
        load(dir.path(), &LoadOptions::default())
            .unwrap()
            .manifests
            .len(),
        2
    );
}

#[test]
fn unreadable_file() {
    let dir = payload(&[("0000_10_a_ok.yaml", CM)]);
    std::os::unix::fs::symlink(
        "/nonexistent/target",
        dir.path().join("release-manifests/0000_20_b_gone.yaml"),
    )
    .unwrap();
    let e = load(dir.path(), &LoadOptions::default()).unwrap_err();
    assert!(matches!(e, LoadError::Io { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("release-manifests/0000_20_b_gone.yaml: cannot read: "),
        "{e}"
    );
}

#[test]
fn bad_release_metadata() {
    let e = error(&[
        ("release-metadata", r#"{"kind":"cincinnati-metadata-v0"}"#),
        ("0000_10_a_x.yaml", CM),
    ]);
    assert_eq!(
        e,
        "release-manifests/release-metadata: invalid release metadata: missing version"
    );
    let e = error(&[("release-metadata", "not json"), ("0000_10_a_x.yaml", CM)]);
    assert_eq!(
        e,
        "release-manifests/release-metadata: invalid release metadata: not valid JSON at line 1: expected ident (column 2)"
    );
}

#[test]
fn version_mismatch_with_image_references() {
    let refs = "kind: ImageStream\napiVersion: image.openshift.io/v1\nmetadata:\n  name: 4.13.0\nspec:\n  tags: []\n";
    let e = error(&[
        ("release-metadata", META),
        ("image-references", refs),
        ("0000_10_a_x.yaml", CM),
    ]);
    assert_eq!(
        e,
        "release-manifests/image-references: version from image-references (4.13.0) differs from release-metadata (4.14.0)"
    );
}

#[test]
fn not_a_directory() {
    let e = load(Path::new("/nonexistent/payload"), &LoadOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/payload: not a payload directory"),
        "{e}"
    );
}

#[test]
fn missing_release_metadata_is_a_warning_not_an_error() {
    let dir = payload(&[("0000_10_a_x.yaml", CM)]);
    let p = load(dir.path(), &LoadOptions::default()).unwrap();
    assert_eq!(p.version(), None);
    assert_eq!(
        p.warnings,
        vec!["release-manifests/release-metadata not found: the release version is unknown"]
    );
}

#[test]
fn template_with_unknown_field_skips_that_file_only() {
    let templated = format!(
        "{CM}data:\n  image: {{{{.ReleaseImage}}}}\n  profile: {{{{ .ClusterProfile }}}}\n"
    );
    let unknown = CM.replace("name: a", "name: b").to_string()
        + "data:\n  x: '{{index .FutureField \"k\"}}'\n";
    let dir = payload(&[
        ("manifests/0000_00_cvo_a.yaml", &templated),
        ("manifests/0000_00_cvo_b.yaml", &unknown),
        ("0000_10_a_x.yaml", &CM.replace("name: a", "name: c")),
    ]);
    let options = LoadOptions {
        release_image: "quay.io/r:1".into(),
        ..LoadOptions::default()
    };
    let p = load(dir.path(), &options).unwrap();
    let names: Vec<&str> = p.manifests.iter().map(|m| m.id.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "c"],
        "manifests/ first, then release-manifests/, unknown-field file skipped"
    );
    assert_eq!(p.manifests[0].object["data"]["image"], "quay.io/r:1");
    assert_eq!(
        p.manifests[0].object["data"]["profile"],
        "self-managed-high-availability"
    );
    assert_eq!(p.warnings.len(), 2);
    assert!(
        p.warnings[1].starts_with("manifests/0000_00_cvo_b.yaml: skipped: template: manifest:9:"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn release_manifests_are_never_templated() {
    let text = CM.to_string() + "data:\n  x: '{{ .ReleaseImage }}'\n";
    let dir = payload(&[("0000_10_a_x.yaml", &text)]);
    let p = load(dir.path(), &LoadOptions::default()).unwrap();
    assert_eq!(p.manifests[0].object["data"]["x"], "{{ .ReleaseImage }}");
}

#[test]
fn only_yaml_yml_json_files_are_read_in_byte_order_without_recursion() {
    let dir = payload(&[
        ("0000_10_b.yml", &CM.replace("name: a", "name: yml")),
        (
            "0000_10_a.json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"json","annotations":{"include.release.openshift.io/self-managed-high-availability":"true"}}}"#,
        ),
        ("0000_10_c.yaml", &CM.replace("name: a", "name: yaml")),
        ("0000_10_a_file", CM),
        ("0000_10_d.YAML", CM),
    ]);
    fs::create_dir_all(dir.path().join("release-manifests/sub")).unwrap();
    fs::write(dir.path().join("release-manifests/sub/0000_00_x.yaml"), CM).unwrap();
    let p = load(dir.path(), &LoadOptions::default()).unwrap();
    let names: Vec<&str> = p.manifests.iter().map(|m| m.id.name.as_str()).collect();
    assert_eq!(names, ["json", "yml", "yaml"]);
}

#[test]
fn a_bare_directory_of_manifests_is_release_manifests() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("0000_10_a_x.yaml"), CM).unwrap();
    let p = load(dir.path(), &LoadOptions::default()).unwrap();
    assert_eq!(p.manifests.len(), 1);
    assert_eq!(p.manifests[0].path(), "release-manifests/0000_10_a_x.yaml");
}

#[test]
fn release_version_replaces_the_placeholder() {
    let text = CM.to_string() + "data:\n  v: 0.0.1-snapshot\n  k: 0.0.1-snapshot-kubernetes\n";
    let dir = payload(&[("release-metadata", META), ("0000_10_a_x.yaml", &text)]);
    let options = LoadOptions {
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    let p = load(dir.path(), &options).unwrap();
    assert_eq!(p.manifests[0].object["data"]["v"], "4.14.0");
    assert_eq!(p.manifests[0].object["data"]["k"], "4.14.0-kubernetes");
    let options = LoadOptions {
        release_version: Some("9.9.9".into()),
        ..LoadOptions::default()
    };
    let p = load(dir.path(), &options).unwrap();
    assert_eq!(p.manifests[0].object["data"]["v"], "9.9.9");
    assert_eq!(p.version().as_deref(), Some("9.9.9"));
}

/// A ConfigMap nested `depth` mappings deep, as block YAML.
fn deep_block(name: &str, depth: usize) -> String {
    let mut text = CM.replace("name: a", &format!("name: {name}")) + "data:\n";
    for i in 1..depth {
        text.push_str(&" ".repeat(i * 2));
        text.push_str("k:\n");
    }
    text
}

#[test]
fn deep_documents_do_not_overflow_the_parse_threads() {
    // Block nesting near the 512-level budget overflowed the 2 MiB stack of a rayon worker in
    // debug builds ("thread '<unknown>' has overflowed its stack", SIGABRT).
    let a = deep_block("a", 510);
    let b = deep_block("b", 510);
    let dir = payload(&[("0000_10_a_x.yaml", &a), ("0000_10_a_y.yaml", &b)]);
    let p = load(dir.path(), &LoadOptions::default()).unwrap();
    assert_eq!(p.manifests.len(), 2);
}

#[test]
fn dangling_release_metadata_link_is_an_error_not_a_missing_file() {
    let dir = payload(&[("0000_10_a_x.yaml", CM)]);
    std::os::unix::fs::symlink(
        "/nonexistent/release-metadata",
        dir.path().join("release-manifests/release-metadata"),
    )
    .unwrap();
    let e = load(dir.path(), &LoadOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/release-metadata: cannot read: No such file or directory (os error 2)"
    );
}

#[test]
fn fifo_in_the_payload_fails_instead_of_hanging() {
    let dir = payload(&[("0000_10_a_x.yaml", CM)]);
    let fifo = dir.path().join("release-manifests/0000_20_b_pipe.yaml");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let e = load(dir.path(), &LoadOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/0000_20_b_pipe.yaml: cannot read: not a regular file (a FIFO)"
    );
}

#[test]
fn non_utf8_file_name_is_an_error_not_skipped() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = payload(&[("0000_10_a_x.yaml", CM)]);
    let name = std::ffi::OsStr::from_bytes(b"0000_20_b_\xff.yaml");
    fs::write(dir.path().join("release-manifests").join(name), CM).unwrap();
    let e = load(dir.path(), &LoadOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "release-manifests/0000_20_b_\u{fffd}.yaml: cannot read: file name is not valid UTF-8\nhint: rename the file"
    );
    // Other non-UTF-8 names are not manifests and stay ignored, as other extensions are.
    fs::remove_file(dir.path().join("release-manifests").join(name)).unwrap();
    fs::write(
        dir.path()
            .join("release-manifests")
            .join(std::ffi::OsStr::from_bytes(b"notes\xff.txt")),
        "x",
    )
    .unwrap();
    load(dir.path(), &LoadOptions::default()).unwrap();
}

#[test]
fn image_references_without_a_name_is_named() {
    let refs = "kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags: []\n";
    let e = error(&[
        ("release-metadata", META),
        ("image-references", refs),
        ("0000_10_a_x.yaml", CM),
    ]);
    assert_eq!(
        e,
        "release-manifests/image-references: invalid image references: missing metadata.name\nhint: name the ImageStream after the release version, 4.14.0"
    );
}

#[test]
fn release_version_is_the_version_without_release_metadata() {
    let dir = payload(&[("0000_10_a_x.yaml", CM)]);
    let options = LoadOptions {
        release_version: Some("4.15.2".into()),
        ..LoadOptions::default()
    };
    assert_eq!(
        load(dir.path(), &options).unwrap().version().as_deref(),
        Some("4.15.2")
    );
}
