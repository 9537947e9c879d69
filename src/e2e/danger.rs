//! Danger windows: the warnings of the live pods ([`crate::simulate::pods::DangerWindow`]).
//!
//! A window is a time during which pods of a workload's current template ran but no pod of that
//! template could have started: an object the template mounts or takes its environment from
//! was deleted. A running pod keeps such an object (the kubelet keeps its volume files; its
//! environment was fixed when its container started), so this is no harm and does not fail
//! `live-pods-keep-access`; it is what would fail if the pod had to start again (a restart on
//! another node, a scale-up) before the window closed. Its cause is the delete of the object,
//! named as a harm's cause is ([`super::harm::attribute`]).

use serde::Serialize;
use tokio::time::Instant;

use super::timeline::{Timeline, TimelineEvent};
use crate::simulate::pods::DangerWindow;

/// A danger window, in seconds of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DangerWindowReport {
    /// `Kind namespace/name` of the workload.
    pub workload: String,
    /// A running pod of the template (`<workload>#<generation>`).
    pub pod: String,
    /// What is gone, how the template uses it and what it would stop.
    pub what: String,
    /// When it opened.
    pub from: f64,
    /// When it closed (`None`: still open at the end of the run).
    pub to: Option<f64>,
    /// How long it was open.
    pub seconds: f64,
    /// Why it closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
    /// The write that deleted the object (`delete ConfigMap ns/name`), when the run made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// That write's task index in its phase's plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause_task: Option<usize>,
}

impl DangerWindowReport {
    /// The window `w` with times since `start` (open windows end at `end`), its cause the
    /// latest delete of its object in `timeline` begun before it opened.
    #[must_use]
    pub fn new(w: &DangerWindow, start: Instant, end: Instant, timeline: &Timeline) -> Self {
        let at = |i: Instant| i.saturating_duration_since(start).as_secs_f64();
        let (from, to) = (at(w.from), w.to.map(at));
        // The watch may see the object gone before the delete's response reached minicvo:
        // a delete counts from its task's start.
        let begun = |e: &TimelineEvent| e.start.unwrap_or(e.t);
        let cause = timeline
            .events
            .iter()
            .filter(|e| begun(e) <= from && e.is_delete_issued() && e.object == w.object)
            .max_by(|a, b| begun(a).total_cmp(&begun(b)));
        DangerWindowReport {
            workload: format!(
                "{} {}/{}",
                w.workload.kind,
                w.workload.namespace.as_deref().unwrap_or_default(),
                w.workload.name
            ),
            pod: w.pod.clone(),
            what: w.what.clone(),
            from,
            to,
            seconds: to.unwrap_or_else(|| at(end)) - from,
            closed_by: w.closed_by.clone(),
            cause: cause.map(|e| format!("{} {}", e.action, e.object)),
            cause_task: cause.and_then(|e| e.task),
        }
    }

    /// One line for the text report.
    #[must_use]
    pub fn line(&self) -> String {
        let until = self
            .to
            .map_or_else(|| "the end of the run".to_string(), |t| format!("{t:.3}s"));
        let cause = match (&self.cause, self.cause_task) {
            (Some(c), Some(task)) => format!("; caused by {c} (task {task})"),
            (Some(c), None) => format!("; caused by {c}"),
            _ => String::new(),
        };
        let closed = self
            .closed_by
            .as_ref()
            .map_or_else(String::new, |c| format!("; closed: {c}"));
        format!(
            "danger window of {} for {:.2}s (from {:.3}s to {until}): pod {} runs without {}{cause}{closed}",
            self.workload, self.seconds, self.from, self.pod, self.what
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::e2e::timeline::{Phase, TimelineAction};
    use crate::manifest::ObjectId;

    fn id(kind: &str, name: &str) -> ObjectId {
        ObjectId {
            group: if kind == "Deployment" { "apps" } else { "" }.into(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn delete(t: f64, object: ObjectId, task: usize) -> TimelineEvent {
        TimelineEvent {
            t,
            phase: Phase::Upgrade,
            action: TimelineAction::Delete,
            object,
            run_level: Some("40".into()),
            node: Some(1),
            task: Some(task),
            start: Some(t - 0.2),
            outcome: Some("deleted".into()),
            detail: None,
            harm: None,
        }
    }

    #[test]
    fn a_window_is_caused_by_the_last_delete_of_its_object_before_it_opened() {
        let start = Instant::now();
        let w = DangerWindow {
            workload: id("Deployment", "op"),
            pod: "op#1".into(),
            what: "ConfigMap ns/config (volume config): a new pod of its template could not start"
                .into(),
            object: id("ConfigMap", "config"),
            from: start + Duration::from_millis(1500),
            to: Some(start + Duration::from_millis(2000)),
            closed_by: Some("Deployment.apps ns/op moved to a new template".into()),
        };
        let timeline = Timeline {
            events: vec![
                delete(0.5, id("ConfigMap", "config"), 3),
                delete(1.4, id("ConfigMap", "config"), 7),
                // Seen gone by the watch before minicvo had the delete's answer.
                delete(1.65, id("ConfigMap", "config"), 10),
                delete(1.45, id("ConfigMap", "other"), 8),
                delete(1.9, id("ConfigMap", "config"), 9),
            ],
        };
        let r = DangerWindowReport::new(&w, start, start + Duration::from_secs(5), &timeline);
        assert_eq!(r.cause.as_deref(), Some("delete ConfigMap ns/config"));
        assert_eq!(r.cause_task, Some(10));
        assert!((r.seconds - 0.5).abs() < 1e-9, "{}", r.seconds);
        assert_eq!(r.workload, "Deployment ns/op");
        let line = r.line();
        assert!(
            line.contains("pod op#1 runs without ConfigMap ns/config"),
            "{line}"
        );
        assert!(
            line.contains("(task 10); closed: Deployment.apps"),
            "{line}"
        );

        let open = DangerWindow { to: None, ..w };
        let r = DangerWindowReport::new(&open, start, start + Duration::from_secs(5), &timeline);
        assert_eq!(r.to, None);
        assert!((r.seconds - 3.5).abs() < 1e-9, "{}", r.seconds);
        assert!(r.line().contains("to the end of the run"), "{}", r.line());
    }
}
