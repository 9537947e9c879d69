//! The schema rule done in two steps, as `lint` does it (`schema::early` on the loaded
//! manifests while the previous payload loads, then `schema::check_early` on the plan), finds
//! exactly what `schema::check` on the whole `schema::catalog` finds: the same findings in the
//! same order, and the same error for a CRD that does not compile.

use std::path::Path;
use std::sync::Arc;

use crate::support::corpus;

use minicvo::analysis::lint::{Context, Finding, Previous, schema};
use minicvo::manifest::Manifest;
use minicvo::schema::{BuiltIn, DEFAULT_KUBE_VERSION, SchemaError};
use minicvo::{Filters, LoadOptions, Mode, ObjectDetail, ParseCache, load, plan};

/// Both ways of running the schema rule on `new` updated from `old`, loaded through one parse
/// cache as `lint --previous` loads them (so shared files share their objects).
fn both_ways(
    builtin: &Arc<BuiltIn>,
    old: &Path,
    new: &Path,
    extra_crds: &[Manifest],
) -> [Result<Vec<Finding>, SchemaError>; 2] {
    let options = LoadOptions {
        filters: Filters::default(),
        detail: ObjectDetail::Whole,
        parse_cache: Some(Arc::new(ParseCache::new())),
        ..LoadOptions::default()
    };
    let mut payload = load(new, &options).expect("the payload loads");
    let early = schema::early(builtin.clone(), &payload.manifests);
    let old = load(old, &options).expect("the previous payload loads");
    let filters = &options.filters;
    let previous = plan::from_payload(old, filters, Mode::Updating, 0);
    let excluded = std::mem::take(&mut payload.excluded);
    let plan = plan::from_payload(payload, filters, Mode::Updating, 0);
    let cx = Context::new(&plan, &excluded, Some(Previous { plan: &previous }));
    let whole = schema::catalog(builtin.clone(), &cx, extra_crds)
        .map(|catalog| schema::check(&cx, &catalog));
    [whole, schema::check_early(early, &cx, extra_crds)]
}

fn assert_same(builtin: &Arc<BuiltIn>, old: &Path, new: &Path, extra_crds: &[Manifest]) -> usize {
    let [whole, early] = both_ways(builtin, old, new, extra_crds);
    let shown = |r: &Result<Vec<Finding>, SchemaError>| match r {
        Ok(findings) => format!("{findings:#?}"),
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(
        shown(&early),
        shown(&whole),
        "{} from {}",
        new.display(),
        old.display()
    );
    whole.map_or(0, |f| f.len())
}

fn sample(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("payload")
        .join(name)
}

#[test]
fn early_schema_work_finds_what_the_whole_catalog_finds() {
    let builtin = Arc::new(BuiltIn::load(DEFAULT_KUBE_VERSION).expect("built-in schemas"));
    let mut found = 0;
    for (old, new) in [
        (sample("old"), sample("new-buggy")),
        (sample("old"), sample("new")),
        (corpus("mco-4.13"), corpus("mco-4.14")),
        (corpus("mco-before-fix"), corpus("mco-after-fix")),
        (corpus("openshift-multi"), corpus("openshift-multi")),
    ] {
        found += assert_same(&builtin, &old, &new, &[]);
    }
    // The payload's objects are checked against the previous payload's CRDs and --crds too.
    let extra = load(&corpus("mco-4.14"), &LoadOptions::default())
        .expect("mco-4.14 loads")
        .manifests;
    found += assert_same(&builtin, &corpus("mco-4.13"), &sample("new-buggy"), &extra);
    assert!(found > 0, "the payloads have schema findings to compare");
}

/// A payload whose CRD does not compile, in a directory of its own.
fn with_crd(dir: &Path, name: &str, schema: &str) {
    let manifests = dir.join("release-manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\nspec:\n  group: example.com\n  scope: Cluster\n  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n{schema}"
    );
    std::fs::write(manifests.join(name), crd).unwrap();
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\nspec:\n  size: many\n";
    std::fs::write(manifests.join("0000_50_widget_02_cr.yaml"), widget).unwrap();
}

#[test]
fn a_crd_that_does_not_compile_fails_both_ways_unless_replaced() {
    let builtin = Arc::new(BuiltIn::load(DEFAULT_KUBE_VERSION).expect("built-in schemas"));
    let tmp = tempfile::tempdir().unwrap();
    let (bad, good) = (tmp.path().join("bad"), tmp.path().join("good"));
    with_crd(
        &bad,
        "0000_50_widget_01_crd.yaml",
        "        type: object\n        properties:\n          spec: {$ref: '#/definitions/x'}\n",
    );
    with_crd(
        &good,
        "0000_50_widget_01_crd.yaml",
        "        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              size: {type: integer}\n",
    );
    let [whole, early] = both_ways(&builtin, &good, &bad, &[]);
    let whole = whole.expect_err("the payload's CRD does not compile");
    assert_eq!(
        early.expect_err("nor when compiled early").to_string(),
        whole.to_string()
    );
    assert!(
        whole.to_string().contains("0000_50_widget_01_crd.yaml"),
        "{whole}"
    );
    // The previous payload's bad CRD is replaced by the payload's: no error, and the
    // payload's custom resource is checked against the payload's CRD.
    let [whole, early] = both_ways(&builtin, &bad, &good, &[]);
    let whole = whole.expect("a replaced CRD is not compiled");
    assert_eq!(early.expect("nor compiled early"), whole);
    assert!(
        whole.iter().any(|f| f.message.contains("spec.size")),
        "{whole:#?}"
    );
}
