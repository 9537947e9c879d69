//! The ClusterVersion status the CVO would write: history entries, conditions and the
//! aggregated error (pure functions over the status JSON, no I/O).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{Final, RecorderOptions};
use crate::apply::report::TaskFailure;

pub(super) fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A random RFC 4122 version-4 UUID.
pub(super) fn cluster_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Adds a `Partial` history entry for the version unless it is already the first entry.
pub(super) fn start_history(status: &mut Value, o: &RecorderOptions) {
    let ts = now();
    let obj = status.as_object_mut().expect("status is an object");
    let history = obj.entry("history").or_insert_with(|| json!([]));
    if !history.is_array() {
        *history = json!([]);
    }
    let h = history.as_array_mut().expect("history is an array");
    if h.first()
        .is_some_and(|e| e["version"] == o.version.as_str())
    {
        return;
    }
    if let Some(prev) = h.first_mut()
        && prev.get("completionTime").is_none_or(Value::is_null)
    {
        prev["completionTime"] = json!(ts);
    }
    h.insert(
        0,
        json!({"state": "Partial", "version": o.version, "image": o.image,
               "startedTime": ts, "completionTime": null, "verified": false}),
    );
    h.truncate(100);
    obj.insert(
        "desired".into(),
        json!({"version": o.version, "image": o.image}),
    );
}

pub(super) fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Sets a condition, keeping `lastTransitionTime` when the status did not change.
pub(super) fn set_condition(
    status: &mut Value,
    kind: &str,
    value: &str,
    reason: &str,
    message: &str,
) {
    let ts = now();
    let obj = status.as_object_mut().expect("status is an object");
    let list = obj.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("conditions is an array");
    let mut c = json!({"type": kind, "status": value, "lastTransitionTime": ts});
    if !reason.is_empty() {
        c["reason"] = json!(reason);
    }
    if !message.is_empty() {
        c["message"] = json!(message);
    }
    match list.iter_mut().find(|x| x["type"] == kind) {
        Some(old) => {
            if old["status"] == value
                && let Some(t) = old.get("lastTransitionTime")
            {
                c["lastTransitionTime"] = t.clone();
            }
            *old = c;
        }
        None => list.push(c),
    }
}

/// "N of M done (P% complete)".
pub(super) fn fraction(done: usize, total: usize) -> String {
    let pct = (done * 100).checked_div(total).unwrap_or(100);
    format!("{done} of {total} done ({pct}% complete)")
}

/// The CVO's Progressing message while working, with ", waiting on ..." for blocking
/// ClusterOperators.
pub(super) fn progressing(
    status: &mut Value,
    o: &RecorderOptions,
    done: usize,
    waiting: &[String],
) {
    let mut message = if done == 0 {
        format!("Working towards {}", o.version)
    } else {
        format!("Working towards {}: {}", o.version, fraction(done, o.total))
    };
    if !waiting.is_empty() {
        message.push_str(&format!(", waiting on {}", waiting.join(", ")));
    }
    set_condition(status, "Progressing", "True", "", &message);
}

/// The status at the end of the run.
pub(super) fn final_status(
    current: &Value,
    o: &RecorderOptions,
    outcome: &Final,
    done: usize,
) -> Value {
    let mut s = current.clone();
    match outcome {
        Final::Completed => {
            start_history(&mut s, o);
            if let Some(h) = s.pointer_mut("/history/0")
                && h["state"] != "Completed"
            {
                h["state"] = json!("Completed");
                h["completionTime"] = json!(now());
            }
            set_condition(
                &mut s,
                "Available",
                "True",
                "",
                &format!("Done applying {}", o.version),
            );
            set_condition(&mut s, "Failing", "False", "", "");
            set_condition(
                &mut s,
                "Progressing",
                "False",
                "",
                &format!(
                    "Cluster version is {}: {}",
                    o.version,
                    fraction(o.total, o.total)
                ),
            );
        }
        Final::Failed(errors) => {
            let (reason, summary) = summarize(errors);
            start_history(&mut s, o);
            set_condition(&mut s, "Failing", "True", reason, &summary);
            set_condition(
                &mut s,
                "Progressing",
                "True",
                reason,
                &format!("Unable to apply {}: {}", o.version, first_line(&summary)),
            );
        }
        Final::Stopped => progressing(&mut s, o, done, &[]),
    }
    s
}

pub(super) fn first_line(s: &str) -> String {
    if s.contains('\n') {
        "multiple errors are preventing progress".into()
    } else {
        s.to_string()
    }
}

/// The CVO's aggregation (cvo.md §4.5): one error as is, several as a sorted, de-duplicated
/// list under "Multiple errors are preventing progress:".
pub(super) fn summarize(errors: &[TaskFailure]) -> (&'static str, String) {
    let mut messages: Vec<String> = errors
        .iter()
        .map(|e| {
            let obj = match &e.namespace {
                Some(ns) => format!("{ns}/{}", e.name),
                None => e.name.clone(),
            };
            format!(
                "Could not update {} \"{obj}\": {}",
                e.kind.to_lowercase(),
                e.message
            )
        })
        .collect();
    messages.sort();
    messages.dedup();
    match messages.len() {
        0 => ("UpdatePayloadFailed", "the run failed".into()),
        1 => ("UpdatePayloadFailed", messages.remove(0)),
        _ => (
            "MultipleErrors",
            format!(
                "Multiple errors are preventing progress:\n* {}",
                messages.join("\n* ")
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn options() -> RecorderOptions {
        RecorderOptions {
            version: "4.14.0".into(),
            image: String::new(),
            total: 4,
            field_manager: "minicvo".into(),
            request_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_new_version_closes_the_previous_entry() {
        let mut s = json!({"history": [{"state": "Completed", "version": "4.13.0",
            "startedTime": "2020-01-01T00:00:00Z", "completionTime": null}]});
        start_history(&mut s, &options());
        let h = s["history"].as_array().unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[0]["version"], "4.14.0");
        assert_eq!(h[0]["state"], "Partial");
        assert!(h[1]["completionTime"].is_string());
        // The same version again adds nothing.
        start_history(&mut s, &options());
        assert_eq!(s["history"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn completion_marks_history_and_reports_100_percent() {
        let mut s = json!({});
        start_history(&mut s, &options());
        progressing(&mut s, &options(), 2, &["machine-config".into()]);
        assert_eq!(
            condition(&s, "Progressing").unwrap()["message"],
            "Working towards 4.14.0: 2 of 4 done (50% complete), waiting on machine-config"
        );
        let f = final_status(&s, &options(), &Final::Completed, 4);
        assert_eq!(f["history"][0]["state"], "Completed");
        assert!(f["history"][0]["completionTime"].is_string());
        let p = condition(&f, "Progressing").unwrap();
        assert_eq!(p["status"], "False");
        assert_eq!(
            p["message"],
            "Cluster version is 4.14.0: 4 of 4 done (100% complete)"
        );
        assert_eq!(condition(&f, "Available").unwrap()["status"], "True");
    }

    #[test]
    fn failures_are_aggregated_like_the_cvo() {
        let e = |name: &str| TaskFailure {
            file: "f".into(),
            document: 0,
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: name.into(),
            message: "invalid".into(),
        };
        let (reason, one) = summarize(&[e("a")]);
        assert_eq!(reason, "UpdatePayloadFailed");
        assert_eq!(one, "Could not update configmap \"ns/a\": invalid");
        let (reason, many) = summarize(&[e("b"), e("a"), e("a")]);
        assert_eq!(reason, "MultipleErrors");
        assert_eq!(
            many,
            "Multiple errors are preventing progress:\n* Could not update configmap \"ns/a\": invalid\n* Could not update configmap \"ns/b\": invalid"
        );
        let f = final_status(&json!({}), &options(), &Final::Failed(vec![e("a")]), 1);
        assert_eq!(condition(&f, "Failing").unwrap()["status"], "True");
        assert_eq!(f["history"][0]["state"], "Partial");
    }

    #[test]
    fn transition_time_is_kept_when_status_stays() {
        let mut s = json!({"conditions": [{"type": "Failing", "status": "False",
            "lastTransitionTime": "2020-01-01T00:00:00Z"}]});
        set_condition(&mut s, "Failing", "False", "", "");
        assert_eq!(
            condition(&s, "Failing").unwrap()["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        set_condition(&mut s, "Failing", "True", "X", "y");
        assert_ne!(
            condition(&s, "Failing").unwrap()["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
    }

    #[test]
    fn cluster_ids_are_uuids() {
        let id = cluster_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
    }
}
