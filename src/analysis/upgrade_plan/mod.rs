//! What an update from one payload (OLD) to another (NEW) does to every object, placed in
//! NEW's updating-mode plan.
//!
//! | change | meaning |
//! |---|---|
//! | `created` | NEW applies an object OLD did not apply |
//! | `updated` | both apply it, the documents differ, and the CVO's merge writes the change |
//! | `unchanged` | both apply it with the same content, or the CVO's merge writes none of the differences: "unchanged (not rolled out)", with the fields it keeps |
//! | `deleted` | NEW has a delete manifest for it |
//! | `orphaned` | OLD applied it, NEW neither applies nor deletes it: the CVO leaves it behind |
//! | `tombstone-dropped` | OLD only deleted it and NEW no longer mentions it: nothing happens |
//!
//! Both payloads are filtered with the same filters (profile, feature set, ...), so an object
//! NEW ships only for other profiles counts as absent from NEW.

pub mod dot;
pub mod json;
pub mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::objects::{mask_secret_pair, same_content, unified_diff};
use super::placement::{Placement, Placements};
use crate::filter::Filters;
use crate::manifest::{Manifest, ObjectId};
use crate::merge::rollout::{self, NotRolledOut};
use crate::payload::Payload;
use crate::plan::{self, Action, Mode, Plan};

/// What the update does to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// Only NEW applies it.
    Created,
    /// Both apply it; the content differs and the CVO writes the change.
    Updated,
    /// Both apply it with the same content, or with differences the CVO never writes (see
    /// [`Entry::not_rolled_out`]).
    Unchanged,
    /// NEW deletes it.
    Deleted,
    /// OLD applied it; NEW neither applies nor deletes it.
    Orphaned,
    /// OLD deleted it; NEW does not mention it.
    TombstoneDropped,
}

impl Change {
    /// Every change, in summary order.
    pub const ALL: [Change; 6] = [
        Change::Created,
        Change::Updated,
        Change::Unchanged,
        Change::Deleted,
        Change::Orphaned,
        Change::TombstoneDropped,
    ];

    /// The name, as printed and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
            Change::Deleted => "deleted",
            Change::Orphaned => "orphaned",
            Change::TombstoneDropped => "tombstone-dropped",
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One object and what happens to it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// What happens.
    pub change: Change,
    /// The object.
    pub id: ObjectId,
    /// NEW's task for it and where it runs; `None` for objects absent from NEW.
    pub placement: Option<Placement>,
    /// The OLD document it is compared with (or that is left behind).
    pub old: Option<Manifest>,
    /// Differences between OLD and NEW that the CVO's merge does not write (for `updated`
    /// and `unchanged` objects); a merge error is reported as one entry with an empty path.
    pub not_rolled_out: Vec<NotRolledOut>,
}

/// The upgrade plan.
#[derive(Debug, Clone)]
pub struct UpgradePlan {
    /// OLD's payload directory.
    pub old_root: String,
    /// NEW's payload directory.
    pub new_root: String,
    /// OLD's release version, when known.
    pub old_version: Option<String>,
    /// NEW's updating-mode plan.
    pub plan: Plan,
    /// One entry per NEW task in task order, then one per object only OLD has, in OLD order.
    pub entries: Vec<Entry>,
}

impl UpgradePlan {
    /// Counts per change, in [`Change::ALL`] order, including zeros.
    #[must_use]
    pub fn counts(&self) -> Vec<(Change, usize)> {
        Change::ALL
            .iter()
            .map(|&c| (c, self.entries.iter().filter(|e| e.change == c).count()))
            .collect()
    }

    /// The NEW manifest of an entry, when NEW has one.
    #[must_use]
    pub fn new_manifest(&self, e: &Entry) -> Option<&Manifest> {
        e.placement
            .as_ref()
            .map(|p| &self.plan.tasks[p.task].manifest)
    }

    /// The unified diff of an entry's OLD and NEW documents (YAML), empty when there is not
    /// both or they are equal. Secret values are masked: the diff shows that a value changed,
    /// never what it is.
    #[must_use]
    pub fn diff(&self, e: &Entry) -> String {
        match (&e.old, self.new_manifest(e)) {
            (Some(o), Some(n)) if !o.is_delete() && !n.is_delete() => {
                let (old, new) = mask_secret_pair(Some(&o.object), Some(&n.object));
                unified_diff(
                    old.as_ref(),
                    new.as_ref(),
                    &format!("old/{}#{}", o.path(), o.document),
                    &format!("new/{}#{}", n.path(), n.document),
                )
            }
            _ => String::new(),
        }
    }
}

/// Picks the OLD document an object of NEW is compared with: same file and document, else
/// same file, else the first.
fn counterpart<'a>(candidates: &[&'a Manifest], new: &Manifest) -> Option<&'a Manifest> {
    candidates
        .iter()
        .find(|o| o.file == new.file && o.document == new.document)
        .or_else(|| candidates.iter().find(|o| o.file == new.file))
        .or_else(|| candidates.first())
        .copied()
}

/// Whether the CVO writes NEW's change to an object OLD applied, and the differences it
/// keeps at OLD's value. A create-only object is never written. A manifest the merge fails on
/// counts as written, with the error as the one kept "field".
fn cvo_writes(old: &Manifest, t: &plan::Task) -> (bool, Vec<NotRolledOut>) {
    if t.action == Action::CreateOnly {
        let kept = NotRolledOut {
            path: String::new(),
            rule: "create-only objects are never updated".into(),
        };
        return (false, vec![kept]);
    }
    match rollout::compare(&old.object, &t.manifest.object) {
        Ok(r) => (r.written, r.not_rolled_out),
        Err(e) => (
            true,
            vec![NotRolledOut {
                path: String::new(),
                rule: e.to_string(),
            }],
        ),
    }
}

/// Builds the upgrade plan of two payloads loaded with `filters`.
#[must_use]
pub fn build(old: &Payload, new: &Payload, filters: &Filters) -> UpgradePlan {
    let plan = plan::build(new, filters, Mode::Updating, 0);
    let placements = Placements::new(&plan);
    let mut old_applied: BTreeMap<&ObjectId, Vec<&Manifest>> = BTreeMap::new();
    for m in old.manifests.iter().filter(|m| !m.is_delete()) {
        old_applied.entry(&m.id).or_default().push(m);
    }
    let mut entries = Vec::new();
    for t in &plan.tasks {
        let id = &t.manifest.id;
        let olds = old_applied.get(id).map(Vec::as_slice).unwrap_or_default();
        let matched = counterpart(olds, &t.manifest);
        let mut not_rolled_out = Vec::new();
        let change = if t.action == Action::Delete {
            Change::Deleted
        } else {
            match matched {
                None => Change::Created,
                Some(o) if same_content(&o.object, &t.manifest.object) => Change::Unchanged,
                Some(_) if t.action == Action::Wait => Change::Updated,
                Some(o) => {
                    let (written, kept) = cvo_writes(o, t);
                    not_rolled_out = kept;
                    if written {
                        Change::Updated
                    } else {
                        Change::Unchanged
                    }
                }
            }
        };
        let old_doc =
            matched.or_else(|| old.manifests.iter().find(|m| &m.id == id && m.is_delete()));
        entries.push(Entry {
            change,
            id: id.clone(),
            placement: Some(placements.of(&plan, t.id)),
            old: old_doc.cloned(),
            not_rolled_out,
        });
    }
    let in_new: BTreeSet<&ObjectId> = plan.tasks.iter().map(|t| &t.manifest.id).collect();
    let mut seen: BTreeSet<&ObjectId> = BTreeSet::new();
    for m in &old.manifests {
        if in_new.contains(&m.id) || !seen.insert(&m.id) {
            continue;
        }
        let applied = old_applied.get(&m.id).and_then(|v| v.first().copied());
        let (change, doc) = match applied {
            Some(a) => (Change::Orphaned, a),
            None => (Change::TombstoneDropped, m),
        };
        entries.push(Entry {
            change,
            id: m.id.clone(),
            placement: None,
            old: Some(doc.clone()),
            not_rolled_out: Vec::new(),
        });
    }
    UpgradePlan {
        old_root: old.root.display().to_string(),
        new_root: new.root.display().to_string(),
        old_version: old.version(),
        plan,
        entries,
    }
}

#[cfg(test)]
mod tests;
