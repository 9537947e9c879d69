//! The driver of hack/bench-metrics-render.sh: fills the same registry on both sides and times
//! `render`, best of 5 rounds of 20,000 renders. Built only by that script, in a scratch crate.
#![allow(missing_docs, dead_code)]
mod new;
mod old;
use serde_json::json;
use std::time::Instant;

macro_rules! fill {
    ($m:expr) => {{
        let m = $m;
        for (i, k) in ["completed", "desired", "current", "updating"].iter().enumerate() {
            m.set_cluster_version(k, "4.14.0", "quay.io/openshift-release-dev/ocp-release@sha256:abc", "4.13.0", 1_700_000_000.0 + i as f64);
        }
        m.set_payload("4.14.0", 700, 120);
        m.payload_error("4.14.0");
        let ops: Vec<_> = (0..50).map(|i| json!({"metadata": {"name": format!("operator-{i}")},
            "status": {"versions": [{"name": "operator", "version": "4.14.0"}],
              "conditions": [{"type": "Available", "status": "True", "reason": "AsExpected"},
                {"type": "Degraded", "status": "False", "reason": "AsExpected"},
                {"type": "Progressing", "status": "False", "reason": "AsExpected"},
                {"type": "Upgradeable", "status": "True", "reason": "AsExpected"}]}})).collect();
        m.set_operators(&ops);
        for mode in ["initializing", "updating", "reconciling"] { for j in 0..20 { m.observe_pass(mode, j as f64 * 3.7, j % 5 != 0); } }
        m.set_requests(123456);
        m.set_leader(true);
        m
    }};
}

fn main() {
    let o = fill!(old::Metrics::new());
    let n = fill!(new::Metrics::new());
    let (ot, nt) = (o.render(), n.render());
    println!("bytes: old {} new {}; lines old {} new {}", ot.len(), nt.len(), ot.lines().count(), nt.lines().count());
    let iters = 20_000;
    let mut best = (f64::MAX, f64::MAX);
    for round in 0..5 {
        let t = Instant::now();
        for _ in 0..iters { std::hint::black_box(o.render()); }
        let old_us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        let t = Instant::now();
        for _ in 0..iters { std::hint::black_box(n.render()); }
        let new_us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        println!("round {round}: old {old_us:.2} µs, new {new_us:.2} µs, ratio {:.2}", new_us / old_us);
        best = (best.0.min(old_us), best.1.min(new_us));
    }
    println!("best: old {:.2} µs new {:.2} µs ratio {:.2}", best.0, best.1, best.1 / best.0);
}
