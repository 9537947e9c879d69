//! minicvo's loader against the decoder the CVO loads payloads with: library-go's
//! `manifest.ParseManifests` (the Go program `hack/tools/cvodecode`), over every payload of the
//! shared corpus (the real 4.21 and 4.22 releases included) and the bundled samples. Every file
//! must give the same objects, in the same order, equal as JSON once map keys are sorted and
//! integral numbers are compared as numbers (Go decodes `1.0` as the integer 1). No cluster is
//! needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use minicvo::payload::{LoadOptions, load_unfiltered};
use serde_json::Value;

fn payloads() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/payloads");
    let mut dirs = Vec::new();
    for base in [shared.clone(), root.join("payload")] {
        let entries = std::fs::read_dir(&base)
            .unwrap_or_else(|e| panic!("the payload corpus is missing: {}: {e}", base.display()));
        for e in entries {
            let p = e.expect("dir entry").path();
            if p.join("release-manifests").is_dir() || p.join("manifests").is_dir() {
                dirs.push(p);
            }
        }
    }
    dirs.sort();
    for real in ["openshift-4.21", "openshift-4.22"] {
        assert!(
            dirs.contains(&shared.join(real)),
            "the real release {real} is missing from {}",
            shared.display()
        );
    }
    dirs
}

/// `v` with integral floats made integers, so that Go's and serde's numbers compare.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            #[allow(clippy::cast_possible_truncation)]
            if f.fract() == 0.0 && f.abs() < 9.0e15 {
                Value::from(f as i64)
            } else {
                v.clone()
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        ),
        _ => v.clone(),
    }
}

#[test]
fn every_object_decodes_as_library_go_decodes_it() {
    let dirs = payloads();
    let tmp = tempfile::tempdir().expect("temp dir");
    let program = crate::support::go_tool::go_tool("cvodecode", tmp.path());
    let out = Command::new(&program)
        .args(&dirs)
        .output()
        .expect("cvodecode runs");
    assert!(
        out.status.success(),
        "cvodecode failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let go: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("cvodecode prints JSON lines"))
        .collect();
    assert_eq!(go.len(), dirs.len());
    let mut differences = Vec::new();
    let (mut objects, mut files) = (0usize, 0usize);
    for (dir, go) in dirs.iter().zip(&go) {
        let payload = load_unfiltered(dir, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut ours: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for m in payload
            .manifests
            .iter()
            .chain(payload.excluded.iter().map(|e| &e.manifest))
        {
            ours.entry(m.path())
                .or_default()
                .push(normalized(&m.object));
        }
        for f in go["files"].as_array().expect("files") {
            files += 1;
            let file = f["file"].as_str().expect("file");
            let key = if file.contains('/') {
                file.to_string()
            } else {
                format!("release-manifests/{file}")
            };
            let mine = ours.remove(&key).unwrap_or_default();
            if let Some(e) = f["error"].as_str() {
                let warned = payload.warnings.iter().any(|w| w.contains(file));
                if !mine.is_empty() || !warned {
                    differences.push(format!(
                        "{}/{file}: library-go fails ({e}) but minicvo loads {} objects",
                        dir.display(),
                        mine.len()
                    ));
                }
                continue;
            }
            let theirs: Vec<Value> = f["objects"]
                .as_array()
                .expect("objects")
                .iter()
                .map(normalized)
                .collect();
            objects += theirs.len();
            if mine.len() != theirs.len() {
                differences.push(format!(
                    "{}/{file}: library-go decodes {} objects, minicvo {}",
                    dir.display(),
                    theirs.len(),
                    mine.len()
                ));
                continue;
            }
            for (i, (a, b)) in mine.iter().zip(&theirs).enumerate() {
                if a != b {
                    differences.push(format!(
                        "{}/{file}: object {i} differs:\n  minicvo:    {}\n  library-go: {}",
                        dir.display(),
                        serde_json::to_string(a).unwrap_or_default(),
                        serde_json::to_string(b).unwrap_or_default()
                    ));
                }
            }
        }
        for (file, objs) in ours {
            differences.push(format!(
                "{}/{file}: minicvo loads {} objects library-go never read",
                dir.display(),
                objs.len()
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences over {files} files ({objects} objects):\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(objects > 2_000, "only {objects} objects compared");
    eprintln!(
        "{} payloads, {files} files, {objects} objects: all equal",
        dirs.len()
    );
}
