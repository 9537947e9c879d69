//! The result of an upgrade e2e, as text, JSON summary, JUnit XML and Chrome trace.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::checks::{Check, STORY_CHECK};
use super::junit::{RunCase, junit};
use super::timeline::{Phase, Timeline};
use super::trace::chrome_trace;
use crate::apply::ApplyReport;
use crate::plan::Mode;
use crate::plan::breaks::level_and_component;
use crate::stub_crds::StubReport;

/// One apply run of the e2e.
#[derive(Debug, Clone)]
pub struct PhaseRun {
    /// Install or upgrade.
    pub phase: Phase,
    /// The graph mode.
    pub mode: Mode,
    /// The payload version.
    pub version: Option<String>,
    /// The apply report.
    pub report: ApplyReport,
    /// Requests the simulator sent during the run.
    pub simulator_requests: u64,
    /// Status writes of the simulator.
    pub simulator_reports: usize,
}

impl PhaseRun {
    /// Why the run failed, naming the run-level, or `None`.
    #[must_use]
    pub fn failure(&self) -> Option<String> {
        if self.report.ok {
            return None;
        }
        let mut levels: Vec<String> = Vec::new();
        let mut lines = Vec::new();
        for e in &self.report.errors {
            let base = e.file.rsplit('/').next().unwrap_or(&e.file);
            if let Some((level, _)) = level_and_component(base)
                && !levels.contains(&level)
            {
                levels.push(level);
            }
            lines.push(e.to_string());
        }
        let at = match levels.as_slice() {
            [] => String::new(),
            [one] => format!(" at run-level {one}"),
            many => format!(" at run-levels {}", many.join(", ")),
        };
        let mut msg = format!("{} failed{at}", self.phase);
        if let Some(s) = self.report.stopped {
            let _ = write!(
                msg,
                " (stopped: {})",
                serde_json::to_value(s)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("stopped")
            );
        }
        for l in lines {
            let _ = write!(msg, "\n  {l}");
        }
        // A status the server rejected fails the run without any task failing: say so.
        if let Some(cv) = self
            .report
            .cluster_version
            .as_deref()
            .filter(|c| *c != "recorded" && *c != "not served")
        {
            let _ = write!(msg, "\n  ClusterVersion status: {cv}");
        }
        if let Some(b) = &self.report.blocked {
            let _ = write!(
                msg,
                "\n  {} task{} did not run{}",
                b.tasks,
                if b.tasks == 1 { "" } else { "s" },
                b.first
                    .as_ref()
                    .map_or_else(String::new, |f| format!(", beginning with {f}"))
            );
        }
        Some(msg)
    }
}

/// What an upgrade e2e did and found.
#[derive(Debug, Clone)]
pub struct UpgradeReport {
    /// OLD payload path.
    pub from: String,
    /// NEW payload path.
    pub to: String,
    /// OLD version.
    pub from_version: Option<String>,
    /// NEW version.
    pub to_version: Option<String>,
    /// Non-fatal problems.
    pub warnings: Vec<String>,
    /// Stub CRDs installed.
    pub stubs: StubReport,
    /// Requests of the missing-kind check and the stubs.
    pub stub_requests: u64,
    /// Seconds of the missing-kind check and the stubs.
    pub stub_seconds: f64,
    /// The runs (install, then upgrade when the install succeeded).
    pub runs: Vec<PhaseRun>,
    /// Every write, wait and watch event.
    pub timeline: Timeline,
    /// Invariants, the story check and assertions.
    pub checks: Vec<Check>,
    /// Leaderless times of the simulated pods' leases.
    pub lease_gaps: Vec<super::harm::LeaseGapReport>,
    /// Times during which no pod of a workload's current template could have started
    /// (warnings: they fail no check).
    pub danger_windows: Vec<super::danger::DangerWindowReport>,
    /// Wall time of the whole e2e.
    pub seconds: f64,
}

impl UpgradeReport {
    /// The run of `phase`, if it ran.
    #[must_use]
    pub fn run(&self, phase: Phase) -> Option<&PhaseRun> {
        self.runs.iter().find(|r| r.phase == phase)
    }

    /// Whether both runs completed.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.runs.len() == 2 && self.runs.iter().all(|r| r.report.ok)
    }

    /// Whether both runs completed and every check passed.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.completed() && self.checks.iter().all(Check::passed)
    }

    /// The check named `name` of `phase` (`None` phase: assertions).
    #[must_use]
    pub fn check(&self, phase: Option<Phase>, name: &str) -> Option<&Check> {
        self.checks
            .iter()
            .find(|c| c.phase == phase && c.name == name)
    }

    /// The story check's findings.
    #[must_use]
    pub fn story_findings(&self) -> Vec<&str> {
        self.check(Some(Phase::Upgrade), STORY_CHECK)
            .map(|c| c.failures.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Requests minicvo sent (stubs, install, upgrade).
    #[must_use]
    pub fn apply_requests(&self) -> u64 {
        self.stub_requests + self.runs.iter().map(|r| r.report.requests).sum::<u64>()
    }

    /// Requests the simulator sent.
    #[must_use]
    pub fn simulator_requests(&self) -> u64 {
        self.runs.iter().map(|r| r.simulator_requests).sum()
    }

    fn titles(&self) -> Vec<(Phase, String)> {
        self.runs
            .iter()
            .map(|r| {
                let (path, v) = match r.phase {
                    Phase::Install => (&self.from, &self.from_version),
                    Phase::Upgrade => (&self.to, &self.to_version),
                };
                (
                    r.phase,
                    format!(
                        "{} {path} ({}, {})",
                        r.phase,
                        v.as_deref().unwrap_or("version unknown"),
                        r.mode
                    ),
                )
            })
            .collect()
    }

    /// JUnit XML.
    #[must_use]
    pub fn junit(&self) -> String {
        let runs: Vec<RunCase> = self
            .runs
            .iter()
            .map(|r| RunCase {
                phase: r.phase,
                seconds: r.report.seconds,
                failure: r.failure(),
            })
            .collect();
        junit(&runs, &self.checks)
    }

    /// The Chrome trace JSON.
    #[must_use]
    pub fn chrome_trace(&self) -> Value {
        chrome_trace(&self.timeline, &self.titles())
    }

    /// A JSON summary (`-o json`).
    #[must_use]
    pub fn json(&self) -> Value {
        json!({
            "apiVersion": "minicvo/v1alpha1",
            "kind": "E2eUpgradeResult",
            "from": {"path": self.from, "version": self.from_version},
            "to": {"path": self.to, "version": self.to_version},
            "ok": self.ok(),
            "completed": self.completed(),
            "seconds": self.seconds,
            "warnings": self.warnings,
            "createdNamespaces": self.stubs.namespaces,
            "stubCrds": self.stubs.installed.iter().map(|(n, k)| json!({"name": n, "serves": k})).collect::<Vec<_>>(),
            "runs": self.runs.iter().map(|r| json!({
                "phase": r.phase,
                "mode": r.mode,
                "version": r.version,
                "ok": r.report.ok,
                "seconds": r.report.seconds,
                "requests": r.report.requests,
                "simulatorRequests": r.simulator_requests,
                "simulatorReports": r.simulator_reports,
                "counts": r.report.counts,
                "failure": r.failure(),
            })).collect::<Vec<_>>(),
            "requests": {"minicvo": self.apply_requests(), "simulator": self.simulator_requests()},
            "leaseGaps": self.lease_gaps,
            "dangerWindows": self.danger_windows,
            "checks": self.checks.iter().map(|c| json!({
                "phase": c.phase,
                "name": c.name,
                "passed": c.passed(),
                "findings": c.failures,
                "notes": c.notes,
            })).collect::<Vec<_>>(),
        })
    }

    /// The human summary.
    #[must_use]
    pub fn text(&self) -> String {
        let mut out = String::new();
        let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "version unknown".into());
        let _ = writeln!(
            out,
            "e2e upgrade {} ({}) -> {} ({})",
            self.from,
            v(&self.from_version),
            self.to,
            v(&self.to_version)
        );
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        if !self.stubs.namespaces.is_empty() {
            let _ = writeln!(
                out,
                "namespaces created (used but created by neither payload): {}",
                self.stubs.namespaces.join(", ")
            );
        }
        if self.stubs.installed.is_empty() {
            let _ = writeln!(out, "stub CRDs: none needed");
        } else {
            let _ = writeln!(out, "stub CRDs installed for kinds nothing served:");
            for (name, kind) in &self.stubs.installed {
                let _ = writeln!(out, "  {name} ({kind})");
            }
        }
        for r in &self.runs {
            let state = if r.report.ok { "ok" } else { "FAILED" };
            let _ = writeln!(
                out,
                "{:<8} {state} in {:.2}s ({} mode, {}), {} requests, simulator {} requests and {} status writes",
                r.phase.to_string(),
                r.report.seconds,
                r.mode,
                r.report.counts_line(),
                r.report.requests,
                r.simulator_requests,
                r.simulator_reports
            );
            if let Some(f) = r.failure() {
                let _ = writeln!(out, "{f}");
            }
        }
        if self.runs.len() < 2 {
            let _ = writeln!(out, "upgrade  not run (the install did not complete)");
        }
        for g in &self.lease_gaps {
            let until =
                g.to.map_or_else(|| "the end of the run".to_string(), |t| format!("{t:.3}s"));
            let _ = writeln!(
                out,
                "lease gap: no pod of {} could lead for {:.2}s (from {:.3}s, after {} held the \
                 lease, to {until})",
                g.workload, g.seconds, g.from, g.pod
            );
        }
        for w in &self.danger_windows {
            let _ = writeln!(out, "warning: {}", w.line());
        }
        let _ = writeln!(out, "checks:");
        for c in &self.checks {
            if c.passed() {
                let _ = writeln!(out, "  ok    {}", c.title());
                if c.name == STORY_CHECK || c.phase.is_none() {
                    for n in &c.notes {
                        let _ = writeln!(out, "        {n}");
                    }
                }
            } else {
                let _ = writeln!(out, "  FAIL  {}: {}", c.title(), c.description);
                for f in &c.failures {
                    let _ = writeln!(out, "        {f}");
                }
            }
        }
        let failed = self.checks.iter().filter(|c| !c.passed()).count();
        // A run that failed (or never started) fails the e2e even when every check passed.
        let incomplete = match self.runs.iter().find(|r| !r.report.ok) {
            Some(r) => format!("{} run failed, ", r.phase),
            None if self.runs.len() < 2 => "upgrade not run, ".to_string(),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "{}: {incomplete}{} check{} failed; {:.2}s, {} requests by minicvo, {} by the simulator",
            if self.ok() { "PASS" } else { "FAIL" },
            failed,
            if failed == 1 { "" } else { "s" },
            self.seconds,
            self.apply_requests(),
            self.simulator_requests()
        );
        out
    }
}
