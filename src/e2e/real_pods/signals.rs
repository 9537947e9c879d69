//! What a real pod, or an event about it, says about harm: pure readings of the objects the
//! real-pod watch sees (no I/O).
//!
//! - A container's termination message: a refused request (`denied:` from the stand-in
//!   operator, `… is forbidden: …`, `Unauthorized`) or a missing file or variable (`missing:`
//!   from the stand-in).
//! - An object that was not found when a pod had to start: the kubelet's `FailedMount` event
//!   (`MountVolume.SetUp failed for volume "v" : configmap "c" not found`), its
//!   `CreateContainerConfigError` (`secret "s" not found`), or the ReplicaSet's `FailedCreate`
//!   event (`… serviceaccount "sa" not found`).

use k8s_openapi::api::core::v1::Pod;

use crate::manifest::ObjectId;

/// A termination message that reports a refused request.
pub(super) fn is_denial(message: &str) -> bool {
    message.starts_with("denied:")
        || message.contains(" is forbidden: ")
        || message.contains("Unauthorized")
}

/// A termination message that reports a file or variable the container needed and did not
/// find (the stand-in operator's `missing:`).
pub(super) fn is_missing(message: &str) -> bool {
    message.starts_with("missing:")
}

/// The object of a not-found error in `message`: `configmap "x" not found`, `secret "x" not
/// found` or `serviceaccount "x" not found`, as (kind, name).
pub(super) fn not_found(message: &str) -> Option<(&'static str, String)> {
    for (word, kind) in [
        ("configmap \"", "ConfigMap"),
        ("configmaps \"", "ConfigMap"),
        ("secret \"", "Secret"),
        ("secrets \"", "Secret"),
        ("serviceaccount \"", "ServiceAccount"),
        ("serviceaccounts \"", "ServiceAccount"),
    ] {
        let Some(at) = message.find(word) else {
            continue;
        };
        let rest = &message[at + word.len()..];
        let (name, after) = rest.split_once('"')?;
        if after.trim_start().starts_with("not found") && !name.is_empty() {
            return Some((kind, name.to_string()));
        }
    }
    None
}

/// A core-group object of `namespace`.
pub(super) fn core(kind: &str, namespace: &str, name: &str) -> ObjectId {
    ObjectId {
        group: String::new(),
        kind: kind.to_string(),
        namespace: Some(namespace.to_string()),
        name: name.to_string(),
    }
}

/// Whether a container of `p` ever ran (running now, or ended).
pub(super) fn ran(p: &Pod) -> bool {
    p.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .any(|c| {
            let ran_in = |s: Option<&k8s_openapi::api::core::v1::ContainerState>| {
                s.is_some_and(|s| s.running.is_some() || s.terminated.is_some())
            };
            ran_in(c.state.as_ref()) || ran_in(c.last_state.as_ref())
        })
}

/// The ConfigMaps and Secrets `p` mounts (volumes and projected sources), as objects of its
/// namespace, with the path each is mounted at in some container (when mounted).
pub(super) fn mounted(p: &Pod) -> Vec<(ObjectId, Option<String>)> {
    let ns = p.metadata.namespace.clone().unwrap_or_default();
    let Some(spec) = p.spec.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for v in spec.volumes.iter().flatten() {
        let mut sources = Vec::new();
        if let Some(c) = v.config_map.as_ref() {
            sources.push(core("ConfigMap", &ns, &c.name));
        }
        if let Some(n) = v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) {
            sources.push(core("Secret", &ns, n));
        }
        for s in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = s.config_map.as_ref() {
                sources.push(core("ConfigMap", &ns, &c.name));
            }
            if let Some(c) = s.secret.as_ref() {
                sources.push(core("Secret", &ns, &c.name));
            }
        }
        let path = spec
            .containers
            .iter()
            .flat_map(|c| c.volume_mounts.iter().flatten())
            .find(|m| m.name == v.name)
            .map(|m| m.mount_path.clone());
        out.extend(sources.into_iter().map(|o| (o, path.clone())));
    }
    out
}

/// The object mounted where a `missing: file PATH: …` message of `p` points, if any.
pub(super) fn missing_object(p: &Pod, message: &str) -> Option<ObjectId> {
    let path = message.strip_prefix("missing: file ")?.split(':').next()?;
    mounted(p)
        .into_iter()
        .filter_map(|(o, at)| at.map(|at| (o, at)))
        .find(|(_, at)| path.starts_with(&format!("{}/", at.trim_end_matches('/'))))
        .map(|(o, _)| o)
}

/// The workload of a ReplicaSet (`<deployment>-<hash>`) or DaemonSet named `owner` of `kind`.
pub(super) fn workload_of_owner(kind: &str, owner: &str, namespace: &str) -> Option<ObjectId> {
    let (kind, name) = match kind {
        "ReplicaSet" => ("Deployment", owner.rsplit_once('-')?.0.to_string()),
        "DaemonSet" => ("DaemonSet", owner.to_string()),
        _ => return None,
    };
    Some(ObjectId {
        group: "apps".to_string(),
        kind: kind.to_string(),
        namespace: Some(namespace.to_string()),
        name,
    })
}

/// The Deployment (through its ReplicaSet, named `<deployment>-<hash>`) or DaemonSet that owns
/// `p`.
pub(super) fn workload_of(p: &Pod) -> Option<ObjectId> {
    let owner = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    workload_of_owner(
        &owner.kind,
        &owner.name,
        p.metadata.namespace.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner_kind: &str, owner: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": "u", "controller": true}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_belongs_to_the_deployment_of_its_replicaset_or_to_its_daemonset() {
        let d = workload_of(&pod("ReplicaSet", "machine-config-operator-6f6bdd76c9")).unwrap();
        assert_eq!(
            (d.kind.as_str(), d.name.as_str()),
            ("Deployment", "machine-config-operator")
        );
        let ds = workload_of(&pod("DaemonSet", "node-agent")).unwrap();
        assert_eq!(
            (ds.kind.as_str(), ds.name.as_str()),
            ("DaemonSet", "node-agent")
        );
        assert!(workload_of(&pod("Job", "j")).is_none());
    }

    #[test]
    fn denials_are_the_refusals_of_the_api_server() {
        assert!(is_denial("denied: GET /apis/x: 403: leases is forbidden"));
        assert!(is_denial(
            r#"leases.coordination.k8s.io "x" is forbidden: User "u" cannot get"#
        ));
        assert!(is_denial("Unauthorized"));
        assert!(!is_denial("panic: nil pointer"));
        assert!(!is_denial(""));
        assert!(is_missing("missing: file /etc/operator/key: no such file"));
        assert!(!is_missing("ok: 3 checks"));
    }

    #[test]
    fn not_found_names_the_object_the_kubelet_or_the_api_server_missed() {
        let cases = [
            (
                r#"MountVolume.SetUp failed for volume "config" : configmap "config" not found"#,
                Some(("ConfigMap", "config")),
            ),
            (
                r#"secret "credentials" not found"#,
                Some(("Secret", "credentials")),
            ),
            (
                r#"Error creating: pods "op-7d9-" is forbidden: error looking up service account ns/operator: serviceaccount "operator" not found"#,
                Some(("ServiceAccount", "operator")),
            ),
            (r#"couldn't find key x in ConfigMap ns/env-config"#, None),
            (r#"configmap "config" is being deleted"#, None),
            ("", None),
        ];
        for (message, want) in cases {
            let got = not_found(message);
            assert_eq!(
                got.as_ref().map(|(k, n)| (*k, n.as_str())),
                want,
                "{message}"
            );
        }
    }

    #[test]
    fn a_missing_file_is_traced_to_the_volume_mounted_there() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "c", "volumeMounts": [
                    {"name": "cfg", "mountPath": "/etc/operator"},
                    {"name": "creds", "mountPath": "/etc/creds/"}]}],
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "config"}},
                    {"name": "creds", "secret": {"secretName": "credentials"}},
                    {"name": "all", "projected": {"sources": [{"configMap": {"name": "extra"}}]}}
                ]
            }
        }))
        .unwrap();
        let at = |m: &str| missing_object(&p, m).map(|o| format!("{} {}", o.kind, o.name));
        assert_eq!(
            at("missing: file /etc/operator/key: open /etc/operator/key: no such file"),
            Some("ConfigMap config".into())
        );
        assert_eq!(
            at("missing: file /etc/creds/token: gone"),
            Some("Secret credentials".into())
        );
        assert_eq!(at("missing: file /etc/operatorx/key: gone"), None);
        assert_eq!(at("missing: env MODE is not set"), None);
        let names: Vec<String> = mounted(&p).into_iter().map(|(o, _)| o.name).collect();
        assert_eq!(names, ["config", "credentials", "extra"]);
    }
}
