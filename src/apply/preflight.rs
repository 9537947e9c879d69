//! The preflight of a run: before anything is written, every kind the plans use must be
//! served (by the cluster or by a CRD of the plans) and every namespace their namespaced
//! objects use must exist or be created by a Namespace task of the plans. [`super::run`] runs
//! it first; the e2e harness runs it once for both of its payloads.
//!
//! What is missing is listed in one error ([`StubError::Missing`],
//! [`StubError::MissingNamespaces`]) naming the flag that installs stand-ins instead: stub
//! CRDs ([`crate::stub_crds`], `--stub-missing-crds`) and namespaces
//! (`--create-missing-namespaces`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kube::Client;
use kube::api::{Patch, PatchParams};
use kube::core::Request;
use serde_json::{Value, json};

use crate::cluster::discovery::{Discovery, served_kinds};
use crate::cluster::request::{self, RequestError};
use crate::cluster::retry::{self, RetryPolicy};
use crate::cluster::watch;
use crate::plan::{Action, Plan};
use crate::stub_crds::{
    FIELD_MANAGER, StandIns, StubError, StubReport, discovery_error, install_stubs, missing_kinds,
};

/// Checks `plans` before a run, before anything is written: every kind must be served by
/// the cluster or by a CRD of the plans, and every namespace the plans' namespaced objects
/// use must exist or be created by a Namespace task of the plans.
///
/// - A kind nothing serves is a [`StubError::Missing`] listing them all, unless
///   `stand_ins.crds`: then a stub CRD is installed per missing group/kind, and each is
///   waited on until Established and served.
/// - A namespace the cluster lacks is a [`StubError::MissingNamespaces`] listing them all,
///   unless `stand_ins.namespaces`: then each is created (labelled [`STUB_NAMESPACE_LABEL`]).
///
/// Both checks run before the first write, so a refused run writes nothing.
///
/// # Errors
/// [`StubError`] as above, or a request error.
pub async fn ensure(
    client: &Client,
    plans: &[&Plan],
    stand_ins: StandIns,
    timeout: Duration,
) -> Result<StubReport, StubError> {
    let discovery = Discovery::new(client.clone(), timeout);
    // Retried as the run's own discovery is: a transient error here must not end the run.
    let never = tokio_util::sync::CancellationToken::new();
    retry::retry(
        &RetryPolicy::default(),
        &never,
        |_, _| false,
        |_, _, _| {},
        || discovery.prime(),
    )
    .await
    .map_err(|x| discovery_error(x.error))?;
    let missing = missing_kinds(&discovery, plans)
        .await
        .map_err(discovery_error)?;
    if !missing.is_empty() && !stand_ins.crds {
        return Err(StubError::Missing(missing));
    }
    let lacking = missing_namespaces(client, &discovery, plans, timeout).await?;
    if !lacking.is_empty() && !stand_ins.namespaces {
        return Err(StubError::MissingNamespaces(lacking));
    }
    let mut report = install_stubs(client, missing, timeout).await?;
    report.namespaces = create_namespaces(client, lacking, timeout).await?;
    Ok(report)
}

/// The label on namespaces created by [`ensure`] (`--create-missing-namespaces`).
pub const STUB_NAMESPACE_LABEL: &str = "minicvo.openshift.io/stub-namespace";

/// Namespaces that namespaced objects of `plans` live in, that no Namespace task of the plans
/// creates, in order of first use.
///
/// # Errors
/// A discovery request error.
pub async fn needed_namespaces(
    discovery: &Discovery,
    plans: &[&Plan],
) -> Result<Vec<String>, RequestError> {
    let mut created: HashSet<&str> = HashSet::new();
    let mut crd_kinds: HashMap<(String, String, String), bool> = HashMap::new();
    for p in plans {
        for t in &p.tasks {
            if !matches!(t.action, Action::Apply | Action::CreateOnly) {
                continue;
            }
            if t.manifest.id.group.is_empty() && t.manifest.id.kind == "Namespace" {
                created.insert(t.manifest.id.name.as_str());
            }
            if t.manifest.is_crd() {
                for (gvk, r) in served_kinds(&t.manifest.object) {
                    crd_kinds.insert(gvk, r.namespaced);
                }
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for p in plans {
        for t in &p.tasks {
            if !matches!(t.action, Action::Apply | Action::CreateOnly) {
                continue;
            }
            let m = &t.manifest;
            let Some(ns) = m.id.namespace.as_deref() else {
                continue;
            };
            if created.contains(ns) || out.iter().any(|o| o == ns) {
                continue;
            }
            let key = (
                m.id.group.clone(),
                m.version().to_string(),
                m.id.kind.clone(),
            );
            let namespaced = match crd_kinds.get(&key) {
                Some(n) => *n,
                None => discovery
                    .resolve(&key.0, &key.1, &key.2)
                    .await?
                    .is_none_or(|r| r.namespaced),
            };
            if namespaced {
                out.push(ns.to_string());
            }
        }
    }
    Ok(out)
}

/// The namespaces of [`needed_namespaces`] that the cluster lacks: one LIST of namespaces, or,
/// for a user who may not list them, one GET each. A namespace the user may not read either
/// is taken as present (the run then reports what the server says).
async fn missing_namespaces(
    client: &Client,
    discovery: &Discovery,
    plans: &[&Plan],
    timeout: Duration,
) -> Result<Vec<String>, StubError> {
    let needed = needed_namespaces(discovery, plans)
        .await
        .map_err(discovery_error)?;
    if needed.is_empty() {
        return Ok(needed);
    }
    let list = http::Request::get("/api/v1/namespaces")
        .body(Vec::new())
        .map_err(|e| StubError::Request {
            what: "listing namespaces".into(),
            source: RequestError::Build(e.to_string()),
        })?;
    match request::send(client, list, timeout).await {
        Ok(live) => {
            let existing: HashSet<&str> = live
                .body
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
                .collect();
            Ok(needed
                .into_iter()
                .filter(|n| !existing.contains(n.as_str()))
                .collect())
        }
        Err(e) if e.is(403) => {
            let mut lacking = Vec::new();
            for ns in needed {
                match watch::get(client, "/api/v1/namespaces", &ns, timeout).await {
                    Ok(Some(_)) => {}
                    Ok(None) => lacking.push(ns),
                    Err(e) if e.is(403) => {}
                    Err(source) => {
                        return Err(StubError::Request {
                            what: format!("reading namespace {ns}"),
                            source,
                        });
                    }
                }
            }
            Ok(lacking)
        }
        Err(source) => Err(StubError::Request {
            what: "listing namespaces".into(),
            source,
        }),
    }
}

async fn create_namespaces(
    client: &Client,
    lacking: Vec<String>,
    timeout: Duration,
) -> Result<Vec<String>, StubError> {
    let mut created = Vec::new();
    for ns in lacking {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": ns, "labels": {STUB_NAMESPACE_LABEL: "true"}}});
        let req = Request::new("/api/v1/namespaces")
            .patch(
                &ns,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .map_err(|e| StubError::Request {
                what: format!("namespace {ns}"),
                source: RequestError::Build(e.to_string()),
            })?;
        request::send(client, req, timeout)
            .await
            .map_err(|source| StubError::Request {
                what: format!("creating namespace {ns}"),
                source,
            })?;
        tracing::info!("namespace {ns} created: the payloads use it but create it nowhere");
        created.push(ns);
    }
    Ok(created)
}
