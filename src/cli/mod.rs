//! Command-line arguments and the commands they run.

mod apply;
pub mod args;
mod completions;
mod diff;
mod e2e;
mod features;
mod lint;
mod operator;
mod plan;
mod progress;
mod simulate;
mod status;
mod upgrade_plan;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for a payload that does not load, a failed apply, or findings.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for bad usage.
pub const EXIT_USAGE: u8 = 2;

/// Load, plan, apply and test OpenShift release payloads the way the Cluster Version Operator
/// does.
#[derive(Debug, Parser)]
#[command(name = "minicvo", version, about, long_about = None)]
pub struct Cli {
    /// More logs on stderr (-v: why manifests were excluded; -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// The format of the logs on stderr: text for people, json (one object a line) for log
    /// collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply a payload to a cluster the way the CVO does: its GET, merge and UPDATE (or
    /// server-side apply), deletes, CRD and ClusterOperator waits, progress, ClusterVersion
    /// status.
    Apply(apply::ApplyArgs),
    /// Show the CVO's task graph for a payload (no cluster needed).
    Plan(plan::PlanArgs),
    /// Print the included, rendered objects in task order.
    Render(plan::RenderArgs),
    /// What an update from OLD to NEW does to every object: created, updated, unchanged,
    /// deleted, orphaned, placed in NEW's plan (no cluster needed).
    UpgradePlan(upgrade_plan::UpgradePlanArgs),
    /// Find ordering hazards and payload mistakes; exit 1 on errors (no cluster needed).
    Lint(lint::LintArgs),
    /// Show what applying a payload would change on a cluster (the CVO's merge, dry-run on the
    /// server; exit 1 when something would change).
    Diff(diff::DiffArgs),
    /// Simulated operators: report each ClusterOperator of a payload once its workload runs
    /// the payload's template (until Ctrl-C).
    Simulate(simulate::SimulateArgs),
    /// End-to-end tests against a cluster: `e2e upgrade --from OLD --to NEW` installs OLD,
    /// updates to NEW with simulated operators and checks the order of what happened.
    E2e(e2e::E2eArgs),
    /// Run as a Cluster Version Operator until stopped: install the release, update when
    /// ClusterVersion `spec.desiredUpdate` changes, reconcile every interval, with leader
    /// election, metrics and health endpoints.
    Operator(operator::OperatorArgs),
    /// Show what `oc adm upgrade` shows: the current release, progress, conditions, and the
    /// recommended and conditional updates of ClusterVersion `version`.
    Status(status::StatusArgs),
    /// Print shell completions for bash, zsh or fish on stdout.
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff) on stdout.
    Man(completions::ManArgs),
}

/// The format of the logs on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line an event, without time, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object a line: `timestamp` (RFC 3339), `level`, `target`, `message` and the
    /// event's fields.
    Json,
}

/// Sets up `tracing` on stderr in `format`. `RUST_LOG` overrides the verbosity flags.
pub fn init_logging(verbose: u8, quiet: bool, format: LogFormat) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    // kube's request tracing logs every failed attempt at ERROR; apply reports (and retries)
    // them itself, so those lines are only shown from -vv on.
    let kube = if verbose >= 2 {
        ""
    } else {
        ",kube_client::client::builder=off"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("minicvo={level}{kube},warn"))
    });
    // Colour only on a terminal, and never with NO_COLOR set.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .with_target(false)
            .without_time()
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init(),
    };
}

/// Runs the parsed command.
///
/// # Errors
/// Whatever the command fails with; [`exit_code_for`] maps it to an exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Apply(a) => apply::apply(&a, cli.verbose, cli.quiet),
        Command::Plan(a) => plan::plan(&a),
        Command::Render(a) => plan::render(&a),
        Command::UpgradePlan(a) => upgrade_plan::upgrade_plan(&a),
        Command::Lint(a) => lint::lint(&a),
        Command::Diff(a) => diff::diff(&a),
        Command::Simulate(a) => simulate::simulate(&a),
        Command::E2e(a) => e2e::e2e(&a, cli.verbose, cli.quiet),
        Command::Operator(a) => operator::operator(&a),
        Command::Status(a) => status::status(&a),
        Command::Completions(a) => completions::completions(&a),
        Command::Man(a) => completions::man(&a),
    }
}

/// Hands `value` to the end of the process without freeing it. A one-shot command calls this on
/// its payloads, plans and output once the output is written: the process exits right after
/// and the kernel takes the memory back at once, while freeing a loaded payload's hundreds of
/// thousands of small allocations one by one costs milliseconds (BENCHMARKS.md, "Load + plan
/// as a process"). Only for values a command would otherwise drop just before returning.
pub(crate) fn keep_until_exit<T>(value: T) {
    std::mem::forget(value);
}

/// A usage error found after argument parsing (bad flag values, unreadable option files).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Exit code for an error: 2 for usage errors, 1 otherwise.
#[must_use]
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}
