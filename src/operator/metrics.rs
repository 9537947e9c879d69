//! The operator's metrics, encoded by `prometheus-client` in the Prometheus text exposition
//! format 0.0.4 (what the CVO's `promhttp` handler serves).
//!
//! The CVO's own names where it has one (cvo.md §8.3, cvo-apply.md §14): `cluster_version`,
//! `cluster_version_payload`, `cluster_operator_payload_errors`, `cluster_operator_up` and
//! `cluster_operator_conditions`, with the CVO's labels and types (all gauges). minicvo's own
//! series are prefixed `minicvo_`: pass counts and durations, API requests, leadership.
//!
//! Every setter takes one lock and replaces or bumps a value; [`Metrics::render`] takes the same
//! lock, so a scrape never sees half an update. Families come in a fixed order and series in
//! label order, so two renders of the same state are byte-identical.
//!
//! The state is plain data behind one mutex, exposed to `prometheus-client` as one
//! [`Collector`](prometheus_client::collector::Collector) (`encode`): the crate writes the
//! `# HELP`/`# TYPE` lines, escapes label values and help texts and spells the numbers. The
//! crate's own metric types (`Family<Labels, Gauge>`) are not used for the series: a family is a
//! hash map, so its series would come out in a random order, and replacing every
//! ClusterOperator's series at once (as [`Metrics::set_operators`] does) would take a clear and
//! a refill that a scrape could see half done.

mod encode;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::registry::Registry;

use serde_json::Value;

/// Upper bounds, in seconds, of the buckets of `minicvo_sync_pass_duration_seconds`: from a
/// no-op reconcile of a small payload (0.1 s) to the CVO's longest pass timeout at its default
/// interval and more (30 min); `+Inf` follows.
pub const PASS_DURATION_BUCKETS: [f64; 14] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0,
];

/// The `reason` label of `cluster_operator_up` for a ClusterOperator with no Available
/// condition (the CVO's value).
pub const NO_AVAILABLE_CONDITION: &str = "NoAvailableCondition";

/// The operator's metrics registry: cheap to update from any task, rendered on every scrape.
///
/// `Send + Sync`; share it in an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    state: Arc<Mutex<State>>,
    /// Holds one collector, a view of `state`.
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(encode::View(state.clone())));
        Metrics { state, registry }
    }
}

#[derive(Debug, Default)]
struct State {
    /// `cluster_version`, one series per `type`.
    cluster_version: BTreeMap<String, VersionSeries>,
    /// `cluster_version_payload` of the release last set.
    payload: Option<PayloadProgress>,
    /// `cluster_operator_payload_errors` by release.
    payload_errors: BTreeMap<String, u64>,
    /// `cluster_operator_up` by ClusterOperator name.
    operators_up: BTreeMap<String, OperatorUp>,
    /// `cluster_operator_conditions` by (name, condition type): (reason, 1 or 0).
    operator_conditions: BTreeMap<(String, String), (String, u8)>,
    /// `minicvo_sync_passes_total` by (mode, result).
    passes: BTreeMap<(String, &'static str), u64>,
    /// `minicvo_sync_pass_duration_seconds` by mode.
    durations: BTreeMap<String, Histogram>,
    /// `minicvo_requests_total`.
    requests: u64,
    /// `minicvo_leader`.
    leader: bool,
}

#[derive(Debug)]
struct VersionSeries {
    version: String,
    image: String,
    from_version: String,
    value: f64,
}

#[derive(Debug)]
struct PayloadProgress {
    version: String,
    applied: usize,
    pending: usize,
}

#[derive(Debug)]
struct OperatorUp {
    version: String,
    reason: String,
    up: bool,
}

#[derive(Debug, Default)]
struct Histogram {
    /// Observations per bucket of [`PASS_DURATION_BUCKETS`] (not cumulative; the last slot is
    /// `+Inf`).
    counts: [u64; PASS_DURATION_BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        let slot = PASS_DURATION_BUCKETS
            .iter()
            .position(|le| v <= *le)
            .unwrap_or(PASS_DURATION_BUCKETS.len());
        self.counts[slot] += 1;
        self.sum += v;
        self.count += 1;
    }
}

impl Metrics {
    /// An empty registry: no release, no ClusterOperator, no pass, not the leader.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Sets the `cluster_version` series of type `kind` (the CVO's types: `initial`,
    /// `cluster`, `desired`, `updating`, `completed`, `current`, `failure`) to `unix_seconds`,
    /// replacing that type's previous series: each type has at most one.
    pub fn set_cluster_version(
        &self,
        kind: &str,
        version: &str,
        image: &str,
        from_version: &str,
        unix_seconds: f64,
    ) {
        self.state().cluster_version.insert(
            kind.to_string(),
            VersionSeries {
                version: version.to_string(),
                image: image.to_string(),
                from_version: from_version.to_string(),
                value: unix_seconds,
            },
        );
    }

    /// Removes the `cluster_version` series of type `kind` (for example `updating` once the
    /// update is over).
    pub fn clear_cluster_version(&self, kind: &str) {
        self.state().cluster_version.remove(kind);
    }

    /// Sets `cluster_version_payload{type="applied"|"pending",version}`: the tasks of the
    /// release `version` finished and not yet finished. A new release replaces the previous
    /// one's series.
    pub fn set_payload(&self, version: &str, applied: usize, pending: usize) {
        self.state().payload = Some(PayloadProgress {
            version: version.to_string(),
            applied,
            pending,
        });
    }

    /// Adds one to `cluster_operator_payload_errors{version}`, the errors met applying the
    /// release `version` since the process started (a gauge, as in the CVO).
    pub fn payload_error(&self, version: &str) {
        *self
            .state()
            .payload_errors
            .entry(version.to_string())
            .or_default() += 1;
    }

    /// Replaces `cluster_operator_up` and `cluster_operator_conditions` with those of
    /// `operators`, ClusterOperator objects as JSON; an operator missing from the list loses
    /// its series.
    ///
    /// - `cluster_operator_up{name,version,reason}`: 1 when the Available condition is True,
    ///   else 0 (also with no Available condition). `version` is the `status.versions` entry
    ///   named `operator` (empty without one); `reason` is the Available condition's reason, or
    ///   [`NO_AVAILABLE_CONDITION`].
    /// - `cluster_operator_conditions{name,condition,reason}`: 1 for True, 0 for False; a
    ///   condition that is neither (Unknown) has no series, as in the CVO.
    ///
    /// An object without `metadata.name` is skipped.
    pub fn set_operators(&self, operators: &[Value]) {
        let mut up = BTreeMap::new();
        let mut conditions = BTreeMap::new();
        for op in operators {
            let Some(name) = op.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            let version = op
                .pointer("/status/versions")
                .and_then(Value::as_array)
                .and_then(|vs| vs.iter().find(|v| v["name"] == "operator"))
                .and_then(|v| v["version"].as_str())
                .unwrap_or_default();
            let listed: &[Value] = op
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice);
            let mut available = None;
            for c in listed {
                let Some(kind) = c["type"].as_str() else {
                    continue;
                };
                let reason = c["reason"].as_str().unwrap_or_default();
                let status = c["status"].as_str().unwrap_or_default();
                if kind == "Available" && available.is_none() {
                    available = Some((status == "True", reason));
                }
                let value = match status {
                    "True" => 1,
                    "False" => 0,
                    _ => continue,
                };
                // The first of duplicated condition types wins, as a lookup by type would.
                conditions
                    .entry((name.to_string(), kind.to_string()))
                    .or_insert_with(|| (reason.to_string(), value));
            }
            let (is_up, reason) = available.unwrap_or((false, NO_AVAILABLE_CONDITION));
            up.insert(
                name.to_string(),
                OperatorUp {
                    version: version.to_string(),
                    reason: reason.to_string(),
                    up: is_up,
                },
            );
        }
        let mut state = self.state();
        state.operators_up = up;
        state.operator_conditions = conditions;
    }

    /// Records a pass of the graph in `mode` that took `seconds`: one more
    /// `minicvo_sync_passes_total{mode,result}` (`result` is `success` when `ok`, else
    /// `failure`) and one observation of `minicvo_sync_pass_duration_seconds{mode}`.
    pub fn observe_pass(&self, mode: &str, seconds: f64, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        let mut state = self.state();
        *state.passes.entry((mode.to_string(), result)).or_default() += 1;
        state
            .durations
            .entry(mode.to_string())
            .or_default()
            .observe(seconds);
    }

    /// Sets `minicvo_requests_total`, the requests sent to the API server since the process
    /// started, to `total` (the connection counts them; this copies its figure).
    pub fn set_requests(&self, total: u64) {
        self.state().requests = total;
    }

    /// Sets `minicvo_leader`: 1 while this process holds the leader lease, else 0.
    pub fn set_leader(&self, leader: bool) {
        self.state().leader = leader;
    }

    /// The metrics in the Prometheus text exposition format 0.0.4 (serve it as
    /// `text/plain; version=0.0.4; charset=utf-8`): each family with `# HELP` and `# TYPE`
    /// lines, then its series. A family with no series is left out, except the two
    /// unlabelled ones (`minicvo_requests_total`, `minicvo_leader`), which always have one.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing to a String cannot fail, and the collector never fails on its own.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// The state, also after a panic elsewhere while holding the lock: it is plain data, keep
/// serving it.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
