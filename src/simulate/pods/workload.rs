//! What a live workload object says about the pods it runs: their template (one generation of
//! pods per template), their ServiceAccount, what they need to exist (ConfigMaps, Secrets, the
//! ServiceAccount) and how they use it ([`Use`], which decides what its deletion does to them),
//! and whether a rollout overlaps the old and new pods. Pure: no cluster I/O.

use std::hash::{Hash as _, Hasher as _};
use std::time::Duration;

use serde_json::Value;

use crate::manifest::ObjectId;

/// How a template change replaces the running pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Old and new pods run side by side: the old generation stops once the new one is
    /// available (`RollingUpdate` with room to surge, or to keep old pods while new ones
    /// start).
    Overlap,
    /// The old generation stops before the new one starts (`Recreate`, or a `RollingUpdate`
    /// that can neither surge nor keep an old pod, as a one-replica DaemonSet's default).
    StopFirst,
}

/// How a pod uses a dependency: what the kubelet (or the API server) does with it, and so what
/// its deletion does to a pod that runs and to one that has to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Use {
    /// Image pull credentials (`imagePullSecrets`): read only when an image is pulled. A pod
    /// that runs never reads them again; a pod that starts without them is started anyway
    /// (the kubelet pulls without them, which fails only where the registry needs them).
    PullSecret,
    /// A `configMap` or `secret` volume, or a projected volume's source: the kubelet writes
    /// the files before the pod's containers start and keeps them when the object is deleted
    /// (a container restart keeps its volumes too); a new pod cannot start without it.
    Volume,
    /// `env[].valueFrom` (`configMapKeyRef`, `secretKeyRef`) or `envFrom`: the values are
    /// fixed when a container is created, so a running container keeps them; a new pod, or a
    /// restart of the container, cannot be created without it.
    Env,
    /// The pod's ServiceAccount: its token authenticates every request the pod sends. Deleted,
    /// the token is rejected at once (harm to a pod that runs), and the API server refuses to
    /// create a new pod of it.
    Account,
}

impl Use {
    /// Whether a pod cannot start while the object is missing (all but pull secrets).
    #[must_use]
    pub fn blocks_start(self) -> bool {
        self != Use::PullSecret
    }
}

/// Something a pod needs to exist.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dependency {
    /// `ConfigMap`, `Secret` or `ServiceAccount`.
    pub kind: &'static str,
    /// Its namespace (the pod's).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Where the template names it, e.g. `volume config`, `envFrom of container operator`.
    pub via: String,
    /// How the pod uses it (the strongest use when the template names it more than once).
    pub used: Use,
}

impl Dependency {
    /// The object's identity (core group).
    #[must_use]
    pub fn id(&self) -> ObjectId {
        ObjectId {
            group: String::new(),
            kind: self.kind.into(),
            namespace: Some(self.namespace.clone()),
            name: self.name.clone(),
        }
    }
}

/// The pod template of a live Deployment or DaemonSet.
#[must_use]
pub fn template(live: &Value) -> Option<&Value> {
    live.pointer("/spec/template")
}

/// A hash of the template: a new value is a new generation of pods.
#[must_use]
pub fn template_hash(template: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    template.to_string().hash(&mut h);
    h.finish()
}

/// The ServiceAccount the pods run as (`default` when the template names none).
#[must_use]
pub fn service_account(template: &Value) -> String {
    template
        .pointer("/spec/serviceAccountName")
        .or_else(|| template.pointer("/spec/serviceAccount"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string()
}

/// `spec.minReadySeconds` of a live Deployment or DaemonSet: how long a new pod must be ready
/// before it counts as available (and an old one may go).
#[must_use]
pub fn min_ready(live: &Value) -> Duration {
    live.pointer("/spec/minReadySeconds")
        .and_then(Value::as_u64)
        .map_or(Duration::ZERO, Duration::from_secs)
}

fn int_or_percent(v: Option<&Value>, default: &str, replicas: i64, round_up: bool) -> i64 {
    let text = match v {
        Some(Value::Number(n)) => return n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.as_str(),
        _ => default,
    };
    match text.strip_suffix('%') {
        Some(p) => {
            let p: i64 = p.trim().parse().unwrap_or(0);
            let scaled = replicas * p;
            if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            }
        }
        None => text.trim().parse().unwrap_or(0),
    }
}

/// How `live` (a Deployment or DaemonSet) rolls out a new template.
///
/// A Deployment's `RollingUpdate` overlaps unless it may not surge and must not keep any old
/// pod (`maxSurge` 0 and `maxUnavailable` ≥ replicas): `maxSurge` rounds up and
/// `maxUnavailable` down, both default 25%. A DaemonSet has one pod per node; the simulator
/// stands for one node, so its `RollingUpdate` overlaps only with `maxSurge` > 0 (default 0).
/// `OnDelete` is treated as a rolling update (an operator deletes the old pods itself once
/// the new ones are ready).
#[must_use]
pub fn rollout(kind: &str, live: &Value) -> Rollout {
    let daemon = kind == "DaemonSet";
    let strategy = live.pointer(if daemon {
        "/spec/updateStrategy"
    } else {
        "/spec/strategy"
    });
    let kind_of = strategy
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate");
    if kind_of == "Recreate" {
        return Rollout::StopFirst;
    }
    if kind_of == "OnDelete" {
        return Rollout::Overlap;
    }
    let rolling = strategy.and_then(|s| s.get("rollingUpdate"));
    let replicas = if daemon {
        1
    } else {
        live.pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
    };
    let surge_default = if daemon { "0" } else { "25%" };
    let surge = int_or_percent(
        rolling.and_then(|r| r.get("maxSurge")),
        surge_default,
        replicas,
        true,
    );
    let unavailable = int_or_percent(
        rolling.and_then(|r| r.get("maxUnavailable")),
        if daemon { "1" } else { "25%" },
        replicas,
        false,
    );
    if surge > 0 || unavailable < replicas {
        Rollout::Overlap
    } else {
        Rollout::StopFirst
    }
}

fn optional(v: &Value) -> bool {
    v.get("optional").and_then(Value::as_bool) == Some(true)
}

fn name_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Everything the pods of `template` need to exist in `namespace`: the ConfigMaps and
/// Secrets of volumes (projected sources too), `envFrom` and `env[].valueFrom` of every
/// container and init container, the image pull secrets and the ServiceAccount, each with how
/// it is used. References marked `optional: true` are left out. Sorted, one entry per object
/// (with its strongest use: [`Use::Account`] over [`Use::Env`] over [`Use::Volume`] over
/// [`Use::PullSecret`]).
#[must_use]
pub fn dependencies(template: &Value, namespace: &str) -> Vec<Dependency> {
    let mut out: Vec<Dependency> = Vec::new();
    let mut add = |kind: &'static str, name: &str, via: String, used: Use| match out
        .iter_mut()
        .find(|d| d.kind == kind && d.name == name)
    {
        Some(d) if d.used < used => {
            d.via = via;
            d.used = used;
        }
        Some(_) => {}
        None => out.push(Dependency {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            via,
            used,
        }),
    };
    let spec = template.get("spec").unwrap_or(&Value::Null);
    add(
        "ServiceAccount",
        &service_account(template),
        "serviceAccountName".into(),
        Use::Account,
    );
    for v in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let vol = v.get("name").and_then(Value::as_str).unwrap_or("?");
        if let Some(c) = v.get("configMap").filter(|c| !optional(c))
            && let Some(n) = name_at(c, "name")
        {
            add("ConfigMap", n, format!("volume {vol}"), Use::Volume);
        }
        if let Some(s) = v.get("secret").filter(|s| !optional(s))
            && let Some(n) = name_at(s, "secretName")
        {
            add("Secret", n, format!("volume {vol}"), Use::Volume);
        }
        for source in v
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(c) = source.get("configMap").filter(|c| !optional(c))
                && let Some(n) = name_at(c, "name")
            {
                add(
                    "ConfigMap",
                    n,
                    format!("projected volume {vol}"),
                    Use::Volume,
                );
            }
            if let Some(s) = source.get("secret").filter(|s| !optional(s))
                && let Some(n) = name_at(s, "name")
            {
                add("Secret", n, format!("projected volume {vol}"), Use::Volume);
            }
        }
    }
    for key in ["initContainers", "containers"] {
        for c in spec
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let container = c.get("name").and_then(Value::as_str).unwrap_or("?");
            for from in c
                .get("envFrom")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(r) = from.get("configMapRef").filter(|r| !optional(r))
                    && let Some(n) = name_at(r, "name")
                {
                    add(
                        "ConfigMap",
                        n,
                        format!("envFrom of container {container}"),
                        Use::Env,
                    );
                }
                if let Some(r) = from.get("secretRef").filter(|r| !optional(r))
                    && let Some(n) = name_at(r, "name")
                {
                    add(
                        "Secret",
                        n,
                        format!("envFrom of container {container}"),
                        Use::Env,
                    );
                }
            }
            for env in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                let var = env.get("name").and_then(Value::as_str).unwrap_or("?");
                if let Some(r) = env
                    .pointer("/valueFrom/configMapKeyRef")
                    .filter(|r| !optional(r))
                    && let Some(n) = name_at(r, "name")
                {
                    add(
                        "ConfigMap",
                        n,
                        format!("env {var} of container {container}"),
                        Use::Env,
                    );
                }
                if let Some(r) = env
                    .pointer("/valueFrom/secretKeyRef")
                    .filter(|r| !optional(r))
                    && let Some(n) = name_at(r, "name")
                {
                    add(
                        "Secret",
                        n,
                        format!("env {var} of container {container}"),
                        Use::Env,
                    );
                }
            }
        }
    }
    for s in spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(n) = name_at(s, "name") {
            add("Secret", n, "imagePullSecrets".into(), Use::PullSecret);
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(strategy: Value, replicas: i64) -> Value {
        json!({"spec": {"replicas": replicas, "strategy": strategy, "template": {}}})
    }

    #[test]
    fn rollouts_follow_the_strategy() {
        let cases = [
            (json!(null), 1, Rollout::Overlap),
            (json!({"type": "Recreate"}), 3, Rollout::StopFirst),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}),
                1,
                Rollout::StopFirst,
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}),
                3,
                Rollout::Overlap,
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "100%"}}),
                2,
                Rollout::StopFirst,
            ),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}}),
                1,
                Rollout::Overlap,
            ),
        ];
        for (strategy, replicas, want) in cases {
            assert_eq!(
                rollout("Deployment", &deployment(strategy.clone(), replicas)),
                want,
                "{strategy} x{replicas}"
            );
        }
        let ds = |s: Value| json!({"spec": {"updateStrategy": s}});
        assert_eq!(rollout("DaemonSet", &ds(json!(null))), Rollout::StopFirst);
        assert_eq!(
            rollout(
                "DaemonSet",
                &ds(
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
                )
            ),
            Rollout::Overlap
        );
        assert_eq!(
            rollout("DaemonSet", &ds(json!({"type": "OnDelete"}))),
            Rollout::Overlap
        );
    }

    #[test]
    fn dependencies_cover_every_reference_but_optional_ones() {
        let t = json!({"spec": {
            "serviceAccountName": "op",
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "a", "configMap": {"name": "cm-vol"}},
                {"name": "b", "secret": {"secretName": "s-vol"}},
                {"name": "c", "configMap": {"name": "cm-opt", "optional": true}},
                {"name": "d", "projected": {"sources": [
                    {"configMap": {"name": "cm-proj"}},
                    {"secret": {"name": "s-proj"}},
                    {"serviceAccountToken": {"path": "token"}}
                ]}}
            ],
            "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "s-from"}}]}],
            "containers": [{"name": "main",
                "envFrom": [{"configMapRef": {"name": "cm-from"}},
                            {"configMapRef": {"name": "cm-from-opt", "optional": true}}],
                "env": [
                    {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm-key", "key": "x"}}},
                    {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "s-key", "key": "y"}}},
                    {"name": "Z", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                ]}]
        }});
        let deps = dependencies(&t, "ns");
        let names: Vec<String> = deps
            .iter()
            .map(|d| format!("{} {}", d.kind, d.name))
            .collect();
        assert_eq!(
            names,
            [
                "ConfigMap cm-from",
                "ConfigMap cm-key",
                "ConfigMap cm-proj",
                "ConfigMap cm-vol",
                "Secret pull",
                "Secret s-from",
                "Secret s-key",
                "Secret s-proj",
                "Secret s-vol",
                "ServiceAccount op",
            ]
        );
        assert!(deps.iter().all(|d| d.namespace == "ns"));
        let bare = dependencies(&json!({"spec": {"containers": []}}), "ns");
        assert_eq!(bare.len(), 1);
        assert_eq!(bare[0].name, "default");
    }

    #[test]
    fn each_dependency_is_used_as_the_kubelet_uses_it() {
        let t = json!({"spec": {
            "serviceAccountName": "op",
            "imagePullSecrets": [{"name": "pull"}, {"name": "both"}],
            "volumes": [
                {"name": "a", "configMap": {"name": "cm-vol"}},
                {"name": "b", "secret": {"secretName": "both"}},
                {"name": "c", "projected": {"sources": [{"configMap": {"name": "cm-env"}}]}}
            ],
            "containers": [{"name": "main",
                "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "x"}}}]}]
        }});
        let uses: Vec<(String, Use, String)> = dependencies(&t, "ns")
            .into_iter()
            .map(|d| (d.name, d.used, d.via))
            .collect();
        assert_eq!(
            uses,
            [
                ("cm-env".into(), Use::Env, "env X of container main".into()),
                ("cm-vol".into(), Use::Volume, "volume a".into()),
                ("both".into(), Use::Volume, "volume b".into()),
                ("pull".into(), Use::PullSecret, "imagePullSecrets".into()),
                ("op".into(), Use::Account, "serviceAccountName".into()),
            ]
        );
        assert!(Use::Volume.blocks_start() && Use::Env.blocks_start());
        assert!(Use::Account.blocks_start() && !Use::PullSecret.blocks_start());
    }

    #[test]
    fn min_ready_seconds_delay_availability() {
        assert_eq!(min_ready(&json!({"spec": {}})), Duration::ZERO);
        assert_eq!(
            min_ready(&json!({"spec": {"minReadySeconds": 12}})),
            Duration::from_secs(12)
        );
    }

    #[test]
    fn the_hash_follows_the_template() {
        let a = json!({"spec": {"containers": [{"image": "a"}]}});
        let b = json!({"spec": {"containers": [{"image": "b"}]}});
        assert_eq!(template_hash(&a), template_hash(&a.clone()));
        assert_ne!(template_hash(&a), template_hash(&b));
    }
}
