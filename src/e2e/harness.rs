//! The upgrade e2e: install OLD (initializing mode) with simulated operators until it is
//! complete, update to NEW (updating mode), record the timeline, run the checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::assertion::Assertion;
use super::checks::{self, Check};
use super::report::{PhaseRun, UpgradeReport};
use super::timeline::{Phase, Recorder};
use crate::apply::preflight;
use crate::apply::{self, ApplyObserver, ApplyOptions, Connection};
use crate::payload::{LoadOptions, Payload};
use crate::plan::{self, Mode, Plan};
use crate::simulate::pods::{PodBoard, PodOptions, PodSimulator};
use crate::simulate::{self, ScriptPhase, Scripts, SimObserver, Simulator, SimulatorOptions, Spec};
use crate::stub_crds::{StandIns, StubError};

/// How long `--clean` waits for namespaces and CRDs to go.
const CLEAN_TIMEOUT: Duration = Duration::from_secs(180);

/// Settings of an upgrade e2e.
#[derive(Debug, Clone)]
pub struct UpgradeOptions {
    /// The payload installed first.
    pub from: PathBuf,
    /// The payload updated to.
    pub to: PathBuf,
    /// OLD's version (`0.0.1-snapshot` is replaced by it); default: its release-metadata.
    pub from_version: Option<String>,
    /// NEW's version; default: its release-metadata.
    pub to_version: Option<String>,
    /// Filters and the release image for both payloads (versions come from the fields above).
    pub load: LoadOptions,
    /// Install permissive CRDs for kinds nothing serves.
    pub stub_missing_crds: bool,
    /// Create namespaces the payloads use but create nowhere.
    pub create_missing_namespaces: bool,
    /// Delete every object of both payloads (and the stand-ins) first.
    pub clean: bool,
    /// Delete them again at the end.
    pub clean_after: bool,
    /// Simulator scripts (`--simulate`).
    pub specs: Vec<Spec>,
    /// Delay of operators whose script sets none.
    pub default_delay: Duration,
    /// Simulated operators wait for available workloads (real clusters only).
    pub wait_available: bool,
    /// User assertions.
    pub assertions: Vec<Assertion>,
    /// Simulate the payloads' pods (on by default; `--no-live-pods` turns it off).
    pub live_pods: bool,
    /// Watch the payloads' real pods instead of simulating them (a cluster with nodes;
    /// `--real-pods`, see [`super::real_pods`]). Turns `live_pods` off.
    pub real_pods: bool,
    /// Timings and lease duration of the simulated pods.
    pub pods: PodOptions,
    /// Settings of both apply runs (the mode comes from the phase).
    pub apply: ApplyOptions,
    /// Drive both phases through a running operator ([`crate::operator`]): it installs OLD,
    /// and the update starts when ClusterVersion `spec.desiredUpdate` is set to NEW's version.
    pub via_operator: bool,
}

impl Default for UpgradeOptions {
    fn default() -> Self {
        UpgradeOptions {
            from: PathBuf::new(),
            to: PathBuf::new(),
            from_version: None,
            to_version: None,
            load: LoadOptions::default(),
            stub_missing_crds: false,
            create_missing_namespaces: false,
            clean: false,
            clean_after: false,
            specs: Vec::new(),
            default_delay: Duration::ZERO,
            wait_available: false,
            assertions: Vec::new(),
            live_pods: true,
            real_pods: false,
            pods: PodOptions::default(),
            apply: ApplyOptions::default(),
            via_operator: false,
        }
    }
}

/// Why an e2e could not run (failed runs and failed checks are in the report instead).
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// A payload does not load.
    #[error("{path}: {source}")]
    Load {
        /// The payload.
        path: String,
        /// The error.
        #[source]
        source: crate::payload::LoadError,
    },
    /// A payload has no version and none was given.
    #[error(
        "{path} has no release-metadata, so its version is unknown\nhint: pass {flag} V (the \
         `0.0.1-snapshot` placeholders are replaced by it, and the ClusterOperator versions \
         must differ between the two payloads)"
    )]
    NoVersion {
        /// The payload.
        path: String,
        /// The flag to use.
        flag: &'static str,
    },
    /// Kinds nothing serves, or stubs that failed.
    #[error(transparent)]
    Stubs(#[from] StubError),
    /// The cluster could not be reached.
    #[error(transparent)]
    Apply(#[from] apply::ApplyError),
    /// `--clean` failed.
    #[error(transparent)]
    Clean(#[from] super::cleanup::CleanError),
    /// `--simulate` names an operator neither payload has.
    #[error("--simulate names {0}, which neither payload has as a ClusterOperator (it has: {1})")]
    UnknownOperator(String, String),
    /// The operator of `--via-operator` could not be driven.
    #[error("--via-operator: {0}")]
    Operator(String),
}

fn load(
    path: &Path,
    version: Option<&String>,
    base: &LoadOptions,
    flag: &'static str,
) -> Result<Payload, E2eError> {
    let options = LoadOptions {
        release_version: version.cloned(),
        substitute_placeholder: true,
        ..base.clone()
    };
    let mut payload = crate::payload::load(path, &options).map_err(|source| E2eError::Load {
        path: path.display().to_string(),
        source,
    })?;
    if payload.metadata.is_none() {
        let Some(v) = version else {
            return Err(E2eError::NoVersion {
                path: path.display().to_string(),
                flag,
            });
        };
        // The given version stands in for the missing release-metadata.
        payload
            .warnings
            .retain(|w| !w.contains(crate::payload::RELEASE_METADATA));
        if let Ok(version) = semver::Version::parse(v) {
            payload.metadata = Some(crate::payload::ReleaseMetadata {
                version,
                previous: Vec::new(),
                metadata: serde_json::Map::new(),
            });
        }
    }
    Ok(payload)
}

/// The operator of `--via-operator` and what it needs to start.
struct Operated {
    payloads: Option<[(String, Arc<Payload>); 2]>,
    from: String,
    to: String,
    driver: Option<super::via_operator::Driver>,
}

impl Operated {
    /// The phase's pass: the operator's install of OLD (started here), or its update to NEW
    /// once `spec.desiredUpdate` asks for it.
    async fn phase(
        &mut self,
        clients: &Clients,
        options: &UpgradeOptions,
        phase: Phase,
        apply_options: &ApplyOptions,
        observer: Arc<dyn ApplyObserver>,
        cancel: &CancellationToken,
    ) -> Result<apply::ApplyReport, E2eError> {
        match (&mut self.driver, self.payloads.take()) {
            (None, Some(payloads)) => {
                let mut o = apply_options.clone();
                // The operator chooses the mode of each pass and its capabilities.
                o.capabilities = None;
                self.driver = Some(super::via_operator::Driver::start(
                    &clients.apply,
                    payloads,
                    &self.from,
                    &options.load,
                    &o,
                    observer,
                ));
            }
            (Some(d), _) => {
                d.observe(observer);
                d.request(&self.to).await?;
            }
            (None, None) => return Err(E2eError::Operator("the operator is gone".into())),
        }
        let version = match phase {
            Phase::Install => self.from.clone(),
            Phase::Upgrade => self.to.clone(),
        };
        let d = self.driver.as_mut().expect("started above");
        d.pass_of(&version, cancel).await
    }
}

/// Both observers of a phase: the timeline and the caller's.
struct Fanout(Arc<Recorder>, Option<Arc<dyn ApplyObserver>>);

impl ApplyObserver for Fanout {
    fn on_event(&self, event: &apply::ApplyEvent) {
        self.0.on_event(event);
        if let Some(o) = &self.1 {
            o.on_event(event);
        }
    }
}

/// Connections for the e2e: one for minicvo's writes, one for the simulator (so each
/// request count is its own).
pub struct Clients {
    /// minicvo's apply runs and stub CRDs.
    pub apply: Connection,
    /// The simulated operators.
    pub simulator: Connection,
}

/// Runs the upgrade e2e. `observer` also gets every apply event (e.g. a progress display);
/// `cancel` stops the run (Ctrl-C).
///
/// # Errors
/// [`E2eError`] when the payloads do not load, a version is unknown, kinds are missing (and
/// not stubbed), or the cluster cannot be reached. A failed install or upgrade, and failed
/// checks, are in the report.
pub async fn upgrade(
    clients: &Clients,
    options: &UpgradeOptions,
    observer: Option<Arc<dyn ApplyObserver>>,
    cancel: CancellationToken,
) -> Result<UpgradeReport, E2eError> {
    let started = Instant::now();
    // Files the two payloads share are parsed once.
    let base = LoadOptions {
        parse_cache: Some(options.load.parse_cache.clone().unwrap_or_default()),
        ..options.load.clone()
    };
    let old = load(
        &options.from,
        options.from_version.as_ref(),
        &base,
        "--from-version",
    )?;
    let new = load(
        &options.to,
        options.to_version.as_ref(),
        &base,
        "--to-version",
    )?;
    let mut warnings: Vec<String> = Vec::new();
    for w in old.warnings.iter().chain(&new.warnings) {
        warnings.push(w.clone());
    }
    let from_version = old.version().or_else(|| options.from_version.clone());
    let to_version = new.version().or_else(|| options.to_version.clone());
    if from_version == to_version {
        warnings.push(format!(
            "both payloads have version {}: the upgrade's ClusterOperator waits are already \
             satisfied; hint: pass --from-version and --to-version",
            from_version.as_deref().unwrap_or("(unknown)")
        ));
    }
    // The CVO's capabilities: the install enables the explicit ones; the upgrade keeps them
    // and enables the ones the update implies (an object the install runs moved under a
    // capability that is off).
    let (old_filters, old_caps, _) =
        crate::cvo::capabilities::for_run(&options.load.filters, None, &old.manifests, None);
    let (new_filters, new_caps, implied) = crate::cvo::capabilities::for_run(
        &options.load.filters,
        Some(&old_caps.enabled),
        &new.manifests,
        Some(&old.manifests),
    );
    for line in crate::cvo::capabilities::describe(&implied) {
        tracing::info!("{line}");
    }
    // The operator of --via-operator gets the payloads as loaded here.
    let kept = options.via_operator.then(|| {
        [
            (
                from_version.clone().unwrap_or_default(),
                Arc::new(old.clone()),
            ),
            (
                to_version.clone().unwrap_or_default(),
                Arc::new(new.clone()),
            ),
        ]
    });
    let mut old_plan = plan::from_payload(old, &old_filters, Mode::Initializing, 0);
    old_plan.version.clone_from(&from_version);
    let mut new_plan = plan::from_payload(new, &new_filters, Mode::Updating, 0);
    new_plan.version.clone_from(&to_version);
    let (old_plan, new_plan) = (Arc::new(old_plan), Arc::new(new_plan));

    let old_ops = simulate::operators(&old_plan);
    let new_ops = simulate::operators(&new_plan);
    let mut known: Vec<&str> = old_ops
        .iter()
        .chain(&new_ops)
        .map(|o| o.name.as_str())
        .collect();
    known.sort_unstable();
    known.dedup();
    let all = Scripts::all(&options.specs, options.default_delay);
    if let Some(u) = all.unknown(&known).first() {
        return Err(E2eError::UnknownOperator(
            (*u).to_string(),
            known.join(", "),
        ));
    }

    if options.clean {
        let c = super::cleanup::clean(
            &clients.apply.client,
            &[&old_plan, &new_plan],
            CLEAN_TIMEOUT,
        )
        .await?;
        tracing::info!(
            "cleaned: {} objects deleted in {:.1}s",
            c.deleted,
            c.seconds
        );
        if options.via_operator {
            // The operator installs (initializing mode) only a cluster with no completed update.
            super::via_operator::forget_cluster_version(&clients.apply).await?;
        }
    }
    let stub_started = Instant::now();
    let requests_before = clients.apply.requests.get();
    let stubs = preflight::ensure(
        &clients.apply.client,
        &[&old_plan, &new_plan],
        StandIns {
            crds: options.stub_missing_crds,
            namespaces: options.create_missing_namespaces,
        },
        options.apply.runner.crd_timeout,
    )
    .await?;
    let stub_requests = clients.apply.requests.get() - requests_before;
    let stub_seconds = stub_started.elapsed().as_secs_f64();

    let recorder = Arc::new(Recorder::new(started));
    let workloads: Vec<crate::manifest::ObjectId> = {
        let mut ids: Vec<_> = old_plan
            .tasks
            .iter()
            .chain(&new_plan.tasks)
            .filter(|t| simulate::operators::is_simulated_workload(&t.manifest))
            .map(|t| t.manifest.id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    let real = if options.real_pods {
        Some(
            super::real_pods::RealPods::start(
                clients.simulator.client.clone(),
                workloads.clone(),
                recorder.clone() as Arc<dyn SimObserver>,
            )
            .await,
        )
    } else {
        None
    };
    let pods = (options.live_pods && !options.real_pods).then(|| {
        PodSimulator::start(
            clients.simulator.client.clone(),
            workloads,
            PodOptions {
                follow_rollout: options.wait_available,
                ..options.pods.clone()
            },
            Some(recorder.clone() as Arc<dyn SimObserver>),
        )
    });
    let board = pods.as_ref().map(PodSimulator::board);
    let mut runs = Vec::new();
    let mut driver = kept.map(|payloads| Operated {
        payloads: Some(payloads),
        from: from_version.clone().unwrap_or_default(),
        to: to_version.clone().unwrap_or_default(),
        driver: None,
    });
    for (phase, plan, ops, caps) in [
        (Phase::Install, &old_plan, old_ops, old_caps),
        (Phase::Upgrade, &new_plan, new_ops, new_caps),
    ] {
        if cancel.is_cancelled() {
            break;
        }
        let run = run_phase(
            clients,
            options,
            phase,
            plan.clone(),
            ops,
            caps,
            &recorder,
            board.clone(),
            observer.clone(),
            driver.as_mut(),
            cancel.clone(),
        )
        .await;
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                if let Some(d) = driver.and_then(|d| d.driver) {
                    d.stop().await;
                }
                return Err(e);
            }
        };
        let ok = run.report.ok;
        runs.push(run);
        if !ok {
            break;
        }
    }

    if let Some(d) = driver.and_then(|d| d.driver) {
        d.stop().await;
    }
    let pod_summary = match pods {
        Some(p) => Some(p.stop().await),
        None => None,
    };
    let real_summary = match real {
        Some(r) => Some(r.stop().await),
        None => None,
    };
    let ended = Instant::now();
    let mut timeline = recorder.timeline();
    super::harm::attribute(&mut timeline, &old_plan, &new_plan);
    let lease_gaps = pod_summary
        .iter()
        .flat_map(|s| &s.lease_gaps)
        .chain(real_summary.iter().flat_map(|s| &s.lease_gaps))
        .map(|g| super::harm::LeaseGapReport::new(g, started, ended))
        .collect();
    let danger_windows: Vec<super::danger::DangerWindowReport> = pod_summary
        .iter()
        .flat_map(|s| &s.danger_windows)
        .map(|w| super::danger::DangerWindowReport::new(w, started, ended, &timeline))
        .collect();
    let mut checks: Vec<Check> = Vec::new();
    checks.extend(checks::invariants(&timeline, Phase::Install, &old_plan));
    if runs.len() > 1 {
        checks.extend(checks::invariants(&timeline, Phase::Upgrade, &new_plan));
        checks.push(checks::delete_before_workload_update(
            &timeline, &old_plan, &new_plan,
        ));
    }
    if let Some(s) = &pod_summary {
        checks.push(super::harm::live_pods_keep_access(
            &timeline,
            s.pods_started,
            danger_windows.len(),
        ));
    }
    if let Some(s) = &real_summary {
        checks.push(super::harm::real_pods_keep_access(&timeline, s));
    }
    checks.extend(checks::assertions(&timeline, &options.assertions));
    if options.clean_after {
        match super::cleanup::clean(
            &clients.apply.client,
            &[&old_plan, &new_plan],
            CLEAN_TIMEOUT,
        )
        .await
        {
            Ok(c) => tracing::info!(
                "cleaned up: {} objects deleted in {:.1}s",
                c.deleted,
                c.seconds
            ),
            Err(e) => warnings.push(format!("after the run: {e}")),
        }
    }
    Ok(UpgradeReport {
        from: options.from.display().to_string(),
        to: options.to.display().to_string(),
        from_version,
        to_version,
        warnings,
        stubs,
        stub_requests,
        stub_seconds,
        runs,
        timeline,
        checks,
        lease_gaps,
        danger_windows,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[allow(clippy::too_many_arguments)]
async fn run_phase(
    clients: &Clients,
    options: &UpgradeOptions,
    phase: Phase,
    plan: Arc<Plan>,
    ops: Vec<simulate::OperatorSpec>,
    capabilities: crate::cvo::capabilities::CapabilityStatus,
    recorder: &Arc<Recorder>,
    pods: Option<Arc<PodBoard>>,
    observer: Option<Arc<dyn ApplyObserver>>,
    operated: Option<&mut Operated>,
    cancel: CancellationToken,
) -> Result<PhaseRun, E2eError> {
    let script_phase = match phase {
        Phase::Install => ScriptPhase::Install,
        Phase::Upgrade => ScriptPhase::Upgrade,
    };
    recorder.begin(phase, plan.clone());
    let sim_before = clients.simulator.requests.get();
    let mut apply_options = options.apply.clone();
    apply_options.runner.simulated_pods.clone_from(&pods);
    let simulator = Simulator::start(
        clients.simulator.client.clone(),
        ops,
        SimulatorOptions {
            scripts: Scripts::for_phase(&options.specs, script_phase, options.default_delay),
            wait_available: options.wait_available,
            pods,
        },
        Some(recorder.clone() as Arc<dyn SimObserver>),
    );
    // Both payloads were checked (and stand-ins installed) before the install.
    apply_options.preflight = None;
    apply_options.runner.mode = plan.mode;
    apply_options.capabilities = Some(capabilities);
    let fanout: Arc<dyn ApplyObserver> = Arc::new(Fanout(recorder.clone(), observer));
    let result = match operated {
        None => apply::run(&clients.apply, plan.clone(), &apply_options, fanout, cancel)
            .await
            .map_err(E2eError::from),
        Some(op) => {
            op.phase(clients, options, phase, &apply_options, fanout, &cancel)
                .await
        }
    };
    let summary = simulator.stop().await;
    let report = result?;
    Ok(PhaseRun {
        phase,
        mode: report.mode,
        version: plan.version.clone(),
        report,
        simulator_requests: clients.simulator.requests.get() - sim_before,
        simulator_reports: summary.reports.values().sum(),
    })
}
