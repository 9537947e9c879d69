//! The result of a run: counts per outcome, per-run-level durations, failures naming file and
//! object, deletions still in progress, and the request count. Built from the run's events by
//! [`ReportBuilder`]; serialized as the `ApplyResult` JSON contract:
//!
//! ```json
//! {"apiVersion": "minicvo/v1alpha1", "kind": "ApplyResult", "version": "4.14.0",
//!  "mode": "updating", "dryRun": false, "ok": true, "stopped": null, "seconds": 3.2,
//!  "counts": {"created": 0, "configured": 0, "unchanged": 0, "createOnlySkipped": 0,
//!             "deleted": 0, "alreadyAbsent": 0, "deletesSkipped": 0, "waited": 0,
//!             "skipped": 0, "notServed": 0, "wouldWait": 0, "failed": 0,
//!             "interrupted": 0, "notRun": 0},
//!  "levels": [{"runLevel": "80", "seconds": 1.2}],
//!  "errors": [{"file": "release-manifests/0000_80_x.yaml", "document": 0, "kind": "ConfigMap",
//!              "namespace": "ns", "name": "x", "message": "..."}],
//!  "blocked": {"nodes": 2, "tasks": 5, "first": "release-manifests/..."},
//!  "deletesInProgress": [{"file": .., "kind": .., "namespace": .., "name": ..}],
//!  "tasks": [{"id": 0, "file": .., "document": 0, "kind": .., "namespace": .., "name": ..,
//!             "outcome": "created", "detail": null, "attempts": 1, "seconds": 0.01}],
//!  "requests": 23, "clusterVersion": "recorded"}
//! ```

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use super::events::{ApplyEvent, ApplyObserver, EventKind, Outcome, StopReason, TaskRef};
use crate::manifest::ObjectId;
use crate::plan::Mode;

/// Tasks per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Counts {
    pub created: usize,
    pub configured: usize,
    pub unchanged: usize,
    pub create_only_skipped: usize,
    pub deleted: usize,
    pub already_absent: usize,
    pub deletes_skipped: usize,
    pub waited: usize,
    pub skipped: usize,
    pub not_served: usize,
    pub would_wait: usize,
    pub failed: usize,
    pub interrupted: usize,
    /// Tasks that never started (blocked by a failure, or the run stopped).
    pub not_run: usize,
}

impl Counts {
    fn add(&mut self, o: Outcome) {
        let c = match o {
            Outcome::Created => &mut self.created,
            Outcome::Configured => &mut self.configured,
            Outcome::Unchanged => &mut self.unchanged,
            Outcome::CreateOnlySkipped => &mut self.create_only_skipped,
            Outcome::Deleted => &mut self.deleted,
            Outcome::AlreadyAbsent => &mut self.already_absent,
            Outcome::DeleteSkipped => &mut self.deletes_skipped,
            Outcome::Waited => &mut self.waited,
            Outcome::Skipped => &mut self.skipped,
            Outcome::NotServed => &mut self.not_served,
            Outcome::WouldWait => &mut self.would_wait,
            Outcome::Failed => &mut self.failed,
            Outcome::Interrupted => &mut self.interrupted,
        };
        *c += 1;
    }
}

/// Time from the first task start to the last task end of a run-level.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LevelTiming {
    /// The run-level (`None` for files whose names carry none).
    pub run_level: Option<String>,
    /// Seconds.
    pub seconds: f64,
}

/// A failed task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFailure {
    /// Payload-relative file.
    pub file: String,
    /// Document index in the file.
    pub document: usize,
    /// The object (its fields appear flat in JSON: `group`, `kind`, `namespace`, `name`).
    #[serde(flatten)]
    pub object: ObjectId,
    /// The cause.
    pub message: String,
}

impl std::fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}#{} {}: {}",
            self.file,
            self.document,
            self.object.short(),
            self.message
        )
    }
}

/// An object named in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// Payload-relative file.
    pub file: String,
    /// The object (serialized as `kind`, `namespace`, `name`).
    #[serde(flatten, serialize_with = "crate::manifest::serialize_without_group")]
    pub object: ObjectId,
}

impl From<&TaskRef> for ObjectRef {
    fn from(t: &TaskRef) -> Self {
        ObjectRef {
            file: t.file.clone(),
            object: t.object.clone(),
        }
    }
}

/// Nodes that never ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    /// Graph nodes that did not start (the CVO's count includes empty spacer nodes).
    pub nodes: usize,
    /// Tasks that did not start.
    pub tasks: usize,
    /// The first task that did not start, as `file#doc Kind ns/name`.
    pub first: Option<String>,
}

/// One task's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    /// Task index.
    pub id: usize,
    /// Payload-relative file.
    pub file: String,
    /// Document index.
    pub document: usize,
    /// The object (serialized as `kind`, `namespace`, `name`).
    #[serde(flatten, serialize_with = "crate::manifest::serialize_without_group")]
    pub object: ObjectId,
    /// Run-level.
    pub run_level: Option<String>,
    /// What happened.
    pub outcome: Outcome,
    /// More about it.
    pub detail: Option<String>,
    /// Requests tried for the main call.
    pub attempts: u32,
    /// Seconds it ran.
    pub seconds: f64,
}

/// The `ApplyResult` document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    /// `minicvo/v1alpha1`.
    pub api_version: &'static str,
    /// `ApplyResult`.
    pub kind: &'static str,
    /// Release version.
    pub version: Option<String>,
    /// Mode.
    pub mode: Mode,
    /// Whether writes were server dry runs.
    pub dry_run: bool,
    /// No failures and not stopped.
    pub ok: bool,
    /// Why the run stopped early.
    pub stopped: Option<StopReason>,
    /// Wall time of the run.
    pub seconds: f64,
    /// Tasks per outcome.
    pub counts: Counts,
    /// Per run-level durations, in order of first start.
    pub levels: Vec<LevelTiming>,
    /// Failures, in node order (the CVO's order).
    pub errors: Vec<TaskFailure>,
    /// What never ran.
    pub blocked: Option<Blocked>,
    /// Deletions requested but not seen to finish.
    pub deletes_in_progress: Vec<ObjectRef>,
    /// Every task that ran, in load order.
    pub tasks: Vec<TaskSummary>,
    /// HTTP requests sent.
    pub requests: u64,
    /// What happened to ClusterVersion `version`: `recorded`, `not served`, or an error.
    pub cluster_version: Option<String>,
    /// What the preflight installed (stub CRDs, namespaces); not part of the JSON report.
    #[serde(skip)]
    pub preflight: crate::stub_crds::StubReport,
}

impl ApplyReport {
    /// The one-line summary, e.g. `3 created, 2 configured, ... 0 failed`.
    #[must_use]
    pub fn counts_line(&self) -> String {
        let c = &self.counts;
        let mut parts = vec![
            format!("{} created", c.created),
            format!("{} configured", c.configured),
            format!("{} unchanged", c.unchanged),
            format!("{} create-only skipped", c.create_only_skipped),
            format!("{} deleted", c.deleted),
        ];
        if c.already_absent > 0 {
            parts.push(format!("{} already absent", c.already_absent));
        }
        parts.push(format!("{} deletes skipped", c.deletes_skipped));
        parts.push(format!("{} waited", c.waited));
        for (n, what) in [
            (c.skipped, "skipped"),
            (c.not_served, "not served yet"),
            (c.would_wait, "would wait"),
            (c.interrupted, "interrupted"),
            (c.not_run, "not run"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        parts.push(format!("{} failed", c.failed));
        parts.join(", ")
    }
}

#[derive(Default)]
struct State {
    counts: Counts,
    levels: Vec<(Option<String>, Duration, Duration)>,
    started: HashMap<usize, Duration>,
    failures: Vec<(usize, usize, TaskFailure)>,
    tasks: Vec<TaskSummary>,
}

/// Builds an [`ApplyReport`] from events.
#[derive(Default)]
pub struct ReportBuilder(Mutex<State>);

impl ApplyObserver for ReportBuilder {
    fn on_event(&self, event: &ApplyEvent) {
        let mut s = self.0.lock().expect("report lock");
        match &event.kind {
            EventKind::TaskStarted { task } => {
                s.started.insert(task.id, event.elapsed);
            }
            EventKind::TaskFinished {
                task,
                outcome,
                detail,
                error,
                attempts,
                duration,
            } => {
                s.counts.add(*outcome);
                let start = s.started.get(&task.id).copied().unwrap_or(event.elapsed);
                let end = event.elapsed;
                match s.levels.iter_mut().find(|l| l.0 == task.run_level) {
                    Some(l) => {
                        l.1 = l.1.min(start);
                        l.2 = l.2.max(end);
                    }
                    None => s.levels.push((task.run_level.clone(), start, end)),
                }
                if *outcome == Outcome::Failed {
                    s.failures.push((
                        task.node,
                        task.id,
                        TaskFailure {
                            file: task.file.clone(),
                            document: task.document,
                            object: task.object.clone(),
                            message: error.clone().unwrap_or_default(),
                        },
                    ));
                }
                s.tasks.push(TaskSummary {
                    id: task.id,
                    file: task.file.clone(),
                    document: task.document,
                    object: task.object.clone(),
                    run_level: task.run_level.clone(),
                    outcome: *outcome,
                    detail: detail.clone().or_else(|| error.clone()),
                    attempts: *attempts,
                    seconds: duration.as_secs_f64(),
                });
            }
            _ => {}
        }
    }
}

/// What the run itself knows besides the events.
#[derive(Debug, Clone)]
pub struct RunFacts {
    /// Release version.
    pub version: Option<String>,
    /// Mode.
    pub mode: Mode,
    /// Dry run.
    pub dry_run: bool,
    /// Why it stopped early.
    pub stopped: Option<StopReason>,
    /// Wall time.
    pub elapsed: Duration,
    /// Tasks that never started.
    pub not_run: Vec<TaskRef>,
    /// Nodes that never started.
    pub not_run_nodes: usize,
    /// Deletions still in progress.
    pub deletes_in_progress: Vec<TaskRef>,
    /// Requests sent.
    pub requests: u64,
    /// ClusterVersion recording result.
    pub cluster_version: Option<String>,
}

impl ReportBuilder {
    /// The report.
    ///
    /// # Panics
    /// If an observer panicked while holding the lock.
    #[must_use]
    pub fn finish(&self, facts: RunFacts) -> ApplyReport {
        let mut s = self.0.lock().expect("report lock");
        s.counts.not_run = facts.not_run.len();
        s.failures.sort_by_key(|f| (f.0, f.1));
        s.tasks.sort_by_key(|t| t.id);
        let errors: Vec<TaskFailure> = s.failures.iter().map(|f| f.2.clone()).collect();
        let blocked = (!facts.not_run.is_empty() || facts.not_run_nodes > 0).then(|| Blocked {
            nodes: facts.not_run_nodes,
            tasks: facts.not_run.len(),
            first: facts.not_run.first().map(TaskRef::label),
        });
        ApplyReport {
            preflight: crate::stub_crds::StubReport::default(),
            api_version: "minicvo/v1alpha1",
            kind: "ApplyResult",
            version: facts.version,
            mode: facts.mode,
            dry_run: facts.dry_run,
            ok: errors.is_empty() && facts.stopped.is_none() && s.counts.interrupted == 0,
            stopped: facts.stopped,
            seconds: facts.elapsed.as_secs_f64(),
            counts: s.counts.clone(),
            levels: s
                .levels
                .iter()
                .map(|(l, a, b)| LevelTiming {
                    run_level: l.clone(),
                    seconds: (*b - *a).as_secs_f64(),
                })
                .collect(),
            errors,
            blocked,
            deletes_in_progress: facts
                .deletes_in_progress
                .iter()
                .map(ObjectRef::from)
                .collect(),
            tasks: std::mem::take(&mut s.tasks),
            requests: facts.requests,
            cluster_version: facts.cluster_version,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::apply::events::{Emitter, EventLog};
    use crate::plan::Action;

    fn task(id: usize, node: usize, level: &str) -> TaskRef {
        TaskRef {
            id,
            node,
            run_level: Some(level.into()),
            component: Some("c".into()),
            file: format!("release-manifests/0000_{level}_c_{id:02}.yaml"),
            document: 0,
            api_version: "v1".into(),
            object: ObjectId {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: format!("cm{id}"),
            },
            action: Action::Apply,
        }
    }

    fn finished(t: &TaskRef, outcome: Outcome, error: Option<&str>) -> EventKind {
        EventKind::TaskFinished {
            task: t.clone(),
            outcome,
            detail: None,
            error: error.map(str::to_owned),
            attempts: 1,
            duration: Duration::ZERO,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn counts_levels_and_failures_in_node_order() {
        let builder = Arc::new(ReportBuilder::default());
        let log = Arc::new(EventLog::new());
        let e = Emitter::new(Arc::new(crate::apply::events::Observers(vec![
            builder.clone(),
            log.clone(),
        ])));
        let (a, b, c) = (task(0, 2, "10"), task(1, 1, "10"), task(2, 3, "20"));
        e.emit(EventKind::TaskStarted { task: a.clone() });
        e.emit(EventKind::TaskStarted { task: b.clone() });
        tokio::time::advance(Duration::from_secs(2)).await;
        e.emit(finished(&a, Outcome::Failed, Some("a broke")));
        e.emit(finished(&b, Outcome::Failed, Some("b broke")));
        e.emit(EventKind::TaskStarted { task: c.clone() });
        tokio::time::advance(Duration::from_secs(1)).await;
        e.emit(finished(&c, Outcome::Created, None));
        let r = builder.finish(RunFacts {
            version: Some("1".into()),
            mode: Mode::Updating,
            dry_run: false,
            stopped: None,
            elapsed: Duration::from_secs(3),
            not_run: vec![task(3, 4, "30")],
            not_run_nodes: 1,
            deletes_in_progress: Vec::new(),
            requests: 7,
            cluster_version: None,
        });
        assert!(!r.ok);
        assert_eq!(
            (r.counts.failed, r.counts.created, r.counts.not_run),
            (2, 1, 1)
        );
        // Node 1 (b) before node 2 (a), the CVO's order.
        assert_eq!(r.errors[0].object.name, "cm1");
        assert_eq!(
            r.errors[1].to_string(),
            "release-manifests/0000_10_c_00.yaml#0 ConfigMap ns/cm0: a broke"
        );
        assert_eq!(
            r.levels,
            vec![
                LevelTiming {
                    run_level: Some("10".into()),
                    seconds: 2.0
                },
                LevelTiming {
                    run_level: Some("20".into()),
                    seconds: 1.0
                },
            ]
        );
        let b = r.blocked.clone().unwrap();
        assert_eq!((b.nodes, b.tasks), (1, 1));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["counts"]["createOnlySkipped"], 0);
        assert_eq!(json["levels"][0]["runLevel"], "10");
        assert_eq!(json["errors"][0]["namespace"], "ns");
        assert_eq!(log.events().len(), 6);
    }
}
