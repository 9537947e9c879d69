//! The ClusterVersion status the CVO would write for the run's progress, built by
//! [`crate::cvo::status`] (pure functions over the status JSON, no I/O).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{Final, RecorderOptions};
use crate::apply::report::TaskFailure;
use crate::cvo;
use crate::cvo::capabilities::CapabilityStatus;
use crate::cvo::error::{ApiErrorClass, Effect, UpdateError, task_error};
use crate::cvo::status::{Release, StatusInput};

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
    *status = cvo_status(status, o, 0, None, false);
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
    let obj = status.as_object_mut().expect("status is an object");
    let list = obj.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("conditions is an array");
    cvo::status::set(list, &now(), kind, value, reason, message);
}

/// The Go name of this machine's architecture, as the CVO reports it.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The CVO's status for the run's state (`minicvo::cvo::status`).
fn cvo_status(
    current: &Value,
    o: &RecorderOptions,
    done: usize,
    failure: Option<UpdateError>,
    completed: bool,
) -> Value {
    let input = StatusInput {
        desired: Release {
            version: o.version.clone(),
            image: o.image.clone(),
            architecture: go_arch().to_string(),
        },
        generation: current
            .get("observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(1),
        version_hash: o.version_hash.clone(),
        reconciling: false,
        completed,
        done,
        total: o.total,
        failure,
        operator_waits: BTreeMap::new(),
        capabilities: CapabilityStatus::all(),
        verified: false,
        deletions_in_progress: Vec::new(),
        now: now(),
    };
    cvo::status::cluster_version_status(current, &input)
}

/// The CVO's status while working: "Working towards V: N of M done (P% complete)", with
/// ", waiting on X" while ClusterOperators block (as an update in progress, not a failure).
pub(super) fn progressing(
    status: &mut Value,
    o: &RecorderOptions,
    done: usize,
    waiting: &[String],
) {
    let failure = (!waiting.is_empty()).then(|| {
        let mut e = UpdateError::new(
            "ClusterOperatorUpdating",
            format!(
                "Cluster operators {} are updating versions",
                waiting.join(", ")
            ),
        );
        e.name = waiting.join(", ");
        e.names = waiting.to_vec();
        e.effect = Some(Effect::None);
        e.cluster_operator = true;
        e
    });
    *status = cvo_status(status, o, done, failure, false);
}

/// The status at the end of the run.
pub(super) fn final_status(
    current: &Value,
    o: &RecorderOptions,
    outcome: &Final,
    done: usize,
) -> Value {
    match outcome {
        Final::Completed => cvo_status(current, o, o.total, None, true),
        Final::Failed(errors) => cvo_status(current, o, done, summarize_failures(errors), false),
        Final::Stopped => cvo_status(current, o, done, None, false),
    }
}

/// `(422 Invalid)` at the end of a failure message: the API error class.
fn class_of(message: &str) -> ApiErrorClass {
    let Some(open) = message.rfind('(') else {
        return ApiErrorClass::Other;
    };
    let inner = message[open + 1..].trim_end().trim_end_matches(')');
    let mut parts = inner.splitn(2, ' ');
    match (
        parts.next().and_then(|c| c.parse::<u16>().ok()),
        parts.next(),
    ) {
        (Some(code), Some(reason)) => ApiErrorClass::from_status(code, reason.trim()),
        _ => ApiErrorClass::Other,
    }
}

/// The CVO's aggregation of the run's failures (`minicvo::cvo::error::summarize`).
pub(super) fn summarize_failures(errors: &[TaskFailure]) -> Option<UpdateError> {
    let list = errors
        .iter()
        .map(|e| {
            let object = match &e.namespace {
                Some(ns) => format!("{ns}/{}", e.name),
                None => e.name.clone(),
            };
            let label = format!("{} \"{object}\"", e.kind.to_lowercase());
            task_error(&label, class_of(&e.message), &e.message)
        })
        .collect();
    cvo::error::summarize(list)
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
            version_hash: "AAAAAAAAAAA=".into(),
        }
    }

    #[test]
    fn a_new_version_closes_the_previous_entry() {
        let mut s = json!({"history": [{"state": "Completed", "version": "4.13.0", "image": "",
            "startedTime": "2020-01-01T00:00:00Z", "completionTime": null, "verified": false}]});
        start_history(&mut s, &options());
        let h = s["history"].as_array().unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[0]["version"], "4.14.0");
        assert_eq!(h[0]["state"], "Partial");
        assert!(h[0]["completionTime"].is_null());
        assert!(h[1]["completionTime"].is_string());
        // The same version again adds nothing.
        start_history(&mut s, &options());
        assert_eq!(s["history"].as_array().unwrap().len(), 2);
        for field in [
            "desired",
            "observedGeneration",
            "versionHash",
            "availableUpdates",
        ] {
            assert!(s.get(field).is_some(), "{field} missing");
        }
    }

    #[test]
    fn waiting_operators_are_progress_and_completion_reconciles() {
        let mut s = json!({});
        start_history(&mut s, &options());
        progressing(&mut s, &options(), 2, &["machine-config".into()]);
        let p = condition(&s, "Progressing").unwrap();
        assert_eq!(
            p["message"],
            "Working towards 4.14.0: 2 of 4 done (50% complete), waiting on machine-config"
        );
        assert_eq!(condition(&s, "Failing").unwrap()["status"], "False");
        let f = final_status(&s, &options(), &Final::Completed, 4);
        assert_eq!(f["history"][0]["state"], "Completed");
        assert!(f["history"][0]["completionTime"].is_string());
        let p = condition(&f, "Progressing").unwrap();
        assert_eq!(p["status"], "False");
        assert_eq!(p["message"], "Cluster version is 4.14.0");
        assert_eq!(
            condition(&f, "Available").unwrap()["message"],
            "Done applying 4.14.0"
        );
    }

    #[test]
    fn failures_are_aggregated_like_the_cvo() {
        let e = |name: &str, message: &str| TaskFailure {
            file: "f".into(),
            document: 0,
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: name.into(),
            message: message.into(),
        };
        let one =
            summarize_failures(&[e("a", "ConfigMap \"a\" is invalid: x (422 Invalid)")]).unwrap();
        assert_eq!(one.reason, "UpdatePayloadResourceInvalid");
        assert_eq!(
            one.message,
            "Could not update configmap \"ns/a\": the object is invalid, possibly due to local cluster configuration"
        );
        let many = summarize_failures(&[e("b", "boom"), e("a", "boom"), e("a", "boom")]).unwrap();
        assert_eq!(many.reason, "MultipleErrors");
        assert_eq!(
            many.message,
            "Multiple errors are preventing progress:\n* Could not update configmap \"ns/a\"\n* Could not update configmap \"ns/b\""
        );
        let f = final_status(
            &json!({}),
            &options(),
            &Final::Failed(vec![e("a", "boom")]),
            1,
        );
        let failing = condition(&f, "Failing").unwrap();
        assert_eq!(failing["status"], "True");
        assert_eq!(failing["reason"], "UpdatePayloadFailed");
        assert_eq!(
            condition(&f, "Progressing").unwrap()["message"],
            "Unable to apply 4.14.0: the update could not be applied"
        );
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
