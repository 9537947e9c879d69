//! `minicvo status`: what `oc adm upgrade` shows of ClusterVersion `version` (the current
//! release, progress, conditions, recommended and conditional updates), for clusters without
//! `oc`.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::EXIT_FAILURE;
use super::args::ClusterArgs;

/// Output format of `status`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusFormat {
    /// `oc adm upgrade`'s text (warnings on stderr, as oc writes them).
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `status`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 shown, 1 ClusterVersion `version` is absent or cannot be read, \
    2 usage or kubeconfig error."
)]
pub struct StatusArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Also list the conditional updates that are not recommended, with why (oc's
    /// `--include-not-recommended`).
    #[arg(long)]
    pub include_not_recommended: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: StatusFormat,
}

/// Runs `status`.
///
/// # Errors
/// Connection errors and a ClusterVersion that cannot be read.
pub fn status(a: &StatusArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cv = runtime.block_on(async {
        let conn = a.cluster.connect().await?;
        let cv = minicvo::cluster::watch::get(
            &conn.client,
            "/apis/config.openshift.io/v1/clusterversions",
            minicvo::apply::clusterversion::NAME,
            Duration::from_secs(30),
        )
        .await;
        anyhow::Ok(cv)
    })?;
    let cv = match cv {
        Ok(Some(cv)) => cv,
        // Absent, or the kind is not served.
        Ok(None) => {
            eprintln!(
                "error: No cluster version information available - ClusterVersion `version` does not exist (is the operator running?)"
            );
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
        Err(e) if e.is(404) => {
            eprintln!(
                "error: No cluster version information available - the cluster does not serve clusterversions.config.openshift.io"
            );
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
        Err(e) => return Err(anyhow::anyhow!("reading clusterversion version: {e}")),
    };
    match a.output {
        StatusFormat::Text => {
            let shown = minicvo::upgrade_status::text(&cv, a.include_not_recommended);
            let mut out = std::io::stdout().lock();
            out.write_all(shown.stdout.as_bytes())?;
            out.flush()?;
            std::io::stderr().write_all(shown.stderr.as_bytes())?;
        }
        StatusFormat::Json => {
            let mut s = serde_json::to_string_pretty(&minicvo::upgrade_status::json(&cv))?;
            s.push('\n');
            super::plan::print(&s)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
