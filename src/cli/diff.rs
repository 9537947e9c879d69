//! `minicvo diff PAYLOAD`: what applying the payload would change on a cluster, found with
//! server-side dry runs (nothing is written).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use minicvo::diff::cluster::KubeCluster;
use minicvo::diff::{self, report};
use minicvo::{Mode, plan};

use super::EXIT_FAILURE;
use super::args::{ClusterArgs, PayloadArgs};
use super::plan::print;

/// Output format of `diff`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DiffFormat {
    /// One line per task with its unified diff.
    Text,
    /// The `LiveDiff` JSON document.
    Json,
}

/// Arguments of `diff`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 nothing would change, 1 something would change or could not \
    be compared, 2 usage or kubeconfig error."
)]
pub struct DiffArgs {
    #[command(flatten)]
    pub payload: PayloadArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Field manager of the dry-run applies; use the one `minicvo apply` used.
    #[arg(long, default_value = "minicvo")]
    pub field_manager: String,
    /// How `apply` would write: `cvo` (the CVO's merge of each live object, dry-run as an
    /// UPDATE; notes name manifest changes the CVO will not roll out) or `server-side`.
    #[arg(long, value_enum, default_value = "cvo", value_name = "STRATEGY")]
    pub apply_strategy: super::args::StrategyArg,
    /// Compare with what `apply --no-cluster-version` writes: ClusterVersion `version` is not
    /// read, so no owner reference to it is expected on the objects.
    #[arg(long)]
    pub no_cluster_version: bool,
    /// Objects compared at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Leave unchanged and skipped tasks out of the text output.
    #[arg(long)]
    pub changed_only: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: DiffFormat,
}

/// Runs `diff` (updating mode: delete manifests count). Like `apply`, the version placeholder
/// is replaced by the payload's version.
///
/// # Errors
/// Load, usage and connection errors. Objects that cannot be compared are reported and give
/// exit code 1.
pub fn diff(a: &DiffArgs) -> anyhow::Result<ExitCode> {
    let (payload, options) = a.payload.load(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (plan, result) = runtime.block_on(async {
        let conn = a.cluster.connect().await?;
        tracing::info!(
            "comparing with context {} on {}",
            conn.context.as_deref().unwrap_or("(in-cluster)"),
            conn.server
        );
        let (payload, options, _) =
            super::features::payload_for_cluster(&a.payload, &conn.client, payload, options)
                .await?;
        let plan = plan::build(&payload, &options.filters, Mode::Updating, 0);
        let strategy: minicvo::apply::ApplyStrategy = a.apply_strategy.into();
        // What `apply` reads before a cvo run: the ClusterVersion owner reference, the proxy
        // and the TLS profile, so that the diff shows them.
        let config = if strategy == minicvo::apply::ApplyStrategy::Cvo {
            let discovery = minicvo::cluster::discovery::Discovery::new(
                conn.client.clone(),
                Duration::from_secs(60),
            );
            minicvo::apply::actions::cvo::read_cluster_config(
                &conn.client,
                &discovery,
                &plan,
                !a.no_cluster_version,
                Duration::from_secs(60),
            )
            .await?
        } else {
            minicvo::merge::ClusterConfig::default()
        };
        let cluster = KubeCluster::new(conn.client, &a.field_manager, Duration::from_secs(60));
        if let Err(e) = cluster.prime().await {
            tracing::warn!("{e}; discovering kinds one group at a time");
        }
        let result =
            diff::diff_in(&cluster, &plan, a.concurrency as usize, strategy, &config).await;
        anyhow::Ok((plan, result))
    })?;
    let out = match a.output {
        DiffFormat::Text => report::text(&plan, &result, a.changed_only),
        DiffFormat::Json => {
            let mut s = serde_json::to_string_pretty(&report::json(&plan, &result))?;
            s.push('\n');
            s
        }
    };
    print(&out)?;
    let errors = result
        .entries
        .iter()
        .filter(|e| e.change == diff::Change::Error)
        .count();
    if errors > 0 {
        tracing::error!("{errors} object(s) could not be compared");
    }
    Ok(if result.modifies() || errors > 0 {
        ExitCode::from(EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
