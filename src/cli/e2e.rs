//! `minicvo e2e upgrade`: install OLD with simulated operators, update to NEW, check the
//! order of what happened.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use minicvo::LoadOptions;
use minicvo::apply::{ApplyObserver, ApplyOptions, RunnerOptions};
use minicvo::e2e::{self, Assertion, Clients, UpgradeOptions};
use minicvo::simulate::Spec;
use minicvo::simulate::pods::{PodOptions, PodTimings};
use tokio_util::sync::CancellationToken;

use super::apply::{EXIT_INTERRUPTED, cancel_on_ctrl_c, parse_duration, progress_for};
use super::args::{ClusterArgs, FilterArgs, ImageArgs};

/// Arguments of `e2e`.
#[derive(Debug, Args)]
pub struct E2eArgs {
    #[command(subcommand)]
    command: E2eCommand,
}

#[derive(Debug, Subcommand)]
enum E2eCommand {
    /// Install OLD (initializing mode) with simulated operators, update to NEW (updating
    /// mode), record a timeline and check the order of what happened.
    Upgrade(UpgradeArgs),
}

/// Output format of the summary.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum E2eFormat {
    /// A summary for people.
    Text,
    /// One JSON document (`E2eUpgradeResult`).
    Json,
}

/// Arguments of `e2e upgrade`.
#[derive(Debug, Args)]
#[command(
    after_help = "Simulator scripts (--simulate [PHASE:]OPERATOR=ITEM,...; PHASE install, upgrade \
    (default) or all; OPERATOR a ClusterOperator name or *): ok, delay:2s, never, degraded, \
    wrong-version[:V], flap[:500ms].\n\
    Assertions (--assert \"X after Y\" or \"X before Y\"): X and Y are \
    [PHASE:]ACTION:KIND[.GROUP]/[NAMESPACE/]NAME[~TEXT] with ACTION apply, delete, wait-start, \
    wait-done or observed, e.g. \"delete:ClusterRoleBinding/default-account-openshift-machine-config-operator \
    after wait-done:ClusterOperator/machine-config\".\n\
    Exit codes: 0 both runs completed and every check passed, 1 a run failed or a check found \
    something, 2 usage or kubeconfig error, 130 interrupted."
)]
pub struct UpgradeArgs {
    /// The payload installed first (a directory or a release image).
    #[arg(long, value_name = "OLD")]
    pub from: PathBuf,
    /// How objects are written in both runs: `cvo` (GET, the CVO's merge, UPDATE) or
    /// `server-side` (one forced server-side apply).
    #[arg(long, value_enum, default_value = "cvo", value_name = "STRATEGY")]
    pub apply_strategy: super::args::StrategyArg,
    /// The payload updated to (a directory or a release image).
    #[arg(long, value_name = "NEW")]
    pub to: PathBuf,
    /// OLD's version (replaces `0.0.1-snapshot`); default: OLD's release-metadata.
    #[arg(long, value_name = "V1")]
    pub from_version: Option<String>,
    /// NEW's version; default: NEW's release-metadata.
    #[arg(long, value_name = "V2")]
    pub to_version: Option<String>,
    #[command(flatten)]
    pub filters: FilterArgs,
    #[command(flatten)]
    pub image: ImageArgs,
    /// Release image pull spec rendered into `{{.ReleaseImage}}` in manifests/.
    #[arg(long, default_value = "")]
    pub release_image: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Install a permissive CRD for every kind the payloads use that neither the cluster nor
    /// their own CRDs serve (OpenShift kinds on plain Kubernetes).
    #[arg(long)]
    pub stub_missing_crds: bool,
    /// Create namespaces the payloads put objects in but create nowhere (on OpenShift the
    /// installer and operators create them).
    #[arg(long)]
    pub create_missing_namespaces: bool,
    /// Delete every object of both payloads (and the stand-ins) before the install, so the
    /// run starts from a clean slate; namespaces are waited on until gone.
    #[arg(long)]
    pub clean: bool,
    /// Delete every object of both payloads (and the stand-ins) at the end.
    #[arg(long)]
    pub cleanup: bool,
    /// Script a simulated operator (repeatable); see below.
    #[arg(long = "simulate", value_name = "SPEC")]
    pub simulate: Vec<Spec>,
    /// Delay of simulated operators whose script sets none.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub delay: Duration,
    /// Simulated operators report only once their workloads are rolled out and available
    /// (needs a scheduler and kubelets, e.g. kind; never on the test control plane).
    #[arg(long)]
    pub wait_available: bool,
    /// Do not simulate the payloads' pods (no leases, rights or dependency checks, and no
    /// `live-pods-keep-access` check).
    #[arg(long)]
    pub no_live_pods: bool,
    /// Drive the install and the update through a running operator (`minicvo operator`, in
    /// this process): it installs FROM, and the update starts when `spec.desiredUpdate` of
    /// ClusterVersion `version` is set to TO's version. With --clean, ClusterVersion `version`
    /// is deleted first so that the operator installs.
    #[arg(long)]
    pub via_operator: bool,
    /// Watch the payloads' real pods instead of simulating them (a cluster with nodes, e.g.
    /// kind): a container that ends with a refused request (its termination message says
    /// `denied:`, `… is forbidden: …` or `Unauthorized`) or a missing file (`missing:`), or a
    /// pod that cannot start for want of a ConfigMap, Secret or ServiceAccount deleted during
    /// the run, fails `live-pods-keep-access`, with the payload task that caused it. Implies
    /// --no-live-pods.
    #[arg(long)]
    pub real_pods: bool,
    /// Start, ready and stop times of simulated pods (repeatable):
    /// `TARGET=start:DURATION,ready:DURATION,stop:DURATION` with TARGET a workload name,
    /// `namespace/name` or `*` (defaults: start 100ms, ready 100ms, stop 0s; stop is how long a
    /// replaced pod keeps running after it released its lease, as a terminating pod does).
    #[arg(long = "pods", value_name = "SPEC")]
    pub pods: Vec<String>,
    /// Duration of the simulated pods' leader leases (holders renew, candidates retry, every
    /// third of it).
    #[arg(long, default_value = "3s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease_duration: Duration,
    /// An ordering to check, "X after Y" (repeatable); see below.
    #[arg(long = "assert", value_name = "ASSERTION")]
    pub assert: Vec<Assertion>,
    /// Longest wait for one ClusterOperator.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub wait_timeout: Duration,
    /// Bound on each of the two runs; default none.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,
    /// Graph nodes running at once (default: the CVO's for each mode).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: Option<u32>,
    /// Write the timeline JSON here.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Write a Chrome trace (Perfetto, chrome://tracing) here.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write the checks as JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// No progress bar even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
    /// Output format of the summary on stdout.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: E2eFormat,
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// Runs `e2e`.
///
/// # Errors
/// Load, usage and connection errors; failed runs and checks give exit code 1.
pub fn e2e(a: &E2eArgs, verbose: u8, quiet: bool) -> anyhow::Result<ExitCode> {
    match &a.command {
        E2eCommand::Upgrade(u) => upgrade(u, verbose, quiet),
    }
}

fn pod_options(a: &UpgradeArgs) -> anyhow::Result<PodOptions> {
    let mut timings = PodTimings::default();
    for spec in &a.pods {
        timings
            .add(spec)
            .map_err(|e| anyhow::anyhow!("--pods {e}"))?;
    }
    Ok(PodOptions {
        timings,
        lease_duration: a.lease_duration,
        follow_rollout: a.wait_available,
    })
}

fn upgrade(a: &UpgradeArgs, verbose: u8, quiet: bool) -> anyhow::Result<ExitCode> {
    // Release images are extracted first; the directories live until the run ends.
    let from = a.image.fetch(&a.from)?;
    let to = a.image.fetch(&a.to)?;
    let options = UpgradeOptions {
        from: from.dir.clone(),
        to: to.dir.clone(),
        from_version: a.from_version.clone(),
        to_version: a.to_version.clone(),
        load: LoadOptions {
            filters: a.filters.filters()?,
            release_image: a.release_image.clone(),
            release_version: None,
            substitute_placeholder: true,
            ..LoadOptions::default()
        },
        stub_missing_crds: a.stub_missing_crds,
        create_missing_namespaces: a.create_missing_namespaces,
        clean: a.clean,
        clean_after: a.cleanup,
        specs: a.simulate.clone(),
        default_delay: a.delay,
        wait_available: a.wait_available,
        assertions: a.assert.clone(),
        live_pods: !a.no_live_pods && !a.real_pods,
        real_pods: a.real_pods,
        pods: pod_options(a)?,
        apply: ApplyOptions {
            runner: RunnerOptions {
                wait_timeout: a.wait_timeout,
                strategy: a.apply_strategy.into(),
                ..RunnerOptions::default()
            },
            parallelism: a.parallelism.map(|p| p as usize),
            timeout: a.timeout,
            release_image: a.release_image.clone(),
            ..ApplyOptions::default()
        },
        via_operator: a.via_operator,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let cancel = CancellationToken::new();
    let report = runtime.block_on(async {
        let apply = a.cluster.connect().await?;
        let simulator = a.cluster.connect().await?;
        tracing::info!(
            "using context {} on {}",
            apply.context.as_deref().unwrap_or("(in-cluster)"),
            apply.server
        );
        cancel_on_ctrl_c(&cancel);
        let progress = progress_for(quiet, verbose, a.no_progress);
        let clients = Clients { apply, simulator };
        let report = e2e::upgrade(
            &clients,
            &options,
            Some(progress.clone() as Arc<dyn ApplyObserver>),
            cancel.clone(),
        )
        .await;
        progress.finish();
        anyhow::Ok(report?)
    })?;
    if let Some(p) = &a.timeline {
        write_file(p, &report.timeline.to_json())?;
    }
    if let Some(p) = &a.trace {
        write_file(p, &serde_json::to_string(&report.chrome_trace())?)?;
    }
    if let Some(p) = &a.junit {
        write_file(p, &report.junit())?;
    }
    let text = match a.output {
        E2eFormat::Text => report.text(),
        E2eFormat::Json => format!("{}\n", serde_json::to_string_pretty(&report.json())?),
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r?,
    }
    Ok(if cancel.is_cancelled() {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_FAILURE)
    })
}
