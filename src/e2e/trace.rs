//! The timeline as a Chrome trace (Trace Event Format), to look at in Perfetto
//! (<https://ui.perfetto.dev>) or `chrome://tracing`.
//!
//! - One process per phase (install, upgrade); one thread per graph node, named after its
//!   run-level and components; thread 0 holds the watch events.
//! - Writes and ClusterOperator waits are complete events (`ph: "X"`) from task start to end;
//!   observed watch events and deletes' confirmations are instant events (`ph: "i"`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::timeline::{Phase, Timeline, TimelineAction};

fn micros(s: f64) -> f64 {
    (s * 1_000_000.0).round()
}

fn pid(phase: Phase) -> u32 {
    match phase {
        Phase::Install => 1,
        Phase::Upgrade => 2,
    }
}

/// The trace JSON document.
#[must_use]
pub fn chrome_trace(timeline: &Timeline, titles: &[(Phase, String)]) -> Value {
    let mut events: Vec<Value> = Vec::new();
    for (phase, title) in titles {
        events.push(
            json!({"ph": "M", "name": "process_name", "pid": pid(*phase), "tid": 0,
            "args": {"name": title}}),
        );
        events.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid(*phase), "tid": 0,
            "args": {"sort_index": pid(*phase)}}),
        );
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid(*phase), "tid": 0,
            "args": {"name": "watch events"}}),
        );
    }
    let mut threads: BTreeMap<(u32, usize), (Option<String>, Vec<String>)> = BTreeMap::new();
    let mut wait_starts: BTreeMap<(Phase, usize), f64> = BTreeMap::new();
    for e in &timeline.events {
        if e.action == TimelineAction::WaitStart
            && let Some(task) = e.task
        {
            wait_starts.insert((e.phase, task), e.t);
        }
    }
    for e in &timeline.events {
        let p = pid(e.phase);
        let args = json!({
            "object": e.object.short().to_string(),
            "group": e.object.group,
            "runLevel": e.run_level,
            "node": e.node,
            "outcome": e.outcome,
            "detail": e.detail,
        });
        match e.action {
            TimelineAction::Observed => events.push(json!({
                "ph": "i", "s": "t", "pid": p, "tid": 0,
                "name": format!("{}: {}", e.object.short(), e.detail.as_deref().unwrap_or("changed")),
                "cat": "observed", "ts": micros(e.t), "args": args,
            })),
            TimelineAction::Harm => {
                let h = e.harm.as_ref();
                events.push(json!({
                    "ph": "i", "s": "p", "pid": p, "tid": 0,
                    "name": format!(
                        "harm: {} ({}): {}",
                        h.map_or("?", |h| h.pod.as_str()),
                        h.map_or("?", |h| h.service_account.as_str()),
                        h.map_or("", |h| h.what.as_str())
                    ),
                    "cat": "harm", "ts": micros(e.t),
                    "args": {
                        "object": e.object.short().to_string(),
                        "harm": h.map(|h| h.kind),
                        "cause": h.and_then(|h| h.cause.clone()),
                        "check": super::harm::LIVE_PODS_CHECK,
                    },
                }));
            }
            TimelineAction::WaitStart => {}
            TimelineAction::Apply | TimelineAction::Delete | TimelineAction::WaitDone => {
                let Some(node) = e.node else { continue };
                let tid = node + 1;
                let entry = threads.entry((p, tid)).or_default();
                if entry.0.is_none() {
                    entry.0.clone_from(&e.run_level);
                }
                let start = if e.action == TimelineAction::WaitDone {
                    e.task
                        .and_then(|t| wait_starts.get(&(e.phase, t)).copied())
                        .or(e.start)
                        .unwrap_or(e.t)
                } else {
                    e.start.unwrap_or(e.t)
                };
                let verb = match e.action {
                    TimelineAction::WaitDone => "wait",
                    TimelineAction::Delete => "delete",
                    _ => "apply",
                };
                events.push(json!({
                    "ph": "X", "pid": p, "tid": tid,
                    "name": format!("{verb} {}", e.object.short()),
                    "cat": verb,
                    "ts": micros(start),
                    "dur": micros((e.t - start).max(0.0)),
                    "args": args,
                }));
            }
        }
    }
    for ((p, tid), (level, _)) in threads {
        let name = match level {
            Some(l) => format!("node {} (run-level {l})", tid - 1),
            None => format!("node {}", tid - 1),
        };
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": p, "tid": tid,
            "args": {"name": name}}),
        );
        events.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": p, "tid": tid,
            "args": {"sort_index": tid}}),
        );
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2e::timeline::TimelineEvent;

    fn ev(action: TimelineAction, t: f64, start: Option<f64>) -> TimelineEvent {
        TimelineEvent {
            t,
            phase: Phase::Upgrade,
            action,
            object: crate::manifest::ObjectId {
                group: "config.openshift.io".into(),
                kind: "ClusterOperator".into(),
                namespace: None,
                name: "mc".into(),
            },
            run_level: Some("80".into()),
            node: Some(3),
            task: Some(7),
            start,
            outcome: None,
            detail: None,
            harm: None,
        }
    }

    #[test]
    fn waits_become_spans_and_watch_events_instants() {
        let tl = Timeline {
            events: vec![
                ev(TimelineAction::WaitStart, 1.0, Some(1.0)),
                ev(TimelineAction::Observed, 1.5, None),
                ev(TimelineAction::WaitDone, 2.0, Some(1.0)),
            ],
        };
        let v = chrome_trace(&tl, &[(Phase::Upgrade, "upgrade to 4.14.0".into())]);
        let events = v["traceEvents"].as_array().unwrap();
        let span = events.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(span["name"], "wait ClusterOperator mc");
        assert_eq!(span["ts"], 1_000_000.0);
        assert_eq!(span["dur"], 1_000_000.0);
        assert_eq!(span["tid"], 4);
        let instant = events.iter().find(|e| e["ph"] == "i").unwrap();
        assert_eq!(instant["tid"], 0);
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "M" && e["args"]["name"] == "node 3 (run-level 80)")
        );
        assert!(
            events
                .iter()
                .any(|e| e["args"]["name"] == "upgrade to 4.14.0")
        );
    }
}
