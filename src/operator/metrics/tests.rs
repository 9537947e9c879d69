//! Unit tests of the metrics registry and its text rendering.

use prometheus_parse::{Scrape, Value as PValue};
use serde_json::json;

use super::*;

fn scrape(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses")
}

/// The value of the one sample of `metric` whose labels include all of `labels`.
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> PValue {
    let found: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    found[0].value.clone()
}

fn series(s: &Scrape, metric: &str) -> usize {
    s.samples.iter().filter(|x| x.metric == metric).count()
}

/// A sample line: name, labels (unescaped), value text.
type Line = (String, Vec<(String, String)>, String);

/// Reads one sample line strictly by the 0.0.4 grammar: the name, the labels unescaped,
/// and the value text. Panics on anything else.
fn strict_line(line: &str) -> Line {
    let mut chars = line.chars().peekable();
    let mut name = String::new();
    while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':') {
        name.push(c);
    }
    assert!(!name.is_empty(), "no name in {line:?}");
    let mut labels = Vec::new();
    if chars.next_if_eq(&'{').is_some() {
        loop {
            let mut key = String::new();
            while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_') {
                key.push(c);
            }
            assert!(!key.is_empty(), "no label name in {line:?}");
            assert_eq!(chars.next(), Some('='), "{line:?}");
            assert_eq!(chars.next(), Some('"'), "{line:?}");
            let mut v = String::new();
            loop {
                match chars.next().expect("unterminated label value") {
                    '\\' => match chars.next() {
                        Some('\\') => v.push('\\'),
                        Some('"') => v.push('"'),
                        Some('n') => v.push('\n'),
                        c => panic!("bad escape {c:?} in {line:?}"),
                    },
                    '"' => break,
                    c => v.push(c),
                }
            }
            labels.push((key, v));
            match chars.next() {
                Some(',') => {}
                Some('}') => break,
                c => panic!("unexpected {c:?} in {line:?}"),
            }
        }
    }
    assert_eq!(
        chars.next(),
        Some(' '),
        "no space before the value in {line:?}"
    );
    let value: String = chars.collect();
    assert!(
        !value.is_empty() && !value.contains(' '),
        "bad value in {line:?}"
    );
    (name, labels, value)
}

/// Checks the whole text: every line a comment of the format or a sample; each family's
/// HELP then TYPE before its samples; no series twice.
fn strict(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut typed: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut last_help = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# HELP ") {
            last_help = Some(h.split(' ').next().unwrap().to_string());
        } else if let Some(t) = line.strip_prefix("# TYPE ") {
            let mut it = t.split(' ');
            let name = it.next().unwrap().to_string();
            assert_eq!(last_help.as_ref(), Some(&name), "TYPE without HELP: {line}");
            assert!(
                matches!(it.next(), Some("gauge" | "counter" | "histogram")),
                "{line}"
            );
            assert!(!typed.contains(&name), "family twice: {name}");
            typed.push(name);
        } else {
            let (name, labels, value) = strict_line(line);
            let family = typed.last().expect("a sample before any TYPE");
            assert!(
                name == *family
                    || ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name == format!("{family}{s}")),
                "{name} under {family}"
            );
            assert!(
                seen.insert(format!("{name}{labels:?}")),
                "series twice: {line}"
            );
            assert!(
                matches!(value.as_str(), "+Inf" | "-Inf" | "NaN") || value.parse::<f64>().is_ok(),
                "{line}"
            );
            out.push((name, labels, value));
        }
    }
    assert!(text.ends_with('\n'), "no final line feed");
    out
}

fn co(name: &str, version: Option<&str>, conditions: &[(&str, &str, &str)]) -> Value {
    let mut o = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
        "metadata": {"name": name}, "status": {}});
    if let Some(v) = version {
        o["status"]["versions"] = json!([{"name": "kube-apiserver", "version": "1.37.0"},
            {"name": "operator", "version": v}]);
    }
    o["status"]["conditions"] = conditions
        .iter()
        .map(|(t, st, r)| json!({"type": t, "status": st, "reason": r}))
        .collect();
    o
}

#[test]
fn metrics_is_send_and_sync() {
    fn check<T: Send + Sync + Default>() {}
    check::<Metrics>();
}

#[test]
fn an_empty_registry_reports_only_requests_and_leadership() {
    let text = Metrics::new().render();
    let lines = strict(&text);
    let names: Vec<_> = lines.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(
        names,
        ["minicvo_requests_total", "minicvo_leader"],
        "{text}"
    );
    let s = scrape(&text);
    assert_eq!(
        value(&s, "minicvo_requests_total", &[]),
        PValue::Counter(0.0)
    );
    assert_eq!(value(&s, "minicvo_leader", &[]), PValue::Gauge(0.0));
}

#[test]
fn render_parses_and_reports_every_value_set() {
    let m = Metrics::new();
    m.set_cluster_version(
        "completed",
        "4.1.0",
        "quay.io/r@sha256:1",
        "4.0.0",
        1_700_000_000.0,
    );
    m.set_cluster_version(
        "desired",
        "4.2.0",
        "quay.io/r@sha256:2",
        "4.1.0",
        1_700_000_100.5,
    );
    m.set_payload("4.2.0", 7, 3);
    m.payload_error("4.2.0");
    m.payload_error("4.2.0");
    m.payload_error("4.1.0");
    m.set_operators(&[
        co(
            "etcd",
            Some("4.2.0"),
            &[
                ("Available", "True", "AsExpected"),
                ("Degraded", "False", ""),
            ],
        ),
        co(
            "dns",
            Some("4.1.0"),
            &[
                ("Available", "False", "Rolling"),
                ("Progressing", "Unknown", "X"),
            ],
        ),
        co("bare", None, &[]),
    ]);
    m.observe_pass("updating", 12.5, false);
    m.observe_pass("updating", 40.0, true);
    m.observe_pass("reconciling", 0.2, true);
    m.set_requests(1234);
    m.set_leader(true);
    let text = m.render();
    strict(&text);
    let s = scrape(&text);

    let cv = |kind| value(&s, "cluster_version", &[("type", kind)]);
    assert_eq!(cv("completed"), PValue::Gauge(1_700_000_000.0));
    assert_eq!(cv("desired"), PValue::Gauge(1_700_000_100.5));
    assert_eq!(
        value(
            &s,
            "cluster_version",
            &[
                ("type", "desired"),
                ("version", "4.2.0"),
                ("image", "quay.io/r@sha256:2"),
                ("from_version", "4.1.0")
            ]
        ),
        PValue::Gauge(1_700_000_100.5)
    );
    assert_eq!(series(&s, "cluster_version"), 2);

    let payload = |t| {
        value(
            &s,
            "cluster_version_payload",
            &[("type", t), ("version", "4.2.0")],
        )
    };
    assert_eq!(payload("applied"), PValue::Gauge(7.0));
    assert_eq!(payload("pending"), PValue::Gauge(3.0));
    let errors = |v| value(&s, "cluster_operator_payload_errors", &[("version", v)]);
    assert_eq!(errors("4.2.0"), PValue::Gauge(2.0));
    assert_eq!(errors("4.1.0"), PValue::Gauge(1.0));

    let up = |n| value(&s, "cluster_operator_up", &[("name", n)]);
    assert_eq!(up("etcd"), PValue::Gauge(1.0));
    assert_eq!(up("dns"), PValue::Gauge(0.0));
    assert_eq!(up("bare"), PValue::Gauge(0.0));
    let up_labels = |n: &str| {
        let x = s
            .samples
            .iter()
            .find(|x| x.metric == "cluster_operator_up" && x.labels.get("name") == Some(n));
        let l = &x.expect("a series").labels;
        (
            l.get("version").unwrap().to_string(),
            l.get("reason").unwrap().to_string(),
        )
    };
    assert_eq!(up_labels("etcd"), ("4.2.0".into(), "AsExpected".into()));
    assert_eq!(up_labels("dns"), ("4.1.0".into(), "Rolling".into()));
    assert_eq!(
        up_labels("bare"),
        (String::new(), NO_AVAILABLE_CONDITION.into())
    );

    let cond = |n, c| {
        value(
            &s,
            "cluster_operator_conditions",
            &[("name", n), ("condition", c)],
        )
    };
    assert_eq!(cond("etcd", "Available"), PValue::Gauge(1.0));
    assert_eq!(cond("etcd", "Degraded"), PValue::Gauge(0.0));
    assert_eq!(cond("dns", "Available"), PValue::Gauge(0.0));
    // Unknown is neither 1 nor 0: no series, as in the CVO.
    assert_eq!(series(&s, "cluster_operator_conditions"), 3, "{text}");

    let passes = |m, r| {
        value(
            &s,
            "minicvo_sync_passes_total",
            &[("mode", m), ("result", r)],
        )
    };
    assert_eq!(passes("updating", "success"), PValue::Counter(1.0));
    assert_eq!(passes("updating", "failure"), PValue::Counter(1.0));
    assert_eq!(passes("reconciling", "success"), PValue::Counter(1.0));
    assert_eq!(series(&s, "minicvo_sync_passes_total"), 3);

    let PValue::Histogram(buckets) = value(
        &s,
        "minicvo_sync_pass_duration_seconds",
        &[("mode", "updating")],
    ) else {
        panic!("not a histogram");
    };
    let at = |le: f64| {
        buckets
            .iter()
            .find(|b| b.less_than == le)
            .expect("bucket")
            .count
    };
    assert_eq!(buckets.len(), PASS_DURATION_BUCKETS.len() + 1);
    assert_eq!(at(10.0), 0.0);
    assert_eq!(at(30.0), 1.0);
    assert_eq!(at(60.0), 2.0);
    assert_eq!(at(f64::INFINITY), 2.0);
    assert_eq!(
        value(
            &s,
            "minicvo_sync_pass_duration_seconds_sum",
            &[("mode", "updating")]
        ),
        PValue::Untyped(52.5)
    );
    assert_eq!(
        value(
            &s,
            "minicvo_sync_pass_duration_seconds_count",
            &[("mode", "updating")]
        ),
        PValue::Untyped(2.0)
    );

    assert_eq!(
        value(&s, "minicvo_requests_total", &[]),
        PValue::Counter(1234.0)
    );
    assert_eq!(value(&s, "minicvo_leader", &[]), PValue::Gauge(1.0));
    for family in [
        "cluster_version",
        "cluster_operator_up",
        "minicvo_sync_passes_total",
        "minicvo_leader",
    ] {
        assert!(s.docs.contains_key(family), "no HELP for {family}");
    }
}

#[test]
fn histogram_buckets_are_cumulative_with_the_edges_inclusive() {
    let m = Metrics::new();
    for v in [0.05, 0.1, 3.0, 1800.0, 4000.0] {
        m.observe_pass("initializing", v, true);
    }
    let text = m.render();
    let bucket = |le: &str| {
        strict(&text)
            .into_iter()
            .find(|(n, l, _)| n == "minicvo_sync_pass_duration_seconds_bucket" && l[1].1 == le)
            .map(|x| x.2)
            .unwrap_or_else(|| panic!("no bucket {le}: {text}"))
    };
    assert_eq!(bucket("0.1"), "2");
    assert_eq!(bucket("2.5"), "2");
    assert_eq!(bucket("5"), "3");
    assert_eq!(bucket("1800"), "4");
    assert_eq!(bucket("+Inf"), "5");
    assert!(
        text.contains("minicvo_sync_pass_duration_seconds_count{mode=\"initializing\"} 5\n"),
        "{text}"
    );
}

#[test]
fn label_values_are_escaped() {
    let m = Metrics::new();
    let nasty = "a\\b \"quoted\"\nnext, x=y}";
    m.set_cluster_version("failure", nasty, "img", "", 1.0);
    let text = m.render();
    assert!(
        text.contains(r#"cluster_version{type="failure",version="a\\b \"quoted\"\nnext, x=y}",image="img",from_version=""} 1.0"#),
        "{text}"
    );
    let lines = strict(&text);
    let (_, labels, _) = lines
        .iter()
        .find(|l| l.0 == "cluster_version")
        .expect("the series");
    assert_eq!(
        labels[1],
        ("version".to_string(), nasty.to_string()),
        "round trip"
    );
    // Every sample is on one line: the line feed never reaches the output raw.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("cluster_version{"))
            .count(),
        1
    );
}

#[test]
fn floats_and_special_values_use_the_formats_spelling() {
    let m = Metrics::new();
    m.set_cluster_version("completed", "1", "i", "", 1_700_000_000.0);
    m.set_cluster_version("current", "2", "i", "", 0.25);
    m.set_cluster_version("desired", "3", "i", "", f64::NAN);
    m.set_cluster_version("failure", "4", "i", "", f64::INFINITY);
    m.set_cluster_version("updating", "5", "i", "", f64::NEG_INFINITY);
    let text = m.render();
    let values: Vec<_> = strict(&text)
        .into_iter()
        .filter(|l| l.0 == "cluster_version")
        .map(|l| l.2)
        .collect();
    assert_eq!(
        values,
        ["1700000000.0", "0.25", "NaN", "+Inf", "-Inf"],
        "{text}"
    );
}

#[test]
fn help_texts_are_single_lines() {
    let m = Metrics::new();
    m.set_cluster_version("completed", "1", "i", "", 1.0);
    m.observe_pass("updating", 1.0, true);
    let text = m.render();
    let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
    let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!((helps, types), (5, 5), "{text}");
}

#[test]
fn set_operators_replaces_the_previous_set() {
    let m = Metrics::new();
    m.set_operators(&[
        co(
            "etcd",
            Some("1"),
            &[("Available", "True", "A"), ("Degraded", "True", "Bad")],
        ),
        co("dns", Some("1"), &[("Available", "True", "A")]),
    ]);
    m.set_operators(&[co("etcd", Some("2"), &[("Available", "False", "Down")])]);
    let text = m.render();
    let s = scrape(&text);
    assert_eq!(series(&s, "cluster_operator_up"), 1, "{text}");
    assert_eq!(
        value(
            &s,
            "cluster_operator_up",
            &[("name", "etcd"), ("version", "2"), ("reason", "Down")]
        ),
        PValue::Gauge(0.0)
    );
    assert_eq!(series(&s, "cluster_operator_conditions"), 1, "{text}");
    assert!(
        !text.contains("dns") && !text.contains("Degraded"),
        "{text}"
    );

    m.set_operators(&[]);
    let text = m.render();
    assert!(
        !text.contains("cluster_operator_up") && !text.contains("cluster_operator_conditions"),
        "{text}"
    );
}

#[test]
fn each_cluster_version_type_has_one_series_until_cleared() {
    let m = Metrics::new();
    m.set_cluster_version("updating", "4.1.0", "i1", "", 10.0);
    m.set_cluster_version("updating", "4.2.0", "i2", "4.1.0", 20.0);
    m.set_cluster_version("completed", "4.1.0", "i1", "", 15.0);
    let s = scrape(&m.render());
    assert_eq!(series(&s, "cluster_version"), 2);
    assert_eq!(
        value(
            &s,
            "cluster_version",
            &[("type", "updating"), ("version", "4.2.0")]
        ),
        PValue::Gauge(20.0)
    );
    m.clear_cluster_version("updating");
    m.clear_cluster_version("never-set");
    let s = scrape(&m.render());
    assert_eq!(series(&s, "cluster_version"), 1);
    assert_eq!(
        value(&s, "cluster_version", &[("type", "completed")]),
        PValue::Gauge(15.0)
    );
}

#[test]
fn a_new_release_replaces_the_payload_progress() {
    let m = Metrics::new();
    m.set_payload("4.1.0", 10, 0);
    m.set_payload("4.2.0", 0, 12);
    let s = scrape(&m.render());
    assert_eq!(series(&s, "cluster_version_payload"), 2);
    assert_eq!(
        value(
            &s,
            "cluster_version_payload",
            &[("type", "pending"), ("version", "4.2.0")]
        ),
        PValue::Gauge(12.0)
    );
}

#[test]
fn render_is_deterministic() {
    let m = Metrics::new();
    let names = ["zeta", "alpha", "mid", "beta"];
    let ops: Vec<_> = names
        .iter()
        .map(|n| {
            co(
                n,
                Some("1"),
                &[("Available", "True", ""), ("Degraded", "False", "")],
            )
        })
        .collect();
    m.set_operators(&ops);
    for mode in ["updating", "reconciling", "initializing"] {
        m.observe_pass(mode, 1.0, true);
    }
    let first = m.render();
    assert_eq!(first, m.render());
    let mut reversed = ops.clone();
    reversed.reverse();
    m.set_operators(&reversed);
    assert_eq!(first, m.render(), "the order of the list does not matter");
    let up: Vec<_> = strict(&first)
        .into_iter()
        .filter(|l| l.0 == "cluster_operator_up")
        .map(|l| l.1[0].1.clone())
        .collect();
    assert_eq!(up, ["alpha", "beta", "mid", "zeta"]);
}
