//! Load + plan of the real `openshift-multi` payload (14 MB, 478 files), of the loaded
//! manifests alone in every mode, and of synthetic payloads of 1k, 10k and 50k objects
//! (generated into a temp dir, see `support/synthetic.rs`) to show how the cost grows.
//! `hack/bench.sh load` runs these next to the CVO's own loader; see BENCHMARKS.md.

use std::path::PathBuf;

use minicvo::payload::template::{TemplateData, render};
use minicvo::plan::{self, Mode};
use minicvo::{Filters, LoadOptions, load};

#[path = "support/synthetic.rs"]
mod synthetic;

fn main() {
    divan::main();
}

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/payloads/openshift-multi")
}

#[divan::bench(sample_count = 20)]
fn load_and_plan_openshift_multi() -> usize {
    let payload = load(&corpus(), &LoadOptions::default()).expect("loads");
    let plan = plan::from_payload(payload, &Filters::default(), Mode::Updating, 0);
    plan.graph.nodes.len()
}

#[divan::bench(sample_count = 20)]
fn load_openshift_multi() -> usize {
    load(&corpus(), &LoadOptions::default())
        .expect("loads")
        .manifests
        .len()
}

/// openshift-multi's files read as `manifests/` (a symlink), so that every file goes through
/// the template renderer as the CVO's own directory does: the 455 without `{{` take the fast
/// path, the others are parsed and executed (or skipped, like the CVO, where Go's template
/// fails).
#[divan::bench(sample_count = 20)]
fn load_openshift_multi_templated(bencher: divan::Bencher) {
    let root = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(
        corpus().join("release-manifests"),
        root.path().join("manifests"),
    )
    .expect("symlink");
    let options = LoadOptions {
        release_image: "quay.io/openshift-release-dev/ocp-release@sha256:0123".into(),
        ..LoadOptions::default()
    };
    bencher.bench(|| load(root.path(), &options).expect("loads").manifests.len());
}

/// Rendering of the CVO's own templated manifest (its Deployment: `{{.ReleaseImage}}`,
/// `{{ .ClusterProfile }}`).
#[divan::bench]
fn render_cvo_deployment_template(bencher: divan::Bencher) {
    let text = std::fs::read_to_string(
        corpus().join("release-manifests/0000_00_cluster-version-operator_30_deployment.yaml"),
    )
    .expect("reads");
    let data = TemplateData {
        release_image: "quay.io/openshift-release-dev/ocp-release@sha256:0123".into(),
        cluster_profile: "self-managed-high-availability".into(),
        ..TemplateData::default()
    };
    bencher.bench(|| render(&text, &data).expect("renders").len());
}

#[divan::bench(args = [Mode::Updating, Mode::Initializing, Mode::Reconciling])]
fn plan_only_openshift_multi(bencher: divan::Bencher, mode: Mode) {
    let payload = load(&corpus(), &LoadOptions::default()).expect("loads");
    bencher.bench(|| {
        plan::build(&payload, &Filters::default(), mode, 3)
            .graph
            .nodes
            .len()
    });
}

#[divan::bench(args = [1_000, 10_000, 50_000], sample_count = 10)]
fn load_and_plan_synthetic(bencher: divan::Bencher, objects: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    synthetic::write(dir.path(), &synthetic::Spec::new(objects)).expect("writes payload");
    bencher
        .counter(divan::counter::ItemsCount::new(objects))
        .bench(|| {
            let payload = load(dir.path(), &LoadOptions::default()).expect("loads");
            assert_eq!(payload.manifests.len(), objects);
            let plan = plan::from_payload(payload, &Filters::default(), Mode::Updating, 0);
            plan.graph.nodes.len()
        });
}
