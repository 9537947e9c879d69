//! Kinds a payload uses that the cluster does not serve, found before a run; and, with
//! `--stub-missing-crds`, permissive stand-in CRDs for them, so an OpenShift payload can be
//! applied to a plain Kubernetes cluster.
//!
//! A kind is *missing* when a task applies, creates or waits on it (deletes of an unserved
//! kind are already done) and neither the cluster (discovery) nor one of the payload's own
//! CRDs serves its group, version and kind. Without the flag, every missing kind is listed in
//! one error before anything is written. With it, each missing group/kind gets one CRD:
//!
//! - named `<plural>.<group>`, the plural guessed as kubectl does (`UnsafeGuessKindToResource`:
//!   lower case, `s` → `ses`, `y` → `ies`, else `+s`);
//! - namespaced when any manifest of the kind has a namespace, else cluster-scoped;
//! - every version the payload uses, served, the highest by Kubernetes version priority
//!   stored; schema `type: object` with `x-kubernetes-preserve-unknown-fields: true` and the
//!   `status` subresource (so simulated operators write status as on OpenShift);
//! - labelled `minicvo.openshift.io/stub-crd: "true"`; groups under `k8s.io` and
//!   `kubernetes.io` get the `api-approved.kubernetes.io: unapproved, ...` annotation the API
//!   server requires.
//!
//! Kinds that cannot be stubbed (the core or a dot-less group, a group/kind the cluster or a
//! payload CRD serves in other versions only) are an error that names them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::time::Duration;

use kube::Client;
use kube::api::{Patch, PatchParams};
use kube::core::Request;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::discovery::{Discovery, served_kinds};
use crate::cluster::request::{self, RequestError};
use crate::cluster::watch::{self, WatchEnd};
use crate::plan::{Action, Plan};

/// Label on every stub CRD.
pub const STUB_LABEL: &str = "minicvo.openshift.io/stub-crd";
/// Field manager of the stub CRD writes.
pub const FIELD_MANAGER: &str = "minicvo-stub-crds";
pub(crate) const CRD_COLLECTION: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A group/kind the payload uses that nothing serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingKind {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// The versions the payload uses.
    pub versions: BTreeSet<String>,
    /// Whether a manifest gives a namespace.
    pub namespaced: bool,
    /// Manifests using it.
    pub manifests: usize,
    /// The first of them (`file#document`).
    pub first: String,
    /// Why it cannot be stubbed, if it cannot.
    pub unstubbable: Option<String>,
}

impl MissingKind {
    /// `group/v1 Kind` (all versions, comma-separated).
    #[must_use]
    pub fn gvk(&self) -> String {
        let versions: Vec<&str> = self.versions.iter().map(String::as_str).collect();
        if self.group.is_empty() {
            format!("{} {}", versions.join(","), self.kind)
        } else {
            format!("{}/{} {}", self.group, versions.join(","), self.kind)
        }
    }

    /// The stub CRD's name.
    #[must_use]
    pub fn crd_name(&self) -> String {
        format!("{}.{}", plural(&self.kind), self.group)
    }
}

impl fmt::Display for MissingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} manifest{}, first {})",
            self.gvk(),
            self.manifests,
            if self.manifests == 1 { "" } else { "s" },
            self.first
        )?;
        if let Some(why) = &self.unstubbable {
            write!(f, ": cannot be stubbed: {why}")?;
        }
        Ok(())
    }
}

/// Why a run cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StubError {
    /// Kinds are missing and stubs were not asked for.
    #[error(
        "the cluster does not serve {} kind{} this payload uses, and the payload has no CRD for {}:\n{}\nhint: install their CRDs first, or pass --stub-missing-crds to install permissive stand-ins",
        .0.len(), if .0.len() == 1 { "" } else { "s" }, if .0.len() == 1 { "it" } else { "them" },
        list(.0)
    )]
    Missing(Vec<MissingKind>),
    /// Some missing kinds cannot be stubbed.
    #[error("cannot stub {} missing kind{}:\n{}", .0.len(), if .0.len() == 1 { "" } else { "s" }, list(.0))]
    Unstubbable(Vec<MissingKind>),
    /// A request failed.
    #[error("{what}: {source}")]
    Request {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: RequestError,
    },
    /// Namespaces the payloads use, create nowhere, and the cluster lacks, while creating
    /// them was not asked for.
    #[error(
        "the cluster lacks {} namespace{} this payload uses and creates nowhere:\n{}\nhint: create {} first, or pass --create-missing-namespaces to create {}",
        .0.len(), if .0.len() == 1 { "" } else { "s" },
        .0.iter().map(|n| format!("  {n}")).collect::<Vec<_>>().join("\n"),
        if .0.len() == 1 { "it" } else { "them" }, if .0.len() == 1 { "it" } else { "them" }
    )]
    MissingNamespaces(Vec<String>),
    /// A stub CRD did not become Established (or served) in time.
    #[error("stub CRD {name} {problem}")]
    NotEstablished {
        /// The CRD name.
        name: String,
        /// What went wrong.
        problem: String,
    },
}

fn list(kinds: &[MissingKind]) -> String {
    kinds
        .iter()
        .map(|k| format!("  {k}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// kubectl's `UnsafeGuessKindToResource` plural.
#[must_use]
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// Kubernetes version priority: GA before beta before alpha, higher numbers first; other
/// names last, alphabetically.
fn version_rank(v: &str) -> (u8, i64, i64, String) {
    let parse = || -> Option<(u8, i64, i64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: i64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((0, -major, 0));
        }
        for (stage, rank) in [("beta", 1), ("alpha", 2)] {
            if let Some(n) = tail.strip_prefix(stage) {
                let minor: i64 = if n.is_empty() { 0 } else { n.parse().ok()? };
                return Some((rank, -major, -minor));
            }
        }
        None
    };
    match parse() {
        Some((r, a, b)) => (r, a, b, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

/// The stub CRD for a missing kind.
#[must_use]
pub fn stub_crd(kind: &MissingKind) -> Value {
    let mut versions: Vec<&String> = kind.versions.iter().collect();
    versions.sort_by_key(|v| version_rank(v));
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({
                "name": v,
                "served": true,
                "storage": i == 0,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                }},
                "subresources": {"status": {}},
            })
        })
        .collect();
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        "minicvo.openshift.io/stub-reason".into(),
        json!(format!(
            "stand-in installed by minicvo --stub-missing-crds: the payload uses {} and nothing served it",
            kind.gvk()
        )),
    );
    if kind.group.ends_with("k8s.io") || kind.group.ends_with("kubernetes.io") {
        annotations.insert(
            "api-approved.kubernetes.io".into(),
            json!("unapproved, stub CRD installed by minicvo --stub-missing-crds"),
        );
    }
    let lower = kind.kind.to_lowercase();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": kind.crd_name(),
            "labels": {STUB_LABEL: "true"},
            "annotations": annotations,
        },
        "spec": {
            "group": kind.group,
            "names": {
                "kind": kind.kind,
                "listKind": format!("{}List", kind.kind),
                "plural": plural(&kind.kind),
                "singular": lower,
            },
            "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
            "versions": versions,
        },
    })
}

type Gvk = (String, String, String);
type Gk = (String, String);

/// The group/version/kinds the payload's own CRDs serve, and the group/kinds they define.
fn payload_crds(plan: &Plan) -> (HashSet<Gvk>, HashSet<Gk>) {
    let mut gvks = HashSet::new();
    let mut gks = HashSet::new();
    for t in &plan.tasks {
        if !t.manifest.is_crd() || !matches!(t.action, Action::Apply | Action::CreateOnly) {
            continue;
        }
        for ((g, v, k), _) in served_kinds(&t.manifest.object) {
            gks.insert((g.clone(), k.clone()));
            gvks.insert((g, v, k));
        }
    }
    (gvks, gks)
}

/// The kinds of `plans` that neither the cluster (`discovery`) nor the plans' own CRDs serve,
/// in order of first use.
///
/// # Errors
/// A discovery request error.
pub async fn missing_kinds(
    discovery: &Discovery,
    plans: &[&Plan],
) -> Result<Vec<MissingKind>, RequestError> {
    let mut crd_gvks = HashSet::new();
    let mut crd_gks = HashSet::new();
    for p in plans {
        let (a, b) = payload_crds(p);
        crd_gvks.extend(a);
        crd_gks.extend(b);
    }
    let mut missing: BTreeMap<(String, String), MissingKind> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut served_cache: BTreeMap<(String, String, String), bool> = BTreeMap::new();
    for plan in plans {
        for t in &plan.tasks {
            if !matches!(t.action, Action::Apply | Action::CreateOnly | Action::Wait) {
                continue;
            }
            let m = &t.manifest;
            let key = (
                m.id.group.clone(),
                m.version().to_string(),
                m.id.kind.clone(),
            );
            if crd_gvks.contains(&key) {
                continue;
            }
            let served = match served_cache.get(&key) {
                Some(s) => *s,
                None => {
                    let s = discovery.resolve(&key.0, &key.1, &key.2).await?.is_some();
                    served_cache.insert(key.clone(), s);
                    s
                }
            };
            if served {
                continue;
            }
            let gk = (key.0.clone(), key.2.clone());
            let entry = missing.entry(gk.clone()).or_insert_with(|| {
                order.push(gk.clone());
                MissingKind {
                    group: key.0.clone(),
                    kind: key.2.clone(),
                    versions: BTreeSet::new(),
                    namespaced: false,
                    manifests: 0,
                    first: format!("{}#{}", m.path(), m.document),
                    unstubbable: None,
                }
            });
            entry.versions.insert(key.1.clone());
            entry.namespaced |= m.id.namespace.is_some();
            entry.manifests += 1;
        }
    }
    let mut out = Vec::new();
    for gk in order {
        let mut k = missing.remove(&gk).expect("recorded in order");
        k.unstubbable = if k.group.is_empty() {
            Some("it is in the core API group".into())
        } else if !k.group.contains('.') {
            Some(format!("CRD groups need a dot, {:?} has none", k.group))
        } else if crd_gks.contains(&gk) {
            Some("a CRD of this payload defines the kind, but not these versions".into())
        } else {
            None
        };
        out.push(k);
    }
    Ok(out)
}

/// What [`ensure`](crate::apply::preflight::ensure) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StubReport {
    /// The stubs installed (or already present), by CRD name, with the kind they serve.
    pub installed: Vec<(String, String)>,
    /// Namespaces created because the payloads use them but create them nowhere.
    pub namespaces: Vec<String>,
}

/// What stand-ins [`ensure`](crate::apply::preflight::ensure) may install.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StandIns {
    /// A permissive CRD per missing kind (`--stub-missing-crds`).
    pub crds: bool,
    /// A Namespace per namespace the payloads use but create nowhere, and the cluster lacks
    /// (`--create-missing-namespaces`). On OpenShift the installer and operators create them.
    pub namespaces: bool,
}

/// A discovery failure as a [`StubError`].
pub(crate) fn discovery_error(source: RequestError) -> StubError {
    StubError::Request {
        what: "discovery".into(),
        source,
    }
}

/// Installs a stub CRD per missing kind (none when `missing` is empty) and waits until each
/// is Established and served.
///
/// # Errors
/// [`StubError::Unstubbable`] for kinds that cannot be stubbed, or a request error.
pub async fn install_stubs(
    client: &Client,
    missing: Vec<MissingKind>,
    timeout: Duration,
) -> Result<StubReport, StubError> {
    if missing.is_empty() {
        return Ok(StubReport::default());
    }
    let mut missing = missing;
    for k in &mut missing {
        if k.unstubbable.is_some() {
            continue;
        }
        // A CRD of that name that is not ours serves the kind in other versions: never
        // overwrite it.
        let name = k.crd_name();
        let live = watch::get(client, CRD_COLLECTION, &name, timeout)
            .await
            .map_err(|source| StubError::Request {
                what: format!("reading CRD {name}"),
                source,
            })?;
        if let Some(live) = live
            && live.pointer(&format!(
                "/metadata/labels/{}",
                STUB_LABEL.replace('/', "~1")
            )) != Some(&json!("true"))
        {
            k.unstubbable = Some(format!(
                "CRD {name} exists (not a minicvo stub) and does not serve these versions"
            ));
        }
    }
    let bad: Vec<MissingKind> = missing
        .iter()
        .filter(|k| k.unstubbable.is_some())
        .cloned()
        .collect();
    if !bad.is_empty() {
        return Err(StubError::Unstubbable(bad));
    }
    let mut report = StubReport::default();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut applied = Vec::new();
    for k in &missing {
        let body = stub_crd(k);
        let name = k.crd_name();
        let req = Request::new(CRD_COLLECTION)
            .patch(&name, &params, &Patch::Apply(&body))
            .map_err(|e| StubError::Request {
                what: format!("stub CRD {name}"),
                source: RequestError::Build(e.to_string()),
            })?;
        let created = request::send(client, req, timeout)
            .await
            .map_err(|source| StubError::Request {
                what: format!("applying stub CRD {name}"),
                source,
            })?;
        tracing::info!("stub CRD {name} installed for {}", k.gvk());
        applied.push((k, name.clone(), created.body));
        report.installed.push((name, k.gvk()));
    }
    let deadline = Instant::now() + timeout;
    let cancel = CancellationToken::new();
    for (k, name, body) in applied {
        let end = watch::watch_until(
            client,
            CRD_COLLECTION,
            &name,
            Some(body),
            deadline,
            &cancel,
            |crd| {
                let established = crd?
                    .pointer("/status/conditions")?
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True");
                established.then_some(())
            },
        )
        .await;
        match end {
            WatchEnd::Done(()) => {}
            WatchEnd::TimedOut(_) | WatchEnd::Cancelled => {
                return Err(StubError::NotEstablished {
                    name,
                    problem: format!("is not Established after {timeout:?}"),
                });
            }
            WatchEnd::Failed(source) => {
                return Err(StubError::Request {
                    what: format!("watching stub CRD {name}"),
                    source,
                });
            }
        }
        // Established, but discovery may lag a moment: make sure a run's discovery sees it.
        for v in &k.versions {
            loop {
                let d = Discovery::new(client.clone(), timeout);
                if d.resolve(&k.group, v, &k.kind)
                    .await
                    .ok()
                    .flatten()
                    .is_some()
                {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(StubError::NotEstablished {
                        name,
                        problem: format!("is Established but {}/{v} is not served", k.group),
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, kind: &str, versions: &[&str], namespaced: bool) -> MissingKind {
        MissingKind {
            group: group.into(),
            kind: kind.into(),
            versions: versions.iter().map(|v| (*v).to_string()).collect(),
            namespaced,
            manifests: 2,
            first: "release-manifests/0000_90_x.yaml#0".into(),
            unstubbable: None,
        }
    }

    #[test]
    fn plurals_guess_like_kubectl() {
        assert_eq!(plural("ServiceMonitor"), "servicemonitors");
        assert_eq!(plural("Proxy"), "proxies");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("DNS"), "dnses");
    }

    #[test]
    fn version_priority() {
        let mut v = vec!["v1alpha1", "v1beta1", "v2", "v1", "v1beta2", "foo"];
        v.sort_by_key(|x| version_rank(x));
        assert_eq!(v, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }

    #[test]
    fn stub_crd_is_permissive_with_status() {
        let crd = stub_crd(&kind(
            "monitoring.coreos.com",
            "ServiceMonitor",
            &["v1", "v1alpha1"],
            true,
        ));
        assert_eq!(
            crd["metadata"]["name"],
            "servicemonitors.monitoring.coreos.com"
        );
        assert_eq!(crd["metadata"]["labels"][STUB_LABEL], "true");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions[0]["name"], "v1");
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(versions[1]["storage"], false);
        assert_eq!(
            versions[0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert!(versions[0]["subresources"]["status"].is_object());
        assert!(
            crd["metadata"]["annotations"]
                .get("api-approved.kubernetes.io")
                .is_none()
        );
        let k8s = stub_crd(&kind(
            "migration.k8s.io",
            "StorageVersionMigration",
            &["v1alpha1"],
            false,
        ));
        assert_eq!(k8s["spec"]["scope"], "Cluster");
        assert!(
            k8s["metadata"]["annotations"]["api-approved.kubernetes.io"]
                .as_str()
                .unwrap()
                .starts_with("unapproved")
        );
    }

    #[test]
    fn missing_error_lists_every_kind() {
        let e = StubError::Missing(vec![
            kind("monitoring.coreos.com", "ServiceMonitor", &["v1"], true),
            kind("config.openshift.io", "ClusterOperator", &["v1"], false),
        ]);
        let msg = e.to_string();
        assert!(
            msg.starts_with("the cluster does not serve 2 kinds"),
            "{msg}"
        );
        assert!(msg.contains("  monitoring.coreos.com/v1 ServiceMonitor (2 manifests, first release-manifests/0000_90_x.yaml#0)"), "{msg}");
        assert!(
            msg.contains("config.openshift.io/v1 ClusterOperator"),
            "{msg}"
        );
        assert!(
            msg.contains("hint: install their CRDs first, or pass --stub-missing-crds"),
            "{msg}"
        );
    }
}
