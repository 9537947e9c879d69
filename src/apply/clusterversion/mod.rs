//! Recording the run in ClusterVersion `version`, the way the CVO reports it (cvo.md §8.3),
//! when the cluster serves `clusterversions.config.openshift.io` (from the start, or from the
//! moment this run establishes the CRD).
//!
//! - `status.history`: a new desired version closes the previous entry and adds a `Partial`
//!   one at the front; success marks it `Completed` with a `completionTime` (sticky).
//! - `Progressing`: `True`, "Working towards V: N of M done (P% complete)" while running
//!   (with ", waiting on X" while ClusterOperator X blocks);
//!   on success `False`, "Cluster version is V: M of M done (100% complete)"; on failure
//!   `True`, "Unable to apply V: SUMMARY".
//! - `Failing`: `True` with the aggregated error ("Multiple errors are preventing progress:
//!   ..."), else `False`. `Available`: `True` "Done applying V" once a run completes.
//! - The object is created when missing (spec: a random `clusterID` and `desiredUpdate`).
//!
//! Differences from the CVO: progress counts every task of the plan, apply-time skips
//! included, so a complete run reaches 100% (the CVO's total includes skipped manifests and
//! never does); writes are throttled to one every 2 s (the CVO: one per 15 s); re-applying the
//! version the history already shows as Completed writes nothing unless the outcome changed
//! (the CVO's reconciling mode). Status is written with a JSON merge patch of the `status`
//! subresource by this run's field manager.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Patch, PatchParams};
use kube::core::Request;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::discovery::Discovery;
use super::events::{ApplyEvent, ApplyObserver, EventKind};
use super::report::TaskFailure;
use super::request::{self, RequestError};
use super::watch;

/// The CRD that makes a cluster serve ClusterVersions.
pub const CRD_NAME: &str = "clusterversions.config.openshift.io";
/// The ClusterVersion the CVO maintains.
pub const NAME: &str = "version";
const MIN_INTERVAL: Duration = Duration::from_secs(2);

enum Msg {
    Progress(usize),
    Waiting(Vec<String>),
    Established,
    Finish {
        outcome: Final,
        reply: oneshot::Sender<String>,
    },
}

/// How the run ended, for the final status.
#[derive(Debug, Clone)]
pub enum Final {
    /// Every task succeeded.
    Completed,
    /// Tasks failed.
    Failed(Vec<TaskFailure>),
    /// Stopped early (Ctrl-C, timeout): progress stays as it was.
    Stopped,
}

/// Settings of the recorder.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Release version (nothing is recorded without one).
    pub version: String,
    /// Release image pull spec, for `history[].image` and `desired.image`.
    pub image: String,
    /// Tasks in the plan.
    pub total: usize,
    /// Field manager for the writes.
    pub field_manager: String,
    /// Longest time for one request.
    pub request_timeout: Duration,
}

/// The recorder: an [`ApplyObserver`] that hands progress to a background task.
pub struct ClusterVersionRecorder {
    tx: mpsc::UnboundedSender<Msg>,
    done: AtomicUsize,
    waiting: Mutex<std::collections::BTreeMap<usize, String>>,
    handle: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ClusterVersionRecorder {
    /// Starts the background task.
    #[must_use]
    pub fn start(
        client: Client,
        discovery: std::sync::Arc<Discovery>,
        options: RecorderOptions,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = tokio::spawn(run(client, discovery, options, rx));
        ClusterVersionRecorder {
            tx,
            done: AtomicUsize::new(0),
            waiting: Mutex::new(std::collections::BTreeMap::new()),
            handle: Mutex::new(Some(handle)),
        }
    }

    /// Writes the final status and returns what happened (`recorded`, `not served`, an error).
    pub async fn finish(&self, outcome: Final) -> String {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Finish { outcome, reply }).is_err() {
            return "recorder stopped".into();
        }
        let result = rx.await.unwrap_or_else(|_| "recorder stopped".into());
        let handle = self.handle.lock().expect("recorder lock").take();
        if let Some(h) = handle {
            let _ = h.await;
        }
        result
    }
}

impl ClusterVersionRecorder {
    fn waiting_changed(
        &self,
        f: impl FnOnce(&mut std::collections::BTreeMap<usize, String>) -> bool,
    ) {
        let mut w = self.waiting.lock().expect("recorder lock");
        if f(&mut w) {
            let mut names: Vec<String> = w.values().cloned().collect();
            names.sort();
            names.dedup();
            let _ = self.tx.send(Msg::Waiting(names));
        }
    }
}

impl ApplyObserver for ClusterVersionRecorder {
    fn on_event(&self, event: &ApplyEvent) {
        match &event.kind {
            EventKind::TaskFinished { task, outcome, .. } => {
                self.waiting_changed(|w| w.remove(&task.id).is_some());
                if outcome.is_success() {
                    let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
                    let _ = self.tx.send(Msg::Progress(n));
                }
            }
            EventKind::WaitStarted { task, operator, .. } => {
                self.waiting_changed(|w| w.insert(task.id, operator.clone()).is_none());
            }
            EventKind::WaitDone { task, .. } => {
                self.waiting_changed(|w| w.remove(&task.id).is_some());
            }
            EventKind::CrdEstablished { name, .. } if name == CRD_NAME => {
                let _ = self.tx.send(Msg::Established);
            }
            _ => {}
        }
    }
}

struct Recording {
    url: String,
    status: Value,
    generation: Option<i64>,
    /// Re-applying the version history already shows as Completed.
    reconciling: bool,
    last_write: Option<Instant>,
}

async fn run(
    client: Client,
    discovery: std::sync::Arc<Discovery>,
    o: RecorderOptions,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut rec: Option<Recording> = None;
    let mut error: Option<String> = None;
    let mut done = 0usize;
    let mut waiting: Vec<String> = Vec::new();
    // Progress not yet written (held back by the write interval).
    let mut dirty = false;
    if let Some(url) = served(&discovery).await {
        match begin(&client, &url, &o).await {
            Ok(r) => rec = Some(r),
            Err(e) => error = Some(e.to_string()),
        }
    }
    loop {
        let flush_at = rec
            .as_ref()
            .filter(|r| !r.reconciling && dirty)
            .and_then(|r| r.last_write)
            .map(|t| t + MIN_INTERVAL);
        let msg = tokio::select! {
            m = rx.recv() => m,
            () = async {
                match flush_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => Some(Msg::Progress(done)),
        };
        let Some(msg) = msg else { return };
        match msg {
            Msg::Progress(n) => {
                done = n;
                dirty = true;
            }
            Msg::Waiting(w) => {
                waiting = w;
                dirty = true;
            }
            Msg::Established => {
                if rec.is_none()
                    && let Some(url) = served(&discovery).await
                {
                    match begin(&client, &url, &o).await {
                        Ok(r) => {
                            rec = Some(r);
                            error = None;
                            dirty = true;
                        }
                        Err(e) => error = Some(e.to_string()),
                    }
                }
            }
            Msg::Finish { outcome, reply } => {
                let result = match (rec.as_mut(), error) {
                    (Some(r), _) => {
                        let status = final_status(&r.status, &o, &outcome, done);
                        match write(&client, r, status, &o).await {
                            Ok(()) => "recorded".to_string(),
                            Err(e) => format!("cannot write status: {e}"),
                        }
                    }
                    (None, Some(e)) => format!("cannot record: {e}"),
                    (None, None) => "not served".to_string(),
                };
                let _ = reply.send(result);
                return;
            }
        }
        if let Some(r) = rec.as_mut()
            && dirty
            && !r.reconciling
            && (done >= o.total || r.last_write.is_none_or(|t| t.elapsed() >= MIN_INTERVAL))
        {
            dirty = false;
            let mut status = r.status.clone();
            progressing(&mut status, &o, done, &waiting);
            if let Err(e) = write(&client, r, status, &o).await {
                tracing::warn!("recording progress in clusterversion {NAME}: {e}");
            }
        }
    }
}

/// The ClusterVersion collection URL when the kind is served.
async fn served(discovery: &Discovery) -> Option<String> {
    match discovery
        .resolve("config.openshift.io", "v1", "ClusterVersion")
        .await
    {
        Ok(Some(r)) => Some(r.url_path(None)),
        _ => None,
    }
}

/// Reads (or creates) the object and writes the start of the run.
async fn begin(client: &Client, url: &str, o: &RecorderOptions) -> Result<Recording, RequestError> {
    let current = match watch::get(client, url, NAME, o.request_timeout).await? {
        Some(cv) => cv,
        None => {
            let cv = json!({
                "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": NAME},
                "spec": {"clusterID": cluster_id(), "desiredUpdate": {"version": o.version}},
            });
            // A server-side apply, not a POST (see `operator_wait::create_operator`).
            let params = PatchParams::apply(&o.field_manager);
            let req = Request::new(url)
                .patch(NAME, &params, &Patch::Apply(&cv))
                .map_err(|e| RequestError::Build(e.to_string()))?;
            request::send(client, req, o.request_timeout).await?.body
        }
    };
    let mut status = current.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let generation = current
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let reconciling = status
        .pointer("/history/0")
        .is_some_and(|h| h["version"] == o.version.as_str() && h["state"] == "Completed");
    let mut rec = Recording {
        url: url.to_string(),
        status,
        generation,
        reconciling,
        last_write: None,
    };
    if !reconciling {
        let mut s = rec.status.clone();
        start_history(&mut s, o);
        progressing(&mut s, o, 0, &[]);
        set_condition(&mut s, "Failing", "False", "", "");
        if condition(&s, "Available").is_none() {
            set_condition(&mut s, "Available", "False", "", "");
        }
        write(client, &mut rec, s, o).await?;
    }
    Ok(rec)
}

fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A random RFC 4122 version-4 UUID.
fn cluster_id() -> String {
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
fn start_history(status: &mut Value, o: &RecorderOptions) {
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

fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Sets a condition, keeping `lastTransitionTime` when the status did not change.
fn set_condition(status: &mut Value, kind: &str, value: &str, reason: &str, message: &str) {
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
fn fraction(done: usize, total: usize) -> String {
    let pct = (done * 100).checked_div(total).unwrap_or(100);
    format!("{done} of {total} done ({pct}% complete)")
}

/// The CVO's Progressing message while working, with ", waiting on ..." for blocking
/// ClusterOperators.
fn progressing(status: &mut Value, o: &RecorderOptions, done: usize, waiting: &[String]) {
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
fn final_status(current: &Value, o: &RecorderOptions, outcome: &Final, done: usize) -> Value {
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

fn first_line(s: &str) -> String {
    if s.contains('\n') {
        "multiple errors are preventing progress".into()
    } else {
        s.to_string()
    }
}

/// The CVO's aggregation (cvo.md §4.5): one error as is, several as a sorted, de-duplicated
/// list under "Multiple errors are preventing progress:".
fn summarize(errors: &[TaskFailure]) -> (&'static str, String) {
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

async fn write(
    client: &Client,
    rec: &mut Recording,
    mut status: Value,
    o: &RecorderOptions,
) -> Result<(), RequestError> {
    if let (Some(g), Some(obj)) = (rec.generation, status.as_object_mut()) {
        obj.insert("observedGeneration".into(), json!(g));
    }
    if status == rec.status {
        return Ok(());
    }
    let patch = json!({"status": status});
    let params = PatchParams {
        field_manager: Some(o.field_manager.clone()),
        ..PatchParams::default()
    };
    let build = |sub: bool| {
        let r = Request::new(&rec.url);
        if sub {
            r.patch_subresource("status", NAME, &params, &Patch::Merge(&patch))
        } else {
            r.patch(NAME, &params, &Patch::Merge(&patch))
        }
        .map_err(|e| RequestError::Build(e.to_string()))
    };
    match request::send(client, build(true)?, o.request_timeout).await {
        Ok(_) => {}
        // No status subresource: the status is part of the object.
        Err(e) if e.is(404) => {
            request::send(client, build(false)?, o.request_timeout).await?;
        }
        Err(e) => return Err(e),
    }
    rec.status = status;
    rec.last_write = Some(Instant::now());
    Ok(())
}

#[cfg(test)]
mod tests {
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
