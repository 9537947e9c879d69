//! `minicvo apply`: roll a payload onto a cluster the way the CVO does.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::progress::{Progress, Verbosity};
use clap::{Args, ValueEnum};
use minicvo::Mode;
use minicvo::apply::{self as engine, ApplyOptions, ApplyReport, RunnerOptions, StopReason};
use tokio_util::sync::CancellationToken;

use super::UsageError;
use super::args::{ClusterArgs, PayloadArgs, parse_mode};

/// Exit code after Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Cancels `cancel` on the first Ctrl-C (work in flight finishes) and exits at once with
/// [`EXIT_INTERRUPTED`] on the second.
pub fn cancel_on_ctrl_c(cancel: &CancellationToken) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("interrupted twice, exiting now");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        }
    });
}

/// The progress display for `-q`/`-v` and `--no-progress`: a bar only on a terminal.
pub fn progress_for(quiet: bool, verbose: u8, no_progress: bool) -> Arc<Progress> {
    let verbosity = match (quiet, verbose) {
        (true, _) => Verbosity::Quiet,
        (false, 0) => Verbosity::Normal,
        _ => Verbosity::Verbose,
    };
    let terminal = std::io::stderr().is_terminal() && !no_progress;
    Arc::new(Progress::new(terminal, verbosity))
}

/// Output format of `apply`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApplyFormat {
    /// A summary for people.
    Text,
    /// The `ApplyResult` JSON document.
    Json,
}

/// `--dry-run` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Really write.
    None,
    /// Send every write with `dryRun=All`; nothing is persisted.
    Server,
}

/// Arguments of `apply`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 applied, 1 a task failed or the run timed out, \
    2 usage or kubeconfig error, 130 interrupted (Ctrl-C)."
)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub payload: PayloadArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Which CVO graph and rules: updating (run-levels in order, deletes issued),
    /// initializing (everything parallel, waits need only Available), reconciling.
    /// Default: the CVO's choice from ClusterVersion `version` (no completed update:
    /// initializing; the payload's release completed last: reconciling; else updating), or
    /// updating with --no-cluster-version.
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// The payload the cluster runs now: the capabilities the update implicitly enables (an
    /// object the cluster runs moved under a capability that is off) are enabled, their
    /// manifests applied, and ClusterVersion records them (ImplicitlyEnabledCapabilities).
    #[arg(long, value_name = "PAYLOAD")]
    pub previous: Option<std::path::PathBuf>,
    /// The CVO's attempt counter for reconciling mode's order.
    #[arg(long, default_value_t = 0)]
    pub seed: usize,
    /// Graph nodes running at once (default: the CVO's: 16 updating, all nodes
    /// initializing, 2 reconciling).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: Option<u32>,
    /// Server-side apply field manager.
    #[arg(long, default_value = "minicvo")]
    pub field_manager: String,
    /// `server`: send every write as a server dry run and report what would change.
    #[arg(long, value_enum, default_value = "none", value_name = "MODE")]
    pub dry_run: DryRun,
    /// How objects are written: `cvo` (GET, the CVO's per-kind merge, UPDATE only when it
    /// changed something) or `server-side` (one forced server-side apply).
    #[arg(long, value_enum, default_value = "cvo", value_name = "STRATEGY")]
    pub apply_strategy: super::args::StrategyArg,
    /// Bound on the whole run (e.g. 10m, 1h30m); default none.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,
    /// Longest wait for one ClusterOperator (and for deletions with --wait-deletes).
    #[arg(long, default_value = "30m", value_parser = parse_duration, value_name = "DURATION")]
    pub wait_timeout: Duration,
    /// Wait at the end for deletions still held by finalizers.
    #[arg(long)]
    pub wait_deletes: bool,
    /// Then wait (up to --wait-timeout) until every Deployment and DaemonSet applied is
    /// rolled out and available, as `kubectl rollout status` would; the CVO does not.
    #[arg(long)]
    pub wait_available: bool,
    /// Do not record the run in ClusterVersion `version`.
    #[arg(long)]
    pub no_cluster_version: bool,
    /// No progress bar even on a terminal (plain lines instead).
    #[arg(long)]
    pub no_progress: bool,
    /// Install a permissive stand-in CRD for every kind the payload uses that neither the
    /// cluster nor the payload's own CRDs serve (OpenShift kinds on plain Kubernetes).
    /// Without it, such kinds are an error listing them all before anything is written.
    #[arg(long)]
    pub stub_missing_crds: bool,
    /// Create every namespace the payload's objects use that the payload creates nowhere and
    /// the cluster lacks (on OpenShift the installer and operators create them). Without it,
    /// such namespaces are an error listing them all before anything is written.
    #[arg(long)]
    pub create_missing_namespaces: bool,
    /// Output format of the summary on stdout.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: ApplyFormat,
}

/// Parses `30s`, `5m`, `1h30m`, an ISO 8601 duration, or bare seconds.
///
/// # Errors
/// A message for clap when the text is not a non-negative duration.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    let d: k8s_openapi::jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 30s, 5m or 1h30m: {e}"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?}: a duration cannot be negative"))
}

/// ClusterVersion `version` as the cluster has it (`None`: absent or not served), unless
/// `--no-cluster-version`.
async fn read_cluster_version(
    a: &ApplyArgs,
    client: &kube::Client,
) -> anyhow::Result<Option<serde_json::Value>> {
    if a.no_cluster_version {
        return Ok(None);
    }
    let gvk = kube::api::GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion");
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterversions"),
    );
    match api.get_opt(minicvo::apply::clusterversion::NAME).await {
        Ok(cv) => Ok(cv.map(|o| serde_json::to_value(o).unwrap_or_default())),
        // Not served at all (no CRD): the same as no ClusterVersion.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(anyhow::anyhow!(
            "reading ClusterVersion {}: {e}\nhint: pass --mode, or --no-cluster-version",
            minicvo::apply::clusterversion::NAME
        )),
    }
}

/// The mode of the run: `--mode`, else the CVO's choice from the cluster's ClusterVersion
/// (printed with the reason).
fn choose_mode(
    a: &ApplyArgs,
    cv: Option<&serde_json::Value>,
    payload: &minicvo::Payload,
    release_image: &str,
) -> Mode {
    if let Some(mode) = a.mode {
        return mode;
    }
    if a.no_cluster_version {
        eprintln!("mode: updating (--no-cluster-version: ClusterVersion is not read)");
        return Mode::Updating;
    }
    let version = payload.version().unwrap_or_default();
    let choice = minicvo::cvo::mode::from_cluster_version(cv, &version, release_image);
    eprintln!("mode: {choice}");
    choice.mode
}

/// The capabilities the cluster's ClusterVersion records as enabled.
fn recorded_capabilities(
    cv: Option<&serde_json::Value>,
) -> Option<std::collections::BTreeSet<String>> {
    let list = cv?
        .pointer("/status/capabilities/enabledCapabilities")?
        .as_array()?;
    Some(
        list.iter()
            .filter_map(serde_json::Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// The run's filters and capability status: the explicit `--capabilities`, the ones the
/// cluster already has enabled, and the ones the update from `--previous` implies (each
/// printed as a note).
fn capabilities(
    a: &ApplyArgs,
    cv: Option<&serde_json::Value>,
    payload: &minicvo::Payload,
    filters: &minicvo::Filters,
) -> anyhow::Result<(
    minicvo::Filters,
    minicvo::cvo::capabilities::CapabilityStatus,
)> {
    let previous = match &a.previous {
        Some(p) => {
            let mut prev_args = a.payload.clone();
            prev_args.payload.clone_from(p);
            Some(prev_args.load(false)?.0)
        }
        None => None,
    };
    let prior = recorded_capabilities(cv);
    let (filters, status, why) = minicvo::cvo::capabilities::for_run(
        filters,
        prior.as_ref(),
        &payload.manifests,
        previous.as_ref().map(|p| p.manifests.as_slice()),
    );
    for line in minicvo::cvo::capabilities::describe(&why) {
        eprintln!("note: {line}");
    }
    let moved: std::collections::BTreeSet<&str> =
        why.iter().map(|w| w.capability.as_str()).collect();
    let kept: Vec<&str> = status
        .implicit
        .iter()
        .map(String::as_str)
        .filter(|c| !moved.contains(c))
        .collect();
    if !kept.is_empty() {
        eprintln!(
            "note: capabilities {} stay enabled: ClusterVersion {} has them enabled and the CVO \
             never disables a capability",
            kept.join(", "),
            minicvo::apply::clusterversion::NAME
        );
    }
    Ok((filters, status))
}

/// Runs `apply`.
///
/// # Errors
/// Load, usage and connection errors; task failures are reported and give exit code 1.
pub fn apply(a: &ApplyArgs, verbose: u8, quiet: bool) -> anyhow::Result<ExitCode> {
    let (payload, load_options) = a.payload.load(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let conn = a.cluster.connect().await?;
        tracing::info!(
            "using context {} on {}",
            conn.context.as_deref().unwrap_or("(in-cluster)"),
            conn.server
        );
        let cv = read_cluster_version(a, &conn.client).await;
        let cv = match (cv, a.mode) {
            (Ok(cv), _) => cv,
            // With --mode the ClusterVersion only adds the capabilities it has enabled.
            (Err(e), Some(_)) => {
                tracing::warn!("{e}");
                None
            }
            (Err(e), None) => return Err(e),
        };
        let (payload, load_options, _) =
            super::features::payload_for_cluster(&a.payload, &conn.client, payload, load_options)
                .await?;
        // An image payload is matched by its pull spec by digest, as recorded.
        let mode = choose_mode(a, cv.as_ref(), &payload, &load_options.release_image);
        let (filters, capability_status) =
            capabilities(a, cv.as_ref(), &payload, &load_options.filters)?;
        let plan = Arc::new(minicvo::plan::from_payload(payload, &filters, mode, a.seed));
        let cancel = CancellationToken::new();
        cancel_on_ctrl_c(&cancel);
        let progress = progress_for(quiet, verbose, a.no_progress);
        let options = ApplyOptions {
            runner: RunnerOptions {
                mode,
                field_manager: a.field_manager.clone(),
                dry_run: a.dry_run == DryRun::Server,
                wait_timeout: a.wait_timeout,
                strategy: a.apply_strategy.into(),
                ..RunnerOptions::default()
            },
            parallelism: a.parallelism.map(|p| p as usize),
            timeout: a.timeout,
            wait_deletes: a.wait_deletes,
            record_cluster_version: !a.no_cluster_version,
            release_image: load_options.release_image.clone(),
            capabilities: Some(capability_status),
            preflight: Some(minicvo::stub_crds::StandIns {
                crds: a.stub_missing_crds,
                namespaces: a.create_missing_namespaces,
            }),
            checks: minicvo::cvo::status::ReleaseChecks::default(),
        };
        if a.stub_missing_crds && options.runner.dry_run {
            return Err(UsageError(
                "--stub-missing-crds installs CRDs, which --dry-run=server does not allow".into(),
            )
            .into());
        }
        if a.create_missing_namespaces && options.runner.dry_run {
            return Err(UsageError(
                "--create-missing-namespaces creates namespaces, which --dry-run=server does not \
                 allow"
                    .into(),
            )
            .into());
        }
        if a.wait_available && options.runner.dry_run {
            return Err(UsageError(
                "--wait-available waits for what was written, which --dry-run=server does not \
                 write"
                    .into(),
            )
            .into());
        }
        let report = engine::run(
            &conn,
            plan.clone(),
            &options,
            progress.clone(),
            cancel.clone(),
        )
        .await;
        progress.finish();
        let report = report?;
        let available = if a.wait_available && report.ok {
            let found =
                minicvo::apply::available::wait_available(&conn, &plan, a.wait_timeout, &cancel)
                    .await;
            eprintln!(
                "{} of {} workloads available after {:.1}s",
                found.workloads - found.not_available.len(),
                found.workloads,
                found.seconds
            );
            Some(found)
        } else {
            None
        };
        for (crd, kind) in &report.preflight.installed {
            eprintln!("stub CRD {crd} installed for {kind} (nothing served it)");
        }
        for ns in &report.preflight.namespaces {
            eprintln!("namespace {ns} created (the payload uses it but creates it nowhere)");
        }
        anyhow::Ok((report, available))
    })?;
    let (report, available) = report;
    let text = match a.output {
        ApplyFormat::Json => {
            let mut v = serde_json::to_value(&report)?;
            if let (Some(found), Some(o)) = (&available, v.as_object_mut()) {
                o.insert("available".into(), serde_json::to_value(found)?);
            }
            let mut s = serde_json::to_string_pretty(&v)?;
            s.push('\n');
            s
        }
        ApplyFormat::Text => summary(&report),
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r?,
    }
    if let Some(why) = failure_line(&report) {
        eprintln!("error: {why}");
    }
    let unavailable = available.as_ref().map_or(&[][..], |f| &f.not_available[..]);
    for n in unavailable {
        eprintln!("error: {} is not available: {}", n.workload, n.why);
    }
    Ok(match (report.ok, report.stopped) {
        (true, _) if !unavailable.is_empty() => ExitCode::from(super::EXIT_FAILURE),
        (true, _) => ExitCode::SUCCESS,
        (false, Some(StopReason::Interrupted)) => ExitCode::from(EXIT_INTERRUPTED),
        (false, _) => ExitCode::from(super::EXIT_FAILURE),
    })
}

/// Why the run did not succeed, in one line, or `None`.
fn failure_line(r: &ApplyReport) -> Option<String> {
    if r.ok {
        return None;
    }
    let mut parts = Vec::new();
    match r.stopped {
        Some(StopReason::Interrupted) => parts.push("interrupted".to_string()),
        Some(StopReason::TimedOut) => parts.push("the run timed out (--timeout)".to_string()),
        None => {}
    }
    if !r.errors.is_empty() {
        let n = r.errors.len();
        parts.push(format!(
            "{n} task{} failed (first: {})",
            if n == 1 { "" } else { "s" },
            r.errors[0]
        ));
    }
    if let Some(b) = &r.blocked
        && b.tasks > 0
    {
        parts.push(format!(
            "{} task{} did not run{}",
            b.tasks,
            if b.tasks == 1 { "" } else { "s" },
            if r.stopped.is_none() {
                " because a node they depend on failed (later run-levels do not start)"
            } else {
                ""
            }
        ));
    }
    if let Some(cv) = &r.cluster_version
        && cv != "recorded"
        && cv != "not served"
    {
        parts.push(format!(
            "clusterversion {}: {cv}",
            engine::clusterversion::NAME
        ));
    }
    Some(parts.join("; "))
}

/// The text summary.
fn summary(r: &ApplyReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} {} in {} mode in {:.1}s ({} requests): {}",
        match (r.dry_run, r.ok) {
            (true, _) => "dry run of",
            (false, true) => "applied",
            (false, false) => "failed to apply",
        },
        r.version.as_deref().unwrap_or("an unversioned payload"),
        r.mode,
        r.seconds,
        r.requests,
        r.counts_line()
    );
    for l in &r.levels {
        let _ = writeln!(
            s,
            "  run-level {:<4} {:>7.2}s",
            l.run_level.as_deref().unwrap_or("-"),
            l.seconds
        );
    }
    if r.dry_run {
        for t in &r.tasks {
            if t.outcome.changed()
                || matches!(
                    t.outcome,
                    engine::Outcome::NotServed | engine::Outcome::WouldWait
                )
            {
                let _ = writeln!(
                    s,
                    "  {} {}{}",
                    t.outcome,
                    t.object.short(),
                    t.detail
                        .as_ref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    if !r.deletes_in_progress.is_empty() {
        let _ = writeln!(s, "deletions still in progress:");
        for d in &r.deletes_in_progress {
            let _ = writeln!(s, "  {} ({})", d.object.short(), d.file);
        }
    }
    if !r.errors.is_empty() {
        let _ = writeln!(s, "failures:");
        for e in &r.errors {
            let _ = writeln!(s, "  {e}");
        }
    }
    if let Some(b) = &r.blocked {
        let _ = writeln!(
            s,
            "not run: {} task{} in {} node{}{}",
            b.tasks,
            if b.tasks == 1 { "" } else { "s" },
            b.nodes,
            if b.nodes == 1 { "" } else { "s" },
            b.first
                .as_ref()
                .map(|f| format!(", beginning with {f}"))
                .unwrap_or_default()
        );
    }
    if let Some(cv) = &r.cluster_version {
        let _ = writeln!(s, "clusterversion {}: {cv}", engine::clusterversion::NAME);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
