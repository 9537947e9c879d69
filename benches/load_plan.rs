//! Load + plan of the real `openshift-multi` payload (14 MB, 478 files), and of the loaded
//! manifests alone, in every mode.

use std::path::PathBuf;

use minicvo::plan::{self, Mode};
use minicvo::{Filters, LoadOptions, load};

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
