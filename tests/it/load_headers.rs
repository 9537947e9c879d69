//! A headers-only load (`ObjectDetail::Headers`, what `plan` uses) keeps the same manifests
//! as a whole load, each with its object cut to `apiVersion`, `kind` and `metadata`, and gives
//! the same plan; on bad input it fails with the same error.

use std::path::{Path, PathBuf};

use crate::support::corpus;

use minicvo::plan::{self, Mode};
use minicvo::{Filters, LoadOptions, ObjectDetail, Payload, load, output};

fn load_as(dir: &Path, detail: ObjectDetail, profile: &str) -> Payload {
    let options = LoadOptions {
        filters: Filters {
            profile: profile.into(),
            ..Filters::default()
        },
        detail,
        ..LoadOptions::default()
    };
    load(dir, &options).unwrap_or_else(|e| panic!("{} does not load: {e}", dir.display()))
}

fn headers(object: &serde_json::Value) -> String {
    let mut v = object.clone();
    if let Some(map) = v.as_object_mut() {
        map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
    }
    serde_json::to_string(&v).unwrap()
}

#[test]
fn a_headers_only_load_keeps_the_same_manifests_and_plans_the_same() {
    let mut dirs: Vec<PathBuf> = ["new", "new-buggy", "old"]
        .iter()
        .map(|n| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("payload")
                .join(n)
        })
        .collect();
    for name in [
        "openshift-multi",
        "mco-before-fix",
        "mco-4.13-backport-conflict",
    ] {
        dirs.push(corpus(name));
    }
    let mut compared = 0;
    for dir in &dirs {
        for profile in ["self-managed-high-availability", "hypershift"] {
            let whole = load_as(dir, ObjectDetail::Whole, profile);
            let cut = load_as(dir, ObjectDetail::Headers, profile);
            assert_eq!(cut.detail, ObjectDetail::Headers);
            assert_eq!(whole.warnings, cut.warnings, "{}", dir.display());
            let shown = |p: &Payload| -> Vec<(String, usize, usize, String)> {
                p.manifests
                    .iter()
                    .chain(p.excluded.iter().map(|e| &e.manifest))
                    .map(|m| (m.file.clone(), m.document, m.line, headers(&m.object)))
                    .collect()
            };
            let (w, c) = (shown(&whole), shown(&cut));
            assert_eq!(w, c, "{} ({profile})", dir.display());
            for m in &cut.manifests {
                let keys: Vec<&String> = m.object.as_object().unwrap().keys().collect();
                assert!(keys.len() <= 3, "{}: {keys:?}", m.label());
            }
            let reasons = |p: &Payload| -> Vec<String> {
                p.excluded.iter().map(|e| e.reason.clone()).collect()
            };
            assert_eq!(reasons(&whole), reasons(&cut));
            compared += w.len();
            for mode in [Mode::Updating, Mode::Initializing, Mode::Reconciling] {
                let json = |p: Payload| {
                    let plan = plan::from_payload(p, &Filters::default(), mode, 3);
                    output::json::plan(&plan).to_string()
                };
                assert_eq!(
                    json(whole.clone()),
                    json(cut.clone()),
                    "{} {mode}",
                    dir.display()
                );
            }
        }
    }
    assert!(compared > 1000, "compared {compared} manifests");
}
