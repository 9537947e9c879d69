//! The ClusterVersion status the CVO would write for the run's progress, built by
//! [`crate::cvo::status`] (pure functions over the status JSON, no I/O).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{Errors, Final, RecorderOptions};
use crate::apply::events::TaskRef;
use crate::apply::report::TaskFailure;
use crate::cvo;
use crate::cvo::error::{ApiErrorClass, UpdateError, task_error, task_label};
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
    *status = cvo_status(status, o, 0, None, false, &Errors::default());
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

/// The CVO's status for the run's state (`minicvo::cvo::status`).
fn cvo_status(
    current: &Value,
    o: &RecorderOptions,
    done: usize,
    failure: Option<UpdateError>,
    completed: bool,
    errors: &Errors,
) -> Value {
    let now_instant = tokio::time::Instant::now();
    let operator_waits = errors
        .waits
        .iter()
        .map(|(name, started)| {
            (
                name.clone(),
                now_instant.saturating_duration_since(*started),
            )
        })
        .collect();
    let input = StatusInput {
        desired: Release {
            version: o.version.clone(),
            image: o.image.clone(),
            architecture: cvo::status::go_arch().to_string(),
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
        operator_waits,
        capabilities: o.capabilities.clone(),
        verified: o.checks.verified,
        deletions_in_progress: Vec::new(),
        checks: o.checks.clone(),
        now: now(),
    };
    cvo::status::cluster_version_status(current, &input)
}

/// The CVO's status while working: "Working towards V: N of M done (P% complete)", with the
/// run's errors so far as the CVO reports them (a ClusterOperator updating its versions is
/// progress, ", waiting on X"; one that is not available is a failure).
pub(super) fn progressing(status: &mut Value, o: &RecorderOptions, done: usize, errors: &Errors) {
    let failure = cvo::error::summarize(errors.failures.clone());
    *status = cvo_status(status, o, done, failure, false, errors);
}

/// The status at the end of the run.
pub(super) fn final_status(
    current: &Value,
    o: &RecorderOptions,
    outcome: &Final,
    done: usize,
    errors: &Errors,
) -> Value {
    match outcome {
        Final::Completed => cvo_status(current, o, o.total, None, true, &Errors::default()),
        Final::Failed(list) => {
            let failure =
                cvo::error::summarize(errors.failures.clone()).or_else(|| summarize_failures(list));
            cvo_status(current, o, done, failure, false, errors)
        }
        Final::Stopped => cvo_status(current, o, done, None, false, errors),
    }
}

/// The CVO's error for a failed task (`Task.Run`): `Could not update {kind} "{ns}/{name}"
/// ({N} of {M})`, with the cause of its class, or the ClusterOperator error a wait reported.
pub(super) fn task_failure(task: &TaskRef, total: usize, message: &str) -> UpdateError {
    let o = &task.object;
    if o.group == "config.openshift.io"
        && o.kind == "ClusterOperator"
        && message.contains("does not declare expected versions")
    {
        return cvo::health::no_versions(&o.name);
    }
    let label = task_label(
        &o.kind,
        o.namespace.as_deref(),
        &o.name,
        &task.file,
        task.id + 1,
        total,
    );
    let mut e = task_error(&label, class_of(message), message);
    e.name = match &o.namespace {
        Some(ns) => format!("{ns}/{}", o.name),
        None => o.name.clone(),
    };
    e
}

/// `(422 Invalid)` at the end of a failure message: the API error class.
fn class_of(message: &str) -> ApiErrorClass {
    if message.starts_with("no matches for kind ") || message.contains("does not serve") {
        return ApiErrorClass::NoKindMatch;
    }
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
            let o = &e.object;
            let object = match &o.namespace {
                Some(ns) => format!("{ns}/{}", o.name),
                None => o.name.clone(),
            };
            let label = format!("{} \"{object}\"", o.kind.to_lowercase());
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
            capabilities: cvo::capabilities::CapabilityStatus::all(),
            checks: cvo::status::ReleaseChecks::default(),
        }
    }

    /// The CVO's error for an operator in `state` (`available`, `degraded`, at `version`).
    fn operator(name: &str, available: &str, degraded: &str, version: &str) -> UpdateError {
        let live = json!({"status": {
            "conditions": [
                {"type": "Available", "status": available},
                {"type": "Degraded", "status": degraded},
            ],
            "versions": [{"name": "operator", "version": version}],
        }});
        let want = [cvo::health::OperandVersion {
            name: "operator".into(),
            version: "4.14.0".into(),
        }];
        cvo::health::check_operator(name, &want, &live, crate::plan::Mode::Updating).unwrap()
    }

    fn waiting(errors: Vec<UpdateError>) -> Errors {
        let now = tokio::time::Instant::now();
        Errors {
            waits: errors.iter().map(|e| (e.name.clone(), now)).collect(),
            failures: errors,
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
        let updating = waiting(vec![operator("machine-config", "True", "False", "4.13.0")]);
        progressing(&mut s, &options(), 2, &updating);
        let p = condition(&s, "Progressing").unwrap();
        assert_eq!(
            p["message"],
            "Working towards 4.14.0: 2 of 4 done (50% complete), waiting on machine-config"
        );
        assert_eq!(condition(&s, "Failing").unwrap()["status"], "False");
        let f = final_status(&s, &options(), &Final::Completed, 4, &updating);
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
            object: crate::manifest::ObjectId {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: name.into(),
            },
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
            &Errors::default(),
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

    #[tokio::test]
    async fn operators_fail_or_wait_as_the_cvo_reports_them_during_the_run() {
        let mut s = json!({});
        start_history(&mut s, &options());
        // Two operators updating versions: condensed, progress.
        let two = waiting(vec![
            operator("dns", "True", "False", "4.13.0"),
            operator("network", "True", "False", "4.13.0"),
        ]);
        progressing(&mut s, &options(), 1, &two);
        assert_eq!(condition(&s, "Failing").unwrap()["status"], "False");
        assert_eq!(
            condition(&s, "Progressing").unwrap()["message"],
            "Working towards 4.14.0: 1 of 4 done (25% complete), waiting on dns, network"
        );
        assert_eq!(
            condition(&s, "Progressing").unwrap()["reason"],
            "ClusterOperatorsUpdating"
        );
        // Degraded: waiting up to 40 minutes.
        progressing(
            &mut s,
            &options(),
            1,
            &waiting(vec![operator("dns", "True", "True", "4.14.0")]),
        );
        assert_eq!(condition(&s, "Failing").unwrap()["status"], "False");
        assert_eq!(
            condition(&s, "Progressing").unwrap()["message"],
            "Working towards 4.14.0: 1 of 4 done (25% complete), waiting up to 40 minutes on dns"
        );
        // Not available: a failure at once.
        progressing(
            &mut s,
            &options(),
            1,
            &waiting(vec![operator("dns", "False", "False", "4.13.0")]),
        );
        let failing = condition(&s, "Failing").unwrap();
        assert_eq!(failing["status"], "True");
        assert_eq!(failing["reason"], "ClusterOperatorNotAvailable");
        assert_eq!(failing["message"], "Cluster operator dns is not available");
        assert_eq!(
            condition(&s, "Progressing").unwrap()["message"],
            "Unable to apply 4.14.0: the cluster operator dns is not available"
        );
        // A failed task next to an operator updating versions: the operator's None effect is
        // dropped from MultipleErrors.
        let task = TaskRef {
            id: 2,
            node: 0,
            run_level: None,
            component: None,
            file: "release-manifests/0000_50_a_02.yaml".into(),
            document: 0,
            api_version: "v1".into(),
            object: crate::manifest::ObjectId {
                group: String::new(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: "c".into(),
            },
            action: crate::plan::Action::Apply,
        };
        let failed = task_failure(&task, 4, "ConfigMap \"c\" is invalid (422 Invalid)");
        assert_eq!(
            failed.message,
            "Could not update configmap \"ns/c\" (3 of 4): the object is invalid, possibly due to local cluster configuration"
        );
        let mut both = waiting(vec![operator("dns", "True", "False", "4.13.0")]);
        both.failures.push(failed);
        progressing(&mut s, &options(), 1, &both);
        assert_eq!(
            condition(&s, "Failing").unwrap()["reason"],
            "UpdatePayloadResourceInvalid"
        );
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
