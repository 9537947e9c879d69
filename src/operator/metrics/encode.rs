//! The registry's state as one `prometheus-client` collector: every family, its help text, type
//! and series, in a fixed order. The crate does the text format; this only says what to write.

use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::{PASS_DURATION_BUCKETS, State, lock};

/// A view of the state, encoded on every scrape under the state's lock.
#[derive(Debug)]
pub(super) struct View(pub(super) Arc<Mutex<State>>);

impl Collector for View {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let state = lock(&self.0);
        state.encode_cvo(&mut encoder)?;
        state.encode_own(&mut encoder)
    }
}

/// Help texts. The CVO's families say what minicvo's values mean (they follow the CVO's).
const CLUSTER_VERSION_HELP: &str = "Releases of the cluster as seconds since the epoch, one \
    series per type: initial (the first release installed), cluster (the release it runs), \
    desired (the release ClusterVersion asks for), updating (the release a pass is installing or \
    updating to, since the pass started), completed (the release of the last completed pass, when \
    it completed), current (the release reconciled), failure (the release whose last pass failed, \
    when it failed). from_version is the release the cluster ran before, where known.";

impl State {
    /// The families named as in the CVO.
    fn encode_cvo(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        if !self.cluster_version.is_empty() {
            let mut family = encoder.encode_descriptor(
                "cluster_version",
                CLUSTER_VERSION_HELP,
                None,
                MetricType::Gauge,
            )?;
            for (kind, v) in &self.cluster_version {
                let labels = [
                    ("type", kind.as_str()),
                    ("version", &v.version),
                    ("image", &v.image),
                    ("from_version", &v.from_version),
                ];
                ConstGauge::new(v.value).encode(family.encode_family(&labels)?)?;
            }
        }

        if let Some(p) = &self.payload {
            let mut family = encoder.encode_descriptor(
                "cluster_version_payload",
                "Tasks of the release being applied: applied (finished) and pending (not yet), \
                 in the pass in flight or the last one.",
                None,
                MetricType::Gauge,
            )?;
            for (kind, n) in [("applied", p.applied), ("pending", p.pending)] {
                let labels = [("type", kind), ("version", &p.version)];
                ConstGauge::new(count(n)).encode(family.encode_family(&labels)?)?;
            }
        }

        if !self.payload_errors.is_empty() {
            let mut family = encoder.encode_descriptor(
                "cluster_operator_payload_errors",
                "Errors met applying each release since the process started.",
                None,
                MetricType::Gauge,
            )?;
            for (version, n) in &self.payload_errors {
                let labels = [("version", version.as_str())];
                ConstGauge::new(count_u64(*n)).encode(family.encode_family(&labels)?)?;
            }
        }

        if !self.operators_up.is_empty() {
            let mut family = encoder.encode_descriptor(
                "cluster_operator_up",
                "1 if the ClusterOperator is Available=True, 0 otherwise, also when it has no \
                 Available condition. version is its 'operator' version; reason is the reason of \
                 its Available condition, or NoAvailableCondition.",
                None,
                MetricType::Gauge,
            )?;
            for (name, o) in &self.operators_up {
                let labels = [
                    ("name", name.as_str()),
                    ("version", &o.version),
                    ("reason", &o.reason),
                ];
                ConstGauge::new(i64::from(o.up)).encode(family.encode_family(&labels)?)?;
            }
        }

        if !self.operator_conditions.is_empty() {
            let mut family = encoder.encode_descriptor(
                "cluster_operator_conditions",
                "The conditions of the ClusterOperators: 1 is True, 0 is False; a condition \
                 that is neither has no series.",
                None,
                MetricType::Gauge,
            )?;
            for ((name, condition), (reason, v)) in &self.operator_conditions {
                let labels = [
                    ("name", name.as_str()),
                    ("condition", condition),
                    ("reason", reason),
                ];
                ConstGauge::new(i64::from(*v)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }

    /// minicvo's own families. A counter is named without `_total`: the crate adds it.
    fn encode_own(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        if !self.passes.is_empty() {
            let mut family = encoder.encode_descriptor(
                "minicvo_sync_passes",
                "Passes of the payload's graph that ended, by mode and result (success or failure).",
                None,
                MetricType::Counter,
            )?;
            for ((mode, result), n) in &self.passes {
                let labels = [("mode", mode.as_str()), ("result", result)];
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }

        if !self.durations.is_empty() {
            let mut family = encoder.encode_descriptor(
                "minicvo_sync_pass_duration_seconds",
                "Wall time of a pass of the payload's graph, by mode.",
                None,
                MetricType::Histogram,
            )?;
            for (mode, h) in &self.durations {
                let labels = [("mode", mode.as_str())];
                // Per-bucket counts; the crate adds them up and writes `+Inf` for the last.
                let buckets: Vec<(f64, u64)> = PASS_DURATION_BUCKETS
                    .iter()
                    .copied()
                    .chain([f64::INFINITY])
                    .zip(h.counts)
                    .collect();
                family
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)?;
            }
        }

        let family = encoder.encode_descriptor(
            "minicvo_requests",
            "Requests sent to the API server since the process started.",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(self.requests).encode(family)?;

        let family = encoder.encode_descriptor(
            "minicvo_leader",
            "1 while this process holds the leader lease, 0 otherwise.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::from(self.leader)).encode(family)
    }
}

/// A count as a gauge value (saturating: no count reaches `i64::MAX`).
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count_u64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
