//! Which operators a payload has, which workloads stand for them, and when a workload counts
//! as updated to the payload. Pure: no cluster I/O.
//!
//! - Every ClusterOperator task of the plan (`wait` action) is one simulated operator; it
//!   reports the manifest's `status.versions` (placeholders already substituted by the loader).
//! - Its workloads ([`reporting_workloads`]) are the Deployments and DaemonSets that OpenShift
//!   ships next to a ClusterOperator for the operator that reports it: the same component and
//!   run-level (file name `0000_<level>_<component>_...`) and applied before the
//!   ClusterOperator's wait in the plan's graph. A workload the plan applies only after that
//!   wait (a later run-level, a later node) never stands for it: the wait would block the very
//!   apply it waits for (OLM's `olm` component ships the Deployments that report
//!   `operator-lifecycle-manager*` at run-level 50 and `cluster-olm-operator`, which reports
//!   ClusterOperator `olm`, at 51). An operator without such a workload reports as soon as its
//!   script allows.
//! - A live workload is updated when its pod template carries what the manifest sets: for
//!   every container and init container of the manifest, the same image, command, args and
//!   literal `env` values, and the manifest's `serviceAccountName` when it names one. Release
//!   tooling puts the release version into exactly these (image tags, `RELEASE_VERSION`), so
//!   a template that matches the new payload is one the update has written. Fields the API
//!   server defaults are never compared, so defaulting cannot make a match fail.

use serde_json::Value;

use crate::clusteroperator::wanted_versions;
use crate::manifest::{Manifest, ObjectId};
use crate::plan::{Action, Plan, Task};

/// A workload an operator's report waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its identity (group `apps`).
    pub id: ObjectId,
    /// `apiVersion` of the manifest.
    pub api_version: String,
    /// The manifest's `spec.template`.
    pub template: Value,
    /// The task that applies it.
    pub task: usize,
}

/// One operator to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorSpec {
    /// The ClusterOperator name.
    pub name: String,
    /// The ClusterOperator task.
    pub task: usize,
    /// `(name, version)` pairs to report, from the manifest.
    pub versions: Vec<(String, String)>,
    /// The component from the file name.
    pub component: Option<String>,
    /// Its workloads (empty: report without waiting for one).
    pub workloads: Vec<Workload>,
}

/// Whether a manifest is a Deployment or DaemonSet.
#[must_use]
pub fn is_simulated_workload(m: &Manifest) -> bool {
    m.id.group == "apps" && (m.id.kind == "Deployment" || m.id.kind == "DaemonSet")
}

/// The workloads that report the ClusterOperator of task `operator`: the Deployments and
/// DaemonSets the plan applies (or creates) in the same component and run-level, before the
/// ClusterOperator's wait (same node and earlier, or an ancestor node). Shared by the
/// simulated operators and the apply's workload hint, so both agree on who reports what.
pub fn reporting_workloads<'a>(
    plan: &'a Plan,
    operator: &'a Task,
) -> impl Iterator<Item = &'a Task> + 'a {
    plan.tasks.iter().filter(move |w| {
        matches!(w.action, Action::Apply | Action::CreateOnly)
            && is_simulated_workload(&w.manifest)
            && w.component.is_some()
            && w.component == operator.component
            && w.run_level == operator.run_level
            && plan.runs_before(w.id, operator.id)
    })
}

/// The operators of a plan, in task order.
#[must_use]
pub fn operators(plan: &Plan) -> Vec<OperatorSpec> {
    let mut out: Vec<OperatorSpec> = Vec::new();
    for t in &plan.tasks {
        if t.action != Action::Wait || out.iter().any(|o| o.name == t.manifest.id.name) {
            continue;
        }
        let workloads = reporting_workloads(plan, t)
            .filter_map(|w| {
                Some(Workload {
                    id: w.manifest.id.clone(),
                    api_version: w.manifest.api_version.clone(),
                    template: w.manifest.object.pointer("/spec/template")?.clone(),
                    task: w.id,
                })
            })
            .collect();
        out.push(OperatorSpec {
            name: t.manifest.id.name.clone(),
            task: t.id,
            versions: wanted_versions(&t.manifest.object),
            component: t.component.clone(),
            workloads,
        });
    }
    out
}

fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers"]
        .into_iter()
        .filter_map(|k| pod.get(k).and_then(Value::as_array))
        .flatten()
}

/// Why a live workload's template does not (yet) carry the manifest's template, or `Ok`.
///
/// # Errors
/// The first difference, e.g. `container machine-config-operator: image a, want b`.
pub fn template_updated(want: &Value, live: &Value) -> Result<(), String> {
    let Some(live_pod) = live.pointer("/spec/template/spec") else {
        return Err("no pod template".into());
    };
    let Some(want_pod) = want.get("spec") else {
        return Ok(());
    };
    if let Some(sa) = want_pod.get("serviceAccountName").and_then(Value::as_str) {
        let have = live_pod
            .get("serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("default");
        if have != sa {
            return Err(format!("serviceAccountName {have}, want {sa}"));
        }
    }
    for c in containers(want_pod) {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(lc) =
            containers(live_pod).find(|l| l.get("name").and_then(Value::as_str) == Some(name))
        else {
            return Err(format!("no container {name}"));
        };
        for field in ["image", "command", "args"] {
            if let Some(w) = c.get(field)
                && lc.get(field) != Some(w)
            {
                let show = |v: Option<&Value>| match v {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "<unset>".into(),
                };
                return Err(format!(
                    "container {name}: {field} {}, want {}",
                    show(lc.get(field)),
                    show(Some(w))
                ));
            }
        }
        for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
            let (Some(var), Some(value)) = (
                e.get("name").and_then(Value::as_str),
                e.get("value").and_then(Value::as_str),
            ) else {
                continue;
            };
            let have = lc
                .get("env")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|l| l.get("name").and_then(Value::as_str) == Some(var))
                .and_then(|l| l.get("value").and_then(Value::as_str));
            if have != Some(value) {
                return Err(format!(
                    "container {name}: ${var}={}, want {value}",
                    have.unwrap_or("<unset>")
                ));
            }
        }
    }
    Ok(())
}

fn int(v: &Value, path: &str) -> i64 {
    v.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

/// Why a live Deployment or DaemonSet is not rolled out and available, or `Ok`. Needs a
/// scheduler and kubelets: on a control plane without them, nothing is ever available.
///
/// # Errors
/// What is missing, e.g. `1 of 1 replicas updated, 0 available`.
pub fn rolled_out(kind: &str, live: &Value) -> Result<(), String> {
    let generation = int(live, "/metadata/generation");
    let observed = int(live, "/status/observedGeneration");
    if observed < generation {
        return Err(format!(
            "generation {generation} not yet observed (observed {observed})"
        ));
    }
    let (want, updated, available) = if kind == "DaemonSet" {
        (
            int(live, "/status/desiredNumberScheduled"),
            int(live, "/status/updatedNumberScheduled"),
            int(live, "/status/numberAvailable"),
        )
    } else {
        (
            live.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1),
            int(live, "/status/updatedReplicas"),
            int(live, "/status/availableReplicas"),
        )
    };
    if updated < want || available < want {
        return Err(format!(
            "{updated} of {want} updated, {available} available"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::filter::Filters;
    use crate::payload::{LoadOptions, load};
    use crate::plan::{self, Mode};

    fn plan_of(dir: &str) -> Plan {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let options = LoadOptions {
            substitute_placeholder: true,
            ..LoadOptions::default()
        };
        let p = load(&root, &options).unwrap();
        plan::from_payload(p, &Filters::default(), Mode::Updating, 0)
    }

    #[test]
    fn sample_payload_operators_and_their_deployments() {
        let plan = plan_of("payload/new");
        let ops = operators(&plan);
        let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["example", "machine-config"]);
        let mc = &ops[1];
        assert_eq!(mc.versions, vec![("operator".into(), "4.14.0".into())]);
        assert_eq!(mc.workloads.len(), 1);
        assert_eq!(mc.workloads[0].id.name, "machine-config-operator");
        assert_eq!(
            mc.workloads[0].id.namespace.as_deref(),
            Some("openshift-machine-config-operator")
        );
    }

    /// OLM's shape: three operators' Deployments and their ClusterOperators at run-level 50,
    /// a Deployment applied after them in the same file order, and `cluster-olm-operator`
    /// with ClusterOperator `olm` at 51, all of component `olm`.
    #[test]
    fn clusteroperator_never_waits_for_a_workload_applied_after_its_wait() {
        let dir = tempfile::tempdir().unwrap();
        let rm = dir.path().join("release-manifests");
        std::fs::create_dir_all(&rm).unwrap();
        let include = "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n";
        let deployment = |ns: &str, name: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n{include}spec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: img:2\n"
            )
        };
        let operator = |name: &str| {
            format!(
                "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: {name}\n{include}status:\n  versions:\n  - name: operator\n    version: \"2\"\n"
            )
        };
        let lm = "openshift-operator-lifecycle-manager";
        for (file, text) in [
            (
                "0000_50_olm_07-olm-operator.deployment.yaml",
                deployment(lm, "olm-operator"),
            ),
            (
                "0000_50_olm_08-catalog-operator.deployment.yaml",
                deployment(lm, "catalog-operator"),
            ),
            (
                "0000_50_olm_99-operatorstatus.yaml",
                format!(
                    "{}---\n{}",
                    operator("operator-lifecycle-manager"),
                    operator("operator-lifecycle-manager-catalog")
                ),
            ),
            (
                "0000_50_olm_99z-late.deployment.yaml",
                deployment(lm, "late"),
            ),
            (
                "0000_51_olm_06_deployment.yaml",
                deployment("openshift-cluster-olm-operator", "cluster-olm-operator"),
            ),
            ("0000_51_olm_07_cluster_operator.yaml", operator("olm")),
        ] {
            std::fs::write(rm.join(file), text).unwrap();
        }
        let p = load(dir.path(), &LoadOptions::default()).unwrap();
        for mode in [Mode::Updating, Mode::Initializing] {
            let plan = plan::from_payload(p.clone(), &Filters::default(), mode, 0);
            let ops = operators(&plan);
            let names = |o: &OperatorSpec| -> Vec<String> {
                o.workloads.iter().map(|w| w.id.name.clone()).collect()
            };
            assert_eq!(ops.len(), 3, "{mode:?}");
            for o in &ops[..2] {
                assert_eq!(
                    names(o),
                    ["olm-operator", "catalog-operator"],
                    "{mode:?} {}",
                    o.name
                );
            }
            assert_eq!(ops[2].name, "olm");
            assert_eq!(names(&ops[2]), ["cluster-olm-operator"], "{mode:?}");
        }
    }

    fn live(pod: Value) -> Value {
        json!({"spec": {"template": {"spec": pod}}})
    }

    #[test]
    fn template_matching_compares_what_the_payload_sets() {
        let want = json!({"spec": {"serviceAccountName": "op", "containers": [{
            "name": "c", "image": "img:2", "args": ["a"],
            "env": [{"name": "RELEASE_VERSION", "value": "2"},
                    {"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}]}});
        let ok = live(
            json!({"serviceAccountName": "op", "dnsPolicy": "ClusterFirst",
            "containers": [{"name": "c", "image": "img:2", "args": ["a"],
                "terminationMessagePath": "/dev/termination-log",
                "env": [{"name": "RELEASE_VERSION", "value": "2"}]}]}),
        );
        assert_eq!(template_updated(&want, &ok), Ok(()));

        let old_image = live(json!({"serviceAccountName": "op",
            "containers": [{"name": "c", "image": "img:1", "args": ["a"]}]}));
        assert_eq!(
            template_updated(&want, &old_image).unwrap_err(),
            "container c: image img:1, want img:2"
        );
        let old_env = live(
            json!({"serviceAccountName": "op", "containers": [{"name": "c",
            "image": "img:2", "args": ["a"], "env": [{"name": "RELEASE_VERSION", "value": "1"}]}]}),
        );
        assert_eq!(
            template_updated(&want, &old_env).unwrap_err(),
            "container c: $RELEASE_VERSION=1, want 2"
        );
        let default_sa = live(json!({"containers": [{"name": "c", "image": "img:2"}]}));
        assert_eq!(
            template_updated(&want, &default_sa).unwrap_err(),
            "serviceAccountName default, want op"
        );
        assert!(template_updated(&want, &json!({})).is_err());
    }

    #[test]
    fn rollout_needs_observed_generation_and_available_replicas() {
        let d = json!({"metadata": {"generation": 2}, "spec": {"replicas": 1},
            "status": {"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1}});
        assert_eq!(rolled_out("Deployment", &d), Ok(()));
        let d = json!({"metadata": {"generation": 3}, "spec": {},
            "status": {"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1}});
        assert!(
            rolled_out("Deployment", &d)
                .unwrap_err()
                .contains("not yet observed")
        );
        let d = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1}});
        assert_eq!(
            rolled_out("Deployment", &d).unwrap_err(),
            "0 of 1 updated, 0 available"
        );
        let ds = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}});
        assert_eq!(rolled_out("DaemonSet", &ds), Ok(()));
    }
}
