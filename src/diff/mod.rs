//! The live preview (`minicvo diff`): what rolling a plan onto a cluster would change, task by
//! task, found with server-side dry runs so that server defaults and field ownership are the
//! ones a real apply would meet. Nothing is written.
//!
//! | action | live object | change |
//! |---|---|---|
//! | apply | absent | `create`, the dry-run result as the diff |
//! | apply | present | `server-side`: `change` when the dry-run apply result differs from it (without status and server-owned metadata), else `unchanged`. `cvo` ([`diff_with`]): the CVO's merge of it, dry-run as an UPDATE, with a note naming the manifest fields the CVO will not roll out |
//! | create-only | absent / present | `create` / `unchanged` (an existing object is left alone) |
//! | delete | present / absent | `delete` / `unchanged` |
//! | wait (ClusterOperator) | absent / present | `create` (it is precreated) / `unchanged`, with a note on the versions it waits for |
//! | skip | | `skip` |
//!
//! A kind or namespace the plan itself creates earlier (a CRD, a Namespace) cannot be
//! dry-run yet: such objects are `create` with a note and the manifest as the diff. Secret
//! values are never printed ([`compare::render`]).
//!
//! The cluster sits behind [`cluster::LiveCluster`], so the classification is tested with a
//! fake; [`cluster::KubeCluster`] is the real one.

pub mod cluster;
pub mod compare;
pub mod report;

use std::collections::BTreeSet;

use futures::StreamExt as _;
use serde::Serialize;
use serde_json::Value;

use self::cluster::{LiveCluster, LiveError};
use crate::analysis::lint::crd_order::crd_tasks;
use crate::plan::{Action, Plan, Task};

/// What applying a task would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// The object would be created.
    Create,
    /// The object would be changed.
    Change,
    /// Nothing would change.
    Unchanged,
    /// The object would be deleted.
    Delete,
    /// The task is skipped (capability or override).
    Skip,
    /// The object could not be compared.
    Error,
}

impl Change {
    /// Every change, in summary order.
    pub const ALL: [Change; 6] = [
        Change::Create,
        Change::Change,
        Change::Unchanged,
        Change::Delete,
        Change::Skip,
        Change::Error,
    ];

    /// The name, as printed and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Change::Create => "create",
            Change::Change => "change",
            Change::Unchanged => "unchanged",
            Change::Delete => "delete",
            Change::Skip => "skip",
            Change::Error => "error",
        }
    }

    /// Whether the cluster would be modified.
    #[must_use]
    pub fn modifies(self) -> bool {
        matches!(self, Change::Create | Change::Change | Change::Delete)
    }
}

/// The result for one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Task index in the plan.
    pub task: usize,
    /// What would happen.
    pub change: Change,
    /// Why, when it is not obvious (not served yet, create-only, versions waited for, the
    /// error).
    pub note: Option<String>,
    /// Unified diff, live → after; empty for `unchanged`, `skip` and `error`.
    pub diff: String,
}

/// The live diff of a plan.
#[derive(Debug, Clone)]
pub struct DiffReport {
    /// One entry per task, in task order.
    pub entries: Vec<Entry>,
}

impl DiffReport {
    /// Counts per change in [`Change::ALL`] order, zeros included.
    #[must_use]
    pub fn counts(&self) -> Vec<(Change, usize)> {
        Change::ALL
            .iter()
            .map(|&c| (c, self.entries.iter().filter(|e| e.change == c).count()))
            .collect()
    }

    /// Whether anything would change (`minicvo diff` then exits with 1).
    #[must_use]
    pub fn modifies(&self) -> bool {
        self.entries.iter().any(|e| e.change.modifies())
    }

    /// Whether any object could not be compared.
    #[must_use]
    pub fn has_errors(&self) -> bool {
        self.entries.iter().any(|e| e.change == Change::Error)
    }
}

/// Kinds and namespaces the plan itself creates, for objects that cannot be dry-run yet.
struct Created {
    kinds: BTreeSet<(String, String)>,
    namespaces: BTreeSet<String>,
}

impl Created {
    fn of(plan: &Plan) -> Self {
        Created {
            kinds: crd_tasks(plan).into_keys().collect(),
            namespaces: plan
                .tasks
                .iter()
                .filter(|t| matches!(t.action, Action::Apply | Action::CreateOnly))
                .filter(|t| t.manifest.id.group.is_empty() && t.manifest.id.kind == "Namespace")
                .map(|t| t.manifest.id.name.clone())
                .collect(),
        }
    }
}

fn entry(task: &Task, change: Change, note: Option<String>, diff: String) -> Entry {
    Entry {
        task: task.id,
        change,
        note,
        diff,
    }
}

fn label(task: &Task) -> String {
    task.manifest.id.to_string()
}

fn error(task: &Task, e: &LiveError) -> Entry {
    entry(task, Change::Error, Some(e.to_string()), String::new())
}

/// A `create` whose object cannot be dry-run because the plan creates its kind or namespace
/// first: the manifest (without status) is the diff.
fn create_later(task: &Task, why: String) -> Entry {
    let body = crate::cluster::body::request_body(
        &task.manifest.object,
        task.manifest.id.namespace.as_deref(),
    );
    entry(
        task,
        Change::Create,
        Some(why),
        compare::render(None, Some(&body), &label(task)),
    )
}

/// Handles an error that may mean "created earlier by this plan".
fn unavailable(task: &Task, created: &Created, e: &LiveError) -> Entry {
    let id = &task.manifest.id;
    match e {
        LiveError::NotServed(_) if created.kinds.contains(&(id.group.clone(), id.kind.clone())) => {
            create_later(
                task,
                format!("{e} yet: its CustomResourceDefinition is created earlier in this plan"),
            )
        }
        LiveError::NamespaceMissing(ns) if created.namespaces.contains(ns) => create_later(
            task,
            format!("namespace {ns} does not exist yet: it is created earlier in this plan"),
        ),
        _ => error(task, e),
    }
}

/// The versions a ClusterOperator manifest lists that the live one does not report yet.
fn versions_pending(manifest: &Value, live: &Value) -> Vec<String> {
    let list = |v: &Value| -> Vec<(String, String)> {
        v.pointer("/status/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|x| {
                Some((
                    x.get("name")?.as_str()?.to_string(),
                    x.get("version")?.as_str()?.to_string(),
                ))
            })
            .collect()
    };
    let have = list(live);
    list(manifest)
        .into_iter()
        .filter(|w| !have.contains(w))
        .map(|(n, v)| format!("{n} {v}"))
        .collect()
}

/// The `cvo` strategy's change for an apply task whose object exists: the CVO's merge of
/// the live object, dry-run as an UPDATE for the server's defaulting, and a note naming the
/// manifest fields the merge leaves at their live value.
async fn cvo_change<C: LiveCluster>(
    cluster: &C,
    task: &Task,
    live: &Value,
    config: &crate::merge::ClusterConfig,
) -> Entry {
    let name = label(task);
    let manifest = crate::cluster::body::request_body(&task.manifest.object, None);
    let merged = match crate::merge::merge(Some(live), &manifest, config) {
        Ok(crate::merge::Outcome::Update(v)) => Some(v),
        Ok(_) => None,
        Err(e) => return error(task, &LiveError::Request(e.to_string())),
    };
    let kept = crate::merge::rollout::kept_against_live(live, &manifest, merged.as_ref());
    let note = (!kept.is_empty()).then(|| {
        let parts: Vec<String> = kept
            .iter()
            .map(|k| format!("{} ({})", k.path, k.rule))
            .collect();
        format!("not rolled out by the CVO: {}", parts.join("; "))
    });
    let Some(merged) = merged else {
        return entry(task, Change::Unchanged, note, String::new());
    };
    match cluster.dry_run_update(task, &merged).await {
        Ok(after) if compare::same(live, &after) => {
            entry(task, Change::Unchanged, note, String::new())
        }
        Ok(after) => entry(
            task,
            Change::Change,
            note,
            compare::render(Some(live), Some(&after), &name),
        ),
        Err(e) => error(task, &e),
    }
}

/// The `cvo` strategy's create: the prepared manifest (owner reference, injections, the Go
/// round trip), dry-run as a CREATE, then the CVO's typed merge of it into the created object,
/// which `apply` sends at once ([`crate::apply::actions::cvo`]): what `apply` would leave.
async fn cvo_create<C: LiveCluster>(
    cluster: &C,
    created: &Created,
    task: &Task,
    config: &crate::merge::ClusterConfig,
) -> Entry {
    let name = label(task);
    let manifest = crate::cluster::body::request_body(&task.manifest.object, None);
    let prepared = match crate::merge::prepare(&manifest, config) {
        Ok(p) => p,
        Err(e) => return error(task, &LiveError::Request(e.to_string())),
    };
    let typed = crate::merge::typed_kind(
        task.manifest.object["apiVersion"]
            .as_str()
            .unwrap_or_default(),
        &task.manifest.id.kind,
    );
    let settled =
        |after: Value| match typed.map(|_| crate::merge::merge_prepared(&after, &prepared)) {
            Some(Ok(Some(merged))) => merged,
            _ => after,
        };
    match cluster.dry_run_create(task, &prepared).await {
        Ok(after) => entry(
            task,
            Change::Create,
            None,
            compare::render(None, Some(&settled(after)), &name),
        ),
        Err(e) => {
            let mut later = unavailable(task, created, &e);
            // Created later in this plan: shown as prepared and merged, without the server's
            // defaults.
            if later.change == Change::Create {
                let body = crate::cluster::body::request_body(
                    &settled(prepared.clone()),
                    task.manifest.id.namespace.as_deref(),
                );
                later.diff = compare::render(None, Some(&body), &name);
            }
            later
        }
    }
}

async fn one<C: LiveCluster>(
    cluster: &C,
    created: &Created,
    task: &Task,
    strategy: crate::apply::ApplyStrategy,
    config: &crate::merge::ClusterConfig,
) -> Entry {
    if task.action == Action::Skip {
        return entry(task, Change::Skip, task.skip_reason.clone(), String::new());
    }
    let live = match cluster.get(task).await {
        Ok(live) => live,
        Err(LiveError::NotServed(_)) if task.action == Action::Delete => {
            return entry(
                task,
                Change::Unchanged,
                Some("kind not served: nothing to delete".into()),
                String::new(),
            );
        }
        Err(e) => return unavailable(task, created, &e),
    };
    let name = label(task);
    match (&task.action, live) {
        (Action::Delete, None) => entry(
            task,
            Change::Unchanged,
            Some("already absent".into()),
            String::new(),
        ),
        (Action::Delete, Some(l)) => entry(
            task,
            Change::Delete,
            None,
            compare::render(Some(&l), None, &name),
        ),
        (Action::Wait, None) => {
            let created = crate::cvo::precreate::created_object(&task.manifest.object);
            let created = match crate::merge::prepare(&created, config) {
                Ok(c) => c,
                Err(e) => return error(task, &LiveError::Request(e.to_string())),
            };
            entry(
                task,
                Change::Create,
                Some("precreated, then waited on".into()),
                compare::render(
                    None,
                    Some(&crate::cluster::body::request_body(&created, None)),
                    &name,
                ),
            )
        }
        (Action::Wait, Some(l)) => {
            let pending = versions_pending(&task.manifest.object, &l);
            let note = if pending.is_empty() {
                "reports every version already".to_string()
            } else {
                format!("waits until it reports {}", pending.join(", "))
            };
            entry(task, Change::Unchanged, Some(note), String::new())
        }
        (Action::CreateOnly, Some(_)) => entry(
            task,
            Change::Unchanged,
            Some("create-only: the existing object is left alone".into()),
            String::new(),
        ),
        (Action::CreateOnly, None) => {
            let object = if strategy == crate::apply::ApplyStrategy::Cvo {
                match crate::merge::prepare(&task.manifest.object, config) {
                    Ok(o) => o,
                    Err(e) => return error(task, &LiveError::Request(e.to_string())),
                }
            } else {
                Value::clone(&task.manifest.object)
            };
            match cluster.dry_run_create(task, &object).await {
                Ok(after) => entry(
                    task,
                    Change::Create,
                    None,
                    compare::render(None, Some(&after), &name),
                ),
                Err(e) => unavailable(task, created, &e),
            }
        }
        (_, Some(l)) if strategy == crate::apply::ApplyStrategy::Cvo => {
            cvo_change(cluster, task, &l, config).await
        }
        (_, None) if strategy == crate::apply::ApplyStrategy::Cvo => {
            cvo_create(cluster, created, task, config).await
        }
        (_, live) => match cluster.dry_run_apply(task).await {
            Ok(after) => match live {
                None => entry(
                    task,
                    Change::Create,
                    None,
                    compare::render(None, Some(&after), &name),
                ),
                Some(l) if compare::same(&l, &after) => {
                    entry(task, Change::Unchanged, None, String::new())
                }
                Some(l) => entry(
                    task,
                    Change::Change,
                    None,
                    compare::render(Some(&l), Some(&after), &name),
                ),
            },
            Err(e) => unavailable(task, created, &e),
        },
    }
}

/// Compares every task of `plan` with the cluster, `concurrency` tasks at a time, and
/// returns the entries in task order, in the default apply strategy (`cvo`).
pub async fn diff<C: LiveCluster>(cluster: &C, plan: &Plan, concurrency: usize) -> DiffReport {
    diff_with(
        cluster,
        plan,
        concurrency,
        crate::apply::ApplyStrategy::default(),
    )
    .await
}

/// [`diff`] in a chosen apply strategy. In `cvo`, an existing object's change is the CVO's
/// merge of it (dry-run as an UPDATE), and the entry's note names the manifest fields the CVO
/// will not roll out.
pub async fn diff_with<C: LiveCluster>(
    cluster: &C,
    plan: &Plan,
    concurrency: usize,
    strategy: crate::apply::ApplyStrategy,
) -> DiffReport {
    diff_in(
        cluster,
        plan,
        concurrency,
        strategy,
        &crate::merge::ClusterConfig::default(),
    )
    .await
}

/// [`diff_with`] with what the `cvo` strategy's pre-merge steps read from the cluster (see
/// [`crate::apply::actions::cvo::read_cluster_config`]): the ClusterVersion owner reference
/// and the proxy and TLS injections then show as `apply` would write them.
pub async fn diff_in<C: LiveCluster>(
    cluster: &C,
    plan: &Plan,
    concurrency: usize,
    strategy: crate::apply::ApplyStrategy,
    config: &crate::merge::ClusterConfig,
) -> DiffReport {
    let created = Created::of(plan);
    let entries = futures::stream::iter(plan.tasks.iter())
        .map(|t| one(cluster, &created, t, strategy, config))
        .buffered(concurrency.max(1))
        .collect()
        .await;
    DiffReport { entries }
}

#[cfg(test)]
mod tests;
