//! Removing what payloads put on a cluster, so an e2e starts from a clean slate (`--clean`)
//! and tests that install fixed-name payloads can run one after another.
//!
//! Every object of the plans (whatever its action) is deleted with background propagation,
//! cluster-scoped ones and those in namespaces that stay first, then the CRDs (their custom
//! resources go with them), then the namespaces, with the stand-ins [`crate::stub_crds`]
//! installed for the kinds and namespaces these plans use (another payload's stand-ins stay);
//! the DELETEs of each group go out in parallel. The CRDs are waited for until gone (a
//! terminating CRD's kind cannot be emptied); a CRD whose custom resources the server failed
//! to delete is nudged to make it try again at once (`nudge_crd`). A namespace is finalized
//! while it is still
//! active (its `kubernetes` finalizer removed), then deleted: kube-controller-manager's
//! namespace controller leaves a finalized namespace alone, so none of its passes, which
//! delete by namespace *name*, can reach into the namespace of the same name that the next
//! install creates. minicvo empties the namespaces itself, without that controller's client
//! rate limit: one metadata LIST per namespaced kind, a collection DELETE per kind and
//! namespace that has objects, listed again until every kind is seen empty (finalizers and pod
//! grace periods are waited for), then deletes them again, which removes them. The call
//! returns once every namespace and CRD is gone (followed with one list and watch per
//! collection, not polled), so the next install does not meet a terminating namespace.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use futures::{StreamExt as _, stream};
use kube::Client;
use kube::api::DeleteParams;
use kube::core::Request;
use serde_json::Value;
use tokio::time::Instant;

use crate::apply::preflight::STUB_NAMESPACE_LABEL;
use crate::cluster::discovery::Discovery;
use crate::cluster::list_watch::{CollectionEvent, list_watch};
use crate::cluster::request::{self, RequestError};
use crate::cluster::retry::{self, RetryPolicy};
use crate::plan::{Action, Plan};
use crate::stub_crds::{self, CRD_COLLECTION as CRDS, STUB_LABEL};

/// What [`clean`] removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cleaned {
    /// Objects whose DELETE was accepted.
    pub deleted: usize,
    /// Seconds it took, waits included.
    pub seconds: f64,
}

/// Why cleaning failed.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// A request failed.
    #[error("cleaning up {what}: {source}")]
    Request {
        /// What was being deleted.
        what: String,
        /// The error.
        #[source]
        source: RequestError,
    },
    /// Objects still exist after the timeout.
    #[error("cleaning up: still present after {timeout:?}: {left}")]
    Timeout {
        /// The timeout.
        timeout: Duration,
        /// What is left.
        left: String,
    },
}

/// DELETEs `collection/name`; `false` when it was not there. Transient errors (the server
/// busy, a CRD's storage being set up again) are retried with the run's default policy.
async fn delete(
    client: &Client,
    collection: &str,
    name: &str,
    timeout: Duration,
) -> Result<bool, CleanError> {
    let never = tokio_util::sync::CancellationToken::new();
    let sent = retry::retry(
        &RetryPolicy::default(),
        &never,
        |_, _| false,
        |_, _, _| {},
        || async {
            let req = Request::new(collection)
                .delete(name, &DeleteParams::background())
                .map_err(|e| RequestError::Build(e.to_string()))?;
            request::send(client, req, timeout).await
        },
    )
    .await;
    match sent {
        Ok(_) => Ok(true),
        Err(x) if x.error.is(404) => Ok(false),
        Err(x) => Err(CleanError::Request {
            what: format!("{collection}/{name}"),
            source: x.error,
        }),
    }
}

async fn names_labelled(
    client: &Client,
    collection: &str,
    label: &str,
    timeout: Duration,
) -> Result<Vec<String>, CleanError> {
    let url = format!("{collection}?labelSelector={}", label.replace('/', "%2F"));
    let req = http::Request::get(&url)
        .body(Vec::new())
        .map_err(|e| CleanError::Request {
            what: collection.to_string(),
            source: RequestError::Build(e.to_string()),
        })?;
    let list = request::send(client, req, timeout)
        .await
        .map_err(|source| CleanError::Request {
            what: collection.to_string(),
            source,
        })?;
    Ok(list
        .body
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

/// A namespaced kind that can be listed and deleted: its cluster-wide collection, the
/// path of its collection in a namespace (`{}` stands for the namespace), and whether the
/// server takes a collection DELETE.
struct Kind {
    all: String,
    in_namespace: String,
    delete_collection: bool,
}

/// Every namespaced kind the server lists and deletes (its preferred version).
async fn namespaced_kinds(client: &Client, timeout: Duration) -> Result<Vec<Kind>, CleanError> {
    let run = kube::discovery::Discovery::new(client.clone()).run_aggregated();
    let d = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| CleanError::Request {
            what: "discovery".into(),
            source: RequestError::Timeout(timeout),
        })?
        .map_err(|e| CleanError::Request {
            what: "discovery".into(),
            source: RequestError::from_kube(e),
        })?;
    let mut kinds = Vec::new();
    for g in d.groups() {
        for (ar, caps) in g.recommended_resources() {
            if caps.scope != kube::discovery::Scope::Namespaced
                || !caps.supports_operation("list")
                || !caps.supports_operation("delete")
            {
                continue;
            }
            let base = if ar.group.is_empty() {
                format!("/api/{}", ar.version)
            } else {
                format!("/apis/{}/{}", ar.group, ar.version)
            };
            kinds.push(Kind {
                all: format!("{base}/{}", ar.plural),
                in_namespace: format!("{base}/namespaces/{{}}/{}", ar.plural),
                delete_collection: caps.supports_operation("deletecollection"),
            });
        }
    }
    Ok(kinds)
}

/// Whether `e` is worth another look (the server busy, a collection whose storage is being set
/// up or torn down as its CRD comes or goes: 429 "storage is (re)initializing").
fn transient(e: &RequestError) -> bool {
    matches!(retry::classify(e), retry::Transience::Transient { .. })
}

/// The `(namespace, name)` of every object of `kind` in one of `namespaces` (one metadata-only
/// LIST of the whole collection; a collection that is gone has none); `None` when the server
/// could not answer now (a transient error: the kind is looked at again).
async fn objects_in(
    client: &Client,
    kind: &Kind,
    namespaces: &BTreeSet<String>,
    timeout: Duration,
) -> Result<Result<Vec<Obj>, RequestError>, CleanError> {
    let req = http::Request::get(&kind.all)
        .header(
            http::header::ACCEPT,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        )
        .body(Vec::new())
        .map_err(|e| CleanError::Request {
            what: kind.all.clone(),
            source: RequestError::Build(e.to_string()),
        })?;
    let list = match request::send(client, req, timeout).await {
        Ok(r) => r.body,
        Err(e) if e.is(404) || e.is(405) => return Ok(Ok(Vec::new())),
        Err(e) if transient(&e) => return Ok(Err(e)),
        Err(source) => {
            return Err(CleanError::Request {
                what: kind.all.clone(),
                source,
            });
        }
    };
    Ok(Ok(list
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let ns = i.pointer("/metadata/namespace").and_then(Value::as_str)?;
            let name = i.pointer("/metadata/name").and_then(Value::as_str)?;
            namespaces.contains(ns).then(|| Obj {
                ns: ns.to_string(),
                name: name.to_string(),
                terminating: i.pointer("/metadata/deletionTimestamp").is_some(),
            })
        })
        .collect()))
}

/// An object found in one of the namespaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Obj {
    ns: String,
    name: String,
    /// Being deleted already (a pod ending, a finalizer holding it).
    terminating: bool,
}

/// A kind (its index) and its objects found in the namespaces.
type Found = (usize, Vec<Obj>);

/// A kind (its index) and what its LIST found, or the transient error that kept it from
/// being listed now.
type Listed = (usize, Result<Vec<Obj>, RequestError>);

/// One look at `kinds` in `namespaces`: each kind listed (metadata only), and what was found
/// deleted (a collection DELETE per kind and namespace, or one DELETE per object where the
/// kind has no collection DELETE), in parallel. Returns what was found, and the kinds the
/// server could not list now.
async fn sweep(
    client: &Client,
    kinds: &[Kind],
    namespaces: &BTreeSet<String>,
    timeout: Duration,
) -> Result<(Vec<Found>, BTreeMap<usize, RequestError>), CleanError> {
    let listed: Vec<Result<Listed, CleanError>> = stream::iter(kinds.iter().enumerate())
        .map(|(i, k)| async move {
            objects_in(client, k, namespaces, timeout)
                .await
                .map(|o| (i, o))
        })
        .buffer_unordered(PARALLEL_DELETES)
        .collect()
        .await;
    let mut found: Vec<Found> = Vec::new();
    let mut unknown: BTreeMap<usize, RequestError> = BTreeMap::new();
    for r in listed {
        match r? {
            (i, Err(e)) => {
                unknown.insert(i, e);
            }
            (i, Ok(objects)) if !objects.is_empty() => found.push((i, objects)),
            _ => {}
        }
    }
    let mut deletes: Vec<(String, Option<String>)> = Vec::new();
    for (i, objects) in &found {
        let k = &kinds[*i];
        // What is being deleted already needs no second DELETE.
        let live = objects.iter().filter(|o| !o.terminating);
        if k.delete_collection {
            let in_ns: BTreeSet<&String> = live.map(|o| &o.ns).collect();
            for ns in in_ns {
                deletes.push((k.in_namespace.replace("{}", ns), None));
            }
        } else {
            for o in live {
                deletes.push((k.in_namespace.replace("{}", &o.ns), Some(o.name.clone())));
            }
        }
    }
    let results: Vec<Result<(), CleanError>> = stream::iter(deletes)
        .map(|(collection, name)| async move {
            let req = match &name {
                Some(n) => Request::new(&collection).delete(n, &DeleteParams::background()),
                None => Request::new(&collection).delete_collection(
                    &DeleteParams::background(),
                    &kube::api::ListParams::default(),
                ),
            }
            .map_err(|e| CleanError::Request {
                what: collection.clone(),
                source: RequestError::Build(e.to_string()),
            })?;
            match request::send(client, req, timeout).await {
                Ok(_) => Ok(()),
                // Gone, or not now: the next look lists it again.
                Err(e) if e.is(404) || transient(&e) => Ok(()),
                Err(source) => Err(CleanError::Request {
                    what: collection,
                    source,
                }),
            }
        })
        .buffer_unordered(PARALLEL_DELETES)
        .collect()
        .await;
    for r in results {
        r?;
    }
    Ok((found, unknown))
}

/// Finishes the deletion of `namespaces` (terminating, so nothing new can be created in them)
/// where no namespace controller did: every object in them is deleted ([`sweep`]), the kinds
/// are looked at again until none is left (objects held by finalizers, pods ending), then each
/// namespace's `kubernetes` finalizer is removed and the namespace deleted for good. Nothing
/// is left behind: a namespace is finalized only once every kind it could hold has been seen
/// empty in it.
async fn finish_namespaces(
    client: &Client,
    namespaces: &BTreeSet<String>,
    (deadline, overall): (Instant, Duration),
    timeout: Duration,
) -> Result<(), CleanError> {
    if namespaces.is_empty() {
        return Ok(());
    }
    let mut kinds = namespaced_kinds(client, timeout).await?;
    let mut pause = Duration::from_millis(50);
    // Since when no kind could be listed at all.
    let mut unanswered_since: Option<Instant> = None;
    loop {
        let (left, mut unknown) = sweep(client, &kinds, namespaces, timeout).await?;
        if left.is_empty() && unknown.is_empty() {
            break;
        }
        if unknown.len() == kinds.len() {
            // A server that answers nothing for this long is down, not busy.
            let since = *unanswered_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= UNANSWERED_LIMIT
                && let Some((_, source)) = unknown.pop_first()
            {
                return Err(CleanError::Request {
                    what: "the namespaces' objects".into(),
                    source,
                });
            }
        } else {
            unanswered_since = None;
        }
        if Instant::now() >= deadline {
            let kinds = &kinds;
            let names: Vec<String> = left
                .iter()
                .flat_map(|(i, o)| {
                    o.iter()
                        .map(move |o| format!("{} {}/{}", kinds[*i].all, o.ns, o.name))
                })
                .take(20)
                .collect();
            return Err(CleanError::Timeout {
                timeout: overall,
                left: names.join(", "),
            });
        }
        // Only the kinds that had objects are looked at again; what is still there is held by
        // a finalizer or a pod's grace period, so the next look backs off a little.
        let mut had: BTreeSet<usize> = left.iter().map(|(i, _)| *i).collect();
        had.extend(unknown.keys());
        kinds = kinds
            .into_iter()
            .enumerate()
            .filter_map(|(i, k)| had.contains(&i).then_some(k))
            .collect();
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    let finalized: Vec<Result<(), CleanError>> = stream::iter(namespaces)
        .map(|ns| finalize(client, ns, timeout))
        .buffer_unordered(PARALLEL_DELETES)
        .collect()
        .await;
    finalized.into_iter().collect()
}

/// Empties the `spec.finalizers` of namespace `ns` (the `kubernetes` one the namespace
/// controller removes once it has emptied a terminating namespace). With `terminating`, only a
/// namespace being deleted is touched. Returns whether the namespace was finalized.
async fn clear_finalizers(
    client: &Client,
    ns: &str,
    terminating: bool,
    timeout: Duration,
) -> Result<bool, CleanError> {
    let err = |source| CleanError::Request {
        what: format!("namespace {ns}"),
        source,
    };
    // A conflict (the namespace controller wrote its status meanwhile) reads it again.
    for _ in 0..5 {
        let Some(mut live) = crate::cluster::watch::get(client, NAMESPACES, ns, timeout)
            .await
            .map_err(err)?
        else {
            return Ok(false);
        };
        if terminating && live.pointer("/metadata/deletionTimestamp").is_none() {
            return Ok(false); // not ours to finalize: it was not being deleted
        }
        if let Some(spec) = live.get_mut("spec") {
            spec["finalizers"] = Value::Array(Vec::new());
        }
        let body =
            serde_json::to_vec(&live).map_err(|e| err(RequestError::Build(e.to_string())))?;
        let put = http::Request::put(format!("{NAMESPACES}/{ns}/finalize"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| err(RequestError::Build(e.to_string())))?;
        match request::send(client, put, timeout).await {
            Ok(_) => return Ok(true),
            Err(e) if e.is(404) => return Ok(false),
            Err(e) if e.is(409) => {}
            Err(e) => return Err(err(e)),
        }
    }
    Ok(false)
}

/// Finalizes terminating namespace `ns` and deletes it again, which removes it at once (what
/// the namespace controller does once the namespace is empty).
async fn finalize(client: &Client, ns: &str, timeout: Duration) -> Result<(), CleanError> {
    if !clear_finalizers(client, ns, true, timeout).await? {
        return Ok(());
    }
    delete(client, NAMESPACES, ns, timeout).await.map(|_| ())
}

/// How long lists and watches may keep failing before the clean gives up on the server.
const UNANSWERED_LIMIT: Duration = Duration::from_secs(30);

/// How often a CRD whose deletion failed on the server is nudged (see [`nudge_crd`]).
const NUDGE_EVERY: Duration = Duration::from_secs(1);

/// The annotation [`nudge_crd`] writes.
const NUDGE_ANNOTATION: &str = "minicvo.openshift.io/clean-retry";

/// Whether CRD `o` is terminating and the server's last attempt to delete its custom
/// resources failed (condition `Terminating`, reason `InstanceDeletionFailed`, e.g. "could not
/// list instances: storage is (re)initializing" when it was deleted right after its creation).
/// kube-apiserver retries that with a backoff that doubles on every failure and can reach
/// minutes; a write to the CRD makes it try again at once.
fn deletion_failed(o: &Value) -> bool {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Terminating")
                    && c.get("reason").and_then(Value::as_str) == Some("InstanceDeletionFailed")
            })
        })
}

/// Writes an annotation (the time) on terminating CRD `name`, which makes the server's CRD
/// finalizer try to delete its custom resources again now instead of after its backoff. Best
/// effort: a failure only leaves the wait to the server.
async fn nudge_crd(client: &Client, name: &str, timeout: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let body =
        serde_json::json!({"metadata": {"annotations": {NUDGE_ANNOTATION: now.to_string()}}});
    let Ok(patch) = http::Request::patch(format!("{CRDS}/{name}"))
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(body.to_string().into_bytes())
    else {
        return;
    };
    if let Err(e) = request::send(client, patch, timeout).await {
        tracing::debug!("cleaning up: nudging CRD {name}: {e}");
    }
}

/// How many DELETEs are in flight at once.
const PARALLEL_DELETES: usize = 16;

/// Deletes every `(collection, name)`, [`PARALLEL_DELETES`] at a time; returns how many
/// DELETEs were accepted (absent objects are not counted).
async fn delete_all(
    client: &Client,
    targets: Vec<(String, String)>,
    timeout: Duration,
) -> Result<usize, CleanError> {
    let results: Vec<Result<bool, CleanError>> = stream::iter(targets)
        .map(|(collection, name)| async move { delete(client, &collection, &name, timeout).await })
        .buffer_unordered(PARALLEL_DELETES)
        .collect()
        .await;
    let mut deleted = 0;
    for r in results {
        if r? {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Follows the namespaces and the CRDs (a list, then a watch of each collection) until none
/// of `namespaces` and `crds` is left, or `timeout`. A failed list or watch is retried (the
/// last error is named if time runs out); when every one fails for [`UNANSWERED_LIMIT`], the
/// server is taken to be down and its last error returned.
async fn wait_gone(
    client: &Client,
    namespaces: &BTreeSet<String>,
    crds: &BTreeSet<String>,
    timeout: Duration,
) -> Result<(), CleanError> {
    let deadline = Instant::now() + timeout;
    let wanted = |c: &str| if c == NAMESPACES { namespaces } else { crds };
    let mut left: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in [NAMESPACES, CRDS] {
        if !wanted(c).is_empty() {
            left.insert(c, wanted(c).clone());
        }
    }
    let pending: Vec<&str> = left.keys().copied().collect();
    let mut events = stream::select_all(pending.iter().map(|&c| {
        list_watch(client.clone(), c.to_string())
            .map(move |e| (c, e))
            .boxed()
    }));
    // A collection counts only once it has been listed.
    let mut listed: BTreeSet<&str> = BTreeSet::new();
    let mut last_error = None;
    // Since when every list and watch has failed.
    let mut failing_since: Option<Instant> = None;
    // CRDs whose deletion failed on the server, and when to nudge them next.
    let mut stuck: BTreeMap<String, Instant> = BTreeMap::new();
    let track = |o: &Value, stuck: &mut BTreeMap<String, Instant>| {
        let Some(n) = o.pointer("/metadata/name").and_then(Value::as_str) else {
            return;
        };
        if !crds.contains(n) {
            return;
        }
        if deletion_failed(o) {
            stuck.entry(n.to_string()).or_insert_with(|| {
                // Common and transient (39 times in a run of the suite): not a warning.
                tracing::debug!(
                    "cleaning up: the server failed to delete the custom resources of CRD {n} \
                     (condition Terminating, reason InstanceDeletionFailed); asking it again \
                     every {NUDGE_EVERY:?}"
                );
                Instant::now()
            });
        } else {
            stuck.remove(n);
        }
    };
    loop {
        let done = pending
            .iter()
            .all(|c| listed.contains(c) && left.get(c).is_none_or(BTreeSet::is_empty));
        if done {
            return Ok(());
        }
        let nudge_at = stuck.values().min().copied();
        let next = tokio::select! {
            e = events.next() => e,
            () = async { tokio::time::sleep_until(nudge_at.unwrap_or(deadline)).await },
                if nudge_at.is_some_and(|t| t < deadline) => {
                let now = Instant::now();
                for (name, at) in &mut stuck {
                    if *at <= now {
                        nudge_crd(client, name, NUDGE_EVERY * 5).await;
                        *at = Instant::now() + NUDGE_EVERY;
                    }
                }
                continue;
            }
            () = tokio::time::sleep_until(deadline) => None,
        };
        let Some((collection, event)) = next else {
            let mut names: Vec<String> = left.values().flatten().cloned().collect();
            if let Some(e) = last_error {
                names.push(format!("(last error: {e})"));
            }
            return Err(CleanError::Timeout {
                timeout,
                left: names.join(", "),
            });
        };
        let name_of = |o: &Value| {
            o.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let entry = left.entry(collection).or_default();
        match event {
            CollectionEvent::Listed(items) => {
                let live: BTreeSet<String> = items.iter().filter_map(name_of).collect();
                *entry = wanted(collection).intersection(&live).cloned().collect();
                listed.insert(collection);
                if collection == CRDS {
                    stuck.clear();
                    for o in &items {
                        track(o, &mut stuck);
                    }
                }
            }
            CollectionEvent::Deleted(o) => {
                if let Some(n) = name_of(&o) {
                    entry.remove(&n);
                    stuck.remove(&n);
                }
            }
            CollectionEvent::Applied(o) => {
                if collection == CRDS {
                    track(&o, &mut stuck);
                }
            }
            CollectionEvent::Failed(e) => {
                // A server that answers nothing for this long is down, not busy.
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= UNANSWERED_LIMIT {
                    return Err(CleanError::Request {
                        what: collection.to_string(),
                        source: e,
                    });
                }
                last_error = Some(e);
                continue;
            }
        }
        failing_since = None;
    }
}

const NAMESPACES: &str = "/api/v1/namespaces";

/// Deletes every object of `plans` and the stand-ins of what they use, and waits (up to
/// `timeout`) until the namespaces and CRDs are gone.
///
/// # Errors
/// [`CleanError`] for a failed request or what is left after the timeout.
pub async fn clean(
    client: &Client,
    plans: &[&Plan],
    timeout: Duration,
) -> Result<Cleaned, CleanError> {
    let started = Instant::now();
    let request_timeout = Duration::from_secs(30);
    let discovery = Discovery::new(client.clone(), request_timeout);
    discovery
        .prime()
        .await
        .map_err(|source| CleanError::Request {
            what: "discovery".into(),
            source,
        })?;
    let mut namespaces: BTreeSet<String> = BTreeSet::new();
    let mut crds: BTreeSet<String> = BTreeSet::new();
    let mut seen = HashSet::new();
    let mut others = Vec::new();
    for plan in plans {
        for t in plan.tasks.iter().filter(|t| t.action != Action::Skip) {
            let m = &t.manifest;
            if !seen.insert(m.id.clone()) {
                continue;
            }
            if m.id.group.is_empty() && m.id.kind == "Namespace" {
                namespaces.insert(m.id.name.clone());
            } else if m.is_crd() {
                crds.insert(m.id.name.clone());
            } else {
                others.push(m);
            }
        }
    }
    // The stand-ins of what these plans use (not those another payload's run installed for
    // its own kinds and namespaces).
    let mut used_namespaces: BTreeSet<String> = BTreeSet::new();
    let mut used_stubs: BTreeSet<String> = BTreeSet::new();
    for plan in plans {
        for t in plan.tasks.iter().filter(|t| t.action != Action::Skip) {
            let m = &t.manifest;
            if let Some(ns) = &m.id.namespace {
                used_namespaces.insert(ns.clone());
            }
            if !m.id.group.is_empty() {
                used_stubs.insert(format!("{}.{}", stub_crds::plural(&m.id.kind), m.id.group));
            }
        }
    }
    namespaces.extend(
        names_labelled(client, NAMESPACES, STUB_NAMESPACE_LABEL, request_timeout)
            .await?
            .into_iter()
            .filter(|n| used_namespaces.contains(n)),
    );
    crds.extend(
        names_labelled(client, CRDS, &format!("{STUB_LABEL}=true"), request_timeout)
            .await?
            .into_iter()
            .filter(|n| used_stubs.contains(n)),
    );
    // Where each object is deleted: its kind resolved, those inside a namespace that goes
    // away skipped (they go with it).
    let mut targets: Vec<(String, String)> = Vec::new();
    for m in others {
        let Ok(Some(r)) = discovery
            .resolve(&m.id.group, m.version(), &m.id.kind)
            .await
        else {
            continue; // not served: nothing to delete
        };
        let ns = if r.namespaced {
            let ns = m.id.namespace.clone().unwrap_or_else(|| "default".into());
            if namespaces.contains(&ns) {
                continue; // goes with its namespace
            }
            Some(ns)
        } else {
            None
        };
        targets.push((r.url_path(ns.as_deref()), m.id.name.clone()));
    }
    // Objects first, then CRDs (their custom resources go with them); each group's DELETEs in
    // parallel.
    let deadline = Instant::now() + timeout;
    let mut deleted = 0;
    let crd_targets = crds.iter().map(|c| (CRDS.to_string(), c.clone())).collect();
    for group in [targets, crd_targets] {
        deleted += delete_all(client, group, request_timeout).await?;
    }
    // The CRDs gone first: while one is terminating, its kind is still discovered but cannot
    // be emptied, so a namespace controller pass fails on it and backs off exponentially.
    wait_gone(client, &BTreeSet::new(), &crds, deadline - Instant::now()).await?;
    tracing::debug!(
        "cleaning up: objects and {} CRDs gone after {:.1?}",
        crds.len(),
        started.elapsed()
    );
    // Then the namespaces: finalized while still active, then deleted. kube-controller-
    // manager's namespace controller leaves a finalized namespace alone, so no pass of it
    // (which deletes by namespace *name*) can reach into the namespace of the same name the
    // next install creates; they are emptied and removed here instead.
    if !namespaces.is_empty() {
        let finalized: Vec<Result<(), CleanError>> = stream::iter(&namespaces)
            .map(|ns| async move {
                clear_finalizers(client, ns, false, request_timeout)
                    .await
                    .map(|_| ())
            })
            .buffer_unordered(PARALLEL_DELETES)
            .collect()
            .await;
        finalized.into_iter().collect::<Result<(), CleanError>>()?;
        let ns_targets = namespaces
            .iter()
            .map(|n| (NAMESPACES.to_string(), n.clone()))
            .collect();
        deleted += delete_all(client, ns_targets, request_timeout).await?;
        finish_namespaces(client, &namespaces, (deadline, timeout), request_timeout).await?;
    }
    wait_gone(
        client,
        &namespaces,
        &BTreeSet::new(),
        deadline - Instant::now(),
    )
    .await?;
    tracing::debug!(
        "cleaning up: namespaces removed after {:.1?}",
        started.elapsed()
    );
    Ok(Cleaned {
        deleted,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::deletion_failed;

    #[test]
    fn only_a_failed_instance_deletion_is_nudged() {
        let crd = |reason: &str| {
            json!({"status": {"conditions": [
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
                {"type": "Terminating", "status": "True", "reason": reason,
                 "message": "could not list instances: storage is (re)initializing"},
            ]}})
        };
        assert!(deletion_failed(&crd("InstanceDeletionFailed")));
        assert!(!deletion_failed(&crd("InstanceDeletionInProgress")));
        assert!(!deletion_failed(&json!({"status": {"conditions": []}})));
        assert!(!deletion_failed(&json!({})));
    }
}
