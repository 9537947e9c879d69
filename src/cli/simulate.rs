//! `minicvo simulate`: simulated operators for a payload, until Ctrl-C.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use minicvo::simulate::{
    self, Scripts, SimEvent, SimEventKind, SimObserver, Simulator, SimulatorOptions, Spec,
};
use tokio_util::sync::CancellationToken;

use super::UsageError;
use super::apply::parse_duration;
use super::args::{ClusterArgs, PayloadArgs};

/// Arguments of `simulate`.
#[derive(Debug, Args)]
#[command(
    after_help = "Scripts (--simulate OPERATOR=ITEM,...; OPERATOR a ClusterOperator name or *): \
    ok, delay:2s, never, degraded, wrong-version[:V], flap[:500ms]. A phase prefix \
    (install:, upgrade:, all:) is accepted and ignored here.\n\
    Runs until Ctrl-C (exit 0)."
)]
pub struct SimulateArgs {
    #[command(flatten)]
    pub payload: PayloadArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Script an operator (repeatable).
    #[arg(long = "simulate", value_name = "SPEC")]
    pub simulate: Vec<Spec>,
    /// Delay of operators whose script sets none.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub delay: Duration,
    /// Report only once workloads are rolled out and available (needs a scheduler and
    /// kubelets, e.g. kind).
    #[arg(long)]
    pub wait_available: bool,
}

/// Logs the simulator's events on stderr.
struct Log;

impl SimObserver for Log {
    fn on_sim_event(&self, e: &SimEvent) {
        match &e.kind {
            SimEventKind::Workload {
                id,
                generation,
                updated,
            } => match updated {
                Ok(()) => eprintln!("{id}: generation {generation} carries the payload's template"),
                Err(why) => {
                    eprintln!("{id}: generation {generation}, not the payload's template: {why}")
                }
            },
            SimEventKind::WorkloadGone { id } => eprintln!("{id}: deleted"),
            SimEventKind::Operator { .. } => {}
            SimEventKind::Reported { name, status } => {
                eprintln!("clusteroperator {name}: reported {status}");
            }
            SimEventKind::WriteFailed { name, error } => {
                eprintln!("clusteroperator {name}: status write failed (will retry): {error}");
            }
            SimEventKind::Pod { change, .. } => eprintln!("{change}"),
            SimEventKind::Harm(h) => eprintln!(
                "harm: pod {} ({}): {} {}",
                h.pod, h.identity, h.kind, h.what
            ),
            SimEventKind::WatchFailed { kind, error } => {
                tracing::debug!("watch of {kind} failed (re-listing): {error}");
            }
        }
    }
}

/// Runs `simulate`.
///
/// # Errors
/// Load, usage and connection errors.
pub fn simulate(a: &SimulateArgs) -> anyhow::Result<ExitCode> {
    let (payload, options) = a.payload.load(true)?;
    let plan = minicvo::plan::from_payload(payload, &options.filters, minicvo::Mode::Updating, 0);
    let operators = simulate::operators(&plan);
    let scripts = Scripts::all(&a.simulate, a.delay);
    let names: Vec<&str> = operators.iter().map(|o| o.name.as_str()).collect();
    if let Some(u) = scripts.unknown(&names).first() {
        return Err(UsageError(format!(
            "--simulate names {u}, which is not a ClusterOperator of the payload (it has: {})",
            names.join(", ")
        ))
        .into());
    }
    for o in &operators {
        let workloads: Vec<String> = o.workloads.iter().map(|w| w.id.to_string()).collect();
        eprintln!(
            "simulating clusteroperator {} ({}): {}",
            o.name,
            scripts.of(&o.name),
            if workloads.is_empty() {
                "no workload in its component, reports at once".to_string()
            } else {
                format!("waits for {}", workloads.join(", "))
            }
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let conn = a.cluster.connect().await?;
        let cancel = CancellationToken::new();
        {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                }
            });
        }
        let summary = Simulator::run_until(
            conn.client.clone(),
            operators,
            SimulatorOptions {
                scripts,
                wait_available: a.wait_available,
                pods: None,
            },
            Some(Arc::new(Log)),
            cancel,
        )
        .await;
        eprintln!(
            "stopped: {} status writes, {} failed, {} requests",
            summary.reports.values().sum::<usize>(),
            summary.write_failures,
            conn.requests.get()
        );
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
