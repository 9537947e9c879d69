//! ClusterOperator wait latency for `hack/bench.sh apply`: from the status write that finishes
//! an operator to the first request of the next run-level, measured on a live cluster
//! (`$KUBECONFIG`) with the minicvo library.
//!
//! ```text
//! waitbench [--operators K]      K run-levels, each ending in a ClusterOperator wait
//! ```
//!
//! The payload: the ClusterOperator CRD, a Namespace, then K run-levels each holding two
//! components (a ConfigMap and a ClusterOperator; a ConfigMap), then a last run-level.
//! Run-levels are 100, 110, ...: three digits, so their string order is their number order. A task in this
//! program plays the operators: when the apply starts waiting on operator i, it writes its
//! status (the payload's version, Available, not Degraded) and notes the instant just before
//! the write is sent. The latency of operator i is the first `TaskStarted` of the next
//! run-level minus that instant. Prints one `operator=i latency_ms=...` line per operator and a
//! `summary` line. A benchmark tool, not a test.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use minicvo::apply::{self, ApplyEvent, ApplyOptions, EventKind};
use minicvo::{Filters, LoadOptions, Mode};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const INCLUDE: &str = "include.release.openshift.io/self-managed-high-availability";
const VERSION: &str = "4.99.0";

fn write_payload(dir: &Path, prefix: &str, operators: usize) -> std::io::Result<()> {
    let rm = dir.join("release-manifests");
    std::fs::create_dir_all(&rm)?;
    std::fs::write(
        rm.join("release-metadata"),
        json!({"kind": "cincinnati-metadata-v0", "version": VERSION}).to_string(),
    )?;
    let crd = "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml";
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        root.join("payload/new/release-manifests").join(crd),
        rm.join(crd),
    )?;
    let ns = format!("{prefix}-ns");
    std::fs::write(
        rm.join("0000_05_wb_00_namespace.yaml"),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\n"
        ),
    )?;
    let config_map = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    {INCLUDE}: \"true\"\ndata:\n  key: value\n"
        )
    };
    for i in 0..=operators {
        let level = 100 + 10 * i;
        // Two components per run-level, so run-levels are separate steps of the graph.
        std::fs::write(
            rm.join(format!("0000_{level}_wb_00_config.yaml")),
            config_map(&format!("level-{level}")),
        )?;
        std::fs::write(
            rm.join(format!("0000_{level}_wbx_00_config.yaml")),
            config_map(&format!("extra-{level}")),
        )?;
        if i < operators {
            std::fs::write(
                rm.join(format!("0000_{level}_wb_01_clusteroperator.yaml")),
                format!(
                    "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: {prefix}-op-{i}\n  annotations:\n    {INCLUDE}: \"true\"\nspec: {{}}\nstatus:\n  versions:\n  - name: operator\n    version: \"0.0.1-snapshot\"\n"
                ),
            )?;
        }
    }
    Ok(())
}

fn operators_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterOperator");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusteroperators"),
    )
}

fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        f64::midpoint(s[n / 2 - 1], s[n / 2])
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut operators = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--operators" => operators = args.next().ok_or("--operators N")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let prefix = format!("wb{}", std::process::id());
    let dir = tempfile::tempdir()?;
    write_payload(dir.path(), &prefix, operators)?;
    let options = LoadOptions {
        filters: Filters::default(),
        release_image: String::new(),
        release_version: None,
        substitute_placeholder: true,
        ..LoadOptions::default()
    };
    let payload = minicvo::load(dir.path(), &options)?;
    let plan = Arc::new(minicvo::plan::from_payload(
        payload,
        &options.filters,
        Mode::Updating,
        0,
    ));
    let conn = apply::connect(None, None).await?;

    // Every event, and the waits as they start, for the operator player.
    let events: Arc<Mutex<Vec<ApplyEvent>>> = Arc::default();
    let (waits_tx, mut waits_rx) = mpsc::unbounded_channel::<String>();
    let observer = {
        let events = events.clone();
        move |e: &ApplyEvent| {
            if let EventKind::WaitStarted { operator, .. } = &e.kind {
                let _ = waits_tx.send(operator.clone());
            }
            events.lock().expect("events").push(e.clone());
        }
    };
    let player = {
        let api = operators_api(&conn.client);
        tokio::spawn(async move {
            let status = json!({"status": {
                "versions": [{"name": "operator", "version": VERSION}],
                "conditions": [
                    {"type": "Available", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "Degraded", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "Progressing", "status": "False", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                ],
            }});
            let mut sent = Vec::new();
            while let Some(op) = waits_rx.recv().await {
                // Let the wait settle on its watch, as a real operator takes its time.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let at = tokio::time::Instant::now();
                api.patch_status(&op, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map_err(|e| format!("status of {op}: {e}"))?;
                sent.push((op, at));
            }
            Ok::<_, String>(sent)
        })
    };
    let mut apply_options = ApplyOptions {
        record_cluster_version: false,
        ..ApplyOptions::default()
    };
    apply_options.timeout = Some(Duration::from_secs(300));
    let report = apply::run(
        &conn,
        plan.clone(),
        &apply_options,
        Arc::new(observer),
        CancellationToken::new(),
    )
    .await?;
    let sent = player.await??;
    if !report.ok {
        return Err(format!("apply failed: {:?}", report.errors).into());
    }

    let events = events.lock().expect("events").clone();
    let first_start = |level: &str| {
        events.iter().find_map(|e| match &e.kind {
            EventKind::TaskStarted { task } if task.run_level.as_deref() == Some(level) => {
                Some(e.instant)
            }
            _ => None,
        })
    };
    let mut latencies = Vec::new();
    for (op, at) in &sent {
        let i: usize = op
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or("name")?;
        let next_level = (100 + 10 * (i + 1)).to_string();
        let start = first_start(&next_level).ok_or("next level never started")?;
        let ms = start.saturating_duration_since(*at).as_secs_f64() * 1000.0;
        println!("operator={i} latency_ms={ms:.1}");
        latencies.push(ms);
    }
    println!(
        "summary tool=waitbench operators={} median_ms={:.1} min_ms={:.1} max_ms={:.1} requests={}",
        latencies.len(),
        median(&latencies),
        latencies.iter().copied().fold(f64::INFINITY, f64::min),
        latencies.iter().copied().fold(0.0, f64::max),
        report.requests
    );

    // Clean up what this run created (the CRD stays: other runs share it).
    let ops = operators_api(&conn.client);
    for i in 0..operators {
        let _ = ops
            .delete(&format!("{prefix}-op-{i}"), &DeleteParams::default())
            .await;
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(conn.client.clone());
    let _ = namespaces
        .delete(&format!("{prefix}-ns"), &DeleteParams::default())
        .await;
    Ok(())
}
