//! Loads that share a `ParseCache` (what `lint --previous`, `upgrade-plan` and `e2e upgrade`
//! do) give exactly what loads without it give: the same manifests, exclusions and warnings.
//! A file whose text is the same is parsed once and its objects are shared; a file whose text
//! differs (edited, templated differently, version placeholder replaced differently) or that
//! is loaded with another detail is parsed again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support::corpus;

use minicvo::{Filters, LoadOptions, ObjectDetail, ParseCache, Payload, load};

fn options(profile: &str, cache: Option<&Arc<ParseCache>>) -> LoadOptions {
    LoadOptions {
        filters: Filters {
            profile: profile.into(),
            ..Filters::default()
        },
        parse_cache: cache.cloned(),
        ..LoadOptions::default()
    }
}

fn load_with(dir: &Path, options: &LoadOptions) -> Payload {
    load(dir, options).unwrap_or_else(|e| panic!("{} does not load: {e}", dir.display()))
}

/// Everything a load gives that a caller can see, in order.
fn shown(p: &Payload) -> String {
    let mut out = format!("version {:?}\nwarnings {:?}\n", p.version(), p.warnings);
    for m in &p.manifests {
        out.push_str(&format!(
            "{} {} {} {} {} {}\n",
            m.path(),
            m.document,
            m.line,
            m.api_version,
            m.id,
            m.object
        ));
    }
    for e in &p.excluded {
        let m = &e.manifest;
        out.push_str(&format!(
            "excluded {} {} {} {}: {}\n",
            m.path(),
            m.document,
            m.object,
            m.id,
            e.reason
        ));
    }
    out
}

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("payload")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn loads_through_a_shared_cache_give_what_loads_without_it() {
    let pairs = [
        (sample("old"), sample("new")),
        (sample("new"), sample("new-buggy")),
        (corpus("mco-4.13"), corpus("mco-4.14")),
        (corpus("openshift-multi"), corpus("openshift-multi")),
    ];
    for (a, b) in &pairs {
        for profile in ["self-managed-high-availability", "hypershift"] {
            let cache = Arc::new(ParseCache::new());
            let shared = options(profile, Some(&cache));
            let alone = options(profile, None);
            let (a1, b1) = (load_with(a, &shared), load_with(b, &shared));
            assert!(!cache.is_empty());
            let (a2, b2) = (load_with(a, &alone), load_with(b, &alone));
            assert_eq!(shown(&a1), shown(&a2), "{} ({profile})", a.display());
            assert_eq!(shown(&b1), shown(&b2), "{} ({profile})", b.display());
        }
    }
}

#[test]
fn only_files_with_the_same_text_share_their_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("old");
    let new = tmp.path().join("new");
    copy_dir(&sample("new"), &old);
    copy_dir(&sample("new"), &new);
    let rm = new.join("release-manifests");
    // One file edited, one removed, one added; the rest unchanged.
    let edited = "0000_50_example-operator_02_config.yaml";
    let text = std::fs::read_to_string(rm.join(edited)).unwrap();
    assert!(text.contains("kind: ConfigMap"), "{text}");
    std::fs::write(
        rm.join(edited),
        format!("{text}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: added-by-edit\n  namespace: example\n"),
    )
    .unwrap();
    std::fs::remove_file(rm.join("0000_50_widget-operator_01_config.yaml")).unwrap();
    std::fs::write(
        rm.join("0000_50_example-operator_03_new.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: brand-new\n  namespace: example\n",
    )
    .unwrap();

    let cache = Arc::new(ParseCache::new());
    let shared = options("self-managed-high-availability", Some(&cache));
    let a = load_with(&old, &shared);
    let b = load_with(&new, &shared);
    let alone = options("self-managed-high-availability", None);
    assert_eq!(shown(&b), shown(&load_with(&new, &alone)));

    let all = |p: &Payload| -> Vec<minicvo::Manifest> {
        p.manifests
            .iter()
            .chain(p.excluded.iter().map(|e| &e.manifest))
            .cloned()
            .collect()
    };
    let (a_all, b_all) = (all(&a), all(&b));
    let mut shared_files = 0;
    for m in &b_all {
        let twin = a_all
            .iter()
            .find(|o| o.file == m.file && o.document == m.document);
        let same_object = twin.is_some_and(|o| Arc::ptr_eq(&o.object, &m.object));
        if m.file == edited || m.file.ends_with("_03_new.yaml") {
            assert!(!same_object, "{} was not parsed again", m.label());
        } else {
            assert!(same_object, "{} was parsed twice", m.label());
            shared_files += 1;
        }
    }
    assert!(shared_files >= 10, "{shared_files}");
    assert!(
        b_all
            .iter()
            .any(|m| m.file == edited && m.id.name == "added-by-edit"),
        "the edit is loaded"
    );
}

#[test]
fn a_different_detail_or_rendered_text_is_parsed_again() {
    let dir = corpus("mco-4.14");
    let cache = Arc::new(ParseCache::new());
    let whole = options("self-managed-high-availability", Some(&cache));
    let headers = LoadOptions {
        detail: ObjectDetail::Headers,
        ..whole.clone()
    };
    let w = load_with(&dir, &whole);
    let h = load_with(&dir, &headers);
    let alone = LoadOptions {
        parse_cache: None,
        ..headers.clone()
    };
    assert_eq!(shown(&h), shown(&load_with(&dir, &alone)));
    for m in &h.manifests {
        assert!(m.object.as_object().unwrap().len() <= 3, "{}", m.label());
    }
    assert!(w.manifests.iter().any(|m| m.object.get("spec").is_some()));

    // The version placeholder replaced by two different versions: the files holding it are
    // parsed again, the others shared.
    let v1 = LoadOptions {
        release_version: Some("4.14.1".into()),
        ..whole.clone()
    };
    let v2 = LoadOptions {
        release_version: Some("4.14.2".into()),
        ..whole.clone()
    };
    let (p1, p2) = (load_with(&dir, &v1), load_with(&dir, &v2));
    let has_v2 = p2
        .manifests
        .iter()
        .filter(|m| m.object.to_string().contains("4.14.2"))
        .count();
    assert!(has_v2 > 0);
    assert!(
        !p2.manifests
            .iter()
            .any(|m| m.object.to_string().contains("4.14.1"))
    );
    let shared = p2
        .manifests
        .iter()
        .zip(&p1.manifests)
        .filter(|(a, b)| Arc::ptr_eq(&a.object, &b.object))
        .count();
    assert!(shared > 0 && shared < p2.manifests.len(), "{shared}");
}
