//! Writing a simulated operator's ClusterOperator status: as the pod that acts for its
//! workload when that pod may (a SelfSubjectAccessReview as itself, asked once per pod and
//! operator), else as the harness, as without simulated pods. A write the server refuses to a
//! pod that was allowed is that pod's harm (reported once per pod and operator).

use std::collections::{HashMap, HashSet};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::pods::{Acting, HarmKind, PodHarm};
use super::run::{FIELD_MANAGER, cluster_operators};
use crate::manifest::ObjectId;

/// The operators' status writes, with what they learned about the pods.
pub(super) struct StatusWriter {
    client: Client,
    /// Whether a pod may write an operator's status, per (pod, operator).
    may: HashMap<(String, String), bool>,
    /// Refusals already reported, per (pod, operator).
    harmed: HashSet<(String, String)>,
}

impl StatusWriter {
    pub(super) fn new(client: Client) -> Self {
        StatusWriter {
            client,
            may: HashMap::new(),
            harmed: HashSet::new(),
        }
    }

    /// The first of `candidates` (a workload and the pod acting for it) that may patch
    /// ClusterOperator `name`'s status, asked once per pod.
    pub(super) async fn choose(
        &mut self,
        name: &str,
        candidates: Vec<(ObjectId, Acting)>,
    ) -> Option<(ObjectId, Acting)> {
        for (id, acting) in candidates {
            let key = (acting.pod.clone(), name.to_string());
            let may = match self.may.get(&key) {
                Some(m) => *m,
                None => {
                    let m = acting
                        .identity
                        .may(
                            &self.client,
                            "patch",
                            "config.openshift.io",
                            "clusteroperators/status",
                            name,
                            None,
                        )
                        .await
                        .unwrap_or(false);
                    self.may.insert(key, m);
                    m
                }
            };
            if may {
                return Some((id, acting));
            }
        }
        None
    }

    /// Writes `status` to ClusterOperator `name`, as `writer`'s pod when given, else as the
    /// harness. The error carries the pod's harm when the server refused the pod (the first
    /// time for that pod and operator).
    pub(super) async fn write(
        &mut self,
        name: &str,
        status: &Value,
        writer: Option<(ObjectId, Acting)>,
    ) -> Result<Value, (String, Option<PodHarm>)> {
        let Some((workload, acting)) = writer else {
            return self.as_harness(name, status).await.map_err(|e| (e, None));
        };
        let path = format!("/apis/config.openshift.io/v1/clusteroperators/{name}");
        let patch = json!({"status": status});
        let identity = &acting.identity;
        let answer = match identity
            .send(
                &self.client,
                http::Method::PATCH,
                &format!("{path}/status"),
                Some(&patch),
            )
            .await
        {
            // A CRD without the status subresource: status is part of the object.
            Err(e) if e.is(404) => {
                identity
                    .send(&self.client, http::Method::PATCH, &path, Some(&patch))
                    .await
            }
            other => other,
        };
        answer.map(|r| r.body).map_err(|e| {
            let first = e.is(403) && self.harmed.insert((acting.pod.clone(), name.to_string()));
            let harm = first.then(|| PodHarm {
                workload,
                pod: acting.pod.clone(),
                identity: acting.identity.clone(),
                kind: HarmKind::Refused,
                what: format!("patch clusteroperators/status.config.openshift.io {name}"),
                object: Some(ObjectId {
                    group: "config.openshift.io".into(),
                    kind: "ClusterOperator".into(),
                    namespace: None,
                    name: name.to_string(),
                }),
            });
            (e.to_string(), harm)
        })
    }

    async fn as_harness(&self, name: &str, status: &Value) -> Result<Value, String> {
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &cluster_operators());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(json!({"status": status}));
        let updated = match api.patch_status(name, &params, &patch).await {
            Ok(o) => o,
            // A CRD without the status subresource: status is part of the object.
            Err(kube::Error::Api(s)) if s.code == 404 => api
                .patch(name, &params, &patch)
                .await
                .map_err(|e| e.to_string())?,
            Err(e) => return Err(e.to_string()),
        };
        Ok(serde_json::to_value(&updated).unwrap_or(Value::Null))
    }
}
