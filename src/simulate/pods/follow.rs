//! What the pod simulator follows: the workloads, what their pods need (ConfigMaps, Secrets,
//! ServiceAccounts) and the RBAC objects, each with one cluster-wide list+watch.

use std::collections::HashSet;

use futures::StreamExt as _;
use futures::stream::{BoxStream, SelectAll};
use kube::Client;
use serde_json::Value;

use crate::cluster::list_watch::{CollectionEvent, list_watch};
use crate::manifest::ObjectId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Watched {
    Deployment,
    DaemonSet,
    ConfigMap,
    Secret,
    ServiceAccount,
    Rbac,
}

impl Watched {
    pub(super) fn kind(self) -> &'static str {
        match self {
            Watched::Deployment => "Deployment",
            Watched::DaemonSet => "DaemonSet",
            Watched::ConfigMap => "ConfigMap",
            Watched::Secret => "Secret",
            Watched::ServiceAccount => "ServiceAccount",
            Watched::Rbac => "RBAC",
        }
    }
}

pub(super) type Item = (Watched, CollectionEvent);

fn one(client: &Client, which: Watched, path: &str) -> BoxStream<'static, Item> {
    list_watch(client.clone(), path.to_string())
        .map(move |e| (which, e))
        .boxed()
}

/// The list+watches of the kinds the pods of `workloads` need: their workload kinds,
/// ConfigMaps, Secrets, ServiceAccounts and the four RBAC kinds.
pub(super) fn streams(
    client: &Client,
    workloads: &HashSet<ObjectId>,
) -> SelectAll<BoxStream<'static, Item>> {
    let mut streams = SelectAll::new();
    let kinds: HashSet<&str> = workloads.iter().map(|i| i.kind.as_str()).collect();
    if kinds.contains("Deployment") {
        streams.push(one(
            client,
            Watched::Deployment,
            "/apis/apps/v1/deployments",
        ));
    }
    if kinds.contains("DaemonSet") {
        streams.push(one(client, Watched::DaemonSet, "/apis/apps/v1/daemonsets"));
    }
    for (w, path) in [
        (Watched::ConfigMap, "/api/v1/configmaps"),
        (Watched::Secret, "/api/v1/secrets"),
        (Watched::ServiceAccount, "/api/v1/serviceaccounts"),
        (Watched::Rbac, "/apis/rbac.authorization.k8s.io/v1/roles"),
        (
            Watched::Rbac,
            "/apis/rbac.authorization.k8s.io/v1/rolebindings",
        ),
        (
            Watched::Rbac,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        ),
        (
            Watched::Rbac,
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        ),
    ] {
        streams.push(one(client, w, path));
    }
    streams
}

/// The identity of a followed object of `kind`.
pub(super) fn id_of(kind: &str, o: &Value) -> ObjectId {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    ObjectId {
        group: if matches!(kind, "Deployment" | "DaemonSet") {
            "apps".into()
        } else {
            String::new()
        },
        kind: kind.into(),
        namespace: s("/metadata/namespace"),
        name: s("/metadata/name").unwrap_or_default(),
    }
}

/// Which of `known` (of every kind) are of `which`'s kind and missing from a fresh list.
pub(super) fn gone<'a>(
    known: impl Iterator<Item = &'a ObjectId>,
    which: Watched,
    listed: &[Value],
) -> Vec<ObjectId> {
    let listed: HashSet<ObjectId> = listed.iter().map(|o| id_of(which.kind(), o)).collect();
    known
        .filter(|id| id.kind == which.kind() && !listed.contains(*id))
        .cloned()
        .collect()
}
