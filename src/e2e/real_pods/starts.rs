//! What pods need and whether they can start: the ConfigMaps, Secrets and ServiceAccounts of
//! the workloads' namespaces (which of them the run deleted), the pods that cannot start for
//! want of one (the kubelet's `FailedMount` and the ReplicaSet's `FailedCreate` events; the
//! pod watch reads `CreateContainerConfigError`), and the kubelet's sync of the running pods
//! that mount a deleted object (see the module docs of [`super`]).

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};

use super::signals::{core, mounted, not_found, workload_of_owner};
use super::{State, Watched, identity_of};
use crate::manifest::ObjectId;
use crate::simulate::pods::lease::now_us;
use crate::simulate::pods::{HarmKind, Identity, PodHarm};

/// The watch of one kind of the objects a pod needs, as [`Watched::Object`] items.
pub(super) fn objects<K>(
    client: &kube::Client,
    ns: &str,
) -> BoxStream<'static, Result<Watched, watcher::Error>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let kind = K::kind(&()).to_string();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let id = move |o: K| {
        let m = o.meta();
        core(
            &kind,
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default(),
        )
    };
    watcher(api, watcher::Config::default())
        .default_backoff()
        .map(move |r| {
            r.map(|e| {
                Watched::Object(match e {
                    watcher::Event::Apply(o) => watcher::Event::Apply(id(o)),
                    watcher::Event::InitApply(o) => watcher::Event::InitApply(id(o)),
                    watcher::Event::Delete(o) => watcher::Event::Delete(id(o)),
                    watcher::Event::Init => watcher::Event::Init,
                    watcher::Event::InitDone => watcher::Event::InitDone,
                })
            })
        })
        .boxed()
}

/// A pod (or a ReplicaSet's pod) that could not start for want of an object, reported as
/// harm once that object is known to have been deleted during the run.
pub(super) struct Blocked {
    pub(super) workload: ObjectId,
    pub(super) pod: String,
    pub(super) identity: Identity,
    pub(super) object: ObjectId,
    pub(super) what: String,
}

impl State {
    /// A ConfigMap, Secret or ServiceAccount exists now, or (`exists` false) was deleted.
    pub(super) fn object(&mut self, id: ObjectId, exists: bool) {
        if exists {
            self.deleted.remove(&id);
            self.present.insert(id);
            return;
        }
        if !self.present.remove(&id) {
            return;
        }
        self.deleted.insert(id.clone());
        self.resync_mounting(&id);
        let (now, later): (Vec<Blocked>, Vec<Blocked>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|b| b.object == id);
        self.pending = later;
        for b in now {
            self.blocked(b);
        }
    }

    /// Makes the kubelet sync, at once, the running pods of this run that mount `id` (see the
    /// module docs): a merge patch of one annotation, sent on its own task.
    pub(super) fn resync_mounting(&self, id: &ObjectId) {
        let targets: Vec<(String, String)> = self
            .pods
            .iter()
            .filter(|(k, p)| {
                self.ran.contains(*k)
                    && p.metadata.deletion_timestamp.is_none()
                    && mounted(p).iter().any(|(o, _)| o == id)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in targets {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let patch = serde_json::json!({"metadata": {"annotations": {
                "minicvo.openshift.io/resync": format!("{}", now_us())}}});
            tokio::spawn(async move {
                if let Err(e) = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!("real pods: resync of {ns}/{name}: {e}");
                }
            });
        }
    }

    /// Reports `b` when its object was deleted during the run, else keeps it until it is.
    pub(super) fn blocked(&mut self, b: Blocked) {
        if !self.deleted.contains(&b.object) {
            if !self
                .pending
                .iter()
                .any(|p| p.pod == b.pod && p.object == b.object)
            {
                self.pending.push(b);
            }
            return;
        }
        let k = (
            b.object.namespace.clone().unwrap_or_default(),
            b.pod.clone(),
            format!("started without {}", b.object),
        );
        if !self.reported.insert(k) {
            return;
        }
        self.summary.started_without += 1;
        tracing::warn!("real pod {} ({}): {}", b.pod, b.identity, b.what);
        self.harm(PodHarm {
            workload: b.workload,
            pod: b.pod,
            identity: b.identity,
            kind: HarmKind::StartedWithout,
            what: b.what,
            object: Some(b.object),
        });
    }

    /// A kubelet or controller event: a pod (or a ReplicaSet's pod) that cannot start for want
    /// of an object, or a refused volume set-up of a pod that ran.
    pub(super) fn event(&mut self, ev: &Event) {
        let involved = &ev.involved_object;
        let ns = involved.namespace.clone().unwrap_or_default();
        let name = involved.name.clone().unwrap_or_default();
        let message = ev.message.as_deref().unwrap_or_default();
        let Some((kind, missing)) = not_found(message) else {
            return;
        };
        let object = core(kind, &ns, &missing);
        match (ev.reason.as_deref(), involved.kind.as_deref()) {
            (Some("FailedMount"), Some("Pod")) => {
                let k = (ns.clone(), name.clone());
                if self.earlier.contains(&k) {
                    return;
                }
                if self.ran.contains(&k) {
                    // A running pod's volume set up again: the kubelet keeps its files.
                    if self.reported.insert((ns, name, format!("kept {object}"))) {
                        self.summary.kept_volumes += 1;
                    }
                    return;
                }
                let Some(p) = self.pods.get(&k).cloned() else {
                    return;
                };
                let Some(workload) = self.owner(&p) else {
                    return;
                };
                let what = format!(
                    "{object} was deleted: the kubelet cannot set up the volume, so the pod does                      not start ({message})"
                );
                self.blocked(Blocked {
                    workload,
                    pod: name,
                    identity: identity_of(&p),
                    object,
                    what,
                });
            }
            (Some("FailedCreate"), Some(owner_kind)) if kind == "ServiceAccount" => {
                let Some(workload) =
                    workload_of_owner(owner_kind, &name, &ns).filter(|w| self.wanted.contains(w))
                else {
                    return;
                };
                let what = format!(
                    "{object} was deleted: the API server refuses to create the pod ({message})"
                );
                self.blocked(Blocked {
                    workload,
                    pod: name,
                    identity: Identity {
                        namespace: ns,
                        name: missing,
                    },
                    object,
                    what,
                });
            }
            _ => {}
        }
    }
}
