//! Group/version/kind → resource and scope, cached for the run.
//!
//! The cache is primed with aggregated discovery (2 requests for the whole cluster; on a
//! server without it, nothing is primed). A kind missing from the cache costs one request
//! for its group-version's resource list (cached, including the answer "not served"). A CRD
//! applied in this run adds its kinds as soon as it is Established, straight from its spec,
//! so no discovery request (and no stale discovery document) stands between a CRD and its
//! first custom resource. This replaces the CVO's RESTMapper that is reset every minute and on
//! every NoMatch (cvo.md §5).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use kube::Client;
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;

use super::request::RequestError;

/// A served kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether it was learnt from a CRD established during this run.
    pub from_run: bool,
}

impl Resolved {
    /// The URL path of the collection (`/api/v1/namespaces/ns/configmaps`).
    #[must_use]
    pub fn url_path(&self, namespace: Option<&str>) -> String {
        let r = &self.resource;
        let base = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("{base}/namespaces/{ns}/{}", r.plural),
            None => format!("{base}/{}", r.plural),
        }
    }

    /// The namespace an object of this kind goes to: `None` for a cluster-scoped kind, else
    /// the manifest's namespace or, without one, `default` (the client's namespace).
    #[must_use]
    pub fn namespace_of(&self, manifest: Option<&str>, default: &str) -> Option<String> {
        self.namespaced
            .then(|| manifest.unwrap_or(default).to_string())
    }
}

type Gvk = (String, String, String);

/// The cache.
pub struct Discovery {
    client: Client,
    timeout: Duration,
    kinds: Mutex<HashMap<Gvk, Resolved>>,
    fetched: Mutex<HashSet<(String, String)>>,
    /// Bumped whenever a CRD's kinds are added (see [`Discovery::changes`]).
    changes: tokio::sync::watch::Sender<u64>,
}

impl Discovery {
    /// An empty cache.
    #[must_use]
    pub fn new(client: Client, timeout: Duration) -> Self {
        Discovery {
            client,
            timeout,
            kinds: Mutex::new(HashMap::new()),
            fetched: Mutex::new(HashSet::new()),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// A receiver that wakes up whenever [`Discovery::insert_crd`] adds kinds (for tasks
    /// that wait for a CRD running in parallel to be established).
    #[must_use]
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Primes the cache with aggregated discovery (2 requests).
    ///
    /// # Errors
    /// The request error; a server without aggregated discovery is not an error (the cache
    /// then fills per group-version).
    pub async fn prime(&self) -> Result<(), RequestError> {
        let run = kube::discovery::Discovery::new(self.client.clone()).run_aggregated();
        let d = match tokio::time::timeout(self.timeout, run).await {
            Err(_) => return Err(RequestError::Timeout(self.timeout)),
            Ok(Err(e)) => {
                let e = RequestError::from_kube(e);
                return match e.code() {
                    Some(404 | 406 | 415) => Ok(()),
                    _ => Err(e),
                };
            }
            Ok(Ok(d)) => d,
        };
        let mut kinds = self.kinds.lock().expect("discovery lock");
        let mut fetched = self.fetched.lock().expect("discovery lock");
        for g in d.groups() {
            for v in g.versions() {
                fetched.insert((g.name().to_string(), v.to_string()));
                for (ar, caps) in g.versioned_resources(v) {
                    kinds.insert(
                        (ar.group.clone(), ar.version.clone(), ar.kind.clone()),
                        Resolved {
                            resource: ar,
                            namespaced: caps.scope == Scope::Namespaced,
                            from_run: false,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// The cached answer, without any request.
    #[must_use]
    pub fn cached(&self, group: &str, version: &str, kind: &str) -> Option<Resolved> {
        self.kinds
            .lock()
            .expect("discovery lock")
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .cloned()
    }

    /// Resolves a kind: from the cache, else with one request for its group-version.
    /// `Ok(None)` means the server does not serve it.
    ///
    /// # Errors
    /// The discovery request's error (other than 404).
    pub async fn resolve(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Option<Resolved>, RequestError> {
        if let Some(r) = self.cached(group, version, kind) {
            return Ok(Some(r));
        }
        let gv = (group.to_string(), version.to_string());
        if self.fetched.lock().expect("discovery lock").contains(&gv) {
            return Ok(None);
        }
        self.fetch(group, version).await?;
        Ok(self.cached(group, version, kind))
    }

    /// Fetches one group-version's resource list into the cache (a 404 caches "not served").
    async fn fetch(&self, group: &str, version: &str) -> Result<(), RequestError> {
        let list = if group.is_empty() {
            tokio::time::timeout(self.timeout, self.client.list_core_api_resources(version)).await
        } else {
            let gv = format!("{group}/{version}");
            tokio::time::timeout(self.timeout, self.client.list_api_group_resources(&gv)).await
        };
        let list = list.map_err(|_| RequestError::Timeout(self.timeout))?;
        self.store(group, version, list)
    }

    fn store(
        &self,
        group: &str,
        version: &str,
        list: Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList, kube::Error>,
    ) -> Result<(), RequestError> {
        let gv = (group.to_string(), version.to_string());
        let list = match list {
            Ok(l) => l,
            Err(e) => {
                let e = RequestError::from_kube(e);
                if e.is(404) {
                    self.fetched.lock().expect("discovery lock").insert(gv);
                    return Ok(());
                }
                return Err(e);
            }
        };
        let mut kinds = self.kinds.lock().expect("discovery lock");
        for r in list.resources {
            if r.name.contains('/') {
                continue;
            }
            let api_version = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            kinds.insert(
                (group.to_string(), version.to_string(), r.kind.clone()),
                Resolved {
                    resource: ApiResource {
                        group: group.to_string(),
                        version: version.to_string(),
                        api_version,
                        kind: r.kind,
                        plural: r.name,
                    },
                    namespaced: r.namespaced,
                    from_run: false,
                },
            );
        }
        self.fetched.lock().expect("discovery lock").insert(gv);
        Ok(())
    }

    /// Adds the served kinds of an Established CRD (from its spec).
    pub fn insert_crd(&self, crd: &Value) {
        let mut kinds = self.kinds.lock().expect("discovery lock");
        for (key, r) in served_kinds(crd) {
            kinds.insert(key, r);
        }
        drop(kinds);
        self.changes.send_modify(|n| *n += 1);
    }
}

/// The kinds a CRD serves: one per served version.
#[must_use]
pub fn served_kinds(crd: &Value) -> Vec<(Gvk, Resolved)> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind), Some(plural)) = (
        spec["group"].as_str(),
        spec.pointer("/names/kind").and_then(Value::as_str),
        spec.pointer("/names/plural").and_then(Value::as_str),
    ) else {
        return Vec::new();
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| v["name"].as_str())
        .map(|version| {
            (
                (group.to_string(), version.to_string(), kind.to_string()),
                Resolved {
                    resource: ApiResource {
                        group: group.to_string(),
                        version: version.to_string(),
                        api_version: format!("{group}/{version}"),
                        kind: kind.to_string(),
                        plural: plural.to_string(),
                    },
                    namespaced,
                    from_run: true,
                },
            )
        })
        .collect()
}

/// The `(group, kind)` a CRD defines.
#[must_use]
pub fn crd_group_kind(crd: &Value) -> Option<(String, String)> {
    Some((
        crd.pointer("/spec/group")?.as_str()?.to_string(),
        crd.pointer("/spec/names/kind")?.as_str()?.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn crd_kinds_come_from_the_spec() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}]}});
        let kinds = served_kinds(&crd);
        assert_eq!(kinds.len(), 1);
        let (key, r) = &kinds[0];
        assert_eq!(key, &("example.com".into(), "v1".into(), "Widget".into()));
        assert!(!r.namespaced && r.from_run);
        assert_eq!(r.url_path(Some("ns")), "/apis/example.com/v1/widgets");
        assert_eq!(
            crd_group_kind(&crd),
            Some(("example.com".into(), "Widget".into()))
        );
    }

    #[test]
    fn url_paths() {
        let r = Resolved {
            resource: ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
            },
            namespaced: true,
            from_run: false,
        };
        assert_eq!(r.url_path(Some("a")), "/api/v1/namespaces/a/configmaps");
        assert_eq!(r.url_path(None), "/api/v1/configmaps");
    }
}
