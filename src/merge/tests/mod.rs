//! Table tests: live object, manifest, expected write, per kind and per rule. The helpers are
//! here; the cases are in one module per family of kinds.

mod kinds;
mod mutations;
mod properties;
mod workloads;

use serde_json::{Value, json};

use super::*;

/// One case: the live object, the manifest, and the expected write (`None`: unchanged).
struct Case {
    name: &'static str,
    live: Value,
    manifest: Value,
    expected: Option<Value>,
}

fn case(name: &'static str, live: Value, manifest: Value, expected: Option<Value>) -> Case {
    Case {
        name,
        live,
        manifest,
        expected,
    }
}

fn run(cases: Vec<Case>) {
    let mut failed = Vec::new();
    for c in cases {
        let got = merge_prepared(&c.live, &c.manifest).expect(c.name);
        if got != c.expected {
            failed.push(format!(
                "{}:\n  got      {}\n  expected {}",
                c.name,
                got.map_or("unchanged".into(), |v| v.to_string()),
                c.expected.map_or("unchanged".into(), |v| v.to_string())
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "namespace": "n"}, "spec": spec})
}

fn pod(containers: Value) -> Value {
    json!({"template": {"spec": {"containers": containers}}})
}

/// A Deployment spec as the merge normalises it, so that only the field under test differs.
fn full(extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 1,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}],
                              "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}}
    });
    merge_into(&mut spec, extra);
    spec
}

fn merge_into(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                merge_into(x.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn obj(api: &str, kind: &str, rest: Value) -> Value {
    let mut o =
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "n"}});
    merge_into(&mut o, rest);
    o
}
